"""What GPU placement policies read of the nodes, as arrays: free CPU and memory per node, free
GPU share per device (milli-GPU, 1000 = a whole device), the node's GPU model, and which kinds
of GPU pods each node holds; plus the FGD fragmentation of every node, kept up to date.

The placement policies (``plugins/gpu_policy.py`` and one plugin module per policy) score
nodes for a :class:`GpuRequest` over a :class:`GpuNodes`. A scheduling session builds one from
its node table and device table; the experiment protocol of the FGD paper
(``sim/experiment``) builds one from the trace's nodes and places pods on it directly (no
departures, one pod at a time), so both run the same scoring code.

Fit (:meth:`GpuNodes.fits`) is the paper's: enough free CPU and memory, a GPU model the pod
accepts, and ``gpus`` devices each with at least ``milli`` free (a whole-device request needs
devices nobody shares). A shared request takes one device (the policy chooses which); a
whole-device request takes the lowest-numbered idle devices.

Every change is recorded in a change log (row numbers), so a caller that keeps per-row values
(scores per request shape) recomputes only the rows changed since.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tidesched.rules import gpu_frag
from tidesched.rules.gpu_frag import PodShape, TypicalPods

FULL = 1000  # milli-GPU of one device

KINDS = ("PureCpu", "ShareGpu", "OneGpu", "TwoGpu", "FourGpu", "EightGpu", "Others")
_KIND_OF_GPUS = {1: "OneGpu", 2: "TwoGpu", 4: "FourGpu", 8: "EightGpu"}


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """One pod's request: CPU (milli), memory (MiB), devices, the share of each device (milli;
    1000 for whole devices, 0 for a CPU-only pod) and the GPU models it accepts (empty: any)."""

    cpu: int
    memory: int
    gpus: int
    milli: int
    models: tuple[str, ...] = ()

    @property
    def needs_gpu(self) -> bool:
        return self.gpus > 0 and self.milli > 0

    @property
    def shared(self) -> bool:
        """A share of one device (the policy picks the device)."""
        return self.gpus == 1 and 0 < self.milli < FULL

    @property
    def total_milli(self) -> int:
        return self.gpus * self.milli if self.needs_gpu else 0

    @property
    def kind(self) -> str:
        """The paper's kinds of pods: PureCpu, ShareGpu, OneGpu, TwoGpu, FourGpu, EightGpu, Others."""
        if not self.needs_gpu:
            return "PureCpu"
        if self.shared:
            return "ShareGpu"
        return _KIND_OF_GPUS.get(self.gpus, "Others")

    @property
    def affinity(self) -> int:
        """Column of :attr:`GpuNodes.affinity` this pod counts in: 0 shared, n for n whole
        devices, -1 none (GPU clustering's tags: ``share-gpu``, ``<n>-gpu``)."""
        if not self.needs_gpu:
            return -1
        return 0 if self.shared else self.gpus

    def shape(self) -> PodShape:
        return PodShape(self.cpu, self.milli if self.needs_gpu else 0, self.gpus if self.needs_gpu else 0, self.models)


