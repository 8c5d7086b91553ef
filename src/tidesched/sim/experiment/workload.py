"""The FGD paper's experiment workload: the trace's GPU nodes, and the pod list tuned to a share
of the cluster's GPU capacity, in a seeded shuffled order (Weng et al., USENIX ATC '23, as the
authors' simulator prepares a run):

1. the pods of the list, sorted by name, are shuffled (seeded);
2. tuned to ``inflate`` × the cluster's GPU capacity (milli-GPU asked for in all): a list asking
   for more loses pods drawn at random until it asks for no more; a list asking for less gets
   copies of pods drawn at random (with replacement, from the list sorted by name) appended
   after the shuffled ones, until the next drawn pod's per-GPU share would pass the target
   (the authors compare that share, not the pod's whole request, so a last multi-GPU copy may
   pass it by a few GPUs);
3. the pods arrive in that order, each is placed once or fails, and none leaves.

The draws use numpy's seeded generator, not Go's, so a seed gives a different (equally random)
order and sample than the authors' simulator with the same seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tidesched.model.gpu_nodes import GpuNodes, GpuRequest
from tidesched.sim.trace import TraceError, TraceNode, TracePod, read_nodes, read_pods

GPU_NODE_FILE = "openb_node_list_gpu_node.csv"
DEFAULT_PODS = "openb_pod_list_default.csv"


@dataclass(frozen=True)
class Workload:
    """A pod list and the nodes it runs on."""

    name: str  # the pod list's file stem, e.g. openb_pod_list_default
    nodes: tuple[TraceNode, ...]
    pods: tuple[TracePod, ...]  # sorted by name
    requests: tuple[GpuRequest, ...]  # one per pod, same order


def request_of(p: TracePod) -> GpuRequest:
    if p.num_gpu > 0 and p.gpu_milli > 0:
        return GpuRequest(p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, tuple(sorted(p.gpu_spec)))
    return GpuRequest(p.cpu_milli, p.memory_mib, 0, 0)


def resolve(trace: str | Path, pods: str | Path | None) -> tuple[Path, Path]:
    """(pod list, GPU node list) of a trace directory (``DIR/csv`` or ``DIR``); ``pods`` is a file
    name in it, with or without ``.csv``, or a path."""
    root = Path(trace)
    csv_dir = root / "csv" if (root / "csv").is_dir() else root
    node_file = csv_dir / GPU_NODE_FILE
    if not node_file.is_file():
        raise TraceError(f"{node_file}: GPU node list not found (the experiment runs on the trace's GPU nodes)")
    name = str(pods) if pods is not None else DEFAULT_PODS
    candidates = [Path(name), csv_dir / name, csv_dir / f"{name}.csv", root / name]
    for c in candidates:
        if c.is_file():
            return c, node_file
    raise TraceError(f"{name}: pod list not found in {csv_dir}")


def load_workload(trace: str | Path, pods: str | Path | None = None) -> Workload:
    pod_file, node_file = resolve(trace, pods)
    nodes = tuple(read_nodes(node_file))
    plist = tuple(sorted(read_pods(pod_file), key=lambda p: p.name))
    name = pod_file.name[:-4] if pod_file.name.endswith(".csv") else pod_file.name
    return Workload(name, nodes, plist, tuple(request_of(p) for p in plist))


def gpu_nodes(nodes: tuple[TraceNode, ...]) -> GpuNodes:
    return GpuNodes([n.name for n in nodes], [n.model for n in nodes], [n.cpu_milli for n in nodes],
                    [n.memory_mib for n in nodes], [n.gpus for n in nodes])


def arrival_order(requests: tuple[GpuRequest, ...], capacity_milli: int, inflate: float, seed: int) -> list[int]:
    """Indices into ``requests`` (repeats for the copies) in arrival order (see the module docstring)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(requests)).tolist()
    demand = sum(r.total_milli for r in requests)
    target = inflate * capacity_milli
    if inflate <= 0 or demand == target:
        return order
    if demand > target:
        while demand > target and order:
            k = order.pop(int(rng.integers(len(order))))
            demand -= requests[k].total_milli
        return order
    while True:
        k = int(rng.integers(len(requests)))
        if demand + requests[k].milli > target:
            return order
        order.append(k)
        demand += requests[k].total_milli
