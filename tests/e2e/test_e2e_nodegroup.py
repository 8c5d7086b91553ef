"""Node groups on a real API server (EXT-3): Volcano's nodegroup plugin reading Queue
spec.affinity through the CRD and the nodes' volcano.sh/nodegroup-name label, with seed 003's
exclusive groups and a pod pinned by scheduling.tidesched.io/node-group."""

from __future__ import annotations

from cluster import VOLCANO_DEFAULT_CONF, bound, condition, create_node, create_queue, events, volcano_job, wait_until

GROUP = "volcano.sh/nodegroup-name"
CONF = VOLCANO_DEFAULT_CONF + """  - name: nodegroup
    arguments:
      exclusive: true
"""


def test_exclusive_group_and_pinned_pod(e2e) -> None:
    api, ns = e2e.api, e2e.ns
    create_node(api, "private-1", cpu="8", memory="32Gi", labels={GROUP: "private"})
    create_node(api, "shared-1", cpu="4", memory="32Gi", labels={GROUP: "shared"})
    create_queue(api, "team-a", affinity={"nodeGroupAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": ["private", "shared"]}})
    # team-x only prefers the private group: Volcano alone would let it in, exclusive does not.
    create_queue(api, "team-x", affinity={"nodeGroupAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": ["shared"],
        "preferredDuringSchedulingIgnoredDuringExecution": ["private"]}})
    x = volcano_job(api, ns, "x", replicas=2, queue="team-x", cpu="3", memory="1Gi")
    a = volcano_job(api, ns, "a", replicas=1, queue="team-a", cpu="2", memory="1Gi",
                    labels={"scheduling.tidesched.io/node-group": "private"})
    e2e.scheduler(CONF)

    wait_until(lambda: bound(api, ns).get(a[0]) == "private-1", 30, "the pinned pod to bind in its group")

    def refused_for_its_group() -> list:
        return [e for e in events(api, ns, x[1], "FailedScheduling") if "node group is exclusive" in e["message"]]

    ev = wait_until(refused_for_its_group, 30, "team-x's pod refused by the exclusive group")[0]
    assert "group private is only for queues whose required affinity names it; queue team-x does not require it" in ev["message"]
    # The event and the pod's condition come from two writers: wait for the condition too.
    def refused_condition() -> dict | None:
        ps = condition(api.get(f"/api/v1/namespaces/{ns}/pods/{x[1]}"), "PodScheduled")
        return ps if ps is not None and "node group is exclusive" in ps["message"] else None

    ps = wait_until(refused_condition, 30, "team-x's pod's PodScheduled condition to name the exclusive group")
    assert ps["status"] == "False" and "node group is exclusive" in ps["message"]
    assert not set(x) & set(bound(api, ns)), "team-x's gang must not bind on the private group"

    # A second shared node: the gang fits in its own group now.
    create_node(api, "shared-2", cpu="4", memory="32Gi", labels={GROUP: "shared"})
    placed = wait_until(lambda: (b := bound(api, ns)) and set(x) <= set(b) and b, 30, "team-x's gang to bind")
    assert sorted(placed[p] for p in x) == ["shared-1", "shared-2"]
    assert placed[a[0]] == "private-1"
