"""Victim handling shared by the preempt and reclaim actions (ACT-4..6).

Rules (Volcano ``framework.Session.BuildVictimsPriorityQueue`` and
``util.ValidateVictims``, restated):

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
* **ValidateVictims** — a node is worth trying only if the preemptor's request (with init
  containers) fits the node's FutureIdle plus the resources of *all* victims. An empty
  victim list is valid when FutureIdle alone fits (current upstream: an earlier eviction in
  the same session may already have made room).
* **Candidate nodes** — a node whose predicate failure is unresolvable (node selector,
  taints, unschedulable, …) can never be fixed by evicting pods; every other node stays a
  candidate (Volcano ``PredicateForPreemptAction``: plain ``Unschedulable`` failures such as
  pod count or anti-affinity are resolvable). Unresolvable failures recorded for the task
  by ``allocate`` this session are excluded as well.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np

from tidesched.framework.session import FitErrors
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.plugin import PredicateResult
    from tidesched.framework.session import Session
    from tidesched.model.infos import QueueInfo, TaskInfo


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


def victims_resources(victims: Iterable["TaskInfo"], width: int) -> np.ndarray:
    total = np.zeros(width)
    for v in victims:
        assert v.req_vec is not None
        total += v.req_vec
    return total


def validate_victims(ssn: "Session", preemptor: "TaskInfo", row: int, victims: Iterable["TaskInfo"]) -> bool:
    """Volcano ValidateVictims: request ≤ FutureIdle + Σ victims' requests."""
    table = ssn.table
    avail = table.future_idle[row] + victims_resources(victims, len(table.dims))
    return table.fits_row(preemptor, avail)


def unresolvable_nodes(ssn: "Session", task: "TaskInfo", pred: "PredicateResult") -> np.ndarray:
    """Nodes no eviction can make feasible for ``task``."""
    mask = np.zeros(len(ssn.table), dtype=bool)
    for failure in pred.failures:
        if failure.unresolvable:
            mask |= failure.nodes
    job = ssn.jobs.get(task.job)
    recorded = job.fit_errors.get(task.uid) if job is not None else None
    if isinstance(recorded, FitErrors) and recorded.unresolvable is not None:
        if len(recorded.unresolvable) == len(mask):
            mask |= recorded.unresolvable
    return mask


def candidate_nodes(ssn: "Session", task: "TaskInfo", pred: "PredicateResult") -> np.ndarray:
    """Mask of the nodes preempt/reclaim may consider for ``task``."""
    return ~unresolvable_nodes(ssn, task, pred)


def node_tasks_sorted(
    ssn: "Session", row: int, accept: Callable[["TaskInfo"], bool] | None = None
) -> list["TaskInfo"]:
    """The tasks on a node (those ``accept`` takes) in key order: the node's dict order
    changes with every move, the key order does not."""
    tasks = ssn.table.tasks[row].values()
    return sorted((t for t in tasks if accept is None or accept(t)), key=lambda t: t.key)


def eviction_reason(action: str, preemptor: "TaskInfo", node: str) -> str:
    return f"{action}: evicted to make room for {preemptor.key} on node {node}"


def fits_now(ssn: "Session", queue: "QueueInfo", task: "TaskInfo", row: int,
             predicate_ok: bool | None = None) -> bool:
    """Volcano preemptorFitsOnNode: Allocatable(queue, task) ∧ request ≤ FutureIdle ∧ the
    predicates pass on the node. ``predicate_ok`` short-cuts a predicate result the caller
    already knows to be current."""
    if not ssn.allocatable(queue, task):
        return False
    if not ssn.table.fits_row(task, ssn.table.future_idle[row]):
        return False
    if predicate_ok is not None:
        return predicate_ok
    return bool(ssn.predicate(task).passed[row])



class TentativeEvictions:
    """Tasks taken off their node for a dry run, and put back in any order.

    This is Volcano's ``NodeInfo.RemoveTask`` on a cloned node, done on the session itself
    and always undone: the task leaves the node entirely (its resources, its pod slot, its
    place in pod (anti-)affinity), and the plugins' deallocate handlers run so that their
    accounting (queue allocations, shares) sees the eviction. ``restore`` puts a task back
    exactly as it was and runs the allocate handlers. A Statement could not be used: it
    can only be undone as a whole, in reverse, while the dry run reprieves single victims.
    """

    __slots__ = ("ssn", "_prev")

    def __init__(self, ssn: "Session") -> None:
        self.ssn = ssn
        self._prev: dict[str, tuple["TaskInfo", TaskStatus, str]] = {}

    def remove(self, task: "TaskInfo") -> None:
        self._prev[task.uid] = (task, task.status, task.node_name)
        self.ssn.unplace_task(task)

    def restore(self, task: "TaskInfo") -> None:
        _task, status, node = self._prev.pop(task.uid)
        self.ssn.move_task(task, status, node)
        self.ssn.fire_allocate(task)

    def restore_all(self) -> None:
        for task, _status, _node in reversed(list(self._prev.values())):
            self.restore(task)
