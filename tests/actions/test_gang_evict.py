"""gangpreempt and gangreclaim: arguments (TestParseArguments*), the UnifiedEvictable hook and
the plugins' fns for it. Decisions ported from the Go tests are in
tests/scenarios/gangpreempt.yaml and gangreclaim.yaml."""

from __future__ import annotations

from typing import Any

import pytest

from builders import decide, node, pod, podgroup, queue
from tidesched.actions.gang_evict import GangEvictOptions
from tidesched.framework.arguments import ConfigError
from tidesched.framework.plugin import GANG_PREEMPT, EvictionContext, Plugin
from tidesched.model.snapshot import build_snapshot
from tidesched.scheduler import PLUGINS, config_from_text, open_session


def _config(action: str, args: str = "", plugins: str = "  - {name: priority}\n  - {name: gang}\n") -> str:
    text = f'actions: "{action}"\ntiers:\n- plugins:\n{plugins}'
    if args:
        text += f"configurations:\n- name: {action}\n  arguments: {args}\n"
    return text


@pytest.mark.parametrize("action", ["gangpreempt", "gangreclaim"])
def test_arguments_are_read(action: str) -> None:
    # TestParseArguments.
    config = config_from_text(_config(action, "{maxDomains: 3, allowWholeBundle: false}"))
    opts = GangEvictOptions.from_arguments(config.action_arguments(action))
    assert (opts.max_domains, opts.allow_whole_bundle) == (3, False)
    assert GangEvictOptions.from_arguments(config_from_text(_config(action)).action_arguments(action)) == GangEvictOptions()


@pytest.mark.parametrize("value", [0, -1])
@pytest.mark.parametrize("action", ["gangpreempt", "gangreclaim"])
def test_max_domains_not_positive_falls_back_to_the_default(action: str, value: int) -> None:
    # TestParseArguments_InvalidMaxDomainsFallsBackToDefault; the config says so when it loads.
    config = config_from_text(_config(action, f"{{maxDomains: {value}}}"))
    assert GangEvictOptions.from_arguments(config.action_arguments(action)).max_domains == 8
    assert any("maxDomains" in w and "default 8" in w for w in config.warnings)


def test_a_bad_argument_type_is_refused_with_line_and_field() -> None:
    with pytest.raises(ConfigError) as err:
        config_from_text(_config("gangreclaim", '{allowWholeBundle: "no"}'), "g.conf")
    assert str(err.value).startswith("g.conf:8:") and "allowWholeBundle" in str(err.value)


class _Allow(Plugin):
    """UnifiedEvictable: the candidates named in ``allow`` (argument), with ``vote``."""

    name = "t-unified"

    def on_session_open(self, ssn) -> None:
        allow = set(self.arguments.get("allow") or [])
        vote = self.arguments.get("vote", 1)
        ssn.add_fn("unified_evictable", self.arguments.get("as", self.name),
                   lambda ctx, cands: ([c for c in cands if c.name in allow], vote))


class _Allow2(_Allow):
    name = "t-unified-2"


PLUGINS.setdefault(_Allow.name, _Allow)
PLUGINS.setdefault(_Allow2.name, _Allow2)


def _session(config: str):
    objs = [queue("q"), node("n1"), podgroup("j", 0, queue="q", phase="Running")]
    objs += [pod(f"t{i}", "j", node="n1", phase="Running") for i in range(3)]
    return open_session(build_snapshot(objs), config_from_text(config))


def test_unified_evictable_intersects_a_tier_and_the_first_tier_with_victims_decides() -> None:
    one_tier = ("  - {name: t-unified, arguments: {allow: [t0, t1]}}\n"
                "  - {name: t-unified-2, arguments: {allow: [t1, t2], as: t-unified-2}}\n")
    ssn = _session(_config("gangpreempt", plugins=one_tier))
    cands = sorted(ssn.tasks.values(), key=lambda t: t.name)
    ctx = EvictionContext(GANG_PREEMPT, ssn.jobs["ns/j"])
    assert [t.name for t in ssn.unified_evictable(ctx, cands)] == ["t1"]
    two_tiers = ('actions: "gangpreempt"\ntiers:\n- plugins:\n  - {name: t-unified, arguments: {allow: []}}\n'
                 "- plugins:\n  - {name: t-unified-2, arguments: {allow: [t2], as: t-unified-2}}\n")
    ssn = _session(two_tiers)
    cands = sorted(ssn.tasks.values(), key=lambda t: t.name)
    assert [t.name for t in ssn.unified_evictable(EvictionContext(GANG_PREEMPT, ssn.jobs["ns/j"]), cands)] == ["t2"]
    # No plugin with a fn: nothing is allowed; an abstaining fn does not count.
    ssn = _session(_config("gangpreempt", plugins="  - {name: t-unified, arguments: {allow: [t0], vote: 0}}\n"))
    assert ssn.unified_evictable(EvictionContext(GANG_PREEMPT, ssn.jobs["ns/j"]), list(ssn.tasks.values())) == []


