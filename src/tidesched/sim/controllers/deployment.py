"""The Deployment and ReplicaSet controllers (SIM-2): a ReplicaSet ``<deploy>-<template hash>``
carrying the Deployment's annotations; pods ``<rs>-<5 chars>``; scale changes (HPA-like) create
pods or delete the cheapest ones first (unbound, then pending, then the newest), as Kubernetes
does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidesched.sim.controllers.common import (
    POD_TEMPLATE_HASH,
    Emit,
    make_owner_ref,
    replica_count,
    template_hash,
)
from tidesched.sim.world import (
    FINISHED_POD_PHASES,
    World,
    annotations,
    as_map,
    meta,
    pod_active,
    pod_node,
    pod_phase,
    spec,
    split_key,
    with_meta_map,
)


class DeploymentController:
    def __init__(self, world: World, emit: Emit) -> None:
        self.world = world
        self.emit = emit
        self.dirty: set[str] = set()

    def reconcile(self, key: str, now: float) -> None:
        world = self.world
        ns, name = split_key(key)
        dep = world.get("Deployment", key)
        owned = world.owned("ReplicaSet", "Deployment", key)
        if dep is None:
            for k in owned:
                world.remove("ReplicaSet", k, "delete")
            return
        s = spec(dep)
        replicas = replica_count(s.get("replicas"), self.emit, "Deployment", key)
        template = s.get("template") if isinstance(s.get("template"), Mapping) else {}
        h = template_hash(template)
        rs_key = f"{ns}/{name}-{h}"
        for k in owned:
            if k != rs_key:
                self._set_replicas(k, 0)  # an older template: scaled down (Recreate)
        rs = world.get("ReplicaSet", rs_key)
        if rs is None:
            tmeta = dict(meta(template))
            tmeta["labels"] = {**as_map(tmeta.get("labels")), POD_TEMPLATE_HASH: h}
            dep_ann = {
                k: v for k, v in annotations(dep).items() if not k.startswith("kubectl.kubernetes.io/")
            }
            dep_ann["deployment.kubernetes.io/desired-replicas"] = str(replicas)
            rs = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"{name}-{h}",
                    "namespace": ns,
                    "uid": world.new_uid(),
                    "annotations": dep_ann,
                    "labels": dict(tmeta["labels"]),
                    "ownerReferences": [make_owner_ref("apps/v1", "Deployment", dep)],
                },
                "spec": {"replicas": replicas, "template": dict(template, metadata=tmeta)},
            }
            world.put("ReplicaSet", rs)
        else:
            self._set_replicas(rs_key, replicas)

    def _set_replicas(self, key: str, replicas: int) -> None:
        rs = self.world.get("ReplicaSet", key)
        if rs is None or spec(rs).get("replicas") == replicas:
            return
        new = dict(rs)
        new["spec"] = dict(spec(rs), replicas=replicas)
        new = with_meta_map(new, "annotations", {"deployment.kubernetes.io/desired-replicas": str(replicas)})
        self.world.put("ReplicaSet", new)


def _deletion_rank(pod: Mapping[str, Any]) -> tuple[int, int, float, str]:
    """Kubernetes' order for scale-down victims: unassigned before assigned, pending before
    running, newer before older (then by name for determinism)."""
    bound = 1 if pod_node(pod) else 0
    running = 1 if pod_phase(pod) == "Running" else 0
    created = str(meta(pod).get("creationTimestamp") or "")
    # Newer first: invert the timestamp order through a negative sort on the string's ordinal.
    return (bound, running, -_ts_rank(created), str(meta(pod).get("name")))


def _ts_rank(ts: str) -> float:
    from tidesched.sim.world import sim_time

    v = sim_time(ts)
    return v if v is not None else 0.0


class ReplicaSetController:
    def __init__(self, world: World, emit: Emit) -> None:
        self.world = world
        self.emit = emit
        self.dirty: set[str] = set()

    def reconcile(self, key: str, now: float) -> None:
        world = self.world
        ns, name = split_key(key)
        rs = world.get("ReplicaSet", key)
        pods = [(pk, world.get("Pod", pk)) for pk in world.owned_pods("ReplicaSet", key)]
        pods = [(pk, p) for pk, p in pods if p is not None]
        if rs is None:
            for pk, _p in pods:
                world.delete_pod(pk, now, "delete")
            return
        # A finished pod of a ReplicaSet is replaced; the finished one is cleaned up.
        for pk, p in pods:
            if pod_phase(p) in FINISHED_POD_PHASES:
                world.remove("Pod", pk, "gc")
        active = [(pk, p) for pk, p in pods if pod_active(p)]
        want = replica_count(spec(rs).get("replicas"), self.emit, "ReplicaSet", key)
        if len(active) < want:
            template = spec(rs).get("template") if isinstance(spec(rs).get("template"), Mapping) else {}
            tmeta = meta(template)
            for _ in range(want - len(active)):
                pod_name = f"{name}-{world.random_suffix()}"
                while world.get("Pod", f"{ns}/{pod_name}") is not None:
                    pod_name = f"{name}-{world.random_suffix()}"
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": pod_name,
                        "namespace": ns,
                        "annotations": as_map(tmeta.get("annotations")),
                        "labels": as_map(tmeta.get("labels")),
                        "ownerReferences": [make_owner_ref("apps/v1", "ReplicaSet", rs)],
                    },
                    "spec": dict(spec(template)),
                    "status": {"phase": "Pending"},
                }
                world.create_pod(pod, now)
        elif len(active) > want:
            victims = sorted(active, key=lambda kp: _deletion_rank(kp[1]))[: len(active) - want]
            for pk, _p in victims:
                world.delete_pod(pk, now, "scale")
