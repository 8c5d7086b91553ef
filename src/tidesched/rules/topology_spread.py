"""Pod topology spread (kube-scheduler's PodTopologySpread plugin), vectorised over nodes.

Parsing: :func:`parse_spread_constraints` turns ``spec.topologySpreadConstraints`` into
:class:`SpreadConstraint` records, checking what the API server's validation checks and
raising :class:`SelectorError` whose message starts with the bad field.

Semantics (kube-scheduler ``podtopologyspread``: common.go, filtering.go, scoring.go):

* The selector is the constraint's ``labelSelector`` (nil matches nothing) with, for every key
  of ``matchLabelKeys`` the pod carries, ``key In (pod's value)`` added. Pods are counted in
  the incoming pod's namespace, terminating pods left out; an *empty* selector counts no pod
  (``countPodsMatchSelector`` returns 0 for it) although the incoming pod matches it itself.
* A node takes part (its pods count, its domain exists) when it carries the topology keys of
  *all* the constraints of the kind being evaluated, and per constraint
  ``nodeAffinityPolicy: Honor`` (default) — the node matches the pod's nodeSelector and
  required node affinity — and ``nodeTaintsPolicy: Honor`` (default Ignore) — the pod
  tolerates the node's NoSchedule/NoExecute taints.
* Filter (``DoNotSchedule``), per constraint in order, the first failure names the node: no
  topology key → "missing required label" (unresolvable); else
  ``count(node's domain) + self-match − global minimum > maxSkew`` fails. The global minimum
  is the least count over the eligible domains, or 0 when there are fewer of those than
  ``minDomains`` (default 1).
* Score (``ScheduleAnyway``) over the candidate nodes: a candidate without every key scores 0;
  else Σ ``count × ln(domains + 2) + maxSkew − 1`` (for ``kubernetes.io/hostname`` the count is
  the node's own and ``domains`` the number of scored candidates; for other keys, the domains
  are those of the candidates), rounded; then normalised: ``100 × (max + min − s) / max``
  (100 everywhere when max is 0), so the least crowded domain gets 100.

System default constraints (kube-scheduler's hostname/zone ScheduleAnyway defaults for pods a
Service, ReplicaSet or StatefulSet selects) are not applied: see docs/topology-spread.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tidesched.rules.selectors import CompiledLabelSelector, SelectorError, compile_label_selector, label_str

__all__ = [
    "DO_NOT_SCHEDULE",
    "HOSTNAME_KEY",
    "SCHEDULE_ANYWAY",
    "SpreadConstraint",
    "SpreadInput",
    "parse_spread_constraints",
    "spread_filter",
    "spread_scores",
]

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HOSTNAME_KEY = "kubernetes.io/hostname"
_POLICIES = ("Honor", "Ignore")
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One parsed constraint; ``selector`` already holds the matchLabelKeys requirements."""

    max_skew: int
    topology_key: str
    hard: bool  # DoNotSchedule (filter) rather than ScheduleAnyway (score)
    selector: CompiledLabelSelector
    min_domains: int = 1
    honor_affinity: bool = True
    honor_taints: bool = False

    @property
    def counts_pods(self) -> bool:
        """Whether any placed pod can count (nil and empty selectors count none)."""
        return not (self.selector.nothing or self.selector.everything)


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SelectorError(f"{where}: must be an integer, got {value!r}")
    if not 0 < value <= _INT32_MAX:
        raise SelectorError(f"{where}: must be greater than zero, got {value}")
    return value


def _policy(item: Mapping[str, Any], key: str, default: str, where: str) -> bool:
    value = item.get(key)
    if value is None:
        value = default
    if value not in _POLICIES:
        raise SelectorError(f"{where}.{key}: must be Honor or Ignore, got {value!r}")
    return value == "Honor"


def _with_label_keys(
    selector: CompiledLabelSelector, keys: Sequence[str], pod_labels: Mapping[str, str]
) -> CompiledLabelSelector:
    """kube-scheduler's merge: ``key In (value)`` for each key the pod has, then the
    selector's own requirements; a nil selector stays nil. Since Kubernetes 1.34 the API
    server may already have merged them into ``labelSelector``: merging again changes nothing."""
    if selector.nothing:
        return selector
    added = tuple((k, "In", frozenset((label_str(pod_labels[k]),))) for k in keys if k in pod_labels)
    if not added:
        return selector
    return CompiledLabelSelector(added + selector.requirements)


