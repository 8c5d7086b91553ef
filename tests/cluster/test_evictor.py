"""Evictor: Eviction API with PodDisruptionBudgets and 429 retries, or delete with a grace period."""

from __future__ import annotations

from builders import node, pod
from cluster_helpers import FAST_COMPONENTS, fake_api, informers, kube_for, wait
from tidesched.cluster.evictor import Evictor
from tidesched.cluster.status import EventRecorder
from tidesched.cluster.store import POD


def _evictor(api, store, **kw):
    rec = EventRecorder(kube_for(api), store, interval=60)
    rec.start()
    ev = Evictor(kube_for(api), store, rec, **{**FAST_COMPONENTS["evictor"], **kw})
    ev.start()
    return ev, rec


def _pdb(name: str, allowed: int, **labels: str) -> dict:
    return {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"selector": {"matchLabels": labels}},
        "status": {"disruptionsAllowed": allowed},
    }


def test_eviction_api_marks_releasing_until_the_watch_shows_deletion() -> None:
    with fake_api() as api:
        api.create_many([node("n1"), pod("v", node="n1", phase="Running")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            ev, rec = _evictor(api, store)
            assert ev.submit(["ns/v"], {"ns/v": "reclaimed"}) == 1
            assert ev.submit(["ns/v"], {}) == 0  # in flight: not evicted twice
            assert ev.drain(10)
            assert api.count("POST", r"/pods/v/eviction$", 201) == 1
            assert wait(lambda: "ns/v" not in store.releasing)
            assert store.get(POD, "ns/v")["metadata"].get("deletionTimestamp")  # graceful: kubelet's turn
            assert ev.submit(["ns/v"], {}) == 0  # already terminating
            ev.stop()
            rec.stop()


def test_429_is_retried_until_the_budget_allows() -> None:
    with fake_api() as api:
        api.create_many([node("n1"), pod("v", node="n1", phase="Running")])
        api.evict_429["ns/v"] = 2
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            ev, rec = _evictor(api, store)
            ev.submit(["ns/v"], {})
            assert ev.drain(10)
            assert api.count("POST", r"/pods/v/eviction$", 429) == 2
            assert api.count("POST", r"/pods/v/eviction$", 201) == 1 and ev.evicted == 1
            ev.stop()
            rec.stop()


def test_delete_mode_uses_grace_period_and_uid_precondition() -> None:
    with fake_api() as api:
        api.create_many(
            [node("n1"), pod("v", node="n1", phase="Running"), pod("w", node="n1", phase="Running")]
        )
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            ev, rec = _evictor(api, store, mode="delete", grace_period=0)
            ev.submit(["ns/v", "ns/w", "ns/gone"], {})
            assert ev.drain(10)
            assert api.count("DELETE", r"/pods/[vw]$", 200) == 2
            assert api.count("POST", r"/eviction$") == 0
            assert wait(lambda: store.get(POD, "ns/v") is None and store.get(POD, "ns/w") is None)
            ev.stop()
            rec.stop()


def test_nothing_is_evicted_once_sending_is_no_longer_allowed() -> None:
    with fake_api() as api:
        api.create_many([node("n1"), pod("v", node="n1", phase="Running")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            ev, rec = _evictor(api, store, may_send=lambda: False)  # the lease is already lost
            assert ev.submit(["ns/v"], {}) == 1 and ev.drain(10)
            assert ev.dropped == 1 and ev.evicted == 0 and "ns/v" not in store.releasing
            assert api.count("POST", r"/eviction$") == 0
            ev.stop()
            rec.stop()


def _conditions(api, key: str) -> dict[str, dict]:
    obj = api.get("Pod", key) or {}
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def test_victims_are_marked_as_disruption_targets_before_they_go() -> None:
    """As kube-scheduler and vc-scheduler v1.15.1 mark theirs; delete mode also Ready=False
    (vc-scheduler's DELETE), evict mode not (a budget may keep the pod serving)."""
    with fake_api() as api:
        api.create_many([node("n1"), pod("v", node="n1", phase="Running"), pod("w", node="n1", phase="Running")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            deleter, rec = _evictor(api, store, mode="delete", grace_period=30)
            deleter.submit(["ns/v"], {"ns/v": "preempt"})
            assert deleter.drain(10)
            evicter, rec2 = _evictor(api, store)
            evicter.submit(["ns/w"], {"ns/w": "reclaim"})
            assert evicter.drain(10)
            v, w = _conditions(api, "ns/v"), _conditions(api, "ns/w")
            for conds in (v, w):
                target = conds["DisruptionTarget"]
                assert (target["status"], target["reason"]) == ("True", "PreemptionByScheduler")
                assert target["message"] == "volcano: preempting to accommodate a higher priority pod"
                assert target["lastTransitionTime"]
            assert (v["Ready"]["status"], v["Ready"]["reason"]) == ("False", "Evict")
            assert v["Ready"]["message"] == "Pod is evicted, because of preempt"
            assert "Ready" not in w
            # Marked first, then deleted / evicted: the mark is there while the pod terminates.
            order = [(m, p) for m, p, _ in api.requests if "/pods/v" in p or "/pods/w" in p]
            assert order.index(("PATCH", "/api/v1/namespaces/ns/pods/v/status")) < order.index(
                ("DELETE", "/api/v1/namespaces/ns/pods/v"))
            assert api.get("Pod", "ns/v")["metadata"].get("deletionTimestamp")
            for c in (deleter, rec, evicter, rec2):
                c.stop()


def test_a_refused_mark_does_not_stop_the_eviction_and_a_gone_pod_ends_it() -> None:
    with fake_api() as api:
        api.create_many([node("n1"), pod("v", node="n1", phase="Running"), pod("x", node="n1", phase="Running")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            api.fail("PATCH", r"/pods/v/status$", 422)
            api.fail("PATCH", r"/pods/x/status$", 404)
            ev, rec = _evictor(api, store)
            ev.submit(["ns/v", "ns/x"], {})
            assert ev.drain(10)
            assert api.count("POST", r"/pods/v/eviction$", 201) == 1  # refused mark: evicted anyway
            assert api.count("POST", r"/pods/x/eviction$") == 0  # gone: nothing left to evict
            assert ev.failed == 0
            ev.stop()
            rec.stop()
