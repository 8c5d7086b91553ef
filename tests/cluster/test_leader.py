"""Leader election on a coordination.k8s.io/v1 Lease (K8S-3).

Lease expiry and the renew deadline are measured on the elector's own clock; every test here
gives the electors a :class:`ManualClock`, so a lease expires (or a leader loses) exactly when
the test advances that clock — never because a thread was starved for a moment. Threads still
pace their attempts with ``retry_period`` in real time; the tests wait for attempts to happen
(``elector.attempts``), never for time to pass.
"""

from __future__ import annotations

import threading

from builders import node, pod, queue
from cluster_helpers import ManualClock, fake_api, http_get, kube_for, make_runner, wait
from tidesched.cluster.leader import LeaderElector

FAST = {"lease_duration": 1.0, "renew_deadline": 0.5, "retry_period": 0.05}
LEASE = "volcano-system/vc-scheduler"
GUARD = 10.0  # only a guard against hanging: every wait below ends on an event


def _elector(api, ident: str, clock: ManualClock, **kw) -> LeaderElector:
    return LeaderElector(
        kube_for(api), "volcano-system", "vc-scheduler", identity=ident, clock=clock, **{**FAST, **kw}
    )


def _more_attempts(e: LeaderElector, n: int) -> bool:
    start = e.attempts
    return wait(lambda: e.attempts >= start + n, GUARD)


def test_renewals_keep_a_standby_out_until_the_lease_expires() -> None:
    """Driven by hand, step by step: the standby takes over only after lease_duration of its
    own clock without seeing the record change."""
    with fake_api() as api:
        clock = ManualClock()
        a, b = _elector(api, "a", clock), _elector(api, "b", clock)
        assert a._try_acquire_or_renew()
        assert not b._try_acquire_or_renew()  # b first sees a's record
        clock.advance(0.75)
        assert not b._try_acquire_or_renew()  # live for 0.25 s more
        assert a._try_acquire_or_renew()  # a renews: a new renewTime
        clock.advance(0.75)  # 1.5 s since b first looked, but the record changed meanwhile
        assert not b._try_acquire_or_renew()
        clock.advance(0.75)
        assert not b._try_acquire_or_renew()  # 0.75 s since b saw the renewal
        assert api.get("Lease", LEASE)["spec"]["holderIdentity"] == "a"
        clock.advance(0.25)  # a has not renewed for a whole lease duration as b sees it
        assert b._try_acquire_or_renew()
        spec = api.get("Lease", LEASE)["spec"]
        assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
        assert not a._try_acquire_or_renew() and a._held_by_other()  # a may not renew b's lease


def test_one_leader_and_a_fast_handover_on_release() -> None:
    with fake_api() as api:
        clock = ManualClock()  # never advanced: no lease can expire, no deadline can pass
        a, b = _elector(api, "a", clock), _elector(api, "b", clock)
        a.start()
        assert wait(a.is_leader, GUARD)
        b.start()
        renewed = api.get("Lease", LEASE)["spec"]["renewTime"]
        assert _more_attempts(b, 3)  # b has asked several times and been refused
        assert wait(lambda: api.get("Lease", LEASE)["spec"]["renewTime"] != renewed, GUARD)  # a renews
        assert a.is_leader() and not b.is_leader()
        lease = api.get("Lease", LEASE)
        assert lease["spec"]["holderIdentity"] == "a" and lease["spec"]["leaseDurationSeconds"] == 1
        assert a.release()  # SIGTERM: b need not wait for the lease to expire
        assert wait(b.is_leader, GUARD)
        assert not a.is_leader()
        spec = api.get("Lease", LEASE)["spec"]
        assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
        assert b.release()
        a.stop()
        b.stop()
        assert api.get("Lease", LEASE)["spec"]["holderIdentity"] == ""


def test_expired_lease_of_a_dead_holder_is_taken_over() -> None:
    with fake_api() as api:
        clock = ManualClock()
        dead = _elector(api, "dead", clock)
        assert dead._try_acquire_or_renew()  # acquired once, then the process died
        b = _elector(api, "b", clock)
        b.start()
        assert _more_attempts(b, 2)
        clock.advance(0.75)
        assert _more_attempts(b, 2) and not b.is_leader()  # not yet a whole lease duration
        clock.advance(0.25)
        assert wait(b.is_leader, GUARD)
        assert api.get("Lease", LEASE)["spec"]["holderIdentity"] == "b"
        b.release()
        b.stop()


def test_losing_the_lease_stops_at_once() -> None:
    with fake_api() as api:
        clock = ManualClock()
        lost = threading.Event()
        a = _elector(api, "a", clock, on_stopped=lost.set)
        a.start()
        assert wait(a.is_leader, GUARD)
        api.fail("PUT", r"/leases/vc-scheduler$", 500, times=10**6)  # the API server stops renewing us
        assert _more_attempts(a, 3)
        assert a.is_leader() and not lost.is_set()  # failed renewals within the deadline: still leader
        clock.advance(0.5)  # renew deadline reached
        assert lost.wait(GUARD)  # the next failed attempt gives up at once
        assert not a.is_leader() and a.lost.is_set()
        a.stop()


def test_only_the_leader_schedules_and_a_lost_runner_exits_1(tmp_path) -> None:
    with fake_api() as api:
        api.create_many([node("n1", cpu="8"), queue("default")] + [pod(f"p{i}") for i in range(3)])
        clock = ManualClock()
        # Someone else holds a live lease: our runner syncs but must not schedule.
        other = _elector(api, "other", clock, lease_duration=30.0, renew_deadline=20.0)
        assert other._try_acquire_or_renew()
        r = make_runner(
            api,
            tmp_path,
            leader_elect=True,
            identity="me",
            lease_duration=1.0,
            renew_deadline=0.5,
            retry_period=0.05,
            enable_healthz=True,
            healthz_address="127.0.0.1:0",
            component_options={"elector": {"clock": clock}},
        )
        codes: list[int] = []
        t = threading.Thread(target=lambda: codes.append(r.run()))
        t.start()
        try:
            assert r.elector is not None
            assert wait(lambda: r.loops >= 3, GUARD)  # synced, and the loop has turned three times
            assert _more_attempts(r.elector, 2)
            assert r.sessions == 0 and not r.ready() and not r.leading()
            assert api.count("POST", r"/binding$") == 0
            # A synced standby is alive but not ready: /readyz names the leader.
            port = r.servers[0].port
            assert http_get(port, "/healthz")[0] == 200 and http_get(port, "/readyz")[0] == 503
            # The lease is released: we lead, schedule, and report ready.
            other.leading.set()
            other.release()
            assert wait(lambda: api.count("POST", r"/binding$", 201) == 3, GUARD)
            assert r.ready() and r.metrics.leader._value.get() == 1
            assert http_get(port, "/readyz") == (200, "ok\n")
            # Now we lose it: scheduling stops at once and run() returns 1.
            api.fail("PUT", r"/leases/vc-scheduler$", 500, times=10**6)
            assert _more_attempts(r.elector, 2) and r.leading()
            clock.advance(0.5)
            t.join(GUARD)
            assert not t.is_alive() and codes == [1]
            assert not r.ready() and r.metrics.leader._value.get() == 0
        finally:
            r.stop()
            t.join(GUARD)
