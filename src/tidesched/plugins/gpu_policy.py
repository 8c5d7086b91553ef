"""The base of the GPU placement policies of the FGD paper (Weng et al., USENIX ATC '23): FGD
and its baselines Random, DotProd, GPU Clustering, GPU Packing and Best Fit, one plugin
module each (``fgd``, ``random_node``, ``dotprod``, ``gpuclustering``, ``gpupacking``,
``bestfit``; config names ``fgd``, ``random``, ``dotprod``, ``gpuclustering``, ``gpupacking``,
``bestfit``).

A policy scores nodes for a pod and, for a pod that takes a share of one GPU, chooses the
device. Both read a :class:`~tidesched.model.gpu_nodes.GpuNodes` (free CPU, memory and
per-device GPU share of each node) and are *row-local*: a node's score depends on that node
alone, so a caller may keep scores per request shape and recompute only the nodes that
changed. Scores follow the paper's plugins: kube-scheduler's integer scores 0–100 (the
authors' Go code truncates), times the plugin's weight; nodes that tie are the caller's to
break (the first in name order, as tidesched always does; the experiment can also draw among
them, as upstream kube-scheduler does).

Arguments common to every policy (``<name>`` is the config name):
    ``<name>.weight`` (1): the score's weight (0 registers no score).
    ``<name>.deviceSelect`` (``best``; FGD has its own): which device a shared pod gets among
    those with room — ``best``: least free share (tightest fit), ``worst``: most free share,
    ``random``: any, uniformly (the paper's ``gpuSelMethod``). Ties go to the lower device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from tidesched.framework.arguments import ConfigError
from tidesched.framework.plugin import Plugin
from tidesched.model.gpu_nodes import FULL

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.gpu_nodes import GpuNodes, GpuRequest
    from tidesched.model.infos import TaskInfo
    from tidesched.plugins.gpu_view import SessionGpuView

MAX_NODE_SCORE = 100
MAX_SPEC_CPU = 128_000  # the paper's normalisation: the largest node's CPU (milli) …
MAX_SPEC_GPU = 8_000  # … and GPUs (milli-GPU)
BEST, WORST, RANDOM = "best", "worst", "random"
DEVICE_SELECTS = (BEST, WORST, RANDOM)


class GpuPolicy(Plugin):
    """A GPU placement policy (see the module docstring). Subclasses implement
    :meth:`node_scores` and, to choose the device themselves, :meth:`score_rows`."""

    name: ClassVar[str] = ""
    default_device_select: ClassVar[str] = BEST
    draws: ClassVar[bool] = False  # adds a fresh random draw per pod (see ``draw``)

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.weight = arguments.get_int(f"{self.name}.weight", 1)
        self.device_select = arguments.get_str(f"{self.name}.deviceSelect", self.default_device_select)
        if self.device_select not in DEVICE_SELECTS:
            raise ConfigError(
                f"{self.name}: {self.name}.deviceSelect must be one of {', '.join(DEVICE_SELECTS)}, "
                f"got {self.device_select!r}",
                field=f"arguments['{self.name}.deviceSelect']",
            )

    # -- in a session -----------------------------------------------------------------------

    def on_session_open(self, ssn: "Session") -> None:
        """NodeOrder: ``<name>.weight`` × the policy's score of each candidate node, over the
        session's nodes as ``plugins/gpu_view`` reads them (kept in step with the session's
        placements). On nodes with vGPU devices (``deviceshare``), a shared pod is offered the
        device the policy chose for it there first, a whole-device pod the lowest-numbered
        idle devices (the device walk still checks them); of several placement plugins, the
        heaviest chooses."""
        if not self.weight:
            return
        from tidesched.plugins.gpu_view import SessionGpuView, request_of

        view = SessionGpuView(ssn.table)
        self.prepare(ssn, view)
        weight = float(self.weight)
        rng = np.random.default_rng(self.session_seed())
        chosen: dict[str, dict[int, int]] = {}  # task uid → row → device its score chose

        def node_order(task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
            nodes = view.sync()
            req = request_of(task)
            rows = np.asarray(idx, dtype=np.int64)
            scores, devices = self.score_rows(nodes, req, rows)
            if req.shared and view.devices is not None:
                chosen[task.uid] = dict(zip(rows.tolist(), devices.tolist()))
            if self.draws:
                scores = scores + self.draw(rng, len(idx))
            return weight * scores

        ssn.add_fn("node_order", self.name, node_order)
        table = view.devices
        if table is None or getattr(table.prefer, "weight", -1) >= weight:
            return

        def prefer(i: int, _vgpu: object, task: "TaskInfo | None") -> list[int] | None:
            if task is None:
                return None
            req = request_of(task)
            if not req.needs_gpu:
                return None
            if not req.shared:  # whole devices: the lowest-numbered idle ones, as the paper's
                return view.sync().exclusive(i, req.gpus) or None
            device = chosen.get(task.uid, {}).get(i, -1)
            device = self.pick_device(view.sync(), i, req, device, rng)
            return [device] if device >= 0 else None

        prefer.weight = weight  # type: ignore[attr-defined]
        table.prefer = prefer

    def prepare(self, ssn: "Session", view: "SessionGpuView") -> None:
        """What a policy reads of the session besides the nodes (FGD: the typical pods)."""

    def session_seed(self) -> int:
        return 0

    # -- what a policy computes -------------------------------------------------------------

    def node_scores(self, nodes: "GpuNodes", req: "GpuRequest", rows: np.ndarray) -> np.ndarray:
        """Scores (0–100, before the weight) of ``rows``, all of which fit ``req``."""
        raise NotImplementedError

    def score_rows(self, nodes: "GpuNodes", req: "GpuRequest", rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Scores of ``rows`` and, for a shared pod, the device each would get (-1: none, or
        chosen only at placement, as ``random`` does)."""
        scores = self.node_scores(nodes, req, rows)
        if req.shared and self.device_select != RANDOM:
            return scores, select_device(nodes, req, rows, self.device_select)
        return scores, np.full(len(rows), -1, dtype=np.int64)

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """A policy that ``draws``: its per-pod random scores for ``n`` candidate nodes."""
        return np.zeros(n)

    def pick_device(self, nodes: "GpuNodes", i: int, req: "GpuRequest", chosen: int, rng: np.random.Generator) -> int:
        """The device a shared pod takes on node ``i`` (``chosen``: what ``score_rows`` said)."""
        if not req.shared:
            return -1
        if chosen >= 0:
            return chosen
        if self.device_select == RANDOM:
            room = np.flatnonzero(nodes.dev_free[i] >= req.milli)
            return int(room[rng.integers(len(room))])
        return int(select_device(nodes, req, np.array([i]), self.device_select)[0])


def select_device(nodes: "GpuNodes", req: "GpuRequest", rows: np.ndarray, how: str) -> np.ndarray:
    """Per row, the device a shared pod gets by ``best`` or ``worst`` fit (-1 where none fits)."""
    free = nodes.dev_free[rows]
    room = free >= req.milli
    if how == WORST:
        key = np.where(room, free, -1)
        pick = key.argmax(axis=1)
    else:
        key = np.where(room, free, FULL + 1)
        pick = key.argmin(axis=1)
    return np.where(room.any(axis=1), pick, -1)


__all__ = ["GpuPolicy", "select_device", "MAX_NODE_SCORE", "MAX_SPEC_CPU", "MAX_SPEC_GPU", "BEST", "WORST", "RANDOM"]
