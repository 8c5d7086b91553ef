"""Victim handling shared by the preempt and reclaim actions (ACT-4..6).

Rules (Volcano ``framework.Session.BuildVictimsPriorityQueue`` and
``util.ValidateVictims``, restated):

* **Victim order** — ``framework.victim_order`` (the capacity plugin orders by it too).
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

from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np

from tidesched.framework.decisions import FitErrors
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.plugin import PredicateResult
    from tidesched.framework.session import Session
    from tidesched.model.infos import QueueInfo, TaskInfo


def victims_resources(victims: Iterable["TaskInfo"], width: int) -> np.ndarray:
    total = np.zeros(width)
    for v in victims:
        assert v.req_vec is not None
        total += v.req_vec
    return total


def validate_victims(ssn: "Session", preemptor: "TaskInfo", row: int, victims: Iterable["TaskInfo"]) -> bool:
    """Volcano ValidateVictims: request ≤ FutureIdle + Σ victims' requests (and, for a vGPU
    preemptor, its devices fit once the victims are gone)."""
    table = ssn.table
    victims = list(victims)
    avail = table.future_idle[row] + victims_resources(victims, len(table.dims))
    return table.fits_row(preemptor, avail) and devices_fit(ssn, preemptor, row, victims)


def devices_fit(ssn: "Session", task: "TaskInfo", row: int, released: Iterable["TaskInfo"]) -> bool:
    """Does a vGPU task fit the node's devices, a task with DRA claims its claims, once
    ``released`` are gone (True for other tasks, or when deviceshare does not enforce devices)?
    Node room alone can hide devices too full or held."""
    released = list(released)
    ledger = ssn.table.dra
    if task.pod.claims and ledger is not None and not ledger.fits_without(task, row, (t.uid for t in released)):
        return False
    devices = ssn.table.devices
    req = task.pod.vgpu
    if req is None or devices is None or not devices.enforced:
        return True
    return devices.fits_releasing(row, req, released, ssn.table.tasks[row])


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
    """Mask of the nodes preempt/reclaim may consider for ``task`` (within the HyperNode a
    topology-aware turn is trying, when one is: ``SessionTopology.evict_within``)."""
    within = ssn.topology.evict_within
    nodes = ~unresolvable_nodes(ssn, task, pred)
    return nodes if within is None else nodes & within


def node_tasks_sorted(
    ssn: "Session", row: int, accept: Callable[["TaskInfo"], bool] | None = None
) -> list["TaskInfo"]:
    """The tasks on a node (those ``accept`` takes) in key order: the node's dict order
    changes with every move, the key order does not."""
    tasks = ssn.table.tasks[row].values()
    return sorted((t for t in tasks if accept is None or accept(t)), key=lambda t: t.key)


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
