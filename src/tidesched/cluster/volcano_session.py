"""What one session says for Volcano's metrics (``volcano_metrics``): read from the session the
scheduling loop just closed, before it is released, into plain values the metrics keep.

Each value is the one the plugin that Volcano feeds it from computes here (facts from
vc-scheduler v1.15.1's ``pkg/scheduler``):

* queues — the queue plugin's own accounting at the session's end. With ``capacity``: flat, a
  queue with jobs gets deserved, allocated, request, capacity, real capacity, share and
  overused (share > 1); a queue without jobs deserved, allocated and request of 0, real
  capacity, and capacity only when its spec sets one; hierarchical, every queue gets all of
  them. With ``proportion``: every queue gets allocated and request (0 without jobs); a queue
  with jobs also weight, deserved, share and overused (deserved ≤ allocated). Without either
  plugin there are none, as in Volcano.
* jobs — gang's verdict at close (a PodGroup left with condition Unschedulable by this session
  counts as unscheduled, its unready tasks minAvailable − ready), drf's dominant share, and every
  PodGroup's creation time.
* tasks dispatched (assumed on a node) with the wall time of each dispatch.
* preemptions — per preemptor and node, the victims the preempt action evicted.
* vGPU devices (Volcano's device cache) — per registered device its memory, and what the pods on
  it now hold (bound, binding or assumed this session; not pipelined), per device and per pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidesched.framework.reasons import PREEMPT, eviction_source
from tidesched.model.devices import CORE, MEM, NOW, NUM
from tidesched.model.resource import Dimension, Resource
from tidesched.model.status import TaskStatus
from tidesched.model.vgpu import MILLI_PER_PERCENT
from tidesched.plugins.capacity import CapacityPlugin
from tidesched.plugins.drf import DrfPlugin
from tidesched.plugins.gang import GangPlugin
from tidesched.plugins.proportion import ProportionPlugin

if TYPE_CHECKING:
    from tidesched.framework.decisions import Decisions
    from tidesched.framework.session import Session

# The per-queue resource families, as the ``volcano_queue_<kind>_*`` names spell them.
ALLOCATED, REQUEST, DESERVED, CAPACITY, REAL_CAPACITY = "allocated", "request", "deserved", "capacity", "real_capacity"
QUEUE_RESOURCE_KINDS = (ALLOCATED, REQUEST, DESERVED, CAPACITY, REAL_CAPACITY)


@dataclass(slots=True)
class JobRef:
    """A PodGroup as Volcano's per-job series name it."""

    key: str  # namespace/name
    name: str
    namespace: str
    queue: str
    creation: float  # seconds since the epoch


@dataclass(slots=True)
class Assumed:
    """A task the session dispatched: its job, the pod's creation and the dispatch's wall time."""

    job: JobRef
    pod_creation: float
    at: float


@dataclass(slots=True)
class DeviceUsage:
    """One registered vGPU device: its memory (MiB) and what the pods on it hold now."""

    node: str
    uuid: str
    memory_limit: int
    pods: int
    memory: int  # MiB
    cores: int  # percent of the device's compute


@dataclass
class SessionReading:
    queue_resources: dict[str, dict[str, Resource]] = field(default_factory=dict)  # kind -> queue -> amount
    queue_share: dict[str, float] = field(default_factory=dict)
    queue_weight: dict[str, float] = field(default_factory=dict)
    queue_overused: dict[str, float] = field(default_factory=dict)
    queues: set[str] = field(default_factory=set)  # every queue of the session
    jobs: list[JobRef] = field(default_factory=list)
    assumed: list[Assumed] = field(default_factory=list)
    # gang: unready tasks by PodGroup name (0 for a ready one), None without the gang plugin
    unscheduled_tasks: dict[str, int] | None = None
    unscheduled_jobs: int = 0
    retried: list[str] = field(default_factory=list)  # PodGroup names gang found not ready
    job_share: dict[tuple[str, str], float] | None = None  # (namespace, name) -> drf share
    preemption_victims: list[int] = field(default_factory=list)  # per preemptor and node, in order
    scheduled: int = 0
    unschedulable: int = 0
    devices: list[DeviceUsage] = field(default_factory=list)
    pod_devices: dict[tuple[str, str, str], tuple[int, int]] = field(default_factory=dict)  # (uuid, node, pod) -> MiB, %