class GpuNodes:
    """Per-node GPU placement state (see the module docstring)."""

    def __init__(
        self,
        names: Sequence[str],
        models: Sequence[str],
        cpu: Sequence[int] | np.ndarray,
        memory: Sequence[int] | np.ndarray,
        gpus: Sequence[int] | np.ndarray,
        width: int | None = None,
    ) -> None:
        n = len(names)
        self.names = list(names)
        self.model_names = sorted(set(models))
        index = {m: k for k, m in enumerate(self.model_names)}
        self.model = np.array([index[m] for m in models], dtype=np.int64)
        self.cpu_cap = np.asarray(cpu, dtype=np.int64).copy()
        self.cpu_free = self.cpu_cap.copy()
        self.mem_cap = np.asarray(memory, dtype=np.int64).copy()
        self.mem_free = self.mem_cap.copy()
        self.dev_count = np.asarray(gpus, dtype=np.int64).copy()
        self.width = int(max(self.dev_count.max(initial=0), width or 0))
        self.valid = np.arange(self.width)[None, :] < self.dev_count[:, None]
        self.dev_free = np.where(self.valid, FULL, 0).astype(np.int64)
        self.affinity = np.zeros((n, self.width + 1), dtype=np.int64)
        self.changes: list[int] = []
        self._access: dict[tuple[str, ...], np.ndarray] = {}
        self.typical: TypicalPods | None = None

    def __len__(self) -> int:
        return len(self.names)

    @property
    def capacity_milli(self) -> int:
        return int(self.dev_count.sum()) * FULL

    @property
    def allocated_milli(self) -> int:
        return self.capacity_milli - int(self.dev_free.sum())

    # -- fit ------------------------------------------------------------------------------

    def access(self, models: tuple[str, ...]) -> np.ndarray:
        """Nodes whose GPU model a pod accepting ``models`` may use (all for none named)."""
        mask = self._access.get(models)
        if mask is None:
            if models:
                wanted = set(models)
                per_model = np.array([m in wanted for m in self.model_names], dtype=bool)
                mask = per_model[self.model]
            else:
                mask = np.ones(len(self.names), dtype=bool)
            self._access[models] = mask
        return mask

    def fits(self, req: GpuRequest, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Does ``req`` fit each node (of ``rows``)?"""
        ok = (self.cpu_free[rows] >= req.cpu) & (self.mem_free[rows] >= req.memory)
        if req.needs_gpu:
            ok &= self.access(req.models)[rows]
            ok &= (self.dev_free[rows] >= req.milli).sum(axis=1) >= req.gpus
        return ok

    def exclusive(self, i: int, gpus: int) -> list[int]:
        """The idle devices a whole-device request takes on node ``i``: the lowest-numbered."""
        return np.flatnonzero(self.dev_free[i] == FULL)[:gpus].tolist()

    # -- changes --------------------------------------------------------------------------

    def place(self, i: int, req: GpuRequest, device: int = -1, devices: Sequence[int] | None = None) -> list[int]:
        """Put ``req`` on node ``i`` (a shared request on ``device``; a whole-device request on
        ``devices`` when given — a scheduling session's choice —, else the lowest-numbered idle
        ones); returns the devices taken. Raises ValueError, changing nothing, when they cannot
        take it."""
        taken: list[int] = []
        if req.needs_gpu:
            if req.shared:
                if not 0 <= device < self.dev_count[i] or self.dev_free[i, device] < req.milli:
                    raise ValueError(f"device {device} of {self.names[i]} cannot take {req.milli} milli-GPU")
                taken = [device]
            elif devices is not None:
                taken = sorted(set(int(j) for j in devices))
                if len(taken) != req.gpus or any(not 0 <= j < self.dev_count[i] or self.dev_free[i, j] != FULL
                                                 for j in taken):
                    raise ValueError(f"devices {list(devices)} of {self.names[i]} are not {req.gpus} idle devices")
            else:
                taken = self.exclusive(i, req.gpus)
                if len(taken) < req.gpus:
                    raise ValueError(f"{self.names[i]} has fewer than {req.gpus} idle devices")
            self.dev_free[i, taken] -= req.milli
            self.affinity[i, req.affinity] += 1
        self.cpu_free[i] -= req.cpu
        self.mem_free[i] -= req.memory
        self._changed(i)
        return taken

    def _changed(self, i: int) -> None:
        self.changes.append(i)
        if self.typical is not None:
            self.refresh(np.array([i]))

    # -- fragmentation --------------------------------------------------------------------

    def set_typical(self, typical: TypicalPods) -> None:
        """Measure fragmentation against these typical pods from now on."""
        self.typical = typical
        self.tp_access = typical.access(self.model_names)[self.model]  # (n, T)
        n = len(self.names)
        self.small = np.zeros((n, len(typical)), dtype=np.int64)
        self.count = np.zeros((n, len(typical)), dtype=np.int64)
        self.total = np.zeros(n, dtype=np.int64)
        self.frag = np.zeros(n)
        self.refresh(np.arange(n))

    def refresh(self, rows: np.ndarray) -> None:
        """Recompute the fragmentation of ``rows`` after their arrays were changed from outside."""
        tp = self.typical
        assert tp is not None
        dev = self.dev_free[rows]
        small, count = gpu_frag.aggregates(dev, tp)
        self.small[rows] = small
        self.count[rows] = count
        self.total[rows] = dev.sum(axis=1)
        self.frag[rows] = gpu_frag.frag_amount(tp, self.tp_access[rows], self.cpu_free[rows], self.total[rows], small, count)

    def frag_total(self) -> float:
        return float(self.frag.sum()) if self.typical is not None else 0.0

    def frag_classes(self) -> np.ndarray:
        """The cluster's free GPU share by class (``gpu_frag.CLASSES``), milli-GPU."""
        if self.typical is None:
            return np.zeros(len(gpu_frag.CLASSES))
        per = gpu_frag.frag_classes(self.typical, self.tp_access, self.cpu_free, self.total, self.small, self.count)
        return per.sum(axis=0)


__all__ = ["GpuNodes", "GpuRequest", "KINDS", "FULL"]
