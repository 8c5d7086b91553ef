"""task-topology plugin (Volcano plugins/task-topology): affinity and anti-affinity between the
tasks of one job, by buckets of pods that should run together.

A job opts in with its PodGroup's annotations (``volcano.sh/task-topology-affinity``,
``-anti-affinity``, ``-task-order``; read and bucketed in ``task_topology_buckets``). Jobs with
pending pods and a valid topology get a manager per session; an invalid one (a name that is no
task of the job, or named twice in a group) is ignored, with a Warning event on the PodGroup
(Volcano only logs it).

Hooks (Volcano's, restated):

* **TaskOrder**: a pod in a bucket before one in none; between jobs nothing else; within a
  job, the pods of the bucket with more pending pods first, within a bucket by task order and
  priority of the task name (see the buckets module), else the older bucket first.
* **NodeOrder**: for a pod in a bucket, on a node where the pod fits the idle plus releasing
  room: the bucket's pods already on the node, less the pod's anti-affinity with the task
  names placed there this session (only when negative), plus the bucket's pending pods; when
  the bucket's pending request does not fit that room, one less for each other pending pod of
  the bucket taken out (in key order) until it does. Score = that × ``task-topology.weight``
  (default 1) × 100 / the largest bucket's size. 0 for every other pod or node.
* **EventHandler**: a placed pod (allocate or pipeline) leaves its bucket's pending set.

Difference from Volcano: the pods taken out of a bucket that does not fit a node are taken in
key order (Volcano: map order), so scores do not change from run to run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.framework.plugin import EventHandler, Plugin, RowFn
from tidesched.model.resource import MIN_RESOURCE
from tidesched.plugins.task_topology_buckets import JobManager, read_topology, task_name

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo

WEIGHT = "task-topology.weight"
MAX_NODE_SCORE = 100.0


class TaskTopologyPlugin(Plugin):
    name = "task-topology"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.weight = arguments.get_int(WEIGHT, 1)
        self.managers: dict[str, JobManager] = {}

    def on_session_open(self, ssn: "Session") -> None:
        table = ssn.table
        for uid in sorted(ssn.jobs):
            job = ssn.jobs[uid]
            if not job.has_pending_tasks():
                continue
            try:
                topo = read_topology(job)
            except ValueError as exc:
                ssn.event("PodGroup", job.namespace, job.name, "Warning", "InvalidTaskTopology",
                          f"task topology of the PodGroup is not used: {exc}")
                continue
            if topo is not None:
                self.managers[uid] = JobManager(job, topo, table)
        managers = self.managers

        def task_order(l: "TaskInfo", r: "TaskInfo") -> int:
            lm, rm = managers.get(l.job), managers.get(r.job)
            if lm is None or rm is None:
                return 0
            lb, rb = lm.bucket_of(l), rm.bucket_of(r)
            if (lb is None) != (rb is None):
                return -1 if lb is not None else 1
            if l.job != r.job or lb is None or rb is None:
                return 0
            if len(lb.tasks) != len(rb.tasks):
                return -1 if len(lb.tasks) > len(rb.tasks) else 1
            if lb.index == rb.index:
                return -lm.affinity_order(l, r)
            return -1 if lb.index < rb.index else 1

        def node_order(task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
            scores = np.zeros(len(idx))
            manager = managers.get(task.job)
            bucket = manager.bucket_of(task) if manager is not None else None
            if manager is None or bucket is None:
                return scores
            width = manager.width
            room = (table.idle[idx] + table.releasing[idx])[:, :width]
            assert task.req_vec is not None
            fits = ~np.any(room < task.req_vec[:width], axis=1)  # not LessPartly
            # Per node over the table, then the candidates' rows: only the few nodes holding the
            # bucket's or this session's pods are visited, not every candidate.
            per_node = np.zeros(len(table))
            for node_name, count in bucket.node.items():
                row = table.index.get(node_name)
                if row is not None:
                    per_node[row] += count
            name = task_name(task)
            for node_name, placed in manager.node_names.items():
                row = table.index.get(node_name)
                anti = manager.set_affinity(name, placed, True)
                if row is not None and anti < 0:
                    per_node[row] += anti
            base = per_node[idx] + len(bucket.tasks)
            others = sorted((t for uid, t in bucket.tasks.items() if uid != task.uid), key=lambda t: t.key)
            # remains[j]: the bucket's request with the first j other pods taken out.
            steps = [np.zeros(width)] + [manager.vec(t) for t in others]
            remains = bucket.request - np.cumsum(np.array(steps), axis=0)
            fit_after = np.all(remains[None, :, :] < room[:, None, :] + MIN_RESOURCE, axis=2)
            # Taken out: 0 when the whole bucket fits, else the first j that fits, else all.
            taken = np.where(fit_after.any(axis=1), fit_after.argmax(axis=1), len(others)).astype(float)
            score = (base - taken) * self.weight
            if manager.max_size:
                score = score * MAX_NODE_SCORE / manager.max_size
            scores[fits] = score[fits]
            return scores

        def zero_rows(task: "TaskInfo", rows: np.ndarray | None) -> np.ndarray:
            return np.zeros(len(table) if rows is None else len(rows))

        def row_key(task: "TaskInfo") -> tuple[str] | None:
            manager = managers.get(task.job)
            # Pods in a bucket score by the session's placements; the others score 0 anywhere.
            return None if manager is not None and manager.bucket_of(task) is not None else ("task-topology",)

        def on_allocate(task: "TaskInfo") -> None:
            manager = managers.get(task.job)
            if manager is not None:
                manager.task_bound(task)

        ssn.add_fn("task_order", self.name, task_order)
        ssn.add_fn("node_order", self.name, node_order)
        ssn.add_row_fn("node_order", self.name, RowFn(row_key, zero_rows))
        ssn.add_event_handler(EventHandler(allocate=on_allocate))

    def on_session_close(self, ssn: "Session") -> None:
        self.managers = {}
