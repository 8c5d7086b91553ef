"""Vectorised node-label matching: NodeAffinity filter/score and topology codes over all nodes.

:class:`NodeLabelIndex` is built once per session from the node names and label maps (in the
scheduler's fixed node order).  For every label key that is actually queried it lazily builds
an ``int32`` code array over nodes (``-1`` = label absent) plus the code→value table, so each
requirement becomes a table lookup / comparison on that array instead of a per-node loop.
Gt/Lt parse each *distinct* label value once.

Semantics follow kube-scheduler's NodeAffinity plugin (component-helpers ``nodeaffinity``):

* ``nodeSelector`` (``pod.spec.nodeSelector``): every key must be present with an equal value;
  ``None``/``{}`` matches all nodes.
* required node affinity: OR over ``nodeSelectorTerms``; a term is the AND of its
  ``matchExpressions`` and ``matchFields``; an *empty* term (neither list) matches no node; a
  ``nodeSelectorTerms`` list that is empty/absent matches no node.  A malformed term matches no
  node while the other terms still count (kube-scheduler ignores these parse errors in Filter);
  pass ``errors=[]`` to collect the messages.
* ``matchFields`` only supports ``metadata.name`` with In/NotIn and exactly one value.
* preferred node affinity: per node, the sum of ``weight`` over matching terms; terms with weight
  0 or an empty preference are skipped; a malformed term raises :class:`SelectorError` (kube-
  scheduler fails the PreScore in that case).

Structurally malformed input (non-mapping fragments, unknown operators in direct calls, Gt with
two values, ...) raises :class:`~tidesched.rules.selectors.SelectorError` and nothing else.
Every returned mask/score array is a fresh array the caller may modify, except
:meth:`NodeLabelIndex.topology_codes` which returns a read-only view.
The index assumes labels do not change after construction; rebuild it when they do.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from .selectors import (
    NodeRequirement,
    SelectorError,
    compile_label_selector,
    is_empty_node_selector_term,
    label_str,
    parse_field_requirement,
    parse_go_int64,
    parse_node_requirement,
)

__all__ = ["NodeLabelIndex", "SelectorError"]

_CACHE_LIMIT = 8192


class _Column:
    """Codes of one label key over all nodes; built on first use."""

    __slots__ = ("_ints", "codes", "value_to_code", "values")

    def __init__(self, codes: np.ndarray, values: list[str], value_to_code: dict[str, int]) -> None:
        self.codes = codes
        self.values = values
        self.value_to_code = value_to_code
        self._ints: tuple[np.ndarray, np.ndarray] | None = None

    def lookup_table(self, wanted: Sequence[str]) -> np.ndarray | None:
        """Bool table over codes (+1 trailing slot for "absent"), or None if no value occurs."""
        hits = [self.value_to_code[v] for v in wanted if v in self.value_to_code]
        if not hits:
            return None
        table = np.zeros(len(self.values) + 1, dtype=bool)
        table[hits] = True
        return table

    def int_table(self) -> tuple[np.ndarray, np.ndarray]:
        """(parse-ok, value) per code, each with a trailing "absent" slot that is not ok."""
        if self._ints is None:
            k = len(self.values)
            ok = np.zeros(k + 1, dtype=bool)
            ints = np.zeros(k + 1, dtype=np.int64)
            for code, text in enumerate(self.values):
                parsed = parse_go_int64(text)
                if parsed is not None:
                    ok[code] = True
                    ints[code] = parsed
            self._ints = (ok, ints)
        return self._ints


def _freeze(obj: Any) -> Hashable:
    """Hashable canonical form of a JSON-like fragment (for the mask cache)."""
    if isinstance(obj, Mapping):
        return ("M", tuple(sorted((str(k), _freeze(v)) for k, v in obj.items())))
    if isinstance(obj, (list, tuple)):
        return ("L", tuple(_freeze(v) for v in obj))
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return (type(obj).__name__, obj)
    raise TypeError("unhashable fragment")


class NodeLabelIndex:
    """Label columns over a fixed node order; all queries return arrays over those nodes."""

    def __init__(self, names: Sequence[str], labels: Sequence[Mapping[str, str] | None]) -> None:
        if len(names) != len(labels):
            raise ValueError(f"names ({len(names)}) and labels ({len(labels)}) differ in length")
        self._names: tuple[str, ...] = tuple(names)
        self._labels: list[Mapping[str, str]] = [lab or {} for lab in labels]
        self._n = len(self._names)
        # duplicate node names are a caller bug but must not crash: keep every index
        self._name_to_indices: dict[str, list[int]] = {}
        for i, name in enumerate(self._names):
            self._name_to_indices.setdefault(name, []).append(i)
        self._columns: dict[str, _Column] = {}
        self._cache: dict[Hashable, Any] = {}

    # ---------------------------------------------------------------- basics

    def __len__(self) -> int:
        return self._n

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def index_of(self, name: str) -> int | None:
        hits = self._name_to_indices.get(name)
        return hits[0] if hits else None

    def _column(self, key: str) -> _Column:
        col = self._columns.get(key)
        if col is None:
            codes = np.full(self._n, -1, dtype=np.int32)
            values: list[str] = []
            v2c: dict[str, int] = {}
            for i, lab in enumerate(self._labels):
                if key in lab:
                    v = label_str(lab[key])
                    c = v2c.get(v)
                    if c is None:
                        c = len(values)
                        v2c[v] = c
                        values.append(v)
                    codes[i] = c
            col = _Column(codes, values, v2c)
            self._columns[key] = col
        return col

    def _all(self, value: bool) -> np.ndarray:
        return np.full(self._n, value, dtype=bool)

    # ---------------------------------------------------------------- topology

    def topology_codes(self, key: str) -> np.ndarray:
        """Per node the code of label ``key`` (0..K-1, -1 = absent).  Read-only view.

        Codes are dense per key, so ``np.bincount(codes[codes >= 0])`` aggregates per domain.
        A label with the empty string as value is present (k8s checks key existence).
        """
        view = self._column(key).codes.view()
        view.flags.writeable = False
        return view

    def topology_values(self, key: str) -> list[str]:
        """Label value for each code of :meth:`topology_codes`."""
        return list(self._column(key).values)

    def value_code(self, key: str, value: str) -> int:
        """Code of ``value`` under ``key`` or -1 when no node carries it."""
        return self._column(key).value_to_code.get(value, -1)

    # ---------------------------------------------------------------- requirements

    def _requirement_mask(self, r: NodeRequirement) -> np.ndarray:
        col = self._column(r.key)
        op = r.operator
        if op in ("In", "NotIn"):
            table = col.lookup_table(r.values)
            if table is None:
                hit = self._all(False)
            else:
                hit = table[col.codes]  # code -1 reads the trailing False slot
            return ~hit if op == "NotIn" else hit
        if op == "Exists":
            return col.codes >= 0
        if op == "DoesNotExist":
            return col.codes < 0
        ok, ints = col.int_table()
        assert r.number is not None
        node_ok = ok[col.codes]
        node_val = ints[col.codes]
        if op == "Gt":
            return node_ok & (node_val > r.number)
        return node_ok & (node_val < r.number)

    def requirement_mask(self, req: Mapping[str, Any]) -> np.ndarray:
        """Mask of nodes satisfying one NodeSelectorRequirement (``matchExpressions`` entry).

        NotIn and DoesNotExist match nodes without the key; Gt/Lt need the node's value to
        parse as an int64, otherwise the node does not match.
        """
        return self._requirement_mask(parse_node_requirement(req, "matchExpressions[]"))

    def _field_mask(self, r: NodeRequirement) -> np.ndarray:
        hits = self._name_to_indices.get(r.values[0], [])
        if r.operator == "In":
            mask = self._all(False)
            mask[hits] = True
        else:
            mask = self._all(True)
            mask[hits] = False
        return mask

    def field_requirement_mask(self, req: Mapping[str, Any]) -> np.ndarray:
        """Mask for a ``matchFields`` entry (``metadata.name`` In/NotIn one value)."""
        return self._field_mask(parse_field_requirement(req, "matchFields[]"))

    def term_mask(self, term: Mapping[str, Any] | None, where: str = "nodeSelectorTerm") -> np.ndarray:
        """AND of a NodeSelectorTerm's matchExpressions and matchFields; empty term → no node."""
        if is_empty_node_selector_term(term):
            return self._all(False)
        if not isinstance(term, Mapping):
            raise SelectorError(f"{where}: must be a mapping, got {type(term).__name__}")
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        for name, items in (("matchExpressions", exprs), ("matchFields", fields)):
            if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
                raise SelectorError(f"{where}.{name}: must be a list")
        # parse everything first so a malformed entry fails the term before any numpy work
        reqs = [parse_node_requirement(r, f"{where}.matchExpressions[{i}]") for i, r in enumerate(exprs)]
        freqs = [parse_field_requirement(r, f"{where}.matchFields[{i}]") for i, r in enumerate(fields)]
        mask = self._all(True)
        for r in reqs:
            mask &= self._requirement_mask(r)
        for r in freqs:
            mask &= self._field_mask(r)
        return mask

    def node_selector_mask(self, node_selector: Mapping[str, str] | None) -> np.ndarray:
        """``pod.spec.nodeSelector``: all pairs must match exactly; None/{} → all nodes."""
        if node_selector is None:
            return self._all(True)
        if not isinstance(node_selector, Mapping):
            raise SelectorError(f"nodeSelector: must be a mapping, got {type(node_selector).__name__}")
        mask = self._all(True)
        for key, value in node_selector.items():
            if not isinstance(key, str):
                raise SelectorError(f"nodeSelector: key {key!r} must be a string")
            col = self._column(key)
            code = col.value_to_code.get(label_str(value))
            if code is None:
                return self._all(False)
            mask &= col.codes == code
        return mask

    def required_affinity_mask(
        self, node_affinity: Mapping[str, Any] | None, errors: list[str] | None = None
    ) -> np.ndarray:
        """``nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`` (OR of terms).

        ``node_affinity`` is the ``affinity.nodeAffinity`` fragment.  No node affinity or no
        required part → all nodes.  Malformed terms match nothing; their messages are appended
        to ``errors`` when given (kube-scheduler's Filter ignores them the same way).
        """
        if node_affinity is None:
            return self._all(True)
        if not isinstance(node_affinity, Mapping):
            raise SelectorError(
                f"affinity.nodeAffinity: must be a mapping, got {type(node_affinity).__name__}"
            )
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is None:
            return self._all(True)
        where = "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        if not isinstance(required, Mapping):
            raise SelectorError(f"{where}: must be a mapping")
        terms = required.get("nodeSelectorTerms") or []
        if isinstance(terms, (str, bytes, Mapping)) or not isinstance(terms, Sequence):
            raise SelectorError(f"{where}.nodeSelectorTerms: must be a list")
        mask = self._all(False)
        for i, term in enumerate(terms):
            if is_empty_node_selector_term(term):
                continue
            try:
                mask |= self.term_mask(term, f"{where}.nodeSelectorTerms[{i}]")
            except SelectorError as exc:
                if errors is not None:
                    errors.append(str(exc))
        return mask

    def pod_node_mask(
        self, pod_spec_fragment: Mapping[str, Any] | None, errors: list[str] | None = None
    ) -> np.ndarray:
        """The NodeAffinity filter: ``nodeSelector`` AND required node affinity.

        Accepts a pod ``spec`` fragment (keys ``nodeSelector`` / ``affinity``); a whole pod
        (with a ``spec`` key) is accepted too.  ``spec.nodeName`` is not considered here.
        Results are cached per distinct fragment (gang members share specs).
        """
        if pod_spec_fragment is None:
            return self._all(True)
        if not isinstance(pod_spec_fragment, Mapping):
            raise SelectorError(f"pod spec: must be a mapping, got {type(pod_spec_fragment).__name__}")
        spec = pod_spec_fragment
        if (
            "spec" in spec
            and isinstance(spec["spec"], Mapping)
            and "nodeSelector" not in spec
            and "affinity" not in spec
        ):
            spec = spec["spec"]
        node_selector = spec.get("nodeSelector")
        affinity = spec.get("affinity")
        try:
            key: Hashable | None = ("pod", _freeze(node_selector), _freeze(affinity))
        except TypeError:
            key = None
        if key is not None and key in self._cache:
            mask, errs = self._cache[key]
            if errors is not None:
                errors.extend(errs)
            return mask.copy()
        if affinity is not None and not isinstance(affinity, Mapping):
            raise SelectorError(f"affinity: must be a mapping, got {type(affinity).__name__}")
        local_errors: list[str] = []
        mask = self.node_selector_mask(node_selector if node_selector else None)
        mask &= self.required_affinity_mask((affinity or {}).get("nodeAffinity"), local_errors)
        if key is not None:
            self._remember(key, (mask.copy(), tuple(local_errors)))
        if errors is not None:
            errors.extend(local_errors)
        return mask

    def preferred_affinity_scores(self, preferred_terms: Sequence[Mapping[str, Any]] | None) -> np.ndarray:
        """Raw NodeAffinity score per node: sum of weights of matching preferred terms (int64).

        ``preferred_terms`` is ``nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution``.
        Not normalised: see :mod:`tidesched.rules.scoring` for how Volcano / kube-scheduler use it.
        """
        if not preferred_terms:
            return np.zeros(self._n, dtype=np.int64)
        where = "nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        if isinstance(preferred_terms, (str, bytes, Mapping)) or not isinstance(preferred_terms, Sequence):
            raise SelectorError(f"{where}: must be a list")
        try:
            key: Hashable | None = ("pref", _freeze(preferred_terms))
        except TypeError:
            key = None
        if key is not None and key in self._cache:
            return self._cache[key].copy()
        scores = np.zeros(self._n, dtype=np.int64)
        for i, item in enumerate(preferred_terms):
            w = f"{where}[{i}]"
            if not isinstance(item, Mapping):
                raise SelectorError(f"{w}: must be a mapping")
            weight = item.get("weight", 0)
            if isinstance(weight, bool) or not isinstance(weight, int):
                raise SelectorError(f"{w}.weight: must be an integer, got {weight!r}")
            pref = item.get("preference")
            if weight == 0 or is_empty_node_selector_term(pref):
                continue
            scores += weight * self.term_mask(pref, f"{w}.preference")
        if key is not None:
            self._remember(key, scores.copy())
        return scores

    def label_selector_mask(self, selector: Mapping[str, Any] | None) -> np.ndarray:
        """``metav1.LabelSelector`` over the indexed objects (nil → none, {} → all).

        Handy when the index holds pods or namespaces (pod affinity, namespaceSelector).
        """
        compiled = compile_label_selector(selector)
        if compiled.nothing:
            return self._all(False)
        mask = self._all(True)
        for k, op, values in compiled.requirements:
            mask &= self._requirement_mask(NodeRequirement(k, op, tuple(values)))
        return mask

    def _remember(self, key: Hashable, value: Any) -> None:
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = value
