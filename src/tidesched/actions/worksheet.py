"""A gang's worksheet for allocate and the gang eviction actions (Volcano v1.15.1
``organizeJobWorksheet`` / ``organizeEvictionWorksheet``): its sub-groups that are not ready yet
and have pods to place, each with those pods in TaskOrder.

Sub-groups pop in this order: first those the gang needs to reach each policy's
``minSubGroups`` (the fewest, taken in SubJobOrder among the sub-groups not ready), then
SubJobOrder (the gang and priority plugins', then the lower match index, then the id). A gang
without sub-groups has one: itself.

Also the per-sub-group forms of the gang's bookkeeping allocate asks after a pod finds no node:
whether its role already failed in the sub-group (the predicate cache by role), and whether
placing may go on (Volcano ``NeedContinueAllocating(subJob)``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable

from tidesched.framework.gates import held_outside
from tidesched.framework.queues import PriorityQueue
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo
    from tidesched.model.sub_jobs import SubJobInfo


class Worksheet:
    """Sub-groups to place (a queue) and the pods each still has to place."""

    def __init__(self, queue: PriorityQueue, tasks: dict[str, list["TaskInfo"]]) -> None:
        self.queue = queue
        self.tasks = tasks

    def empty(self) -> bool:
        return self.queue.empty()

    def copy(self) -> "Worksheet":
        """A copy to try a HyperNode with (the pod lists are replaced, never changed)."""
        return Worksheet(self.queue.copy(), dict(self.tasks))

    def pending(self) -> list["TaskInfo"]:
        """Every pod left, sub-group after sub-group in queue order."""
        q = self.queue.copy()
        out: list["TaskInfo"] = []
        while not q.empty():
            out += self.tasks[q.pop().uid]
        return out


def organize(ssn: "Session", job: "JobInfo", keep: Callable[["TaskInfo"], bool] | None = None) -> Worksheet:
    """The gang's worksheet; ``keep`` chooses the pods (default: allocate's — pending, not
    best-effort, held by no gate but Volcano's own)."""
    topo = ssn.topology
    subs = topo.sub_jobs(job)
    counted: dict[str, int] = {}
    unready = []
    for sub in subs:
        if ssn.sub_job_ready(job, sub):
            counted[sub.gid] = counted.get(sub.gid, 0) + 1
        else:
            unready.append(sub)
    mins = job.sub_jobs.min_groups if job.sub_jobs is not None else {}
    required: set[str] = set()
    def cmp(l: "SubJobInfo", r: "SubJobInfo") -> int:
        return -1 if ssn.sub_job_order_less(l, r) else (1 if ssn.sub_job_order_less(r, l) else 0)

    for sub in sorted(unready, key=functools.cmp_to_key(cmp)):
        if counted.get(sub.gid, 0) < mins.get(sub.gid, 0):
            required.add(sub.uid)
            counted[sub.gid] = counted.get(sub.gid, 0) + 1

    def less(l: "SubJobInfo", r: "SubJobInfo") -> bool:
        lq, rq = l.uid in required, r.uid in required
        if lq != rq:
            return lq
        return ssn.sub_job_order_less(l, r)

    if keep is None:
        keep = _allocatable
    queue = PriorityQueue(less)
    tasks: dict[str, list["TaskInfo"]] = {}
    for sub in subs:
        mine = ssn.sort_tasks(t for t in sub.tasks.values() if keep(t))
        if mine:
            queue.push(sub)
            tasks[sub.uid] = mine
    return Worksheet(queue, tasks)


def _allocatable(task: "TaskInfo") -> bool:
    return task.status == TaskStatus.PENDING and not task.best_effort and not held_outside(task)


def failed_role(job: "JobInfo", sub: "SubJobInfo", task: "TaskInfo") -> bool:
    """Whether a pod of the task's role in the same sub-group already found no node (Volcano
    TaskHasFitErrors(subJob)): then the task is skipped. Pods without a role never are."""
    if not task.role:
        return False
    tasks = sub.tasks
    return any(uid in tasks and tasks[uid].role == task.role for uid in job.fit_errors)


def reset_fit_errors(job: "JobInfo", sub: "SubJobInfo") -> None:
    """Forget the sub-group's pods' fit errors (Volcano ResetSubJobFitErr)."""
    if sub.tasks is job.tasks:
        job.fit_errors.clear()
        return
    for uid in [u for u in job.fit_errors if u in sub.tasks]:
        del job.fit_errors[uid]


def need_continue(job: "JobInfo", sub: "SubJobInfo") -> bool:
    """After a pod of ``sub`` found no node: may placing the sub-group go on (Volcano
    NeedContinueAllocating(subJob))? Not when every pod of the gang, or of the sub-group, is
    needed; yes for a gang with sub-groups; else the gang's role rules."""
    if job.min_available == len(job.tasks):
        return False
    if sub.min_available >= len(sub.tasks):
        return False
    if job.sub_jobs is not None:
        return True
    return job.need_continue_allocating()
