"""DRA on a real control plane (issue 35), with Volcano v1.15.1's own e2e config (which names
network-topology-aware and the DRA switch) and the real kube-controller-manager's resourceclaim
controller making claims from templates and freeing them:

* a pod whose claim cannot be allocated (its device class does not exist) is never bound: it
  stays pending with a FailedScheduling event and an Unschedulable condition that say why, its
  claim untouched, while the pods beside it bind;
* pods with one-GPU claims from a template are bound with their claims written first, as
  kube-scheduler's PreBind: each claim allocated a device of its own on the pod's node (the
  finalizer on, the pod in reservedFor); a pod for which no device is left waits with its
  reason — also across a scheduler restart with the claims already allocated — and binds once
  kube-controller-manager has freed a finished pod's claim.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from cluster import (
    GROUP_NAME,
    RUN_SECONDS,
    VOLCANO_115_CI_CONF,
    bound,
    condition,
    create_node,
    create_podgroup,
    events,
    pod_body,
    pods,
    wait_until,
)

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"
FINALIZER = "resource.kubernetes.io/delete-protection"


@pytest.fixture
def resourceclaim_controller(kube_controller_manager: Any) -> Any:
    """kube-controller-manager's resourceclaim controller: the harness's own kube-controller-manager
    runs every controller, this one among them. A second one beside it would race it and make
    two claims for a pod from its template."""
    return kube_controller_manager


def _claim(ns: str, name: str, device_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
    }


def _claim_pod(ns: str, name: str, group: str, claim: dict[str, str], **annotations: str) -> dict[str, Any]:
    body = pod_body(ns, name, annotations={GROUP_NAME: group, **annotations})
    body["spec"]["resourceClaims"] = [{"name": "gpu", **claim}]
    body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return body


def test_pod_whose_claim_cannot_be_allocated_is_not_bound(e2e) -> None:
    api = e2e.api
    ns = e2e.namespace("dra")
    create_node(api, "node-a", cpu="8", memory="32Gi")
    api.post(f"{RESOURCE}/namespaces/{ns}/resourceclaims", _claim(ns, "gpu-claim", "no-such-class"))
    create_podgroup(api, ns, "with-claim", min_member=1)
    create_podgroup(api, ns, "plain", min_member=1)
    api.post(f"/api/v1/namespaces/{ns}/pods", _claim_pod(ns, "with-claim-0", "with-claim", {"resourceClaimName": "gpu-claim"}))
    api.post(f"/api/v1/namespaces/{ns}/pods", pod_body(ns, "plain-0", annotations={GROUP_NAME: "plain"}))
    sched = e2e.scheduler(VOLCANO_115_CI_CONF)

    wait_until(lambda: "plain-0" in bound(api, ns), 30, "the plain pod to bind")
    failed = wait_until(lambda: events(api, ns, "with-claim-0", "FailedScheduling"), 30,
                        "FailedScheduling on the pod with a claim")
    assert "request gpu: device class no-such-class does not exist" in failed[0]["message"], failed[0]["message"]
    cond = wait_until(lambda: condition(pods(api, ns)["with-claim-0"], "PodScheduled"), 30, "PodScheduled condition")
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable", cond
    # Several more sessions: still not bound, and its claim untouched (nothing allocated it).
    time.sleep(3)
    assert "with-claim-0" not in bound(api, ns)
    assert not api.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/gpu-claim").get("status", {}).get("allocation")
    log = sched.log.read_text()
    assert "DynamicResourceAllocationEnable" not in log  # honoured: nothing to warn about
    assert "plugin network-topology-aware: not honoured yet" not in log  # honoured since issue 34


def test_claims_from_templates_are_allocated_at_bind_and_freed_by_kcm(e2e, resourceclaim_controller) -> None:
    api = e2e.api
    ns = e2e.namespace("drat")
    create_node(api, "node-a", cpu="8", memory="32Gi")
    create_node(api, "node-b", cpu="8", memory="32Gi")
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
           "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
    gpus = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node-b-gpus"},
            "spec": {"driver": DRIVER, "nodeName": "node-b", "pool": {"name": "node-b", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu", "namespace": ns},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}}}
    api.post(f"{RESOURCE}/deviceclasses", cls)
    api.post(f"{RESOURCE}/resourceslices", gpus)
    try:
        api.post(f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", template)
        for i in range(3):
            create_podgroup(api, ns, f"g{i}", min_member=1)
        # The first runs 12 s, then the kubelet ends it (Succeeded) and its claim is freed.
        api.post(f"/api/v1/namespaces/{ns}/pods", _claim_pod(ns, "p0", "g0", {"resourceClaimTemplateName": "one-gpu"}, **{RUN_SECONDS: "12"}))
        api.post(f"/api/v1/namespaces/{ns}/pods", _claim_pod(ns, "p1", "g1", {"resourceClaimTemplateName": "one-gpu"}))
        sched = e2e.scheduler(VOLCANO_115_CI_CONF)
        wait_until(lambda: {"p0", "p1"} <= set(bound(api, ns)), 30, "two pods with claims to bind")
        assert bound(api, ns) == {"p0": "node-b", "p1": "node-b"}  # node-a has no GPU
        claims = {c["metadata"]["name"]: c for c in api.items(f"{RESOURCE}/namespaces/{ns}/resourceclaims")}
        devices = set()
        for name, c in claims.items():
            (result,) = c["status"]["allocation"]["devices"]["results"]
            devices.add(result["device"])
            owner = c["metadata"]["ownerReferences"][0]["name"]
            assert [r["name"] for r in c["status"]["reservedFor"]] == [owner], c["status"]
            assert FINALIZER in c["metadata"]["finalizers"], c["metadata"]
            assert c["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-b"]
        assert devices == {"gpu-0", "gpu-1"}, claims

        # A third pod finds no device; a restarted scheduler reads the claims already allocated.
        sched.stop()
        api.post(f"/api/v1/namespaces/{ns}/pods", _claim_pod(ns, "p2", "g2", {"resourceClaimTemplateName": "one-gpu"}))
        e2e.scheduler(VOLCANO_115_CI_CONF)
        failed = wait_until(lambda: events(api, ns, "p2", "FailedScheduling"), 10, "FailedScheduling on p2")
        assert "request gpu (1 device of class gpu.example.com): every such device is taken" in failed[-1]["message"], failed[-1]["message"]
        assert pods(api, ns)["p0"]["status"].get("phase") == "Running" and "p2" not in bound(api, ns)
        # p0 ends; kube-controller-manager takes it out of reservedFor and deallocates its claim.
        wait_until(lambda: bound(api, ns).get("p2") == "node-b", 60, "p2 to bind once p0's device is free")
        p2_claim = next(c for c in api.items(f"{RESOURCE}/namespaces/{ns}/resourceclaims")
                        if c["metadata"]["ownerReferences"][0]["name"] == "p2")
        held = {c["status"]["allocation"]["devices"]["results"][0]["device"]
                for c in api.items(f"{RESOURCE}/namespaces/{ns}/resourceclaims")
                if c["metadata"]["ownerReferences"][0]["name"] == "p1"}
        assert p2_claim["status"]["allocation"]["devices"]["results"][0]["device"] not in held
    finally:
        api.delete(f"{RESOURCE}/resourceslices/node-b-gpus")
        api.delete(f"{RESOURCE}/deviceclasses/{DRIVER}")
