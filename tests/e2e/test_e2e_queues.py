"""Volcano v1.15 Queues on a real control plane (issue 32): ``tidesched run`` creates the ``root``
queue as vc-scheduler v1.15.1 does; deploy/crds serves the v1.15 fields (``dequeueStrategy``
defaulted to ``traverse``); and ``spec.priority`` decides which queue's job takes the last room,
under Volcano v1.15.1's own CI config with capacity in place of proportion (proportion would give
each of the two queues half the node as deserved, and neither 2-cpu pod could start)."""

from __future__ import annotations

import time

from cluster import GROUP_NAME, VOLCANO, VOLCANO_115_CI_CONF, bound, create_node, create_podgroup, create_queue, pod_body, wait_until


def test_root_is_made_and_the_higher_priority_queue_goes_first(e2e) -> None:
    api = e2e.api
    ns = e2e.namespace("queues")
    create_node(api, "node-a", cpu="2", memory="4Gi")
    # Equal in everything but priority; without it the tie would go to a-low (its name sorts first).
    create_queue(api, "a-low", priority=1)
    create_queue(api, "b-high", priority=10, dequeueStrategy="fifo")
    for queue in ("a-low", "b-high"):
        create_podgroup(api, ns, queue, min_member=1, queue=queue)
        api.post(f"/api/v1/namespaces/{ns}/pods", pod_body(ns, f"{queue}-0", cpu="2", annotations={GROUP_NAME: queue}))
    e2e.scheduler(VOLCANO_115_CI_CONF.replace("- name: proportion", "- name: capacity"))

    wait_until(lambda: "b-high-0" in bound(api, ns), 30, "the higher-priority queue's pod to bind")
    time.sleep(2)  # more sessions: the other pod stays pending (no room)
    assert bound(api, ns) == {"b-high-0": "node-a"}
    root = api.get(f"{VOLCANO}/queues/root")
    assert root["spec"]["reclaimable"] is False and root["spec"]["weight"] == 1
    low, high = api.get(f"{VOLCANO}/queues/a-low"), api.get(f"{VOLCANO}/queues/b-high")
    assert (low["spec"]["dequeueStrategy"], high["spec"]["dequeueStrategy"]) == ("traverse", "fifo")
