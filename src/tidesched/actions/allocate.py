"""allocate (ACT-2): place pending tasks queue by queue, job by job, gang all-or-nothing.

Per Volcano actions/allocate: queues in QueueOrder (overused queues skipped), each turn the
queue's best job (JobOrder) gets a Statement; its pending non-best-effort tasks go in
TaskOrder to the best-scored feasible node (a gated task only asks its queue, model.gates), preferring nodes whose *idle* resources fit
(allocate) over nodes that fit only once releasing resources are freed (pipeline). The
statement commits when the job is ready (JobReady), stays staged when it is only pipelined,
and is discarded otherwise. A task that finds no node stops the job unless the job could
still reach its minimum without that task's role (NeedContinueAllocating). With
``predicateErrorCacheByRole`` (Volcano's rule, framework/predicate_cache.py), a node one pod
failed on in a turn is out for the job's later pods of the same role.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.actions.allocate_nomination import allocate_from_nomination
from tidesched.actions.allocate_topology import allocate_gang, place_tasks, settle_fit_errors
from tidesched.actions.worksheet import Worksheet, organize
from tidesched.framework.gates import held_outside, skip_gated
from tidesched.framework.placement import choose_node, no_node_errors
from tidesched.framework.predicate_cache import PredicateErrorCache, enabled as error_cache_enabled
from tidesched.framework.decisions import FitErrors
from tidesched.framework.queues import KeyedQueue, PriorityQueue
from tidesched.framework.statement import Statement
from tidesched.model.status import PodGroupPhase, TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo


def execute(ssn: "Session") -> None:
    has_enqueue = "enqueue" in ssn.config.actions
    queues = PriorityQueue(ssn.queue_order_less)
    jobs_by_queue: dict[str, PriorityQueue | KeyedQueue] = {}
    skip_placed = _queue_keys_static(ssn)
    pending_status = TaskStatus.PENDING  # read for every job: bound once
    by_role = error_cache_enabled(ssn)  # the config's switch, read once per session
    for job in ssn.jobs.values():
        if job.is_pending():
            if has_enqueue:
                continue
            # Without an enqueue action, allocate admits jobs itself.
            job.phase = PodGroupPhase.INQUEUE
        if skip_placed and job.status_count[pending_status] == job.pending_best_effort_total:
            continue  # nothing to place: its turn would change nothing (see _queue_keys_static)
        vr = ssn.job_valid(job)
        if vr is not None and not vr.passed:
            continue
        if job.queue not in ssn.queues:
            continue
        if not ssn.topology.ready and job.uid in ssn.topology.constrained:
            continue  # Volcano: HyperNodes not ready to schedule (a cycle, a second parent)
        if job.queue not in jobs_by_queue:
            jobs_by_queue[job.queue] = ssn.job_queue()
            queues.push(ssn.queues[job.queue])
        jobs_by_queue[job.queue].push(job)

    pending_tasks: dict[str, PriorityQueue] = {}
    # Gangs placed by the HyperNode gradient, or with a constraint that does not apply: their
    # worksheets (sub-groups and their pods in task order).
    constrained: dict[str, Worksheet] = {}
    while not queues.empty():
        queue = queues.pop()
        if ssn.overused(queue):
            continue
        jobs = jobs_by_queue.get(queue.uid)
        if jobs is None or jobs.empty():
            continue
        job = jobs.pop()
        if job.uid in ssn.topology.constrained or job.sub_jobs is not None:
            if _allocate_constrained(ssn, job, queue, constrained):
                jobs.push(job)
            queues.push(queue)
            continue
        tasks = pending_tasks.get(job.uid)
        if tasks is None:
            tasks = PriorityQueue(
                ssn.task_order_less,
                (t for t in job.tasks.values()
                 if t.status == TaskStatus.PENDING and not t.best_effort and not held_outside(t)),
            )
            pending_tasks[job.uid] = tasks
        if tasks.empty():
            queues.push(queue)
            continue

        stmt = Statement(ssn)
        _allocate_tasks(ssn, stmt, tasks, job, queue, by_role)
        if ssn.job_ready(job):
            stmt.commit()
            if not tasks.empty():
                jobs.push(job)
        elif not ssn.job_pipelined(job):
            stmt.discard()
        queues.push(queue)


def _allocate_constrained(ssn: "Session", job: "JobInfo", queue: "QueueInfo", worksheets: dict[str, Worksheet]) -> bool:
    """A gang with a network-topology constraint or sub-groups (actions/allocate_topology.py);
    whether it has pods left for another turn."""
    topo = ssn.topology
    ws = worksheets.get(job.uid)
    if ws is None:
        ws = worksheets[job.uid] = organize(ssn, job)
    if ws.empty():
        return False
    if not topo.uses_gradient(job):
        # A constraint that does not apply (an unknown tier name): the whole cluster, as any
        # gang, its node scores still by the HyperNodes its pods land in.
        sub = topo.whole(job)
        tasks = ws.tasks.get(sub.uid)
        if not tasks:
            return False
        stmt = allocate_from_nomination(ssn, job, sub, queue, tasks) if topo.nominated.get(sub.uid) else None
        if stmt is not None:
            ws.tasks[sub.uid] = []
        else:
            run = place_tasks(ssn, job, sub, queue, tasks, topo.top)
            ws.tasks[sub.uid] = run.rest if run is not None else []
            if run is None:
                settle_fit_errors(ssn, job)
                return False
            stmt = run.stmt
        if ssn.job_ready(job):
            stmt.commit()
            topo.nominated.pop(sub.uid, None)
            return bool(ws.tasks[sub.uid])
        return False
    found = allocate_gang(ssn, job, queue, ws)
    if found is None:
        settle_fit_errors(ssn, job)
        topo.note_waiting(job, ws.pending())
        return False
    worksheets[job.uid] = found.worksheet
    if ssn.job_ready(job):
        found.stmt.commit()
        topo.commit_domain(job, found.hypernode, found.decisions)
        return not found.worksheet.empty()
    return False


# Queue-order plugins whose order of two queues depends only on those queues' own state.
_OWN_STATE_QUEUE_ORDER = frozenset({"proportion"})


def _queue_keys_static(ssn: "Session") -> bool:
    """May jobs without a pending task (not best-effort) stay out of the heaps? Their turn
    pops the job, finds no task and puts the queue back, changing nothing. Leaving them out
    keeps every other pop in the same order as long as no key of a queue waiting in the heap
    changes while another queue allocates: job keys (priority, gang readiness, drf share)
    change only for the job being allocated, and the queue order is by the queue's own
    allocation under these plugins. A hierarchical order (hdrf, hierarchical capacity) may
    re-rank waiting queues, so there every job keeps its turn."""
    return all(name in _OWN_STATE_QUEUE_ORDER for tier in ssn._chain("queue_order") for name, _fn in tier)


def _allocate_tasks(
    ssn: "Session", stmt: Statement, tasks: PriorityQueue, job: "JobInfo", queue: "QueueInfo", by_role: bool
) -> None:
    table = ssn.table
    errors = PredicateErrorCache(by_role)  # one per turn, as Volcano's helper
    while not tasks.empty():
        task = tasks.pop()
        if not ssn.allocatable(queue, task):
            continue
        if skip_gated(ssn, task):  # counted by its queue, never placed while gated
            continue
        if job.task_has_fit_errors(task):
            continue
        err = ssn.pre_predicate(task)
        if err:
            job.fit_errors[task.uid] = FitErrors(total_nodes=len(table), message=err)
            break
        node, now, fit = choose_node(ssn, task, errors=errors)
        if node is None:
            job.fit_errors[task.uid] = no_node_errors(ssn, task, fit)
            if job.need_continue_allocating():
                continue
            break
        if now:
            stmt.allocate(task, table.names[node])
        else:
            stmt.pipeline(task, table.names[node])
        if ssn.job_ready(job) and not tasks.empty():
            break
