"""Scenario 2: a card-model quota holds on a real API server (CARD-2, CARD-3, CARD-8)."""

from __future__ import annotations

import json

from cluster import VOLCANO, bound, condition, create_queue, events, gpu_node, replicaset_pods, wait_until

H200 = "NVIDIA-H200"


def test_pod_over_card_quota_stays_pending_with_the_reason(e2e) -> None:
    api = e2e.api
    ns = e2e.namespace("quota")
    gpu_node(api, "h200-1", H200, cards=8)
    gpu_node(api, "h200-2", H200, cards=8)
    create_queue(api, "team-a", annotations={"volcano.sh/card.quota": json.dumps({H200: 6})})
    ann = {"volcano.sh/card.name": H200, "scheduling.volcano.sh/queue-name": "team-a"}
    first = replicaset_pods(api, ns, "serve-a", 1, annotations=ann, gpus=4, cpu="4", memory="8Gi")
    e2e.scheduler()  # deploy/configmap.yaml: capacity-card, as an operator installs it
    wait_until(lambda: first[0] in bound(api, ns), 30, "the first pod (4 of 6 cards) to bind")

    # 4 + 4 > 6: the second pod stays pending, with the quota as the reason.
    second = replicaset_pods(api, ns, "serve-a", 1, start=1, annotations=ann, gpus=4, cpu="4", memory="8Gi")[0]
    ev = wait_until(lambda: events(api, ns, second, "InsufficientQuota"), 30, "an InsufficientQuota event")[0]
    assert ev["type"] == "Warning"
    assert "team-a" in ev["message"] and H200 in ev["message"]
    pod = api.get(f"/api/v1/namespaces/{ns}/pods/{second}")
    ps = wait_until(
        lambda: condition(api.get(f"/api/v1/namespaces/{ns}/pods/{second}"), "PodScheduled"), 30, "PodScheduled"
    )
    assert ps["status"] == "False"
    assert ps["message"] == ev["message"], (ps["message"], ev["message"])
    assert not api.get(f"/api/v1/namespaces/{ns}/pods/{second}")["spec"].get("nodeName")
    del pod

    # The queue's status shows its usage per card model.
    def allocated() -> dict[str, str]:
        return (api.get(f"{VOLCANO}/queues/team-a").get("status") or {}).get("allocated") or {}

    alloc = wait_until(lambda: (a := allocated()).get(H200) and a, 30, "Queue status.allocated per card model")
    assert alloc[H200] == "4"
    assert alloc["nvidia.com/gpu"] == "4"
    assert alloc["cpu"] == "4"

    # A pod that fits the remaining quota (2 cards) binds beside it.
    third = replicaset_pods(api, ns, "serve-a", 1, start=2, annotations=ann, gpus=2, cpu="2", memory="4Gi")[0]
    wait_until(lambda: third in bound(api, ns), 30, "a pod within the remaining quota to bind")
    wait_until(lambda: allocated().get(H200) == "6", 30, "status.allocated to count 6 cards")
    assert second not in bound(api, ns)
