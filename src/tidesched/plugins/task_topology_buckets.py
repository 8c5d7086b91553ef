"""The task-topology plugin's per-job state (Volcano plugins/task-topology manager.go, bucket.go):
a job's topology read from its PodGroup's annotations, its tasks sorted into buckets, and what
the buckets hold as tasks get placed. The plugin's hooks are in ``task_topology``.

* **Topology** (PodGroup annotations): ``volcano.sh/task-topology-affinity`` and
  ``volcano.sh/task-topology-anti-affinity`` are groups of task names separated by ``;``, the
  names of a group by ``,`` (``ps,worker;ps,chief``): a group of one name is that task's
  affinity with itself, a group of several the affinity between each pair.
  ``volcano.sh/task-topology-task-order`` (``ps,worker``) orders tasks, the first first. Every
  non-empty name must be a task role of the job (``volcano.sh/task-spec``), and no group may
  name one twice; otherwise the job's topology is not used.
* **Priority of a task name**: the strongest kind of rule naming it — self anti-affinity (4),
  affinity with another task (3), self affinity (2), anti-affinity with another task (1). A pod
  whose task name (its ``volcano.sh/task-spec`` annotation) has none is in no bucket.
* **Buckets**: the job's pods with a priority, placed ones first (by node name), then by task
  order, priority, and pod name; each pod goes to the bucket where its affinities minus its
  anti-affinities with the bucket's task names count most (ties: the bucket requesting least);
  a count below zero, or no bucket, opens a new one. Placed pods share one bucket per node.
* **As pods are placed** (the session's allocate events: allocate and pipeline) they leave
  their bucket's pending set and count on their node, for the bucket and per task name. Volcano
  registers no deallocate handler, so undone placements stay counted; so here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tidesched.model.infos import JobInfo, TaskInfo
    from tidesched.model.node_table import NodeTable

AFFINITY = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER = "volcano.sh/task-topology-task-order"
TASK_NAME = "volcano.sh/task-spec"

SELF_ANTI_AFFINITY, INTER_AFFINITY, SELF_AFFINITY, INTER_ANTI_AFFINITY = 4, 3, 2, 1


def task_name(task: "TaskInfo") -> str:
    """The pod's task name as the plugin reads it: its ``volcano.sh/task-spec`` annotation."""
    return task.pod.meta.annotations.get(TASK_NAME, "")


@dataclass
class Topology:
    affinity: list[list[str]] = field(default_factory=list)
    anti_affinity: list[list[str]] = field(default_factory=list)
    task_order: list[str] = field(default_factory=list)


def _check(job: "JobInfo", groups: list[list[str]]) -> None:
    roles = {t.role for t in job.tasks.values()}
    for group in groups:
        seen: set[str] = set()
        for name in group:
            if not name:
                continue
            if name not in roles:
                raise ValueError(f"task {name} do not exist in job <{job.namespace}/{job.name}>")
            if name in seen:
                raise ValueError(f"task {name} is duplicate in job <{job.namespace}/{job.name}>")
            seen.add(name)


def read_topology(job: "JobInfo") -> Topology | None:
    """The job's topology from its PodGroup's annotations; None when it names none; a
    ValueError with Volcano's words when a name is unknown or repeated."""
    annotations = job.pod_group.meta.annotations
    if not any(k in annotations for k in (AFFINITY, ANTI_AFFINITY, TASK_ORDER)):
        return None
    topo = Topology()
    for key, attr in ((AFFINITY, "affinity"), (ANTI_AFFINITY, "anti_affinity")):
        if key in annotations:
            groups = [part.split(",") for part in annotations[key].split(";")]
            _check(job, groups)
            setattr(topo, attr, groups)
    if TASK_ORDER in annotations:
        topo.task_order = annotations[TASK_ORDER].split(",")
        _check(job, [topo.task_order])
    return topo


class Bucket:
    """Pods of one job that should run together."""

    __slots__ = ("index", "tasks", "name_count", "req_score", "request", "bound", "node")

    def __init__(self, index: int, width: int) -> None:
        self.index = index
        self.tasks: dict[str, "TaskInfo"] = {}  # pods not placed yet, by uid
        self.name_count: dict[str, int] = {}
        # 1 cpu millicore = 1 MiB = 1 milli-unit of a scalar (Volcano CalcResReq).
        self.req_score = 0.0
        self.request = np.zeros(width)  # the pending pods' requests (no pod slots)
        self.bound = 0
        self.node: dict[str, int] = {}

    def add(self, name: str, task: "TaskInfo", vec: np.ndarray) -> None:
        self.name_count[name] = self.name_count.get(name, 0) + 1
        if task.node_name:
            self.node[task.node_name] = self.node.get(task.node_name, 0) + 1
            self.bound += 1
            return
        self.tasks[task.uid] = task
        self._charge(task, vec, +1)

    def task_bound(self, task: "TaskInfo", vec: np.ndarray) -> None:
        self.node[task.node_name] = self.node.get(task.node_name, 0) + 1
        self.bound += 1
        self.tasks.pop(task.uid, None)
        self._charge(task, vec, -1)

    def _charge(self, task: "TaskInfo", vec: np.ndarray, sign: int) -> None:
        r = task.resreq
        self.req_score += sign * (r.milli_cpu + r.memory / 1024 / 1024 + sum(r.scalars.values()))
        self.request += sign * vec


