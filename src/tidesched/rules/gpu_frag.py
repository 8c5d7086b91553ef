"""GPU fragmentation as the FGD paper measures it, over per-device free milli-GPU arrays.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent" (USENIX ATC '23). A node's free GPU share is a *fragment* for a task that
cannot use it; the node's fragmentation is the expectation over the workload's *typical pods*
(the most frequent distinct requests, with their frequencies). For one typical pod ``t`` on a
node:

* ``t`` asks for no GPU (a CPU-only pod): every free GPU share of the node is a fragment for it;
* ``t`` may not run on the node's GPU model (``gpu_spec``): all of it is a fragment;
* ``t`` fits (enough CPU, and at least ``gpus`` devices each with ``milli`` free): only the devices
  with less than ``milli`` free are fragments ("Q3, satisfied": the rest is usable);
* otherwise (too little CPU, too few devices with room, or both): all of it is a fragment.

So ``frag(node) = Σ_t w_t · (fits_t ? Σ_{d: free_d < milli_t} free_d : Σ_d free_d)``, in milli-GPU.
The classes (``q1_lack_both``, ``q2_lack_gpu``, ``q3_satisfied``, ``q4_lack_cpu``, ``xl_satisfied``,
``xr_lack_cpu``, ``no_access``) split the node's free share the same way for reports.

Everything is vectorised over nodes (rows) and typical pods (columns). Two per-node
aggregates make a one-device change cheap to judge: ``small[n, t]`` (free share on devices with
less than ``milli_t`` free) and ``count[n, t]`` (devices with at least ``milli_t`` free); a policy
that tries a pod on each device of each node updates them by the one device's change instead
of summing over the devices again (:func:`device_delta`).

Memory is not part of the measure (as in the paper: a node's memory limits where a pod may go,
not what counts as a fragment).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

MILLI = 1000
DEFAULT_POPULARITY = 95  # per cent of pods the typical pods must cover (the paper's setting)
DEFAULT_STEP = 1  # distinct requests added per step while covering them

CLASSES = ("q1_lack_both", "q2_lack_gpu", "q3_satisfied", "q4_lack_cpu", "xl_satisfied", "xr_lack_cpu", "no_access")
Q1, Q2, Q3, Q4, XL, XR, NA = range(7)


@dataclass(frozen=True, slots=True, order=True)
class PodShape:
    """One distinct task request as the measure sees it: CPU (milli), GPU share per device
    (milli, 0 for none), the number of devices, and the GPU models it may run on (empty: any)."""

    cpu: int
    milli: int
    gpus: int
    models: tuple[str, ...] = ()

    @property
    def total_milli(self) -> int:
        return self.milli * self.gpus if self.gpus else 0


@dataclass(frozen=True)
class TypicalPods:
    """The workload's typical pods: shapes and their weights (summing to 1)."""

    shapes: tuple[PodShape, ...]
    weights: np.ndarray  # (T,) float

    @property
    def cpu(self) -> np.ndarray:
        return np.array([s.cpu for s in self.shapes], dtype=np.int64)

    @property
    def milli(self) -> np.ndarray:
        return np.array([s.milli if s.gpus else 0 for s in self.shapes], dtype=np.int64)

    @property
    def gpus(self) -> np.ndarray:
        return np.array([s.gpus if s.milli else 0 for s in self.shapes], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.shapes)

    def access(self, node_models: Sequence[str]) -> np.ndarray:
        """(len(node_models), T): may typical pod t run on a node of this model? A pod that
        names models runs only on those; one that names none on any node ("" is a node without
        GPUs, which no model-constrained pod accepts)."""
        out = np.ones((len(node_models), len(self.shapes)), dtype=bool)
        for k, shape in enumerate(self.shapes):
            if shape.models:
                wanted = set(shape.models)
                out[:, k] = [m in wanted for m in node_models]
        return out


def typical_pods(
    counts: Mapping[PodShape, float] | Iterable[PodShape],
    popularity: float = DEFAULT_POPULARITY,
    step: int = DEFAULT_STEP,
    include_cpu_pods: bool = True,
) -> TypicalPods:
    """The most frequent shapes covering ``popularity`` % of the pods (counted ``step`` shapes at a
    time), their frequencies renormalised to sum to 1, as the paper's simulator picks them.
    ``counts`` maps shapes to how many pods made them (or is an iterable of shapes, one per pod).
    Ties in frequency go to the larger request (CPU, then GPU share, devices, models)."""
    if not isinstance(counts, Mapping):
        tally: dict[PodShape, float] = {}
        for s in counts:
            tally[s] = tally.get(s, 0.0) + 1.0
        counts = tally
    items = [(s, float(n)) for s, n in counts.items() if n > 0 and (include_cpu_pods or (s.gpus and s.milli))]
    total = sum(n for _, n in items)
    if not items or total <= 0:
        return TypicalPods((), np.zeros(0))
    items.sort(key=lambda x: (x[1], x[0]), reverse=True)
    expected = popularity * total / 100.0
    taken, covered = 0, 0.0
    step = max(1, int(step))
    while covered < expected and taken < len(items):
        end = min(taken + step, len(items))
        covered += sum(n for _, n in items[taken:end])
        taken = end
    chosen = items[:taken]
    weights = np.array([n for _, n in chosen], dtype=float)
    return TypicalPods(tuple(s for s, _ in chosen), weights / weights.sum())


