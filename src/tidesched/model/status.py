"""Task statuses and PodGroup phases with Volcano's meaning (pkg/scheduler/api/types.go)."""

from __future__ import annotations

from enum import IntEnum


class TaskStatus(IntEnum):
    PENDING = 1
    ALLOCATED = 2
    PIPELINED = 3
    BINDING = 4
    BOUND = 5
    RUNNING = 6
    RELEASING = 7
    SUCCEEDED = 8
    FAILED = 9
    UNKNOWN = 10

    def label(self) -> str:
        return self.name.capitalize()


# Tasks holding node resources that count towards their job's allocation.
ALLOCATED_STATUSES = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING}
)
# Tasks the scheduler already placed for good (PodGroup phase computation).
SCHEDULED_STATUSES = frozenset(
    {TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.FAILED, TaskStatus.SUCCEEDED}
)
# Tasks that may be chosen as preemption victims.
PREEMPTABLE_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})
# Tasks counted as "ready" for gang purposes (Volcano ReadyTaskNum).
READY_STATUSES = frozenset(
    {
        TaskStatus.BOUND,
        TaskStatus.BINDING,
        TaskStatus.RUNNING,
        TaskStatus.ALLOCATED,
        TaskStatus.SUCCEEDED,
    }
)
# Tasks that are still valid members of the gang (Volcano ValidTaskNum).
VALID_STATUSES = frozenset(
    {
        TaskStatus.ALLOCATED,
        TaskStatus.BINDING,
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
        TaskStatus.SUCCEEDED,
        TaskStatus.PIPELINED,
        TaskStatus.PENDING,
    }
)
# Tasks that occupy a node (resources accounted on the node).
ON_NODE_STATUSES = frozenset(
    {
        TaskStatus.ALLOCATED,
        TaskStatus.PIPELINED,
        TaskStatus.BINDING,
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
        TaskStatus.RELEASING,
    }
)


class PodGroupPhase:
    PENDING = "Pending"
    INQUEUE = "Inqueue"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    COMPLETED = "Completed"

    ALL = (PENDING, INQUEUE, RUNNING, UNKNOWN, COMPLETED)


class QueueState:
    OPEN = "Open"
    CLOSED = "Closed"
    CLOSING = "Closing"
    UNKNOWN = "Unknown"
