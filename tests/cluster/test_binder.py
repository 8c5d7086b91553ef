"""Binder: pods/binding under the QPS limit, assume until confirmed, forget on failure (K8S-2)."""

from __future__ import annotations

import threading
import time

from builders import node, pod
from cluster_helpers import FAST_COMPONENTS, bound_nodes, fake_api, informers, kube_for, wait
from tidesched.cluster.api import Kube, TokenBucket
from tidesched.cluster.binder import Binder
from tidesched.cluster.status import EventRecorder
from tidesched.cluster.store import POD, ClusterStore


def _binder(api, store, qps: float = 0.0, burst: int = 1, **kw):
    kube = kube_for(api, qps, burst)
    rec = EventRecorder(kube_for(api), store, interval=60)
    rec.start()
    b = Binder(kube, store, rec, workers=kw.pop("workers", 4), **{**FAST_COMPONENTS["binder"], **kw})
    b.start()
    return b, rec


def test_binds_are_assumed_then_confirmed_by_the_watch() -> None:
    with fake_api() as api:
        api.create_many([node("n1"), node("n2")] + [pod(f"p{i}") for i in range(6)])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            b, rec = _binder(api, store)
            binds = {f"ns/p{i}": f"n{i % 2 + 1}" for i in range(6)}
            assert b.submit(binds) == 6
            assert b.drain(10)
            assert all(api.binds[k] == 1 for k in binds)
            assert {k: v for k, v in bound_nodes(api).items() if k in binds} == binds
            # The watch brought the bound pods back: no assumption left, the cache is the API's truth.
            assert wait(lambda: not store.assumed)
            assert rec.flush(10)
            scheduled = [e for e in api.list("Event") if e["reason"] == "Scheduled"]
            assert len(scheduled) == 6 and scheduled[0]["source"]["component"] == "tidesched"
            b.stop()
            rec.stop()


