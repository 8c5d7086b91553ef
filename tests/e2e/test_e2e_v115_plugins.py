"""Volcano v1.15.1's plugins on a real control plane (issue 32): ``tidesched run`` with the
deployed RBAC reads what they need from the API server and decides with them.

* resourcequota: a namespace's ResourceQuota (its status as kube-controller-manager's quota
  controller would write it) keeps a PodGroup whose minResources it cannot hold Pending, with
  the plugin's event, while one that fits is enqueued."""

from __future__ import annotations

from cluster import create_podgroup, events, podgroup, wait_until

CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: resourcequota
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def test_resourcequota_keeps_a_podgroup_out_of_the_queue(e2e) -> None:
    api = e2e.api
    ns = e2e.namespace("quota")
    api.post(f"/api/v1/namespaces/{ns}/resourcequotas", {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team", "namespace": ns},
        "spec": {"hard": {"requests.cpu": "4"}}})
    # The quota controller's part (none runs here): the status the plugin reads.
    api.put(f"/api/v1/namespaces/{ns}/resourcequotas/team/status", {
        **api.get(f"/api/v1/namespaces/{ns}/resourcequotas/team"),
        "status": {"hard": {"requests.cpu": "4"}, "used": {"requests.cpu": "1"}}})
    create_podgroup(api, ns, "fits", min_member=1, min_resources={"cpu": "2", "requests.cpu": "2"})
    create_podgroup(api, ns, "too-big", min_member=1, min_resources={"cpu": "4", "requests.cpu": "4"})
    e2e.scheduler(CONFIG)
    wait_until(lambda: podgroup(api, ns, "fits")["status"].get("phase") == "Inqueue", 30, "the fitting PodGroup enqueued")
    refused = wait_until(lambda: events(api, ns, "too-big", "Unschedulable"), 30, "the quota event")
    assert any("resource quota insufficient" in e["message"] and "requests.cpu: 4" in e["message"] for e in refused), refused
    assert podgroup(api, ns, "too-big")["status"].get("phase") in (None, "Pending")
