"""Scenario 4: a PodDisruptionBudget that allows no disruption stops an eviction (K8S-2).

The Eviction API answers 429 while the budget allows nothing; the scheduler retries, then gives up
with an ``EvictionBlocked`` event, and nothing is deleted."""

from __future__ import annotations

import json

from cluster import bound, create_queue, events, gpu_node, pods, replicaset_pods, volcano_job, wait_until

H200 = "NVIDIA-H200"


def test_eviction_refused_by_budget_is_retried_then_reported(e2e) -> None:
    api = e2e.api
    e2e.priority_class("e2e-pc-high", 80000)
    e2e.priority_class("e2e-pc-low", 40000)
    research, online = e2e.namespace("research"), e2e.namespace("online")
    gpu_node(api, "h200-1", H200, cards=8)
    create_queue(api, "online", priority=80000, reclaimable=False,
                 annotations={"volcano.sh/card.quota": json.dumps({H200: 8})})
    create_queue(api, "offline", priority=20000, reclaimable=True,
                 annotations={"volcano.sh/card.quota": json.dumps({H200: 8})})
    train = volcano_job(
        api, research, "pretrain", replicas=2, queue="offline", priority_class="e2e-pc-low",
        annotations={"volcano.sh/service.type": "training", "volcano.sh/preemptable": "true"},
        pod_annotations={"volcano.sh/card.name": H200}, labels={"job": "pretrain"}, gpus=4, cpu="16", memory="64Gi",
    )
    pdb = api.post(
        f"/apis/policy/v1/namespaces/{research}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pretrain", "namespace": research},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"job": "pretrain"}}},
        },
    )
    # The disruption controller's part: the budget's status, with no disruption allowed.
    api.patch(
        f"/apis/policy/v1/namespaces/{research}/poddisruptionbudgets/pretrain/status",
        {"status": {"observedGeneration": pdb["metadata"]["generation"], "disruptionsAllowed": 0,
                    "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2}},
    )
    sched = e2e.scheduler()
    wait_until(lambda: set(train) <= set(bound(api, research)), 30, "the training job to bind")
    wait_until(lambda: len(e2e.kubelet.started) == 2, 30, "the training pods Running")

    serve = replicaset_pods(
        api, online, "chat-5c8d", 1, priority_class="e2e-pc-high", gpus=4, cpu="8", memory="32Gi",
        annotations={"volcano.sh/service.type": "inference", "volcano.sh/card.name": H200,
                     "scheduling.volcano.sh/queue-name": "online"},
    )
    # The evictor retries a 429 with backoff (about 25 s in all) before it reports the block.
    blocked = wait_until(lambda: events(api, research, reason="EvictionBlocked"), 60, "an EvictionBlocked event")
    assert blocked[0]["type"] == "Warning"
    assert blocked[0]["involvedObject"]["name"] in train
    assert "disruption budget" in blocked[0]["message"]
    refused = [a for a in e2e.cp.audit("eviction") if a.namespace == research]
    assert refused and all(a.code == 429 for a in refused)
    assert len([a for a in refused if a.name == blocked[0]["involvedObject"]["name"]]) > 1, "a 429 was not retried"
    # Nothing was deleted: both training pods still run, the inference pod waits.
    live = pods(api, research)
    assert set(train) <= set(live)
    assert not any(p["metadata"].get("deletionTimestamp") for p in live.values())
    # The victim was marked before the Eviction API was asked, as kube-scheduler and vc-scheduler
    # mark theirs (the API server took the strategic merge with the UID precondition); not made
    # unready, since the budget keeps it running.
    conds = {c["type"]: c for c in live[blocked[0]["involvedObject"]["name"]]["status"].get("conditions", [])}
    target = conds.get("DisruptionTarget") or {}
    assert (target.get("status"), target.get("reason")) == ("True", "PreemptionByScheduler"), conds
    assert target["message"] == "volcano: preempting to accommodate a higher priority pod"
    assert (conds.get("Ready") or {}).get("reason") != "Evict"
    assert not set(serve) & set(bound(api, online))
    assert sched.metric("tidesched_pods_evicted_total") == 0
    assert sched.metric("tidesched_eviction_errors_total", reason="blocked") >= 1
