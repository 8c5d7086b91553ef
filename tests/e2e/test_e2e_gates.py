"""Scheduling gates and queue admission on a real control plane (issue 32): Volcano v1.15.1's
``schedulinggates`` e2e specs, condensed, with ``tidesched run
--feature-gates=SchedulingGatesQueueAdmission=true`` and Volcano's CI config with capacity in place
of proportion (as those specs switch it). No admission webhook runs here, so pods are created with
the gate Volcano's webhook would add; the RBAC is deploy/'s (patching pods is the new right).

* an admitted pod loses Volcano's gate and binds; one its queue cannot take keeps the gate;
* a pod admitted but unplaceable (its nodeSelector fits no node) keeps its queue's room: a second
  gated pod stays gated until the first is deleted;
* a pod with another gate beside Volcano's keeps both until the other one is lifted.
"""

from __future__ import annotations

import time

from cluster import GROUP_NAME, VOLCANO_115_CI_CONF, bound, condition, create_node, create_podgroup, create_queue, pod_body, pods, wait_until

GATE = "scheduling.volcano.sh/queue-allocation-gate"
QUEUE = "capacity-test-queue"
SLOT = {"cpu": "500m", "memory": "512Mi"}
CONF = VOLCANO_115_CI_CONF.replace("- name: proportion", "- name: capacity")


def _gated_pod(api, ns: str, name: str, *gates: str, node_selector: dict | None = None) -> None:
    body = pod_body(ns, name, cpu=SLOT["cpu"], memory=SLOT["memory"], node_selector=node_selector,
                    annotations={GROUP_NAME: "test-podgroup", GATE: "true", "scheduling.volcano.sh/queue-name": QUEUE})
    body["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    api.post(f"/api/v1/namespaces/{ns}/pods", body)


def _gates(api, ns: str, name: str) -> list[str]:
    return [g["name"] for g in pods(api, ns)[name]["spec"].get("schedulingGates") or []]


def test_queue_admission_lifts_volcanos_gate_and_holds_the_room(e2e) -> None:
    api = e2e.api
    ns = e2e.namespace("gates")
    create_node(api, "node-a", cpu="2", memory="2Gi")
    create_node(api, "node-b", cpu="2", memory="2Gi")
    create_queue(api, QUEUE, capability=SLOT)
    create_podgroup(api, ns, "test-podgroup", min_member=1, queue=QUEUE, min_resources=SLOT)
    _gated_pod(api, ns, "pod-1", GATE)
    _gated_pod(api, ns, "pod-multigate", GATE, "example.com/other-gate")
    e2e.scheduler(CONF, args=["--feature-gates=SchedulingGatesQueueAdmission=true"])

    wait_until(lambda: "pod-1" in bound(api, ns), 30, "pod-1 ungated and bound")
    assert _gates(api, ns, "pod-1") == []
    # The pod with another gate is never even asked about: both gates stay, and the API server's
    # own condition (SchedulingGated) is not overwritten.
    assert _gates(api, ns, "pod-multigate") == [GATE, "example.com/other-gate"]
    assert condition(pods(api, ns)["pod-multigate"], "PodScheduled")["reason"] == "SchedulingGated"

    api.delete(f"/api/v1/namespaces/{ns}/pods/pod-1", gracePeriodSeconds=0)
    api.delete(f"/api/v1/namespaces/{ns}/pods/pod-multigate", gracePeriodSeconds=0)
    _gated_pod(api, ns, "pod-2", GATE, node_selector={"kubernetes.io/fake-node": "fake"})
    wait_until(lambda: _gates(api, ns, "pod-2") == [], 30, "pod-2 admitted (gate lifted)")
    _gated_pod(api, ns, "pod-3", GATE)
    time.sleep(3)  # many sessions: pod-2 holds the queue's only room
    assert _gates(api, ns, "pod-3") == [GATE] and "pod-2" not in bound(api, ns)

    api.delete(f"/api/v1/namespaces/{ns}/pods/pod-2", gracePeriodSeconds=0)
    wait_until(lambda: "pod-3" in bound(api, ns), 30, "pod-3 admitted and bound once pod-2 is gone")


def test_a_pod_with_another_gate_waits_for_it_then_is_admitted(e2e) -> None:
    api = e2e.api
    ns = e2e.namespace("multigate")
    create_node(api, "node-a", cpu="2", memory="2Gi")
    create_queue(api, QUEUE, capability=SLOT)
    create_podgroup(api, ns, "test-podgroup", min_member=1, queue=QUEUE, min_resources=SLOT)
    _gated_pod(api, ns, "pod-multigate", GATE, "example.com/other-gate")
    e2e.scheduler(CONF, args=["--feature-gates=SchedulingGatesQueueAdmission=true"])
    time.sleep(3)
    assert _gates(api, ns, "pod-multigate") == [GATE, "example.com/other-gate"]
    # The other gate's owner lifts it (a JSON patch, as the Volcano spec does).
    api.client.request(
        "PATCH", f"/api/v1/namespaces/{ns}/pods/pod-multigate",
        content=f'[{{"op":"replace","path":"/spec/schedulingGates","value":[{{"name":"{GATE}"}}]}}]',
        headers={"Content-Type": "application/json-patch+json"},
    ).raise_for_status()
    wait_until(lambda: "pod-multigate" in bound(api, ns), 30, "pod-multigate ungated and bound")
    assert _gates(api, ns, "pod-multigate") == []
