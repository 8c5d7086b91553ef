"""The experiment's placement through tidesched's own scheduling code, for a config without GPU
placement plugins (Volcano's default binpack/nodeorder/predicates config, or any other): the
same protocol as ``placement.place_all`` — pods arrive one at a time, each is placed once or
fails, none leaves — but each pod is placed by one scheduling session with that config.

The world is the trace's GPU nodes as the trace replay makes them (``sim/trace``: vGPU devices
registered, ``sim/trace_vgpu``) and the pods placed so far, held in an incremental
:class:`~tidesched.model.cache.ClusterCache` so that each session opens cheaply. An arriving
pod is a bare Pod of scheduler ``volcano`` (its PodGroup made for it, in the default queue)
asking for its CPU, memory and vGPU share (``trace_vgpu.pod_resources``' form); a GPU-model
constraint (``gpu_spec``) is a required node affinity on the trace's model label, so the
config's ``predicates`` enforce it (a config without them ignores it, as a cluster would).

The session's bind decision is applied to the world (``spec.nodeName``, and the devices it chose
as deviceshare's bind annotations write them; without deviceshare, the devices the node table's
device walk gave the pod) and to the experiment's :class:`GpuNodes` with the very devices, so
allocation and fragmentation are recorded as on the fast path. A pod the session does not bind
fails, by kind. A pod bound where ``GpuNodes`` cannot hold it on the devices it got (a config
without deviceshare fits vGPU pods by the node's totals only, so it may bind a whole-GPU pod on
a node with no idle device) fails too and is counted in ``misfits``: a device plugin would
refuse it. Evictions a session decides (preempt, reclaim) are not applied: in this protocol no
pod leaves.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from tidesched.framework.config import SchedulerConfig
from tidesched.model.cache import ClusterCache
from tidesched.model.gpu_nodes import GpuNodes, GpuRequest
from tidesched.model.vgpu import VGPU_CORES, VGPU_MEMORY_PERCENTAGE, VGPU_NUMBER, bind_annotations, pod_assignment
from tidesched.scheduler import collector_paused, open_session, run_actions
from tidesched.sim import trace, trace_vgpu
from tidesched.sim.experiment.placement import Placement
from tidesched.sim.trace import TraceNode

SCHEDULER = "volcano"
NAMESPACE = "experiment"


def node_objects(nodes: Sequence[TraceNode]) -> list[dict[str, Any]]:
    """The trace replay's Node manifests of ``nodes`` (vGPU devices registered)."""
    objects, _events, _summary = trace.build(list(nodes), [], source="experiment")
    return [o for o in objects if o["kind"] == "Node"]


def pod_object(k: int, req: GpuRequest) -> dict[str, Any]:
    """The ``k``-th arriving pod: its requests, and its GPU models as a required node affinity."""
    res = {"cpu": f"{req.cpu}m", "memory": f"{req.memory}Mi"}
    if req.needs_gpu:
        pct = max(1, math.ceil(req.milli / 10))
        res.update({VGPU_NUMBER: str(req.gpus), VGPU_CORES: str(pct), VGPU_MEMORY_PERCENTAGE: str(pct)})
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "containers": [{"name": "main", "resources": {"requests": dict(res), "limits": dict(res)}}],
    }
    if req.needs_gpu and req.models:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": trace.TRACE_MODEL_LABEL, "operator": "In", "values": list(req.models)}]}]}}}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"p{k:07d}", "namespace": NAMESPACE, "uid": f"experiment-{k}",
                     "creationTimestamp": "2023-01-01T00:00:00Z"},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


class SessionPlacer:
    """Places pods one at a time with one session each (see the module docstring)."""

    def __init__(self, trace_nodes: Sequence[TraceNode], nodes: GpuNodes, config: SchedulerConfig) -> None:
        self.nodes = nodes
        self.config = config
        self.cache = ClusterCache((SCHEDULER,))
        self.row = {name: i for i, name in enumerate(nodes.names)}
        self.slot = {trace_vgpu.device_uuid(n.name, j): j for n in trace_nodes for j in range(n.gpus)}
        for obj in node_objects(trace_nodes):
            self.cache.update("Node", obj["metadata"]["name"], obj)
        self.misfits = 0

    def place(self, k: int, req: GpuRequest) -> int:
        """Schedule the ``k``-th pod in a session of its own; its row in ``nodes``, or -1."""
        obj = pod_object(k, req)
        key = f"{NAMESPACE}/{obj['metadata']['name']}"
        self.cache.update("Pod", key, obj)
        now = float(k)
        with collector_paused():
            snapshot, state = self.cache.open()
            ssn = open_session(snapshot, self.config, scheduler_names=(SCHEDULER,), uid=f"experiment-{k}",
                               now=now, state=state)
            decisions = run_actions(ssn)
            ssn.release()  # freed now, not by the cyclic collector (see Session.release)
        node = decisions.bound.get(key)
        i = self.row.get(node, -1) if node is not None else -1
        annotations: dict[str, str] = {}
        if i >= 0 and req.needs_gpu:
            annotations = decisions.bind_annotations.get(key) or {}
            assignment = pod_assignment(annotations) if annotations else None
            if assignment is None:  # no deviceshare: the devices the node table's walk gave it
                task = state.tasks.get(obj["metadata"]["uid"])
                assignment = task.devices if task is not None else None
                if assignment is not None:
                    annotations = bind_annotations(assignment, now)
            slots = [self.slot.get(u.uuid, -1) for u in assignment.uses()] if assignment is not None else []
            try:
                if not slots or assignment.node != node:
                    raise ValueError("no devices")
                if req.shared:
                    self.nodes.place(i, req, slots[0])
                else:
                    self.nodes.place(i, req, devices=slots)
            except ValueError:
                self.misfits += 1
                i = -1
        elif i >= 0:
            self.nodes.place(i, req)
        if i < 0:
            self.cache.update("Pod", key, None)  # failed: gone, as it never ran
            return -1
        bound = copy.deepcopy(obj)
        bound["spec"]["nodeName"] = node
        bound["status"]["phase"] = "Running"
        if annotations:
            bound["metadata"]["annotations"] = dict(annotations)
        self.cache.update("Pod", key, bound)
        return i


def place_by_sessions(
    trace_nodes: Sequence[TraceNode], nodes: GpuNodes, requests: Sequence[GpuRequest], config: SchedulerConfig,
) -> tuple[Placement, int]:
    """Place ``requests`` in order on ``nodes`` (changed in place) with ``config``'s sessions;
    the placement recorded as ``placement.place_all`` records it, and the misfits."""
    placer = SessionPlacer(trace_nodes, nodes, config)
    count = len(requests)
    arrived = np.zeros(count, dtype=np.int64)
    allocated = np.zeros(count, dtype=np.int64)
    fragmented = np.zeros(count)
    where = np.full(count, -1, dtype=np.int64)
    failed: Counter[str] = Counter()
    arrived_milli = 0
    measure = nodes.typical is not None
    for k, req in enumerate(requests):
        arrived_milli += req.total_milli
        i = placer.place(k, req)
        if i < 0:
            failed[req.kind] += 1
        where[k] = i
        arrived[k] = arrived_milli
        allocated[k] = nodes.allocated_milli
        fragmented[k] = nodes.frag_total() if measure else 0.0
    classes = nodes.frag_classes() if measure else None
    return Placement(arrived, allocated, fragmented, where, failed, classes), placer.misfits
