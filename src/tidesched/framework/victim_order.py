"""The order in which victims are evicted (Volcano ``framework.Session.BuildVictimsPriorityQueue``,
restated); shared by the preempt and reclaim actions and the capacity plugin's Reclaimable.

* **Victim order** — the first victim is the one evicted first:
  - two tasks of the same job: reverse TaskOrder (the task the job would schedule last
    goes first, i.e. the lowest-priority task);
  - tasks of jobs in different queues (all three jobs — both victims' and the
    preemptor's — known): VictimQueueOrder, which falls back to reverse QueueOrder;
  - otherwise (same queue, or the preemptor's job unknown): reverse JobOrder as the plugins
    answer it (no creation-time or UID fallback, Volcano ``JobOrderCompareFn``); tasks of
    jobs the plugins find equal fall back to reverse TaskOrder, so of equal jobs the newest
    (or highest-index) task goes first.
  Every comparison ends in a strict total order (creation time, then UID), so sorting
  gives the same sequence as Volcano's heap, and the result never depends on the order
  the candidates were collected in.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo


def victim_less(ssn: "Session", preemptor: "TaskInfo") -> Callable[["TaskInfo", "TaskInfo"], bool]:
    """``less(l, r)``: True when ``l`` is evicted before ``r``."""
    jobs = ssn.jobs
    pjob = jobs.get(preemptor.job)

    def less(l: "TaskInfo", r: "TaskInfo") -> bool:
        if l.job == r.job:
            return ssn.task_order_less(r, l)
        lj, rj = jobs.get(l.job), jobs.get(r.job)
        if lj is None or rj is None:
            # Victims always belong to a session job; keep the order total anyway.
            return l.key < r.key
        if pjob is not None and lj.queue != rj.queue:
            lq, rq, pq = ssn.queues.get(lj.queue), ssn.queues.get(rj.queue), ssn.queues.get(pjob.queue)
            if lq is not None and rq is not None and pq is not None:
                return ssn.victim_queue_order_less(lq, rq, pq)
        c = ssn.job_compare(lj, rj)
        if c:
            return c > 0
        return ssn.task_order_less(r, l)

    return less


def order_victims(ssn: "Session", victims: Iterable["TaskInfo"], preemptor: "TaskInfo") -> list["TaskInfo"]:
    """Victims in eviction order (see the module rules)."""
    less = victim_less(ssn, preemptor)

    def cmp(l: "TaskInfo", r: "TaskInfo") -> int:
        if l is r:
            return 0
        if less(l, r):
            return -1
        if less(r, l):
            return 1
        return -1 if l.key < r.key else (1 if l.key > r.key else 0)

    # Sorting by key first makes the input order irrelevant even for ties.
    return sorted(sorted(victims, key=lambda t: t.key), key=functools.cmp_to_key(cmp))
