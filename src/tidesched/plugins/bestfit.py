"""bestfit plugin: the FGD paper's Best Fit baseline — prefer the node the pod leaves with the
least free CPU and GPU (both normalised by the largest node's: 128 CPUs, 8 GPUs, weighted ½
each)::

    score = int(100 · (1 − ½ (cpu_free − cpu) / 128000 − ½ (gpu_free − gpu) / 8000))

(milli-CPU and milli-GPU, the node's free GPU share summed over its devices). The authors'
plugin min-max normalises the scores over the candidates afterwards; that keeps their order
and ties, so it is left out. A shared pod takes the tightest-fitting device
(``bestfit.deviceSelect``, see ``gpu_policy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.plugins.gpu_policy import MAX_NODE_SCORE, MAX_SPEC_CPU, MAX_SPEC_GPU, GpuPolicy

if TYPE_CHECKING:
    from tidesched.model.gpu_nodes import GpuNodes, GpuRequest


class BestFitPlugin(GpuPolicy):
    name = "bestfit"

    def node_scores(self, nodes: "GpuNodes", req: "GpuRequest", rows: np.ndarray) -> np.ndarray:
        cpu_left = (nodes.cpu_free[rows] - req.cpu) / MAX_SPEC_CPU * 0.5
        gpu_left = (nodes.dev_free[rows].sum(axis=1) - req.total_milli) / MAX_SPEC_GPU * 0.5
        return np.trunc((1.0 - (cpu_left + gpu_left)) * MAX_NODE_SCORE)
