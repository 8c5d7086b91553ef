"""Small builders for raw Kubernetes objects used across tests."""

from __future__ import annotations

from typing import Any


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110", labels: dict | None = None,
         taints: list | None = None, unschedulable: bool = False, **scalars: str) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods}
    alloc.update({k.replace("__", "/").replace("_", "."): v for k, v in scalars.items()})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"kind": "Node", "metadata": {"name": name, "labels": labels or {}}, "spec": spec,
            "status": {"allocatable": alloc}}


def pod(name: str, group: str | None = None, cpu: str | None = "1", memory: str | None = "1Gi",
        namespace: str = "ns", node: str = "", phase: str = "Pending", annotations: dict | None = None,
        labels: dict | None = None, deleting: bool = False, extra_requests: dict | None = None,
        spec: dict | None = None, priority: int | None = None) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    requests.update(extra_requests or {})
    ann = dict(annotations or {})
    if group:
        ann["scheduling.k8s.io/group-name"] = group
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": ann, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    s: dict[str, Any] = {"schedulerName": "volcano", "containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node:
        s["nodeName"] = node
    if priority is not None:
        s["priority"] = priority
    s.update(spec or {})
    return {"kind": "Pod", "metadata": meta, "spec": s, "status": {"phase": phase}}


def podgroup(name: str, min_member: int = 1, queue: str = "default", namespace: str = "ns",
             phase: str = "Inqueue", min_resources: dict | None = None, **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if min_resources is not None:
        s["minResources"] = min_resources
    s.update(spec)
    return {"kind": "PodGroup", "metadata": {"name": name, "namespace": namespace}, "spec": s,
            "status": {"phase": phase}}


def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"kind": "Queue", "metadata": {"name": name}, "spec": spec}


BASIC_CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: nodeorder
"""
# BASIC_CONFIG with the capacity plugin for queue quotas (and no conformance).
CAPACITY_CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: capacity
  - name: nodeorder
"""


# -- card-model objects (capacity-card) -------------------------------------------------

def card_node(
    name: str, model: str, cards: int = 8, resource: str = "nvidia.com/gpu", **extra: str
) -> dict[str, Any]:
    n = node(name, cpu="64", memory="256Gi")
    n["metadata"]["labels"] = {"nvidia.com/gpu.product": model, "nvidia.com/gpu.memory": "81920"}
    n["status"]["allocatable"][resource] = str(cards)
    n["status"]["allocatable"].update(extra)
    return n


def card_queue(name: str, quota: str | None, cpu: str | None = "8", **spec: Any) -> dict[str, Any]:
    q = queue(name, weight=1, **spec)
    if cpu is not None:
        q["spec"]["capability"] = {"cpu": cpu, "memory": "16Gi"}
    if quota is not None:
        q["metadata"]["annotations"] = {"volcano.sh/card.quota": quota}
    return q


def card_pod(
    name: str,
    model: str | None,
    gpus: int = 1,
    queue_name: str | None = None,
    group: str | None = None,
    node_name: str = "",
    phase: str = "Pending",
    resource: str = "nvidia.com/gpu",
    owner: str | None = None,
    **kw: Any,
) -> dict[str, Any]:
    ann: dict[str, str] = {}
    if model is not None:
        ann["volcano.sh/card.name"] = model
    if queue_name is not None:
        ann["scheduling.volcano.sh/queue-name"] = queue_name
    ann.update(kw.pop("annotations", {}))
    p = pod(
        name,
        group=group,
        cpu="100m",
        memory="128Mi",
        annotations=ann,
        node=node_name,
        phase=phase,
        extra_requests={resource: str(gpus)} if gpus else None,
        **kw,
    )
    if owner:
        p["metadata"]["ownerReferences"] = [{"kind": owner, "name": f"{name}-owner"}]
    return p


def filter_config(plugin: str, action: str = "preempt") -> str:
    """A config where only ``plugin`` filters ``action``'s victims (priority and gang order and
    gate the jobs, with their Preemptable switches off)."""
    return (f'actions: "{action}"\ntiers:\n- plugins:\n  - {{name: priority, enablePreemptable: false}}\n'
            f"  - {{name: gang, enablePreemptable: false}}\n  - {{name: {plugin}}}\n")


def decide(objs: list[dict[str, Any]], config: str, now: float = 0.0):
    """The decisions of one session over ``objs`` with the config text, as ``schedule`` makes them."""
    from tidesched.model.loader import Manifest
    from tidesched.scheduler import config_from_text, schedule_manifests

    manifests = [Manifest(f"objects[{i}]", o) for i, o in enumerate(objs)]
    return schedule_manifests(manifests, config_from_text(config), now=now)[1]
