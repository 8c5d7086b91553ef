"""kube-controller-manager's resourceclaim controller, simulated (1.36).

* A pod naming a ResourceClaimTemplate gets its own claim: ``<pod>-<claim>-<5 chars>`` with
  the template's spec, labels and annotations, the ``resource.kubernetes.io/pod-claim-name``
  annotation and the pod as controlling owner; the pod's ``status.resourceClaimStatuses``
  then names it. A missing template leaves the pod waiting (a Warning event).
* A pod that is done (Succeeded or Failed), or gone, is taken out of its claims'
  ``reservedFor``; a claim nobody reserves any more is deallocated (its allocation cleared:
  with structured parameters the controller, not a driver, frees the devices); a claim made
  for a pod that is done or gone is deleted.
"""

from __future__ import annotations

from typing import Any

from tidesched.sim.controllers.common import Emit
from tidesched.sim.world import (
    FINISHED_POD_PHASES,
    World,
    is_deleting,
    meta,
    pod_node,
    pod_phase,
    spec,
    split_key,
    status,
)

POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"


def pod_claim_refs(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in spec(pod).get("resourceClaims") or [] if isinstance(r, dict)]


class ResourceClaimController:
    def __init__(self, world: World, emit: Emit) -> None:
        self.world = world
        self.emit = emit
        self.dirty: set[str] = set()
        self._claims_of: dict[str, tuple[str, list[str]]] = {}  # pod key -> (uid, claim keys)

    def on_pod(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        pod = new if new is not None else old
        if pod is not None and pod_claim_refs(pod):
            self.dirty.add(key)

    def reconcile(self, key: str, now: float) -> None:
        pod = self.world.get("Pod", key)
        ns = split_key(key)[0]
        if pod is not None and not self._done(pod):
            self._make_claims(key, pod, now)
            pod = self.world.get("Pod", key)
            assert pod is not None
            keys = self._claim_keys(ns, pod)
            self._claims_of[key] = (str(meta(pod).get("uid") or ""), keys)
            return
        uid, keys = self._claims_of.pop(key, ("", []))
        if pod is not None:
            uid, keys = str(meta(pod).get("uid") or ""), self._claim_keys(ns, pod)
        for ckey in keys:
            self._release(ckey, uid)

    @staticmethod
    def _done(pod: dict[str, Any]) -> bool:
        return pod_phase(pod) in FINISHED_POD_PHASES or (is_deleting(pod) and not pod_node(pod))

    @staticmethod
    def _claim_keys(ns: str, pod: dict[str, Any]) -> list[str]:
        made = {s.get("name"): s.get("resourceClaimName") for s in status(pod).get("resourceClaimStatuses") or []}
        out = []
        for ref in pod_claim_refs(pod):
            name = ref.get("resourceClaimName") or made.get(ref.get("name"))
            if name:
                out.append(f"{ns}/{name}")
        return out

    def _make_claims(self, key: str, pod: dict[str, Any], now: float) -> None:
        ns, pod_name = split_key(key)
        made = list(status(pod).get("resourceClaimStatuses") or [])
        have = {s.get("name") for s in made}
        added = False
        for ref in pod_claim_refs(pod):
            tmpl_name = ref.get("resourceClaimTemplateName")
            if not tmpl_name or ref.get("name") in have:
                continue
            tmpl = self.world.get("ResourceClaimTemplate", f"{ns}/{tmpl_name}")
            if tmpl is None:
                self.emit("Pod", ns, pod_name, "Warning", "FailedResourceClaimCreation",
                          f"PodResourceClaim {ref.get('name')}: resource claim template {tmpl_name!r} not found")
                continue
            tspec = tmpl.get("spec") or {}
            tmeta = tspec.get("metadata") or {}
            name = f"{pod_name}-{ref.get('name')}-{self.world.random_suffix()}"
            claim = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "uid": self.world.new_uid(),
                    "labels": dict(tmeta.get("labels") or {}),
                    "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_NAME: ref.get("name")},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name,
                                         "uid": meta(pod).get("uid"), "controller": True, "blockOwnerDeletion": True}],
                },
                "spec": dict(tspec.get("spec") or {}),
            }
            self.world.put("ResourceClaim", claim, "controller")
            made.append({"name": ref.get("name"), "resourceClaimName": name})
            added = True
        if added:
            new = dict(pod)
            new["status"] = dict(status(pod), resourceClaimStatuses=made)
            self.world.put("Pod", new, "controller")

    def _release(self, ckey: str, pod_uid: str) -> None:
        claim = self.world.get("ResourceClaim", ckey)
        if claim is None:
            return
        st = dict(status(claim))
        reserved = [r for r in st.get("reservedFor") or [] if r.get("uid") != pod_uid]
        owner = next((o for o in meta(claim).get("ownerReferences") or [] if o.get("controller")), None)
        if not reserved and owner is not None and owner.get("kind") == "Pod" and owner.get("uid") == pod_uid:
            self.world.remove("ResourceClaim", ckey, "controller")
            return
        if reserved == list(st.get("reservedFor") or []):
            return
        st["reservedFor"] = reserved
        if not reserved:
            st.pop("allocation", None)
        if not st["reservedFor"]:
            del st["reservedFor"]
        new = dict(claim)
        new["status"] = st
        self.world.put("ResourceClaim", new, "controller")
