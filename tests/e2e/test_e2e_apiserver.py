"""Scenario 8: the API server restarts while pods keep arriving, and a watch expires (410 Gone after
etcd compaction): the informers re-list and scheduling goes on (K8S-1, REL-3)."""

from __future__ import annotations

import threading

from cluster import VOLCANO_DEFAULT_CONF, bound, create_node, replicaset_pods, wait_until
from controlplane import ApiError

import httpx


def test_apiserver_restart_and_expired_watch(e2e) -> None:
    api, ns, cp = e2e.api, e2e.ns, e2e.cp
    for i in range(4):
        create_node(api, f"node-{i}", cpu="16", memory="64Gi")
    sched = e2e.scheduler(VOLCANO_DEFAULT_CONF)
    first = replicaset_pods(api, ns, "web", 5, cpu="1", memory="1Gi")
    wait_until(lambda: set(first) <= set(bound(api, ns)), 30, "the first pods to bind")

    # Pods keep arriving while the API server goes away and comes back (a client that retries).
    created: list[str] = []
    stop = threading.Event()

    def submit() -> None:
        i = 100
        while not stop.is_set() and i < 130:
            try:
                created.extend(replicaset_pods(api, ns, "web", 1, cpu="1", memory="1Gi"))
                i += 1
            except (ApiError, httpx.HTTPError):
                pass  # the API server is down: try again
            stop.wait(0.1)

    arrivals = threading.Thread(target=submit, daemon=True)
    arrivals.start()
    wait_until(lambda: len(created) >= 5, 30, "pods arriving")
    e2e.restart_apiserver()
    wait_until(lambda: len(created) >= 20, 60, "more pods after the restart")
    stop.set()
    arrivals.join(10)
    wait_until(lambda: set(created) <= set(bound(api, ns)), 60, "the pods created around the restart to bind")

    # Now a watch that expires: move etcd's revision past what the informers have seen (objects
    # they do not watch), compact it away, and restart the API server so every watch reconnects
    # from a compacted resourceVersion and gets 410 Gone.
    relists = sched.metric("tidesched_informer_events_total", kind="Pod", event="relist")
    for i in range(20):
        api.post(f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": f"bump-{i}"}, "data": {}})
    cp.compact_etcd()
    e2e.restart_apiserver()
    wait_until(lambda: sched.metric("tidesched_informer_events_total", kind="Pod", event="relist") > relists, 60,
               "the Pod informer to relist after 410 Gone")
    late = replicaset_pods(api, ns, "late", 3, cpu="1", memory="1Gi")
    wait_until(lambda: set(late) <= set(bound(api, ns)), 30, "pods created after the relist to bind")
    assert sched.popen.poll() is None, "the scheduler exited"
    assert sched.get("/readyz").status_code == 200
