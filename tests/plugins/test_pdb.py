"""pdb plugin: what the scenario file (tests/scenarios/pdb.yaml) does not show."""

from __future__ import annotations

from typing import Any

from builders import decide, filter_config, node, pod, podgroup, queue
from tidesched.scheduler import config_from_text

CONFIG = filter_config("pdb")


def _run(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return decide(objs, CONFIG).to_json()


def _budget(allowed: int) -> dict[str, Any]:
    return {"kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {"app": "v"}}}, "status": {"disruptionsAllowed": allowed}}


def _cluster(allowed: int) -> list[dict[str, Any]]:
    objs = [{"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100}, queue("q"),
            node("n1", cpu="2"), podgroup("victims", 0, queue="q", phase="Running"), _budget(allowed)]
    objs += [pod(f"v-{i}", "victims", node="n1", phase="Running", labels={"app": "v"}) for i in range(2)]
    for i in range(2):
        objs.append(podgroup(f"p{i}", 1, queue="q", priorityClassName="high"))
        objs.append(pod(f"p{i}-0", f"p{i}", spec={"priorityClassName": "high"}))
    return objs


def test_one_session_never_takes_a_budget_below_zero() -> None:
    # Two preemptors, one disruption allowed: the second preemptor's call counts the first
    # eviction against the budget (Volcano would count down from status again and take both).
    out = _run(_cluster(1))
    assert len(out["evicted"]) == 1 and len(out["pipelined"]) == 1
    out = _run(_cluster(2))
    assert len(out["evicted"]) == 2 and len(out["pipelined"]) == 2


def test_a_config_naming_pdb_loads() -> None:
    config = config_from_text(CONFIG)
    assert config.plugin("pdb") is not None
