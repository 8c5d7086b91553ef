"""GPU allocation and fragmentation as the FGD paper measures them (Weng et al., "Beware of
Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX
ATC '23), for the simulator's report.

Amounts are in *GPU equivalents*: a whole card is 1, an MPS slice of a card shared ``R`` ways is
``1/R``, a MIG slice of profile ``<n>g.*`` is ``n/7`` (the seven compute slices of an A100 or
H100). The simulator's MPS shares are a pool per node (``nvidia.com/gpu.shared``), so the only
fragments are FGD's "the task cannot run here" kind; none is a partly used card.

* **Demand** — GPUs asked for by the pods of our schedulers that have arrived and are not yet
  finished (pending or on a node): what the cluster is being asked to hold. A pending slice
  request is converted with the cluster's average slice size (exact when every shared node
  splits its cards the same way, as the Alibaba trace does).
* **Allocated** — GPUs held by pods on Ready nodes, ours or not.
* **Fragmented** — FGD's measure: with the *target workload* taken as the mix of pods that have
  arrived so far (each distinct request, weighted by how many pods made it), a node's
  unallocated GPUs are fragments for a request that cannot run on the node (too little CPU,
  memory or card of an acceptable model left) or that asks for no GPU at all; the cluster's
  fragmentation is the weighted mean over requests, summed over nodes. Reported as a share of
  the unallocated GPUs: how much of what is free the workload could not use.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tidesched.model.cards import MIG, MPS, CardCatalog, discover_node_cards, pod_card_request
from tidesched.model.device_units import unit_caps, units_fit
from tidesched.model.devices import CORE, FULL, MEM, NOW, DeviceTable
from tidesched.model.vgpu import VGPU_CARD_RESOURCE, node_card_scalars, pod_card_scalars
from tidesched.model.node_table import NodeTable
from tidesched.model.objects import Pod
from tidesched.model.resource import CPU, MEMORY
from tidesched.sim.metrics import Accounting
from tidesched.sim.world import World, is_deleting, pod_node, pod_phase

MIG_COMPUTE_SLICES = 7.0
_MPS_REPLICAS = re.compile(r"\*1/(\d+)$")
_MIG_PROFILE = re.compile(r"/mig-(\d+)g\.")
MILLI = 1000.0


@functools.lru_cache(maxsize=4096)  # asked per model on every recorded step
def model_gpus(model: str) -> float:
    """GPU equivalents of one unit of a card model, from its name (CARD-1 naming)."""
    return slot_gpus(model, MPS if "/mps-" in model else MIG if "/mig-" in model else "")


@functools.lru_cache(maxsize=4096)
def slot_gpus(model: str, kind: str) -> float:
    """GPU equivalents of one unit of a card model (whole card, MPS or MIG slice)."""
    if kind == MPS:
        m = _MPS_REPLICAS.search(model)
        return 1.0 / int(m.group(1)) if m and int(m.group(1)) > 0 else 1.0
    if kind == MIG:
        m = _MIG_PROFILE.search(model)
        return min(int(m.group(1)) / MIG_COMPUTE_SLICES, 1.0) if m else 1.0 / MIG_COMPUTE_SLICES
    return 1.0


@dataclass(frozen=True, slots=True)
class Request:
    """One distinct pod request of the workload mix."""

    cpu: float  # millicores
    memory: float  # bytes
    resources: tuple[str, ...]  # card resources it may take its cards from
    cards: float  # milli-units of those resources
    models: tuple[str, ...]  # acceptable card models (empty: no card)
    # A vGPU pod's per-device shape (devices, milli-GPU compute, memory percent or None, MiB):
    # the device view judges it per device (see fragmented_gpus).
    vgpu: tuple[int, int, int | None, int] | None = None


class _NodeGpus:
    """What the fragmentation measure needs of one node set, built once per node table."""

    def __init__(self, table: NodeTable) -> None:
        self.n = len(table.names)
        self.dims = table.dim_index
        # GPU equivalents per milli-unit of each column, per node (0 for non-card columns).
        self.per_milli = np.zeros_like(table.allocatable)
        self.models: list[frozenset[str]] = []
        self._model_masks: dict[tuple[str, ...], np.ndarray] = {}
        self._all: tuple[list[tuple[str, ...]], np.ndarray] | None = None
        for i, node in enumerate(table.nodes):
            found = discover_node_cards(node.name, node.meta.labels, node_card_scalars(node))
            for slot in found.slots:
                for res in slot.resources:
                    col = self.dims.get(res)
                    if col is not None:
                        self.per_milli[i, col] = slot_gpus(slot.model, slot.kind) / MILLI
            self.models.append(frozenset(found.models))

    def offers_all(self, model_sets: list[tuple[str, ...]]) -> np.ndarray:
        """``offers`` of every request (rows) of one mix, kept while the mix is the same list."""
        if self._all is None or self._all[0] is not model_sets:
            rows = [self.offers(m) for m in model_sets]
            self._all = (model_sets, np.stack(rows) if rows else np.zeros((0, self.n), dtype=bool))
        return self._all[1]

    def offers(self, models: tuple[str, ...]) -> np.ndarray:
        """Nodes offering any of ``models``."""
        mask = self._model_masks.get(models)
        if mask is None:
            wanted = set(models)
            mask = np.fromiter((bool(wanted & m) for m in self.models), dtype=bool, count=self.n)
            self._model_masks[models] = mask
        return mask


class GpuWorkload:
    """The workload mix (distinct requests of the pods that arrived, with counts) and the GPU
    demand of the pods present, kept up to date from the world's changes."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.mix: Counter[Request] = Counter()
        self._seen: set[str] = set()
        self._demand: dict[str, tuple[float, float]] = {}  # pod -> (whole-GPU eq, slice milli)
        self.demand_whole = 0.0  # GPU equivalents of whole-card and MIG requests present
        self.demand_slices = 0.0  # milli-slices of MPS requests present
        self._catalog: CardCatalog | None = None
        self._catalog_rev = -1
        self._nodes_rev = 0
        self._arrived = 0
        self._arrays: tuple | None = None
        self._arrays_size = -1
        self._shapes: tuple[list[Any], np.ndarray] | None = None
        # pod -> (catalog, annotations, scalars, cpu, memory, request): a pod's request read
        # again only when what it is read from changed (a bind or a finish changes neither).
        self._requests: dict[str, tuple[Any, ...]] = {}
        world.listeners.append(self.on_change)

    def requests(self) -> tuple[np.ndarray, ...] | None:
        """The mix as arrays (weights, cpu, memory, cards, card resources, models), rebuilt
        only when a new request or pod arrived since the last call."""
        if not self.mix:
            return None
        if self._arrays is None or self._arrays_size != self._arrived:
            items = list(self.mix.items())
            self._arrays = (
                np.array([n for _, n in items], dtype=float),
                np.array([r.cpu for r, _ in items]),
                np.array([r.memory for r, _ in items]),
                np.array([r.cards for r, _ in items]),
                [r.resources for r, _ in items],
                [r.models for r, _ in items],
                [r.vgpu for r, _ in items],
            )
            self._arrays_size = self._arrived
            self._shapes = None
        return self._arrays

    def shape_index(self) -> tuple[list[Any], np.ndarray]:
        """The distinct vGPU shapes of the mix, and per request its shape's index (-1: none),
        in the order of ``requests()``."""
        self.requests()
        if self._shapes is None:
            assert self._arrays is not None
            keys: dict[Any, int] = {}
            idx = np.array([-1 if v is None else keys.setdefault(v, len(keys)) for v in self._arrays[6]], dtype=np.int64)
            self._shapes = (list(keys), idx)
        return self._shapes

    def catalog(self) -> CardCatalog:
        if self._catalog is None or self._catalog_rev != self._nodes_rev:
            nodes = (self.world.record("Node", k) for k in sorted(self.world.objects["Node"]))
            self._catalog = CardCatalog.build(
                (n.name, n.meta.labels, node_card_scalars(n)) for n in nodes if n is not None
            )
            self._catalog_rev = self._nodes_rev
        return self._catalog

    def on_change(self, kind: str, key: str, old: Any, new: Any, cause: str) -> None:
        if kind == "Node":
            self._nodes_rev += 1
            return
        if kind != "Pod":
            return
        gone = self._demand.pop(key, None)
        if gone is not None:
            self.demand_whole -= gone[0]
            self.demand_slices -= gone[1]
        rec: Pod | None = self.world.record("Pod", key) if new is not None else None
        if rec is None or rec.scheduler_name not in self.world.scheduler_names:
            self._requests.pop(key, None)
            return
        req = self._request_of(key, rec)
        if key not in self._seen:
            self._seen.add(key)
            self.mix[req] += 1
            self._arrived += 1
        phase = pod_phase(new)
        if phase in ("Pending", "Running") and not is_deleting(new) and req.cards:
            whole, slices = self._gpus(req, pod_node(new))
            if whole or slices:
                self._demand[key] = (whole, slices)
                self.demand_whole += whole
                self.demand_slices += slices

    def _request_of(self, key: str, pod: Pod) -> Request:
        catalog = self.catalog()
        ann, res = pod.meta.annotations, pod.resreq
        hit = self._requests.get(key)
        # A parsed pod's annotations and requests are never changed in place, and a bind or
        # a pod's end keeps the very same objects: compared by identity first.
        if (
            hit is not None
            and hit[0] is catalog
            and hit[3] == res.milli_cpu
            and hit[4] == res.memory
            and (hit[2] is res.scalars or hit[2] == res.scalars)
            and (hit[1] is ann or hit[1] == ann)
        ):
            return hit[5]
        req = self._request(pod)
        self._requests[key] = (catalog, ann, res.scalars, res.milli_cpu, res.memory, req)
        return req

    def _request(self, pod: Pod) -> Request:
        scalars = pod_card_scalars(pod)
        card = pod_card_request(pod.meta.annotations, scalars, self.catalog())
        shape = None
        if pod.vgpu is not None and VGPU_CARD_RESOURCE in card.resources:
            # FGD's tasks ask for a share of one GPU or for whole GPUs: the first container's
            # share, on as many devices as the pod asks for in all.
            c = pod.vgpu.containers[0]
            shape = (pod.vgpu.devices, c.core_milli, c.percent, c.memory)
        return Request(
            cpu=float(pod.resreq.milli_cpu),
            memory=float(pod.resreq.memory),
            resources=tuple(card.resources),
            cards=float(card.count) if not card.error else 0.0,
            models=tuple(card.models) if not card.error else (),
            vgpu=shape,
        )

    def _gpus(self, req: Request, node_name: str) -> tuple[float, float]:
        """(GPU equivalents, MPS milli-slices) of a request: MPS slices are converted later,
        with the slice size of the node they are on or the cluster's average."""
        catalog = self.catalog()
        node = catalog.nodes.get(node_name) if node_name else None
        if node is not None:
            for slot in node.slots:
                if set(slot.resources) & set(req.resources):
                    return req.cards / MILLI * slot_gpus(slot.model, slot.kind), 0.0
        for model in req.models:
            res = catalog.model_resources.get(model, frozenset())
            if any(r.endswith(".shared") for r in res):
                return 0.0, req.cards
            kind = MIG if "/mig-" in model else ""
            return req.cards / MILLI * slot_gpus(model, kind), 0.0
        return 0.0, 0.0


