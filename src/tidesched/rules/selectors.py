"""Kubernetes label selectors, node-selector requirements and affinity-term namespaces.

Everything here works on raw manifest fragments (plain dicts/lists as loaded from YAML).

Semantics (verified against kube-scheduler / apimachinery):

* ``metav1.LabelSelector`` (pod (anti-)affinity ``labelSelector``, ``namespaceSelector``,
  topology-spread selectors): a *nil* selector (``None`` / key absent) matches **nothing**;
  an *empty* selector (no ``matchLabels`` and no ``matchExpressions``) matches **everything**.
  We apply this rule everywhere a ``LabelSelector`` appears; :func:`match_label_selector`
  implements it.
* ``matchLabels`` entries are equality requirements (label present and equal).
  ``matchExpressions`` support ``In``/``NotIn``/``Exists``/``DoesNotExist`` (no Gt/Lt in a
  ``LabelSelector``).  ``NotIn`` matches objects that lack the key.
* ``NodeSelectorRequirement`` (node affinity) additionally supports ``Gt``/``Lt``: exactly one
  value that must parse as a base-10 int64 (Go ``strconv.ParseInt`` rules: optional sign,
  digits only); an object whose label is absent or not an integer does not match.

Malformed fragments raise :class:`SelectorError` (a ``ValueError``) with a message naming the
offending field; nothing else escapes.  ``validate_*`` helpers return the list of problems
instead of raising.  Label key/value *syntax* (DNS-subdomain prefixes, 63-char names) is only
reported by the ``validate_*`` helpers; matching does not enforce it, since the API server has
already validated real objects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LABEL_SELECTOR_OPERATORS",
    "NODE_FIELD_OPERATORS",
    "NODE_NAME_FIELD",
    "NODE_SELECTOR_OPERATORS",
    "CompiledLabelSelector",
    "NodeRequirement",
    "SelectorError",
    "affinity_term_namespaces",
    "compile_label_selector",
    "is_empty_node_selector_term",
    "label_str",
    "match_label_selector",
    "parse_field_requirement",
    "parse_go_int64",
    "parse_node_requirement",
    "term_matches_pod",
    "term_namespaces_match",
    "validate_label_selector",
    "validate_node_affinity",
    "validate_node_selector_requirement",
    "validate_node_selector_term",
]


class SelectorError(ValueError):
    """A selector / requirement / taint fragment is malformed; the message names the field."""


LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
NODE_FIELD_OPERATORS = ("In", "NotIn")
# The only node field kube-apiserver accepts in matchFields.
NODE_NAME_FIELD = "metadata.name"

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_GO_INT_RE = re.compile(r"[+-]?[0-9]+\Z")

_LABEL_NAME_RE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?\Z")
_DNS_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


def parse_go_int64(text: Any) -> int | None:
    """Parse like Go's ``strconv.ParseInt(s, 10, 64)``; ``None`` when it would fail.

    Python's ``int()`` is more lenient (whitespace, underscores), hence the regex.
    """
    if not isinstance(text, str) or not _GO_INT_RE.match(text):
        return None
    value = int(text)
    if value < _INT64_MIN or value > _INT64_MAX:
        return None
    return value


def label_str(value: Any) -> str:
    """Coerce a label/taint value from a YAML load to the string Kubernetes would see.

    Real label values are strings; an unquoted YAML ``true``/``4`` arrives as bool/int.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


# --------------------------------------------------------------------------------------------
# metav1.LabelSelector
# --------------------------------------------------------------------------------------------


def _values_list(req: Mapping[str, Any], where: str) -> list[str]:
    values = req.get("values")
    if values is None:
        return []
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise SelectorError(f"{where}.values: must be a list of strings, got {type(values).__name__}")
    return [label_str(v) for v in values]


