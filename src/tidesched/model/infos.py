"""Per-session mutable views of tasks, jobs and queues (Volcano's TaskInfo, JobInfo, QueueInfo).

Job helpers keep status counters up to date on every status change, so gang checks
(ready / pipelined / starving / valid, per role too) cost O(roles), not O(tasks): they run
after every placement in a session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from tidesched.model.objects import Pod, PodGroup, Queue
from tidesched.model.resource import Resource
from tidesched.model.status import ALLOCATED_STATUSES, PodGroupPhase, TaskStatus
from tidesched.model.sub_jobs import SubJobs

if TYPE_CHECKING:
    import numpy as np

K = TypeVar("K")


class Tally(dict[K, int]):
    """Counts by key, 0 for a missing one (a Counter without its costly constructor: every job
    holds three, and a cache fill makes tens of thousands of jobs)."""

    __slots__ = ()

    def __missing__(self, key: K) -> int:
        return 0


# Every status counted from the start: a present key is read in C, a missing one through
# ``__missing__`` (sessions read a few counts of every job).
_ALL_STATUSES = tuple(TaskStatus)
_READY = ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED}
_PIPELINED_OK = _READY | {TaskStatus.PIPELINED}
_VALID = _PIPELINED_OK | {TaskStatus.PENDING}


def pod_name_index(name: str) -> int | None:
    """The index of a pod named <job>-<task>-<index> (at least three dash-separated parts),
    the task order's fallback (Volcano CompareTask)."""
    parts = name.split("-")
    if len(parts) < 3:
        return None
    try:
        return int(parts[-1])
    except ValueError:
        return None


class TaskInfo:
    """One pod in the session: its parsed record plus the session's status and placement."""

    __slots__ = (
        "pod",
        "uid",
        "key",
        "name",
        "namespace",
        "job",
        "role",
        "priority",
        "status",
        "node_name",
        "resreq",
        "init_resreq",
        "best_effort",
        "preemptable",
        "creation",
        "start_time",
        "req_vec",
        "init_vec",
        "check_cols",
        "nonzero_req",
        "template_key",
        "fit_error",
        "order_key",
        "name_index",
        "devices",
        "base_devices",
        "sch_gated",
    )

    def __init__(self, pod: Pod, job: str, priority: int) -> None:
        self.pod = pod
        self.uid = pod.meta.uid
        self.key = pod.meta.key
        self.name = pod.meta.name
        self.namespace = pod.meta.namespace
        self.job = job
        self.role = pod.role
        self.priority = priority
        self.status = pod.status
        self.node_name = pod.node_name
        self.resreq = pod.resreq
        self.init_resreq = pod.init_resreq
        self.best_effort = pod.init_resreq.is_best_effort()
        self.preemptable = pod.preemptable
        self.creation = pod.meta.creation
        self.start_time = pod.start_time
        # Filled by the node table: request vectors over the session's resource dimensions.
        self.req_vec: np.ndarray | None = None
        self.init_vec: np.ndarray | None = None
        self.check_cols: np.ndarray | None = None
        self.nonzero_req: np.ndarray | None = None  # (cpu, memory) as Pod.nonzero_request
        self.template_key: Any = None
        self.fit_error: Any = None
        self.order_key: Any = None
        self.name_index = pod_name_index(self.name)
        # vGPU devices held (model.devices): what the pod's annotation names, or what the node
        # table chose when it placed the task; ``base_devices`` is what the cluster cache
        # charged, put back after a session (ClusterCache._restore).
        self.devices = pod.vgpu_assignment
        self.base_devices = self.devices
        # Any scheduling gate: no action places the task (Volcano SchGated; model.gates).
        self.sch_gated = bool(pod.scheduling_gates)

    def __repr__(self) -> str:
        return f"Task({self.key}, {self.status.label()}, node={self.node_name or '-'})"


