"""A simple PV controller and ephemeral-volume controller for the simulated world (what
kube-controller-manager's persistentvolume-binder and ephemeral-volume controllers, and a
provisioner, do for the scheduler's part to work), level-triggered on claims and volumes:

* **Ephemeral volumes**: a pod's ``ephemeral`` volume gets its claim ``<pod>-<volume>`` from the
  ``volumeClaimTemplate``, owned by the pod; it goes with the pod.
* **Immediate claims** (a class binding ``Immediate``, or no class) are bound at once: to a PV
  already naming the claim, else to the smallest available PV of the claim's class that fits
  (size, access modes, volume mode, selector), else to a volume provisioned for it when the class
  has a provisioner (node affinity: the class's ``allowedTopologies``).
* **WaitForFirstConsumer claims** wait for the scheduler: a PV it gave the claim
  (``spec.claimRef``) is bound to it; a claim it gave a node
  (``volume.kubernetes.io/selected-node``) gets a volume provisioned on that node (node affinity to
  the node's ``kubernetes.io/hostname``: a node-local volume, as local-path provisioners make).
* **A new PV** without a claim becomes ``Available``.
* **A deleted claim** releases its PV: a provisioned one is deleted, a static one is ``Released``
  (not bound again, as with the ``Retain`` policy).

Binding sets the PV's ``claimRef`` and phase ``Bound`` and the claim's ``volumeName``, the
``pv.kubernetes.io/bind-completed`` annotation and phase ``Bound``, as the real controller does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidesched.model.objects import ObjectError
from tidesched.model.volumes import (
    BIND_COMPLETED,
    BOUND_BY_CONTROLLER,
    PersistentVolumeClaim,
    parse_pvc,
)
from tidesched.sim.controllers.common import Emit, make_owner_ref
from tidesched.sim.world import World, annotations, labels, meta, spec, split_key, status

PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"


class VolumeController:
    def __init__(self, world: World, emit: Emit) -> None:
        self.world = world
        self.emit = emit
        self.dirty_claims: set[str] = set()
        self.dirty_pods: set[str] = set()
        self.released: list[str] = []  # claims gone: their PVs to release
        self.new_volumes: set[str] = set()  # PVs not yet Available or Bound

    @property
    def dirty(self) -> bool:
        return bool(self.dirty_claims or self.dirty_pods or self.released or self.new_volumes)

    def on_change(self, kind: str, key: str, old: Any, new: Any) -> None:
        if kind == "PersistentVolumeClaim":
            if new is None:
                self.released.append(key)
            else:
                self.dirty_claims.add(key)
        elif kind == "PersistentVolume" and new is not None:
            if status(new).get("phase") in (None, "", "Pending"):
                self.new_volumes.add(key)
            ref = spec(new).get("claimRef")
            if isinstance(ref, Mapping) and ref.get("name"):
                self.dirty_claims.add(f"{ref.get('namespace') or 'default'}/{ref.get('name')}")
            else:
                # A new or freed volume may be what a waiting Immediate claim needs.
                self.dirty_claims.update(
                    k for k, c in self.world.items("PersistentVolumeClaim") if not spec(c).get("volumeName")
                )
        elif kind == "Pod":
            if new is None:
                self.dirty_pods.add(key)
            elif any(
                isinstance(v, Mapping) and v.get("ephemeral") is not None
                for v in spec(new).get("volumes") or ()
            ):
                self.dirty_pods.add(key)

    def reconcile(self, now: float) -> None:
        pods, self.dirty_pods = sorted(self.dirty_pods), set()
        for key in pods:
            self._ephemeral(key)
        for key in sorted(self.new_volumes):
            pv = self.world.get("PersistentVolume", key)
            if (
                pv is not None
                and status(pv).get("phase") in (None, "", "Pending")
                and not spec(pv).get("claimRef")
            ):
                self.world.put("PersistentVolume", {**pv, "status": {**status(pv), "phase": "Available"}})
        self.new_volumes.clear()
        released, self.released = self.released, []
        for key in released:
            self._release(key)
        claims, self.dirty_claims = sorted(self.dirty_claims), set()
        for key in claims:
            self._sync_claim(key)

    # -- ephemeral volumes ------------------------------------------------------------------

    def _ephemeral(self, pod_key: str) -> None:
        world = self.world
        ns, name = split_key(pod_key)
        pod = world.get("Pod", pod_key)
        if pod is None:
            for claim_key, claim in world.items("PersistentVolumeClaim"):
                owners = meta(claim).get("ownerReferences") or []
                if split_key(claim_key)[0] == ns and any(
                    isinstance(o, Mapping) and o.get("kind") == "Pod" and o.get("name") == name
                    for o in owners
                ):
                    world.remove("PersistentVolumeClaim", claim_key, "gc")
            return
        for vol in spec(pod).get("volumes") or ():
            if not isinstance(vol, Mapping) or not isinstance(vol.get("ephemeral"), Mapping):
                continue
            claim_name = f"{name}-{vol.get('name')}"
            if world.get("PersistentVolumeClaim", f"{ns}/{claim_name}") is not None:
                continue
            template = vol["ephemeral"].get("volumeClaimTemplate") or {}
            tmeta = template.get("metadata") or {}
            world.put(
                "PersistentVolumeClaim",
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {
                        "name": claim_name,
                        "namespace": ns,
                        "uid": world.new_uid(),
                        "labels": dict(tmeta.get("labels") or {}),
                        "annotations": dict(tmeta.get("annotations") or {}),
                        "ownerReferences": [make_owner_ref("v1", "Pod", pod)],
                    },
                    "spec": dict(template.get("spec") or {}),
                    "status": {"phase": "Pending"},
                },
            )

    # -- binding ----------------------------------------------------------------------------

    def _sync_claim(self, key: str) -> None:
        world = self.world
        obj = world.get("PersistentVolumeClaim", key)
        if obj is None or spec(obj).get("volumeName") and BIND_COMPLETED in annotations(obj):
            return
        try:
            claim = parse_pvc(obj)
        except ObjectError:
            return  # the scheduler reports it
        if claim.volume_name:  # pre-bound by the user: complete it when the PV is there
            pv = world.get("PersistentVolume", claim.volume_name)
            if pv is not None:
                self._bind(pv, obj, claim)
            return
        cls = world.get("StorageClass", claim.storage_class) if claim.storage_class else None
        delayed = cls is not None and cls.get("volumeBindingMode") == "WaitForFirstConsumer"
        taken = next((pv for _k, pv in world.items("PersistentVolume") if _names(pv, claim)), None)
        if taken is not None:
            self._bind(taken, obj, claim)
            return
        if delayed:
            node = claim.selected_node
            if node is not None and cls is not None:
                self._provision(obj, claim, cls, node)
            return
        pv = self._smallest_match(claim)
        if pv is not None:
            self._bind(pv, obj, claim)
        elif cls is not None and cls.get("provisioner") not in (None, "", "kubernetes.io/no-provisioner"):
            self._provision(obj, claim, cls, None)

    def _smallest_match(self, claim: PersistentVolumeClaim) -> dict[str, Any] | None:
        """FindMatchingVolume without a node (the PV controller's path)."""
        best, best_size = None, 0
        for _key, obj in self.world.items("PersistentVolume"):
            if spec(obj).get("claimRef") or status(obj).get("phase") != "Available":
                continue
            pv = self.world.record("PersistentVolume", _key)
            if pv is None or pv.storage_class != claim.storage_class or pv.capacity < claim.request:
                continue
            if pv.volume_mode != claim.volume_mode or not claim.access_modes <= pv.access_modes:
                continue
            if claim.selector is not None and not claim.selector.matches(pv.labels):
                continue
            if best is None or pv.capacity < best_size:
                best, best_size = obj, pv.capacity
        return best

    def _provision(
        self, obj: Mapping[str, Any], claim: PersistentVolumeClaim, cls: Mapping[str, Any], node: str | None
    ) -> None:
        world = self.world
        pv_spec: dict[str, Any] = {
            "capacity": {"storage": str(claim.request)},
            "accessModes": sorted(claim.access_modes) or ["ReadWriteOnce"],
            "storageClassName": claim.storage_class,
            "volumeMode": claim.volume_mode,
            "persistentVolumeReclaimPolicy": "Delete",
            "csi": {"driver": str(cls.get("provisioner")), "volumeHandle": f"pvc-{claim.uid}"},
        }
        if node is not None:
            host = labels(world.get("Node", node) or {}).get("kubernetes.io/hostname", node)
            pv_spec["nodeAffinity"] = {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}
                            ]
                        }
                    ]
                }
            }
        elif cls.get("allowedTopologies"):
            pv_spec["nodeAffinity"] = {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": e.get("key"), "operator": "In", "values": list(e.get("values") or [])}
                                for e in t.get("matchLabelExpressions") or []
                            ]
                        }
                        for t in cls["allowedTopologies"]
                    ]
                }
            }
        pv = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": "pvc-" + claim.uid.replace("/", "-"),
                "uid": world.new_uid(),
                "annotations": {PROVISIONED_BY: str(cls.get("provisioner"))},
            },
            "spec": pv_spec,
            "status": {"phase": "Available"},
        }
        self._bind(pv, obj, claim)
        self.emit(
            "PersistentVolumeClaim",
            claim.namespace,
            claim.name,
            "Normal",
            "ProvisioningSucceeded",
            f"Successfully provisioned volume {pv['metadata']['name']}",
        )

    def _bind(self, pv: Mapping[str, Any], obj: Mapping[str, Any], claim: PersistentVolumeClaim) -> None:
        world = self.world
        prebound = _names(pv, claim)
        pv_meta = dict(meta(pv))
        if not prebound:
            pv_meta["annotations"] = {**(pv_meta.get("annotations") or {}), BOUND_BY_CONTROLLER: "yes"}
        pv_new = {
            **pv,
            "metadata": pv_meta,
            "spec": {
                **spec(pv),
                "claimRef": {
                    "kind": "PersistentVolumeClaim",
                    "apiVersion": "v1",
                    "namespace": claim.namespace,
                    "name": claim.name,
                    "uid": claim.uid,
                },
            },
            "status": {**status(pv), "phase": "Bound"},
        }
        world.put("PersistentVolume", pv_new)
        c_meta = dict(meta(obj))
        c_meta["annotations"] = {
            **(c_meta.get("annotations") or {}),
            BIND_COMPLETED: "yes",
            **({} if spec(obj).get("volumeName") else {BOUND_BY_CONTROLLER: "yes"}),
        }
        capacity = (spec(pv).get("capacity") or {}).get("storage")
        world.put(
            "PersistentVolumeClaim",
            {
                **obj,
                "metadata": c_meta,
                "spec": {**spec(obj), "volumeName": meta(pv).get("name")},
                "status": {
                    **status(obj),
                    "phase": "Bound",
                    **({"capacity": {"storage": capacity}} if capacity else {}),
                },
            },
        )

    def _release(self, claim_key: str) -> None:
        ns, name = split_key(claim_key)
        for key, pv in list(self.world.items("PersistentVolume")):
            ref = spec(pv).get("claimRef")
            if (
                not isinstance(ref, Mapping)
                or ref.get("name") != name
                or (ref.get("namespace") or "default") != ns
            ):
                continue
            if PROVISIONED_BY in annotations(pv):
                self.world.remove("PersistentVolume", key, "gc")
            else:
                self.world.put("PersistentVolume", {**pv, "status": {**status(pv), "phase": "Released"}})


def _names(pv: Mapping[str, Any], claim: PersistentVolumeClaim) -> bool:
    """The PV's claimRef names the claim (its uid too, when it has one)."""
    ref = spec(pv).get("claimRef")
    if not isinstance(ref, Mapping):
        return False
    same = ref.get("name") == claim.name and (ref.get("namespace") or "default") == claim.namespace
    return same and (not ref.get("uid") or ref.get("uid") == claim.uid)
