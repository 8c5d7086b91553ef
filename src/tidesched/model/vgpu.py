"""Volcano's vGPU surface (the ``deviceshare`` plugin with ``deviceshare.VGPUEnable``): the
names, the node registration annotation, the pod request and the allocation annotations.

Everything here is read from Volcano's source (``pkg/scheduler/api/devices/nvidia/vgpu``,
``pkg/scheduler/api/devices/config/vgpu.go`` and ``devices/util.go``) as facts; the code is ours.
Nothing here raises on bad input: a malformed entry is skipped, as Volcano skips it, and a
problem string says why.

Node registration (``volcano.sh/node-vgpu-register``, written by the vGPU device plugin)
    ``<uuid>,<split count>,<memory MiB>,<type>,<health>,<mode>:`` per device. An entry of fewer
    than six fields makes the whole annotation unusable (Volcano drops the node's devices); a
    count or memory that is not an integer reads as 0 (Go's ignored ``Atoi`` error), a health
    that is not a Go boolean as false. The mode of the *last* device is the node's (Volcano
    keeps overwriting it); ``mig`` mode needs MIG geometries from Volcano's device ConfigMap,
    which tidesched does not read, so it falls back to ``hami-core`` exactly as Volcano does
    when that ConfigMap is absent. A node's devices count only when its allocatable has
    non-zero ``volcano.sh/vgpu-number``, ``volcano.sh/vgpu-cores`` and ``volcano.sh/vgpu-memory``.

Pod request
    A pod is a vGPU pod when a container's *limits* name ``volcano.sh/vgpu-number`` or
    ``volcano.sh/vgpu-memory``. Per such container: ``number`` devices (1 when only the memory
    is named), each with ``memory`` MiB (limits, else requests) or ``percent`` of the device's
    memory (``volcano.sh/vgpu-memory-percentage``; it wins over MiB), and ``cores`` percent of
    its compute (``volcano.sh/vgpu-cores``, 0 when absent). Neither memory form: the whole
    device's memory. Volcano reads the percentage only when its device ConfigMap names the
    resource (``resourceMemoryPercentageName``; its built-in default names none); tidesched
    always reads it under Volcano's constant name. Quantities that are not whole numbers read
    as 0, as Go's ``AsInt64`` failing does.

Pod annotations that steer the choice
    ``nvidia.com/use-gputype`` / ``nvidia.com/nouse-gputype`` (comma-separated, matched
    case-insensitively as substrings of the device type), ``volcano.sh/vgpu-use-gpuuuid`` /
    ``volcano.sh/vgpu-nouse-gpuuuid`` (exact UUIDs; the deny list wins), ``volcano.sh/vgpu-mode``
    (the node's mode must equal it), ``volcano.sh/vgpu-podgroup-policy: spread`` (no two pods of
    the PodGroup on one device).

Allocation annotations (written with the binding, read back after a restart)
    ``volcano.sh/vgpu-ids-new`` and ``volcano.sh/devices-to-allocate``: per container
    ``<uuid>,NVIDIA,<memory MiB>,<cores %>:`` for each device, containers joined by ``;``;
    ``volcano.sh/vgpu-node`` (the node), ``volcano.sh/bind-phase: allocating`` (the device
    plugin sets ``success`` once the container has its devices), ``volcano.sh/vgpu-time`` and
    ``volcano.sh/bind-time`` (Unix seconds, decimal). Entries of fewer than four fields, or
    whose memory or cores are not unsigned 32-bit integers, are skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tidesched.model.quantity import QuantityError, parse_quantity

# Resources (config/vgpu.go).
VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
VGPU_MEMORY_PERCENTAGE = "volcano.sh/vgpu-memory-percentage"
VGPU_CORES = "volcano.sh/vgpu-cores"
VGPU_RESOURCES = (VGPU_NUMBER, VGPU_MEMORY, VGPU_MEMORY_PERCENTAGE, VGPU_CORES)

# Annotations (config/vgpu.go, nvidia/vgpu/type.go).
NODE_REGISTER = "volcano.sh/node-vgpu-register"
ASSIGNED_IDS = "volcano.sh/vgpu-ids-new"
ASSIGNED_TO_ALLOCATE = "volcano.sh/devices-to-allocate"
ASSIGNED_NODE = "volcano.sh/vgpu-node"
ASSIGNED_TIME = "volcano.sh/vgpu-time"
BIND_TIME = "volcano.sh/bind-time"
BIND_PHASE = "volcano.sh/bind-phase"
BIND_PHASE_ALLOCATING = "allocating"
BIND_PHASE_SUCCESS = "success"
USE_GPU_TYPE = "nvidia.com/use-gputype"
NOUSE_GPU_TYPE = "nvidia.com/nouse-gputype"
USE_UUID = "volcano.sh/vgpu-use-gpuuuid"
NOUSE_UUID = "volcano.sh/vgpu-nouse-gpuuuid"
MODE_ANNOTATION = "volcano.sh/vgpu-mode"
PODGROUP_POLICY = "volcano.sh/vgpu-podgroup-policy"
PODGROUP_POLICY_SPREAD = "spread"
GROUP_NAME_KEYS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")

NVIDIA = "NVIDIA"  # the request type Volcano gives every vGPU container (a device's type must contain it)
MODE_HAMI_CORE = "hami-core"
MODE_MIG = "mig"

# Card equivalents of vGPU devices, as the card naming (model.cards) sees them: a node offers
# 1000 per registered device of its product, a pod asks for its compute share (capacity-card
# charges it, CARD-1..7). No API object carries this name: it exists in card views only.
VGPU_CARD_RESOURCE = "vgpu.tidesched.io/card-equivalents"

FULL_CORES = 100  # percent: a 100-core container wants a device no other pod uses
MILLI_PER_PERCENT = 10  # compute is kept in milli-GPU: 1000 per device
_UNSET_PERCENT = 101  # Volcano's DefaultMemPercentage: no percentage asked


# --------------------------------------------------------------------------------------------
# Node registration


@dataclass(frozen=True, slots=True)
class RegisteredDevice:
    uuid: str
    split: int  # how many pods may share the device
    memory: int  # MiB
    type: str
    healthy: bool
    mode: str


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """A node's vGPU devices in registration order (a device's index is its position)."""

    devices: tuple[RegisteredDevice, ...]
    mode: str = MODE_HAMI_CORE


_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_BOOL = _GO_TRUE | {"0", "f", "F", "FALSE", "false", "False"}


def _go_atoi(text: str) -> int:
    """Go's ``strconv.Atoi`` with its error ignored (0); a negative value, which Volcano would
    turn into a huge unsigned number, is read as 0 (a device that takes nothing)."""
    t = text
    if t[:1] in "+-":
        sign, t = t[0], t[1:]
    else:
        sign = ""
    if not t.isascii() or not t.isdigit():
        return 0
    v = int(t)
    return 0 if sign == "-" else v


def decode_node_register(text: str) -> NodeDevices | None:
    """The devices of a ``volcano.sh/node-vgpu-register`` value; None when Volcano would keep
    none (no ``:``, or an entry with fewer than six fields)."""
    if not isinstance(text, str) or ":" not in text:
        return None
    devices: list[RegisteredDevice] = []
    mode = MODE_HAMI_CORE
    for entry in text.split(":"):
        if "," not in entry:
            continue
        items = entry.split(",")
        if len(items) < 6:
            return None
        mode = MODE_MIG if items[5] == MODE_MIG else MODE_HAMI_CORE
        devices.append(RegisteredDevice(
            uuid=items[0],
            split=_go_atoi(items[1]),
            memory=_go_atoi(items[2]),
            type=items[3],
            healthy=items[4] in _GO_TRUE,
            mode=mode,
        ))
    if not devices:
        return None
    # Without MIG geometries (Volcano's device ConfigMap) MIG mode falls back to hami-core.
    return NodeDevices(tuple(devices), MODE_HAMI_CORE)


def encode_node_register(devices: Iterable[RegisteredDevice]) -> str:
    """The annotation value a device plugin writes for ``devices`` (tests, the trace loader)."""
    return "".join(
        f"{d.uuid},{d.split},{d.memory},{d.type},{'true' if d.healthy else 'false'},{d.mode}:" for d in devices
    )


def node_devices(annotations: Mapping[str, str], allocatable_scalars: Mapping[str, float]) -> NodeDevices | None:
    """The node's vGPU devices, or None when they do not count: no registration, or no
    non-zero ``vgpu-number``, ``vgpu-cores`` and ``vgpu-memory`` in allocatable (scalars are
    milli-units)."""
    raw = annotations.get(NODE_REGISTER)
    if raw is None:
        return None
    for res in (VGPU_NUMBER, VGPU_CORES, VGPU_MEMORY):
        # Volcano compares Quantity.Value() with 0: a fraction below one rounds up to 1.
        if not allocatable_scalars.get(res, 0.0) > 0:
            return None
    return decode_node_register(raw)


# --------------------------------------------------------------------------------------------
# Pod requests


@dataclass(frozen=True, slots=True)
class ContainerRequest:
    number: int  # devices
    memory: int  # MiB per device (0 with ``percent`` set)
    percent: int | None  # percent of each device's memory; None: ``memory`` MiB
    cores: int  # percent of each device's compute

    @property
    def core_milli(self) -> int:
        return self.cores * MILLI_PER_PERCENT

    def memory_on(self, device_memory: int) -> int:
        """MiB this container takes of a device of ``device_memory`` MiB (Volcano truncates)."""
        if self.percent is not None:
            return device_memory * self.percent // 100
        return self.memory


@dataclass(frozen=True, slots=True)
class VgpuRequest:
    containers: tuple[ContainerRequest, ...]
    use_types: tuple[str, ...] = ()  # upper-cased
    nouse_types: tuple[str, ...] | None = None  # upper-cased; None: no deny annotation
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()
    type_filter: bool = False  # use-gputype present (then nouse-gputype is not read)
    mode: str | None = None
    spread_group: str = ""  # "namespace/group" when no two pods of the group may share a device

    @property
    def devices(self) -> int:
        return sum(c.number for c in self.containers)

    @property
    def filtered(self) -> bool:
        """Do the pod's annotations restrict which devices it may use?"""
        return bool(self.type_filter or self.nouse_types is not None or self.use_uuids or self.nouse_uuids)

    def shape(self) -> tuple[Any, ...]:
        """Everything the per-device fit depends on: pods of one shape fit the same devices."""
        return (self.containers, self.use_types, self.nouse_types, self.use_uuids, self.nouse_uuids,
                self.type_filter, self.mode, self.spread_group)

    def type_ok(self, device_type: str) -> bool:
        """Volcano's checkType: the device type contains NVIDIA, then the type annotations."""
        if NVIDIA not in device_type:
            return False
        upper = device_type.upper()
        if self.type_filter:
            return any(t in upper for t in self.use_types)
        if self.nouse_types is not None:
            return not any(t in upper for t in self.nouse_types)
        return True

    def uuid_ok(self, uuid: str) -> bool:
        if not (self.use_uuids or self.nouse_uuids):
            return True
        if not uuid:
            return False
        if self.use_uuids and uuid not in self.use_uuids:
            return False
        return uuid not in self.nouse_uuids

    def card_equivalents_milli(self) -> int:
        """What capacity-card charges, in milli-cards: per device its compute share; a
        container that sets no compute share (0 cores) may use a whole card's compute, so it
        is charged a whole card per device."""
        return sum(c.number * (c.cores or FULL_CORES) * MILLI_PER_PERCENT for c in self.containers)