def parse_spread_constraints(
    raw: Any, pod_labels: Mapping[str, str], where: str = "spec.topologySpreadConstraints"
) -> tuple[SpreadConstraint, ...]:
    """``spec.topologySpreadConstraints`` → constraints; raises SelectorError naming the field."""
    if raw is None:
        return ()
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Sequence):
        raise SelectorError(f"{where}: must be a list, got {type(raw).__name__}")
    out: list[SpreadConstraint] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(raw):
        w = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise SelectorError(f"{w}: must be a mapping, got {type(item).__name__}")
        max_skew = _positive_int(item.get("maxSkew"), f"{w}.maxSkew")
        key = item.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise SelectorError(f"{w}.topologyKey: must be a non-empty string")
        action = item.get("whenUnsatisfiable")
        if action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise SelectorError(
                f"{w}.whenUnsatisfiable: must be DoNotSchedule or ScheduleAnyway, got {action!r}"
            )
        if (key, action) in seen:
            raise SelectorError(f"{w}: duplicate topologyKey {key!r} with whenUnsatisfiable {action}")
        seen.add((key, action))
        min_domains = 1
        if item.get("minDomains") is not None:
            min_domains = _positive_int(item.get("minDomains"), f"{w}.minDomains")
            if action != DO_NOT_SCHEDULE:
                raise SelectorError(
                    f"{w}.minDomains: can only be set when whenUnsatisfiable is DoNotSchedule"
                )
        raw_selector = item.get("labelSelector")
        selector = compile_label_selector(raw_selector, f"{w}.labelSelector")
        keys = item.get("matchLabelKeys")
        if keys is not None:
            if isinstance(keys, (str, bytes, Mapping)) or not isinstance(keys, Sequence):
                raise SelectorError(f"{w}.matchLabelKeys: must be a list of label keys")
            for j, k in enumerate(keys):
                if not isinstance(k, str) or not k:
                    raise SelectorError(f"{w}.matchLabelKeys[{j}]: must be a non-empty string")
            if keys and raw_selector is None:
                raise SelectorError(f"{w}.labelSelector: must be set when matchLabelKeys is set")
            selector = _with_label_keys(selector, keys, pod_labels)
        out.append(
            SpreadConstraint(
                max_skew=max_skew,
                topology_key=key,
                hard=action == DO_NOT_SCHEDULE,
                selector=selector,
                min_domains=min_domains,
                honor_affinity=_policy(item, "nodeAffinityPolicy", "Honor", w),
                honor_taints=_policy(item, "nodeTaintsPolicy", "Ignore", w),
            )
        )
    return tuple(out)


@dataclass(slots=True)
class SpreadInput:
    """One constraint as arrays over all nodes.

    ``codes``: the topology key's value code per node (-1: no such label), ``domains`` the
    number of codes; ``counts``: matching pods per node; ``included``: nodes passing the
    constraint's inclusion policies (the filter and the score add "has every key")."""

    constraint: SpreadConstraint
    codes: np.ndarray
    domains: int
    counts: np.ndarray
    included: np.ndarray
    self_match: int = 0


def _has_all_keys(inputs: Sequence[SpreadInput]) -> np.ndarray:
    has_all = inputs[0].codes >= 0
    for c in inputs[1:]:
        has_all = has_all & (c.codes >= 0)
    return has_all


def _domain_counts(c: SpreadInput, eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pods per domain, whether the domain has an eligible node) over the key's codes."""
    codes = c.codes[eligible]
    present = np.bincount(codes, minlength=c.domains) > 0
    counts = np.bincount(codes, weights=c.counts[eligible], minlength=c.domains)
    return counts, present


def spread_filter(inputs: Sequence[SpreadInput]) -> tuple[np.ndarray, np.ndarray]:
    """The DoNotSchedule filter over all nodes: (missing topology label, skew too large)
    masks, each node reported for its first failing constraint."""
    n = len(inputs[0].codes)
    missing = np.zeros(n, dtype=bool)
    skewed = np.zeros(n, dtype=bool)
    has_all = _has_all_keys(inputs)
    decided = np.zeros(n, dtype=bool)
    for c in inputs:
        counts, present = _domain_counts(c, has_all & c.included)
        n_domains = int(present.sum())
        global_min = 0.0 if n_domains < c.constraint.min_domains else float(counts[present].min())
        absent = c.codes < 0
        node_count = counts[np.where(absent, 0, c.codes)] if c.domains else np.zeros(n)
        too_big = ~absent & (node_count + c.self_match - global_min > c.constraint.max_skew)
        missing |= absent & ~decided
        skewed |= too_big & ~decided
        decided |= absent | too_big
    return missing, skewed


def spread_scores(inputs: Sequence[SpreadInput], idx: np.ndarray) -> np.ndarray:
    """ScheduleAnyway scores (0..100, normalised) for the candidate rows ``idx``."""
    out = np.zeros(len(idx))
    if not inputs or len(idx) == 0:
        return out
    has_all = _has_all_keys(inputs)
    scored = has_all[idx]
    scored_idx = idx[scored]
    if len(scored_idx) == 0:
        return out
    raw = np.zeros(len(scored_idx))
    for c in inputs:
        k = c.constraint
        if k.topology_key == HOSTNAME_KEY:
            size = len(scored_idx)
            count = c.counts[scored_idx].astype(float)
        else:
            cand_codes = c.codes[scored_idx]
            size = len(np.unique(cand_codes))
            counts, _present = _domain_counts(c, has_all & c.included)
            count = counts[cand_codes]
        raw += count * np.log(size + 2) + (k.max_skew - 1)
    score = np.floor(raw + 0.5).astype(np.int64)  # Go math.Round; scores are never negative
    lo, hi = int(score.min()), int(score.max())
    if hi == 0:
        out[scored] = 100.0
    else:
        out[scored] = (100 * (hi + lo - score)) // hi
    return out
