"""backfill (ACT-3): place best-effort tasks (no resource requests) of admitted jobs.

Tasks are visited queue → job → task in the session's orders; each goes to the best-scored
node passing the plugin predicates (there is no resource to fit) and is dispatched as soon
as its job is ready (Volcano Session.Allocate).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.framework.placement import best_node, feasible_nodes, no_node_errors
from tidesched.framework.decisions import FitErrors
from tidesched.framework.queues import KeyedQueue, PriorityQueue
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo


def _pending_best_effort(ssn: "Session") -> list["TaskInfo"]:
    queues = PriorityQueue(ssn.queue_order_less)
    jobs_by_queue: dict[str, PriorityQueue | KeyedQueue] = {}
    tasks_by_job: dict[str, list[TaskInfo]] = {}
    for job in ssn.jobs.values():
        if job.is_pending():
            continue
        if not job.pending_best_effort_total and not job.status_count[TaskStatus.PIPELINED]:
            continue  # no best-effort task pending or pipelined: nothing below would find one
        vr = ssn.job_valid(job)
        if vr is not None and not vr.passed:
            continue
        if job.queue not in ssn.queues:
            continue
        best_effort = []
        for task in job.tasks.values():
            if not task.best_effort:
                continue
            if task.status == TaskStatus.PIPELINED:
                # A pipelined best-effort task is placed afresh: it needs no resources.
                ssn.unplace_task(task)
            if task.status == TaskStatus.PENDING and not task.sch_gated:
                best_effort.append(task)
        if not best_effort:
            continue
        tasks_by_job[job.uid] = ssn.sort_tasks(best_effort)
        if job.queue not in jobs_by_queue:
            jobs_by_queue[job.queue] = ssn.job_queue()
            queues.push(ssn.queues[job.queue])
        jobs_by_queue[job.queue].push(job)
    ordered: list[TaskInfo] = []
    while not queues.empty():
        queue = queues.pop()
        jobs = jobs_by_queue[queue.uid]
        while not jobs.empty():
            ordered.extend(tasks_by_job[jobs.pop().uid])
    return ordered


def execute(ssn: "Session") -> None:
    table = ssn.table
    for task in _pending_best_effort(ssn):
        job = ssn.jobs[task.job]
        err = ssn.pre_predicate(task)
        if err:
            job.fit_errors[task.uid] = FitErrors(total_nodes=len(table), message=err)
            continue
        feasible, _ = feasible_nodes(ssn, task, check_resources=False)
        if task.pod.claims:  # backfill allocates: claims must be allocatable now
            feasible &= ssn.claims_now(task)
        node = best_node(ssn, task, feasible)
        if node is None:
            job.fit_errors[task.uid] = no_node_errors(ssn, task, None)
            continue
        ssn.allocate_and_dispatch(task, table.names[node])
