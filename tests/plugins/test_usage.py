"""usage plugin: the cases of Volcano v1.15.1's plugins/usage/usage_test.go (TestUsage_predicateFn,
TestUsage_nodeOrderFn) with the node usage a metrics source would have reported, and the
decisions they lead to. Every answer is checked on the full path and the row-local one."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import yaml

from builders import node, pod, podgroup, queue
from tidesched.framework.arguments import ConfigError
from tidesched.model.node_usage import NODE_METRICS_PERIOD, NodeUsage
from tidesched.model.snapshot import build_snapshot
from tidesched.plugins.usage import CPU_REASON, MEMORY_REASON
from tidesched.scheduler import config_from_text, open_session, run_actions

NOW = 1_800_000_000.0
ARGS = {"usage.weight": 5, "cpu.weight": 1, "memory.weight": 1, "thresholds": {"cpu": 80, "mem": 80}}


def usage(cpu: float, mem: float, age: float | None = 0.0) -> NodeUsage:
    """A report ``age`` seconds old (None: the zero time, never reported)."""
    return NodeUsage(0.0 if age is None else NOW - age, {NODE_METRICS_PERIOD: cpu}, {NODE_METRICS_PERIOD: mem})


def _config(arguments: dict[str, Any], actions: str = "allocate", extra: list[dict] | None = None) -> str:
    plugins = [{"name": "usage", "arguments": arguments}, *(extra or [])]
    return yaml.safe_dump({"actions": actions, "tiers": [{"plugins": plugins}]})


def _objects(nodes: list[str], pods: int = 1) -> list[dict]:
    objs = [node(n, cpu="4", memory="8Gi", pods="10") for n in nodes]
    objs += [queue("q1", weight=1), podgroup("pg1", 0, queue="q1", namespace="c1")]
    objs += [pod(f"p{i + 1}", "pg1", cpu="1", memory="1Gi", namespace="c1") for i in range(pods)]
    return objs


def _session(nodes: list[str], node_usage: dict[str, NodeUsage], arguments: dict[str, Any] = ARGS, **kw: Any):
    snap = build_snapshot(_objects(nodes, kw.pop("pods", 1)))
    snap.node_usage = node_usage
    return open_session(snap, config_from_text(_config(arguments, **kw)), now=NOW)


# -- TestUsage_predicateFn -------------------------------------------------------------------

PREDICATE_CASES = [
    ("cpu load above the limit", usage(81, 60), CPU_REASON),
    ("memory load above the limit", usage(60, 81), MEMORY_REASON),
    ("both at or under the limit", usage(80, 79), None),
    ("report older than five minutes", usage(90, 81, age=6 * 60), None),
    ("never reported (zero time)", usage(90, 81, age=None), None),
]


@pytest.mark.parametrize("case, u, reason", PREDICATE_CASES, ids=[c[0] for c in PREDICATE_CASES])
def test_predicate(case: str, u: NodeUsage, reason: str | None) -> None:
    ssn = _session(["n1"], {"n1": u}, pods=2)
    for task in ssn.tasks.values():
        res = ssn.predicate(task)
        assert bool(res.passed[0]) is (reason is None)
        assert bool(ssn.predicate_mask(task)[0]) is (reason is None)
        if reason is not None:
            (failure,) = res.failures
            assert failure.reason == reason and failure.unresolvable


# -- TestUsage_nodeOrderFn -------------------------------------------------------------------

NODES = ["n1", "n2", "n3", "n4", "n5"]
SCORE_USAGE = {
    "n1": usage(30, 50), "n2": usage(60, 50), "n3": usage(60, 80),
    "n4": usage(10, 20, age=6 * 60),  # stale: 0
    "n5": usage(0, 0, age=None),  # never reported: 0
}


@pytest.mark.parametrize(
    "case, weights, want",
    [
        ("default weights", {"cpu.weight": 1, "memory.weight": 1}, {"n1": 300, "n2": 225, "n3": 150, "n4": 0, "n5": 0}),
        ("memory first", {"cpu.weight": 2, "memory.weight": 8}, {"n1": 270, "n2": 240, "n3": 120, "n4": 0, "n5": 0}),
    ],
)
def test_node_order(case: str, weights: dict, want: dict) -> None:
    ssn = _session(NODES, SCORE_USAGE, {**ARGS, **weights})
    (task,) = ssn.tasks.values()
    idx = np.arange(len(ssn.table))
    full = ssn.node_order(task, idx)
    assert dict(zip(ssn.table.names, full.tolist())) == pytest.approx(want)
    assert np.allclose(ssn.node_order_all(task), full)


# -- decisions -------------------------------------------------------------------------------


def test_pod_goes_to_the_least_loaded_node_that_passes() -> None:
    node_usage = {"n1": usage(95, 10), "n2": usage(50, 50), "n3": usage(20, 30)}
    ssn = _session(["n1", "n2", "n3"], node_usage, extra=[{"name": "predicates"}])
    d = run_actions(ssn)
    assert d.bound == {"c1/p1": "n3"}


def test_every_node_overloaded_leaves_the_pod_pending_with_the_reason() -> None:
    node_usage = {"n1": usage(95, 10), "n2": usage(10, 85)}
    ssn = _session(["n1", "n2"], node_usage, actions="enqueue, allocate", extra=[{"name": "gang"}])
    d = run_actions(ssn)
    assert d.bound == {}
    msgs = [e.message for e in d.events if e.reason == "FailedScheduling" and e.name == "p1"]
    assert msgs and CPU_REASON in msgs[0] and MEMORY_REASON in msgs[0], msgs


def test_predicate_switched_off_keeps_the_score() -> None:
    arguments = dict(ARGS)
    cfg = yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [
        {"name": "usage", "enablePredicate": False, "arguments": arguments}]}]})
    snap = build_snapshot(_objects(["n1", "n2"]))
    snap.node_usage = {"n1": usage(85, 5), "n2": usage(50, 50)}
    d = run_actions(open_session(snap, config_from_text(cfg), now=NOW))
    # n1 is above the cpu threshold but no longer filtered; it scores (15 + 95)/2 · 5 = 275,
    # n2 (50 + 50)/2 · 5 = 250
    assert d.bound == {"c1/p1": "n1"}


def test_without_usage_the_plugin_changes_nothing() -> None:
    ssn = _session(["n1", "n2"], {})
    (task,) = ssn.tasks.values()
    assert ssn.predicate(task).passed.all()
    assert not ssn.node_order(task, np.arange(2)).any()


# -- arguments -------------------------------------------------------------------------------


def test_defaults() -> None:
    from tidesched.framework.arguments import Arguments
    from tidesched.plugins.usage import UsagePlugin

    p = UsagePlugin(Arguments({}))
    assert (p.usage_weight, p.cpu_weight, p.memory_weight, p.cpu_threshold, p.mem_threshold) == (5, 1, 1, 80, 80)


@pytest.mark.parametrize("arguments, match", [
    ({"thresholds": {"cpu": 80.5}}, "integer percentage for thresholds.cpu"),
    ({"thresholds": [80]}, "a mapping"),
    ({"cpu.weight": 0, "memory.weight": 0}, "sum with cpu.weight"),
    ({"usage.weight": "5"}, "an integer"),
])
def test_bad_arguments_are_refused_at_load(arguments: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        config_from_text(_config(arguments))
