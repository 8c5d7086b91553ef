"""enqueue (ACT-1): move Pending PodGroups to Inqueue when the JobEnqueueable plugins allow.

Queues take turns in QueueOrder, each contributing its best Pending job (JobOrder) per turn,
so one busy queue cannot starve the admission of others (Volcano actions/enqueue). Unlike
Volcano, JobEnqueueable is asked even for a job without minResources (see below).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.framework.queues import PriorityQueue
from tidesched.model.status import PodGroupPhase

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo


def execute(ssn: "Session") -> None:
    queues = PriorityQueue(ssn.queue_order_less)
    seen: set[str] = set()
    pending: dict[str, list[JobInfo]] = {}
    for job in ssn.jobs.values():
        queue = ssn.queues.get(job.queue)
        if queue is None:
            continue
        if queue.uid not in seen:
            seen.add(queue.uid)
            queues.push(queue)
        if job.is_pending():
            pending.setdefault(job.queue, []).append(job)
    # Each queue's jobs in JobOrder, best last, sorted once rather than kept in a heap: the
    # order of the jobs still waiting cannot move while others are admitted (it reads priority,
    # gang readiness and DRF share, and admission changes none of them), so the pops are the same.
    for queue_name, jobs in pending.items():
        pending[queue_name] = ssn.sorted_jobs(jobs)[::-1]

    while not queues.empty():
        queue = queues.pop()
        waiting = pending.get(queue.uid)
        if not waiting:
            continue
        job = waiting.pop()
        # Volcano skips the plugins when minResources is unset; the plugins here permit such
        # a job themselves, so asking them always lets capacity-card check card.request
        # (DEC-5) and capacity refuse a non-leaf or closed queue with a reason.
        if ssn.job_enqueueable(job):
            ssn.job_enqueued(job)
            job.phase = PodGroupPhase.INQUEUE
            job.enqueued_this_session = True
        queues.push(queue)
