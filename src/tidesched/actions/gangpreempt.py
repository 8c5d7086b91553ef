"""gangpreempt (Volcano actions/gangpreempt): a starving job evicts lower-priority jobs of its
own queue bundle by bundle, and only when the whole job can then be placed.

The loop, the dry run and the arguments (``maxDomains``, ``allowWholeBundle``) are in
``gang_evict``. What gangpreempt takes (Volcano selectDomainBundles, restated):

* **Candidates**: Bound or Running pods marked preemptable on the domain's nodes, of *other*
  jobs in the *same queue* whose job priority is *lower* than the preempting job's and which
  may lose pods (a PodGroup setting ``volcano.sh/preemptable`` is taken at its word).
  Unlike preempt, a best-effort preemptor is not limited to best-effort victims: the plugins'
  UnifiedEvictable fns decide (priority: lower job priority; conformance: no critical pods).
* **Bundles** per victim job (``bundles``), safe before whole; between jobs the one the
  JobOrder plugins would schedule last first; then return on investment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.actions.bundles import Bundle, job_bundles, sort_for_preempt
from tidesched.actions.gang_evict import (
    GangEvictOptions,
    allowed,
    candidates_in,
    execute_gang_eviction,
    job_may_lose_pods,
    width,
)
from tidesched.framework.plugin import GANG_PREEMPT, EvictionContext
from tidesched.framework.reasons import GANG_PREEMPT as ACTION
from tidesched.model.status import PREEMPTABLE_STATUSES

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo


def select(ssn: "Session", job: "JobInfo", need: np.ndarray, rows: np.ndarray,
           opts: GangEvictOptions) -> list[Bundle]:
    def accept(task: "TaskInfo") -> bool:
        if task.status not in PREEMPTABLE_STATUSES or not task.preemptable or task.job == job.uid:
            return False
        victim = ssn.jobs.get(task.job)
        return (victim is not None and victim.queue == job.queue and job_may_lose_pods(victim)
                and job.priority > victim.priority)

    w = width(ssn)
    bundles = [b for uid, tasks in sorted(candidates_in(ssn, rows, accept).items())
               for b in job_bundles(ssn.jobs[uid], tasks, w)]

    def order(bs: list[Bundle]) -> list[Bundle]:
        return sort_for_preempt(bs, need, lambda l, r: not ssn.job_order_less(l, r))

    return allowed(ssn, EvictionContext(GANG_PREEMPT, job), bundles, order, opts)


def execute(ssn: "Session") -> None:
    execute_gang_eviction(ssn, ACTION, select, skip_overused=False)
