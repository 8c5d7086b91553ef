"""What a session does about pods with scheduling gates (Volcano v1.15.1; the rules are in
:mod:`tidesched.model.gates`): the actions ask here which pending tasks they may place, and the
queue plugins what an admitted job still reserves once its gated pods are left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tidesched.framework.features import QUEUE_ADMISSION
from tidesched.model.gates import only_volcano_gate, opted_in
from tidesched.model.resource import Resource
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo


def held_outside(task: TaskInfo) -> bool:
    """Gated by something other than Volcano's queue-admission gate alone: nothing in the
    scheduler lifts it, so no action even considers the task (allocate's worksheet skips it)."""
    return task.sch_gated and not only_volcano_gate(task.pod.scheduling_gates)


def ungated_pending(job: JobInfo) -> list[TaskInfo]:
    """The job's pending tasks that may be placed now: the preemptors and reclaimers of
    preempt and reclaim (Volcano skips every gated task there)."""
    return [t for t in job.tasks.values() if t.status == TaskStatus.PENDING and not t.sch_gated]


def skip_gated(ssn: Session, task: TaskInfo) -> bool:
    """allocate, once the task's queue may take it (Allocatable passed): whether to leave the
    task unplaced this session — any gated task is. With ``SchedulingGatesQueueAdmission`` on,
    a pod that opted in and is held by Volcano's gate alone is admitted: its gate is to be
    removed (``Decisions.ungated``), and the next session, seeing it ungated, places it. Its
    queue already counts it (the capacity plugin reserves it from here on)."""
    if not task.sch_gated:
        return False
    if (
        ssn.features.enabled(QUEUE_ADMISSION)
        and only_volcano_gate(task.pod.scheduling_gates)
        and opted_in(task.pod.meta.annotations)
    ):
        ssn.ungated[task.key] = None
    return True


def gated_request(tasks: Iterable[TaskInfo]) -> Resource:
    """What the tasks held by outside gates request (Volcano ``GetSchGatedPodResources``)."""
    total = Resource()
    for task in tasks:
        if held_outside(task):
            total.add(task.resreq)
    return total


def deduct_gated(job: JobInfo, reserved: Resource) -> Resource:
    """``reserved`` (what an admitted job holds in its queue) less what the job's pods held by
    outside gates request, never below zero per dimension, scalars ``reserved`` does not name
    left out (Volcano ``DeductSchGatedResources``); ``reserved`` itself when the job has no such
    pod — callers only add the result into their totals."""
    if not job.status_count[TaskStatus.PENDING]:
        return reserved  # a gated pod is always pending: most jobs end here
    gated = gated_request(job.tasks.values())
    if gated.is_empty():
        return reserved
    out = reserved.clone()
    out.milli_cpu = max(out.milli_cpu - gated.milli_cpu, 0.0)
    out.memory = max(out.memory - gated.memory, 0.0)
    for name, value in reserved.scalars.items():
        if name in gated.scalars:
            out.scalars[name] = max(value - gated.scalars[name], 0.0)
    return out
