"""proportion plugin (Volcano plugins/proportion): weighted fair share between queues.

Only queues that have at least one job in the session get attributes:

* ``real_capability`` = (cluster total − Σ guarantee of all queues, never below 0) + own
  guarantee, capped by ``spec.capability`` when one is set, dimension by dimension: a
  capability cpu or memory ≤ 0, or a scalar the capability does not name, leaves the
  cluster's amount (Volcano ``MinDimensionResource`` with Infinity).
* ``request`` = resources of the queue's allocated tasks + pending tasks.
* ``deserved``: water-filling of the cluster total by ``spec.weight``: each round every
  queue not yet satisfied gets its weight's part of what remains, capped by its
  real capability and by its request, floored by its guarantee; a queue is satisfied when
  its request fits its deserved or its deserved stops moving; rounds stop when nothing
  remains or nothing changed.
* ``share`` = max over deserved's dimensions of allocated / deserved.
* ``inqueue``: resources reserved by admitted jobs: Inqueue jobs and Running jobs whose
  allocated tasks reach minMember each reserve max(0, minResources − allocated) per
  dimension; jobs admitted in this session add their whole minResources.
* ``elastic`` = Σ over jobs of the part of allocated above minResources.

Hooks registered:

- ``queue_order``: higher ``spec.priority`` first, then the smaller share.
- ``overused``: deserved ≤ allocated in every dimension.
- ``allocatable`` and ``preemptive``: the queue is Open and allocated + the task's request
  ≤ deserved on the dimensions the task requests.
- ``reclaimable``: per victim queue, victims are taken while that queue's allocated
  (lowered by each victim taken) is not ≤ its deserved. Votes Permit.
- ``job_enqueueable``: Reject if the queue is not Open; Permit when the job has no
  minResources; else Permit iff minResources + allocated + inqueue − elastic ≤
  real capability on the dimensions minResources requests, Reject otherwise. Every Reject
  writes a Warning event on the PodGroup naming the queue, the resources and the amounts.
- ``job_enqueued``: the admitted job's minResources join the queue's inqueue.
- ``simulate_init`` / ``simulate_add_task`` / ``simulate_remove_task`` /
  ``simulate_allocatable``: the allocatable check against a cloned per-queue allocation
  for dry-run preemption.
- event handlers ``allocate`` / ``deallocate``: the queue's allocated and share follow every
  Statement operation.

Not modelled: scheduling-gated pods (the snapshot has no scheduling gates, so nothing is
deducted from minResources for them).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tidesched.framework.gates import deduct_gated
from tidesched.framework.plugin import PERMIT, REJECT, EventHandler, Plugin
from tidesched.model.quantity import format_amount
from tidesched.model.resource import (
    Dimension,
    Resource,
    exceeded_part,
    max_resource,
    share as _share,
)
from tidesched.model.status import ALLOCATED_STATUSES, PodGroupPhase, QueueState, TaskStatus
from tidesched.framework.job_memo import is_nothing, job_memo

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo

_UNLIMITED = sys.float_info.max
_STATE_KEY = "proportion"


@dataclass(slots=True)
class QueueAttr:
    name: str
    weight: int
    real_capability: Resource
    capability: Resource | None
    guarantee: Resource
    deserved: Resource = field(default_factory=Resource)
    allocated: Resource = field(default_factory=Resource)
    request: Resource = field(default_factory=Resource)
    elastic: Resource = field(default_factory=Resource)
    inqueue: Resource = field(default_factory=Resource)
    share: float = 0.0

    def update_share(self) -> None:
        best = 0.0
        for name in self.deserved.resource_names():
            s = _share(self.allocated.get(name), self.deserved.get(name))
            if s > best:
                best = s
        self.share = best


def reserved_for(job: "JobInfo") -> Resource:
    """What an admitted job still holds back for itself: max(0, minResources − allocated)
    in each dimension minResources names (Volcano util.GetInqueueResource)."""
    out = Resource()
    mr = job.min_resources
    if mr is None:
        return out
    alloc = job.allocated
    out.milli_cpu = max(0.0, mr.milli_cpu - alloc.milli_cpu)
    out.memory = max(0.0, mr.memory - alloc.memory)
    for name, v in mr.scalars.items():
        left = v - alloc.scalars.get(name, 0.0)
        if left > 0:
            out.scalars[name] = left
    return out


def _add_positive(into: Resource, res: Resource) -> None:
    """``into.add(res.exceeded_part(Resource()))``: the positive amounts of ``res``."""
    if res.milli_cpu > 0.0:
        into.milli_cpu += res.milli_cpu
    else:
        into.milli_cpu += 0.0
    if res.memory > 0.0:
        into.memory += res.memory
    else:
        into.memory += 0.0
    if res.scalars:
        s = into.scalars
        for name, v in res.scalars.items():
            if v > 0.0:
                s[name] = s.get(name, 0.0) + v


_ALLOCATED = tuple(ALLOCATED_STATUSES)


def allocated_task_num(job: "JobInfo") -> int:
    c = job.status_count
    return c[_ALLOCATED[0]] + c[_ALLOCATED[1]] + c[_ALLOCATED[2]] + c[_ALLOCATED[3]]


def _amount(name: str, value: float) -> str:
    if value >= _UNLIMITED:
        return "unlimited"
    return format_amount(name, value)


def water_fill(total: Resource, attrs: list[QueueAttr]) -> None:
    """Fill every queue's ``deserved`` from ``total`` by weight (see module docstring)."""
    remaining = total.clone()
    meet: set[str] = set()
    while True:
        total_weight = sum(a.weight for a in attrs if a.name not in meet)
        if total_weight == 0:
            break
        old_remaining = remaining.clone()
        increased = Resource()
        decreased = Resource()
        for a in attrs:
            if a.name in meet:
                continue
            old = a.deserved.clone()
            a.deserved.add(remaining.clone().multi(a.weight / total_weight))
            a.deserved.min_dimension_resource(a.real_capability, Dimension.INFINITY)
            a.deserved.min_dimension_resource(a.request, Dimension.ZERO)
            a.deserved = max_resource(a.deserved, a.guarantee)
            if a.request.less_equal(a.deserved, Dimension.ZERO):
                meet.add(a.name)  # everything asked for is deserved
            elif a.deserved == old:
                meet.add(a.name)  # capped: more rounds would not move it
            a.update_share()
            inc, dec = a.deserved.diff(old, Dimension.ZERO)
            increased.add(inc)
            decreased.add(dec)
        remaining = exceeded_part(remaining.clone().add(decreased), increased)
        if remaining.is_empty() or remaining == old_remaining:
            break


