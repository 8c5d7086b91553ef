"""Status writes (status subresource, 409 retries, PodScheduled) and aggregated Events."""

from __future__ import annotations

import time

from builders import node, pod, podgroup, queue
from cluster_helpers import ManualClock, fake_api, informers, kube_for, wait
from tidesched.framework.decisions import Decisions
from tidesched.cluster.status import EventRecorder, StatusBatch, StatusWriter
from tidesched.cluster.store import PODGROUP, QUEUE, ClusterStore
from tidesched.model.problems import Event


def _decisions(**kw) -> Decisions:
    base = dict(
        bound={},
        pipelined={},
        evicted=[],
        podgroups={},
        podgroup_conditions={},
        queue_allocated={},
        events=[],
    )
    base.update(kw)
    return Decisions(**base)


UNSCHED = {
    "type": "Unschedulable",
    "status": "True",
    "transitionID": "s1",
    "reason": "NotEnoughResources",
    "message": "1/2 tasks in gang unschedulable",
}


def test_podgroup_status_written_once_and_only_on_change() -> None:
    with fake_api() as api:
        api.create_many(
            [
                node("n1"),
                podgroup("pg", 2, phase="Pending"),
                pod("a", "pg", node="n1", phase="Running"),
                pod("b", "pg"),
            ]
        )
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            w = StatusWriter(kube_for(api), store)
            d = _decisions(podgroups={"ns/pg": "Inqueue"}, podgroup_conditions={"ns/pg": [UNSCHED]})
            w.write(StatusBatch(d, {}))
            st = api.get("PodGroup", "ns/pg")["status"]
            assert st["phase"] == "Inqueue" and st["running"] == 1
            assert (
                st["conditions"][0]["reason"] == "NotEnoughResources"
                and st["conditions"][0]["lastTransitionTime"]
            )
            # The next session says the same (new transition id): nothing to write — even before
            # the watch has brought our own write back.
            d2 = _decisions(
                podgroups={"ns/pg": "Inqueue"},
                podgroup_conditions={"ns/pg": [{**UNSCHED, "transitionID": "s2"}]},
            )
            w.write(StatusBatch(d2, {}))
            assert wait(lambda: store.get(PODGROUP, "ns/pg")["status"].get("phase") == "Inqueue")
            w.write(StatusBatch(d2, {}))
            # Volcano's PodGroup CRD has no status subresource: one probe (404), then whole-object PUTs.
            assert api.count("PUT", r"/podgroups/pg/status$", 404) == 1
            assert api.count("PUT", r"/podgroups/pg$", 200) == 1
            assert w.writes == 1


def test_status_subresource_is_used_when_the_crd_has_one() -> None:
    with fake_api(status_subresources=("queues", "podgroups")) as api:
        api.create(podgroup("pg", 1, phase="Pending"))
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            w = StatusWriter(kube_for(api), store)
            w.write(StatusBatch(_decisions(podgroups={"ns/pg": "Inqueue"}), {}))
            assert api.count("PUT", r"/podgroups/pg/status$", 200) == 1
            assert api.count("PUT", r"/podgroups/pg$") == 0
            assert api.get("PodGroup", "ns/pg")["status"]["phase"] == "Inqueue"


def test_conflict_rereads_and_retries() -> None:
    with fake_api() as api:
        api.create_many([podgroup("pg", 1, phase="Pending"), queue("q")])
        stale = ClusterStore()
        stale.replace(PODGROUP, {"ns/pg": api.get("PodGroup", "ns/pg")})
        stale.replace(QUEUE, {"q": api.get("Queue", "q")})
        # Another writer (Volcano's queue controller, say) changes both after our cache saw them.
        api.update("PodGroup", "ns/pg", lambda o: o["status"].__setitem__("running", 0))
        api.update("Queue", "q", lambda o: o.setdefault("status", {}).__setitem__("state", "Open"))
        w = StatusWriter(kube_for(api), stale)
        w.write(
            StatusBatch(
                _decisions(
                    podgroups={"ns/pg": "Running"}, queue_allocated={"q": {"cpu": "2", "memory": "4Gi"}}
                ),
                {"q": {"NVIDIA-H200": "3"}},
            )
        )
        assert w.conflicts == 1 and w.writes == 2  # the queue's; the PodGroup was re-read after the 404 probe
        assert api.get("PodGroup", "ns/pg")["status"]["phase"] == "Running"
        q = api.get("Queue", "q")["status"]
        assert q["state"] == "Open"  # the other writer's field survives
        assert q["allocated"] == {"cpu": "2", "memory": "4Gi", "NVIDIA-H200": "3"}


