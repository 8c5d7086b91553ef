"""overcommit plugin: factor parsing, idle/inqueue accounting and enqueue votes."""

from __future__ import annotations

import pytest

from builders import node, pod, podgroup, queue
from tidesched.framework.arguments import Arguments, ConfigError
from tidesched.framework.plugin import PERMIT, REJECT
from tidesched.model.snapshot import build_snapshot
from tidesched.plugins.overcommit import DEFAULT_FACTOR, parse_factors
from tidesched.scheduler import config_from_text, open_session, run_actions

GI = 1024 ** 3


def _cfg(args: str = "") -> str:
    text = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: overcommit
    enableJobEnqueued: true
"""
    if args:
        text += "    arguments:\n" + "".join(f"      {line}\n" for line in args.splitlines())
    return text


def _ssn(objs, args: str = ""):
    return open_session(build_snapshot(objs), config_from_text(_cfg(args)))


def _nodes():
    # Volcano test cluster: 2 cpu/4Gi + 4 cpu/16Gi = 6 cpu / 20Gi
    return [node("n1", cpu="2", memory="4Gi"), node("n2", cpu="4", memory="16Gi"), queue("c1")]


def test_factor_parsing() -> None:
    assert parse_factors(Arguments({})) == (DEFAULT_FACTOR, {})
    assert parse_factors(Arguments({"overcommit-factor": 2})) == (2.0, {})
    assert parse_factors(Arguments({"overcommit-factor": 0.8})) == (DEFAULT_FACTOR, {})
    g, per = parse_factors(Arguments({"overcommit-factor": 1.5, "overcommit-factor.cpu": 3, "overcommit-factor.memory": 0.5}))
    assert g == 1.5 and per == {"cpu": 3.0, "memory": DEFAULT_FACTOR}
    with pytest.raises(ConfigError):
        parse_factors(Arguments({"overcommit-factor": "2"}))


@pytest.mark.parametrize("factor,min_res,expected", [
    ("1.2", {"cpu": "2000m", "memory": "2G"}, True),    # Volcano: overCommitFactor is more than 0
    ("0.8", {"cpu": "2000m", "memory": "2G"}, True),    # less than 1: reset to 1.2
    ("1.2", {"cpu": "20000m", "memory": "20G"}, False),  # the required resources are too large
    ("1.2", None, True),                                 # no MinResources
])
def test_volcano_overcommit_cases(factor, min_res, expected) -> None:
    # Volcano's test enqueues the (already Inqueue) job a second time before asking.
    objs = _nodes() + [podgroup("pg1", 2, queue="c1", namespace="test-namespace", phase="Inqueue", min_resources=min_res)]
    ssn = _ssn(objs, f"overcommit-factor: {factor}")
    job = ssn.jobs["test-namespace/pg1"]
    ssn.job_enqueued(job)
    assert ssn.job_enqueueable(job) is expected


def test_idle_is_scaled_total_minus_used() -> None:
    objs = _nodes() + [
        podgroup("run", 1, queue="c1", phase="Running"),
        pod("r", "run", cpu="3", memory="2Gi", node="n2", phase="Running"),
    ]
    oc = _ssn(objs, "overcommit-factor: 2").plugins["overcommit"]
    assert oc.idle.milli_cpu == pytest.approx(6000 * 2 - 3000)
    assert oc.idle.memory == pytest.approx(20 * GI * 2 - 2 * GI)


def test_per_resource_factor() -> None:
    oc = _ssn(_nodes(), "overcommit-factor: 1.0\novercommit-factor.cpu: 2.0").plugins["overcommit"]
    assert oc.idle.milli_cpu == pytest.approx(12000)
    assert oc.idle.memory == pytest.approx(20 * GI)


def test_inqueue_accounting() -> None:
    objs = _nodes() + [
        podgroup("inq", 1, queue="c1", phase="Inqueue", min_resources={"cpu": "2"}),
        pod("i1", "inq", cpu="1", memory=None, node="n1", phase="Running"),  # Inqueue counts whole minimum
        podgroup("run", 2, queue="c1", phase="Running", min_resources={"cpu": "3"}),
        pod("r1", "run", cpu="1", memory=None, node="n2", phase="Running"),
        pod("r2", "run", cpu="1", memory=None, node="n2", phase="Running"),
        podgroup("short", 2, queue="c1", phase="Running", min_resources={"cpu": "3"}),
        pod("s1", "short", cpu="1", memory=None, node="n2", phase="Running"),
        podgroup("pend", 1, queue="c1", phase="Pending", min_resources={"cpu": "5"}),
    ]
    oc = _ssn(objs).plugins["overcommit"]
    assert oc.inqueue.milli_cpu == 2000 + 1000


def test_reject_writes_event_and_only_requested_dimensions_count() -> None:
    objs = _nodes() + [
        podgroup("big", 1, queue="c1", phase="Pending", min_resources={"cpu": "8"}),
        podgroup("gpu", 1, queue="c1", phase="Pending", min_resources={"nvidia.com/gpu": "1"}),
        podgroup("mem", 1, queue="c1", phase="Pending", min_resources={"memory": "20Gi"}),
    ]
    ssn = _ssn(objs)
    fn = ssn._fns["job_enqueueable"]["overcommit"]
    assert fn(ssn.jobs["ns/mem"]) == PERMIT  # 20Gi ≤ 24Gi; cpu not requested
    assert fn(ssn.jobs["ns/big"]) == REJECT  # 8 > 7.2
    assert fn(ssn.jobs["ns/gpu"]) == REJECT  # no gpu in the cluster
    msgs = [e.message for e in ssn.events if e.reason == "Unschedulable" and e.type == "Warning"]
    assert any("ns/big" in m and "cpu: min resources 8 + already admitted 0 = 8 exceeds the room left 7.2" in m for m in msgs)


def test_enqueued_jobs_fill_the_room() -> None:
    objs = _nodes() + [
        podgroup(f"j{i}", 1, queue="c1", phase="Pending", min_resources={"cpu": "3"}) for i in range(3)
    ] + [pod(f"p{i}", f"j{i}", cpu="3", memory=None) for i in range(3)]
    cfg = """
actions: "enqueue"
tiers:
- plugins:
  - name: overcommit
    enableJobEnqueued: true
"""
    ssn = open_session(build_snapshot(objs), config_from_text(cfg))
    d = run_actions(ssn)
    # room 7.2 cpu: two 3-cpu jobs fit, the third does not
    assert sorted(d.podgroups.values()) == ["Inqueue", "Inqueue", "Pending"]
