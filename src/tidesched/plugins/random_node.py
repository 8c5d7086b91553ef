"""random plugin (config name ``random``): the FGD paper's Random baseline — any node where the
pod fits, uniformly, and for a shared pod any device with room (``random.deviceSelect``,
default ``random``).

Its score is a fresh draw per pod: ``random.weight`` × a uniform number in [0, 100) per node
where the pod fits, so the best node is any of them with equal chance (the authors' plugin
draws one node per pod and scores it 100, the rest 0). The experiment draws from the run's
seeded stream; a scheduling session from a stream seeded by ``random.seed`` (0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.plugins.gpu_policy import RANDOM, GpuPolicy

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.model.gpu_nodes import GpuNodes, GpuRequest


class RandomPlugin(GpuPolicy):
    name = "random"
    default_device_select = RANDOM

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.seed = arguments.get_int("random.seed", 0)

    draws = True

    def node_scores(self, nodes: "GpuNodes", req: "GpuRequest", rows: np.ndarray) -> np.ndarray:
        return np.zeros(len(rows))  # the draw comes per pod (``draw``), not per node state

    def session_seed(self) -> int:
        return self.seed

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.random(n) * 100.0