def test_binding_carries_the_annotations_and_the_cache_sees_them_at_once() -> None:
    # vGPU devices go out with the binding (Volcano's deviceshare): the assumed pod shows them
    # while the call is in flight, and the API server writes them with the node.
    ann = {"volcano.sh/vgpu-ids-new": "GPU-0,NVIDIA,1000,30:", "volcano.sh/bind-phase": "allocating"}
    with fake_api() as api:
        api.create_many([node("n1"), pod("a"), pod("b")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            b, rec = _binder(api, store)
            api.fail("POST", r"/pods/a/binding$", 503, times=1)  # keeps the first call in flight a moment
            assert b.submit({"ns/a": "n1", "ns/b": "n1"}, {"ns/a": ann}) == 2
            seen = {k: o for kind, k, o in store.take_changes() if kind == POD}
            assert seen["ns/a"]["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"] == "GPU-0,NVIDIA,1000,30:"
            assert "volcano.sh/vgpu-ids-new" not in (seen["ns/b"]["metadata"].get("annotations") or {})
            assert b.drain(10)
            assert wait(lambda: not store.assumed)
            got = store.get(POD, "ns/a")
            assert got["spec"]["nodeName"] == "n1" and {k: got["metadata"]["annotations"][k] for k in ann} == ann
            b.stop()
            rec.stop()


def test_submitting_again_while_in_flight_does_not_bind_twice() -> None:
    with fake_api() as api:
        api.create_many([node("n1"), pod("a")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            b, rec = _binder(api, store)
            assert b.submit({"ns/a": "n1"}) == 1
            assert b.submit({"ns/a": "n1"}) == 0  # still assumed
            assert b.drain(10)
            assert wait(lambda: store.get(POD, "ns/a")["spec"].get("nodeName") == "n1")
            assert b.submit({"ns/a": "n1"}) == 0  # already bound
            assert api.count("POST", r"/binding$") == 1
            b.stop()
            rec.stop()


def test_conflict_forgets_the_pod_and_writes_an_event() -> None:
    with fake_api() as api:
        api.create_many([node("n1"), node("n2"), pod("a")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            # Someone else binds the pod between our decision and our call.
            api.fail("POST", r"/pods/a/binding$", 409, times=1)
            b, rec = _binder(api, store)
            b.submit({"ns/a": "n1"})
            assert b.drain(10)
            assert b.failed == 1 and not store.is_assumed("ns/a")
            assert rec.flush(10)
            ev = [e for e in api.list("Event") if e["reason"] == "FailedScheduling"]
            assert ev and "Binding rejected" in ev[0]["message"] and ev[0]["type"] == "Warning"
            b.stop()
            rec.stop()


def test_5xx_is_retried_and_a_lost_reply_is_recognised() -> None:
    with fake_api() as api:
        api.create_many([node("n1"), pod("a"), pod("b")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            api.fail("POST", r"/pods/a/binding$", 503, times=2)
            # b's binding is carried out but the reply is lost; the retry meets 409 "already
            # assigned" and reads the pod: bound to our node, so it is a success.
            api.fail("POST", r"/pods/b/binding$", 0, times=1, after=True)
            b, rec = _binder(api, store)
            b.submit({"ns/a": "n1", "ns/b": "n1"})
            assert b.drain(10)
            assert b.bound == 2 and b.failed == 0
            assert api.binds["ns/a"] == 1 and api.binds["ns/b"] == 1
            b.stop()
            rec.stop()


def test_binding_a_recreated_pod_is_refused_by_uid() -> None:
    with fake_api() as api:
        api.create_many([node("n1"), pod("a")])
        stale = api.get("Pod", "ns/a")
        api.delete("Pod", "ns/a")
        api.create(pod("a"))  # same name, new UID; the cache below still has the old pod
        store = ClusterStore()
        store.replace(POD, {"ns/a": stale})
        b, rec = _binder(api, store, workers=1)
        b.submit({"ns/a": "n1"})
        assert b.drain(10)
        assert api.binds["ns/a"] == 0 and b.failed == 1 and not store.is_assumed("ns/a")
        b.stop()
        rec.stop()


def test_nothing_is_sent_once_sending_is_no_longer_allowed() -> None:
    """The runner's gate (``may_send`` = "do we still lead?") is asked right before each call:
    a bind queued just before the lease was lost is dropped unsent and its pod forgotten."""
    with fake_api() as api:
        api.create_many([node("n1"), pod("a"), pod("b")])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            leading = threading.Event()
            leading.set()
            b, rec = _binder(api, store, may_send=leading.is_set)
            assert b.submit({"ns/a": "n1"}) == 1 and b.drain(10) and b.bound == 1
            leading.clear()  # lease lost
            assert b.submit({"ns/b": "n1"}) == 1 and b.drain(10)
            assert b.dropped == 1 and b.bound == 1 and b.failed == 0
            assert api.count("POST", r"/pods/b/binding$") == 0 and not store.is_assumed("ns/b")
            b.stop()
            rec.stop()


def test_binds_respect_the_qps_limit() -> None:
    """Every binding call reserves a token first; at 20/s with a burst of 1 the bucket spaces ten
    calls 50 ms apart. The bucket's clock is frozen, so the reserved delays are exact; the
    calls are held back by them (the tenth cannot go before 9 × 50 ms)."""
    with fake_api() as api:
        api.create_many([node("n1")] + [pod(f"p{i}") for i in range(10)])
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            bucket = TokenBucket(20, 1, clock=lambda: 1000.0)
            delays: list[float] = []
            reserve = bucket.reserve
            bucket.reserve = lambda: delays.append(reserve()) or delays[-1]  # type: ignore[method-assign]
            b, rec = _binder(api, store, workers=8)
            b.kube = Kube(b.kube.conn, bucket, b.kube.request_timeout)
            t0 = time.monotonic()
            b.submit({f"ns/p{i}": "n1" for i in range(10)})
            assert b.drain(10)
            assert time.monotonic() - t0 >= 0.45
            assert b.bound == 10 and api.count("POST", r"/binding$") == 10 == bucket.acquired
            # The first call uses the burst; the k-th further one waits k × 50 ms for its token.
            assert sorted(round(w, 6) for w in delays) == [0.0] + [round(0.05 * k, 6) for k in range(1, 10)]
            b.stop()
            rec.stop()


def test_token_bucket_refills_at_qps_up_to_burst() -> None:
    now = [0.0]
    waits: list[float] = []
    bucket = TokenBucket(10, 3, clock=lambda: now[0], sleep=waits.append)
    for _ in range(3):
        bucket.acquire()  # the burst
    assert waits == []
    bucket.acquire()
    assert waits == [0.1]  # one token owed: due in 1/qps
    now[0] += 10.0  # a long pause refills to the burst, not beyond
    for _ in range(3):
        bucket.acquire()
    assert waits == [0.1]
    bucket.acquire()
    assert len(waits) == 2 and abs(waits[1] - 0.1) < 1e-9
    unlimited = TokenBucket(0, 1, clock=lambda: 0.0, sleep=waits.append)
    for _ in range(100):
        unlimited.acquire()
    assert len(waits) == 2
