"""Scenario 5: bad objects the API server accepts become Warning events, and the scheduler goes on
placing everything else (REL-1, DEC-6)."""

from __future__ import annotations

import json

from cluster import (
    GROUP_NAME,
    bound,
    create_node,
    create_pod,
    create_podgroup,
    create_queue,
    events,
    gpu_node,
    podgroup_name,
    replicaset_pods,
    volcano_job,
    wait_until,
)

HIERARCHICAL = """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: capacity
    enabledHierarchy: true
  - name: nodeorder
"""
H200 = "NVIDIA-H200"


def _reasons(api, ns: str) -> dict[tuple[str, str], dict]:
    return {(e["involvedObject"]["name"], e["reason"]): e for e in events(api, ns)}


def _wait_reasons(api, ns: str, wanted) -> dict[tuple[str, str], dict]:
    seen: dict = {}

    def have() -> bool:
        seen.clear()
        seen.update(_reasons(api, ns))
        return set(wanted) <= set(seen)

    try:
        wait_until(have, 30, f"events {sorted(wanted)}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; events seen: {sorted(seen)}") from None
    return seen


def test_bad_card_objects_are_reported_and_the_rest_is_scheduled(e2e) -> None:
    api = e2e.api
    ns = e2e.namespace("bad")
    gpu_node(api, "h200-1", H200, cards=8)
    create_queue(api, "work", capability={"cpu": "64", "memory": "256Gi"},
                 annotations={"volcano.sh/card.quota": json.dumps({H200: 8})})
    create_queue(api, "broken-quota", annotations={"volcano.sh/card.quota": "{not json"})
    # A PodGroup whose minimum the CRD's pattern lets through but no quantity can hold.
    create_podgroup(api, ns, "huge", min_member=1, queue="work", min_resources={"cpu": "1e999"})
    # A PodGroup charged to a queue that does not exist (Volcano's admission webhooks refuse it:
    # written while they are off).
    with e2e.webhooks_off():
        create_podgroup(api, ns, "orphan", min_member=1, queue="no-such-queue")
    create_pod(api, ns, "orphan-0", annotations={GROUP_NAME: "orphan"}, cpu="1", memory="1Gi")
    q = {"scheduling.volcano.sh/queue-name": "work"}
    bad_card = replicaset_pods(api, ns, "bad-card", 1, annotations={**q, "volcano.sh/card.name": "NVIDIA-H200||"},
                               gpus=1)[0]
    volcano_job(api, ns, "bad-request", replicas=1, queue="work", gpus=1,
                annotations={"volcano.sh/card.request": '{"NVIDIA-H200": "many"}'},
                pod_annotations={"volcano.sh/card.name": H200})
    good = volcano_job(api, ns, "good", replicas=2, queue="work", gpus=2, cpu="2", memory="4Gi",
                       pod_annotations={"volcano.sh/card.name": H200})
    e2e.scheduler()
    wait_until(lambda: set(good) <= set(bound(api, ns)), 30, "the good job to bind")

    wanted = {
        ("huge", "InvalidObject"): "spec.minResources",
        ("orphan", "QueueNotFound"): "no-such-queue",
        (bad_card, "InvalidCardRequest"): "malformed card name",
        (podgroup_name(api, ns, "bad-request"), "InvalidCardRequest"): "volcano.sh/card.request",
    }
    got = _wait_reasons(api, ns, wanted)
    for key, text in wanted.items():
        assert got[key]["type"] == "Warning", key
        assert text in got[key]["message"], (key, got[key]["message"])
    queue_events = wait_until(lambda: _reasons(api, "default").get(("broken-quota", "InvalidCardQuota")), 30,
                              "InvalidCardQuota on the queue")
    assert queue_events["involvedObject"]["kind"] == "Queue" and "not valid JSON" in queue_events["message"]
    # The malformed card.request is ignored (DEC-6): its pod's own request is charged and fits.
    assert set(bound(api, ns)) == set(good) | {"bad-request-worker-0"}


def test_bad_queue_tree_is_reported_and_the_rest_is_scheduled(e2e) -> None:
    api = e2e.api
    ns = e2e.namespace("tree")
    create_node(api, "node-a", cpu="8", memory="32Gi")
    create_queue(api, "team", capability={"cpu": "8", "memory": "32Gi"})
    # Volcano's admission webhooks refuse all three queues (a parent that does not exist yet, a
    # negative capability) and a Job in a queue that is not Open: written while they are off, the
    # Job's PodGroup made by its controller meanwhile.
    with e2e.webhooks_off():
        create_queue(api, "loop-a", parent="loop-b", wait_open=False)
        create_queue(api, "loop-b", parent="loop-a", wait_open=False)
        create_queue(api, "negative", capability={"cpu": "-4"}, wait_open=False)
        stuck = volcano_job(api, ns, "in-loop", replicas=1, queue="loop-a", cpu="1", memory="1Gi")
        podgroup_name(api, ns, "in-loop")
    good = volcano_job(api, ns, "good", replicas=2, queue="team", cpu="1", memory="1Gi")
    e2e.scheduler(HIERARCHICAL)
    wait_until(lambda: set(good) <= set(bound(api, ns)), 30, "the good job to bind")
    got = _wait_reasons(
        api, "default",
        {("loop-a", "QueueHierarchyCycle"), ("loop-b", "QueueHierarchyCycle"), ("negative", "InvalidObject")},
    )
    assert "loop-a -> loop-b -> loop-a" in got[("loop-a", "QueueHierarchyCycle")]["message"] or \
        "loop-b -> loop-a -> loop-b" in got[("loop-a", "QueueHierarchyCycle")]["message"]
    assert "spec.capability" in got[("negative", "InvalidObject")]["message"]
    assert "must not be negative" in got[("negative", "InvalidObject")]["message"]
    assert not set(stuck) & set(bound(api, ns)), "a job in a queue on a parent cycle was given new work"
