"""allocate's fast path for a sub-group that gangpreempt or gangreclaim nominated a HyperNode
for in this session (Volcano v1.15.1 ``allocateFromNomination`` / ``validateNomination``).

The nomination is taken as it stands, without a gradient search, when every pod the sub-group
has left to place is nominated (``status.nominatedNodeName``) to a node of that HyperNode, its
queue may take it (Allocatable), and it passes PrePredicate and the predicates there with room
once releasing resources are freed. Then each pod goes to its node (bound where the node's idle
resources hold it, else pipelined) and the sub-group's domain grows to hold the HyperNode. On
any miss the nomination is dropped — the sub-group's and its pods' nominated nodes, for the rest
of the session — and allocate searches as usual.

Volcano keeps the HyperNode nomination in memory only (it is gone in the next session), so the
path is taken only when allocate runs after the gang action in the same session. The pods'
``nominatedNodeName`` does outlive the session: written at its close for a pod pipelined where
victims were evicted for it (``Decisions.nominated``), as Volcano's RecordJobStatusEvent does.
tidesched does the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.framework.statement import Statement

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo
    from tidesched.model.sub_jobs import SubJobInfo


def allocate_from_nomination(ssn: "Session", job: "JobInfo", sub: "SubJobInfo", queue: "QueueInfo",
                             tasks: list["TaskInfo"]) -> Statement | None:
    """The sub-group's pods placed on their nominated nodes (a staged statement), or None with
    the nomination dropped."""
    topo, table = ssn.topology, ssn.table
    pinned = topo.nominated.get(sub.uid, "")
    plan = _validate(ssn, queue, tasks, pinned) if pinned in topo.index else None
    if plan is None:
        drop_nomination(ssn, sub, tasks)
        return None
    stmt = Statement(ssn)
    for task, row in plan:
        if table.fits_cached(task, "idle")[row]:
            stmt.allocate(task, table.names[row])
        elif table.fits_cached(task, "future")[row]:
            stmt.pipeline(task, table.names[row])
        # else: an earlier pod of the plan took the room; Volcano leaves this one unplaced too
    return stmt


def _validate(ssn: "Session", queue: "QueueInfo", tasks: list["TaskInfo"], pinned: str) -> list[tuple["TaskInfo", int]] | None:
    topo, table = ssn.topology, ssn.table
    within = topo.mask(pinned)
    plan = []
    for task in tasks:
        if not ssn.allocatable(queue, task):
            return None
        row = table.index.get(topo.nominated_node(task)) if topo.nominated_node(task) else None
        if row is None or not within[row]:
            return None
        if ssn.pre_predicate(task) is not None:
            return None
        if not (ssn.predicate_mask(task)[row] and table.fits_cached(task, "future")[row]):
            return None
        plan.append((task, row))
    return plan


def drop_nomination(ssn: "Session", sub: "SubJobInfo", tasks: list["TaskInfo"]) -> None:
    """Forget the sub-group's nominated HyperNode and its pods' nominated nodes (Volcano
    invalidateSubJobNomination)."""
    ssn.topology.nominated.pop(sub.uid, None)
    ssn.topology.unnominated.update(t.uid for t in tasks)
