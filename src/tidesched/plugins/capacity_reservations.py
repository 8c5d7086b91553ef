"""The capacity plugin's hold for pods admitted by the queue-admission gate (Volcano v1.15.1
``queueGateReservedTasks``; feature ``SchedulingGatesQueueAdmission``).

Between the session that admits a gated pod (its queue has room: the gate is removed) and the
session that places it, the queue must keep that room, or a pod admitted later could take it
and the first one would wait ungated — exactly what the gate is there to avoid. So, with the
feature on, a queue's Allocatable counts, beside what is allocated, the requests of the pods it
has admitted and not yet placed:

* at session open: every pending pod that opted in (annotation) and no longer has a gate;
* during the session: a pod that opted in, once its queue's Allocatable passes (gated or not),
  until it is allocated; a deallocated one (a discarded statement) is held again.

Only the queue the pod's job is in holds it, not its ancestors (Volcano keys the hold by the
job's queue). A pod admitted but never placeable (no node fits it) holds its room until it is
placed or deleted: Volcano has no timeout for this, nor has tidesched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.framework.features import QUEUE_ADMISSION
from tidesched.model.gates import opted_in
from tidesched.model.resource import Resource
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo


class GateReservations:
    """Admitted, not yet placed pods by queue name (then by task uid)."""

    def __init__(self) -> None:
        self.by_queue: dict[str, dict[str, TaskInfo]] = {}

    @classmethod
    def for_session(cls, ssn: Session) -> GateReservations | None:
        """None while the feature is off: nothing is held then."""
        if not ssn.features.enabled(QUEUE_ADMISSION):
            return None
        held = cls()
        for job in ssn.jobs.values():
            if not job.status_count[TaskStatus.PENDING]:
                continue
            for task in job.tasks.values():
                if task.status == TaskStatus.PENDING and not task.sch_gated and opted_in(task.pod.meta.annotations):
                    held.hold(job.queue, task)
        return held

    def hold(self, queue: str, task: TaskInfo) -> None:
        self.by_queue.setdefault(queue, {})[task.uid] = task

    def hold_if_opted_in(self, queue: str, task: TaskInfo) -> None:
        if opted_in(task.pod.meta.annotations):
            self.hold(queue, task)

    def release(self, task: TaskInfo) -> None:
        for queue, tasks in self.by_queue.items():
            if tasks.pop(task.uid, None) is not None:
                if not tasks:
                    del self.by_queue[queue]
                return

    def held_for_others(self, queue: str, candidate: TaskInfo) -> Resource | None:
        """What the queue holds for pods other than ``candidate``; None when nothing."""
        tasks = self.by_queue.get(queue)
        if not tasks:
            return None
        total = Resource()
        for uid, task in tasks.items():
            if uid != candidate.uid:
                total.add(task.resreq)
        return total
