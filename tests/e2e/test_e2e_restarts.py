"""Scenarios 6 and 7: failover and crashes lose nothing and bind nothing twice (K8S-3, REL-3)."""

from __future__ import annotations

import collections
import time

from cluster import VOLCANO_DEFAULT_CONF, bound, create_node, events, pods, replicaset_pods, wait_until

LEASE = [
    "--leader-elect",
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=500ms",
]


def bindings_per_pod(cp, ns: str) -> collections.Counter[str]:
    return collections.Counter(a.name for a in cp.audit("binding") if a.namespace == ns and a.code == 201)


def assert_no_node_overcommitted(api, ns: str, cpu_per_node: int, cpu_per_pod: int) -> None:
    per_node = collections.Counter(p["spec"]["nodeName"] for p in pods(api, ns).values() if p["spec"].get("nodeName"))
    over = {n: c for n, c in per_node.items() if c * cpu_per_pod > cpu_per_node}
    assert not over, f"over-committed nodes: {over}"


def test_standby_takes_over_when_the_leader_is_killed(e2e) -> None:
    api, ns = e2e.api, e2e.ns
    create_node(api, "node-a", cpu="16", memory="64Gi")
    create_node(api, "node-b", cpu="16", memory="64Gi")
    first = e2e.scheduler(VOLCANO_DEFAULT_CONF, args=[*LEASE, "--leader-elect-resource-name=e2e-failover"], ready=False)
    second = e2e.scheduler(VOLCANO_DEFAULT_CONF, args=[*LEASE, "--leader-elect-resource-name=e2e-failover"], ready=False)

    def leader():
        found = [s for s in (first, second) if _leading(s)]
        return found[0] if len(found) == 1 else None

    lead = wait_until(leader, 30, "exactly one leader")
    standby = second if lead is first else first
    assert not _leading(standby)
    before = replicaset_pods(api, ns, "web", 4, cpu="1", memory="1Gi")
    wait_until(lambda: set(before) <= set(bound(api, ns)), 30, "the leader to bind")

    lead.kill()  # SIGKILL: no lease release, the standby must wait for it to expire
    killed_at = time.monotonic()
    during = replicaset_pods(api, ns, "web", 4, start=4, cpu="1", memory="1Gi")
    wait_until(lambda: _leading(standby), 30, "the standby to take the lease")
    took_over = time.monotonic() - killed_at
    wait_until(lambda: set(during) <= set(bound(api, ns)), 30, "the new leader to bind the pods created meanwhile")
    # Lease 4 s, retry 0.5 s: the standby leads once the old lease expires, not much later.
    assert took_over < 4 + 10, f"took over after {took_over:.1f}s"
    counts = bindings_per_pod(e2e.cp, ns)
    assert set(counts) == set(before) | set(during)
    assert all(c == 1 for c in counts.values()), f"a pod was bound twice: {counts}"
    lease = api.get("/apis/coordination.k8s.io/v1/namespaces/volcano-system/leases/e2e-failover")
    assert lease["spec"]["holderIdentity"] and lease["spec"]["leaseTransitions"] >= 1


def _leading(s) -> bool:
    try:
        return s.metric("tidesched_leader") == 1.0
    except Exception:  # noqa: BLE001 - not serving yet, or killed
        return False


def test_sigkill_during_a_burst_of_binds_then_restart(e2e) -> None:
    api, ns = e2e.api, e2e.ns
    nodes, cpu_per_node = 20, 16
    for i in range(nodes):
        create_node(api, f"node-{i:02d}", cpu=str(cpu_per_node), memory="64Gi")
    total = 300
    names = replicaset_pods(api, ns, "burst", total, cpu="1", memory="128Mi")
    # A low client QPS stretches the burst over seconds, so the kill lands in the middle of it.
    first = e2e.scheduler(VOLCANO_DEFAULT_CONF, args=["--kube-api-qps=40", "--kube-api-burst=10"])
    wait_until(lambda: len(bound(api, ns)) >= 40, 60, "the burst to be under way")
    first.kill()
    # Bindings the API server had already received when the process died still land: count
    # once the number has stopped moving.
    partial = len(bound(api, ns))
    while True:
        time.sleep(0.5)
        now = len(bound(api, ns))
        if now == partial:
            break
        partial = now
    assert partial < total, "the burst finished before the kill; nothing was tested"
    second = e2e.scheduler(VOLCANO_DEFAULT_CONF)
    wait_until(lambda: len(bound(api, ns)) == total, 90, "every pod bound after the restart")
    counts = bindings_per_pod(e2e.cp, ns)
    assert all(c == 1 for c in counts.values()), f"bound twice: {[k for k, c in counts.items() if c > 1]}"
    # A Binding the killed process had sent can still land while its connection dies: the API
    # server then audits it with the cancelled request's status instead of 201. Every bound pod
    # without a 201 must have such an answer on record (not a 409: that one was refused).
    cut_off = {a.name for a in e2e.cp.audit("binding") if a.namespace == ns and a.code not in (201, 409)}
    assert set(names) - set(counts) <= cut_off, f"bound without a binding on record: {set(names) - set(counts) - cut_off}"
    assert set(counts) <= set(names)
    assert_no_node_overcommitted(api, ns, cpu_per_node, 1)
    assert second.metric("tidesched_pods_bound_total") == total - partial
    # A mass submission's Scheduled events are combined on the ReplicaSet, not one per pod.
    combined = wait_until(lambda: events(api, ns, "burst", "Scheduled"), 30, "a Scheduled event on the ReplicaSet")
    assert combined[0]["involvedObject"]["kind"] == "ReplicaSet"
    per_pod = [e for e in events(api, ns, reason="Scheduled") if e["involvedObject"]["kind"] == "Pod"]
    assert len(per_pod) < total // 5, f"{len(per_pod)} per-pod Scheduled events for {total} binds"
