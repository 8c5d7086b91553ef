"""Typed records parsed once from raw Kubernetes/Volcano objects (dicts as the API gives them).

Each ``parse_*`` function either returns a record or raises :class:`ObjectError` naming the bad
field; the snapshot builder turns that into a Warning event and skips the object (REL-1).
Records are immutable inputs; per-session mutable state lives in :mod:`tidesched.model.infos`.

Why one module of about 700 lines: it is the table of the kinds the scheduler reads, a record and
its parser per kind, sharing the metadata and resource readers and the copy-on-write re-parses;
the grammars they read with are modules of their own already (``fields``, ``quantity``, ``vgpu``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from collections.abc import Mapping
from typing import Any

from tidesched.rules.scoring import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST
from tidesched.rules.selectors import CompiledLabelSelector, SelectorError, compile_label_selector
from tidesched.rules.taints import parse_toleration
from tidesched.rules.topology_spread import SpreadConstraint, parse_spread_constraints
from tidesched.model.claims import PodClaim, pod_claims
from tidesched.model.dequeue import DEFAULT as DEFAULT_DEQUEUE, parse_dequeue_strategy
from tidesched.model.gates import parse_scheduling_gates
from tidesched.model.pod_conditions import preempted_by_scheduler, scheduled_time
from tidesched.model.fields import (  # noqa: F401 - parse_bool, parse_time, INT32 are re-exported
    INT32,
    INT64,
    list_of,
    mapping,
    mappings,
    parse_bool,
    parse_flag,
    parse_int,
    parse_json,
    parse_str,
    parse_time,
    str_map,
)
from tidesched.model.network_topology import GangTopology, parse_gang_topology
from tidesched.model.problems import ObjectError
from tidesched.model.quantity import QuantityError
from tidesched.model.resource import PODS, Resource
from tidesched.model.resource_quota import ResourceList, resource_list
from tidesched.model.status import PodGroupPhase, QueueState, TaskStatus
from tidesched.model.vgpu import NodeDevices, PodAssignment, VgpuRequest, node_devices, pod_assignment, pod_request
from tidesched.model.volumes import PodVolume, pod_volumes

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
KUBELET_DEFAULT_MAX_PODS = 110  # the kubelet's --max-pods default, registered as allocatable pods
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_PRIORITY_ANNOTATION = "volcano.sh/task-priority"
PREEMPTABLE_KEY = "volcano.sh/preemptable"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
DEFAULT_QUEUE = "default"
DEFAULT_NAMESPACE = "default"


# The field readers (one validation path for every field type) live in model.fields; the
# names below are kept for the modules that import them from here.
_mapping = mapping
_str_map = str_map
_list = list_of
_int = parse_int


def _resources(raw: Any, field_name: str) -> Resource:
    if raw is None:
        return Resource()
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise ObjectError(field_name, f"expected a resource list, got {type(raw).__name__}")
    try:
        r = Resource.from_resource_list(raw)
    except QuantityError as exc:
        raise ObjectError(field_name, str(exc)) from None
    # Custom resources' schemas let a signed quantity through; a negative capability or
    # minimum would silently block or invert every comparison made with it.
    if r.milli_cpu < 0 or r.memory < 0 or r.max_task_num < 0 or any(v < 0 for v in r.scalars.values()):
        bad = ", ".join(f"{k}: {v}" for k, v in raw.items() if str(v).strip().startswith("-"))
        raise ObjectError(field_name, f"quantities must not be negative ({bad})")
    return r


@dataclass(frozen=True, slots=True)
class Meta:
    name: str
    namespace: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    creation: float
    deletion: float  # 0 when not being deleted
    owner_kind: str
    owner_name: str
    # ``namespace/name`` (``name`` when cluster-scoped): read for every lookup, made once.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}" if self.namespace else self.name)


def parse_meta(obj: Mapping[str, Any], namespaced: bool = True) -> Meta:
    meta = _mapping(obj, "metadata", "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError("metadata.name", "missing or empty")
    ns = meta.get("namespace") or (DEFAULT_NAMESPACE if namespaced else "")
    if not isinstance(ns, str):
        raise ObjectError("metadata.namespace", f"expected a string, got {ns!r}")
    owners = _list(meta, "ownerReferences", "metadata.ownerReferences")
    owner_kind = owner_name = ""
    if owners and isinstance(owners[0], Mapping):
        owner_kind = parse_str(owners[0].get("kind"), "metadata.ownerReferences[0].kind")
        owner_name = parse_str(owners[0].get("name"), "metadata.ownerReferences[0].name")
    key = f"{ns}/{name}" if ns else name
    return Meta(
        name=name,
        namespace=ns,
        uid=parse_str(meta.get("uid"), "metadata.uid", key),
        labels=_str_map(meta, "labels", "metadata.labels"),
        annotations=_str_map(meta, "annotations", "metadata.annotations"),
        creation=parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        deletion=parse_time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        owner_kind=owner_kind,
        owner_name=owner_name,
    )


# --------------------------------------------------------------------------------------------
# Pods


@dataclass(frozen=True, slots=True)
class HostPort:
    protocol: str
    host_ip: str
    port: int


@dataclass(frozen=True, slots=True)
class Pod:
    meta: Meta
    scheduler_name: str
    node_name: str
    phase: str
    status: TaskStatus
    priority: int | None  # spec.priority as given (None: resolve via priorityClassName)
    priority_class: str
    preemption_policy: str
    resreq: Resource  # sum of app containers' requests (Volcano Resreq)
    init_resreq: Resource  # max(resreq, each init container) (Volcano InitResreq)
    node_selector: dict[str, str]
    affinity: Mapping[str, Any]
    tolerations: tuple[Mapping[str, Any], ...]
    host_ports: tuple[HostPort, ...]
    start_time: float
    group_name: str  # PodGroup name (same namespace); "" when the pod names none
    role: str  # volcano.sh/task-spec annotation, else label, else ""
    preemptable: bool
    raw_spec: Mapping[str, Any] = field(repr=False)
    # spec.topologySpreadConstraints, selectors compiled (matchLabelKeys merged in)
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    # (milli-cpu, memory bytes) as kube-scheduler's resource scorers count the pod: a container
    # naming no cpu (memory) request counts 100m (200Mi), init containers as in init_resreq
    # (the larger of them and the app containers' sum), plus the overhead.
    nonzero_request: tuple[float, float] = (float(DEFAULT_MILLI_CPU_REQUEST), float(DEFAULT_MEMORY_REQUEST))
    # Volcano vGPU (model.vgpu): the request when it is a vGPU pod, and the devices its
    # allocation annotation names.
    vgpu: VgpuRequest | None = None
    vgpu_assignment: PodAssignment | None = None
    # spec.resourceClaims (DRA): the claims the pod may start with only once they are allocated
    claims: tuple[PodClaim, ...] = ()
    # spec.schedulingGates' names: while any is there the pod is not scheduled (model.gates)
    scheduling_gates: tuple[str, ...] = ()
    # spec.volumes that use PersistentVolumeClaims (model/volumes.py)
    volumes: tuple[PodVolume, ...] = ()
    # when the PodScheduled condition turned True (0: not scheduled), for cdp's cooldown
    scheduled_time: float = 0.0
    # status.nominatedNodeName: where a preemption meant the pod to go (allocate tries it first)
    nominated_node: str = ""
    # DisruptionTarget=True for PreemptionByScheduler: a scheduler's preemption terminates it
    preempted: bool = False

    @property
    def key(self) -> str:
        return self.meta.key


def _container_request(container: Mapping[str, Any], field_name: str) -> tuple[Resource, float, float]:
    """The container's requests, and its cpu and memory as kube-scheduler's scorers count
    them: a request the container does not name at all counts as 100m cpu / 200Mi memory
    (one named as 0 counts 0)."""
    res = _mapping(container, "resources", f"{field_name}.resources")
    requests = dict(_mapping(res, "requests", f"{field_name}.resources.requests"))
    # The API server defaults a missing request to the limit; manifests read offline are not
    # defaulted, so do it here.
    for name, value in _mapping(res, "limits", f"{field_name}.resources.limits").items():
        requests.setdefault(name, value)
    r = _resources(requests, f"{field_name}.resources")
    cpu = r.milli_cpu if "cpu" in requests else float(DEFAULT_MILLI_CPU_REQUEST)
    memory = r.memory if "memory" in requests else float(DEFAULT_MEMORY_REQUEST)
    return r, cpu, memory


_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _affinity(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """``spec.affinity`` with its shape checked (sections are mappings, term lists are lists of
    mappings), so the predicates and scorers that walk it meet no wrong type. What a term
    says (operators, values) is judged per pod at scheduling time, as before."""
    affinity = _mapping(spec, "affinity", "spec.affinity")
    if not affinity:
        return affinity
    node = _mapping(affinity, "nodeAffinity", "spec.affinity.nodeAffinity")
    required = _mapping(node, _REQUIRED, f"spec.affinity.nodeAffinity.{_REQUIRED}")
    mappings(required, "nodeSelectorTerms", f"spec.affinity.nodeAffinity.{_REQUIRED}.nodeSelectorTerms")
    mappings(node, _PREFERRED, f"spec.affinity.nodeAffinity.{_PREFERRED}")
    for kind in ("podAffinity", "podAntiAffinity"):
        section = _mapping(affinity, kind, f"spec.affinity.{kind}")
        mappings(section, _REQUIRED, f"spec.affinity.{kind}.{_REQUIRED}")
        for i, term in enumerate(mappings(section, _PREFERRED, f"spec.affinity.{kind}.{_PREFERRED}")):
            # nodeorder multiplies scores by it; the API server takes only an integer here.
            weight = term.get("weight", 0)
            if isinstance(weight, bool) or not isinstance(weight, int):
                raise ObjectError(
                    f"spec.affinity.{kind}.{_PREFERRED}[{i}].weight", f"expected an integer, got {weight!r}"
                )
    return affinity


def pod_task_status(phase: str, node_name: str, deleting: bool) -> TaskStatus:
    """Volcano getTaskStatus: the scheduler's view of a pod."""
    if phase == "Running":
        return TaskStatus.RELEASING if deleting else TaskStatus.RUNNING
    if phase == "Pending":
        if deleting:
            return TaskStatus.RELEASING
        return TaskStatus.BOUND if node_name else TaskStatus.PENDING
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    return TaskStatus.UNKNOWN


