"""The clock, the world (snapshots, applying decisions, grace periods) and the incremental
metrics, tested on their own."""

from __future__ import annotations

from typing import Any

from builders import node, pod, podgroup, queue

from tidesched.framework.decisions import Decisions
from tidesched.model.status import TaskStatus
from tidesched.sim.clock import Clock
from tidesched.sim.metrics import Accounting, EventLog, mean, percentile
from tidesched.sim.world import PodGone, World, is_deleting, iso, sim_time, status


def test_clock_orders_by_time_then_insertion() -> None:
    c = Clock()
    c.schedule(5, "b")
    c.schedule(1, "a")
    c.schedule(5, "c")
    out = []
    for at, ev in c.pop_until(5):
        out.append((at, ev))
        if ev == "a":
            c.schedule(5, "d")  # scheduled while iterating, same instant as b and c: after them
    assert out == [(1, "a"), (5, "b"), (5, "c"), (5, "d")]
    c.schedule(2, "past")  # never backwards
    assert c.pop() == (5, "past") and c.now == 5
    assert c.peek_time() is None


def test_iso_round_trips() -> None:
    assert iso(0) == "2025-01-01T00:00:00Z"
    assert iso(90.5) == "2025-01-01T00:01:30.500000Z"
    assert sim_time(iso(12345.25)) == 12345.25


def make_world(grace: float = 30.0) -> World:
    w = World(Clock(), eviction_grace=grace, deletion_grace=grace)
    w.put(
        "Node",
        node(
            "n1",
            cpu="8",
            memory="32Gi",
            nvidia_com__gpu="8",
            labels={"nvidia.com/gpu.product": "NVIDIA-H200"},
        ),
    )
    w.put("Queue", queue("q", capability={"cpu": "4"}))
    w.put("PodGroup", podgroup("pg", 1, queue="q"))
    return w


def test_snapshot_reuses_parsed_records_until_an_object_changes() -> None:
    w = make_world()
    w.put("Pod", pod("a", "pg", extra_requests={"nvidia.com/gpu": "2"}))
    s1, s2 = w.snapshot(), w.snapshot()
    assert s1.pods[0] is s2.pods[0] and s1.nodes[0] is s2.nodes[0]
    assert [q.name for q in s1.queues] == ["q", "default"]  # Volcano's default queue is always there
    assert w.bind_pod("ns/a", "n1", 10.0)
    s3 = w.snapshot()
    assert s3.pods[0] is not s1.pods[0]
    assert s3.pods[0].node_name == "n1" and s3.pods[0].status == TaskStatus.RUNNING


def test_malformed_objects_become_warnings_not_errors() -> None:
    w = make_world()
    bad = pod("bad", "pg")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    w.put("Pod", bad)
    snap = w.snapshot()
    assert (
        snap.pods == [] and snap.problems[0].reason == "InvalidObject" and "cpu" in snap.problems[0].message
    )


def test_pdbs_pass_through_into_the_snapshot() -> None:
    w = make_world()
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "shop"},
           "spec": {"selector": {"matchLabels": {"app": "db"}}}, "status": {"disruptionsAllowed": 1}}
    w.put("PodDisruptionBudget", pdb)
    assert w.get("PodDisruptionBudget", "shop/db") is pdb
    assert [(p.key, p.disruptions_allowed) for p in w.snapshot().pdbs] == [("shop/db", 1)]
    w.put("PodDisruptionBudget", {**pdb, "status": {"disruptionsAllowed": 0}})  # re-applied: replaced
    assert [p.disruptions_allowed for p in w.snapshot().pdbs] == [0]
    bad = {**pdb, "metadata": {"name": "bad", "namespace": "shop"}, "status": {"disruptionsAllowed": "x"}}
    w.put("PodDisruptionBudget", bad)
    snap = w.snapshot()
    assert [p.key for p in snap.pdbs] == ["shop/db"]
    assert [(e.kind, e.namespace, e.name, e.reason) for e in snap.problems] == [
        ("PodDisruptionBudget", "shop", "bad", "InvalidObject")
    ]
    w.remove("PodDisruptionBudget", "shop/db")
    w.remove("PodDisruptionBudget", "shop/bad")
    assert w.snapshot().pdbs == []


