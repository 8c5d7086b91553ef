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
  when needed) → pipeline the task if the node now passes the predicates (as preempt
  re-checks: a card-quota failure counts as resolvable, yet evicting other queues' pods never
  frees it). The first node that works is taken; a node that does not work has its
  evictions undone.
* The task is pipelined only while ``Allocatable(queue, task)`` holds after the evictions
  (REL-2: evicting from another queue must not push the reclaimer's queue over its quota).
* The job's Statement is committed if JobPipelined holds afterwards, else discarded.
* Arguments: ``predicateErrorCacheEnable`` is accepted and ignored (predicate results are
  exact per call). ``enableGangSafeReclaim`` (default true, tidesched's own) chooses victims
  as whole gangs (TIDE-6, see ``gang_victims``); false gives Volcano's per-node, per-task
  eviction. In gang-safe mode a task that fits some node's FutureIdle only thanks to
  releasing resources — typically cards freed by a gang broken for an earlier task — is
  pipelined there without evicting anything, on the best such node by NodeOrder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.actions import ARGUMENT_CHECKS, register_action
from tidesched.actions.gang_victims import GangVictims, PlanCache
from tidesched.actions.victims import (
    candidate_nodes,
    eviction_reason,
    fits_now,
    node_tasks_sorted,
    order_victims,
    validate_victims,
)
from tidesched.framework.placement import best_node
from tidesched.framework.session import PriorityQueue
from tidesched.framework.statement import Statement
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.actions.gang_victims import Plan
    from tidesched.framework.config import Arguments
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo

ACTION = "reclaim"


def gang_safe(arguments: "Arguments") -> bool:
    """Reads every reclaim argument; True when victims are chosen as whole gangs."""
    arguments.get_bool("predicateErrorCacheEnable", True)  # validated only
    return arguments.get_bool("enableGangSafeReclaim", True)


ARGUMENT_CHECKS[ACTION] = gang_safe


@register_action(ACTION)
def execute(ssn: "Session") -> None:
    if gang_safe(ssn.config.action_arguments(ACTION)):
        cache = PlanCache(ssn)

        def reclaim_task(ssn: "Session", stmt: Statement, queue: "QueueInfo", job: "JobInfo", task: "TaskInfo") -> bool:
            return reclaim_whole_gangs(ssn, stmt, queue, job, task, cache)
    else:
        reclaim_task = reclaim_for_task
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
                ssn.task_order_less, job.tasks_with_status(TaskStatus.PENDING)
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
            reclaim_task(ssn, stmt, queue, job, task)
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
        if fits_now(ssn, queue, task, row):
            node_stmt.pipeline(task, node)
            stmt.merge(node_stmt)
            return True
        node_stmt.discard()
    return False


def reclaim_whole_gangs(
    ssn: "Session", stmt: Statement, queue: "QueueInfo", job: "JobInfo", task: "TaskInfo", cache: PlanCache
) -> bool:
    """Gang-safe reclaim for one task (TIDE-6, DEC-8): pipeline onto room already free or
    being freed; otherwise evict the cheapest plan over all candidate nodes, breaking whole
    jobs only. Returns whether the task was pipelined."""
    table = ssn.table
    pred = ssn.predicate(task)
    # Room being freed (by a gang broken for an earlier task) is taken first; room that is
    # idle now is left to allocate, as in Volcano's reclaim.
    fits = pred.passed & table.fits_cached(task, "future") & ~table.fits_cached(task, "idle")
    if fits.any():
        if not ssn.allocatable(queue, task):
            return False
        row = best_node(ssn, task, fits)
        assert row is not None
        stmt.pipeline(task, table.names[row])
        return True
    planner = GangVictims(ssn, task)

    def plan_on(row: int) -> "Plan | None":
        reclaimees = _reclaimees(ssn, job, row)
        if not reclaimees:
            return None
        victims = ssn.reclaimable(task, reclaimees)
        if not victims or not validate_victims(ssn, task, row, victims):
            return None
        return planner.plan(row, order_victims(ssn, victims, task))

    rows = [int(r) for r in np.flatnonzero(candidate_nodes(ssn, task, pred))]
    plans = cache.best(task, rows, plan_on)
    while plans:
        cached = plans.pop(0)
        plan = plan_on(cached.row)  # afresh: the cached one may predate other evictions
        if plan is None or plan.cost != cached.cost:
            cache.forget(task, cached.row)
            if plan is not None:
                plans.append(plan)
                plans.sort(key=lambda p: p.cost)
            continue
        node = table.names[plan.row]
        node_stmt = Statement(ssn)
        reason = eviction_reason(ACTION, task, node)
        broken = {j.uid for j in plan.broken}
        for victim in plan.evictions(planner):
            why = reason
            if victim.job in broken:
                why = f"{reason}; whole job {ssn.jobs[victim.job].key} evicted (gang-safe reclaim)"
            node_stmt.evict(victim, why)
        room = table.fits_row(task, table.future_idle[plan.row])
        queue_ok = room and ssn.allocatable(queue, task)
        # The node must pass the predicates once the victims are out: a card-quota failure
        # (this queue's quota of the node's model used up) looks resolvable, but evicting other
        # queues' pods never frees it.
        if queue_ok and ssn.predicate(task).passed[plan.row]:
            node_stmt.pipeline(task, node)
            stmt.merge(node_stmt)
            return True
        node_stmt.discard()
        if room and not queue_ok:
            # The queue cannot take the task; evictions elsewhere would not change that.
            return False
    return False
