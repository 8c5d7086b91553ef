"""Scenario 1: a Volcano Job's gang binds all-or-nothing on a real API server, with Volcano's own
job controller making its PodGroup and pods (ACT-2, gang plugin)."""

from __future__ import annotations

from cluster import (
    VOLCANO_DEFAULT_CONF,
    bound,
    condition,
    create_node,
    events,
    podgroup,
    podgroup_name,
    pods,
    volcano_job,
    volcano_job_status,
    wait_until,
)


def test_gang_binds_nothing_until_all_fit_then_everything(e2e) -> None:
    api, ns = e2e.api, e2e.ns
    # 10 CPUs in all, so the job's 9 are admitted, but only two 3-CPU workers fit at once.
    create_node(api, "node-a", cpu="4", memory="16Gi")
    create_node(api, "node-b", cpu="4", memory="16Gi")
    create_node(api, "node-c", cpu="2", memory="16Gi")
    names = volcano_job(api, ns, "trainer", replicas=3, cpu="3", memory="1Gi")
    # Beside it a single pod that fits, so we know sessions ran and bound what they could.
    volcano_job(api, ns, "probe", replicas=1, cpu="500m", memory="1Gi")
    sched = e2e.scheduler(VOLCANO_DEFAULT_CONF)
    pg_name = podgroup_name(api, ns, "trainer")

    wait_until(lambda: "probe-worker-0" in bound(api, ns), 30, "the probe pod to bind")
    # Admitted: the job controller makes the three pods, which wait as one.
    wait_until(lambda: set(names) <= set(pods(api, ns)), 30, "the job controller to create the workers")

    def gang_reported() -> bool:
        cond = condition(podgroup(api, ns, "trainer"), "Unschedulable")
        return bool(cond and events(api, ns, pg_name, "Unschedulable"))

    wait_until(gang_reported, 30, "the gang's Unschedulable condition and event")
    assert not set(names) & set(bound(api, ns)), "a partial gang was bound"
    pg = podgroup(api, ns, "trainer")
    assert pg["status"]["phase"] == "Inqueue"
    cond = condition(pg, "Unschedulable")
    assert cond is not None and cond["status"] == "True"
    assert cond["reason"] == "NotEnoughResources"
    assert "3/3 tasks in gang unschedulable" in cond["message"]
    ev = events(api, ns, pg_name, "Unschedulable")[0]
    assert ev["type"] == "Warning" and ev["involvedObject"]["kind"] == "PodGroup"
    for pod in names:
        wait_until(lambda: events(api, ns, pod, "FailedScheduling"), 30, f"FailedScheduling on {pod}")
        p = api.get(f"/api/v1/namespaces/{ns}/pods/{pod}")
        ps = condition(p, "PodScheduled")
        assert ps is not None and ps["status"] == "False" and ps["reason"] == "Unschedulable"

    # Room appears: another 4-CPU node. The whole gang binds, one pod per 4-CPU node.
    create_node(api, "node-d", cpu="4", memory="16Gi")
    placed = wait_until(lambda: (b := bound(api, ns)) and set(names) <= set(b) and b, 30, "the whole gang to bind")
    assert sorted(placed[n] for n in names) == ["node-a", "node-b", "node-d"]
    wait_until(lambda: podgroup(api, ns, "trainer").get("status", {}).get("phase") == "Running", 30, "PodGroup Running")
    pg = podgroup(api, ns, "trainer")
    assert pg["status"].get("running") == 3
    sched_cond = condition(pg, "Scheduled")
    assert sched_cond is not None and sched_cond["status"] == "True"
    # Volcano's job controller sees its pods running.
    wait_until(lambda: volcano_job_status(api, ns, "trainer").get("state", {}).get("phase") == "Running", 30,
               "the Volcano Job to be Running")
    assert sched.metric("tidesched_pods_bound_total") >= 4
    for pod in names:
        assert events(api, ns, pod, "Scheduled"), f"no Scheduled event on {pod}"