def test_eviction_holds_resources_for_the_grace_period() -> None:
    w = make_world(grace=30)
    w.put("Pod", pod("a", "pg"))
    w.bind_pod("ns/a", "n1", 0.0)
    w.clock.advance(100)
    d = Decisions(
        bound={},
        pipelined={},
        evicted=["ns/a"],
        podgroups={},
        podgroup_conditions={},
        queue_allocated={},
        events=[],
        eviction_reasons={"ns/a": "reclaim"},
    )
    applied = w.apply(d, 100.0)
    assert applied.evicted == [("ns/a", "reclaim")]
    p = w.get("Pod", "ns/a")
    assert p is not None and is_deleting(p)
    assert w.snapshot().pods[0].status == TaskStatus.RELEASING
    (at, gone) = w.clock.pop()
    assert at == 130 and isinstance(gone, PodGone) and gone.cause == "evict"
    # a pod of the same name created meanwhile is not the one whose grace ended
    assert not w.pod_gone(PodGone("ns/a", "another-uid", "evict"))
    assert w.pod_gone(gone) and w.get("Pod", "ns/a") is None


def test_stale_decisions_are_not_applied() -> None:
    w = make_world()
    w.put("Pod", pod("a", "pg"))
    d = Decisions(
        bound={"ns/a": "n1", "ns/ghost": "n1"},
        pipelined={},
        evicted=["ns/nobody"],
        podgroups={},
        podgroup_conditions={},
        queue_allocated={},
        events=[],
    )
    applied = w.apply(d, 0.0)
    assert applied.bound == [("ns/a", "n1")] and sorted(applied.stale) == ["ns/ghost", "ns/nobody"]


def test_nominated_node_is_written_on_a_pending_pod_only() -> None:
    w = make_world()
    w.put("Pod", pod("a", "pg"))
    w.put("Pod", pod("b", "pg"))
    w.bind_pod("ns/b", "n1", 0.0)
    d = Decisions(bound={}, pipelined={"ns/a": "n1"}, evicted=[], podgroups={}, podgroup_conditions={},
                  queue_allocated={}, events=[], nominated={"ns/a": "n1", "ns/b": "n1"})
    w.apply(d, 1.0)
    assert status(w.get("Pod", "ns/a")).get("nominatedNodeName") == "n1"
    assert "nominatedNodeName" not in status(w.get("Pod", "ns/b"))
    assert {p.key: p.nominated_node for p in w.snapshot().pods} == {"ns/a": "n1", "ns/b": ""}


def test_podgroup_status_written_only_when_its_content_changes() -> None:
    w = make_world()
    cond = {
        "type": "Unschedulable",
        "status": "True",
        "transitionID": "s1",
        "reason": "NotEnoughResources",
        "message": "m",
    }

    def decide(phase: str, tid: str, message: str = "m") -> Decisions:
        return Decisions(
            bound={},
            pipelined={},
            evicted=[],
            podgroups={"ns/pg": phase},
            podgroup_conditions={"ns/pg": [dict(cond, transitionID=tid, message=message)]},
            queue_allocated={},
            events=[],
        )

    w.apply(decide("Inqueue", "s1"), 1.0)
    pg = w.get("PodGroup", "ns/pg")
    assert pg is not None and status(pg)["phase"] == "Inqueue"
    assert status(pg)["conditions"][0]["lastTransitionTime"] == iso(1.0)
    rev = w.revision
    w.apply(decide("Inqueue", "s2"), 2.0)  # a new session id only: nothing changes
    assert w.revision == rev
    w.apply(decide("Inqueue", "s3", "other"), 3.0)
    assert w.revision == rev + 1
    w.apply(decide("Inqueue", "s4", "other"), 4.0)  # settled: the same again changes nothing
    assert w.revision == rev + 1
    # Someone else rewrites the PodGroup: the same decision must be applied to the new object.
    pg = w.get("PodGroup", "ns/pg")
    w.put("PodGroup", dict(pg, status={"phase": "Pending"}))
    w.apply(decide("Inqueue", "s5", "other"), 5.0)
    pg = w.get("PodGroup", "ns/pg")
    assert status(pg)["phase"] == "Inqueue"
    assert status(pg)["conditions"][0]["lastTransitionTime"] == iso(5.0)