class JobManager:
    """One job's topology rules and buckets."""

    def __init__(self, job: "JobInfo", topo: Topology, table: "NodeTable") -> None:
        self.job = job
        self.table = table
        self.width = table.pods_col  # every dimension but the pod slots
        self.buckets: list[Bucket] = []
        self.pod_bucket: dict[str, int] = {}  # uid -> bucket index (absent: no bucket)
        self.pod_name: dict[str, str] = {}  # uid -> task name
        self.priority: dict[str, int] = {}
        self.order: dict[str, int] = {}
        self.inter_affinity: dict[str, set[str]] = {}
        self.self_affinity: set[str] = set()
        self.inter_anti: dict[str, set[str]] = {}
        self.self_anti: set[str] = set()
        self.max_size = 0
        self.node_names: dict[str, dict[str, int]] = {}  # node -> task name -> pods placed this session
        self._apply(topo)
        self._build(list(job.tasks.values()))

    # -- rules ------------------------------------------------------------------------

    def _mark(self, name: str, kind: int) -> None:
        if kind > self.priority.get(name, 0):
            self.priority[name] = kind

    def _apply(self, topo: Topology) -> None:
        for groups, pair, own, pair_kind, own_kind in (
            (topo.affinity, self.inter_affinity, self.self_affinity, INTER_AFFINITY, SELF_AFFINITY),
            (topo.anti_affinity, self.inter_anti, self.self_anti, INTER_ANTI_AFFINITY, SELF_ANTI_AFFINITY),
        ):
            for group in groups:
                if len(group) == 1:
                    own.add(group[0])
                    self._mark(group[0], own_kind)
                    continue
                for i, src in enumerate(group):
                    for dst in group[:i]:
                        pair.setdefault(src, set()).add(dst)
                        pair.setdefault(dst, set()).add(src)
                    self._mark(src, pair_kind)
        for i, name in enumerate(topo.task_order):
            self.order[name] = len(topo.task_order) - i

    def affinity_order(self, l: "TaskInfo", r: "TaskInfo") -> int:
        """Volcano taskAffinityOrder: 1 when ``l``'s task name ranks above ``r``'s (task order,
        then priority), -1 below, 0 alike."""
        ln, rn = self.pod_name.get(l.uid, ""), self.pod_name.get(r.uid, "")
        if ln == rn:
            return 0
        for table in (self.order, self.priority):
            a, b = table.get(ln, 0), table.get(rn, 0)
            if a != b:
                return 1 if a > b else -1
        return 0

    def set_affinity(self, name: str, names: dict[str, int], only_anti: bool) -> int:
        """Affinities minus anti-affinities of task ``name`` with the pods counted in ``names``."""
        total = 0
        if not name:
            return total
        for other, count in names.items():
            same = other == name
            affine = name in self.self_affinity if same else other in self.inter_affinity.get(name, ())
            if not only_anti and affine:
                total += count
            if name in self.self_anti if same else other in self.inter_anti.get(name, ()):
                total -= count
        return total

    # -- buckets ----------------------------------------------------------------------

    def vec(self, task: "TaskInfo") -> np.ndarray:
        if task.req_vec is None:
            self.table.prepare_task(task)
        assert task.req_vec is not None
        return task.req_vec[: self.width]

    def _build(self, tasks: list["TaskInfo"]) -> None:
        members = []
        for task in tasks:
            name = task_name(task)
            if name and name in self.priority:
                self.pod_name[task.uid] = name
                members.append(task)

        def key(t: "TaskInfo") -> tuple:
            name = self.pod_name[t.uid]
            if t.node_name:
                return (0, t.node_name, 0, 0, t.name)
            return (1, "", -self.order.get(name, 0), -self.priority.get(name, 0), t.name)

        by_node: dict[str, Bucket] = {}
        for task in sorted(members, key=key):
            name = self.pod_name[task.uid]
            chosen: Bucket | None = None
            best = -(2**31)
            if task.node_name:
                best = 0
                chosen = by_node.get(task.node_name)
            else:
                for bucket in self.buckets:
                    aff = self.set_affinity(name, bucket.name_count, False)
                    if aff > best:
                        best, chosen = aff, bucket
                    elif aff == best and chosen is not None and bucket.req_score < chosen.req_score:
                        chosen = bucket
            if best < 0 or chosen is None:
                chosen = Bucket(len(self.buckets), self.width)
                self.buckets.append(chosen)
                if task.node_name:
                    by_node[task.node_name] = chosen
            self.pod_bucket[task.uid] = chosen.index
            chosen.add(name, task, self.vec(task))
            self.max_size = max(self.max_size, len(chosen.tasks) + chosen.bound)

    def bucket_of(self, task: "TaskInfo") -> Bucket | None:
        index = self.pod_bucket.get(task.uid)
        return None if index is None else self.buckets[index]

    def task_bound(self, task: "TaskInfo") -> None:
        name = task_name(task)
        if name:
            counts = self.node_names.setdefault(task.node_name, {})
            counts[name] = counts.get(name, 0) + 1
        bucket = self.bucket_of(task)
        if bucket is not None:
            bucket.task_bound(task, self.vec(task))
