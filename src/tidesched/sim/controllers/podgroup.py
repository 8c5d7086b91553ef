"""Volcano's podgroup controller for pods that name no PodGroup, and the clean-up of finished
bare pods and their PodGroups (SIM-2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidesched.model.fields import INT32, parse_int
from tidesched.model.objects import GROUP_NAME_ANNOTATION, QUEUE_NAME_ANNOTATION, ObjectError
from tidesched.model.resource import Resource
from tidesched.sim.controllers.common import (
    GROUP_MIN_MEMBER_KEY,
    PODGROUP_API,
    Emit,
    Timer,
    make_owner_ref,
    resource_list,
)
from tidesched.sim.world import (
    FINISHED_POD_PHASES,
    World,
    annotations,
    controller_owner,
    labels,
    meta,
    pod_phase,
    spec,
    split_key,
    with_meta_map,
)

# Pod annotations/labels the podgroup controller copies to the PodGroup.
_POD_TO_PG_ANNOTATIONS = (
    "volcano.sh/preemptable",
    "volcano.sh/cooldown-time",
    "volcano.sh/revocable-zone",
    "volcano.sh/jdb-min-available",
    "volcano.sh/jdb-max-unavailable",
)


_POD_TO_PG_LABELS = ("volcano.sh/preemptable", "volcano.sh/cooldown-time")


class PodGroupController:
    def __init__(self, world: World, emit: Emit, finished_ttl: float) -> None:
        self.world = world
        self.emit = emit
        self.finished_ttl = finished_ttl
        self.dirty: set[str] = set()
        # PodGroups this controller created, by owner: ("Pod"|"ReplicaSet"|..., "ns/name") -> pg key.
        self.created: dict[tuple[str, str], str] = {}

    def wants(self, pod: Mapping[str, Any]) -> bool:
        return (
            not annotations(pod).get(GROUP_NAME_ANNOTATION)
            and str(spec(pod).get("schedulerName") or "default-scheduler") in self.world.scheduler_names
        )

    def reconcile(self, key: str, now: float) -> None:
        world = self.world
        pod = world.get("Pod", key)
        if pod is None:
            self._gc_podgroup_of_pod(key)
            return
        if controller_owner(pod) is None and pod_phase(pod) in FINISHED_POD_PHASES:
            if self.finished_ttl <= 0:
                world.remove("Pod", key, "gc")
                self._gc_podgroup_of_pod(key)
            else:
                world.clock.after(self.finished_ttl, Timer("pod-gc", key))
            return
        if not self.wants(pod) and not self._lost_group(pod, key):
            return
        ns, _ = split_key(key)
        owner_obj, owner_ref = self._owner(pod, ns)
        pg_name = "podgroup-" + str(meta(owner_obj if owner_obj is not None else pod).get("uid"))
        pg_key = f"{ns}/{pg_name}"
        if world.get("PodGroup", pg_key) is None:
            pg = self._build(pod, ns, pg_name, owner_obj, owner_ref)
            owner = controller_owner(pg)
            if owner is not None:
                self.created[(owner[0], f"{ns}/{owner[1]}")] = pg_key
            world.put("PodGroup", pg)
        world.put("Pod", with_meta_map(pod, "annotations", {GROUP_NAME_ANNOTATION: pg_name}))

    def _lost_group(self, pod: Mapping[str, Any], key: str) -> bool:
        """A pod of ours, not of a Volcano Job, whose PodGroup was deleted under it: the
        controller makes the PodGroup again (Volcano's podgroup controller on its resync)."""
        g = annotations(pod).get(GROUP_NAME_ANNOTATION)
        owner = controller_owner(pod)
        return (
            bool(g)
            and str(g).startswith("podgroup-")  # a name this controller gives
            and (owner is None or owner[0] != "Job")
            and str(spec(pod).get("schedulerName") or "default-scheduler") in self.world.scheduler_names
            and self.world.get("PodGroup", f"{split_key(key)[0]}/{g}") is None
        )

    def _owner(
        self, pod: Mapping[str, Any], ns: str
    ) -> tuple[Mapping[str, Any] | None, dict[str, Any] | None]:
        owners = meta(pod).get("ownerReferences")
        if not isinstance(owners, list):
            return None, None
        for o in owners:
            if isinstance(o, Mapping) and o.get("controller"):
                kind = str(o.get("kind") or "")
                obj = (
                    self.world.get(kind, f"{ns}/{o.get('name')}")
                    if kind in ("ReplicaSet", "Job", "Deployment")
                    else None
                )
                if obj is not None:
                    return obj, dict(o)
                return {"metadata": {"uid": o.get("uid") or o.get("name"), "annotations": {}}}, dict(o)
        return None, None

    def _build(
        self,
        pod: Mapping[str, Any],
        ns: str,
        pg_name: str,
        owner: Mapping[str, Any] | None,
        owner_ref: dict[str, Any] | None,
    ) -> dict[str, Any]:
        owner_ann = annotations(owner) if owner is not None else {}
        ann = {k: v for k, v in owner_ann.items() if k.startswith("volcano.sh/")}
        min_member = 1
        raw_min = owner_ann.get(GROUP_MIN_MEMBER_KEY)
        if raw_min is not None:
            try:
                v = parse_int(str(raw_min), "", bounds=INT32)
                min_member = v if v >= 0 else 1  # Volcano: a negative value keeps 1
            except ObjectError:
                min_member = 1
        pod_ann = annotations(pod)
        # The pod's own volcano.sh/* annotations override the owner's (newer Volcano's
        # inherit-pod-annotations, and what the core's synthesize_podgroup does).
        for k, v in pod_ann.items():
            if k.startswith("volcano.sh/") or k in _POD_TO_PG_ANNOTATIONS:
                ann[k] = v
        lab = {k: v for k, v in labels(pod).items() if k in _POD_TO_PG_LABELS}
        record = self.world.record("Pod", f"{ns}/{meta(pod).get('name')}")
        req = record.resreq.clone() if record is not None else Resource()
        req.multi(float(min_member))
        pg_spec: dict[str, Any] = {"minMember": min_member, "minResources": resource_list(req)}
        queue = pod_ann.get(QUEUE_NAME_ANNOTATION)
        if queue:
            pg_spec["queue"] = queue
        pc = spec(pod).get("priorityClassName")
        if pc:
            pg_spec["priorityClassName"] = pc
        ref = owner_ref if owner_ref is not None else make_owner_ref("v1", "Pod", pod)
        return {
            "apiVersion": PODGROUP_API,
            "kind": "PodGroup",
            "metadata": {
                "name": pg_name,
                "namespace": ns,
                "uid": self.world.new_uid(),
                "annotations": ann,
                "labels": lab,
                "ownerReferences": [ref],
                "creationTimestamp": meta(pod).get("creationTimestamp"),
            },
            "spec": pg_spec,
            "status": {"phase": "Pending"},
        }

    def _gc_podgroup_of_pod(self, pod_key: str) -> None:
        """A PodGroup owned by a pod goes with the pod (owner-reference GC)."""
        self.gc_owner("Pod", pod_key)

    def gc_owner(self, kind: str, key: str) -> None:
        """The PodGroup this controller made for a removed owner (pod, ReplicaSet) goes with it."""
        pg_key = self.created.pop((kind, key), None)
        if pg_key is not None and self.world.get("PodGroup", pg_key) is not None:
            self.world.remove("PodGroup", pg_key, "gc")