def _require_mapping(obj: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise SelectorError(f"{where}: must be a mapping, got {type(obj).__name__}")
    return obj


def _require_list(obj: Any, where: str) -> Sequence[Any]:
    if obj is None:
        return ()
    if isinstance(obj, (str, bytes, Mapping)) or not isinstance(obj, Sequence):
        raise SelectorError(f"{where}: must be a list, got {type(obj).__name__}")
    return obj


def _require_key(req: Mapping[str, Any], where: str) -> str:
    key = req.get("key")
    if not isinstance(key, str) or key == "":
        raise SelectorError(f"{where}.key: must be a non-empty string")
    return key


@dataclass(frozen=True, slots=True)
class CompiledLabelSelector:
    """A parsed ``metav1.LabelSelector``; ``matches`` is cheap enough for per-pod loops.

    ``nothing``/``everything`` encode the nil / empty selector cases.
    """

    requirements: tuple[tuple[str, str, frozenset[str]], ...]
    nothing: bool = False
    everything: bool = False

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        if self.everything:
            return True
        labels = labels or {}
        for key, op, values in self.requirements:
            present = key in labels
            if op == "In":
                if not present or label_str(labels[key]) not in values:
                    return False
            elif op == "NotIn":
                if present and label_str(labels[key]) in values:
                    return False
            elif op == "Exists":
                if not present:
                    return False
            elif present:  # DoesNotExist
                return False
        return True


_NOTHING = CompiledLabelSelector((), nothing=True)
_EVERYTHING = CompiledLabelSelector((), everything=True)


def compile_label_selector(
    selector: Mapping[str, Any] | None, where: str = "labelSelector"
) -> CompiledLabelSelector:
    """Parse a ``metav1.LabelSelector``: ``None`` → matches nothing, ``{}`` → everything.

    Raises :class:`SelectorError` on malformed input (unknown operator, wrong value count).
    """
    if selector is None:
        return _NOTHING
    selector = _require_mapping(selector, where)
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise SelectorError(f"{where}.matchLabels: must be a mapping")
    exprs = _require_list(selector.get("matchExpressions"), f"{where}.matchExpressions")
    if not match_labels and not exprs:
        return _EVERYTHING
    reqs: list[tuple[str, str, frozenset[str]]] = []
    for k, v in match_labels.items():
        if not isinstance(k, str) or k == "":
            raise SelectorError(f"{where}.matchLabels: keys must be non-empty strings")
        reqs.append((k, "In", frozenset((label_str(v),))))
    for i, expr in enumerate(exprs):
        w = f"{where}.matchExpressions[{i}]"
        expr = _require_mapping(expr, w)
        key = _require_key(expr, w)
        op = expr.get("operator")
        values = _values_list(expr, w)
        if op in ("In", "NotIn"):
            if not values:
                raise SelectorError(f"{w}.values: must be non-empty for operator {op}")
        elif op in ("Exists", "DoesNotExist"):
            if values:
                raise SelectorError(f"{w}.values: must be empty for operator {op}")
        else:
            raise SelectorError(
                f"{w}.operator: {op!r} is not a valid label selector operator "
                f"(supported: {', '.join(LABEL_SELECTOR_OPERATORS)})"
            )
        reqs.append((key, op, frozenset(values)))
    return CompiledLabelSelector(tuple(reqs))


def match_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Whether ``labels`` satisfy a ``metav1.LabelSelector`` (nil → False, empty → True)."""
    return compile_label_selector(selector).matches(labels)


def _label_key_problems(key: Any, where: str) -> list[str]:
    if not isinstance(key, str) or key == "":
        return [f"{where}: must be a non-empty string"]
    problems: list[str] = []
    prefix, _, name = key.rpartition("/")
    if "/" in key:
        if not prefix:
            problems.append(f"{where}: prefix before '/' must be non-empty")
        elif len(prefix) > 253 or not all(_DNS_LABEL_RE.match(p) for p in prefix.split(".")):
            problems.append(f"{where}: prefix {prefix!r} must be a DNS subdomain")
    if not name or len(name) > 63 or not _LABEL_NAME_RE.match(name):
        problems.append(f"{where}: name part {name!r} must be 1-63 alphanumerics, '-', '_' or '.'")
    return problems


def _label_value_problems(value: Any, where: str) -> list[str]:
    if not isinstance(value, str):
        return [f"{where}: must be a string, got {type(value).__name__}"]
    if len(value) > 63 or not _LABEL_NAME_RE.match(value):
        return [f"{where}: {value!r} is not a valid label value"]
    return []


def validate_label_selector(sel: Any, where: str = "labelSelector") -> list[str]:
    """All problems in a ``metav1.LabelSelector`` (empty list = valid).  ``None`` is valid."""
    if sel is None:
        return []
    if not isinstance(sel, Mapping):
        return [f"{where}: must be a mapping, got {type(sel).__name__}"]
    problems: list[str] = []
    unknown = set(sel) - {"matchLabels", "matchExpressions"}
    if unknown:
        problems.append(f"{where}: unknown field(s) {sorted(unknown)}")
    ml = sel.get("matchLabels")
    if ml is not None:
        if not isinstance(ml, Mapping):
            problems.append(f"{where}.matchLabels: must be a mapping")
        else:
            for k, v in ml.items():
                problems += _label_key_problems(k, f"{where}.matchLabels key")
                problems += _label_value_problems(v, f"{where}.matchLabels[{k}]")
    exprs = sel.get("matchExpressions")
    if exprs is not None:
        if isinstance(exprs, (str, bytes, Mapping)) or not isinstance(exprs, Sequence):
            problems.append(f"{where}.matchExpressions: must be a list")
            return problems
        for i, expr in enumerate(exprs):
            w = f"{where}.matchExpressions[{i}]"
            if not isinstance(expr, Mapping):
                problems.append(f"{w}: must be a mapping")
                continue
            problems += _label_key_problems(expr.get("key"), f"{w}.key")
            op = expr.get("operator")
            values = expr.get("values")
            if values is not None and (isinstance(values, (str, bytes)) or not isinstance(values, Sequence)):
                problems.append(f"{w}.values: must be a list of strings")
                values = None
            n = len(values or ())
            if op in ("In", "NotIn"):
                if n == 0:
                    problems.append(f"{w}.values: must be non-empty for operator {op}")
            elif op in ("Exists", "DoesNotExist"):
                if n:
                    problems.append(f"{w}.values: must be empty for operator {op}")
            else:
                problems.append(
                    f"{w}.operator: {op!r} is not valid (supported: {', '.join(LABEL_SELECTOR_OPERATORS)})"
                )
            for j, v in enumerate(values or ()):
                problems += _label_value_problems(v, f"{w}.values[{j}]")
    return problems


# --------------------------------------------------------------------------------------------
# v1.NodeSelectorRequirement / NodeSelectorTerm
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeRequirement:
    """A parsed NodeSelectorRequirement.  ``number`` is set for Gt/Lt."""

    key: str
    operator: str
    values: tuple[str, ...]
    number: int | None = None


def parse_node_requirement(req: Any, where: str = "matchExpressions[]") -> NodeRequirement:
    """Parse a node-affinity ``matchExpressions`` entry or raise :class:`SelectorError`."""
    req = _require_mapping(req, where)
    key = _require_key(req, where)
    op = req.get("operator")
    values = _values_list(req, where)
    if op in ("In", "NotIn"):
        if not values:
            raise SelectorError(f"{where}.values: must be non-empty for operator {op}")
        return NodeRequirement(key, op, tuple(values))
    if op in ("Exists", "DoesNotExist"):
        if values:
            raise SelectorError(f"{where}.values: must be empty for operator {op}")
        return NodeRequirement(key, op, ())
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            raise SelectorError(f"{where}.values: operator {op} needs exactly one value, got {len(values)}")
        number = parse_go_int64(values[0])
        if number is None:
            raise SelectorError(f"{where}.values[0]: {values[0]!r} is not an int64 (operator {op})")
        return NodeRequirement(key, op, tuple(values), number)
    raise SelectorError(
        f"{where}.operator: {op!r} is not a valid node selector operator "
        f"(supported: {', '.join(NODE_SELECTOR_OPERATORS)})"
    )


def parse_field_requirement(req: Any, where: str = "matchFields[]") -> NodeRequirement:
    """Parse a ``matchFields`` entry: key ``metadata.name``, In/NotIn, exactly one value."""
    req = _require_mapping(req, where)
    key = req.get("key")
    if key != NODE_NAME_FIELD:
        raise SelectorError(f"{where}.key: {key!r} is not a supported node field (only {NODE_NAME_FIELD!r})")
    op = req.get("operator")
    if op not in NODE_FIELD_OPERATORS:
        raise SelectorError(f"{where}.operator: {op!r} is not valid for matchFields (supported: In, NotIn)")
    values = _values_list(req, where)
    if len(values) != 1:
        raise SelectorError(f"{where}.values: matchFields needs exactly one value, got {len(values)}")
    return NodeRequirement(NODE_NAME_FIELD, op, tuple(values))


def is_empty_node_selector_term(term: Any) -> bool:
    """A term with neither matchExpressions nor matchFields (matches no node in k8s)."""
    if term is None:
        return True
    if not isinstance(term, Mapping):
        return False  # malformed, reported by the parser
    return not term.get("matchExpressions") and not term.get("matchFields")


def validate_node_selector_requirement(req: Any, where: str = "matchExpressions[]") -> list[str]:
    try:
        parsed = parse_node_requirement(req, where)
    except SelectorError as exc:
        return [str(exc)]
    problems = _label_key_problems(parsed.key, f"{where}.key")
    return problems


def validate_node_selector_term(term: Any, where: str = "nodeSelectorTerms[]") -> list[str]:
    if term is None:
        return []
    if not isinstance(term, Mapping):
        return [f"{where}: must be a mapping, got {type(term).__name__}"]
    problems: list[str] = []
    for field, parser in (
        ("matchExpressions", parse_node_requirement),
        ("matchFields", parse_field_requirement),
    ):
        try:
            items = _require_list(term.get(field), f"{where}.{field}")
        except SelectorError as exc:
            problems.append(str(exc))
            continue
        for i, req in enumerate(items):
            w = f"{where}.{field}[{i}]"
            if field == "matchExpressions":
                problems += validate_node_selector_requirement(req, w)
            else:
                try:
                    parser(req, w)
                except SelectorError as exc:
                    problems.append(str(exc))
    return problems


def validate_node_affinity(node_affinity: Any, where: str = "affinity.nodeAffinity") -> list[str]:
    """Problems in a ``nodeAffinity`` fragment (required and preferred parts)."""
    if node_affinity is None:
        return []
    if not isinstance(node_affinity, Mapping):
        return [f"{where}: must be a mapping"]
    problems: list[str] = []
    req = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        w = f"{where}.requiredDuringSchedulingIgnoredDuringExecution"
        if not isinstance(req, Mapping):
            problems.append(f"{w}: must be a mapping")
        else:
            terms = req.get("nodeSelectorTerms")
            if isinstance(terms, (str, bytes, Mapping)) or not isinstance(terms, Sequence) or not terms:
                problems.append(f"{w}.nodeSelectorTerms: must be a non-empty list")
            else:
                for i, t in enumerate(terms):
                    problems += validate_node_selector_term(t, f"{w}.nodeSelectorTerms[{i}]")
    pref = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    if pref is not None:
        w = f"{where}.preferredDuringSchedulingIgnoredDuringExecution"
        if isinstance(pref, (str, bytes, Mapping)) or not isinstance(pref, Sequence):
            problems.append(f"{w}: must be a list")
        else:
            for i, p in enumerate(pref):
                pw = f"{w}[{i}]"
                if not isinstance(p, Mapping):
                    problems.append(f"{pw}: must be a mapping")
                    continue
                weight = p.get("weight")
                if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
                    problems.append(f"{pw}.weight: must be an integer in 1..100, got {weight!r}")
                problems += validate_node_selector_term(p.get("preference"), f"{pw}.preference")
    return problems


# --------------------------------------------------------------------------------------------
# Pod (anti-)affinity term namespaces
# --------------------------------------------------------------------------------------------


def affinity_term_namespaces(term: Mapping[str, Any], pod_namespace: str) -> frozenset[str]:
    """The explicit namespace set of a PodAffinityTerm owned by a pod in ``pod_namespace``.

    k8s rule: when ``namespaces`` is empty *and* ``namespaceSelector`` is nil, the term applies
    to the owner's namespace only; otherwise it is exactly the listed namespaces (possibly
    none, in which case only the ``namespaceSelector`` can match).
    """
    names = _require_list(term.get("namespaces"), "namespaces")
    if not names and term.get("namespaceSelector") is None:
        return frozenset((pod_namespace,))
    return frozenset(label_str(n) for n in names)


def term_namespaces_match(
    term: Mapping[str, Any],
    pod_namespace: str,
    other_namespace: str,
    namespace_labels: Mapping[str, str] | None = None,
) -> bool:
    """Whether a PodAffinityTerm owned by a pod in ``pod_namespace`` covers ``other_namespace``.

    Covered when ``other_namespace`` is in :func:`affinity_term_namespaces` **or** the term's
    ``namespaceSelector`` matches ``namespace_labels`` (the labels of ``other_namespace``;
    ``None`` is treated as no labels).  ``namespaceSelector: {}`` covers every namespace;
    a nil selector covers none by itself.
    """
    term = _require_mapping(term, "podAffinityTerm")
    if other_namespace in affinity_term_namespaces(term, pod_namespace):
        return True
    ns_sel = compile_label_selector(term.get("namespaceSelector"), "namespaceSelector")
    return ns_sel.matches(namespace_labels or {})


def term_matches_pod(
    term: Mapping[str, Any],
    pod_namespace: str,
    other_namespace: str,
    other_labels: Mapping[str, str] | None,
    namespace_labels: Mapping[str, str] | None = None,
) -> bool:
    """Namespace check and ``labelSelector`` (nil → no pod) for one candidate pod."""
    if not term_namespaces_match(term, pod_namespace, other_namespace, namespace_labels):
        return False
    return compile_label_selector(term.get("labelSelector")).matches(other_labels)
