"""Vectorised kube-scheduler scorers, as Volcano's ``nodeorder`` plugin wires them.

All scorers take arrays over nodes (one row per node, ``R`` resource columns) and return one
score per node in ``0..MAX_NODE_SCORE``.  Integer steps reproduce kube-scheduler's int64
arithmetic exactly (truncating division), and the balanced-allocation float steps are done
in the same order as Go, so results match the Go plugins bit for bit.

How Volcano's nodeorder combines them (``pkg/scheduler/plugins/nodeorder/nodeorder.go``)
-------------------------------------------------------------------------------------------
``final(node) = Σ_plugin weight_plugin × score_plugin(node)`` with default weights
(``VOLCANO_NODEORDER_DEFAULT_WEIGHTS``, overridable via ``<name>.weight`` arguments)::

    leastrequested 1, mostrequested 0, balancedresource 1, nodeaffinity 2,
    podaffinity 2, tainttoleration 3, imagelocality 1, podtopologyspread 2

Two paths exist and they normalise differently:

* **per-node** ``nodeOrderFn`` — LeastAllocated, MostAllocated, BalancedAllocation,
  NodeAffinity, ImageLocality.  Each node is scored alone with a fresh cycle state and **no
  NormalizeScore**.  In particular NodeAffinity contributes its *raw* sum of matching
  preferred-term weights (can exceed 100; nodeorder.go carries a "TODO: should we normalize")
  — use :meth:`NodeLabelIndex.preferred_affinity_scores` directly, times weight 2.
  LeastAllocated is configured with resources ``cpu:50, memory:50``
  (``VOLCANO_LEAST_ALLOCATED_WEIGHTS``), MostAllocated with ``cpu:1, memory:1``,
  BalancedAllocation with ``cpu, memory, nvidia.com/gpu`` (weights unused by that scorer).
  Plugins whose weight is 0 are not evaluated.
* **batch** ``batchNodeOrderFn`` — InterPodAffinity, TaintToleration, PodTopologySpread.
  Score for every node of the candidate list handed to the batch function (the nodes that
  passed the predicates), then the plugin's NormalizeScore **over that whole list**, then
  × weight.  TaintToleration uses :func:`default_normalize` with ``reverse=True`` on the
  untolerated-PreferNoSchedule counts; InterPodAffinity uses its own min-max normalisation
  (:func:`interpod_affinity_scores`).

kube-scheduler facts reproduced here
------------------------------------
* Least/Most allocated: a resource whose node allocatable is 0 is left out of both the
  weighted sum and the weight sum; if nothing is left the score is 0.  LeastAllocated gives
  0 for a resource when requested > allocatable; MostAllocated clamps requested to
  allocatable.  Extended (scalar) resources the pod does not request are bypassed the same
  way — pass ``bypass=`` (see :func:`extended_resource_bypass`).
* ``requested`` is node usage *including the incoming pod*.  For cpu/memory Least/Most use
  *non-zero* requests (containers without a request count 100m / 200Mi, see
  :func:`non_zero_request`); BalancedAllocation uses the actual requests.
* BalancedAllocation: fraction = requested / allocatable capped at 1, zero-allocatable
  resources skipped; std = |f0 - f1| / 2 for two fractions, population std for more, 0 for
  fewer; score = int((1 - std) × 100).  A best-effort pod (all requests zero) is skipped, i.e.
  scores 0 on every node (pass ``pod_requests=``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "MAX_NODE_SCORE",
    "NATIVE_RESOURCES",
    "VOLCANO_BALANCED_RESOURCES",
    "VOLCANO_LEAST_ALLOCATED_WEIGHTS",
    "VOLCANO_MOST_ALLOCATED_WEIGHTS",
    "VOLCANO_NODEORDER_DEFAULT_WEIGHTS",
    "balanced_allocation",
    "default_normalize",
    "extended_resource_bypass",
    "interpod_affinity_normalize",
    "interpod_affinity_raw_scores",
    "interpod_affinity_scores",
    "least_allocated",
    "most_allocated",
    "non_zero_request",
    "taint_toleration_scores",
    "weighted_sum",
]

MAX_NODE_SCORE = 100
# pkg/scheduler/util: requests assumed for containers that set none (scoring only).
DEFAULT_MILLI_CPU_REQUEST = 100  # 0.1 core
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024  # 200 MiB

VOLCANO_NODEORDER_DEFAULT_WEIGHTS: Mapping[str, int] = {
    "leastrequested": 1,
    "mostrequested": 0,
    "balancedresource": 1,
    "nodeaffinity": 2,
    "podaffinity": 2,
    "tainttoleration": 3,
    "imagelocality": 1,
    "podtopologyspread": 2,
}
VOLCANO_LEAST_ALLOCATED_WEIGHTS: Mapping[str, int] = {"cpu": 50, "memory": 50}
VOLCANO_MOST_ALLOCATED_WEIGHTS: Mapping[str, int] = {"cpu": 1, "memory": 1}
VOLCANO_BALANCED_RESOURCES: tuple[str, ...] = ("cpu", "memory", "nvidia.com/gpu")
# Resources kube-scheduler never bypasses (everything else is a "scalar" resource).
NATIVE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


def _as_2d_int(name: str, a: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected shape (nodes, resources), got {arr.shape}")
    if arr.dtype.kind == "f":
        arr = np.trunc(arr)  # quantities are integers (milli-CPU, bytes, counts)
    return arr.astype(np.int64, copy=False)


def _included(allocatable: np.ndarray, bypass: np.ndarray | Sequence[bool] | None) -> np.ndarray:
    inc = allocatable > 0
    if bypass is not None:
        b = np.asarray(bypass, dtype=bool)
        if b.shape not in ((allocatable.shape[1],), allocatable.shape):
            raise ValueError(
                f"bypass: expected shape ({allocatable.shape[1]},) or {allocatable.shape}, got {b.shape}"
            )
        inc = inc & ~b
    return inc


def _check_shapes(allocatable: np.ndarray, requested: np.ndarray) -> None:
    if allocatable.shape != requested.shape:
        raise ValueError(f"allocatable {allocatable.shape} and requested {requested.shape} differ")


def _weighted_resource_score(
    per_resource: np.ndarray, included: np.ndarray, weights: np.ndarray | Sequence[int]
) -> np.ndarray:
    w = np.asarray(weights, dtype=np.int64)
    if w.shape != (per_resource.shape[1],):
        raise ValueError(f"weights: expected shape ({per_resource.shape[1]},), got {w.shape}")
    wi = np.where(included, w, 0)
    num = (per_resource * wi).sum(axis=1)
    den = wi.sum(axis=1)
    out = np.zeros(per_resource.shape[0], dtype=np.int64)
    np.floor_divide(num, den, out=out, where=den > 0)  # operands >= 0: floor == Go truncation
    return out.astype(np.float64)


def least_allocated(
    allocatable: np.ndarray,
    requested: np.ndarray,
    weights: np.ndarray | Sequence[int],
    *,
    bypass: np.ndarray | Sequence[bool] | None = None,
) -> np.ndarray:
    """NodeResourcesFit LeastAllocated: Σ_r w_r·((alloc-req)·100 // alloc) // Σ_r w_r."""
    alloc = _as_2d_int("allocatable", allocatable)
    req = _as_2d_int("requested", requested)
    _check_shapes(alloc, req)
    inc = _included(alloc, bypass)
    safe = np.where(inc, alloc, 1)
    per = np.where(inc & (req <= alloc), ((alloc - req) * MAX_NODE_SCORE) // safe, 0)
    return _weighted_resource_score(per, inc, weights)


def most_allocated(
    allocatable: np.ndarray,
    requested: np.ndarray,
    weights: np.ndarray | Sequence[int],
    *,
    bypass: np.ndarray | Sequence[bool] | None = None,
) -> np.ndarray:
    """NodeResourcesFit MostAllocated: Σ_r w_r·(min(req,alloc)·100 // alloc) // Σ_r w_r."""
    alloc = _as_2d_int("allocatable", allocatable)
    req = _as_2d_int("requested", requested)
    _check_shapes(alloc, req)
    inc = _included(alloc, bypass)
    safe = np.where(inc, alloc, 1)
    per = np.where(inc, (np.minimum(req, alloc) * MAX_NODE_SCORE) // safe, 0)
    return _weighted_resource_score(per, inc, weights)


def balanced_allocation(
    allocatable: np.ndarray,
    requested: np.ndarray,
    *,
    bypass: np.ndarray | Sequence[bool] | None = None,
    pod_requests: np.ndarray | Sequence[float] | None = None,
) -> np.ndarray:
    """NodeResourcesBalancedAllocation: int((1 - std(fractions)) · 100) per node.

    ``pod_requests`` (the incoming pod's actual requests per resource column) is only used
    for the best-effort rule: all zero → every node scores 0.
    """
    alloc = _as_2d_int("allocatable", allocatable)
    req = _as_2d_int("requested", requested)
    _check_shapes(alloc, req)
    n_nodes, n_res = alloc.shape
    if pod_requests is not None and not np.any(np.asarray(pod_requests) != 0):
        return np.zeros(n_nodes, dtype=np.float64)
    inc = _included(alloc, bypass)
    frac = np.where(inc, req.astype(np.float64) / np.where(inc, alloc, 1).astype(np.float64), 0.0)
    frac = np.minimum(frac, 1.0)
    count = inc.sum(axis=1)
    # Accumulate column by column so float rounding follows Go's sequential loop exactly.
    total = np.zeros(n_nodes)
    first = np.zeros(n_nodes)
    second = np.zeros(n_nodes)
    seen = np.zeros(n_nodes, dtype=np.int64)
    for r in range(n_res):
        m = inc[:, r]
        total = np.where(m, total + frac[:, r], total)
        first = np.where(m & (seen == 0), frac[:, r], first)
        second = np.where(m & (seen == 1), frac[:, r], second)
        seen += m
    mean = total / np.maximum(count, 1)
    sq = np.zeros(n_nodes)
    for r in range(n_res):
        d = frac[:, r] - mean
        sq = np.where(inc[:, r], sq + d * d, sq)
    std = np.where(
        count == 2,
        np.abs((first - second) / 2),
        np.where(count > 2, np.sqrt(sq / np.maximum(count, 1)), 0.0),
    )
    return np.trunc((1.0 - std) * float(MAX_NODE_SCORE))


def non_zero_request(cpu_milli: Any, memory_bytes: Any) -> tuple[Any, Any]:
    """Requests kube-scheduler assumes for *scoring* when a container sets none.

    An unset request (``None``; ``NaN`` inside float arrays) becomes 100 milli-CPU / 200 MiB;
    an explicit 0 stays 0.  kube-scheduler applies this per container and sums, so call it per
    container (works element-wise on arrays).  Returns ``(cpu_milli, memory_bytes)``.
    """

    def fill(value: Any, default: int) -> Any:
        if value is None:
            return default
        arr = np.asarray(value)
        if arr.ndim == 0:
            v = arr.item()
            return default if isinstance(v, float) and np.isnan(v) else value
        if arr.dtype.kind == "f":
            return np.where(np.isnan(arr), float(default), arr)
        if arr.dtype == object:
            return np.array([default if v is None else v for v in arr.ravel()]).reshape(arr.shape)
        return arr

    return fill(cpu_milli, DEFAULT_MILLI_CPU_REQUEST), fill(memory_bytes, DEFAULT_MEMORY_REQUEST)


def extended_resource_bypass(
    resource_names: Sequence[str], pod_request: Sequence[float] | np.ndarray
) -> np.ndarray:
    """Columns kube-scheduler skips: scalar (non cpu/memory/ephemeral) resources the pod doesn't request."""
    req = np.asarray(pod_request)
    if req.shape != (len(resource_names),):
        raise ValueError(f"pod_request: expected shape ({len(resource_names)},), got {req.shape}")
    scalar = np.array([name not in NATIVE_RESOURCES for name in resource_names], dtype=bool)
    return scalar & (req == 0)


def _go_trunc_div(a: np.ndarray, b: int) -> np.ndarray:
    """int64 division truncating toward zero, as Go does."""
    q = np.abs(a) // abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def default_normalize(
    scores: np.ndarray | Sequence[int] | Sequence[float],
    max_score: int = MAX_NODE_SCORE,
    reverse: bool = False,
) -> np.ndarray:
    """kube-scheduler ``DefaultNormalizeScore`` with int64 arithmetic; returns int64.

    ``m = max(0, max(scores))``; if ``m == 0`` scores are unchanged (or all ``max_score`` when
    ``reverse``); else ``s = max_score * s / m`` (truncating) and, if ``reverse``,
    ``max_score - s``.  Used for node affinity (kube-scheduler, not Volcano) and, reversed, for
    taint toleration.  Normalise over the same candidate list the plugin would see.
    """
    s = np.asarray(scores)
    if s.dtype.kind == "f":
        s = np.trunc(s)
    s = s.astype(np.int64, copy=True).reshape(-1)
    if s.size == 0:
        return s
    max_count = max(int(s.max()), 0)
    if max_count == 0:
        if reverse:
            s[:] = max_score
        return s
    s = _go_trunc_div(max_score * s, max_count)
    if reverse:
        s = max_score - s
    return s


def taint_toleration_scores(intolerable_counts: np.ndarray | Sequence[int]) -> np.ndarray:
    """TaintToleration score over a candidate list: reverse default normalisation (int64)."""
    return default_normalize(intolerable_counts, MAX_NODE_SCORE, reverse=True)


def interpod_affinity_raw_scores(
    contributions: Iterable[tuple[np.ndarray, np.ndarray]], n_nodes: int
) -> np.ndarray:
    """Raw InterPodAffinity score per node (int64) from per-term topology contributions.

    Each contribution is ``(codes, weights)`` over all nodes: ``codes`` from
    :meth:`NodeLabelIndex.topology_codes` for the term's topology key, and ``weights[m]`` the
    signed amount the existing pods on node *m* add for that term (matching pods × term
    weight, negative for anti-affinity; kube adds the incoming pod's preferred (anti-)affinity
    terms, and existing pods' required affinity × hardPodAffinityWeight and preferred
    (anti-)affinity terms matching the incoming pod).  The amount is credited to every node
    in the same topology domain; nodes lacking the key get nothing from that term.
    """
    raw = np.zeros(n_nodes, dtype=np.int64)
    for codes, weights in contributions:
        codes = np.asarray(codes)
        w = np.asarray(weights, dtype=np.int64)
        if codes.shape != (n_nodes,) or w.shape != (n_nodes,):
            raise ValueError("interpod contribution arrays must have one entry per node")
        present = codes >= 0
        if not present.any():
            continue
        k = int(codes[present].max()) + 1
        per_domain = np.zeros(k, dtype=np.int64)
        np.add.at(per_domain, codes[present], w[present])
        raw[present] += per_domain[codes[present]]
    return raw


def interpod_affinity_normalize(raw: np.ndarray | Sequence[int]) -> np.ndarray:
    """InterPodAffinity NormalizeScore over a candidate list: int(100·(s-min)/(max-min)).

    min/max are taken over the given scores; all equal → 0 everywhere.  Returns int64.
    """
    s = np.asarray(raw, dtype=np.int64).reshape(-1)
    if s.size == 0:
        return s.copy()
    lo, hi = int(s.min()), int(s.max())
    if hi - lo <= 0:
        return np.zeros_like(s)
    f = float(MAX_NODE_SCORE) * ((s - lo).astype(np.float64) / float(hi - lo))
    return np.trunc(f).astype(np.int64)


def interpod_affinity_scores(
    contributions: Iterable[tuple[np.ndarray, np.ndarray]],
    n_nodes: int,
    candidates: np.ndarray | None = None,
) -> np.ndarray:
    """Raw scores aggregated over all nodes, normalised over ``candidates`` (bool mask).

    Non-candidates get 0.  Returns float64 in 0..100.
    """
    raw = interpod_affinity_raw_scores(contributions, n_nodes)
    out = np.zeros(n_nodes, dtype=np.float64)
    if candidates is None:
        out[:] = interpod_affinity_normalize(raw)
    else:
        cand = np.asarray(candidates, dtype=bool)
        out[cand] = interpod_affinity_normalize(raw[cand])
    return out


def weighted_sum(scores: Mapping[str, np.ndarray], weights: Mapping[str, int] | None = None) -> np.ndarray:
    """``Σ weight × score`` over plugins (Volcano nodeorder default weights when omitted)."""
    w = VOLCANO_NODEORDER_DEFAULT_WEIGHTS if weights is None else weights
    total: np.ndarray | None = None
    for name, arr in scores.items():
        term = float(w.get(name, 0)) * np.asarray(arr, dtype=np.float64)
        total = term if total is None else total + term
    if total is None:
        raise ValueError("weighted_sum: no scores given")
    return total
