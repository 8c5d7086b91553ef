"""The per-device GPU model: each node's vGPU devices as integer arrays (CARD-1, issue 26).

One row per node-table row, one column per device slot (``width`` = the most devices any node
registers; rows with fewer devices leave the rest invalid). Amounts are exact integers: memory
in MiB, compute in milli-GPU (1000 = a whole device; Volcano's ``vgpu-cores`` percent × 10),
and the count of pod allocations on the device (Volcano's ``UsedNum``, limited by the split
count the device plugin registers).

Two usage states are kept, as the node table keeps ``used`` and ``future_idle``:

* ``now`` — what the devices hold: running, bound and allocated pods and pods being deleted
  (their devices are busy until they are gone, as their node resources are, DEC-1);
* ``fut`` — what they will hold once releasing pods are gone, with pipelined pods in.

A pod is *placed now* (allocate) only on devices with room in both states, so a pipelined
pod's reservation is never taken; it is *pipelined* on devices with room in ``fut``. Volcano's
device view forgets a terminating pod's devices at once; tidesched keeps them until the pod is
gone, so no device is ever over-committed (checked by the simulator's ``REL-2 device`` rule).

The device choice for one pod on one node (:meth:`DeviceTable.choose`) is Volcano's greedy walk
(``checkNodeGPUSharingPredicateAndScore``): per container, devices in the policy's order —
``binpack``: most memory used first, ``spread``: fewest pods first, none: highest index first —
each taken when it has a free share (used < split), the memory (``memory`` MiB or ``percent``
of the device), the compute (used + cores ≤ 100 %), is unshared for a 100 % request, is not
full for a 0 % request, and passes the pod's type, UUID and PodGroup-spread filters. Fit and
score for every node at once (:meth:`fit_rows`, :meth:`score_rows`) are the same walk
vectorised over rows for the usual one-container request; several containers are walked per row.

Which devices a placed pod holds lives on its ``TaskInfo.devices`` (a
:class:`~tidesched.model.vgpu.PodAssignment`): read from the pod's allocation annotation, or
chosen here when the pod is placed without one (the session's allocate, or a bound pod whose
annotation is missing or names devices the node does not have: the node's first usable
devices, so that the count does not depend on the order pods were seen in). The node table calls
:meth:`add` and :meth:`remove` from its own ``add_task``/``remove_task``, so every path that
moves a task (the cache, sessions, statements and their discards, dry runs) keeps the devices
in step with the node rows, and row caches see a device change as the row change it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tidesched.model.status import TaskStatus
from tidesched.model.vgpu import (
    FULL_CORES,
    MILLI_PER_PERCENT,
    NVIDIA,
    ContainerRequest,
    DeviceUse,
    NodeDevices,
    PodAssignment,
    VgpuRequest,
)

if TYPE_CHECKING:
    from tidesched.model.infos import TaskInfo
    from tidesched.model.objects import Node

FULL = 1000  # milli-GPU compute of one device
MEM, CORE, NUM = 0, 1, 2

BINPACK = "binpack"
SPREAD = "spread"
POLICIES = ("", BINPACK, SPREAD)
BINPACK_MULTIPLIER = 100.0
SPREAD_MULTIPLIER = 100.0

NOW, FUTURE, IDLE = "now", "future", "idle"

# Task statuses whose devices count now / once releasing pods are gone.
_FUTURE_ONLY = TaskStatus.PIPELINED
_NOW_ONLY = TaskStatus.RELEASING
# Placements a session makes: their devices are chosen when they are made.
_FRESH = frozenset({TaskStatus.ALLOCATED, TaskStatus.PIPELINED})


# Why a node fails a vGPU request (``Reason.kind``), in the walk's order of checks;
# ``framework.reasons.device_reason`` words each for a person.
NO_DEVICES = "no-devices"  # the node registers none
MODE = "mode"  # the pod asks for another vGPU mode than the node's
TOO_FEW = "too-few"  # a container asks for more devices than the node has
UNUSABLE = "unusable"  # too few healthy devices of an NVIDIA type passing the pod's filters
NO_SHARE = "no-share"  # too few of those with a free share (fewer pods than the split count)
NOT_IDLE = "not-idle"  # a 100 % request: too few of those that no pod holds
COMPUTE = "compute"  # too few with the compute asked free
MEMORY = "memory"  # too few with the memory asked free
GROUP_SPREAD = "group-spread"  # each device holds a pod of the pod's PodGroup (vgpu-podgroup-policy spread)
COMBINATION = "combination"  # enough for each check alone, not for all at once
# Evicting pods frees none of these.
UNRESOLVABLE = frozenset({NO_DEVICES, MODE, TOO_FEW, UNUSABLE})


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a node fails a request, as data: the first check the first container that does not
    fit fails, and what the words need — devices the container asks for (``need``), that pass
    the check (``have``), the node registers (``total``); the most compute (milli-GPU) or memory
    (MiB) free on a device with a free share (``best``) and what was asked (``want``: milli-GPU,
    MiB or, with ``percent``, percent of each device's memory); the modes or the PodGroup
    (``names``). Fields a kind's words do not use stay at their defaults."""

    kind: str
    need: int = 0
    have: int = 0
    total: int = 0
    best: int = 0
    want: int = 0
    percent: bool = False
    names: tuple[str, ...] = ()

    @property
    def unresolvable(self) -> bool:
        return self.kind in UNRESOLVABLE


