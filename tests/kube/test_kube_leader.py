"""Leader election on a coordination.k8s.io/v1 Lease (K8S-3)."""

from __future__ import annotations

import threading

from builders import node, pod, queue
from kube_helpers import fake_api, kube_for, make_runner, wait
from tidesched.kube.leader import LeaderElector

FAST = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.1}


def _elector(api, ident: str, **kw) -> LeaderElector:
    return LeaderElector(kube_for(api), "volcano-system", "vc-scheduler", identity=ident, **{**FAST, **kw})


def test_one_leader_and_a_fast_handover_on_release() -> None:
    with fake_api() as api:
        a, b = _elector(api, "a"), _elector(api, "b")
        a.start()
        assert wait(a.is_leader, 3)
        b.start()
        assert not wait(b.is_leader, 0.5)  # a renews: b must wait
        lease = api.get("Lease", "volcano-system/vc-scheduler")
        assert lease["spec"]["holderIdentity"] == "a" and lease["spec"]["leaseDurationSeconds"] == 1
        assert a.release()  # SIGTERM
        assert wait(b.is_leader, 2)
        assert api.get("Lease", "volcano-system/vc-scheduler")["spec"]["holderIdentity"] == "b"
        assert api.get("Lease", "volcano-system/vc-scheduler")["spec"]["leaseTransitions"] == 1
        b.release()
        a.stop()
        b.stop()


def test_expired_lease_of_a_dead_holder_is_taken_over() -> None:
    with fake_api() as api:
        dead = _elector(api, "dead")
        assert dead._try_acquire_or_renew()  # acquired once, then the process died
        b = _elector(api, "b")
        b.start()
        assert not wait(b.is_leader, 0.5)
        assert wait(b.is_leader, 3)  # ≈ lease_duration after b first saw the record
        b.release()
        b.stop()


def test_losing_the_lease_stops_at_once() -> None:
    with fake_api() as api:
        lost = threading.Event()
        a = _elector(api, "a", on_stopped=lost.set)
        a.start()
        assert wait(a.is_leader, 3)
        api.fail("PUT", r"/leases/vc-scheduler$", 500, times=10**6)  # the API server stops renewing us
        assert lost.wait(2.0)
        assert not a.is_leader() and a.lost.is_set()
        a.stop()


def test_only_the_leader_schedules_and_a_lost_runner_exits_1(tmp_path) -> None:
    with fake_api() as api:
        api.create_many([node("n1", cpu="8"), queue("default")] + [pod(f"p{i}") for i in range(3)])
        # Someone else holds a live lease: our runner syncs but must not schedule.
        other = _elector(api, "other", lease_duration=30.0, renew_deadline=20.0)
        assert other._try_acquire_or_renew()
        r = make_runner(
            api,
            tmp_path,
            leader_elect=True,
            identity="me",
            lease_duration=1.0,
            renew_deadline=0.6,
            retry_period=0.1,
        )
        codes: list[int] = []
        t = threading.Thread(target=lambda: codes.append(r.run()))
        t.start()
        assert wait(r.store.synced, 3)
        assert not wait(lambda: r.sessions > 0, 0.5) and not r.ready()
        assert api.count("POST", r"/binding$") == 0
        # The lease is released: we lead, schedule, and report ready.
        other.leading.set()
        other.release()
        assert wait(lambda: api.count("POST", r"/binding$", 201) == 3, 5)
        assert r.ready()
        # Now we lose it: scheduling stops at once and run() returns 1.
        api.fail("PUT", r"/leases/vc-scheduler$", 500, times=10**6)
        t.join(5)
        assert not t.is_alive() and codes == [1]
