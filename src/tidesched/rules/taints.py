"""Taints and tolerations: the TaintToleration filter / score inputs, vectorised over nodes.

Matching rules (``v1.Toleration.ToleratesTaint``):

* a non-empty toleration ``effect`` must equal the taint's effect; empty matches all effects;
* a non-empty toleration ``key`` must equal the taint's key; empty matches all keys (the API
  only allows that together with ``Exists``: "tolerate everything");
* operator ``""``/``Equal`` (the default) compares values, ``Exists`` ignores the value,
  ``Gt``/``Lt`` (newer kube, feature-gated) compare taint and toleration values as int64 and
  fail if either does not parse; any other operator tolerates nothing;
* ``tolerationSeconds`` only bounds eviction for NoExecute; it never affects scheduling.

The filter rejects a node when any ``NoSchedule`` or ``NoExecute`` taint is untolerated;
``PreferNoSchedule`` taints only feed the score (count of untolerated ones per node, later
reverse-normalised with :func:`tidesched.rules.scoring.default_normalize`).

:class:`TaintIndex` groups nodes by their distinct taint set, so each query costs one
evaluation per distinct set plus one gather over nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .selectors import SelectorError, label_str, parse_go_int64

__all__ = [
    "EFFECT_NO_EXECUTE",
    "EFFECT_NO_SCHEDULE",
    "EFFECT_PREFER_NO_SCHEDULE",
    "FILTER_EFFECTS",
    "TAINT_NODE_UNSCHEDULABLE",
    "SelectorError",
    "Taint",
    "TaintIndex",
    "Toleration",
    "count_intolerable_prefer_no_schedule",
    "find_untolerated",
    "parse_taint",
    "parse_toleration",
    "tolerates",
    "tolerates_unschedulable",
    "tolerations_tolerate",
]

EFFECT_NO_SCHEDULE = "NoSchedule"
EFFECT_PREFER_NO_SCHEDULE = "PreferNoSchedule"
EFFECT_NO_EXECUTE = "NoExecute"
TAINT_EFFECTS = (EFFECT_NO_SCHEDULE, EFFECT_PREFER_NO_SCHEDULE, EFFECT_NO_EXECUTE)
# Effects the TaintToleration *filter* enforces.
FILTER_EFFECTS: tuple[str, ...] = (EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE)
# Taint the NodeUnschedulable filter checks for nodes with spec.unschedulable=true.
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def to_dict(self) -> dict[str, str]:
        d = {"key": self.key, "effect": self.effect}
        if self.value:
            d["value"] = self.value
        return d


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = ""  # "" means Equal
    value: str = ""
    effect: str = ""


def parse_taint(obj: Any, where: str = "taint") -> Taint:
    """Taint from a manifest dict (or a :class:`Taint`).  Needs a key and a known effect."""
    if isinstance(obj, Taint):
        return obj
    if not isinstance(obj, Mapping):
        raise SelectorError(f"{where}: must be a mapping, got {type(obj).__name__}")
    key = obj.get("key")
    if not isinstance(key, str) or not key:
        raise SelectorError(f"{where}.key: must be a non-empty string")
    effect = obj.get("effect")
    if effect not in TAINT_EFFECTS:
        raise SelectorError(f"{where}.effect: {effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
    return Taint(key, label_str(obj.get("value")), effect)


def parse_toleration(obj: Any, where: str = "toleration") -> Toleration:
    """Toleration from a manifest dict (or a :class:`Toleration`); missing fields default to ""."""
    if isinstance(obj, Toleration):
        return obj
    if not isinstance(obj, Mapping):
        raise SelectorError(f"{where}: must be a mapping, got {type(obj).__name__}")
    key = obj.get("key") or ""
    if not isinstance(key, str):
        raise SelectorError(f"{where}.key: must be a string")
    op = obj.get("operator") or ""
    if not isinstance(op, str):
        raise SelectorError(f"{where}.operator: must be a string")
    effect = obj.get("effect") or ""
    if not isinstance(effect, str):
        raise SelectorError(f"{where}.effect: must be a string")
    return Toleration(key, op, label_str(obj.get("value")), effect)


def _parse_tolerations(tolerations: Iterable[Any] | None) -> tuple[Toleration, ...]:
    if tolerations is None:
        return ()
    if isinstance(tolerations, (str, bytes, Mapping)) or not isinstance(tolerations, Iterable):
        raise SelectorError("tolerations: must be a list")
    return tuple(parse_toleration(t, f"tolerations[{i}]") for i, t in enumerate(tolerations))


def _tolerates(t: Toleration, taint: Taint) -> bool:
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    op = t.operator
    if op in ("", "Equal"):
        return t.value == taint.value
    if op == "Exists":
        return True
    if op in ("Gt", "Lt"):
        tol_v = parse_go_int64(t.value)
        taint_v = parse_go_int64(taint.value)
        if tol_v is None or taint_v is None:
            return False
        return taint_v > tol_v if op == "Gt" else taint_v < tol_v
    return False


def tolerates(toleration: Mapping[str, Any] | Toleration, taint: Mapping[str, Any] | Taint) -> bool:
    """Whether one toleration tolerates one taint (see module docstring for the rules)."""
    return _tolerates(parse_toleration(toleration), parse_taint(taint))


def tolerations_tolerate(tolerations: Iterable[Any] | None, taint: Mapping[str, Any] | Taint) -> bool:
    """Whether any of ``tolerations`` tolerates ``taint``."""
    tt = parse_taint(taint)
    return any(_tolerates(t, tt) for t in _parse_tolerations(tolerations))


def _first_untolerated(
    taints: Sequence[Taint], tols: Sequence[Toleration], effects: Iterable[str] | None
) -> int | None:
    wanted = None if effects is None else frozenset(effects)
    for i, taint in enumerate(taints):
        if wanted is not None and taint.effect not in wanted:
            continue
        if not any(_tolerates(t, taint) for t in tols):
            return i
    return None


def find_untolerated(
    taints: Sequence[Any] | None,
    tolerations: Iterable[Any] | None,
    effects: Iterable[str] | None = FILTER_EFFECTS,
) -> Any | None:
    """First taint (as given) with an effect in ``effects`` that no toleration tolerates.

    ``effects=None`` considers every taint.  Returns ``None`` when all are tolerated.
    """
    parsed = [parse_taint(t, f"taints[{i}]") for i, t in enumerate(taints or ())]
    idx = _first_untolerated(parsed, _parse_tolerations(tolerations), effects)
    return None if idx is None else (taints or [])[idx]


def count_intolerable_prefer_no_schedule(
    taints: Sequence[Any] | None, tolerations: Iterable[Any] | None
) -> int:
    """Number of PreferNoSchedule taints no toleration tolerates (the raw TaintToleration score)."""
    tols = _parse_tolerations(tolerations)
    count = 0
    for i, t in enumerate(taints or ()):
        taint = parse_taint(t, f"taints[{i}]")
        if taint.effect == EFFECT_PREFER_NO_SCHEDULE and not any(_tolerates(x, taint) for x in tols):
            count += 1
    return count


def tolerates_unschedulable(tolerations: Iterable[Any] | None) -> bool:
    """Whether a pod may land on a ``spec.unschedulable`` node (NodeUnschedulable filter)."""
    return tolerations_tolerate(tolerations, Taint(TAINT_NODE_UNSCHEDULABLE, "", EFFECT_NO_SCHEDULE))


class TaintIndex:
    """Nodes grouped by distinct taint set; queries return arrays over the node order.

    ``taints_per_node[i]`` is node *i*'s ``spec.taints`` list (``None`` = no taints).  A
    malformed taint raises :class:`SelectorError` naming the node position, unless ``errors``
    is given: then the bad entry is dropped and its message appended.
    """

    def __init__(
        self, taints_per_node: Sequence[Sequence[Any] | None], errors: list[str] | None = None
    ) -> None:
        self._n = len(taints_per_node)
        set_ids = np.empty(self._n, dtype=np.int32)
        key_to_id: dict[tuple[Taint, ...], int] = {}
        self._sets: list[tuple[Taint, ...]] = []
        for i, raw in enumerate(taints_per_node):
            parsed: list[Taint] = []
            if raw:
                if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Sequence):
                    msg = f"nodes[{i}].spec.taints: must be a list"
                    if errors is None:
                        raise SelectorError(msg)
                    errors.append(msg)
                    raw = ()
                for j, t in enumerate(raw):
                    try:
                        parsed.append(parse_taint(t, f"nodes[{i}].spec.taints[{j}]"))
                    except SelectorError as exc:
                        if errors is None:
                            raise
                        errors.append(str(exc))
            # order does not matter for either query; duplicates are kept so counts stay exact
            key = tuple(sorted(parsed, key=lambda t: (t.key, t.value, t.effect)))
            sid = key_to_id.get(key)
            if sid is None:
                sid = len(self._sets)
                key_to_id[key] = sid
                self._sets.append(key)
            set_ids[i] = sid
        set_ids.flags.writeable = False
        self._set_ids = set_ids
        self._filter_cache: dict[tuple[Toleration, ...], np.ndarray] = {}
        self._prefer_cache: dict[tuple[Toleration, ...], np.ndarray] = {}

    def __len__(self) -> int:
        return self._n

    @property
    def set_ids(self) -> np.ndarray:
        """Per node the id of its distinct taint set (read-only)."""
        return self._set_ids

    @property
    def distinct_sets(self) -> list[tuple[Taint, ...]]:
        return list(self._sets)

    def _per_set_ok(self, tols: tuple[Toleration, ...]) -> np.ndarray:
        ok = self._filter_cache.get(tols)
        if ok is None:
            ok = np.fromiter(
                (_first_untolerated(s, tols, FILTER_EFFECTS) is None for s in self._sets),
                dtype=bool,
                count=len(self._sets),
            )
            if len(self._filter_cache) > 4096:
                self._filter_cache.clear()
            self._filter_cache[tols] = ok
        return ok

    def filter_mask(self, tolerations: Iterable[Any] | None) -> np.ndarray:
        """TaintToleration filter: True where every NoSchedule/NoExecute taint is tolerated."""
        tols = _parse_tolerations(tolerations)
        return self._per_set_ok(tols)[self._set_ids]

    def prefer_no_schedule_counts(self, tolerations: Iterable[Any] | None) -> np.ndarray:
        """Per node the number of untolerated PreferNoSchedule taints (int64)."""
        tols = _parse_tolerations(tolerations)
        counts = self._prefer_cache.get(tols)
        if counts is None:
            counts = np.fromiter(
                (
                    sum(
                        1
                        for taint in s
                        if taint.effect == EFFECT_PREFER_NO_SCHEDULE
                        and not any(_tolerates(t, taint) for t in tols)
                    )
                    for s in self._sets
                ),
                dtype=np.int64,
                count=len(self._sets),
            )
            if len(self._prefer_cache) > 4096:
                self._prefer_cache.clear()
            self._prefer_cache[tols] = counts
        return counts[self._set_ids]

    def untolerated(self, tolerations: Iterable[Any] | None, node: int) -> Taint | None:
        """The taint that makes the filter reject ``node`` (for the failure message)."""
        s = self._sets[int(self._set_ids[node])]
        idx = _first_untolerated(s, _parse_tolerations(tolerations), FILTER_EFFECTS)
        return None if idx is None else s[idx]
