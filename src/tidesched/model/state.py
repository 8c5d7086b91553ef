"""What a session opens on: queue, job and task infos and the node table of one snapshot.

Two paths lead here. :func:`build_state` makes everything afresh from a
:class:`~tidesched.model.snapshot.ClusterSnapshot` (one-shot commands, tests, and the oracle
the cache is checked against); :class:`~tidesched.model.cache.ClusterCache` keeps the same
objects up to date per event and hands them out again. Both use the helpers below, so a job,
a task or a warning is made one way only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tidesched.model.dra.ledger import ClaimLedger
from tidesched.model.hypernode_tree import HyperNodeTree, build_tree
from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo
from tidesched.model.node_table import NodeTable, occupies_node
from tidesched.model.objects import Pod, PodGroup, PriorityClass, Queue
from tidesched.model.problems import Event, warning
from tidesched.model.snapshot import ClusterSnapshot
from tidesched.model.status import TaskStatus
from tidesched.model.sub_jobs import SubJobs


@dataclass(slots=True)
class SessionState:
    snapshot: ClusterSnapshot
    events: list[Event]  # warnings about the objects, before the session adds its own
    priority_classes: dict[str, int]
    default_priority: int
    queues: dict[str, QueueInfo]  # by name, in name order
    jobs: dict[str, JobInfo]  # by PodGroup key, in key order
    tasks: dict[str, TaskInfo]  # tasks of those jobs, by uid, in pod key order
    table: NodeTable  # ready nodes, with every pod that occupies one
    hypernodes: HyperNodeTree  # the network topology over the table's nodes (model.hypernode_tree)
    # The HyperNode each gang was placed within by earlier sessions (job uid -> name): the
    # cluster cache's memory (Volcano keeps AllocatedHyperNode in its cache); empty when rebuilt.
    domains: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)


def priority_values(classes: Iterable[PriorityClass]) -> tuple[dict[str, int], int]:
    """Values by class name, and the value of the global default (0 without one)."""
    classes = list(classes)
    values = {pc.name: pc.value for pc in classes}
    default = max((pc.value for pc in classes if pc.global_default), default=0)
    return values, default


def class_priority(name: str, values: Mapping[str, int], default: int) -> int:
    return values[name] if name and name in values else default


def pod_priority(pod: Pod, values: Mapping[str, int], default: int) -> int:
    return pod.priority if pod.priority is not None else class_priority(pod.priority_class, values, default)


def queue_info(q: Queue) -> QueueInfo:
    return QueueInfo(
        uid=q.name,
        name=q.name,
        queue=q,
        weight=q.weight,
        priority=q.priority,
        reclaimable=q.reclaimable,
        state=q.state,
        parent=q.parent,
        creation=q.meta.creation,
    )


def job_info(pg: PodGroup, priority: int) -> JobInfo:
    return JobInfo(
        uid=pg.key,
        name=pg.meta.name,
        namespace=pg.meta.namespace,
        queue=pg.queue,
        priority=priority,
        min_available=pg.min_member,
        task_min_available=dict(pg.min_task_member),
        min_resources=pg.min_resources,
        pod_group=pg,
        phase=pg.phase,
        creation=pg.meta.creation,
        preemptable=pg.preemptable,
        sub_jobs=SubJobs.for_podgroup(pg),
    )


def job_key_of(pod: Pod) -> str:
    return f"{pod.meta.namespace}/{pod.group_name}" if pod.group_name else ""


def queue_not_found(pg: PodGroup) -> Event:
    return warning(
        "PodGroup", pg.meta.namespace, pg.meta.name, "QueueNotFound",
        f"queue {pg.queue!r} of PodGroup {pg.key} does not exist; the job is not scheduled",
    )


def podgroup_not_found(pod: Pod) -> Event:
    return warning(
        "Pod", pod.meta.namespace, pod.meta.name, "PodGroupNotFound",
        f"PodGroup {job_key_of(pod) or '(none)'} of pod {pod.key} is missing or not schedulable; the pod is not scheduled",
    )


def pod_dims(pod: Pod) -> set[str]:
    """The scalar resource names a pod brings into the node table's columns."""
    return set(pod.init_resreq.scalars) | set(pod.resreq.scalars)


def build_state(snapshot: ClusterSnapshot, scheduler_names: Iterable[str]) -> SessionState:
    """Every info made afresh from the snapshot's records."""
    events: list[Event] = list(snapshot.problems)
    values, default = priority_values(snapshot.priority_classes)
    queues = {q.name: queue_info(q) for q in sorted(snapshot.queues, key=lambda q: q.name)}

    jobs: dict[str, JobInfo] = {}
    for pg in sorted(snapshot.podgroups, key=lambda p: p.key):
        if pg.queue not in queues:
            events.append(queue_not_found(pg))
            continue
        jobs[pg.key] = job_info(pg, class_priority(pg.priority_class, values, default))

    ours = set(scheduler_names)
    tasks: dict[str, TaskInfo] = {}
    placed: list[TaskInfo] = []
    extra_dims: set[str] = set()
    for pod in sorted(snapshot.pods, key=lambda p: p.key):
        job_key = job_key_of(pod)
        job = jobs.get(job_key) if pod.scheduler_name in ours else None
        task = TaskInfo(pod, job_key if job else "", pod_priority(pod, values, default))
        extra_dims |= pod_dims(pod)
        if job is not None:
            job.add_task(task)
            tasks[task.uid] = task
        elif pod.scheduler_name in ours and task.status == TaskStatus.PENDING:
            events.append(podgroup_not_found(pod))
        if occupies_node(task):
            placed.append(task)

    table = NodeTable([n for n in snapshot.nodes if n.ready], extra_dims)
    for task in tasks.values():
        table.prepare_task(task)
    for task in placed:
        if task.req_vec is None:
            table.prepare_task(task)
        i = table.index.get(task.node_name)
        if i is not None:
            table.add_task(i, task)
    table.dra = ClaimLedger.open(snapshot.dra, table)
    tree = build_tree(snapshot.hypernodes, ((n.name, n.meta.labels) for n in snapshot.nodes), table.names)
    events.extend(tree.problems)
    return SessionState(snapshot, events, values, default, queues, jobs, tasks, table, tree)
