"""The objects of Volcano's extender protocol as JSON, in the shape Go's encoding/json gives
Volcano's ``api.TaskInfo``, ``NodeInfo``, ``JobInfo`` and ``QueueInfo`` (exported field names as
keys, resources as ``{"MilliCPU", "Memory", "ScalarResources", "MaxTaskNum"}``, a task's status
as Volcano's bit value), so that an extender written for vc-scheduler reads what it expects.

What tidesched does not hold is left out or rebuilt: a task's ``Pod`` and a job's
``PodGroup`` carry the metadata, spec and phase the scheduler read (not every field the API
server stored); a node's ``Node`` its metadata, labels and allocatable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo
    from tidesched.model.objects import Meta
    from tidesched.model.resource import Resource

# Volcano's TaskStatus values (1 << iota from Pending).
STATUS_BITS = {s: 1 << (s.value - 1) for s in TaskStatus}
NODE_READY = 1  # Volcano NodePhase Ready


def resource(r: "Resource | None") -> dict[str, Any] | None:
    if r is None:
        return None
    return {"MilliCPU": r.milli_cpu, "Memory": r.memory, "ScalarResources": dict(r.scalars) or None,
            "MaxTaskNum": r.max_task_num}


def _meta(m: "Meta", namespaced: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"name": m.name, "uid": m.uid, "labels": m.labels or None, "annotations": m.annotations or None}
    if namespaced:
        out["namespace"] = m.namespace
    return out


def task(t: "TaskInfo") -> dict[str, Any]:
    pod = t.pod
    return {
        "UID": t.uid,
        "Job": t.job,
        "Name": t.name,
        "Namespace": t.namespace,
        "TaskRole": t.role,
        "Resreq": resource(t.resreq),
        "InitResreq": resource(t.init_resreq),
        "NodeName": t.node_name,
        "Status": STATUS_BITS[t.status],
        "Priority": t.priority,
        "Preemptable": t.preemptable,
        "BestEffort": t.best_effort,
        "Pod": {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(pod.meta), "spec": dict(pod.raw_spec),
                "status": {"phase": pod.phase}},
    }


def _row_resource(ssn: "Session", values: np.ndarray, pods: int = 0) -> dict[str, Any]:
    table = ssn.table
    scalars = {table.dims[j]: float(values[j]) for j in range(2, table.pods_col) if values[j]}
    return {"MilliCPU": float(values[0]), "Memory": float(values[1]), "ScalarResources": scalars or None,
            "MaxTaskNum": pods}


def node(ssn: "Session", row: int) -> dict[str, Any]:
    table = ssn.table
    n = table.nodes[row]
    allocatable = _row_resource(ssn, table.allocatable[row], int(table.allocatable[row, table.pods_col]))
    return {
        "Name": n.name,
        "Node": {"apiVersion": "v1", "kind": "Node", "metadata": _meta(n.meta, namespaced=False),
                 "spec": {"unschedulable": n.unschedulable}, "status": {"allocatable": n.allocatable.to_natural()}},
        "State": {"Phase": NODE_READY, "Reason": ""},
        "Releasing": _row_resource(ssn, table.releasing[row]),
        "Pipelined": _row_resource(ssn, table.pipelined[row]),
        "Idle": _row_resource(ssn, table.idle[row]),
        "Used": _row_resource(ssn, table.used[row]),
        "Allocatable": allocatable,
        "Capacity": allocatable,
        "Tasks": {t.uid: task(t) for t in table.tasks[row].values()},
    }


def job(j: "JobInfo") -> dict[str, Any]:
    pg = j.pod_group
    spec: dict[str, Any] = {"minMember": pg.min_member, "queue": pg.queue}
    if pg.priority_class:
        spec["priorityClassName"] = pg.priority_class
    if pg.min_task_member:
        spec["minTaskMember"] = dict(pg.min_task_member)
    if pg.min_resource_list is not None:
        spec["minResources"] = {k: str(v) for k, v in pg.min_resource_list.items()}
    return {
        "UID": j.uid,
        "Name": j.name,
        "Namespace": j.namespace,
        "Queue": j.queue,
        "Priority": j.priority,
        "MinAvailable": j.min_available,
        "Tasks": {t.uid: task(t) for t in j.tasks.values()},
        "TaskMinAvailable": dict(j.task_min_available),
        "Allocated": resource(j.allocated),
        "TotalRequest": resource(j.total_request),
        "PodGroup": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": _meta(pg.meta),
                     "spec": spec, "status": {"phase": j.phase}},
        "Preemptable": j.preemptable,
    }


def queue(q: "QueueInfo") -> dict[str, Any]:
    spec = q.queue
    return {
        "UID": q.uid,
        "Name": q.name,
        "Weight": q.weight,
        "Queue": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q.name},
                  "spec": {"weight": q.weight, "reclaimable": q.reclaimable, "priority": q.priority,
                           "capability": spec.capability.to_natural() if spec.capability_set else None},
                  "status": {"state": q.state}},
    }


def session(ssn: "Session") -> dict[str, Any]:
    """OnSessionOpenRequest: every job, node and queue of the session."""
    names = ssn.table.names
    return {
        "Jobs": {uid: job(j) for uid, j in ssn.jobs.items()},
        "Nodes": {name: node(ssn, row) for row, name in enumerate(names)},
        "Queues": {uid: queue(q) for uid, q in ssn.queues.items()},
        "NamespaceInfo": None,
        "RevocableNodes": None,
        "NodeList": list(names),
    }