def _as_int64(raw: Any) -> int | None:
    """Go's ``Quantity.AsInt64``: the value when it is a whole number within int64."""
    try:
        q = parse_quantity(raw)
    except QuantityError:
        return None
    if q != q.to_integral_value():
        return None
    v = int(q)
    return v if -(2**63) <= v < 2**63 else None


def _int32(v: int) -> int:
    """Volcano keeps the amounts in int32: wrap as Go's conversion does."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _amount(limits: Mapping[str, Any], requests: Mapping[str, Any], name: str) -> int | None:
    raw = limits.get(name)
    if raw is None:
        raw = requests.get(name)
    if raw is None:
        return None
    v = _as_int64(raw)
    return None if v is None else _int32(v)


def _split_list(raw: str | None, upper: bool) -> tuple[str, ...]:
    if not raw:
        return ()
    items = (s.strip() for s in raw.split(","))
    return tuple(dict.fromkeys((s.upper() if upper else s) for s in items if s))


def _group_key(namespace: str, annotations: Mapping[str, str]) -> str:
    name = annotations.get(GROUP_NAME_KEYS[0]) or annotations.get(GROUP_NAME_KEYS[1]) or ""
    return f"{namespace}/{name}" if name else ""


def pod_request(spec: Mapping[str, Any], namespace: str, annotations: Mapping[str, str]) -> VgpuRequest | None:
    """The pod's vGPU request, or None when it is not a vGPU pod. ``spec`` is the pod spec as
    the API gives it (already checked by the pod parser)."""
    containers = spec.get("containers")
    if not isinstance(containers, list):
        return None
    out: list[ContainerRequest] = []
    for c in containers:
        if not isinstance(c, Mapping):
            continue
        res = c.get("resources")
        if not isinstance(res, Mapping):
            continue
        limits = res.get("limits") if isinstance(res.get("limits"), Mapping) else {}
        requests = res.get("requests") if isinstance(res.get("requests"), Mapping) else {}
        if VGPU_NUMBER in limits:
            n = _as_int64(limits[VGPU_NUMBER])
            number = 0 if n is None else max(_int32(n), 0)
        elif VGPU_MEMORY in limits:
            number = 1
        else:
            continue
        memory = _amount(limits, requests, VGPU_MEMORY) or 0
        percent = _amount(limits, requests, VGPU_MEMORY_PERCENTAGE)
        cores = _amount(limits, requests, VGPU_CORES) or 0
        if percent == _UNSET_PERCENT:
            percent = None  # Volcano's "no percentage" sentinel, even when a pod asks for it
        if percent is None and memory <= 0:
            percent = 100  # no memory asked: the whole device's
            memory = 0
        elif percent is not None:
            memory = 0
        out.append(ContainerRequest(number, max(memory, 0), percent, max(cores, 0)))
    if not out:
        return None
    use = annotations.get(USE_GPU_TYPE)
    nouse = annotations.get(NOUSE_GPU_TYPE)
    spread = annotations.get(PODGROUP_POLICY) == PODGROUP_POLICY_SPREAD
    return VgpuRequest(
        containers=tuple(out),
        use_types=_split_list(use, True),
        nouse_types=None if nouse is None else _split_list(nouse, True),
        use_uuids=_split_list(annotations.get(USE_UUID), False),
        nouse_uuids=_split_list(annotations.get(NOUSE_UUID), False),
        type_filter=use is not None,
        mode=annotations.get(MODE_ANNOTATION),
        spread_group=_group_key(namespace, annotations) if spread else "",
    )


# --------------------------------------------------------------------------------------------
# Allocation annotations


@dataclass(frozen=True, slots=True)
class DeviceUse:
    """One device a container was given, as the allocation annotation says it."""

    uuid: str
    memory: int  # MiB
    cores: int  # percent
    type: str = NVIDIA


@dataclass(frozen=True, slots=True)
class PodAssignment:
    """The devices a pod holds: per container (in the order of the containers that request
    vGPU) the devices given to it. ``node`` is the node they are on ("" when unknown)."""

    node: str
    containers: tuple[tuple[DeviceUse, ...], ...]

    def uses(self) -> Iterable[DeviceUse]:
        for c in self.containers:
            yield from c


def _uint32(text: str) -> int | None:
    if not text or not text.isascii() or not text.isdigit():
        return None
    v = int(text)
    return v if v < 2**32 else None


def decode_assignment(text: str) -> tuple[tuple[DeviceUse, ...], ...]:
    """The containers' devices from a ``volcano.sh/vgpu-ids-new`` value; bad entries skipped."""
    if not isinstance(text, str) or not text:
        return ()
    out: list[tuple[DeviceUse, ...]] = []
    for part in text.split(";"):
        uses: list[DeviceUse] = []
        for entry in part.split(":"):
            if "," not in entry:
                continue
            items = entry.split(",")
            if len(items) < 4:
                continue
            mem, cores = _uint32(items[2]), _uint32(items[3])
            if mem is None or cores is None:
                continue
            uses.append(DeviceUse(items[0], mem, cores, items[1]))
        out.append(tuple(uses))
    return tuple(out)


