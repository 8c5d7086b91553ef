"""Seed 003's extensions on a real API server: the gang timeout (EXT-1) and rare-card
protection (EXT-2)."""

from __future__ import annotations

from cluster import (
    VOLCANO_DEFAULT_CONF,
    bound,
    condition,
    create_node,
    create_pod,
    events,
    gpu_node,
    podgroup,
    podgroup_name,
    replicaset_pods,
    volcano_job,
    wait_until,
)

GANG_TIMEOUT_CONF = VOLCANO_DEFAULT_CONF
CARD_PROTECT_CONF = VOLCANO_DEFAULT_CONF + """  - name: cardprotect
    arguments:
      protectedModels: [NVIDIA-H200]
"""


def test_gang_that_never_fits_times_out_and_stays_out(e2e) -> None:
    api, ns = e2e.api, e2e.ns
    create_node(api, "node-a", cpu="4", memory="16Gi")
    create_node(api, "node-b", cpu="4", memory="16Gi")
    create_node(api, "node-c", cpu="2", memory="16Gi")
    # Three workers of 3 CPU: admitted (10 CPUs in all) but only two fit at once. The job is
    # willing to wait 3 s (the Job's annotation reaches its PodGroup: the job controller copies it).
    names = volcano_job(
        api, ns, "trainer", replicas=3, cpu="3", memory="1Gi",
        annotations={"scheduling.tidesched.io/gang-timeout-seconds": "3"},
    )
    e2e.scheduler(GANG_TIMEOUT_CONF)
    pg_name = podgroup_name(api, ns, "trainer")

    def timed_out() -> dict | None:
        cond = condition(podgroup(api, ns, "trainer"), "Unschedulable")
        return cond if cond and cond.get("reason") == "GangTimeout" else None

    cond = wait_until(timed_out, 30, "the PodGroup's Unschedulable condition with reason GangTimeout")
    assert cond["status"] == "True" and "for minMember 3, 0 of 3 tasks scheduled" in cond["message"]
    ev = wait_until(lambda: events(api, ns, pg_name, "GangTimeout"), 30, "a GangTimeout event")[0]
    assert ev["type"] == "Warning" and ev["involvedObject"]["kind"] == "PodGroup"
    assert ev["message"].startswith("gang timed out: waited 3s since ") and "for minMember 3" in ev["message"]
    for pod in names:
        def reason(pod: str = pod) -> str | None:
            ps = condition(api.get(f"/api/v1/namespaces/{ns}/pods/{pod}"), "PodScheduled")
            return ps["reason"] if ps and ps["status"] == "False" else None

        wait_until(lambda: reason() == "GangTimeout", 30, f"PodScheduled=False/GangTimeout on {pod}")

    # Room appears, and a later job uses it: the timed-out gang stays out for good.
    create_node(api, "node-d", cpu="4", memory="16Gi")
    volcano_job(api, ns, "probe", replicas=1, cpu="500m", memory="1Gi")
    wait_until(lambda: "probe-worker-0" in bound(api, ns), 30, "a later job to bind")
    assert not set(names) & set(bound(api, ns)), "a timed-out gang was bound"
    assert podgroup(api, ns, "trainer")["status"]["phase"] == "Pending"


def test_rare_card_node_is_kept_for_pods_that_ask_for_its_model(e2e) -> None:
    api, ns = e2e.api, e2e.ns
    create_node(api, "cpu-1", cpu="4", memory="16Gi")
    gpu_node(api, "h200-1", "NVIDIA-H200", cards=8, cpu="64", memory="256Gi")
    # A CPU job too big for the CPU node: without protection it would take the H200 node.
    big_cpu = replicaset_pods(api, ns, "etl", 1, cpu="8", memory="1Gi")[0]
    # Pods asking for H200: by card name, and by required node affinity on the product label.
    named = replicaset_pods(api, ns, "train", 1, annotations={"volcano.sh/card.name": "NVIDIA-H200"}, gpus=2)[0]
    body_selector = {"nvidia.com/gpu.product": "NVIDIA-H200"}
    create_pod(api, ns, "pinned", gpus=1, node_selector=body_selector)
    e2e.scheduler(CARD_PROTECT_CONF)

    placed = wait_until(lambda: (b := bound(api, ns)) and {named, "pinned"} <= set(b) and b, 30, "H200 pods to bind")
    assert placed[named] == "h200-1" and placed["pinned"] == "h200-1"
    ev = wait_until(lambda: events(api, ns, big_cpu, "FailedScheduling"), 30, "FailedScheduling on the CPU pod")[0]
    assert "1 node reserved for card model NVIDIA-H200" in ev["message"], ev["message"]
    ps = wait_until(
        lambda: condition(api.get(f"/api/v1/namespaces/{ns}/pods/{big_cpu}"), "PodScheduled"), 30, "PodScheduled"
    )
    assert ps["status"] == "False" and "node reserved for card model NVIDIA-H200" in ps["message"]
    assert big_cpu not in bound(api, ns)