def _reason(kind: str, c: ContainerRequest | None = None, have: int = 0, total: int = 0, best: int = 0) -> Reason:
    """The Reason of ``kind`` for container ``c`` with the fields its words use (both the
    per-row walk and the vectorised path make them here, so equal causes give equal data)."""
    if kind in (NO_DEVICES, COMBINATION) or c is None:
        return Reason(kind)
    if kind == TOO_FEW:
        return Reason(kind, need=c.number, total=total)
    if kind in (UNUSABLE, NO_SHARE, NOT_IDLE):
        return Reason(kind, need=c.number, have=have, total=total)
    if kind == COMPUTE:
        return Reason(kind, need=c.number, have=have, best=best, want=max(c.core_milli, 1))
    if kind == MEMORY:
        if c.percent is not None:
            return Reason(kind, need=c.number, have=have, best=best, want=c.percent, percent=True)
        return Reason(kind, need=c.number, have=have, best=best, want=c.memory)
    raise ValueError(kind)


class DeviceTable:
    """Device arrays over a node table's rows (see the module docstring)."""

    def __init__(self, nodes: Sequence["Node"], registered: Sequence[NodeDevices | None]) -> None:
        n = len(nodes)
        self.names = [node.name for node in nodes]
        width = max((len(r.devices) for r in registered if r is not None), default=0)
        self.width = width
        self.count = np.zeros(n, dtype=np.int64)
        self.memory = np.zeros((n, width), dtype=np.int64)
        self.split = np.zeros((n, width), dtype=np.int64)
        self.healthy = np.zeros((n, width), dtype=bool)
        self.nvidia = np.zeros((n, width), dtype=bool)
        self.valid = np.zeros((n, width), dtype=bool)
        self.uuids: list[tuple[str, ...]] = []
        self.types: list[tuple[str, ...]] = []
        self.modes: list[str] = []
        self.slot_of: list[dict[str, int]] = []
        for i, reg in enumerate(registered):
            devs = reg.devices if reg is not None else ()
            self.count[i] = len(devs)
            self.uuids.append(tuple(d.uuid for d in devs))
            self.types.append(tuple(d.type for d in devs))
            self.modes.append(reg.mode if reg is not None else "")
            slots: dict[str, int] = {}
            for j, d in enumerate(devs):
                self.memory[i, j] = d.memory
                self.split[i, j] = d.split
                self.healthy[i, j] = d.healthy
                self.nvidia[i, j] = NVIDIA in d.type
                self.valid[i, j] = True
                slots.setdefault(d.uuid, j)
            self.slot_of.append(slots)
        self.usable = self.valid & self.healthy & self.nvidia
        # Usage: [state][MEM|CORE|NUM] → (n, width) int64; ``now`` and ``fut`` start equal.
        self.now = np.zeros((3, n, width), dtype=np.int64)
        self.fut = np.zeros((3, n, width), dtype=np.int64)
        self._shared = False  # usage arrays shared with the table this one was copied from
        self.policy = ""  # the session's SchedulePolicy (deviceshare); "" in the cluster cache
        self.enforced = False  # a session with deviceshare.VGPUEnable: fits need device room
        # A session's placement plugin may say which devices a task tries first on a row
        # (plugins/gpu_policy: the device its score chose); the walk still checks each one.
        self.prefer: Callable[[int, VgpuRequest, "TaskInfo | None"], list[int] | None] | None = None

    @classmethod
    def build(cls, nodes: Sequence["Node"]) -> "DeviceTable | None":
        """The device table of ``nodes`` (a node table's rows), None when none registers vGPU."""
        registered = [getattr(node, "vgpu", None) for node in nodes]
        if not any(r is not None for r in registered):
            return None
        return cls(nodes, registered)

    def copy(self) -> "DeviceTable":
        """A table a session may change: the static arrays shared, the usage copied when either
        table first changes it (a session that places no vGPU pod copies nothing)."""
        new = DeviceTable.__new__(DeviceTable)
        new.__dict__.update(self.__dict__)
        new._shared = self._shared = True
        new.policy = ""
        new.enforced = False
        new.prefer = None
        return new

    def _own(self) -> None:
        if self._shared:
            self.now = self.now.copy()
            self.fut = self.fut.copy()
            self._shared = False

    # -- reading ------------------------------------------------------------------------

    def state(self, which: str, rows: np.ndarray | slice | int = slice(None)) -> np.ndarray:
        """Usage ``[MEM|CORE|NUM, rows, slots]`` in one state: ``now``, ``future`` (``fut``),
        or ``idle`` (the larger of both per device: what a pod placed now must leave room for)."""
        if which == FUTURE:
            return self.fut[:, rows]
        if which == NOW:
            return self.now[:, rows]
        return np.maximum(self.now[:, rows], self.fut[:, rows])

    def holds(self, i: int) -> bool:
        return bool(self.count[i])

    # -- accounting (called by the node table) -------------------------------------------

    def add(self, i: int, task: "TaskInfo", row_tasks: dict | None = None) -> None:
        """Charge a task placed on row ``i`` to its devices. A pod on the node keeps the devices
        it holds (``task.devices``, from its annotation or set when it was first counted); a
        task the session allocates or pipelines gets devices chosen now (the last choice of a
        discarded placement is never reused). A pod on the node whose allocation is missing or
        names devices the node does not register is counted on :meth:`unknown_devices`.
        ``task.devices`` is set to what is charged."""
        req: VgpuRequest | None = task.pod.vgpu
        if req is None or not self.count[i]:
            return
        status = task.status
        assignment = task.devices
        slots = None
        if assignment is not None and status not in _FRESH and assignment.node in ("", self.names[i]):
            slots = self._resolve(i, assignment)
        if not slots:
            if status in _FRESH:
                which = FUTURE if status == _FUTURE_ONLY else IDLE
                assignment = self.choose(i, req, which, task=task, rows_tasks=row_tasks)
            else:
                assignment = None
            assignment = assignment or self.unknown_devices(i, req)
            task.devices = assignment
            slots = self._resolve(i, assignment)
        self._apply(i, slots, status, 1)

    def remove(self, i: int, task: "TaskInfo") -> None:
        req = task.pod.vgpu
        assignment = task.devices
        if req is None or assignment is None or not self.count[i]:
            return
        slots = self._resolve(i, assignment)
        if slots:
            self._apply(i, slots, task.status, -1)

    def _resolve(self, i: int, assignment: PodAssignment) -> list[tuple[int, int, int]]:
        """(slot, MiB, milli-GPU) per device use the node knows (unknown UUIDs are skipped,
        as Volcano skips them)."""
        slot_of = self.slot_of[i]
        out = []
        for use in assignment.uses():
            j = slot_of.get(use.uuid)
            if j is not None:
                out.append((j, use.memory, use.cores * MILLI_PER_PERCENT))
        return out

    def _apply(self, i: int, slots: list[tuple[int, int, int]], status: TaskStatus, sign: int) -> None:
        self._own()
        states = (self.fut,) if status == _FUTURE_ONLY else (self.now,) if status == _NOW_ONLY else (self.now, self.fut)
        for arr in states:
            for j, mem, core in slots:
                arr[MEM, i, j] += sign * mem
                arr[CORE, i, j] += sign * core
                arr[NUM, i, j] += sign

    # -- the per-row walk (Volcano's greedy choice) --------------------------------------

    def _order(self, use: np.ndarray, i: int, policy: str) -> list[int]:
        n = int(self.count[i])
        if policy == BINPACK:
            mem = use[MEM, :n].tolist()
            return sorted(range(n), key=lambda j: (-mem[j], j))
        if policy == SPREAD:
            num = use[NUM, :n].tolist()
            return sorted(range(n), key=lambda j: (num[j], j))
        return list(range(n - 1, -1, -1))

    def _groups(self, i: int, task: "TaskInfo | None", rows_tasks: dict | None) -> list[set[str]]:
        """Per slot of row ``i``: the PodGroup keys of the pods holding it (for spread pods)."""
        out: list[set[str]] = [set() for _ in range(int(self.count[i]))]
        for t in (rows_tasks or {}).values():
            a = t.devices
            if a is None or t.status == _FUTURE_ONLY or t is task:
                continue
            key = _group_of(t)
            if not key:
                continue
            for j, mem, core in self._resolve(i, a):
                if mem > 0 or core > 0:
                    out[j].add(key)
        return out

    def walk(
        self, i: int, req: VgpuRequest, which: str, policy: str, rows_tasks: dict | None = None,
        task: "TaskInfo | None" = None, use: np.ndarray | None = None,
    ) -> tuple[list[list[int]], float, Reason | None]:
        """Volcano's device choice on row ``i`` in usage state ``which`` (or the given ``use``,
        [MEM|CORE|NUM, slots]): the slots per container, the device score (GPUScore summed),
        and why not when it does not fit."""
        use = (self.state(which, i) if use is None else use).copy()  # changed tentatively, container by container
        n = int(self.count[i])
        if not n:
            return [], 0.0, _reason(NO_DEVICES)
        if req.mode is not None and req.mode != self.modes[i]:
            return [], 0.0, Reason(MODE, names=(req.mode, self.modes[i]))
        groups = self._groups(i, task, rows_tasks) if req.spread_group else None
        picks: list[list[int]] = []
        score = 0.0
        first = self.prefer(i, req, task) if self.prefer is not None else None
        for c in req.containers:
            if c.number > n:
                return [], 0.0, _reason(TOO_FEW, c, total=n)
            got: list[int] = []
            need = c.number
            core = c.core_milli
            order = self._order(use, i, policy)
            if first:
                order = first + [j for j in order if j not in first]
            for j in order:
                if need <= 0:
                    break
                if not self._device_ok(i, j, req):
                    continue
                if use[NUM, j] >= self.split[i, j]:
                    continue
                if groups is not None and req.spread_group in groups[j]:
                    continue
                mem = c.memory_on(int(self.memory[i, j]))
                if self.memory[i, j] - use[MEM, j] < mem:
                    continue
                if use[CORE, j] + core > FULL:
                    continue
                if core == FULL and use[NUM, j] > 0:
                    continue
                if use[CORE, j] == FULL and core == 0:
                    continue
                use[NUM, j] += 1
                use[MEM, j] += mem
                use[CORE, j] += core
                got.append(j)
                need -= 1
                score += _gpu_score(policy, int(use[MEM, j]), int(self.memory[i, j]), int(use[NUM, j]))
            if need > 0:
                return [], 0.0, self._row_reason(i, req, which)
            picks.append(got)
        return picks, score, None

    def fits_releasing(self, i: int, req: VgpuRequest, released: Iterable["TaskInfo"],
                       row_tasks: dict | None = None) -> bool:
        """Would the request fit row ``i``'s devices once releasing pods and ``released`` (tasks
        on the node, e.g. a preemptor's victims) are gone? For victim choices that must free
        the right devices, not only room on the node."""
        if not self.count[i]:
            return False
        use = self.state(FUTURE, i).copy()
        node = self.names[i]
        for t in released:
            a = t.devices
            if a is None or t.pod.vgpu is None or t.node_name != node or t.status in (_FUTURE_ONLY, _NOW_ONLY):
                continue  # elsewhere; pipelined: not on the node yet; releasing: out of the future already
            for j, mem, core in self._resolve(i, a):
                use[MEM, j] -= mem
                use[CORE, j] -= core
                use[NUM, j] -= 1
        return self.walk(i, req, FUTURE, self.policy, row_tasks, use=use)[2] is None

    def _device_ok(self, i: int, j: int, req: VgpuRequest) -> bool:
        if not self.usable[i, j]:
            return False
        if req.filtered:
            return req.type_ok(self.types[i][j]) and req.uuid_ok(self.uuids[i][j])
        return True

    def choose(
        self, i: int, req: VgpuRequest, which: str, policy: str | None = None, task: "TaskInfo | None" = None,
        rows_tasks: dict | None = None,
    ) -> PodAssignment | None:
        """The devices the pod gets on row ``i`` (None when it does not fit there)."""
        picks, _score, why = self.walk(i, req, which, self.policy if policy is None else policy, rows_tasks, task)
        if why is not None:
            return None
        return self._assignment(i, req, picks)

    def _assignment(self, i: int, req: VgpuRequest, picks: list[list[int]]) -> PodAssignment:
        uuids = self.uuids[i]
        containers = []
        for c, got in zip(req.containers, picks):
            containers.append(tuple(
                DeviceUse(uuids[j], c.memory_on(int(self.memory[i, j])), c.cores) for j in got
            ))
        return PodAssignment(self.names[i], tuple(containers))

    def unknown_devices(self, i: int, req: VgpuRequest) -> PodAssignment:
        """Devices for a pod on the node whose own are unknown (no usable allocation annotation:
        put there by someone else, or the node re-registered other devices), or for a placement
        that fits nowhere: the node's first usable devices in registration order, whatever they
        hold. Not the emptiest ones: what a pod is counted on must not depend on which pods were
        counted before it, or the incremental cache and a rebuild (a running scheduler and a
        restarted one, REL-3) would count it on different devices."""
        n = int(self.count[i])
        order = sorted(range(n), key=lambda j: (not self.usable[i, j], j))
        picks = [order[: min(c.number, n)] for c in req.containers]
        return self._assignment(i, req, picks)

    # -- all rows at once ---------------------------------------------------------------

    def _eligible(self, rows: np.ndarray | slice, c: ContainerRequest, req: VgpuRequest, which: str) -> np.ndarray:
        """Devices (rows × slots) one container of ``req`` may take in state ``which``."""
        use = self.state(which, rows)
        memory = self.memory[rows]
        ok = self.usable[rows] & (use[NUM] < self.split[rows])
        if req.filtered:
            ok &= self._filter_mask(rows, req)
        need = (memory * c.percent) // 100 if c.percent is not None else c.memory
        ok &= memory - use[MEM] >= need
        core = c.core_milli
        ok &= use[CORE] + core <= FULL
        if core == FULL:
            ok &= use[NUM] == 0
        elif core == 0:
            ok &= use[CORE] < FULL
        return ok

    def _filter_mask(self, rows: np.ndarray | slice, req: VgpuRequest) -> np.ndarray:
        idx = np.arange(len(self.names))[rows]
        out = np.zeros((len(idx), self.width), dtype=bool)
        for k, i in enumerate(idx.tolist()):
            for j in range(int(self.count[i])):
                out[k, j] = req.type_ok(self.types[i][j]) and req.uuid_ok(self.uuids[i][j])
        return out

    def _simple(self, req: VgpuRequest) -> bool:
        """One container, no PodGroup spread: the vectorised walk is exact."""
        return len(req.containers) == 1 and not req.spread_group

    def fit_rows(
        self, req: VgpuRequest, which: str, rows: np.ndarray | None = None,
        tasks_of: "Sequence[dict] | None" = None,
    ) -> np.ndarray:
        """Does the request fit row by row (all rows when ``rows`` is None)?"""
        sel: np.ndarray | slice = slice(None) if rows is None else rows
        count = self.count[sel]
        if self.width == 0:
            return np.zeros(len(count), dtype=bool)
        mode_ok = self._mode_ok(sel, req)
        if self._simple(req):
            c = req.containers[0]
            ok = self._eligible(sel, c, req, which).sum(axis=1) >= c.number
            return ok & mode_ok & (count > 0) & (count >= c.number)
        # Several containers (or group spread): each must fit alone (cheap), then the exact walk.
        ok = mode_ok & (count > 0)
        for c in req.containers:
            ok &= self._eligible(sel, c, req, which).sum(axis=1) >= c.number
        idx = np.arange(len(self.names))[sel]
        for k in np.flatnonzero(ok).tolist():
            i = int(idx[k])
            row_tasks = tasks_of[i] if tasks_of is not None else None
            ok[k] = self.walk(i, req, which, self.policy, row_tasks)[2] is None
        return ok

    def _mode_ok(self, sel: np.ndarray | slice, req: VgpuRequest) -> np.ndarray:
        n = len(self.count[sel])
        if req.mode is None:
            return np.ones(n, dtype=bool)
        idx = np.arange(len(self.names))[sel]
        return np.fromiter((self.modes[i] == req.mode for i in idx.tolist()), dtype=bool, count=n)

    def score_rows(
        self, req: VgpuRequest, policy: str, rows: np.ndarray | None = None,
        tasks_of: "Sequence[dict] | None" = None,
    ) -> np.ndarray:
        """Volcano's device score per row: GPUScore of the devices the walk would take, summed
        (``binpack``: 100 × the device's used memory share after the pod; ``spread``: 100 for a
        device that held no pod before it; none: 0), rounded half up. Rows where the request
        does not fit score 0."""
        sel: np.ndarray | slice = slice(None) if rows is None else rows
        n = len(self.count[sel])
        if policy not in (BINPACK, SPREAD) or self.width == 0:
            return np.zeros(n)
        if not self._simple(req):
            idx = np.arange(len(self.names))[sel]
            out = np.zeros(n)
            for k, i in enumerate(idx.tolist()):
                row_tasks = tasks_of[i] if tasks_of is not None else None
                _picks, s, why = self.walk(i, req, IDLE, policy, row_tasks)
                out[k] = 0.0 if why is not None else np.floor(s + 0.5)
            return out
        c = req.containers[0]
        ok = self._eligible(sel, c, req, IDLE)
        fits = (ok.sum(axis=1) >= c.number) & self._mode_ok(sel, req) & (self.count[sel] >= c.number)
        use = self.state(IDLE, sel)
        width = self.width
        k = min(c.number, width)
        if policy == BINPACK:
            # Most memory used first, lower slot on ties: rank by (−used, slot).
            key = np.where(ok, use[MEM], -1)
            # One device (the usual request): the first maximum is the walk's pick.
            picked = key.argmax(axis=1)[:, None] if k == 1 else np.argsort(-key, axis=1, kind="stable")[:, :k]
        else:
            key = np.where(ok, use[NUM], np.iinfo(np.int64).max)
            picked = key.argmin(axis=1)[:, None] if k == 1 else np.argsort(key, axis=1, kind="stable")[:, :k]
        rows_ix = np.arange(n)[:, None]
        if policy == BINPACK:
            memory = self.memory[sel]
            need = (memory * c.percent) // 100 if c.percent is not None else np.full_like(memory, c.memory)
            after = use[MEM][rows_ix, picked] + need[rows_ix, picked]
            total = memory[rows_ix, picked]
            with np.errstate(divide="ignore", invalid="ignore"):
                each = np.where(total > 0, BINPACK_MULTIPLIER * (after / np.where(total > 0, total, 1)), 0.0)
        else:
            each = np.where(use[NUM][rows_ix, picked] == 0, SPREAD_MULTIPLIER, 0.0)
        s = each[:, 0].copy()
        for m in range(1, k):
            s += each[:, m]
        return np.where(fits, np.floor(s + 0.5), 0.0)

    # -- reasons ------------------------------------------------------------------------

    def reasons(
        self, req: VgpuRequest, which: str, rows: np.ndarray, tasks_of: "Sequence[dict] | None" = None,
    ) -> list[tuple[Reason, np.ndarray]]:
        """Why each of ``rows`` fails the request: (reason, mask over ``rows``) groups. The
        first container that does not fit names the reason, by the first check its devices
        fail in the walk's order: count, free shares, compute, memory; else the combination."""
        if self._simple(req) and self.width and not req.mode:
            return self._reasons_vectorised(req, which, rows)
        out: dict[Reason, list[int]] = {}
        for k, i in enumerate(rows.tolist()):
            out.setdefault(self._row_reason(i, req, which), []).append(k)
        result = []
        for reason, ks in out.items():
            mask = np.zeros(len(rows), dtype=bool)
            mask[ks] = True
            result.append((reason, mask))
        return result

    def _reasons_vectorised(self, req: VgpuRequest, which: str, rows: np.ndarray) -> list[tuple[Reason, np.ndarray]]:
        """``reasons`` for one container without group spread, all rows at once (the same checks
        in the same order as ``_row_reason``): the reason path of a full cluster stays cheap."""
        (c,) = req.containers
        need_n = c.number
        count = self.count[rows]
        use = self.state(which, rows)
        usable = self.usable[rows]
        if req.filtered:
            usable = usable & self._filter_mask(rows, req)
        free = usable & (use[NUM] < self.split[rows])
        core = c.core_milli
        idle = free & (use[NUM] == 0)
        with_core = free & (use[CORE] + core <= FULL)
        if core == 0:
            with_core &= use[CORE] < FULL
        memory = self.memory[rows]
        need_mem = (memory * c.percent) // 100 if c.percent is not None else c.memory
        free_mem = memory - use[MEM]
        with_mem = free & (free_mem >= need_mem)
        n_usable, n_free, n_idle = usable.sum(1), free.sum(1), idle.sum(1)
        n_core, n_mem = with_core.sum(1), with_mem.sum(1)
        low = np.iinfo(np.int64).min
        any_free = free.any(axis=1)
        best_core = np.where(any_free, np.where(free, FULL - use[CORE], low).max(axis=1), 0)
        best_mem = np.where(any_free, np.where(free, free_mem, low).max(axis=1), 0)
        # One (kind, have, best, total) key per row, in the walk's order of checks.
        kinds = (NO_DEVICES, TOO_FEW, UNUSABLE, NO_SHARE, NOT_IDLE, COMPUTE, COMBINATION, MEMORY)
        kind = np.full(len(rows), 6, dtype=np.int64)  # 6: the combination
        have = np.zeros(len(rows), dtype=np.int64)
        best = np.zeros(len(rows), dtype=np.int64)
        steps = [
            (count == 0, 0, count),
            (count < need_n, 1, count),
            (n_usable < need_n, 2, n_usable),
            (n_free < need_n, 3, n_free),
            ((n_idle < need_n) if core == FULL else np.zeros(len(rows), dtype=bool), 4, n_idle),
            (n_core < need_n, 5, n_core),
            (n_mem < need_n, 7, n_mem),
        ]
        decided = np.zeros(len(rows), dtype=bool)
        for cond, k, h in steps:
            hit = cond & ~decided
            kind[hit] = k
            have[hit] = h[hit]
            if k == 5:
                best[hit] = best_core[hit]
            elif k == 7:
                best[hit] = best_mem[hit]
            decided |= hit
        keys = np.stack([kind, have, best, count], axis=1)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        merged: dict[Reason, np.ndarray] = {}
        for u, (k, h, b, n) in enumerate(uniq.tolist()):
            reason = _reason(kinds[k], c, have=h, total=n, best=b)
            mask = inverse == u
            merged[reason] = merged[reason] | mask if reason in merged else mask
        return list(merged.items())

    def _row_reason(self, i: int, req: VgpuRequest, which: str) -> Reason:
        n = int(self.count[i])
        if not n:
            return _reason(NO_DEVICES)
        if req.mode is not None and req.mode != self.modes[i]:
            return Reason(MODE, names=(req.mode, self.modes[i]))
        use = self.state(which, i)
        for c in req.containers:
            if c.number > n:
                return _reason(TOO_FEW, c, total=n)
            usable = [j for j in range(n) if self._device_ok(i, j, req)]
            if len(usable) < c.number:
                return _reason(UNUSABLE, c, have=len(usable), total=n)
            free = [j for j in usable if use[NUM, j] < self.split[i, j]]
            if len(free) < c.number:
                return _reason(NO_SHARE, c, have=len(free), total=n)
            core = c.core_milli
            if core == FULL:
                idle = [j for j in free if use[NUM, j] == 0]
                if len(idle) < c.number:
                    return _reason(NOT_IDLE, c, have=len(idle), total=n)
            with_core = [j for j in free if use[CORE, j] + core <= FULL and not (core == 0 and use[CORE, j] >= FULL)]
            if len(with_core) < c.number:
                best = max((FULL - int(use[CORE, j]) for j in free), default=0)
                return _reason(COMPUTE, c, have=len(with_core), best=best)
            mem_of = {j: c.memory_on(int(self.memory[i, j])) for j in free}
            with_mem = [j for j in free if self.memory[i, j] - use[MEM, j] >= mem_of[j]]
            if len(with_mem) < c.number:
                best_mem = max((int(self.memory[i, j] - use[MEM, j]) for j in free), default=0)
                return _reason(MEMORY, c, have=len(with_mem), best=best_mem)
        if req.spread_group:
            return Reason(GROUP_SPREAD, names=(req.spread_group,))
        return _reason(COMBINATION)


def _gpu_score(policy: str, used_mem: int, memory: int, used_num: int) -> float:
    """Volcano's GPUScore of a device *after* the pod's tentative add: binpack rewards used
    memory; spread rewards a device the pod is alone on (Volcano v1.12's ``UsedNum == 1``: the
    master's ``== 0`` check, made after the add, never holds, so its spread score is always 0)."""
    if policy == BINPACK:
        return BINPACK_MULTIPLIER * (used_mem / memory) if memory else 0.0
    if policy == SPREAD:
        return SPREAD_MULTIPLIER if used_num == 1 else 0.0
    return 0.0


def _group_of(task: "TaskInfo") -> str:
    ann = task.pod.meta.annotations
    name = ann.get("scheduling.k8s.io/group-name") or ann.get("scheduling.volcano.sh/group-name") or ""
    return f"{task.namespace}/{name}" if name else ""


__all__ = ["DeviceTable", "Reason", "UNRESOLVABLE", "BINPACK", "SPREAD", "POLICIES", "NOW", "FUTURE", "IDLE", "FULL",
           "FULL_CORES"]