class ProportionPlugin(Plugin):
    name = "proportion"

    def on_session_open(self, ssn: "Session") -> None:
        total = ssn.total_resource.clone()
        total_guarantee = Resource()
        for q in ssn.queues.values():
            total_guarantee.add(q.queue.guarantee)

        attrs: dict[str, QueueAttr] = {}
        self.attrs = attrs
        pending_status = TaskStatus.PENDING  # read for every job: bound once
        for job in ssn.jobs.values():
            attr = attrs.get(job.queue)
            if attr is None:
                attr = attrs[job.queue] = self._new_attr(ssn.queues[job.queue], total, total_guarantee)
            allocated = job.allocated
            phase = job.phase
            min_res = job.min_resources
            if (
                not allocated.milli_cpu
                and not allocated.memory
                and not allocated.scalars
                and not allocated.max_task_num
                and not job.status_count[pending_status]
                and (min_res is None or phase not in (PodGroupPhase.INQUEUE, PodGroupPhase.RUNNING))
            ):
                # Holds nothing, asks for nothing, reserves nothing (a finished job): every sum
                # below would add zero. Finished jobs pile up over a long simulation.
                continue
            attr.allocated.add(allocated)
            attr.request.add(allocated)
            if job.status_count[pending_status]:  # most jobs have nothing pending
                for t in job.tasks.values():
                    if t.status == pending_status:
                        attr.request.add(t.resreq)
            if min_res is not None:
                # Both parts depend on allocated and minResources only: kept while they stay.
                memo = job_memo(job)
                parts = memo.get("proportion")
                if parts is None:
                    reserved = reserved_for(job)
                    parts = memo["proportion"] = (reserved, allocated.exceeded_part(min_res),
                                                  is_nothing(reserved))
                # Resources already promised to admitted jobs (phase as read from the cluster,
                # less a gang timed out at open). Adding nothing (a placed gang) is skipped.
                if not parts[2] and (
                    phase == PodGroupPhase.INQUEUE
                    or (phase == PodGroupPhase.RUNNING and allocated_task_num(job) >= job.min_available)
                ):
                    attr.inqueue.add(deduct_gated(job, parts[0]))
                attr.elastic.add(parts[1])
            else:
                _add_positive(attr.elastic, allocated)  # the part above nothing, without a diff

        water_fill(total, list(attrs.values()))

        # -- queue order ----------------------------------------------------------------------
        def queue_order(l: "QueueInfo", r: "QueueInfo") -> int:
            if l.priority != r.priority:
                return -1 if l.priority > r.priority else 1
            la, ra = attrs.get(l.name), attrs.get(r.name)
            ls = la.share if la is not None else 0.0
            rs = ra.share if ra is not None else 0.0
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        ssn.add_fn("queue_order", self.name, queue_order)

        # -- reclaimable ----------------------------------------------------------------------
        def reclaimable(_reclaimer: "TaskInfo", reclaimees: list["TaskInfo"]) -> tuple[list["TaskInfo"], int]:
            left: dict[str, Resource] = {}
            victims: list[TaskInfo] = []
            for t in reclaimees:
                job = ssn.jobs.get(t.job)
                if job is None or job.queue not in attrs:
                    continue
                attr = attrs[job.queue]
                alloc = left.get(job.queue)
                if alloc is None:
                    alloc = left[job.queue] = attr.allocated.clone()
                if not alloc.less_equal(attr.deserved, Dimension.ZERO):
                    alloc.sub(t.resreq)
                    victims.append(t)
            return victims, PERMIT

        ssn.add_fn("reclaimable", self.name, reclaimable)

        # -- overused -------------------------------------------------------------------------
        def overused(queue: "QueueInfo") -> bool:
            attr = attrs.get(queue.name)
            if attr is None:
                return False
            return attr.deserved.less_equal(attr.allocated, Dimension.ZERO)

        ssn.add_fn("overused", self.name, overused)

        # -- allocatable / preemptive ----------------------------------------------------------
        def fits_deserved(queue: "QueueInfo", allocated: Resource | None, task: "TaskInfo") -> bool:
            if queue.state != QueueState.OPEN:
                return False
            attr = attrs.get(queue.name)
            if attr is None or allocated is None:
                return False
            future = allocated.clone().add(task.resreq)
            return future.less_equal_with_dimension(attr.deserved, task.resreq)

        def allocatable(queue: "QueueInfo", task: "TaskInfo") -> bool:
            attr = attrs.get(queue.name)
            return fits_deserved(queue, attr.allocated if attr is not None else None, task)

        ssn.add_fn("allocatable", self.name, allocatable)
        ssn.add_fn("preemptive", self.name, allocatable)

        # -- simulation (dry-run preemption) ---------------------------------------------------
        def simulate_init(state: dict[str, Any], _task: "TaskInfo") -> None:
            state[_STATE_KEY] = {name: a.allocated.clone() for name, a in attrs.items()}

        def _sim_alloc(state: dict[str, Any], task: "TaskInfo") -> Resource | None:
            job = ssn.jobs.get(task.job)
            if job is None:
                return None
            return state.get(_STATE_KEY, {}).get(job.queue)

        def simulate_add(state: dict[str, Any], _preemptor: "TaskInfo", task: "TaskInfo", _row: int) -> None:
            alloc = _sim_alloc(state, task)
            if alloc is not None:
                alloc.add(task.resreq)

        def simulate_remove(state: dict[str, Any], _preemptor: "TaskInfo", task: "TaskInfo", _row: int) -> None:
            alloc = _sim_alloc(state, task)
            if alloc is not None:
                alloc.sub(task.resreq)

        def simulate_allocatable(state: dict[str, Any], queue: "QueueInfo", task: "TaskInfo") -> bool:
            return fits_deserved(queue, state.get(_STATE_KEY, {}).get(queue.name), task)

        ssn.add_fn("simulate_init", self.name, simulate_init)
        ssn.add_fn("simulate_add_task", self.name, simulate_add)
        ssn.add_fn("simulate_remove_task", self.name, simulate_remove)
        ssn.add_fn("simulate_allocatable", self.name, simulate_allocatable)

        # -- enqueue --------------------------------------------------------------------------
        def job_enqueueable(job: "JobInfo") -> int:
            queue = ssn.queues[job.queue]
            if queue.state != QueueState.OPEN:
                ssn.event(
                    "PodGroup", job.namespace, job.name, "Warning", "Unschedulable",
                    f"queue {queue.name} is {queue.state}, not Open: PodGroup {job.key} is not admitted",
                )
                return REJECT
            if job.min_resources is None:
                return PERMIT
            attr = attrs[job.queue]
            min_req = job.min_resources
            needed = min_req.clone().add(attr.allocated).add(attr.inqueue).sub(attr.elastic)
            ok, names = needed.less_equal_with_dimension_names(attr.real_capability, min_req)
            if ok:
                return PERMIT
            ssn.event("PodGroup", job.namespace, job.name, "Warning", "Unschedulable",
                      self._quota_message(job, attr, needed, names))
            return REJECT

        def job_enqueued(job: "JobInfo") -> None:
            attr = attrs.get(job.queue)
            if attr is not None and job.min_resources is not None:
                attr.inqueue.add(deduct_gated(job, job.min_resources))

        ssn.add_fn("job_enqueueable", self.name, job_enqueueable)
        ssn.add_fn("job_enqueued", self.name, job_enqueued)

        # -- events ---------------------------------------------------------------------------
        def on_allocate(task: "TaskInfo") -> None:
            job = ssn.jobs.get(task.job)
            attr = attrs.get(job.queue) if job is not None else None
            if attr is not None:
                attr.allocated.add(task.resreq)
                attr.update_share()

        def on_deallocate(task: "TaskInfo") -> None:
            job = ssn.jobs.get(task.job)
            attr = attrs.get(job.queue) if job is not None else None
            if attr is not None:
                attr.allocated.sub(task.resreq)
                attr.update_share()

        ssn.add_event_handler(EventHandler(allocate=on_allocate, deallocate=on_deallocate))

    @staticmethod
    def _new_attr(queue: "QueueInfo", total: Resource, total_guarantee: Resource) -> QueueAttr:
        spec = queue.queue
        capability: Resource | None = None
        if spec.capability_set:
            capability = spec.capability.clone()
            # An unset (or non-positive) cpu/memory capability does not limit that dimension.
            if capability.milli_cpu <= 0:
                capability.milli_cpu = _UNLIMITED
            if capability.memory <= 0:
                capability.memory = _UNLIMITED
        guarantee = spec.guarantee.clone()
        real = exceeded_part(total, total_guarantee).add(guarantee)
        if capability is not None:
            # Volcano master (b5764b960): a dimension the capability does not name keeps the
            # cluster's amount (v1.7.0's helpers.Min dropped every scalar of a capability
            # without scalars, and then compared them as unlimited).
            real.min_dimension_resource(capability, Dimension.INFINITY)
        return QueueAttr(
            name=queue.name,
            weight=queue.weight,
            real_capability=real,
            capability=capability,
            guarantee=guarantee,
        )

    @staticmethod
    def _quota_message(job: "JobInfo", attr: QueueAttr, needed: Resource, names: list[str]) -> str:
        assert job.min_resources is not None
        parts = []
        for n in names:
            parts.append(
                f"{n} {_amount(n, needed.get(n))} "
                f"(min resources {_amount(n, job.min_resources.get(n))} + allocated {_amount(n, attr.allocated.get(n))}"
                f" + inqueue {_amount(n, attr.inqueue.get(n))} - elastic {_amount(n, attr.elastic.get(n))})"
                f" exceeds its real capability {_amount(n, attr.real_capability.get(n))}"
            )
        return (
            f"queue resource quota insufficient: queue {attr.name} cannot admit PodGroup {job.key}: "
            + "; ".join(parts)
        )

    # Read by tests and diagnostics.
    def attr(self, queue: str) -> QueueAttr:
        return self.attrs[queue]