def aggregates(dev_free: np.ndarray, tp: TypicalPods) -> tuple[np.ndarray, np.ndarray]:
    """Per node and typical pod: free share on devices with less than the pod's share free
    (``small``), and the number of devices with at least that much free (``count``).
    ``dev_free`` is (nodes, devices), 0 where a node has no such device."""
    milli = tp.milli
    f = dev_free[:, None, :]
    below = f < milli[None, :, None]
    small = np.where(below, f, 0).sum(axis=2)
    count = (~below & (f > 0)).sum(axis=2)
    return small, count


def device_delta(old: np.ndarray, new: np.ndarray, tp: TypicalPods) -> tuple[np.ndarray, np.ndarray]:
    """How ``small`` and ``count`` change when one device goes from ``old`` to ``new`` milli free
    (any broadcastable shapes; the typical pods are a new last axis)."""
    milli = tp.milli
    o = np.asarray(old)[..., None]
    n = np.asarray(new)[..., None]
    o_below = o < milli
    n_below = n < milli
    d_small = np.where(n_below, n, 0) - np.where(o_below, o, 0)
    d_count = (~n_below & (n > 0)).astype(np.int64) - (~o_below & (o > 0)).astype(np.int64)
    return d_small, d_count


def fits(tp: TypicalPods, access: np.ndarray, cpu_free: np.ndarray, count: np.ndarray) -> np.ndarray:
    """(…, T): does typical pod t fit the node (GPU pods only; a CPU-only pod never "fits" in
    this sense: the free GPU share is of no use to it)."""
    gpu = tp.gpus > 0
    return gpu & access & (count >= tp.gpus) & (np.asarray(cpu_free)[..., None] >= tp.cpu)


def frag_amount(
    tp: TypicalPods, access: np.ndarray, cpu_free: np.ndarray, total: np.ndarray, small: np.ndarray, count: np.ndarray,
) -> np.ndarray:
    """FGD's fragmentation (milli-GPU) of nodes given their aggregates: ``access``, ``small``
    and ``count`` are (…, T), ``cpu_free`` and ``total`` (free share of the node) are (…)."""
    if not len(tp):
        return np.zeros(np.shape(total))
    ok = fits(tp, access, cpu_free, count)
    per = np.where(ok, small, np.asarray(total)[..., None])
    return per @ tp.weights


def frag_classes(
    tp: TypicalPods, access: np.ndarray, cpu_free: np.ndarray, total: np.ndarray, small: np.ndarray, count: np.ndarray,
) -> np.ndarray:
    """The nodes' free share split by class (…, 7) in the order of :data:`CLASSES`; the classes
    other than ``q3_satisfied`` sum to :func:`frag_amount`."""
    shape = np.shape(total)
    out = np.zeros(shape + (len(CLASSES),))
    if not len(tp):
        return out
    w = tp.weights
    tot = np.asarray(total, dtype=float)[..., None]
    cpu_ok = np.asarray(cpu_free)[..., None] >= tp.cpu
    gpu = tp.gpus > 0
    host = count >= tp.gpus
    cpu_pod = ~gpu
    out[..., XL] = (np.where(cpu_pod & cpu_ok, tot, 0.0)) @ w
    out[..., XR] = (np.where(cpu_pod & ~cpu_ok, tot, 0.0)) @ w
    na = gpu & ~access
    out[..., NA] = np.where(na, tot, 0.0) @ w
    g = gpu & access
    q3 = g & host & cpu_ok
    out[..., Q3] = np.where(q3, tot - small, 0.0) @ w
    out[..., Q2] = (np.where(q3, small, 0.0) + np.where(g & ~host & cpu_ok, tot, 0.0)) @ w
    out[..., Q4] = np.where(g & host & ~cpu_ok, tot, 0.0) @ w
    out[..., Q1] = np.where(g & ~host & ~cpu_ok, tot, 0.0) @ w
    return out


def node_frag(tp: TypicalPods, access: np.ndarray, cpu_free: np.ndarray, dev_free: np.ndarray) -> np.ndarray:
    """:func:`frag_amount` straight from per-device free arrays (nodes × devices)."""
    small, count = aggregates(dev_free, tp)
    return frag_amount(tp, access, cpu_free, dev_free.sum(axis=1), small, count)


__all__ = [
    "CLASSES", "PodShape", "TypicalPods", "typical_pods", "aggregates", "device_delta", "fits", "frag_amount",
    "frag_classes", "node_frag", "MILLI", "DEFAULT_POPULARITY", "DEFAULT_STEP",
]