def gpu_figures(accounting: Accounting, workload: GpuWorkload) -> dict[str, float]:
    """Capacity and allocated GPUs of the Ready nodes (from the metrics' running totals per
    card model) and the GPU demand present; all in GPU equivalents."""
    capacity = allocated = slice_units = slice_gpus = 0.0
    for model, units in accounting.capacity.items():
        if units:
            size = model_gpus(model)
            capacity += units * size
            if "/mps-" in model:
                slice_units += units
                slice_gpus += units * size
    for model, units in accounting.cards.items():
        if units:
            allocated += units * model_gpus(model)
    per_slice = slice_gpus / slice_units if slice_units else 0.0
    # Accounting and the workload count cards in milli-units.
    demand = workload.demand_whole + workload.demand_slices / MILLI * per_slice
    return {
        "capacity": round(capacity / MILLI, 4),
        "allocated": round(allocated / MILLI, 4),
        "demand": round(demand, 4),
        "unallocated": round(max(capacity - allocated, 0.0) / MILLI, 4),
    }


def fragmented_gpus(table: NodeTable, workload: GpuWorkload) -> float | None:
    """FGD's fragmentation of the Ready nodes in ``table`` measured by the workload mix, in GPU
    equivalents: one comparison of every distinct request against every node. None when no
    node has GPUs it can judge (they are DRA devices, which the measure does not read).

    Cards counted per node (whole cards, MPS and MIG slices) are pools: a request that fits a
    node strands none of them. vGPU devices are judged one by one (the device view): on a node
    where a request fits, the free part of each device that cannot take one unit of it (too
    little compute or memory, no free share, or not idle for a whole-device request) is a
    fragment; where it does not fit, every device's free part is."""
    nodes: _NodeGpus = table.memo(("sim.fragmentation", "gpus"), lambda: _NodeGpus(table))
    idle = np.maximum(table.allocatable - table.used, 0.0)
    col_idle = (idle * nodes.per_milli).sum(axis=1)  # cards counted per node
    devices = table.devices
    dev_free: np.ndarray | None = None
    dev_idle = np.zeros(len(col_idle))
    if devices is not None and devices.width:
        free_core, _free_mem = device_free(devices)
        dev_free = free_core / MILLI  # GPUs free per device
        dev_idle = dev_free.sum(axis=1)
    if not nodes.per_milli.any() and dev_free is None:
        return None
    idle_gpus = col_idle + dev_idle
    unallocated = float(idle_gpus.sum())
    mix = workload.requests()
    if mix is None or unallocated <= 0:
        return 0.0
    weights, cpu, memory, cards, card_cols, model_sets, shapes = mix
    fits = (idle[:, nodes.dims[CPU]][None, :] >= cpu[:, None]) & (idle[:, nodes.dims[MEMORY]][None, :] >= memory[:, None])
    fits &= cards[:, None] > 0  # a request for no GPU can use no idle GPU anywhere
    fits &= nodes.offers_all(model_sets)
    shape_keys, shape_idx = workload.shape_index()
    by_device = shape_idx >= 0
    if dev_free is None:
        by_device[:] = False
    # Requests of cards counted per node: they fit where the node has enough of a resource.
    for k in np.flatnonzero(~by_device & (cards > 0)):
        cols = [nodes.dims[r] for r in card_cols[k] if r in nodes.dims]
        if not cols:
            fits[k] = False
            continue
        avail = idle[:, cols[0]] if len(cols) == 1 else idle[:, cols].sum(axis=1)
        fits[k] &= avail >= cards[k]
    # Where a request fits, what it can use is not stranded: a pool request uses the node's
    # pooled cards (its vGPU devices stay fragments for it); a vGPU request the devices that can
    # take a unit of it (its pooled cards and the other devices stay fragments).
    usable = np.zeros(len(weights))
    pooled = ~by_device
    if pooled.any():
        usable[pooled] = fits[pooled].astype(float) @ col_idle
    if by_device.any():
        assert devices is not None and dev_free is not None
        node_fit, takes = _device_view(devices, dev_free, shape_keys)
        for sh in range(len(shape_keys)):
            rows = np.flatnonzero(by_device & (shape_idx == sh))
            if len(rows):
                usable[rows] = (fits[rows] & node_fit[sh]).astype(float) @ takes[sh]
    stranded = unallocated - usable
    return float(weights @ stranded / weights.sum())