@dataclass(slots=True)
class JobInfo:
    """A PodGroup and its tasks."""

    uid: str
    name: str
    namespace: str
    queue: str
    priority: int
    min_available: int
    task_min_available: dict[str, int]
    min_resources: Resource | None
    pod_group: PodGroup
    phase: str
    creation: float
    preemptable: bool
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    allocated: Resource = field(default_factory=Resource)
    total_request: Resource = field(default_factory=Resource)
    # Status counters: overall, per (role, status), and pending best-effort per role.
    status_count: Tally[TaskStatus] = field(default_factory=lambda: Tally.fromkeys(_ALL_STATUSES, 0))
    role_status_count: Tally[tuple[str, TaskStatus]] = field(default_factory=Tally)
    pending_best_effort: Tally[str] = field(default_factory=Tally)
    # Running totals of the gang sums job ordering asks for on every heap comparison.
    ready_count: int = 0
    valid_count: int = 0
    pending_best_effort_total: int = 0
    # Scheduling outcome bookkeeping of the current session.
    fit_errors: dict[str, Any] = field(default_factory=dict)  # task uid -> FitErrors
    job_fit_error: str = ""
    conditions: list[dict[str, Any]] = field(default_factory=list)
    enqueued_this_session: bool = False
    # The PodGroup's sub-groups (model.sub_jobs), None without a subGroupPolicy.
    sub_jobs: SubJobs | None = None

    @property
    def key(self) -> str:
        return self.uid

    @property
    def task_min_available_total(self) -> int:
        return sum(self.task_min_available.values())

    # -- membership ---------------------------------------------------------------------

    def add_task(self, task: TaskInfo) -> None:
        self.tasks[task.uid] = task
        if self.sub_jobs is not None:
            self.sub_jobs.add(task)
        self._count(task, +1)
        self.total_request.add(task.resreq)
        if task.status in ALLOCATED_STATUSES:
            self.allocated.add(task.resreq)

    def remove_task(self, task: TaskInfo) -> None:
        if self.tasks.pop(task.uid, None) is None:
            return
        self._count(task, -1)
        if self.sub_jobs is not None:
            self.sub_jobs.remove(task)
        self.total_request.sub(task.resreq)
        if task.status in ALLOCATED_STATUSES:
            self.allocated.sub(task.resreq)

    def update_task_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """Move a task to a new status, keeping counters and the allocated sum right."""
        if status == task.status:
            return
        was_alloc = task.status in ALLOCATED_STATUSES
        self._count(task, -1)
        task.status = status
        self._count(task, +1)
        is_alloc = status in ALLOCATED_STATUSES
        if was_alloc and not is_alloc:
            self.allocated.sub(task.resreq)
        elif is_alloc and not was_alloc:
            self.allocated.add(task.resreq)

    def _count(self, task: TaskInfo, delta: int) -> None:
        status = task.status
        self.status_count[status] += delta
        self.role_status_count[(task.role, status)] += delta
        if status in _READY:
            self.ready_count += delta
        if status in _VALID:
            self.valid_count += delta
        if status == TaskStatus.PENDING and task.best_effort:
            self.pending_best_effort[task.role] += delta
            self.pending_best_effort_total += delta
        if self.sub_jobs is not None:
            self.sub_jobs.count(task, delta)

    def tasks_with_status(self, *statuses: TaskStatus) -> list[TaskInfo]:
        wanted = set(statuses)
        return [t for t in self.tasks.values() if t.status in wanted]

    # -- gang arithmetic (Volcano api/job_info.go) ---------------------------------------

    def ready_task_num(self) -> int:
        return self.ready_count

    def waiting_task_num(self) -> int:
        return self.status_count[TaskStatus.PIPELINED]

    def pending_best_effort_num(self) -> int:
        return self.pending_best_effort_total

    def valid_task_num(self) -> int:
        return self.valid_count

    def is_ready(self) -> bool:
        return self.ready_task_num() + self.pending_best_effort_num() >= self.min_available

    def is_pipelined(self) -> bool:
        return (
            self.waiting_task_num() + self.ready_task_num() + self.pending_best_effort_num()
            >= self.min_available
        )

    def is_starving(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() < self.min_available

    def is_pending(self) -> bool:
        return self.phase == PodGroupPhase.PENDING

    def has_pending_tasks(self) -> bool:
        return self.status_count[TaskStatus.PENDING] > 0

    def _role_count(self, role: str, statuses: frozenset[TaskStatus] | set[TaskStatus]) -> int:
        c = self.role_status_count
        return sum(c[(role, s)] for s in statuses)

    def _roles_skip(self) -> bool:
        # Per-role minimums are ignored when they cannot all be met within minMember.
        return self.min_available < self.task_min_available_total

    def check_task_valid(self) -> bool:
        if self._roles_skip():
            return True
        return all(
            m == 0 or self._role_count(role, _VALID) >= m for role, m in self.task_min_available.items()
        )

    def allocated_roles(self, role: str) -> int:
        return self._role_count(role, _READY) + self.pending_best_effort[role]

    def check_task_ready(self) -> bool:
        if self._roles_skip():
            return True
        return all(self.allocated_roles(role) >= m for role, m in self.task_min_available.items())

    def check_task_pipelined(self) -> bool:
        if self._roles_skip():
            return True
        return all(
            self._role_count(role, _PIPELINED_OK) + self.pending_best_effort[role] >= m
            for role, m in self.task_min_available.items()
        )

    def check_task_starving(self) -> bool:
        if self._roles_skip():
            return True
        return any(self._role_count(role, _PIPELINED_OK) < m for role, m in self.task_min_available.items())

    def fit_failed_roles(self) -> set[str]:
        return {self.tasks[uid].role for uid in self.fit_errors if uid in self.tasks}

    def task_has_fit_errors(self, task: TaskInfo) -> bool:
        """Per-role fit-error skipping: only for tasks that carry a role."""
        if not task.role:
            return False
        return task.role in self.fit_failed_roles()

    def need_continue_allocating(self) -> bool:
        """After a task found no node: may the job still become ready in this pass?"""
        if self.min_available == len(self.tasks):
            return False
        failed = self.fit_failed_roles()
        if self._roles_skip():
            left = sum(
                n
                for (role, status), n in self.role_status_count.items()
                if status == TaskStatus.PENDING and role not in failed
            )
            return self.ready_task_num() + left >= self.min_available
        for role in failed:
            m = self.task_min_available.get(role, 0)
            if m and self.allocated_roles(role) < m:
                return False
        return True

    def get_min_resources(self) -> Resource:
        return self.min_resources.clone() if self.min_resources is not None else Resource()


@dataclass(slots=True)
class QueueInfo:
    uid: str
    name: str
    queue: Queue
    weight: int
    priority: int
    reclaimable: bool
    state: str
    parent: str
    creation: float

    @property
    def spec(self) -> Queue:
        return self.queue