def encode_assignment(containers: Iterable[Iterable[DeviceUse]]) -> str:
    return ";".join(
        "".join(f"{u.uuid},{u.type},{u.memory},{u.cores}:" for u in c) for c in containers
    )


def pod_assignment(annotations: Mapping[str, str]) -> PodAssignment | None:
    """The pod's allocation annotations, read back (None without ``vgpu-ids-new``)."""
    raw = annotations.get(ASSIGNED_IDS)
    if raw is None:
        return None
    return PodAssignment(annotations.get(ASSIGNED_NODE, ""), decode_assignment(raw))


def bind_annotations(assignment: PodAssignment, now: float) -> dict[str, str]:
    """What the scheduler writes on a vGPU pod with its binding (Volcano's ``Allocate``)."""
    ids = encode_assignment(assignment.containers)
    stamp = str(int(now))
    return {
        ASSIGNED_NODE: assignment.node,
        ASSIGNED_TIME: stamp,
        ASSIGNED_IDS: ids,
        ASSIGNED_TO_ALLOCATE: ids,
        BIND_PHASE: BIND_PHASE_ALLOCATING,
        BIND_TIME: stamp,
    }


def format_percent(milli: int | float) -> str:
    """Milli-GPU compute as a percent for people: 600 → "60 %"."""
    v = milli / MILLI_PER_PERCENT
    return f"{int(v)} %" if v == int(v) else f"{v:g} %"


def node_card_scalars(node: Any) -> Mapping[str, float]:
    """A Node record's scalars as card naming reads them: with its vGPU devices as card
    equivalents (1000 per device) under ``VGPU_CARD_RESOURCE``."""
    scalars = node.allocatable.scalars
    devs = getattr(node, "vgpu", None)
    if devs is None:
        return scalars
    return {**scalars, VGPU_CARD_RESOURCE: float(1000 * len(devs.devices))}


def pod_card_scalars(pod: Any) -> Mapping[str, float]:
    """A Pod record's scalar requests as card naming reads them: a vGPU pod asks for its card
    equivalents (``VgpuRequest.card_equivalents_milli``) under ``VGPU_CARD_RESOURCE``."""
    scalars = pod.resreq.scalars
    req = getattr(pod, "vgpu", None)
    if req is None:
        return scalars
    return {**scalars, VGPU_CARD_RESOURCE: float(req.card_equivalents_milli())}
