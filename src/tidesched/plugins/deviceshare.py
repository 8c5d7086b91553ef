"""deviceshare plugin (Volcano ``plugins/deviceshare``) with NVIDIA vGPU (``deviceshare.VGPUEnable``).

Pods ask for GPU shares with ``volcano.sh/vgpu-number``, ``volcano.sh/vgpu-memory`` (MiB) or
``volcano.sh/vgpu-memory-percentage``, and ``volcano.sh/vgpu-cores`` (percent); nodes register
their devices in ``volcano.sh/node-vgpu-register`` (see :mod:`tidesched.model.vgpu`). The
devices and what each holds are the node table's (:mod:`tidesched.model.devices`).

Arguments (Volcano's names)
    ``deviceshare.VGPUEnable`` (false): turn vGPU sharing on; without it the plugin registers
    nothing and vGPU pods are plain scalar requests (the devices are still counted).
    ``deviceshare.SchedulePolicy`` ("", ``binpack`` or ``spread``): the order devices are tried
    in on a node and what the score rewards (binpack: devices whose memory is most used;
    spread: devices no pod holds). Volcano silently treats any other value as ""; tidesched
    refuses it at load.
    ``deviceshare.ScheduleWeight`` (0): the score's weight; 0 registers no score, as Volcano.
    ``deviceshare.NodeLockEnable``: accepted and not needed (the devices go to the pod with
    its binding, in one API call, so no node lock has to guard a patch-then-bind).
    ``deviceshare.GPUSharingEnable``, ``GPUNumberEnable``, ``AscendMindClusterVNPUEnable``,
    ``AscendHAMiVNPUEnable``: the other device kinds, not implemented; true is refused at load.
    ``deviceshare.KnownGeometriesCMName``/``Namespace``: accepted; tidesched reads no device
    ConfigMap (vGPU MIG mode falls back to hami-core, as Volcano without that ConfigMap).

Hooks (only with ``VGPUEnable``)
    Predicate — a vGPU pod needs, on the node, devices for every container as Volcano's walk
        takes them, once releasing pods are gone (placing it *now* also needs the room now:
        the node table's idle fit checks that, see ``NodeTable.fits_cached``). A node failing
        says why: ``no device with 60 % compute free; best has 40 %``, ``no device with 8000
        MiB memory free; best has 4096 MiB``, ``node has 4 GPUs, pod asks for 8``, ...
        Nodes without registered devices fail a vGPU pod (Volcano lets it through to the
        node's scalar resources, where a device plugin that did not register would fail it).
    NodeOrder — ``ScheduleWeight`` × Volcano's device score rounded (see
        ``DeviceTable.score_rows``); spread rewards a device the pod would be alone on, as
        Volcano v1.12 does (master's check, made after the tentative add, never rewards).
    Binding — the devices chosen at allocate go with the pod's binding as Volcano's vGPU
        device plugin reads them (``volcano.sh/vgpu-ids-new``, ``devices-to-allocate``,
        ``vgpu-node``, ``bind-phase: allocating``, ``vgpu-time``, ``bind-time``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tidesched.framework.arguments import ConfigError
from tidesched.framework.plugin import NodeFailure, Plugin, PredicateResult, RowFn
from tidesched.framework.reasons import NO_VGPU_DEVICES, device_reason
from tidesched.model.devices import BINPACK, FUTURE, SPREAD
from tidesched.model.vgpu import bind_annotations

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo

VGPU_ENABLE = "deviceshare.VGPUEnable"
SCHEDULE_POLICY = "deviceshare.SchedulePolicy"
SCHEDULE_WEIGHT = "deviceshare.ScheduleWeight"
NODE_LOCK_ENABLE = "deviceshare.NodeLockEnable"
NOT_IMPLEMENTED = (
    "deviceshare.GPUSharingEnable",
    "deviceshare.GPUNumberEnable",
    "deviceshare.AscendMindClusterVNPUEnable",
    "deviceshare.AscendHAMiVNPUEnable",
)
IGNORED = ("deviceshare.KnownGeometriesCMName", "deviceshare.KnownGeometriesCMNamespace")


class DeviceSharePlugin(Plugin):
    name = "deviceshare"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.vgpu = arguments.get_bool(VGPU_ENABLE, False)
        self.policy = arguments.get_str(SCHEDULE_POLICY, "")
        self.weight = arguments.get_int(SCHEDULE_WEIGHT, 0)
        arguments.get_bool(NODE_LOCK_ENABLE, False)
        for key in IGNORED:
            arguments.get_str(key, "")
        if self.policy not in ("", BINPACK, SPREAD):
            raise ConfigError(
                f'deviceshare: {SCHEDULE_POLICY} must be "binpack" or "spread", got {self.policy!r} '
                "(Volcano would silently use neither)",
                field=f"arguments[{SCHEDULE_POLICY!r}]",
            )
        for key in NOT_IMPLEMENTED:
            if arguments.get_bool(key, False):
                raise ConfigError(
                    f"deviceshare: {key} is not implemented by tidesched (only {VGPU_ENABLE})",
                    field=f"arguments[{key!r}]",
                )

    def on_session_open(self, ssn: "Session") -> None:
        if not self.vgpu:
            return
        table = ssn.table
        devices = table.devices
        if devices is not None:
            devices.policy = self.policy
            devices.enforced = True
        n = len(table)
        all_pass = np.ones(n, dtype=bool)

        def fit(task: "TaskInfo", rows: np.ndarray | None) -> np.ndarray:
            req = task.pod.vgpu
            size = n if rows is None else len(rows)
            if req is None:
                return np.ones(size, dtype=bool)
            if devices is None:
                return np.zeros(size, dtype=bool)
            return devices.fit_rows(req, FUTURE, rows, table.tasks)

        def fit_key(task: "TaskInfo") -> Any:
            req = task.pod.vgpu
            return ("deviceshare", "none") if req is None else ("deviceshare", "fit", req.shape())

        def predicate(task: "TaskInfo") -> PredicateResult:
            req = task.pod.vgpu
            if req is None:
                return PredicateResult(all_pass.copy(), [])
            passed = table.row_cached(fit_key(task), lambda rows: fit(task, rows)).copy()
            failing = np.flatnonzero(~passed)
            failures: list[NodeFailure] = []
            if len(failing):
                if devices is None:
                    failures.append(NodeFailure(NO_VGPU_DEVICES, ~passed, True))
                else:
                    # Reasons worded alike (``no usable GPU`` of nodes with 2 or 4 devices) share one entry.
                    worded: dict[tuple[str, bool], np.ndarray] = {}
                    for reason, mask in devices.reasons(req, FUTURE, failing, table.tasks):
                        key = (device_reason(reason), reason.unresolvable)
                        nodes = worded.setdefault(key, np.zeros(n, dtype=bool))
                        nodes[failing[mask]] = True
                    failures = [NodeFailure(text, nodes, unres) for (text, unres), nodes in worded.items()]
            return PredicateResult(passed, failures)

        ssn.add_fn("predicate", self.name, predicate)
        ssn.add_row_fn("predicate", self.name, RowFn(fit_key, fit))

        if self.weight > 0:
            weight = float(self.weight)
            policy = self.policy

            def scores(task: "TaskInfo", rows: np.ndarray | None) -> np.ndarray:
                req = task.pod.vgpu
                size = n if rows is None else len(rows)
                if req is None or devices is None:
                    return np.zeros(size)
                return devices.score_rows(req, policy, rows, table.tasks) * weight

            def score_key(task: "TaskInfo") -> Any:
                req = task.pod.vgpu
                if req is None:
                    return ("deviceshare", "none")
                return ("deviceshare", "score", policy, weight, req.shape())

            def node_order(task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
                if task.pod.vgpu is None:
                    return np.zeros(len(idx))
                return table.row_cached(score_key(task), lambda rows: scores(task, rows))[idx]

            ssn.add_fn("node_order", self.name, node_order)
            ssn.add_row_fn("node_order", self.name, RowFn(score_key, scores))

        def annotate(task: "TaskInfo") -> dict[str, str] | None:
            a = task.devices
            if task.pod.vgpu is None or a is None or a.node != task.node_name:
                return None
            return bind_annotations(a, ssn.now)

        ssn.annotate_bind = annotate
