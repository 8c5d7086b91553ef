"""The capacity plugin's DRA queue quota (Volcano v1.15 ``capacity.DynamicResourceAllocationEnable``).

A Queue limits the devices its pods may claim per DeviceClass with keys of its
``spec.capability``: ``deviceclass/<class>`` (a device count) and ``<name>.deviceclass/<class>``
(a capacity the requests ask for, e.g. ``memory.deviceclass/gpu.example.com: 80Gi``, checked
only with ``capacity.DRAConsumableCapacityEnable``). What a pod asks is read from its claims:
per ``exactly`` request of ``allocationMode: ExactCount``, ``count`` devices of its class (and
``count`` times its ``capacity.requests``); ``firstAvailable`` and ``allocationMode: All``
requests are not counted, as Volcano skips them (it logs that it does). A claim shared by
several pods of a queue is counted once there.

* Allocatable: the queue's allocated devices plus the pod's (claims the queue does not hold yet)
  must stay within each class's count (a count of 0 sets no limit) and capacities.
* JobEnqueueable: the same for the job's minimum — the first ``minAvailable`` tasks by name,
  or per role ``minTaskMember`` times one task's — on top of the jobs already admitted this
  session (JobEnqueued adds it).
* Allocated devices follow allocations and evictions (the capacity plugin's event handler).

Volcano checks the queue itself (allocated amounts are also kept on its ancestors, with
``enableHierarchy``, but only limits set on the queue are enforced); so does this module.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tidesched.model.dra.objects import EXACT_COUNT
from tidesched.model.status import ALLOCATED_STATUSES

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo

DRA_ENABLE = "capacity.DynamicResourceAllocationEnable"
DRA_CONSUMABLE = "capacity.DRAConsumableCapacityEnable"
COUNT_PREFIX = "deviceclass/"
CAPACITY_SEP = ".deviceclass/"


@dataclass
class DraAmount:
    count: int = 0
    capacity: dict[str, Decimal] = field(default_factory=dict)

    def add(self, other: "DraAmount", sign: int = 1) -> None:
        self.count += sign * other.count
        for k, v in other.capacity.items():
            self.capacity[k] = self.capacity.get(k, Decimal(0)) + sign * v


def _merge(dst: dict[str, DraAmount], src: Mapping[str, DraAmount], sign: int = 1) -> None:
    for cls, amount in src.items():
        dst.setdefault(cls, DraAmount()).add(amount, sign)


def queue_limits(scalars: Mapping[str, float]) -> dict[str, DraAmount]:
    """The DRA limits among a queue's capability scalars (Volcano's milli-units: values / 1000)."""
    out: dict[str, DraAmount] = {}
    for name, value in scalars.items():
        if CAPACITY_SEP in name:
            dim, _, cls = name.partition(CAPACITY_SEP)
            out.setdefault(cls, DraAmount()).capacity[dim] = Decimal(str(value)) / 1000
        elif name.startswith(COUNT_PREFIX):
            out.setdefault(name[len(COUNT_PREFIX):], DraAmount()).count = int(round(value / 1000))
    return out


def _describe(cls: str, dim: str = "") -> str:
    return f"{dim}.{COUNT_PREFIX}{cls}" if dim else f"{COUNT_PREFIX}{cls}"


class DraQuota:
    """One session's DRA quota state for the capacity plugin."""

    def __init__(self, ssn: "Session", consumable: bool) -> None:
        self.ssn = ssn
        self.consumable = consumable
        self.limits = {name: queue_limits(q.queue.capability.scalars) for name, q in ssn.queues.items()}
        self.allocated: dict[str, dict[str, DraAmount]] = {name: {} for name in ssn.queues}
        self.refs: dict[str, Counter[str]] = {name: Counter() for name in ssn.queues}
        self.inqueue: dict[str, dict[str, DraAmount]] = {name: {} for name in ssn.queues}
        for job in ssn.jobs.values():
            for task in job.tasks.values():
                if task.status in ALLOCATED_STATUSES:
                    self.shift(job.queue, task, +1)

    @classmethod
    def open(cls, ssn: "Session", arguments: Any) -> "DraQuota | None":
        if not arguments.get_bool(DRA_ENABLE, False):
            return None
        return cls(ssn, arguments.get_bool(DRA_CONSUMABLE, False))

    # -- what a task asks -----------------------------------------------------------------

    def task_claims(self, task: "TaskInfo") -> dict[str, dict[str, DraAmount]]:
        """Per claim the pod uses (by key), the devices its counted requests ask per class."""
        ledger = self.ssn.table.dra
        if ledger is None or not task.pod.claims:
            return {}
        out: dict[str, dict[str, DraAmount]] = {}
        for pc in task.pod.claims:
            key = f"{task.namespace}/{pc.claim_name}"
            claim = ledger.objects.claims.get(key) if pc.claim_name else None
            if claim is None or key in out:
                continue
            per: dict[str, DraAmount] = {}
            for req in claim.spec.requests:
                if req.first_available:
                    continue
                sub = req.alternatives[0]
                if sub.mode != EXACT_COUNT:
                    continue
                caps = {k: v * sub.count for k, v in sub.capacity.items()} if self.consumable else {}
                _merge(per, {sub.class_name: DraAmount(sub.count, caps)})
            if per:
                out[key] = per
        return out

    def incremental(self, queue: str, task: "TaskInfo") -> dict[str, DraAmount]:
        """What the task adds to its queue: its claims the queue does not hold already."""
        refs = self.refs.get(queue, Counter())
        out: dict[str, DraAmount] = {}
        for key, per in self.task_claims(task).items():
            if not refs[key]:
                _merge(out, per)
        return out

    def job_minimum(self, job: "JobInfo") -> dict[str, DraAmount]:
        """Volcano's GetMinDRAResources: the first minAvailable tasks by name, or per role its
        minTaskMember times one of its tasks."""
        out: dict[str, DraAmount] = {}
        if job.task_min_available:
            seen: set[str] = set()
            for task in job.tasks.values():
                n = job.task_min_available.get(task.role, 0)
                if n <= 0 or task.role in seen:
                    continue
                claims = self.task_claims(task)
                if not claims:
                    continue
                seen.add(task.role)
                for per in claims.values():
                    for cls, amount in per.items():
                        scaled = DraAmount(amount.count * n, {k: v * n for k, v in amount.capacity.items()})
                        _merge(out, {cls: scaled})
            return out
        tasks = sorted(job.tasks.values(), key=lambda t: (t.namespace, t.name, t.uid))
        for task in tasks[: max(0, job.min_available)]:
            for per in self.task_claims(task).values():
                _merge(out, per)
        return out

    # -- checks and charges ---------------------------------------------------------------

    def exceeded(self, queue: str, request: Mapping[str, DraAmount], with_inqueue: bool) -> str | None:
        """Why ``request`` does not fit the queue's DRA limits, or None."""
        limits = self.limits.get(queue, {})
        for cls, want in request.items():
            limit = limits.get(cls)
            if limit is None:
                continue  # no limit for this class
            have = self.allocated[queue].get(cls, DraAmount())
            queued = self.inqueue[queue].get(cls, DraAmount()) if with_inqueue else DraAmount()
            total = have.count + queued.count + want.count
            if limit.count > 0 and total > limit.count:
                return (f"queue {queue}: {_describe(cls)} would be {total} with {want.count} more, "
                        f"over its capability {limit.count}")
            if self.consumable:
                for dim, amount in want.capacity.items():
                    cap = limit.capacity.get(dim)
                    used = have.capacity.get(dim, Decimal(0)) + queued.capacity.get(dim, Decimal(0)) + amount
                    if cap is None or used > cap:
                        return (f"queue {queue}: {_describe(cls, dim)} would be {used} with {amount} more, "
                                f"over its capability {cap if cap is not None else '(none set)'}")
        return None

    def allocatable(self, queue: str, task: "TaskInfo") -> str | None:
        return self.exceeded(queue, self.incremental(queue, task), False)

    def enqueueable(self, job: "JobInfo") -> str | None:
        minimum = self.job_minimum(job)
        return self.exceeded(job.queue, minimum, True) if minimum else None

    def enqueued(self, job: "JobInfo") -> None:
        if job.queue in self.inqueue:
            _merge(self.inqueue[job.queue], self.job_minimum(job))

    def shift(self, queue: str, task: "TaskInfo", sign: int) -> None:
        """A task of the queue allocated (sign 1) or given back (-1): its claims held once."""
        if queue not in self.allocated:
            return
        refs = self.refs[queue]
        for key, per in self.task_claims(task).items():
            before = refs[key]
            refs[key] = before + sign
            if (sign > 0 and before == 0) or (sign < 0 and refs[key] == 0):
                _merge(self.allocated[queue], per, sign)
            if refs[key] <= 0:
                del refs[key]