def pod_preemptable(annotations: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Volcano GetPodPreemptable: annotation, then label; absent ⇒ true; invalid ⇒ false."""
    for source in (annotations, labels):
        if PREEMPTABLE_KEY in source:
            return bool(parse_bool(source[PREEMPTABLE_KEY]))
    return True


def parse_pod(obj: Mapping[str, Any]) -> Pod:
    meta = parse_meta(obj)
    spec = _mapping(obj, "spec", "spec")
    status = _mapping(obj, "status", "status")
    resreq = Resource()
    nz_cpu = nz_memory = 0.0
    for i, c in enumerate(mappings(spec, "containers", "spec.containers")):
        r, cpu, memory = _container_request(c, f"spec.containers[{i}]")
        resreq.add(r)
        nz_cpu += cpu
        nz_memory += memory
    init_resreq = resreq.clone()
    for i, c in enumerate(mappings(spec, "initContainers", "spec.initContainers")):
        r, cpu, memory = _container_request(c, f"spec.initContainers[{i}]")
        init_resreq.set_max_resource(r)
        nz_cpu, nz_memory = max(nz_cpu, cpu), max(nz_memory, memory)
    overhead = spec.get("overhead")
    if overhead:
        ov = _resources(overhead, "spec.overhead")
        resreq.add(ov)
        init_resreq.add(ov)
        nz_cpu += ov.milli_cpu
        nz_memory += ov.memory

    host_ports: list[HostPort] = []
    for i, c in enumerate(mappings(spec, "containers", "spec.containers")):
        for j, p in enumerate(mappings(c, "ports", f"spec.containers[{i}].ports")):
            if p.get("hostPort"):
                at = f"spec.containers[{i}].ports[{j}]"
                host_ports.append(
                    HostPort(
                        parse_str(p.get("protocol"), f"{at}.protocol", "TCP"),
                        parse_str(p.get("hostIP"), f"{at}.hostIP", "0.0.0.0"),
                        _int(p.get("hostPort"), f"{at}.hostPort", bounds=(0, 65535)),
                    )
                )

    priority_raw = spec.get("priority")
    priority = None if priority_raw is None else _int(priority_raw, "spec.priority", bounds=INT32)
    task_priority = meta.annotations.get(TASK_PRIORITY_ANNOTATION)
    if task_priority is not None:
        priority = parse_int(task_priority, f"metadata.annotations[{TASK_PRIORITY_ANNOTATION}]", bounds=INT32)

    tolerations = mappings(spec, "tolerations", "spec.tolerations")
    for i, t in enumerate(tolerations):
        try:  # the fields the taint matcher reads, checked where the pod is read
            parse_toleration(t, f"spec.tolerations[{i}]")
        except SelectorError as exc:
            where, _, problem = str(exc).partition(": ")
            raise ObjectError(where, problem) from None
    try:
        spread = parse_spread_constraints(spec.get("topologySpreadConstraints"), meta.labels)
    except SelectorError as exc:
        where, _, problem = str(exc).partition(": ")  # the message starts with the field
        raise ObjectError(where, problem) from None
    phase = parse_str(status.get("phase"), "status.phase", "Pending")
    node_name = parse_str(spec.get("nodeName"), "spec.nodeName")
    vgpu = pod_request(spec, meta.namespace, meta.annotations)
    return Pod(
        meta=meta,
        scheduler_name=parse_str(spec.get("schedulerName"), "spec.schedulerName", "default-scheduler"),
        node_name=node_name,
        phase=phase,
        status=pod_task_status(phase, node_name, meta.deletion > 0),
        priority=priority,
        priority_class=parse_str(spec.get("priorityClassName"), "spec.priorityClassName"),
        preemption_policy=parse_str(spec.get("preemptionPolicy"), "spec.preemptionPolicy", "PreemptLowerPriority"),
        resreq=resreq,
        init_resreq=init_resreq,
        node_selector=_str_map(spec, "nodeSelector", "spec.nodeSelector"),
        affinity=_affinity(spec),
        tolerations=tuple(tolerations),
        host_ports=tuple(host_ports),
        start_time=parse_time(status.get("startTime"), "status.startTime"),
        group_name=meta.annotations.get(GROUP_NAME_ANNOTATION, ""),
        role=meta.annotations.get(TASK_SPEC_KEY) or meta.labels.get(TASK_SPEC_KEY, ""),
        preemptable=pod_preemptable(meta.annotations, meta.labels),
        raw_spec=spec,
        spread_constraints=spread,
        nonzero_request=(nz_cpu, nz_memory),
        vgpu=vgpu,
        vgpu_assignment=pod_assignment(meta.annotations) if vgpu is not None else None,
        claims=pod_claims(spec, status),
        scheduling_gates=parse_scheduling_gates(spec),
        volumes=pod_volumes(spec, meta.name),
        scheduled_time=scheduled_time(status),
        nominated_node=parse_str(status.get("nominatedNodeName"), "status.nominatedNodeName"),
        preempted=preempted_by_scheduler(status),
    )


def _plain_status(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``obj``'s status for the short reparse: {} when absent, None when not a plain dict (the
    full parse reports it)."""
    status = obj.get("status")
    if status is None:
        return {}
    return status if type(status) is dict else None


def _same_except(new: Any, old: Any, free: frozenset[str]) -> bool:
    """``new`` is a plain dict whose keys outside ``free`` are ``old``'s, with the very same
    values (a copy-on-write update that changed only keys in ``free``)."""
    if type(new) is not dict or type(old) is not dict:
        return False
    if len(new) - sum(k in new for k in free) != len(old) - sum(k in old for k in free):
        return False
    for k, v in new.items():
        if k not in free and (k not in old or old[k] is not v):
            return False
    return True


_BIND_FIELDS = frozenset({"nodeName"})
_DELETION_FIELDS = frozenset({"deletionTimestamp", "deletionGracePeriodSeconds"})


def reparse_pod(prev_obj: Mapping[str, Any], prev: Pod, obj: Mapping[str, Any]) -> Pod | None:
    """``parse_pod(obj)`` from the record of ``prev_obj`` when ``obj`` is a copy-on-write
    update of it that changes only its status, ``spec.nodeName`` and the metadata's deletion
    time (a bind, a pod's end, a graceful delete): every other metadata and spec value the same
    object. None when that is not so (or a changed field is malformed): parse the whole pod
    then. Nothing else of the record depends on those fields, so the result equals a full parse."""
    meta = prev.meta
    md, old_md = obj.get("metadata"), prev_obj.get("metadata")
    if md is not old_md and not _same_except(md, old_md, _DELETION_FIELDS):
        return None
    spec, old_spec = obj.get("spec"), prev_obj.get("spec")
    if spec is not old_spec and not _same_except(spec, old_spec, _BIND_FIELDS):
        return None
    status = _plain_status(obj)
    if status is None:
        return None
    try:
        if md is not old_md:
            meta = replace(meta, deletion=parse_time(md.get("deletionTimestamp"), "metadata.deletionTimestamp"))
        phase = parse_str(status.get("phase"), "status.phase", "Pending")
        node_name = parse_str(spec.get("nodeName"), "spec.nodeName") if spec is not None else ""
        start_time = parse_time(status.get("startTime"), "status.startTime")
        # A template's claim is named in the status once the resourceclaim controller made it.
        claims = pod_claims(spec, status) if prev.claims and spec is not None else prev.claims
        scheduled = scheduled_time(status)
        nominated = parse_str(status.get("nominatedNodeName"), "status.nominatedNodeName")
        preempted = preempted_by_scheduler(status)
    except ObjectError:
        return None
    return replace(
        prev,
        meta=meta,
        node_name=node_name,
        phase=phase,
        status=pod_task_status(phase, node_name, meta.deletion > 0),
        start_time=start_time,
        group_name=meta.annotations.get(GROUP_NAME_ANNOTATION, ""),
        raw_spec=spec if spec is not None else {},
        claims=claims,
        scheduled_time=scheduled,
        nominated_node=nominated,
        preempted=preempted,
    )


# --------------------------------------------------------------------------------------------
# Nodes


@dataclass(frozen=True, slots=True)
class Node:
    meta: Meta
    allocatable: Resource
    taints: tuple[Mapping[str, Any], ...]
    unschedulable: bool
    ready: bool
    vgpu: NodeDevices | None = None  # registered vGPU devices that count (model.vgpu)
    capacity: Resource | None = None  # status.capacity (the rescheduling plugin's percentages)

    @property
    def name(self) -> str:
        return self.meta.name


def parse_node(obj: Mapping[str, Any]) -> Node:
    meta = parse_meta(obj, namespaced=False)
    spec = _mapping(obj, "spec", "spec")
    status = _mapping(obj, "status", "status")
    alloc_raw = status.get("allocatable")
    if alloc_raw is None:
        alloc_raw = status.get("capacity")
    allocatable = _resources(alloc_raw, "status.allocatable")
    if not isinstance(alloc_raw, Mapping) or PODS not in alloc_raw:
        # A kubelet always registers pods; a node naming none was written by hand. Read as the
        # kubelet would register it: Volcano master checks pod slots in allocate and binds nothing.
        allocatable.max_task_num = KUBELET_DEFAULT_MAX_PODS
    taints = _list(spec, "taints", "spec.taints")
    for i, t in enumerate(taints):
        if not isinstance(t, Mapping) or not t.get("key") and t.get("effect") is None:
            raise ObjectError(f"spec.taints[{i}]", "expected a taint with key and effect")
    ready = True
    for cond in _list(status, "conditions", "status.conditions"):
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            ready = str(cond.get("status")) == "True"
    return Node(
        meta=meta,
        allocatable=allocatable,
        taints=tuple(taints),
        unschedulable=parse_flag(spec.get("unschedulable"), "spec.unschedulable"),
        ready=ready,
        vgpu=node_devices(meta.annotations, allocatable.scalars),
        capacity=None if status.get("capacity") is None else _resources(status.get("capacity"), "status.capacity"),
    )


# --------------------------------------------------------------------------------------------
# PodGroups


@dataclass(frozen=True, slots=True)
class PodGroup:
    meta: Meta
    min_member: int
    min_task_member: dict[str, int]
    min_resources: Resource | None
    queue: str
    priority_class: str
    phase: str
    conditions: tuple[Mapping[str, Any], ...]
    preemptable: bool
    topology: GangTopology | None = None  # spec.networkTopology and spec.subGroupPolicy
    # spec.minResources by name as written (``requests.cpu`` too), for the resourcequota plugin
    min_resource_list: ResourceList | None = None

    @property
    def key(self) -> str:
        return self.meta.key


def parse_podgroup(obj: Mapping[str, Any]) -> PodGroup:
    meta = parse_meta(obj)
    spec = _mapping(obj, "spec", "spec")
    status = _mapping(obj, "status", "status")
    min_member = _int(spec.get("minMember"), "spec.minMember", default=1, bounds=INT32)
    if min_member < 0:
        raise ObjectError("spec.minMember", f"must not be negative, got {min_member}")
    mtm = {
        str(k): _int(v, f"spec.minTaskMember[{k}]", bounds=INT32)
        for k, v in _mapping(spec, "minTaskMember", "spec.minTaskMember").items()
    }
    min_res = spec.get("minResources")
    phase = parse_str(status.get("phase"), "status.phase", PodGroupPhase.PENDING)
    if phase not in PodGroupPhase.ALL:
        raise ObjectError("status.phase", f"unknown phase {phase!r}")
    preempt = None
    for source in (meta.annotations, meta.labels):
        if PREEMPTABLE_KEY in source:
            preempt = bool(parse_bool(source[PREEMPTABLE_KEY]))
            break
    return PodGroup(
        meta=meta,
        min_member=min_member,
        min_task_member=mtm,
        min_resources=None if min_res is None else _resources(min_res, "spec.minResources"),
        queue=parse_str(spec.get("queue"), "spec.queue", DEFAULT_QUEUE),
        priority_class=parse_str(spec.get("priorityClassName"), "spec.priorityClassName"),
        phase=phase,
        conditions=tuple(c for c in _list(status, "conditions", "status.conditions") if isinstance(c, Mapping)),
        preemptable=bool(preempt),
        topology=parse_gang_topology(spec),
        min_resource_list=None if min_res is None else resource_list(min_res, "spec.minResources"),
    )


def reparse_podgroup(prev_obj: Mapping[str, Any], prev: PodGroup, obj: Mapping[str, Any]) -> PodGroup | None:
    """``parse_podgroup(obj)`` from the record of ``prev_obj`` when ``obj`` is a copy-on-write
    status write of it (the same metadata and spec objects, as the simulator's phase and
    condition updates make): only the phase and conditions are read again. None otherwise,
    or when the new status is malformed: parse the whole PodGroup then."""
    if obj.get("metadata") is not prev_obj.get("metadata") or obj.get("spec") is not prev_obj.get("spec"):
        return None
    status = _plain_status(obj)
    if status is None:
        return None
    try:
        phase = parse_str(status.get("phase"), "status.phase", PodGroupPhase.PENDING)
        conditions = _list(status, "conditions", "status.conditions")
    except ObjectError:
        return None
    if phase not in PodGroupPhase.ALL:
        return None
    return replace(prev, phase=phase, conditions=tuple(c for c in conditions if isinstance(c, Mapping)))


# --------------------------------------------------------------------------------------------
# Queues


@dataclass(frozen=True, slots=True)
class Queue:
    meta: Meta
    weight: int
    capability: Resource
    capability_set: bool  # spec.capability present (an empty one means "no limit" in Volcano)
    deserved: Resource
    deserved_set: bool
    guarantee: Resource
    reclaimable: bool
    priority: int
    parent: str
    state: str
    # spec.affinity (Volcano's node-group affinity, read by the nodegroup plugin): None when
    # absent. A malformed one is kept out (None) and described in ``affinity_error``, naming
    # the field, so the queue itself still schedules and the plugin can refuse it clearly.
    node_group_affinity: "NodeGroupAffinity | None" = None
    affinity_error: str = ""
    dequeue_strategy: str = DEFAULT_DEQUEUE  # spec.dequeueStrategy (model.dequeue)

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass(frozen=True, slots=True)
class NodeGroupAffinity:
    """A Queue's ``spec.affinity``: node-group names per rule, in the order given (the
    preferred order matters to the nodegroup plugin's ``enablePreferredOrder``)."""

    required: tuple[str, ...] = ()  # nodeGroupAffinity.requiredDuringScheduling…
    preferred: tuple[str, ...] = ()  # nodeGroupAffinity.preferredDuringScheduling…
    anti_required: tuple[str, ...] = ()  # nodeGroupAntiAffinity.requiredDuringScheduling…
    anti_preferred: tuple[str, ...] = ()  # nodeGroupAntiAffinity.preferredDuringScheduling…

    def is_empty(self) -> bool:
        return not (self.required or self.preferred or self.anti_required or self.anti_preferred)


_AFFINITY_RULES = ("requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution")


def _group_names(raw: Any, field_name: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ObjectError(field_name, f"expected a list of node-group names, got {type(raw).__name__}")
    for i, name in enumerate(raw):
        if not isinstance(name, str) or not name:
            raise ObjectError(f"{field_name}[{i}]", f"expected a node-group name, got {name!r}")
    return tuple(raw)


def parse_queue_affinity(raw: Any) -> NodeGroupAffinity | None:
    """``spec.affinity`` of a Queue; raises ObjectError naming the bad field."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ObjectError("spec.affinity", f"expected a mapping, got {type(raw).__name__}")
    names: dict[str, tuple[str, ...]] = {}
    for key in raw:
        if key not in ("nodeGroupAffinity", "nodeGroupAntiAffinity"):
            raise ObjectError(f"spec.affinity.{key}", "unknown field (expected nodeGroupAffinity or nodeGroupAntiAffinity)")
    for part in ("nodeGroupAffinity", "nodeGroupAntiAffinity"):
        where = f"spec.affinity.{part}"
        rules = _mapping(raw, part, where)
        for key in rules:
            if key not in _AFFINITY_RULES:
                raise ObjectError(f"{where}.{key}", f"unknown field (expected {' or '.join(_AFFINITY_RULES)})")
        for rule in _AFFINITY_RULES:
            names[f"{part}.{rule}"] = _group_names(rules.get(rule), f"{where}.{rule}")
    return NodeGroupAffinity(
        required=names["nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution"],
        preferred=names["nodeGroupAffinity.preferredDuringSchedulingIgnoredDuringExecution"],
        anti_required=names["nodeGroupAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"],
        anti_preferred=names["nodeGroupAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution"],
    )


def parse_queue(obj: Mapping[str, Any]) -> Queue:
    meta = parse_meta(obj, namespaced=False)
    spec = _mapping(obj, "spec", "spec")
    status = _mapping(obj, "status", "status")
    weight = _int(spec.get("weight"), "spec.weight", default=1, bounds=INT32)
    reclaimable_raw = spec.get("reclaimable")
    if reclaimable_raw is None:
        reclaimable = True
    else:
        parsed = parse_bool(reclaimable_raw)
        if parsed is None:
            raise ObjectError("spec.reclaimable", f"expected a boolean, got {reclaimable_raw!r}")
        reclaimable = parsed
    guarantee = _mapping(spec, "guarantee", "spec.guarantee")
    state = parse_str(status.get("state"), "status.state", QueueState.OPEN)
    try:
        affinity, affinity_error = parse_queue_affinity(spec.get("affinity")), ""
    except ObjectError as exc:
        affinity, affinity_error = None, str(exc)
    return Queue(
        meta=meta,
        weight=weight,
        capability=_resources(spec.get("capability"), "spec.capability"),
        capability_set=bool(spec.get("capability")),
        deserved=_resources(spec.get("deserved"), "spec.deserved"),
        deserved_set=bool(spec.get("deserved")),
        guarantee=_resources(guarantee.get("resource"), "spec.guarantee.resource"),
        reclaimable=reclaimable,
        priority=_int(spec.get("priority"), "spec.priority", bounds=INT32),
        parent=parse_str(spec.get("parent"), "spec.parent"),
        state=state,
        node_group_affinity=affinity,
        affinity_error=affinity_error,
        dequeue_strategy=parse_dequeue_strategy(spec),
    )


# --------------------------------------------------------------------------------------------
# PriorityClasses


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool


def parse_priority_class(obj: Mapping[str, Any]) -> PriorityClass:
    meta = parse_meta(obj, namespaced=False)
    if "value" not in obj:
        raise ObjectError("value", "missing")
    return PriorityClass(
        name=meta.name,
        value=_int(obj.get("value"), "value", bounds=INT32),
        global_default=parse_flag(obj.get("globalDefault"), "globalDefault"),
    )


# --------------------------------------------------------------------------------------------
# PodDisruptionBudgets (policy/v1)


_MATCHES_NOTHING = compile_label_selector(None)


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    """What preemption reads of a PDB (kube-scheduler ``filterPodsWithPDBViolation``).

    ``selector`` follows kube-scheduler's preemption rule: a nil *or empty* selector matches
    no pod (unlike the Eviction API, for which an empty policy/v1 selector covers the whole
    namespace). ``disrupted_pods``: names of pods whose eviction the API server has already
    processed (``status.disruptedPods``); they never count against the budget again.
    """

    meta: Meta
    selector: CompiledLabelSelector
    disruptions_allowed: int
    disrupted_pods: frozenset[str]

    @property
    def key(self) -> str:
        return self.meta.key

    @property
    def namespace(self) -> str:
        return self.meta.namespace

    @property
    def name(self) -> str:
        return self.meta.name

    def covers(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod with these labels in ``namespace`` is guarded by this budget (a pod
        without labels never is)."""
        return bool(labels) and namespace == self.meta.namespace and self.selector.matches(labels)


def parse_pdb(obj: Mapping[str, Any]) -> PodDisruptionBudget:
    meta = parse_meta(obj)
    spec = _mapping(obj, "spec", "spec")
    status = _mapping(obj, "status", "status")
    try:
        selector = compile_label_selector(spec.get("selector"), "spec.selector")
    except SelectorError as exc:
        where, _, problem = str(exc).partition(": ")  # the message starts with the field
        raise ObjectError(where, problem) from None
    if selector.everything:
        selector = _MATCHES_NOTHING
    allowed = _int(status.get("disruptionsAllowed"), "status.disruptionsAllowed", default=0, bounds=INT32)
    if allowed < 0:
        raise ObjectError("status.disruptionsAllowed", f"must not be negative, got {allowed}")
    disrupted = _mapping(status, "disruptedPods", "status.disruptedPods")
    return PodDisruptionBudget(
        meta=meta,
        selector=selector,
        disruptions_allowed=allowed,
        disrupted_pods=frozenset(str(k) for k in disrupted),
    )


def annotation_json(annotations: Mapping[str, str], key: str) -> Any:
    """Parse a JSON annotation; raises ObjectError naming the annotation on bad JSON."""
    raw = annotations.get(key)
    if raw is None:
        return None
    return parse_json(raw, f"metadata.annotations[{key}]")
