"""gpupacking plugin: the FGD paper's GPU Packing baseline — put GPU pods first on partly used
GPUs, then on nodes already in use, then on idle nodes (fewest idle GPUs first). Scores as the
authors' plugin, in integer arithmetic:

* a node whose GPUs are all idle: ``max(33 − idle GPUs, idle GPUs)``;
* a node in use where the pod would take idle GPUs: ``max(50 − idle GPUs taken, 33)``;
* where it takes only partly used GPUs: ``max(100 − Σ ⌊free‰ of those GPUs / 10⌋ / 10, 50)``
  (the GPUs the pod takes: the least free first, among those with room);
* a pod asking for no GPU: 0 everywhere (so the tie-break places it).

A shared pod takes the tightest-fitting device (``gpupacking.deviceSelect``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.model.gpu_nodes import FULL
from tidesched.plugins.gpu_policy import MAX_NODE_SCORE, GpuPolicy

if TYPE_CHECKING:
    from tidesched.model.gpu_nodes import GpuNodes, GpuRequest


class GpuPackingPlugin(GpuPolicy):
    name = "gpupacking"

    def node_scores(self, nodes: "GpuNodes", req: "GpuRequest", rows: np.ndarray) -> np.ndarray:
        if not req.needs_gpu:
            return np.zeros(len(rows))
        free = nodes.dev_free[rows]
        valid = nodes.valid[rows]
        idle = ((free == FULL) & valid).sum(axis=1)
        all_idle = idle == nodes.dev_count[rows]
        # The devices the pod takes: least free first (ties: lower index), among those with room.
        room = (free >= req.milli) & valid
        key = np.where(room, free, FULL + 1)
        order = np.argsort(key, axis=1, kind="stable")[:, : req.gpus]
        taken = np.take_along_axis(free, order, axis=1)
        taken_idle = (taken == FULL).sum(axis=1)
        ratio = (taken * 100 // FULL).sum(axis=1)
        out = np.where(
            all_idle,
            np.maximum(MAX_NODE_SCORE // 3 - idle, idle),
            np.where(taken_idle > 0, np.maximum(MAX_NODE_SCORE // 2 - taken_idle, MAX_NODE_SCORE // 3),
                     np.maximum(MAX_NODE_SCORE - ratio // 10, MAX_NODE_SCORE // 2)),
        )
        return out.astype(float)