def read_session(ssn: Session, decisions: Decisions, dispatch_times: list[float]) -> SessionReading:
    """``dispatch_times``: the wall time of each of ``ssn.bound_tasks``' dispatches, in order."""
    out = SessionReading(queues=set(ssn.queues))
    refs = {key: JobRef(key, j.name, j.namespace, j.queue, j.creation) for key, j in ssn.jobs.items()}
    out.jobs = list(refs.values())
    _read_queues(ssn, out)
    _read_jobs(ssn, out)
    for task, at in zip(ssn.bound_tasks, dispatch_times):
        ref = refs.get(task.job)
        if ref is not None:
            out.assumed.append(Assumed(ref, task.creation, at))
    victims: dict[tuple[str, str], int] = {}
    for key in decisions.evicted:
        source = eviction_source(decisions.eviction_reasons.get(key, ""))
        if source is not None and source[0] == PREEMPT:
            victims[source[1:]] = victims.get(source[1:], 0) + 1
    out.preemption_victims = list(victims.values())
    _read_devices(ssn, out)
    out.scheduled = len(decisions.bound)
    out.unschedulable = sum(1 for e in decisions.events if e.kind == "Pod" and e.reason == "FailedScheduling")
    return out


def _read_queues(ssn: Session, out: SessionReading) -> None:
    kinds: dict[str, dict[str, Resource]] = {k: {} for k in QUEUE_RESOURCE_KINDS}
    out.queue_resources = kinds
    capacity = ssn.plugins.get(CapacityPlugin.name)
    proportion = ssn.plugins.get(ProportionPlugin.name)
    with_jobs = {job.queue for job in ssn.jobs.values()}
    if isinstance(capacity, CapacityPlugin):
        for name, attr in capacity.attrs.items():
            if name not in ssn.queues:
                continue  # an implicit root: no Queue object, no series
            if capacity.hierarchy or name in with_jobs:
                kinds[DESERVED][name] = attr.deserved
                kinds[ALLOCATED][name] = attr.allocated
                kinds[REQUEST][name] = attr.request
                kinds[CAPACITY][name] = attr.capability
                kinds[REAL_CAPACITY][name] = attr.real_capability
                out.queue_share[name] = attr.share
                out.queue_overused[name] = float(attr.share > 1)
            else:
                kinds[DESERVED][name] = attr.deserved
                kinds[ALLOCATED][name] = Resource()
                kinds[REQUEST][name] = Resource()
                if ssn.queues[name].queue.capability_set:
                    kinds[CAPACITY][name] = attr.capability
                kinds[REAL_CAPACITY][name] = attr.real_capability
    elif isinstance(proportion, ProportionPlugin):
        for name in ssn.queues:
            attr = proportion.attrs.get(name)
            if attr is None:
                kinds[ALLOCATED][name] = Resource()
                kinds[REQUEST][name] = Resource()
                continue
            kinds[ALLOCATED][name] = attr.allocated
            kinds[REQUEST][name] = attr.request
            kinds[DESERVED][name] = attr.deserved
            out.queue_weight[name] = float(attr.weight)
            out.queue_share[name] = attr.share
            out.queue_overused[name] = float(attr.deserved.less_equal(attr.allocated, Dimension.ZERO))


def _read_jobs(ssn: Session, out: SessionReading) -> None:
    if isinstance(ssn.plugins.get(GangPlugin.name), GangPlugin):
        unready: dict[str, int] = {}
        for job in ssn.jobs.values():
            if not job.tasks:
                continue  # as Volcano's gang: a PodGroup without pods is not reported
            count = 0
            if _left_unschedulable(job.conditions, ssn.uid):
                count = job.min_available - job.ready_task_num()
                out.unscheduled_jobs += 1
                out.retried.append(job.name)
            # PodGroups of one name in several namespaces share Volcano's series (job_id is the
            # name): the largest count stands for them.
            unready[job.name] = max(count, unready.get(job.name, 0))
        out.unscheduled_tasks = unready
    drf = ssn.plugins.get(DrfPlugin.name)
    if isinstance(drf, DrfPlugin):
        out.job_share = {(job.namespace, job.name): drf.job_share(job.uid) for job in ssn.jobs.values()}


def _read_devices(ssn: Session, out: SessionReading) -> None:
    table = ssn.table.devices
    if table is None:
        return
    now = table.state(NOW)
    for i in map(int, table.count.nonzero()[0]):
        node = table.names[i]
        for j, uuid in enumerate(table.uuids[i]):
            out.devices.append(DeviceUsage(node, uuid, int(table.memory[i, j]), int(now[NUM, i, j]),
                                           int(now[MEM, i, j]), int(now[CORE, i, j]) // MILLI_PER_PERCENT))
        slots = table.slot_of[i]
        for task in ssn.table.tasks[i].values():
            if task.devices is None or task.status == TaskStatus.PIPELINED:
                continue  # a pipelined task holds its devices only once the victims are gone
            for use in task.devices.uses():
                if use.uuid in slots:
                    key = (use.uuid, node, task.name)
                    mem, cores = out.pod_devices.get(key, (0, 0))
                    out.pod_devices[key] = (mem + use.memory, cores + use.cores)


def _left_unschedulable(conditions: list[dict[str, object]], session_uid: str) -> bool:
    """Whether this session's gang plugin wrote the PodGroup's Unschedulable condition."""
    return any(
        c.get("type") == "Unschedulable" and c.get("status") == "True" and c.get("transitionID") == session_uid
        for c in conditions
    )
