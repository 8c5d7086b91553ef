"""How a HyperNode's member selector picks nodes (Volcano ``api.GetMembers``).

A selector has exactly one of: ``exactMatch`` (a node name), ``regexMatch`` (a pattern searched
in node names, Go's ``regexp.MatchString``: unanchored) or ``labelMatch`` (a label selector over
node labels; an empty one matches nothing, unlike a pod selector's). Go's regexp is RE2:
Python's ``re`` reads the same syntax for what RE2 accepts, and the constructs RE2 refuses
(look-around, back-references, atomic groups, conditionals) are refused here too, so a pattern
that Volcano cannot compile selects no node here either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidesched.rules.selectors import CompiledLabelSelector, SelectorError, compile_label_selector

EXACT, REGEX, LABEL = "exactMatch", "regexMatch", "labelMatch"

# RE2 has no look-around, back-references, atomic groups, possessive quantifiers or conditionals.
_NOT_RE2 = re.compile(r"\(\?(?:[=!]|<[=!]|>|\()|\\[1-9]|[*+?}]\+")


class PatternError(ValueError):
    pass


def compile_go_regexp(pattern: str) -> re.Pattern[str]:
    """The pattern as Go's ``regexp.Compile`` would take it, or PatternError saying why not."""
    bad = _NOT_RE2.search(pattern)
    if bad:
        raise PatternError(f"{bad.group(0)!r} is not supported by Go's regexp (RE2)")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise PatternError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class MemberSelector:
    """One member's selector, compiled. ``error``: why it selects nothing (a bad pattern or
    label selector), for the Warning the tree reports; the HyperNode itself stays."""

    how: str  # EXACT | REGEX | LABEL
    text: str  # the name, the pattern, or the label selector as given (for messages)
    regex: re.Pattern[str] | None = None
    labels: CompiledLabelSelector | None = None
    error: str = ""

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.error:
            return False
        if self.how == EXACT:
            return name == self.text
        if self.how == REGEX:
            assert self.regex is not None
            return self.regex.search(name) is not None
        assert self.labels is not None
        return self.labels.matches(labels)

    @property
    def reads_labels(self) -> bool:
        return self.how == LABEL


def compile_member_selector(how: str, raw: Any, where: str) -> MemberSelector:
    """``raw`` is the value under ``how`` (validated for shape by the caller)."""
    if how == EXACT:
        return MemberSelector(EXACT, str(raw.get("name") or ""))
    if how == REGEX:
        pattern = str(raw.get("pattern") or "")
        try:
            return MemberSelector(REGEX, pattern, regex=compile_go_regexp(pattern))
        except PatternError as exc:
            return MemberSelector(REGEX, pattern, error=f"{where}.regexMatch.pattern {pattern!r}: {exc}")
    text = repr(dict(raw))
    if not raw.get("matchLabels") and not raw.get("matchExpressions"):
        # Volcano: an empty labelMatch selects no node (not every node).
        return MemberSelector(LABEL, text, error=f"{where}.labelMatch is empty and selects no node")
    try:
        return MemberSelector(LABEL, text, labels=compile_label_selector(raw, f"{where}.labelMatch"))
    except SelectorError as exc:
        return MemberSelector(LABEL, text, error=str(exc))