def test_metrics_follow_pods_cards_and_quota_view() -> None:
    w = World(Clock())
    acc = Accounting(w)
    w.put(
        "Node",
        node(
            "mig",
            cpu="64",
            memory="256Gi",
            nvidia_com__gpu="7",
            **{"nvidia_com__mig-1g_18gb": "3"},
            labels={"nvidia.com/gpu.product": "NVIDIA-H200"},
        ),
    )
    w.put("Queue", queue("q", capability={"cpu": "10", "memory": "64Gi"}))
    w.objects["Queue"]["q"]["metadata"]["annotations"] = {"volcano.sh/card.quota": '{"NVIDIA-H200": 4}'}
    w.put("PodGroup", podgroup("pg", 1, queue="q"))
    w.put("Pod", pod("a", "pg", cpu="2", memory="4Gi", extra_requests={"nvidia.com/gpu": "2"}))
    w.put("Pod", pod("b", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/mig-1g.18gb": "1"}))
    step = acc.step(0)
    assert step["cards"] == {
        "NVIDIA-H200": {"capacity": 7, "allocated": 0},
        "NVIDIA-H200/mig-1g.18gb-mixed": {"capacity": 3, "allocated": 0},
    }
    assert step["queues"]["q"]["pending_pods"] == 2 and step["pending_pods"] == 2
    w.bind_pod("ns/a", "mig", 1)
    w.bind_pod("ns/b", "mig", 1)
    q = acc.step(1)["queues"]["q"]
    assert q["allocated"] == {
        "cpu": 3.0,
        "memory": 5.0,
        "NVIDIA-H200": 2.0,
        "NVIDIA-H200/mig-1g.18gb-mixed": 1.0,
    }
    assert q["quota"] == {"NVIDIA-H200": 4.0, "cpu": 10.0, "memory": 64.0}
    assert q["running_pods"] == 2
    w.delete_pod("ns/a", 2, "evict", 30)
    step = acc.step(2)
    # being deleted: still holds its cards on the node, no longer charged to the queue (DEC-1)
    assert step["cards"]["NVIDIA-H200"]["allocated"] == 2
    assert step["queues"]["q"]["allocated"]["NVIDIA-H200"] == 0.0 and step["running_pods"] == 1
    w.set_node("mig", allocatable={"nvidia.com/gpu": "5", "nvidia.com/mig-1g.18gb": "17"})
    assert acc.step(3)["cards"]["NVIDIA-H200/mig-1g.18gb-mixed"]["capacity"] == 17
    w.remove_node("mig")
    step = acc.step(4)
    assert step["cards"] == {} and step["running_pods"] == 0 and acc.contrib == {}


def test_event_log_drops_repeats_until_the_object_is_gone() -> None:
    log = EventLog(cap=3)
    for t in range(5):
        log.add(t, "Pod", "ns", "a", "Warning", "FailedScheduling", "no nodes")
    assert len(log.kept) == 1
    log.add(5, "Pod", "ns", "a", "Warning", "FailedScheduling", "other reason")
    log.on_change("Pod", "ns/a", {"x": 1}, None, "evict")
    log.add(6, "Pod", "ns", "a", "Warning", "FailedScheduling", "other reason")
    log.add(7, "Pod", "ns", "b", "Normal", "Scheduled", "x")
    log.add(8, "Pod", "ns", "c", "Normal", "Evict", "reclaim: evicted")  # beyond the cap but kept
    assert [e["t"] for e in log.kept] == [0, 5, 6, 8.0] and log.dropped == 1 and log.total == 5


def test_percentiles_are_nearest_rank() -> None:
    vals: list[Any] = [10.0, 1.0, 5.0, 3.0]
    assert percentile(vals, 95) == 10.0 and percentile(vals, 50) == 3.0 and percentile([], 95) is None
    assert mean(vals) == 4.75 and mean([]) is None
