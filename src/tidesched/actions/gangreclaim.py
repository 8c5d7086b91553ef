"""gangreclaim (Volcano actions/gangreclaim): a starving job of a queue below its share takes
room back from other queues bundle by bundle, and only when the whole job can then be placed.

The loop, the dry run and the arguments (``maxDomains``, ``allowWholeBundle``) are in
``gang_evict``; a queue that is Overused is skipped. What gangreclaim takes (Volcano
reclaimJobInDomains and selectDomainBundles, restated):

* **Gate**: Preemptive(queue, the job's pending pods) — asked once for all of them, as one
  request (their sum): the capacity and proportion checks compare allocated + that sum with
  the queue's limits, as Volcano's do. (A plugin that reads the pod itself, as capacity-card
  reads the card it asks for, sees the first pending pod's.)
* **Candidates**: reclaim's reclaimees (``reclaim.steps.reclaimees``: Running pods marked
  preemptable, of jobs in *other*, reclaimable queues) on the domain's nodes, of jobs that may
  lose pods (a PodGroup setting ``volcano.sh/preemptable`` is taken at its word). The plugins'
  UnifiedEvictable fns decide further (capacity: guarantee and deserved; conformance: no
  critical pods; capacity-card: the tidal policy).
* **Bundles** per victim job (``bundles``), safe before whole; between queues the victim queue
  order (VictimQueueOrder with the reclaiming queue, else the reverse QueueOrder); then return
  on investment.

How this differs from reclaim's ``enableGangSafeReclaim`` is in docs/reclaim.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.actions.bundles import Bundle, job_bundles, sort_for_reclaim
from tidesched.actions.gang_evict import (
    GangEvictOptions,
    allowed,
    execute_gang_eviction,
    job_may_lose_pods,
    width,
)
from tidesched.actions.reclaim.steps import reclaimees
from tidesched.framework.plugin import GANG_RECLAIM, EvictionContext
from tidesched.framework.reasons import GANG_RECLAIM as ACTION
from tidesched.model.infos import TaskInfo
from tidesched.model.resource import Resource

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo


def as_one_request(tasks: list[TaskInfo]) -> TaskInfo:
    """A stand-in for ``tasks`` asking for all they ask for: the first pod's, with their sums."""
    first = tasks[0]
    combined = TaskInfo(first.pod, first.job, first.priority)
    combined.resreq, combined.init_resreq = Resource(), Resource()
    for t in tasks:
        combined.resreq.add(t.resreq)
        combined.init_resreq.add(t.init_resreq)
    combined.best_effort = combined.init_resreq.is_best_effort()
    return combined


def preemptive(ssn: "Session", queue: "QueueInfo", tasks: list[TaskInfo]) -> bool:
    return ssn.preemptive(queue, tasks[0] if len(tasks) == 1 else as_one_request(tasks))


def select(ssn: "Session", job: "JobInfo", need: np.ndarray, rows: np.ndarray,
           opts: GangEvictOptions) -> list[Bundle]:
    by_job: dict[str, list[TaskInfo]] = {}
    for row in np.flatnonzero(rows):
        for task in reclaimees(ssn, job, int(row)):
            if job_may_lose_pods(ssn.jobs[task.job]):
                by_job.setdefault(task.job, []).append(task)
    w = width(ssn)
    bundles = [b for uid, tasks in sorted(by_job.items()) for b in job_bundles(ssn.jobs[uid], tasks, w)]
    mine = ssn.queues.get(job.queue)

    def queue_less(l: str, r: str) -> bool:
        lq, rq = ssn.queues[l], ssn.queues[r]
        return ssn.victim_queue_order_less(lq, rq, mine) if mine is not None else ssn.queue_order_less(lq, rq)

    def order(bs: list[Bundle]) -> list[Bundle]:
        return sort_for_reclaim(bs, need, queue_less)

    return allowed(ssn, EvictionContext(GANG_RECLAIM, job), bundles, order, opts)


def execute(ssn: "Session") -> None:
    execute_gang_eviction(ssn, ACTION, select, skip_overused=True, gate=preemptive)
