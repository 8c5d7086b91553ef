"""Statement: staged allocate / pipeline / evict operations, committed or discarded as a unit
(SES-3). Each operation updates the session at once and fires the plugins' event handlers;
discard undoes the operations in reverse order, firing the opposite handlers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo

_EVICT, _PIPELINE, _ALLOCATE = "evict", "pipeline", "allocate"


class Statement:
    __slots__ = ("ssn", "operations")

    def __init__(self, ssn: "Session") -> None:
        self.ssn = ssn
        self.operations: list[tuple[str, "TaskInfo", object]] = []

    def __len__(self) -> int:
        return len(self.operations)

    def evict(self, task: "TaskInfo", reason: str) -> None:
        prev = task.status
        self.ssn.move_task(task, TaskStatus.RELEASING, task.node_name)
        self.ssn.fire_deallocate(task)
        self.operations.append((_EVICT, task, (prev, reason)))

    def pipeline(self, task: "TaskInfo", node_name: str, eviction_occurred: bool = False) -> None:
        """``eviction_occurred``: victims were evicted for the task on this node (Volcano's
        flag of the same name), so the node is written as the pod's nominatedNodeName."""
        self.ssn.move_task(task, TaskStatus.PIPELINED, node_name)
        self.ssn.fire_allocate(task)
        if eviction_occurred:
            self.ssn.eviction_occurred.add(task.uid)
        else:
            self.ssn.eviction_occurred.discard(task.uid)
        self.operations.append((_PIPELINE, task, node_name))

    def allocate(self, task: "TaskInfo", node_name: str) -> None:
        self.ssn.move_task(task, TaskStatus.ALLOCATED, node_name)
        self.ssn.fire_allocate(task)
        self.operations.append((_ALLOCATE, task, node_name))

    def discard(self) -> None:
        ssn = self.ssn
        for op, task, data in reversed(self.operations):
            # Volcano's GenerateLastTxContext: the task's context before the undo is kept (a
            # pipeline's node and EvictionOccurred still nominate the pod at close).
            ssn.last_tx[task.uid] = (task.status, task.node_name, task.uid in ssn.eviction_occurred)
            if op == _EVICT:
                prev, _reason = data  # type: ignore[misc]
                ssn.move_task(task, prev, task.node_name)
                ssn.fire_allocate(task)
            else:
                ssn.unplace_task(task)
        self.operations.clear()

    def commit(self) -> None:
        ssn = self.ssn
        for op, task, data in self.operations:
            ssn.last_tx.pop(task.uid, None)  # Volcano's ClearLastTxContext
            if op == _EVICT:
                ssn.record_eviction(task, data[1])  # type: ignore[index]
            elif op == _ALLOCATE:
                ssn.dispatch(task)
        self.operations.clear()

    def merge(self, other: "Statement") -> None:
        """Append another statement's operations (used when a per-node attempt succeeds)."""
        self.operations.extend(other.operations)
        other.operations.clear()