def device_free(devices: DeviceTable) -> tuple[np.ndarray, np.ndarray]:
    """Free compute (milli-GPU) and memory (MiB) per device now, 0 where no device."""
    use = devices.state(NOW)
    core = np.where(devices.valid, np.maximum(FULL - use[CORE], 0), 0)
    mem = np.where(devices.valid, np.maximum(devices.memory - use[MEM], 0), 0)
    return core, mem


def _device_view(
    devices: DeviceTable, dev_free: np.ndarray, shapes: list[tuple[int, int, int | None, int]]
) -> tuple[np.ndarray, np.ndarray]:
    """Per vGPU request shape and node: does it fit the node's devices, and the GPUs free on the
    devices that can take one unit of it (the rest of the node's free GPUs are its fragments
    there, FGD). Arrays shapes × nodes, all shapes in one pass over the devices."""
    number = np.array([max(s[0], 1) for s in shapes], dtype=np.int64)
    core = np.array([s[1] for s in shapes], dtype=np.int32)[:, None, None]
    pct = np.array([-1 if s[2] is None else s[2] for s in shapes], dtype=np.int32)[:, None, None]
    mib = np.array([s[3] for s in shapes], dtype=np.int32)[:, None, None]
    unit = units_fit(unit_caps(devices), core, pct, mib)
    node_fit = unit.sum(axis=2) >= number[:, None]
    return node_fit, np.einsum("snd,nd->sn", unit, dev_free)


