"""dotprod plugin: the FGD paper's DotProd baseline (Tetris-like alignment) — prefer the node
whose free resources align least with the pod's request. With the paper's settings
(``dotprod.dimExtMethod: merge``, ``dotprod.normMethod: max``) the node's free
``[cpu, gpu summed over devices]`` and the pod's ``[cpu, gpu]`` are both divided by the largest
node's ``[128000, 8000]`` (milli) and::

    score = int(100 · (1 − (node · pod) / 2))

``dotprod.normMethod: node`` divides both by the node's capacity instead; ``pod`` by the pod's
request, then takes ``tanh(dot / 2 / 10)``. Only ``merge`` (GPUs as one dimension) is
implemented. A shared pod takes the tightest-fitting device (``dotprod.deviceSelect``, as the
paper's runs: ``best``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.framework.arguments import ConfigError
from tidesched.model.gpu_nodes import FULL
from tidesched.plugins.gpu_policy import MAX_NODE_SCORE, MAX_SPEC_CPU, MAX_SPEC_GPU, GpuPolicy

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.model.gpu_nodes import GpuNodes, GpuRequest

NORMS = ("max", "node", "pod")


def _norm(values: np.ndarray, by: np.ndarray) -> np.ndarray:
    return np.where(by > 0, values / np.where(by > 0, by, 1), 0.0)


class DotProdPlugin(GpuPolicy):
    name = "dotprod"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        dim = arguments.get_str("dotprod.dimExtMethod", "merge")
        if dim != "merge":
            raise ConfigError(f"dotprod: dotprod.dimExtMethod {dim!r} is not implemented (only merge)",
                              field="arguments['dotprod.dimExtMethod']")
        self.norm = arguments.get_str("dotprod.normMethod", "max")
        if self.norm not in NORMS:
            raise ConfigError(f"dotprod: dotprod.normMethod must be one of {', '.join(NORMS)}, got {self.norm!r}",
                              field="arguments['dotprod.normMethod']")

    def node_scores(self, nodes: "GpuNodes", req: "GpuRequest", rows: np.ndarray) -> np.ndarray:
        cpu_free = nodes.cpu_free[rows].astype(float)
        gpu_free = nodes.dev_free[rows].sum(axis=1).astype(float)
        cpu, gpu = float(req.cpu), float(req.total_milli)
        if self.norm == "max":
            dot = (cpu_free / MAX_SPEC_CPU) * (cpu / MAX_SPEC_CPU) + (gpu_free / MAX_SPEC_GPU) * (gpu / MAX_SPEC_GPU)
            cur = dot / 2
        elif self.norm == "node":
            cap_cpu = nodes.cpu_cap[rows].astype(float)
            cap_gpu = (nodes.dev_count[rows] * FULL).astype(float)
            dot = _norm(cpu_free, cap_cpu) * _norm(np.full_like(cap_cpu, cpu), cap_cpu)
            dot = dot + _norm(gpu_free, cap_gpu) * _norm(np.full_like(cap_gpu, gpu), cap_gpu)
            cur = dot / 2
        else:
            n_cpu = cpu_free / cpu if cpu > 0 else np.zeros_like(cpu_free)
            n_gpu = gpu_free / gpu if gpu > 0 else np.zeros_like(gpu_free)
            dot = n_cpu * (1.0 if cpu > 0 else 0.0) + n_gpu * (1.0 if gpu > 0 else 0.0)
            cur = np.tanh(dot / 2 / 10)
        return np.trunc(MAX_NODE_SCORE * (1 - cur))
