"""gpuclustering plugin: the FGD paper's GPU Clustering baseline — keep pods of one kind
together: a GPU pod prefers nodes that hold only pods of its kind (``share-gpu``, ``1-gpu``,
``2-gpu``, …), then nodes holding its kind among others, then nodes holding no GPU pod, then
the rest; within each band, the node with less GPU share free. As the authors' plugin, in
integer arithmetic (``left``: the node's free milli-GPU)::

    base = 25 · (8000 − left) // 8000
    only its kind: base + 75 · its kind among others: base + 50 · none: base + 25 · else: base

A pod asking for no GPU scores 0 everywhere (the tie-break places it). A shared pod takes the
tightest-fitting device (``gpuclustering.deviceSelect``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.plugins.gpu_policy import MAX_NODE_SCORE, MAX_SPEC_GPU, GpuPolicy

if TYPE_CHECKING:
    from tidesched.model.gpu_nodes import GpuNodes, GpuRequest


class GpuClusteringPlugin(GpuPolicy):
    name = "gpuclustering"

    def node_scores(self, nodes: "GpuNodes", req: "GpuRequest", rows: np.ndarray) -> np.ndarray:
        if not req.needs_gpu:
            return np.zeros(len(rows))
        left = nodes.dev_free[rows].sum(axis=1)
        base = (MAX_NODE_SCORE // 4) * (MAX_SPEC_GPU - left) // MAX_SPEC_GPU
        aff = nodes.affinity[rows]
        kinds = (aff > 0).sum(axis=1)
        mine = aff[:, req.affinity] > 0
        quarter = MAX_NODE_SCORE // 4
        band = np.where(mine, np.where(kinds == 1, 3 * quarter, 2 * quarter), np.where(kinds == 0, quarter, 0))
        return (base + band).astype(float)
