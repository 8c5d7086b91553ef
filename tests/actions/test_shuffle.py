"""shuffle action and the VictimTasks hook (Volcano actions/shuffle, session_plugins.go).

The Go test registers its VictimTasks fn on a fake plugin; here a test plugin registers one
through ``victim_tasks``, chosen by its arguments. The pdb and tdm plugins' VictimTasks fns are
checked with shuffle in tests/scenarios/pdb.yaml and tdm.yaml.
"""

from __future__ import annotations

from typing import Any

from builders import decide, node, pod, podgroup, queue
from tidesched.framework.plugin import Plugin
from tidesched.scheduler import PLUGINS


class _ChooseByPriority(Plugin):
    """VictimTasks: the candidates whose priority is ``priority`` (argument); with ``extra``,
    also the tasks of that name, looked up in the session (not among the candidates)."""

    name = "t-victims"

    def on_session_open(self, ssn) -> None:
        wanted = self.arguments.get("priority")
        extra = set(self.arguments.get("extra") or [])

        def victims(tasks):
            chosen = [t for t in tasks if t.priority == wanted]
            return chosen + [t for t in ssn.tasks.values() if t.name in extra]

        ssn.add_fn("victim_tasks", self.arguments.get("as", self.name), victims)


class _ChooseByPriorityToo(_ChooseByPriority):
    name = "t-victims-2"


PLUGINS.setdefault(_ChooseByPriority.name, _ChooseByPriority)
PLUGINS.setdefault(_ChooseByPriorityToo.name, _ChooseByPriorityToo)


def _run(objs: list[dict[str, Any]], config: str) -> dict[str, Any]:
    return decide(objs, config).to_json()


def _cluster() -> list[dict[str, Any]]:
    """TestShuffle's cluster: three jobs, each with one low-priority (10) running pod."""
    objs: list[dict[str, Any]] = [queue("default", weight=1), node("node1", cpu="4", memory="8Gi", pods="10"),
                                  node("node2", cpu="4", memory="8Gi", pods="10")]
    objs += [podgroup(f"pg{i}", 0, namespace="test", queue="default", phase="Running") for i in (1, 2, 3)]
    for name, group, where, prio in [("pod1-1", "pg1", "node1", 10), ("pod1-2", "pg1", "node1", 100),
                                     ("pod1-3", "pg1", "node1", 100), ("pod2-1", "pg2", "node1", 10),
                                     ("pod2-2", "pg2", "node2", 100), ("pod3-1", "pg3", "node2", 10),
                                     ("pod3-2", "pg3", "node2", 100)]:
        objs.append(pod(name, group, cpu="1", memory="2G", namespace="test", node=where, phase="Running",
                        priority=prio))
    return objs


def _config(*plugins: str, tiers: int = 1) -> str:
    lines = ['actions: "shuffle"', "tiers:"]
    for tier in range(tiers):
        lines.append("- plugins:")
        lines += [f"  - {p}" for p in plugins[tier::tiers]]
    return "\n".join(lines) + "\n"


def test_shuffle_evicts_the_low_priority_pods_the_plugin_chooses() -> None:
    # TestShuffle "select pods with low priority and evict them".
    out = _run(_cluster(), _config("{name: t-victims, enabledVictim: true, arguments: {priority: 10}}"))
    assert sorted(out["evicted"]) == ["test/pod1-1", "test/pod2-1", "test/pod3-1"]
    assert out["bound"] == {} and out["pipelined"] == {}
    evict_events = [e for e in out["events"] if e["reason"] == "Evict"]
    assert {e["message"] for e in evict_events} == {"shuffle: evicted as chosen by t-victims"}


def test_shuffle_needs_the_victim_switch() -> None:
    out = _run(_cluster(), _config("{name: t-victims, enabledVictim: false, arguments: {priority: 10}}"))
    assert out["evicted"] == []


def test_victims_of_one_tier_are_united_and_the_first_tier_that_chooses_decides() -> None:
    united = _config("{name: t-victims, arguments: {priority: 10}}",
                     "{name: t-victims-2, arguments: {priority: 100, as: t-victims-2}}")
    assert len(_run(_cluster(), united)["evicted"]) == 7
    # Two tiers: the first chooses the three low-priority pods and decides alone.
    tiered = _config("{name: t-victims, arguments: {priority: 10}}",
                     "{name: t-victims-2, arguments: {priority: 100, as: t-victims-2}}", tiers=2)
    assert sorted(_run(_cluster(), tiered)["evicted"]) == ["test/pod1-1", "test/pod2-1", "test/pod3-1"]
    # A first tier choosing nothing leaves the decision to the next.
    empty_first = _config("{name: t-victims, arguments: {priority: 7}}",
                          "{name: t-victims-2, arguments: {priority: 100, as: t-victims-2}}", tiers=2)
    assert len(_run(_cluster(), empty_first)["evicted"]) == 4


def test_only_running_pods_are_candidates_but_a_plugin_may_name_others() -> None:
    objs = _cluster()
    objs.append(pod("bound-low", "pg1", cpu="1", memory="1G", namespace="test", node="node2", priority=10))
    objs.append(pod("leaving-low", "pg1", cpu="1", memory="1G", namespace="test", node="node2",
                    phase="Running", priority=10, deleting=True))
    out = _run(objs, _config("{name: t-victims, arguments: {priority: 10}}"))
    assert "test/bound-low" not in out["evicted"] and "test/leaving-low" not in out["evicted"]
    out = _run(objs, _config("{name: t-victims, arguments: {priority: 10, extra: [bound-low, leaving-low]}}"))
    # A bound pod the plugin names itself is evicted; one already leaving is not evicted twice.
    assert "test/bound-low" in out["evicted"] and "test/leaving-low" not in out["evicted"]