def _time_weighted(points: list[tuple[float, float]]) -> float | None:
    """Mean of a step function given as (time, value) points, each value holding until the next."""
    total = span = 0.0
    for (t0, v), (t1, _) in zip(points, points[1:]):
        if t1 > t0:
            total += (t1 - t0) * v
            span += t1 - t0
    return round(total / span, 6) if span else None


def fragmentation_summary(steps: list[Mapping[str, Any]]) -> dict[str, float | None]:
    """Time-weighted means over the run of the GPU allocation rate and of the fragmented
    share of unallocated GPUs."""
    alloc: list[tuple[float, float]] = []
    frag: list[tuple[float, float]] = []
    for step in steps:
        g = step.get("gpus")
        t = float(step["t"])
        if g and g.get("capacity"):
            alloc.append((t, g["allocated"] / g["capacity"]))
        else:
            alloc.append((t, 0.0))
        if g and "fragmented" in g:
            frag.append((t, g["fragmented"] / g["unallocated"] if g.get("unallocated") else 0.0))
    if frag and steps and float(steps[-1]["t"]) > frag[-1][0]:
        frag.append((float(steps[-1]["t"]), 0.0))  # the last sample holds to the end
    return {
        "mean_gpu_allocation": _time_weighted(alloc) if any(s.get("gpus") for s in steps) else None,
        "mean_fragmented_share": _time_weighted(frag),
    }