def _run(objs: list[dict[str, Any]], config: str) -> dict[str, Any]:
    return decide(objs, config).to_json()


def test_gangpreempt_takes_nothing_without_a_unified_evictable_plugin() -> None:
    objs = [{"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100}, queue("q"), node("n1", cpu="1"),
            podgroup("v", 0, queue="q", phase="Running"), pod("v-0", "v", node="n1", phase="Running"),
            podgroup("p", 1, queue="q", priorityClassName="high"), pod("p-0", "p", spec={"priorityClassName": "high"})]
    assert _run(objs, _config("gangpreempt"))["evicted"] == ["ns/v-0"]
    # drf and proportion register no UnifiedEvictable fn (as in Volcano): with them alone, no victim.
    plain = ('actions: "gangpreempt"\ntiers:\n- plugins:\n  - {name: drf}\n  - {name: proportion}\n')
    assert _run(objs, plain)["evicted"] == []


def test_critical_pods_are_no_gang_victims() -> None:
    objs = [{"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100},
            {"kind": "PriorityClass", "metadata": {"name": "system-node-critical"}, "value": 10}, queue("q"),
            node("n1", cpu="1"), podgroup("v", 0, queue="q", phase="Running", namespace="kube-system"),
            pod("v-0", "v", node="n1", phase="Running", namespace="kube-system"),
            podgroup("p", 1, queue="q", priorityClassName="high"), pod("p-0", "p", spec={"priorityClassName": "high"})]
    config = _config("gangpreempt", plugins="  - {name: priority}\n  - {name: gang}\n  - {name: conformance}\n")
    assert _run(objs, config)["evicted"] == []


def test_capacity_keeps_guarantees_and_deserved_in_gangreclaim() -> None:
    objs = [queue("q1", deserved={"cpu": "2"}), queue("q2", deserved={"cpu": "2"}, guarantee={"resource": {"cpu": "1"}}),
            node("n1", cpu="4"), podgroup("v", 0, queue="q2", phase="Running"),
            podgroup("r", 1, queue="q1")]
    objs += [pod(f"v-{i}", "v", node="n1", phase="Running") for i in range(4)]
    objs += [pod("r-0", "r", cpu="2")]
    config = _config("gangreclaim", plugins="  - {name: gang}\n  - {name: capacity}\n")
    out = _run(objs, config)
    # q2 holds 4 cpu, deserves 2: capacity allows two victims (the third would take q2 to its
    # deserved, no longer over it); the safe bundle, shrunk to them, is evicted.
    assert sorted(out["evicted"]) == ["ns/v-0", "ns/v-1"] and out["pipelined"] == {"ns/r-0": "n1"}


def _capacity_card_case(name: str, tier_one: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """A tidal reclaim scenario of tests/scenarios/capacity_card.yaml run with gangreclaim in
    place of reclaim; with ``tier_one`` capacity-card moves to the first tier."""
    import yaml
    from pathlib import Path

    from scenario_harness import run_scenario

    path = Path(__file__).parents[1] / "scenarios" / "capacity_card.yaml"
    doc = next(d for d in yaml.safe_load_all(path.read_text()) if d and d.get("name") == name)
    config = doc["scheduler_config"].replace("backfill, reclaim", "backfill, gangreclaim")
    if tier_one:
        moved = config.replace("- plugins:\n  - name: predicates\n  - name: capacity-card",
                               "  - name: predicates\n  - name: capacity-card")
        assert moved != config
        config = moved
    doc = dict(doc, scheduler_config=config)
    return doc, run_scenario(doc).to_json()


def test_capacity_card_tidal_policy_in_gangreclaim_where_its_tier_decides() -> None:
    doc, out = _capacity_card_case("tide-4-inference-reclaims-cards-from-training", tier_one=True)
    assert sorted(out["evicted"]) == sorted(doc["expect"]["evicted"]) and out["pipelined"] == doc["expect"]["pipelined"]
    _doc, out = _capacity_card_case("tide-4-training-never-reclaims", tier_one=True)
    assert out["evicted"] == [] and out["pipelined"] == {}
    # In the second tier, as the seed's config has it, the first tier's plugins (priority,
    # gang, conformance: every candidate) decide alone, as Volcano's tiers do (docs/reclaim.md).
    _doc, out = _capacity_card_case("tide-4-training-never-reclaims", tier_one=False)
    assert out["evicted"] != []
