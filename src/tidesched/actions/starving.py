"""Which jobs may evict for their pending pods, and in which turns (Volcano's reclaim,
gangreclaim and gangpreempt start alike): jobs that are not Pending, pass JobValid and belong
to a known queue; each such job's queue takes its turns in QueueOrder, and a queue's starving
jobs (JobStarving) theirs in JobOrder."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidesched.framework.queues import PriorityQueue

if TYPE_CHECKING:
    from collections.abc import Callable

    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo


@dataclass
class Turns:
    queues: PriorityQueue  # every queue with such a job, in QueueOrder
    starving: dict[str, PriorityQueue] = field(default_factory=dict)  # queue uid -> its starving jobs
    jobs: list["JobInfo"] = field(default_factory=list)  # the starving jobs, as found


def starving_turns(ssn: "Session", skip: "Callable[[JobInfo], bool] | None" = None) -> Turns:
    turns = Turns(PriorityQueue(ssn.queue_order_less))
    seen: set[str] = set()
    for job in ssn.jobs.values():
        if job.is_pending():
            continue
        vr = ssn.job_valid(job)
        if vr is not None and not vr.passed:
            continue
        queue = ssn.queues.get(job.queue)
        if queue is None:
            continue
        if queue.uid not in seen:
            seen.add(queue.uid)
            turns.queues.push(queue)
        if ssn.job_starving(job) and not (skip is not None and skip(job)):
            turns.starving.setdefault(queue.uid, PriorityQueue(ssn.job_order_less)).push(job)
            turns.jobs.append(job)
    return turns
