"""rescheduling plugin: lowNodeUtilization's victim choice (Volcano v1.15.1
plugins/rescheduling/low_node_utilization.go, node_utilization_util.go; Volcano has no unit test
of its own for them, so these are own cases on its rules), the interval, and the arguments."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from builders import node, pod, podgroup, queue
from tidesched.framework.arguments import Arguments, ConfigError
from tidesched.model.node_usage import NODE_METRICS_PERIOD, NodeUsage
from tidesched.model.snapshot import build_snapshot
from tidesched.plugins.rescheduling import (
    LowNodeUtilization,
    ReschedulingPlugin,
    low_node_utilization_victims,
    node_loads,
    parse_arguments,
)
from tidesched.model.status import TaskStatus
from tidesched.scheduler import config_from_text, open_session, run_actions

NOW = 1_800_000_000.0
LNU = {"name": "lowNodeUtilization",
       "params": {"thresholds": {"cpu": 20, "memory": 20}, "targetThresholds": {"cpu": 50, "memory": 50}}}


def used(cpu: float, mem: float, period: str = NODE_METRICS_PERIOD) -> NodeUsage:
    return NodeUsage(NOW, {period: cpu}, {period: mem})


def _node(name: str, **kw: Any) -> dict:
    n = node(name, cpu="10", memory="10Gi", **kw)
    n["status"]["capacity"] = dict(n["status"]["allocatable"])
    return n


def _guaranteed(name: str, cpu: str, mem: str, priority: int) -> dict:
    p = pod(name, "busy", cpu=cpu, memory=mem, node="n2", phase="Running", priority=priority)
    p["spec"]["containers"][0]["resources"]["limits"] = {"cpu": cpu, "memory": mem}
    return p


def _cluster() -> list[dict]:
    return [
        _node("n1"), _node("n2"), _node("n3", unschedulable=True),
        queue("q"), podgroup("busy", 1, queue="q", phase="Running"),
        _guaranteed("a-guaranteed-100", "1", "1Gi", 100),
        pod("b-besteffort-10", "busy", cpu=None, memory=None, node="n2", phase="Running", priority=10),
        pod("c-burstable-10", "busy", cpu="2", memory="1Gi", node="n2", phase="Running", priority=10),
        _guaranteed("d-guaranteed-10", "2", "2Gi", 10),
        pod("e-burstable-50", "busy", cpu="1", memory="1Gi", node="n2", phase="Running", priority=50),
    ]


def _session(node_usage: dict[str, NodeUsage], arguments: dict | None = None, now: float = NOW):
    snap = build_snapshot(_cluster())
    snap.node_usage = node_usage
    args = arguments if arguments is not None else {"metricsPeriod": "10m", "strategies": [LNU]}
    cfg = yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [{"name": "rescheduling", "arguments": args}]}]})
    return open_session(snap, config_from_text(cfg), now=now)


def _running(ssn) -> list:
    return [t for t in ssn.tasks.values() if t.status == TaskStatus.RUNNING]


def _victims(ssn, conf: LowNodeUtilization, period: str = NODE_METRICS_PERIOD) -> list[str]:
    return [t.name for t in low_node_utilization_victims(node_loads(ssn, period), _running(ssn), conf)]


CONF = LowNodeUtilization({"cpu": 20.0, "memory": 20.0}, {"cpu": 50.0, "memory": 50.0})
BUSY = {"n1": used(10, 10), "n2": used(80, 70), "n3": used(0, 0)}


def test_low_priority_and_low_qos_go_first_until_the_node_is_under_target() -> None:
    # Room on the low node n1 up to 50 %: 4 cpu, 4Gi. On n2 (80 % / 70 %): b (BestEffort, p10),
    # c (Burstable, p10: n2 → 60 % / 60 %), d (Guaranteed, p10: n2 → 40 % / 40 %, room cpu 0);
    # then n2 is under target: e and a stay.
    assert _victims(_session(BUSY), CONF) == ["b-besteffort-10", "c-burstable-10", "d-guaranteed-10"]


def test_room_used_up_exactly_stops_eviction() -> None:
    # n1 at 30 % cpu: room 2 cpu. After c (2 cpu) the room is exactly 0: d is not taken although
    # n2 is still at 60 %.
    usage = {**BUSY, "n1": used(30, 10)}
    conf = LowNodeUtilization({"cpu": 40.0, "memory": 40.0}, {"cpu": 50.0, "memory": 50.0})
    assert _victims(_session(usage), conf) == ["b-besteffort-10", "c-burstable-10"]


@pytest.mark.parametrize("case, usage", [
    ("no low node", {"n1": used(30, 30), "n2": used(80, 70), "n3": used(0, 0)}),
    ("every node low", {"n1": used(10, 10), "n2": used(10, 10), "n3": used(0, 0)}),
    ("no node above target", {"n1": used(10, 10), "n2": used(45, 45), "n3": used(0, 0)}),
])
def test_nothing_to_move(case: str, usage: dict) -> None:
    assert _victims(_session(usage), CONF) == []


def test_unschedulable_node_is_not_a_target() -> None:
    # n3 is idle but unschedulable: with n1 busy too there is no low node.
    usage = {"n1": used(60, 60), "n2": used(80, 70), "n3": used(0, 0)}
    assert _victims(_session(usage), CONF) == []


def test_default_metrics_period_reads_nothing() -> None:
    # Reports are filed under 10m; rescheduling's default metricsPeriod is 5m: every node reads
    # 0 % (all low), so nothing is evicted — as in Volcano.
    ssn = _session(BUSY)
    assert _victims(ssn, CONF, period="5m") == []


def test_only_candidate_tasks_are_victims() -> None:
    ssn = _session(BUSY)
    candidates = [t for t in _running(ssn) if t.name != "c-burstable-10"]
    got = low_node_utilization_victims(node_loads(ssn, "10m"), candidates, CONF)
    # c is skipped (not a candidate) and changes nothing: b, d (n2 → 60 % / 50 %), e (→ 50 % /
    # 40 %: cpu still at the target, which counts as overused), a (→ 40 %)
    assert [t.name for t in got] == ["b-besteffort-10", "d-guaranteed-10", "e-burstable-50", "a-guaranteed-100"]


def test_plugin_runs_once_per_interval() -> None:
    args = {"interval": "5m", "metricsPeriod": "10m", "strategies": [LNU]}
    cfg = config_from_text(yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [
        {"name": "rescheduling", "arguments": args}]}]}))

    def victims_at(t: float) -> list[str]:
        snap = build_snapshot(_cluster())
        snap.node_usage = BUSY
        ssn = open_session(snap, cfg, now=t)
        plugin = ssn.plugins["rescheduling"]
        assert isinstance(plugin, ReschedulingPlugin)
        return [v.name for v in plugin.victim_tasks(ssn, _running(ssn))]

    assert victims_at(NOW) == []  # the interval starts with the first session
    assert victims_at(NOW + 299) == []
    assert victims_at(NOW + 301) == ["b-besteffort-10", "c-burstable-10", "d-guaranteed-10"]
    assert victims_at(NOW + 302) == []  # and again only 5 minutes later
    assert victims_at(NOW + 602) != []


# -- arguments -------------------------------------------------------------------------------


def test_default_arguments() -> None:
    a = parse_arguments(Arguments({}))
    assert (a.interval, a.metrics_period) == (300.0, "5m")
    ((name, conf),) = a.strategies
    assert name == "lowNodeUtilization" and conf == LowNodeUtilization()
    assert conf.thresholds == {"cpu": 100, "memory": 100, "pods": 100}


def test_strategy_params() -> None:
    a = parse_arguments(Arguments({"interval": "1m", "metricsPeriod": "10m", "strategies": [
        {"name": "lowNodeUtilization", "params": {"thresholds": {"cpu": 10, "pod": 5}, "targetThresholds": {"memory": 70}}}]}))
    ((_, conf),) = a.strategies
    assert a.interval == 60 and conf is not None
    assert conf.thresholds == {"cpu": 10, "memory": 100, "pods": 100, "pod": 5}
    assert conf.target_thresholds == {"cpu": 100, "memory": 70, "pods": 100}


def test_shuffle_evicts_the_victims() -> None:
    """Registered to the victim_tasks hook when due: the shuffle action evicts what it chose."""
    args = {"interval": "0s", "metricsPeriod": "10m", "strategies": [LNU]}
    cfg = config_from_text(yaml.safe_dump({"actions": "shuffle", "tiers": [{"plugins": [
        {"name": "rescheduling", "arguments": args}]}]}))
    snap = build_snapshot(_cluster())
    snap.node_usage = BUSY
    d = run_actions(open_session(snap, cfg, now=NOW))
    assert sorted(d.evicted) == ["ns/b-besteffort-10", "ns/c-burstable-10", "ns/d-guaranteed-10"]
    assert all("rescheduling" in r for r in d.eviction_reasons.values())
    # not due (a 5m interval from the first session): nothing evicted
    cfg = config_from_text(yaml.safe_dump({"actions": "shuffle", "tiers": [{"plugins": [
        {"name": "rescheduling", "arguments": {**args, "interval": "5m"}}]}]}))
    assert run_actions(open_session(snap, cfg, now=NOW)).evicted == []


def test_unknown_strategy_is_taken_and_said() -> None:
    args = Arguments({"strategies": [{"name": "offlineOnly"}]})
    assert parse_arguments(args).strategies == (("offlineOnly", None),)
    assert any("offlineOnly" in n for n in ReschedulingPlugin.unhonoured(args))


@pytest.mark.parametrize("arguments, match", [
    ({"interval": "soon"}, "a duration"),
    ({"interval": 5}, "a string"),
    ({"metricsPeriod": 10}, "a string"),
    ({"strategies": {"name": "lowNodeUtilization"}}, r"a list of \{name, params\}"),
    ({"strategies": [{"name": "lowNodeUtilization", "params": {"thresholds": {"cpu": 20.5}}}]}, "integer percentage"),
])
def test_bad_arguments_are_refused_at_load(arguments: dict, match: str) -> None:
    cfg = yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [{"name": "rescheduling", "arguments": arguments}]}]})
    with pytest.raises(ConfigError, match=match):
        config_from_text(cfg)
