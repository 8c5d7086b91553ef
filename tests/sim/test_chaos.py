"""Chaos simulations (issue 13): seeded generation, invariants held under faults, and a failing
run shrunk to a scenario file that reproduces it (proved with a deliberately injected bug)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tidesched.cli import app
from tidesched.sim.chaos import (
    FAULT_KINDS,
    dump_document,
    generate,
    run_chaos,
    run_document,
    shrink,
    to_scenario,
)
from tidesched.sim.invariants import InvariantChecker, Violation
from tidesched.sim.vocabulary import ScenarioError
from tidesched.sim.scenario import load_scenario, scenario_from_mapping
from tidesched.sim.world import controller_owner

BUG = "TEST bug"


def _bug(checker: InvariantChecker, t: float, applied: Any, _d: Any) -> list[Violation]:
    """A made-up rule standing for a scheduler bug: pods of a Volcano Job bound while some node
    is NotReady. It needs a NotReady fault, a Job, a queue and a node to bind on."""
    records = checker.world.cache.records["Node"]
    if not any(rec is not None and not rec.ready for rec in records.values()):
        return []
    jobs = [pk for pk, _n in applied.bound if (controller_owner(checker.world.get("Pod", pk) or {}) or ("",))[0] == "Job"]
    return [Violation(t, BUG, f"job pods {', '.join(jobs)} bound while a node is NotReady")] if jobs else []


@pytest.fixture
def injected_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    original = InvariantChecker.check

    def check(self: InvariantChecker, t: float, applied: Any, d: Any) -> list[Violation]:
        found = original(self, t, applied, d)
        extra = _bug(self, t, applied, d)
        self.violations.extend(extra)
        return found + extra

    monkeypatch.setattr(InvariantChecker, "check", check)


def test_generation_is_seeded_and_covers_every_fault_kind() -> None:
    a, b = generate(3), generate(3)
    assert a.doc == b.doc and a.kinds == b.kinds
    assert generate(4).doc != a.doc
    assert len(a.kinds) == len(a.doc["events"])
    seen: Counter[str] = Counter()
    for seed in range(12):
        seen.update(generate(seed).kinds)
    assert set(FAULT_KINDS) <= set(seen), set(FAULT_KINDS) - set(seen)
    kinds = {o["kind"] for o in a.doc["objects"]}
    assert {"Node", "Queue", "PriorityClass", "Deployment", "Job"} <= kinds
    parents = {o["spec"].get("parent") for o in a.doc["objects"] if o["kind"] == "Queue"}
    assert {"root", "online", "offline"} <= parents  # a queue tree, card quotas on the leaves


def test_a_written_chaos_scenario_loads_back_the_same(tmp_path: Path) -> None:
    gen = generate(7, hours=6)
    path = tmp_path / "chaos.yaml"
    path.write_text(dump_document(gen.doc, "header line\nsecond"), encoding="utf-8")
    assert path.read_text().startswith("# header line\n# second\n")
    assert yaml.safe_load(path.read_text()) == gen.doc
    sc = load_scenario(path)
    direct = to_scenario(gen.doc)
    assert [(e.at, e.action) for e in sc.sorted_events()] == [(e.at, e.action) for e in direct.sorted_events()]
    assert sc.check_restart and sc.duration == 6 * 3600


def test_new_scenario_events_are_checked() -> None:
    base = {"name": "x", "objects": [{"kind": "Queue", "metadata": {"name": "q"}}]}
    with pytest.raises(ScenarioError, match=r"events\[0\].failPod: name exactly one of name, deployment or job"):
        scenario_from_mapping({**base, "events": [{"at": 1, "failPod": {"job": "a/b", "deployment": "a/c"}}]}, "s")
    with pytest.raises(ScenarioError, match=r"events\[0\].setConfig: .*unknown action"):
        scenario_from_mapping({**base, "events": [{"at": 1, "setConfig": 'actions: "enqueu"'}]}, "s")
    with pytest.raises(ScenarioError, match="checkRestart: expected true or false"):
        scenario_from_mapping({**base, "checkRestart": "yes"}, "s")
    sc = scenario_from_mapping(
        {**base, "events": [{"at": 1, "failPod": {"deployment": "web"}}, {"at": 2, "setConfig": {"config": 'actions: "allocate"'}}]},
        "s",
    )
    assert sc.events[0].args == {"deployment": "default/web", "exitCode": 1}
    assert sc.events[1].args["config"].actions == ["allocate"]


@pytest.mark.parametrize("seed", [1, 11])
def test_chaos_days_keep_every_invariant(seed: int) -> None:
    outcome = run_chaos(seed, shrink_failures=False)
    r = outcome.sim.result
    assert r["invariants"]["violations"] == []
    # The day did happen: sessions checked, pods bound, faults fired, inference reclaimed cards.
    assert r["invariants"]["checked_steps"] == r["summary"]["sessions"] > 50
    assert r["summary"]["pods_bound"] > 30 and r["summary"]["reclaims"] > 0
    assert sum(outcome.faults()[k] for k in FAULT_KINDS) >= 12
    reasons = r["summary"]["events_by_reason"]
    assert reasons.get("ConfigReloaded", 0) + reasons.get("NodeChanged", 0) + reasons.get("Removed", 0) > 0


def test_shrinking_keeps_the_same_failure_and_the_file_reproduces_it(injected_bug: None, tmp_path: Path) -> None:
    gen = generate(0, hours=6)
    gen.doc["checkRestart"] = False  # quicker; the injected rule does not need it
    sim = run_document(gen.doc)
    assert sim.result["invariants"]["violations"][0]["rule"] == BUG
    shrunk = shrink(gen.doc, BUG, max_runs=200)
    objects, events = shrunk.objects, shrunk.events
    assert objects + events <= (shrunk.objects_before + shrunk.events_before) // 5
    assert any(e.get("setNode", {}).get("ready") is False for e in shrunk.doc.get("events", []))
    assert any(o["kind"] == "Job" for o in shrunk.doc.get("objects", [])) or any(
        "submit" in e for e in shrunk.doc.get("events", [])
    )
    # 1-minimal: removing any one remaining object or event loses the failure.
    for section in ("objects", "events"):
        for i in range(len(shrunk.doc.get(section) or [])):
            smaller = dict(shrunk.doc)
            smaller[section] = [x for j, x in enumerate(shrunk.doc[section]) if j != i]
            if not smaller[section]:
                del smaller[section]
            viol = run_document(smaller).result["invariants"]["violations"]
            assert not any(v["rule"] == BUG for v in viol), (section, i)
    # The file fails the same way through the command line.
    path = tmp_path / "reproduce.yaml"
    path.write_text(dump_document(shrunk.doc), encoding="utf-8")
    res = CliRunner().invoke(app, ["simulate", str(path), "--out", str(tmp_path / "out"), "--no-progress"])
    assert res.exit_code == 1, res.output
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["invariants"]["violations"][0]["rule"] == BUG


def test_reproducer_fails_only_because_of_the_bug(
    injected_bug: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line's --chaos path: a failure is shrunk and written as reproduce.yaml, which
    fails again with the bug in place and passes without it."""
    out = tmp_path / "chaos"
    res = CliRunner().invoke(app, ["simulate", "--chaos", "0", "--chaos-hours", "2", "--out", str(out), "--no-progress"])
    assert res.exit_code == 1, res.output
    assert "shrunk from" in res.output and (out / "reproduce.yaml").is_file() and (out / "scenario.yaml").is_file()
    text = (out / "reproduce.yaml").read_text()
    assert text.startswith("# Chaos scenario of generator seed 0: invariant 'TEST bug' fails.")
    again = CliRunner().invoke(app, ["simulate", str(out / "reproduce.yaml"), "--out", str(tmp_path / "again"), "--no-progress"])
    assert again.exit_code == 1, again.output
    monkeypatch.undo()  # the bug fixed: the same file passes
    clean = CliRunner().invoke(app, ["simulate", str(out / "reproduce.yaml"), "--out", str(tmp_path / "clean"), "--no-progress"])
    assert clean.exit_code == 0, clean.output


def test_chaos_option_refuses_a_scenario_beside_it(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["simulate", str(tmp_path), "--chaos", "1"])
    assert res.exit_code == 2 and "--chaos generates its own scenario" in res.output
