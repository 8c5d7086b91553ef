"""``tidesched schedule --feature-gates``: with SchedulingGatesQueueAdmission the JSON contract
gains ``ungated`` (the pods whose queue-admission gate the session removes); a bad item exits 2."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from builders import BASIC_CONFIG, node, pod, podgroup
from tidesched.cli import app
from tidesched.model.gates import QUEUE_ALLOCATION_GATE

runner = CliRunner()


def test_schedule_says_which_gates_go(tmp_path: Path) -> None:
    f = tmp_path / "objs.yaml"
    gated = pod("a", "pg", annotations={QUEUE_ALLOCATION_GATE: "true"},
                spec={"schedulingGates": [{"name": QUEUE_ALLOCATION_GATE}]})
    f.write_text(yaml.safe_dump_all([node("n1"), podgroup("pg", 1), gated]))
    conf = tmp_path / "sched.conf"
    conf.write_text(BASIC_CONFIG)
    base = ["schedule", "-c", str(conf), "--format", "json", str(f)]
    res = runner.invoke(app, [*base, "--feature-gates", "SchedulingGatesQueueAdmission=true"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["ungated"] == ["ns/a"] and out["bound"] == {}
    res = runner.invoke(app, base)
    assert res.exit_code == 0 and "ungated" not in json.loads(res.stdout)
    res = runner.invoke(app, [*base, "--feature-gates", "SchedulingGatesQueueAdmission=maybe"])
    assert res.exit_code == 2 and "--feature-gates: invalid value of SchedulingGatesQueueAdmission=maybe" in res.output
