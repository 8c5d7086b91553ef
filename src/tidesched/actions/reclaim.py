"""reclaim (ACT-5): a queue below its fair share takes resources back from other queues.

Rules (Volcano actions/reclaim, restated):

* **Reclaimer jobs**: not Pending, JobValid, queue exists, JobStarving; their pending tasks
  in TaskOrder.
* Queues take turns in QueueOrder (each turn serves one starving job, then the queue goes
  back with its updated share); a queue that is Overused is skipped. Jobs of a queue in
  JobOrder; each job gets one Statement and its tasks are tried while it is starving.
* Per task: ``preemptionPolicy: Never`` ⇒ skip; ``Preemptive(queue, task)`` must hold;
  PrePredicate must pass.
* Candidate nodes (in node-name order): every node whose predicate failure is not
  unresolvable (see ``victims``). On a node the reclaimees are the **Running** tasks with the
  ``preemptable`` flag of jobs in *other* queues whose queue is reclaimable
  (``spec.reclaimable`` unset counts as true); a node without reclaimees is skipped. Then:
  Reclaimable plugin filter → ValidateVictims → evict in victim order while the request
  does not fit the node's FutureIdle (idle resources count, so an eviction is only made
  when needed) → pipeline the task. The first node that works is taken; a node that does
  not work has its evictions undone.
* The job's Statement is committed if JobPipelined holds afterwards, else discarded.
* Arguments: ``predicateErrorCacheEnable`` is accepted and ignored (predicate results are
  exact per call).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.actions import register_action
from tidesched.actions.victims import (
    candidate_nodes,
    eviction_reason,
    node_tasks_sorted,
    order_victims,
    validate_victims,
)
from tidesched.framework.session import PriorityQueue
from tidesched.framework.statement import Statement
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo

ACTION = "reclaim"


@register_action(ACTION)
def execute(ssn: "Session") -> None:
    ssn.config.action_arguments(ACTION).get_bool("predicateErrorCacheEnable", True)  # validated only
    queues = PriorityQueue(ssn.queue_order_less)
    seen: set[str] = set()
    reclaimer_jobs: dict[str, PriorityQueue] = {}
    reclaimer_tasks: dict[str, PriorityQueue] = {}
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
            queues.push(queue)
        if ssn.job_starving(job):
            reclaimer_jobs.setdefault(queue.uid, PriorityQueue(ssn.job_order_less)).push(job)
            reclaimer_tasks[job.uid] = PriorityQueue(
                ssn.task_order_less, (t for t in job.tasks.values() if t.status == TaskStatus.PENDING)
            )

    while not queues.empty():
        queue = queues.pop()
        if ssn.overused(queue):
            continue
        jobs = reclaimer_jobs.get(queue.uid)
        if jobs is None or jobs.empty():
            continue
        job = jobs.pop()
        stmt = Statement(ssn)
        tasks = reclaimer_tasks[job.uid]
        while ssn.job_starving(job) and not tasks.empty():
            task = tasks.pop()
            if task.pod.preemption_policy == "Never":
                continue
            if not ssn.preemptive(queue, task):
                continue
            if ssn.pre_predicate(task):
                continue
            reclaim_for_task(ssn, stmt, queue, job, task)
        if ssn.job_pipelined(job):
            stmt.commit()
        else:
            stmt.discard()
        if not jobs.empty():
            queues.push(queue)


def _reclaimees(ssn: "Session", job: "JobInfo", row: int) -> list["TaskInfo"]:
    def accept(t: "TaskInfo") -> bool:
        if t.status != TaskStatus.RUNNING or not t.preemptable:
            return False
        other = ssn.jobs.get(t.job)
        if other is None or other.queue == job.queue:
            return False
        q = ssn.queues.get(other.queue)
        return q is not None and q.reclaimable

    return node_tasks_sorted(ssn, row, accept)


def reclaim_for_task(
    ssn: "Session", stmt: Statement, queue: "QueueInfo", job: "JobInfo", task: "TaskInfo"
) -> bool:
    """Evict reclaimees on the first node where that makes ``task`` fit and pipeline it
    there; the operations go into ``stmt``. Returns whether the task was pipelined."""
    table = ssn.table
    candidates = candidate_nodes(ssn, task, ssn.predicate(task))
    for row in (int(r) for r in np.flatnonzero(candidates)):
        reclaimees = _reclaimees(ssn, job, row)
        if not reclaimees:
            continue
        victims = ssn.reclaimable(task, reclaimees)
        if not validate_victims(ssn, task, row, victims):
            continue
        node = table.names[row]
        node_stmt = Statement(ssn)
        for victim in order_victims(ssn, victims, task):
            if table.fits_row(task, table.future_idle[row]):
                break
            node_stmt.evict(victim, eviction_reason(ACTION, task, node))
        if table.fits_row(task, table.future_idle[row]):
            node_stmt.pipeline(task, node)
            stmt.merge(node_stmt)
            return True
        node_stmt.discard()
    return False