def test_injected_409_is_retried() -> None:
    with fake_api(status_subresources=("queues", "podgroups")) as api:
        api.create(podgroup("pg", 1, phase="Pending"))
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            api.fail("PUT", r"/podgroups/pg/status$", 409, times=2)
            w = StatusWriter(kube_for(api), store)
            w.write(StatusBatch(_decisions(podgroups={"ns/pg": "Inqueue"}), {}))
            assert w.conflicts == 2 and w.writes == 1
            assert api.get("PodGroup", "ns/pg")["status"]["phase"] == "Inqueue"


def test_pending_pod_gets_podscheduled_false_once() -> None:
    with fake_api() as api:
        api.create_many([node("n1"), pod("p", "pg")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            w = StatusWriter(kube_for(api), store)
            msg = "0/1 nodes are unavailable: 1 Insufficient cpu."
            d = _decisions(events=[Event("Pod", "ns", "p", "Warning", "FailedScheduling", msg)])
            w.write(StatusBatch(d, {}))
            w.write(StatusBatch(d, {}))  # before the watch caught up
            cond = api.get("Pod", "ns/p")["status"]["conditions"][0]
            assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
                "PodScheduled",
                "False",
                "Unschedulable",
                msg,
            )
            assert wait(lambda: store.get("Pod", "ns/p")["status"].get("conditions"))
            w.write(StatusBatch(d, {}))
            assert api.count("PATCH", r"/pods/p/status$") == 1


def test_writer_thread_keeps_only_the_latest_batch() -> None:
    with fake_api() as api:
        api.create(podgroup("pg", 1, phase="Pending"))
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            w = StatusWriter(kube_for(api), store)
            w.start()
            for phase in ("Inqueue", "Running", "Running", "Running"):
                w.submit(StatusBatch(_decisions(podgroups={"ns/pg": phase}), {}))
            assert w.flush(10)
            assert api.get("PodGroup", "ns/pg")["status"]["phase"] == "Running"
            assert api.count("PUT", r"/podgroups/pg/status$") <= 2
            w.stop()


def test_events_are_aggregated_per_object_and_reason() -> None:
    with fake_api() as api:
        api.create_many([pod("p"), queue("q"), podgroup("pg")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            clock = ManualClock()  # the aggregation interval passes only when the test says so
            rec = EventRecorder(kube_for(api), store, interval=60.0, clock=clock)
            rec.start()
            rec.record("Pod", "ns", "p", "Warning", "FailedScheduling", "0/1 nodes are unavailable (0)")
            rec.record("Queue", "", "q", "Warning", "QuotaExceeded", "queue q is full")
            rec.record("PodGroup", "ns", "pg", "Warning", "Unschedulable", "gang")
            rec.record("PodGroup", "ns", "podgroup-synthesised", "Warning", "Unschedulable", "no such object")
            assert rec.flush(10)
            evs = {e["involvedObject"]["name"]: e for e in api.list("Event")}
            assert set(evs) == {"p", "q", "pg"}  # no Event for an object the API server lacks
            assert evs["p"]["count"] == 1 and api.count("POST", r"/events$") == 3
            assert evs["q"]["metadata"]["namespace"] == "default"  # cluster-scoped object
            # Four more sessions say the pod is still pending: counted, nothing written.
            for i in range(1, 5):
                clock.advance(10.0)
                rec.record(
                    "Pod", "ns", "p", "Warning", "FailedScheduling", f"0/1 nodes are unavailable ({i})"
                )
            assert rec.flush(10)
            assert api.count("POST", r"/events$") == 3 and api.count("PATCH", r"/events/") == 0
            # The interval has passed: the next repeat rewrites the one Event with the count.
            clock.advance(20.0)
            rec.record("Pod", "ns", "p", "Warning", "FailedScheduling", "0/1 nodes are unavailable (5)")
            assert rec.flush(10)
            e = api.get("Event", f"ns/{evs['p']['metadata']['name']}")
            assert e["count"] == 6 and e["message"].endswith("(5)")
            assert api.count("PATCH", r"/events/") == 1 and api.count("POST", r"/events$") == 3
            assert len(api.list("Event")) == 3
            rec.stop()


def test_events_recorded_before_the_writer_runs_go_out_as_one() -> None:
    with fake_api() as api:
        api.create(pod("p"))
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            rec = EventRecorder(kube_for(api), store, interval=60.0, clock=ManualClock())
            for i in range(5):  # the writer thread has not started: all five are pending
                rec.record("Pod", "ns", "p", "Warning", "FailedScheduling", f"pending ({i})")
            rec.start()
            assert rec.flush(10)
            (e,) = api.list("Event")
            assert e["count"] == 5 and e["message"] == "pending (4)"
            assert api.count("POST", r"/events$") == 1
            rec.stop()


def test_scheduled_events_of_a_mass_submission_are_combined_per_owner() -> None:
    def owned(name: str, kind: str, owner: str) -> dict:
        p = pod(name)
        p["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": f"uid-{owner}", "controller": True}
        ]
        return p

    with fake_api() as api:
        api.create_many(
            [owned(f"web-{i}", "ReplicaSet", "web") for i in range(12)]
            + [owned(f"db-{i}", "StatefulSet", "db") for i in range(2)]
            + [pod("bare")]
            + [pod(f"solo-{i}") for i in range(11)]
        )
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            rec = EventRecorder(kube_for(api), store, batch_interval=60.0, similar_limit=10)
            rec.start()
            for i in range(12):
                rec.record_scheduled(f"ns/web-{i}", f"n{i % 3}")
            for key in ("ns/db-0", "ns/db-1", "ns/bare"):
                rec.record_scheduled(key, "n1")
            assert rec.flush(10)
            assert len(api.list("Event")) == 4
            # Eleven pods without an owner in one window: combined on the last of them.
            for i in range(11):
                rec.record_scheduled(f"ns/solo-{i}", "n2")
            assert rec.flush(10)
            solo = [e for e in api.list("Event") if e["involvedObject"]["name"].startswith("solo-")]
            assert len(solo) == 1 and solo[0]["involvedObject"]["name"] == "solo-9"  # sorted by name
            assert solo[0]["message"].startswith("(combined from similar events): Successfully assigned 11 pods")
            evs = api.list("Event")
            by_object = {(e["involvedObject"]["kind"], e["involvedObject"]["name"]): e for e in evs}
            # Twelve pods of one ReplicaSet: one event on the ReplicaSet, none on its pods.
            rs = by_object[("ReplicaSet", "web")]
            assert rs["reason"] == "Scheduled" and rs["involvedObject"]["uid"] == "uid-web"
            assert rs["message"].startswith("Successfully assigned 12 pods to 3 nodes: web-0 → n0")
            assert not any(name.startswith("web-") for _, name in by_object)
            # Two of a StatefulSet and a bare pod stay below the limit: one event per pod.
            assert {("Pod", "db-0"), ("Pod", "db-1"), ("Pod", "bare")} <= set(by_object)
            assert by_object[("Pod", "bare")]["message"] == "Successfully assigned ns/bare to n1"
            rec.stop()


def test_enqueue_writes_tell_the_store_whether_they_went_through() -> None:
    """The writer shortens a held enqueue to its TTL when the write went through, and drops it
    when the write failed or the session put the group back to Pending."""
    with fake_api() as api:
        api.create_many([podgroup("ok", 1, phase="Pending"), podgroup("bad", 1, phase="Pending"),
                         podgroup("back", 1, phase="Pending")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            store.assume_enqueued(["ns/ok", "ns/bad", "ns/back"], hold=600.0)
            api.fail("PUT", r"/podgroups/bad", 500, times=10**6)
            w = StatusWriter(kube_for(api), store, enqueue_ttl=30.0)
            w.write(StatusBatch(_decisions(podgroups={"ns/ok": "Inqueue", "ns/bad": "Inqueue", "ns/back": "Pending"}), {}))
            assert api.get("PodGroup", "ns/ok")["status"]["phase"] == "Inqueue"
            assert w.errors == 1
            held = dict(store.enqueued)
            assert "ns/bad" not in held and "ns/back" not in held
            # ns/ok: held for the TTL at most (or already confirmed by the watch)
            assert "ns/ok" not in held or held["ns/ok"] <= time.monotonic() + 30.0
            assert store.has_work()  # ns/bad and ns/back wait for a session


def test_pipelined_pod_gets_its_nominated_node_once() -> None:
    with fake_api() as api:
        api.create_many([node("n1"), pod("p", "pg"), pod("bound", "pg", node="n1")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            w = StatusWriter(kube_for(api), store)
            d = _decisions(nominated={"ns/p": "n1", "ns/bound": "n1"})
            w.write(StatusBatch(d, {}))
            w.write(StatusBatch(d, {}))  # before the watch caught up
            assert api.get("Pod", "ns/p")["status"]["nominatedNodeName"] == "n1"
            assert wait(lambda: store.get("Pod", "ns/p")["status"].get("nominatedNodeName"))
            w.write(StatusBatch(d, {}))
            assert api.count("PATCH", r"/pods/p/status$") == 1
            assert api.count("PATCH", r"/pods/bound/status$") == 0  # a bound pod is left alone


def test_reporting_writes_wait_for_the_binds_and_a_controllers_gate_does_not() -> None:
    """While binds are in flight, a PodGroup whose pods all exist is written only once they are
    done (or the wait runs out); one still missing pods (its Job controller waits for Inqueue to
    make them) is written at once."""
    with fake_api() as api:
        api.create_many(
            [
                node("n1"),
                podgroup("whole", 1, phase="Pending"),
                pod("w-0", "whole"),
                podgroup("job", 2, phase="Pending"),  # no pods yet
            ]
        )
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            in_flight = [1]
            w = StatusWriter(kube_for(api), store, binds_in_flight=lambda: in_flight[0], yield_to_binds=30)
            w.start()
            try:
                w.submit(StatusBatch(_decisions(podgroups={"ns/whole": "Inqueue", "ns/job": "Inqueue"}), {}))
                assert wait(lambda: (api.get("PodGroup", "ns/job").get("status") or {}).get("phase") == "Inqueue")
                time.sleep(0.3)
                assert (api.get("PodGroup", "ns/whole").get("status") or {}).get("phase") == "Pending"
                in_flight[0] = 0
                assert wait(lambda: api.get("PodGroup", "ns/whole")["status"]["phase"] == "Inqueue")
            finally:
                w.stop()


def test_a_write_waits_for_the_binds_no_longer_than_its_limit_and_newer_decisions_replace_it() -> None:
    with fake_api() as api:
        api.create_many([node("n1"), podgroup("pg", 1, phase="Pending"), pod("p-0", "pg")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            w = StatusWriter(kube_for(api), store, binds_in_flight=lambda: 1, yield_to_binds=1.0)
            w.start()
            try:
                t0 = time.monotonic()
                w.submit(StatusBatch(_decisions(podgroups={"ns/pg": "Inqueue"}), {}))
                time.sleep(0.3)
                # A newer session's verdict replaces the waiting one; the limit still counts
                # from the first wait, so binds that never end cannot hold it back for ever.
                w.submit(StatusBatch(_decisions(podgroups={"ns/pg": "Running"}), {}))
                assert wait(lambda: (api.get("PodGroup", "ns/pg").get("status") or {}).get("phase") == "Running")
                assert 0.9 < time.monotonic() - t0 < 5
                assert api.count("PUT", r"/podgroups/pg$", 200) == 1  # Inqueue was never written
            finally:
                w.stop()
