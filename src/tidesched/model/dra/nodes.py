"""Which nodes a DRA ResourceSlice, device or allocation reaches: ``nodeName``, ``allNodes`` or
a ``v1.NodeSelector`` (terms ORed, requirements within a term ANDed), as
``k8s.io/component-helpers/scheduling/corev1/nodeaffinity`` matches them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tidesched.model.problems import ObjectError
from tidesched.rules.selectors import (
    NodeRequirement,
    SelectorError,
    parse_field_requirement,
    parse_go_int64,
    parse_node_requirement,
)


@dataclass(frozen=True, slots=True)
class NodeSelector:
    terms: tuple[tuple[tuple[NodeRequirement, ...], tuple[NodeRequirement, ...]], ...]  # (expressions, fields)
    raw: Mapping[str, Any] = field(compare=False, hash=False)

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        for expressions, fields in self.terms:
            if not expressions and not fields:
                continue  # an empty term matches nothing
            if all(_match(r, labels.get(r.key), r.key in labels) for r in expressions) and all(
                _match(r, name, True) for r in fields
            ):
                return True
        return False


def _match(r: NodeRequirement, value: str | None, present: bool) -> bool:
    op = r.operator
    if op == "In":
        return present and value in r.values
    if op == "NotIn":
        return not present or value not in r.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    number = parse_go_int64(value) if present else None
    if number is None or r.number is None:
        return False
    return number > r.number if op == "Gt" else number < r.number


def parse_node_selector(raw: Any, where: str) -> NodeSelector:
    if not isinstance(raw, Mapping):
        raise ObjectError(where, "expected a node selector (nodeSelectorTerms)")
    terms = raw.get("nodeSelectorTerms")
    if not isinstance(terms, list):
        raise ObjectError(f"{where}.nodeSelectorTerms", "expected a list")
    parsed = []
    for i, term in enumerate(terms):
        at = f"{where}.nodeSelectorTerms[{i}]"
        if not isinstance(term, Mapping):
            raise ObjectError(at, "expected a mapping")
        try:
            exprs = tuple(parse_node_requirement(r, f"{at}.matchExpressions[{j}]")
                          for j, r in enumerate(term.get("matchExpressions") or ()))
            fields = tuple(parse_field_requirement(r, f"{at}.matchFields[{j}]")
                           for j, r in enumerate(term.get("matchFields") or ()))
        except SelectorError as exc:
            raise ObjectError(at, str(exc)) from None
        parsed.append((exprs, fields))
    return NodeSelector(tuple(parsed), raw)


@dataclass(frozen=True, slots=True)
class NodeReach:
    """Where something is usable: one node by name, every node, or the nodes a selector picks
    (``none`` when nothing says: kube-scheduler skips such slices)."""

    node_name: str = ""
    all_nodes: bool = False
    selector: NodeSelector | None = None

    @property
    def none(self) -> bool:
        return not self.node_name and not self.all_nodes and self.selector is None

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.node_name:
            return name == self.node_name
        if self.all_nodes:
            return True
        return self.selector is not None and self.selector.matches(name, labels)


def node_name_selector(name: str) -> dict[str, Any]:
    """The allocation node selector kube-scheduler writes for devices local to one node."""
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}]}
