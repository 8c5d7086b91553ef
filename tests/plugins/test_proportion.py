"""proportion plugin: queue attributes, water-filling, hooks, enqueue admission and events."""

from __future__ import annotations

import pytest

from builders import node, pod, podgroup, queue
from tidesched.framework.plugin import PERMIT, REJECT
from tidesched.framework.statement import Statement
from tidesched.model.resource import Resource
from tidesched.model.snapshot import build_snapshot
from tidesched.scheduler import config_from_text, open_session

CFG = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: proportion
    enableQueueOrder: true
    enableReclaimable: true
    enablePreemptive: true
    enabledOverused: true
    enabledAllocatable: true
    enableJobEnqueued: true
"""
GI = 1024 ** 3


def _ssn(objs, cfg=CFG):
    return open_session(build_snapshot(objs), config_from_text(cfg))


def _task(ssn, name):
    return next(t for t in ssn.tasks.values() if t.name == name)


def _fn(ssn, hook):
    return ssn._fns[hook]["proportion"]


def test_only_queues_with_jobs_get_attributes() -> None:
    ssn = _ssn([node("n1"), queue("q1"), queue("empty"), podgroup("pg", 1, queue="q1"), pod("p", "pg")])
    assert set(ssn.plugins["proportion"].attrs) == {"q1"}


def test_real_capability_guarantee_and_unlimited_dimensions() -> None:
    objs = [
        node("n1", cpu="10", memory="10Gi", nvidia_com__gpu="4"),
        queue("a", capability={"cpu": "4", "nvidia.com/gpu": "1"}, guarantee={"resource": {"cpu": "1"}}),
        queue("b", capability={"memory": "2Gi"}, guarantee={"resource": {"cpu": "2", "memory": "1Gi"}}),
        queue("c"),
        podgroup("pa", 1, queue="a"), pod("pa", "pa"),
        podgroup("pb", 1, queue="b"), pod("pb", "pb"),
        podgroup("pc", 1, queue="c"), pod("pc", "pc"),
    ]
    attrs = _ssn(objs).plugins["proportion"].attrs
    # total 10 cpu / 10Gi / 4 gpu; Σ guarantee 3 cpu / 1Gi
    a = attrs["a"].real_capability
    assert (a.milli_cpu, a.memory, a.scalars.get("nvidia.com/gpu")) == (4000, 9 * GI, 1000)
    b = attrs["b"].real_capability
    assert (b.milli_cpu, b.memory) == (9000, 2 * GI)  # cpu capability unset: unlimited
    # A scalar the capability does not name keeps the cluster's amount (Volcano master
    # MinDimensionResource with Infinity, b5764b960; v1.7.0's helpers.Min dropped it).
    assert b.scalars == {"nvidia.com/gpu": 4000}
    c = attrs["c"].real_capability
    assert (c.milli_cpu, c.memory, c.scalars["nvidia.com/gpu"]) == (7000, 9 * GI, 4000)


def test_water_filling_example() -> None:
    # 100 cpu; A(w2, cap 50, guar 10, req 80), B(w3, req 60), C(w5, guar 20, req 30)
    objs = [
        node("n1", cpu="100", memory="100Gi"),
        queue("a", weight=2, capability={"cpu": "50"}, guarantee={"resource": {"cpu": "10"}}),
        queue("b", weight=3),
        queue("c", weight=5, guarantee={"resource": {"cpu": "20"}}),
        podgroup("ja", 1, queue="a"), pod("a1", "ja", cpu="80", memory=None),
        podgroup("jb", 1, queue="b"), pod("b1", "jb", cpu="60", memory=None),
        podgroup("jc", 1, queue="c"), pod("c1", "jc", cpu="30", memory=None),
    ]
    attrs = _ssn(objs).plugins["proportion"].attrs
    assert attrs["a"].deserved.milli_cpu == pytest.approx(28000)
    assert attrs["b"].deserved.milli_cpu == pytest.approx(42000)
    assert attrs["c"].deserved.milli_cpu == pytest.approx(30000)
    assert attrs["a"].deserved.memory == 0  # nothing requested


def test_deserved_floored_by_guarantee_above_request() -> None:
    objs = [node("n1", cpu="10", memory="10Gi"), queue("g", guarantee={"resource": {"cpu": "6"}}), queue("o"),
            podgroup("jg", 1, queue="g"), pod("g1", "jg", cpu="1", memory=None),
            podgroup("jo", 1, queue="o"), pod("o1", "jo", cpu="8", memory=None)]
    attrs = _ssn(objs).plugins["proportion"].attrs
    assert attrs["g"].deserved.milli_cpu == 6000
    assert attrs["o"].deserved.milli_cpu == pytest.approx(4000)  # capped by real capability 10-6


def _two_queue_cluster():
    # 4 cpu / 4Gi; q1 and q2 deserve 2 cpu / 2Gi each
    return [
        node("n1", cpu="4", memory="4Gi"),
        queue("q1"), queue("q2"),
        podgroup("r1", 1, queue="q1", phase="Running"),
        pod("r1a", "r1", cpu="1", memory="1Gi", node="n1", phase="Running"),
        pod("r1b", "r1", cpu="1", memory="1Gi", node="n1", phase="Running"),
        pod("r1c", "r1", cpu="1", memory="1Gi", node="n1", phase="Running"),
        podgroup("w1", 1, queue="q1"), pod("w1a", "w1", cpu="1", memory="1Gi"),
        podgroup("w2", 1, queue="q2"), pod("w2a", "w2", cpu="2", memory="2Gi"),
    ]


def test_share_overused_and_queue_order() -> None:
    ssn = _ssn(_two_queue_cluster())
    attrs = ssn.plugins["proportion"].attrs
    # q1 request 4/4Gi, q2 2/2Gi: both deserve 2/2Gi
    assert attrs["q1"].deserved.milli_cpu == pytest.approx(2000)
    assert attrs["q1"].share == pytest.approx(1.5)
    assert attrs["q2"].share == 0
    q1, q2 = ssn.queues["q1"], ssn.queues["q2"]
    assert ssn.overused(q1) and not ssn.overused(q2)
    assert ssn.queue_order_less(q2, q1)


def test_queue_order_priority_first() -> None:
    objs = _two_queue_cluster()
    objs[1] = queue("q1", priority=10)
    ssn = _ssn(objs)
    assert ssn.queue_order_less(ssn.queues["q1"], ssn.queues["q2"])


def test_allocatable_requested_dimensions_and_state() -> None:
    objs = _two_queue_cluster() + [pod("w2b", "w2", cpu=None, memory="1Gi"), pod("w2c", "w2", cpu="1", memory="1Gi")]
    ssn = _ssn(objs)
    q2 = ssn.queues["q2"]
    # q2 deserves its request (2 cpu, 2Gi... + the new pods)
    assert ssn.allocatable(q2, _task(ssn, "w2a"))
    q1 = ssn.queues["q1"]
    assert not ssn.allocatable(q1, _task(ssn, "w1a"))  # 3+1 cpu > deserved
    assert not ssn.preemptive(q1, _task(ssn, "w1a"))


def test_allocatable_ignores_dimensions_not_requested() -> None:
    objs = [node("n1", cpu="4", memory="4Gi"), queue("q"), queue("o"),
            podgroup("r", 1, queue="q", phase="Running"),
            pod("big", "r", cpu="1", memory="3Gi", node="n1", phase="Running"),
            podgroup("j", 1, queue="q"), pod("cpu-only", "j", cpu="1", memory=None),
            podgroup("oj", 1, queue="o"), pod("o1", "oj", cpu="2", memory="2Gi")]
    ssn = _ssn(objs)
    attr = ssn.plugins["proportion"].attrs["q"]
    assert attr.allocated.memory > attr.deserved.memory  # memory already over its deserved
    assert ssn.allocatable(ssn.queues["q"], _task(ssn, "cpu-only"))


def test_closed_queue_not_allocatable() -> None:
    objs = [node("n1"), {"kind": "Queue", "metadata": {"name": "q"}, "spec": {}, "status": {"state": "Closed"}},
            podgroup("j", 1, queue="q"), pod("p", "j")]
    ssn = _ssn(objs)
    assert not ssn.allocatable(ssn.queues["q"], _task(ssn, "p"))


def test_reclaimable_takes_victims_while_queue_above_deserved() -> None:
    ssn = _ssn(_two_queue_cluster())
    fn = _fn(ssn, "reclaimable")
    victims, vote = fn(_task(ssn, "w2a"), [_task(ssn, n) for n in ("r1a", "r1b", "r1c")])
    # q1 allocated 3 > deserved 2: r1a taken (→2 ≤ 2), then no more
    assert vote == PERMIT and [v.name for v in victims] == ["r1a"]


def test_event_handlers_and_share_follow_statements() -> None:
    ssn = _ssn(_two_queue_cluster())
    attr = ssn.plugins["proportion"].attrs["q2"]
    stmt = Statement(ssn)
    stmt.allocate(_task(ssn, "w2a"), "n1")
    assert attr.allocated.milli_cpu == 2000 and attr.share == pytest.approx(1.0)
    stmt.discard()
    assert attr.allocated.milli_cpu == 0 and attr.share == 0


def test_inqueue_and_elastic_accounting() -> None:
    objs = [
        node("n1", cpu="10", memory="10Gi"),
        queue("q"),
        # Inqueue, 1 of its 3-cpu minimum already running: reserves 2 cpu
        podgroup("inq", 1, queue="q", phase="Inqueue", min_resources={"cpu": "3"}),
        pod("i1", "inq", cpu="1", memory=None, node="n1", phase="Running"),
        # Running and gang complete: reserves its unallocated minimum (1 cpu)
        podgroup("run", 2, queue="q", phase="Running", min_resources={"cpu": "4"}),
        pod("r1", "run", cpu="1500m", memory=None, node="n1", phase="Running"),
        pod("r2", "run", cpu="1500m", memory=None, node="n1", phase="Running"),
        # Running below minMember: reserves nothing
        podgroup("short", 3, queue="q", phase="Running", min_resources={"cpu": "3"}),
        pod("s1", "short", cpu="1", memory=None, node="n1", phase="Running"),
        # no minResources: everything allocated is elastic
        podgroup("free", 1, queue="q", phase="Running"),
        pod("f1", "free", cpu="2", memory="1Gi", node="n1", phase="Running"),
    ]
    attr = _ssn(objs).plugins["proportion"].attrs["q"]
    assert attr.inqueue.milli_cpu == 3000
    assert attr.elastic.milli_cpu == 2000 and attr.elastic.memory == GI


def _enqueue_cluster(queue_obj, min_res, extra=()):
    return [
        node("n1", cpu="2", memory="2G"), node("n2", cpu="2", memory="2G"),
        queue_obj,
        podgroup("run", 1, queue="q1", phase="Running", min_resources={"cpu": "1", "memory": "2G"}),
        pod("r", "run", cpu="1", memory="2G", node="n1", phase="Running"),
        podgroup("new", 1, queue="q1", phase="Pending", min_resources=min_res),
        pod("p", "new", cpu=min_res.get("cpu"), memory=min_res.get("memory")),
        *extra,
    ]


def test_enqueue_permits_when_only_requested_dimensions_fit() -> None:
    ssn = _ssn(_enqueue_cluster(queue("q1", capability={"cpu": "2", "memory": "2G"}), {"cpu": "1"}))
    assert _fn(ssn, "job_enqueueable")(ssn.jobs["ns/new"]) == PERMIT


def test_enqueue_rejects_with_event_in_natural_units() -> None:
    ssn = _ssn(_enqueue_cluster(queue("q1", capability={"cpu": "2", "memory": "2G"}), {"cpu": "1", "memory": "1G"}))
    job = ssn.jobs["ns/new"]
    assert _fn(ssn, "job_enqueueable")(job) == REJECT
    ev = [e for e in ssn.events if e.reason == "Unschedulable" and e.name == "new"]
    assert len(ev) == 1 and ev[0].type == "Warning" and ev[0].kind == "PodGroup"
    msg = ev[0].message
    assert "queue q1" in msg and "memory 3G" in msg and "real capability 2G" in msg
    assert "cpu" not in msg.split("PodGroup ns/new: ")[1]  # cpu fits


def test_enqueue_rejects_closed_queue() -> None:
    q = {"kind": "Queue", "metadata": {"name": "q1"}, "spec": {}, "status": {"state": "Closing"}}
    ssn = _ssn(_enqueue_cluster(q, {"cpu": "1"}))
    assert _fn(ssn, "job_enqueueable")(ssn.jobs["ns/new"]) == REJECT
    assert any("queue q1 is Closing" in e.message for e in ssn.events)


def test_enqueue_without_min_resources_permits() -> None:
    objs = [node("n1"), queue("q1", capability={"cpu": "1"}), podgroup("j", 1, queue="q1", phase="Pending"), pod("p", "j", cpu="8")]
    ssn = _ssn(objs)
    assert _fn(ssn, "job_enqueueable")(ssn.jobs["ns/j"]) == PERMIT


def test_job_enqueued_reserves_min_resources() -> None:
    objs = [node("n1", cpu="4", memory="4Gi"), queue("q1", capability={"cpu": "3"}),
            podgroup("a", 1, queue="q1", phase="Pending", min_resources={"cpu": "2"}), pod("a1", "a", cpu="2"),
            podgroup("b", 1, queue="q1", phase="Pending", min_resources={"cpu": "2"}), pod("b1", "b", cpu="2")]
    ssn = _ssn(objs)
    ok = _fn(ssn, "job_enqueueable")
    a, b = ssn.jobs["ns/a"], ssn.jobs["ns/b"]
    assert ok(a) == PERMIT
    ssn.job_enqueued(a)
    assert ssn.plugins["proportion"].attrs["q1"].inqueue.milli_cpu == 2000
    assert ok(b) == REJECT


def test_simulate_hooks_use_a_copy() -> None:
    ssn = _ssn(_two_queue_cluster())
    q1 = ssn.queues["q1"]
    w1a, r1a, r1b = _task(ssn, "w1a"), _task(ssn, "r1a"), _task(ssn, "r1b")
    state = ssn.simulate_state(w1a)
    assert not ssn.simulate_allocatable(state, q1, w1a)
    ssn.simulate_remove_task(state, w1a, r1a, 0)
    ssn.simulate_remove_task(state, w1a, r1b, 0)
    assert ssn.simulate_allocatable(state, q1, w1a)
    ssn.simulate_add_task(state, w1a, r1b, 0)
    assert not ssn.simulate_allocatable(state, q1, w1a)
    assert ssn.plugins["proportion"].attrs["q1"].allocated == Resource(3000, 3 * GI)


def test_add_positive_is_adding_the_part_above_nothing() -> None:
    """The session-open shortcut for a job without minResources adds exactly what
    ``exceeded_part(Resource())`` would (keys, values and signs of zero)."""
    import math as _math

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tidesched.model.resource import Resource
    from tidesched.plugins.proportion import _add_positive

    amount = st.sampled_from([0.0, -0.0, 1.5, 3.0, -2.0, _math.inf, _math.nan])

    def make(cpu: float, mem: float, sc: dict[str, float]) -> Resource:
        r = Resource()
        r.milli_cpu, r.memory, r.scalars = cpu, mem, dict(sc)
        return r

    res = st.builds(make, amount, amount, st.dictionaries(st.sampled_from(["a", "b", "c"]), amount, max_size=3))

    def same(x: float, y: float) -> bool:
        return (_math.isnan(x) and _math.isnan(y)) or (x == y and _math.copysign(1, x) == _math.copysign(1, y))

    @settings(max_examples=300, deadline=None)
    @given(res, res)
    def check(base: Resource, r: Resource) -> None:
        want, got = base.clone(), base.clone()
        want.add(r.exceeded_part(Resource()))
        _add_positive(got, r)
        assert same(got.milli_cpu, want.milli_cpu) and same(got.memory, want.memory)
        assert list(got.scalars) == list(want.scalars)
        assert all(same(got.scalars[k], want.scalars[k]) for k in want.scalars)

    check()
