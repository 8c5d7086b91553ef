"""One reclaimer task's moves, shared by Volcano's per-pod reclaim and the gang-safe one.

* ``reclaimees``: on a node, the **Running** tasks with the ``preemptable`` flag of jobs in
  *other* queues whose queue is reclaimable (``spec.reclaimable`` unset counts as true).
* ``eligible``: the per-task gates of Volcano's loop (``preemptionPolicy: Never`` ⇒ skip;
  ``Preemptive(queue, task)``; PrePredicate).
* ``volcano_walk``: Volcano's per-node, per-pod choice. Candidate nodes in name order; on a
  node with reclaimees: Reclaimable filter → ValidateVictims → evict in victim order while
  the request does not fit the node's FutureIdle → pipeline. The first node that works is
  taken; a node that does not has its evictions undone.
* ``place``: evict a chosen set on one node and pipeline the task there, only while
  ``Allocatable(queue, task)`` holds after the evictions (REL-2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Iterable

import numpy as np

from tidesched.actions.victims import candidate_nodes, devices_fit, node_tasks_sorted, validate_victims
from tidesched.framework.reasons import RECLAIM, eviction_reason
from tidesched.framework.victim_order import order_victims
from tidesched.framework.statement import Statement
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo

ACTION = RECLAIM


@dataclass
class Step:
    """What one reclaimer task got: its node and the tasks evicted for it."""

    task: "TaskInfo"
    row: int
    victims: list["TaskInfo"] = field(default_factory=list)


class Placed(Enum):
    YES = "yes"
    NO_ROOM = "no room"  # the evictions were not enough
    QUEUE_FULL = "queue full"  # room enough, but Allocatable(queue, task) says no
    NO_FIT = "no fit"  # room and queue enough, but the node still fails the predicates


def reclaimees(ssn: "Session", job: "JobInfo", row: int) -> list["TaskInfo"]:
    def accept(t: "TaskInfo") -> bool:
        if t.status != TaskStatus.RUNNING or not t.preemptable:
            return False
        other = ssn.jobs.get(t.job)
        if other is None or other.queue == job.queue:
            return False
        q = ssn.queues.get(other.queue)
        return q is not None and q.reclaimable

    return node_tasks_sorted(ssn, row, accept)


def eligible(ssn: "Session", queue: "QueueInfo", task: "TaskInfo") -> bool:
    if task.pod.preemption_policy == "Never":
        return False
    if not ssn.preemptive(queue, task):
        return False
    return ssn.pre_predicate(task) is None


def place(
    ssn: "Session",
    stmt: Statement,
    queue: "QueueInfo",
    task: "TaskInfo",
    row: int,
    victims: Iterable["TaskInfo"],
    reasons: dict[str, str] | None = None,
) -> Placed:
    """Evict ``victims`` (``reasons``: a longer reason per victim job) and pipeline ``task``
    on ``row``; the operations go into ``stmt`` only when the task was pipelined."""
    table = ssn.table
    node = table.names[row]
    node_stmt = Statement(ssn)
    reason = eviction_reason(ACTION, task.key, node)
    for victim in victims:
        node_stmt.evict(victim, (reasons or {}).get(victim.job, reason))
    if not table.fits_row(task, table.future_idle[row]):
        node_stmt.discard()
        return Placed.NO_ROOM
    if not ssn.allocatable(queue, task):
        node_stmt.discard()
        return Placed.QUEUE_FULL
    # The node must pass the predicates once the victims are out, as preempt re-checks: a
    # card-quota failure (this queue's quota of the node's model used up) counts as resolvable,
    # yet evicting other queues' pods never frees it (found by the chaos simulations).
    if not ssn.predicate(task).passed[row]:
        node_stmt.discard()
        return Placed.NO_FIT
    node_stmt.pipeline(task, node, eviction_occurred=len(node_stmt) > 0)
    stmt.merge(node_stmt)
    return Placed.YES


def walk_rows(ssn: "Session", task: "TaskInfo", candidates: np.ndarray) -> list[int]:
    """The order the walk tries nodes in: by name. (Volcano's is the order its parallel
    predicate pass finished in, which nothing fixes; benchmarks/differential_ties.py replays
    vc-scheduler's.)"""
    return [int(r) for r in np.flatnonzero(candidates)]


def volcano_walk(
    ssn: "Session", stmt: Statement, queue: "QueueInfo", job: "JobInfo", task: "TaskInfo"
) -> Step | None:
    """Volcano's per-pod reclaim for ``task`` (see the module rules)."""
    table = ssn.table
    for row in walk_rows(ssn, task, candidate_nodes(ssn, task, ssn.predicate(task))):
        found = reclaimees(ssn, job, row)
        if not found:
            continue
        victims = ssn.reclaimable(task, found)
        if not validate_victims(ssn, task, row, victims):
            continue
        avail = table.future_idle[row].copy()
        chosen: list["TaskInfo"] = []
        for victim in order_victims(ssn, victims, task):
            if table.fits_row(task, avail) and devices_fit(ssn, task, row, chosen):
                break
            assert victim.req_vec is not None
            avail += victim.req_vec
            chosen.append(victim)
        if place(ssn, stmt, queue, task, row, chosen) is Placed.YES:
            return Step(task, row, chosen)
    return None
