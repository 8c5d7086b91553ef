"""fgd plugin: Fragmentation Gradient Descent (Weng et al., USENIX ATC '23) — place a pod where
it increases the cluster's GPU fragmentation least.

A node's fragmentation is FGD's measure against the workload's *typical pods*
(``rules/gpu_frag``: the expected free GPU share that a typical pod could not use). For each
node where the pod fits, the plugin compares the node's fragmentation before and after the
placement::

    score = int(100 · sigmoid((frag_before − frag_after) / 1000))      (milli-GPU)

For a pod that takes a share of one GPU, every device with room is tried and the node scores
its best device; that device is the one the pod gets (the lowest on ties) — the device choice
follows the same measure. A whole-GPU pod takes idle devices (which ones does not change the
measure); a CPU-only pod changes only the node's free CPU, which can still make the node's free
GPUs unusable for typical pods (the measure sees that).

Typical pods come from the workload: in the experiment protocol (``tidesched experiment``) the
pod list; in a cluster or a simulation, the most recent pods the scheduler knows.

Arguments
    ``fgd.weight`` (1): the score's weight.
    ``fgd.popularity`` (95): the typical pods are the most frequent distinct requests covering
    this per cent of the pods (the paper's setting).
    ``fgd.cpuPods`` (true): count CPU-only pods among the typical pods (the paper does).
    ``fgd.window`` (1000): how many of the most recent pods make the workload in a cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.framework.arguments import ConfigError
from tidesched.model.gpu_nodes import FULL
from tidesched.plugins.gpu_policy import MAX_NODE_SCORE, GpuPolicy
from tidesched.rules import gpu_frag

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.gpu_nodes import GpuNodes, GpuRequest
    from tidesched.plugins.gpu_view import SessionGpuView


def _score(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    return np.floor(MAX_NODE_SCORE / (1.0 + np.exp(-(before - after) / FULL)))


class FgdPlugin(GpuPolicy):
    name = "fgd"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.popularity = arguments.get_float("fgd.popularity", gpu_frag.DEFAULT_POPULARITY)
        self.cpu_pods = arguments.get_bool("fgd.cpuPods", True)
        self.window = arguments.get_int("fgd.window", 1000)
        if not 0 < self.popularity <= 100:
            raise ConfigError(f"fgd: fgd.popularity must be in (0, 100], got {self.popularity}",
                              field="arguments['fgd.popularity']")
        if self.window < 1:
            raise ConfigError(f"fgd: fgd.window must be at least 1, got {self.window}", field="arguments['fgd.window']")

    def typical(self, shapes: "dict[gpu_frag.PodShape, float] | list[gpu_frag.PodShape]") -> gpu_frag.TypicalPods:
        """The typical pods of a workload (shapes with counts, or one shape per pod)."""
        return gpu_frag.typical_pods(shapes, self.popularity, gpu_frag.DEFAULT_STEP, self.cpu_pods)

    def prepare(self, ssn: "Session", view: "SessionGpuView") -> None:
        from tidesched.plugins.gpu_view import recent_shapes

        view.nodes.set_typical(self.typical(recent_shapes(ssn, self.window)))

    def node_scores(self, nodes: "GpuNodes", req: "GpuRequest", rows: np.ndarray) -> np.ndarray:
        return self.score_rows(nodes, req, rows)[0]

    def score_rows(self, nodes: "GpuNodes", req: "GpuRequest", rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        tp = nodes.typical
        none = np.full(len(rows), -1, dtype=np.int64)
        if tp is None or not len(tp):
            return np.zeros(len(rows)), none
        access = nodes.tp_access[rows]
        before = nodes.frag[rows]
        cpu_after = nodes.cpu_free[rows] - req.cpu
        small, count, total = nodes.small[rows], nodes.count[rows], nodes.total[rows]
        if req.shared:
            free = nodes.dev_free[rows]  # (R, W): try the pod on every device
            room = free >= req.milli
            d_small, d_count = gpu_frag.device_delta(free, free - req.milli, tp)  # (R, W, T)
            after = gpu_frag.frag_amount(
                tp, access[:, None, :], cpu_after[:, None], (total - req.milli)[:, None],
                small[:, None, :] + d_small, count[:, None, :] + d_count,
            )
            per_device = np.where(room, _score(before[:, None], after), -1.0)
            device = per_device.argmax(axis=1)
            return per_device.max(axis=1), np.where(room.any(axis=1), device, -1)
        if req.needs_gpu:
            d_small, d_count = gpu_frag.device_delta(np.int64(FULL), np.int64(0), tp)
            k = req.gpus
            after = gpu_frag.frag_amount(tp, access, cpu_after, total - k * FULL, small + k * d_small, count + k * d_count)
        else:
            after = gpu_frag.frag_amount(tp, access, cpu_after, total, small, count)
        return _score(before, after), none
