"""The command line: JSON contract, table output, explain, and clear errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from builders import BASIC_CONFIG, node, pod, podgroup
from tidesched.cli import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "basic"


def _write(tmp_path: Path, objs: list[dict], name: str = "objs.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump_all(objs))
    return p


def _config(tmp_path: Path) -> Path:
    c = tmp_path / "sched.conf"
    c.write_text(BASIC_CONFIG)
    return c


def test_schedule_json_contract(tmp_path: Path) -> None:
    f = _write(tmp_path, [node("n1", cpu="2"), podgroup("pg", 2), pod("a", "pg"), pod("b", "pg"),
                          podgroup("big", 1), pod("c", "big", cpu="8")])
    res = runner.invoke(app, ["schedule", "-c", str(_config(tmp_path)), "--format", "json", str(f)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) == {"bound", "pipelined", "evicted", "podgroups", "events"}
    assert out["bound"] == {"ns/a": "n1", "ns/b": "n1"}
    assert out["podgroups"] == {"ns/big": "Inqueue", "ns/pg": "Inqueue"}
    ev = [e for e in out["events"] if e["kind"] == "Pod" and e["name"] == "c"]
    assert ev and set(ev[0]) == {"kind", "namespace", "name", "type", "reason", "message"}
    assert ev[0]["message"] == "0/1 nodes are unavailable: 1 Insufficient cpu."


def test_schedule_default_config_on_bundled_example() -> None:
    res = runner.invoke(app, ["schedule", "--format", "json", str(EXAMPLES)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # The TFJob master goes to a CPU node, both GPU workers to GPU nodes.
    assert out["bound"]["ml/tf-test-master-0"].startswith("cpu-node")
    assert out["bound"]["ml/tf-test-worker-0"].startswith("gpu-node")
    assert out["bound"]["ml/tf-test-worker-1"].startswith("gpu-node")
    assert not any(k.startswith("batch/big-train") for k in out["bound"])


def test_schedule_table_output(tmp_path: Path) -> None:
    f = _write(tmp_path, [node("n1"), podgroup("pg", 1), pod("a", "pg")])
    res = runner.invoke(app, ["schedule", "-c", str(_config(tmp_path)), str(f)])
    assert res.exit_code == 0
    assert "ns/a" in res.stdout and "1 bound, 0 pipelined, 0 evicted" in res.stdout


def test_bad_inputs_exit_2_with_a_clear_message(tmp_path: Path) -> None:
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("kind: Node\nmetadata: {name: [x\n")
    res = runner.invoke(app, ["schedule", str(bad_yaml)])
    assert res.exit_code == 2 and "bad.yaml" in res.output and "invalid YAML" in res.output
    assert "Traceback" not in res.output

    unknown = _write(tmp_path, [{"kind": "Gadget", "metadata": {"name": "g"}}], "unknown.yaml")
    res = runner.invoke(app, ["schedule", str(unknown)])
    assert res.exit_code == 2 and "unknown kind 'Gadget'" in res.output

    badq = _write(tmp_path, [node("n1", memory="12Qi")], "badq.yaml")
    res = runner.invoke(app, ["schedule", str(badq)])
    assert res.exit_code == 2 and "Node n1" in res.output and "12Qi" in res.output
    res = runner.invoke(app, ["schedule", "--skip-invalid", str(badq)])
    assert res.exit_code == 0

    conf = tmp_path / "bad.conf"
    conf.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gangg\n')
    res = runner.invoke(app, ["schedule", "-c", str(conf), str(badq)])
    assert res.exit_code == 2 and "bad.conf:4" in res.output and "gangg" in res.output

    res = runner.invoke(app, ["schedule", str(tmp_path / "missing.yaml")])
    assert res.exit_code == 2 and "no such file" in res.output


def test_explain_pending_and_bound(tmp_path: Path) -> None:
    f = _write(tmp_path, [node("n1", cpu="2", labels={"zone": "a"}), node("n2", cpu="8", labels={"zone": "b"}),
                          podgroup("pg", 1), pod("a", "pg", cpu="4", spec={"nodeSelector": {"zone": "a"}}),
                          podgroup("ok", 1), pod("b", "ok")])
    res = runner.invoke(app, ["explain", "ns/a", "-c", str(_config(tmp_path)), str(f)])
    assert res.exit_code == 0, res.output
    assert "stays pending" in res.stdout
    assert "1 Insufficient cpu" in res.stdout
    assert "1 node(s) didn't match Pod's node affinity/selector" in res.stdout
    res = runner.invoke(app, ["explain", "ns/b", "-c", str(_config(tmp_path)), str(f)])
    assert "would be bound to node" in res.stdout
    res = runner.invoke(app, ["explain", "ns/nope", "-c", str(_config(tmp_path)), str(f)])
    assert res.exit_code == 2


@pytest.mark.parametrize("kind", [True, 7, ["Pod"], {"a": 1}, None, 1.5])
def test_a_kind_that_is_not_a_string_is_a_clear_error(tmp_path: Path, kind: object) -> None:
    p = _write(tmp_path, [node("n1"), {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}}])
    result = runner.invoke(app, ["schedule", str(p)])
    assert result.exit_code == 2, result.output
    assert f"{p.name}#2: field kind must be a string" in result.output


@pytest.mark.parametrize("value", ["Inf", "-inf", "NaN", "1e400", 1e400, "99999999999", 2**70, "1.5", True])
def test_an_integer_field_that_is_no_integer_is_a_clear_error(tmp_path: Path, value: object) -> None:
    pg = podgroup("pg", min_member=1)
    pg["spec"]["minMember"] = value
    p = _write(tmp_path, [node("n1"), pg])
    result = runner.invoke(app, ["schedule", str(p)])
    assert result.exit_code == 2, result.output
    assert "spec.minMember" in result.output and "Traceback" not in result.output


# -- --now and the gang timeout (EXT-1) ---------------------------------------------------------


def _timeout_objects() -> list[dict]:
    pg = podgroup("pg", 2)
    pg["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    pg["metadata"]["annotations"] = {"scheduling.tidesched.io/gang-timeout-seconds": "600"}
    return [node("n1", cpu="2"), pg, pod("a", "pg", cpu="2"), pod("b", "pg", cpu="2")]


def test_schedule_now_sets_the_session_time_for_gang_timeouts(tmp_path: Path) -> None:
    f = _write(tmp_path, _timeout_objects())
    cfg = str(_config(tmp_path))
    early = runner.invoke(app, ["schedule", "-c", cfg, "-o", "json", "--now", "2026-01-01T00:05:00Z", str(f)])
    late = runner.invoke(app, ["schedule", "-c", cfg, "-o", "json", "--now", "2026-01-01T08:10:00+08:00", str(f)])
    assert early.exit_code == 0 and late.exit_code == 0, early.output + late.output
    early_reasons = {e["reason"] for e in json.loads(early.stdout)["events"]}
    late_events = json.loads(late.stdout)["events"]
    assert "GangTimeout" not in early_reasons
    timeout = [e for e in late_events if e["reason"] == "GangTimeout"]
    assert timeout and timeout[0]["kind"] == "PodGroup" and "waited 10m0s since 2026-01-01T00:00:00Z for minMember 2" in timeout[0]["message"]
    # Without --now the session's time is the current time: a gang created in 2000 is past due.
    old = _timeout_objects()
    old[1]["metadata"]["creationTimestamp"] = "2000-01-01T00:00:00Z"
    res = runner.invoke(app, ["schedule", "-c", cfg, "-o", "json", str(_write(tmp_path, old, "old.yaml"))])
    assert res.exit_code == 0, res.output
    assert any(e["reason"] == "GangTimeout" for e in json.loads(res.stdout)["events"])


def test_schedule_now_refuses_bad_times(tmp_path: Path) -> None:
    f = _write(tmp_path, _timeout_objects())
    for bad, words in (("yesterday", "not an RFC 3339 time"), ("2026-01-01T00:00:00", "no time zone")):
        res = runner.invoke(app, ["schedule", "--now", bad, str(f)])
        assert res.exit_code == 2 and "--now" in res.output and words in res.output, res.output


def test_explain_shows_the_gang_timeout_reason(tmp_path: Path) -> None:
    f = _write(tmp_path, _timeout_objects())
    res = runner.invoke(app, ["explain", "ns/b", "-c", str(_config(tmp_path)), "--now", "2026-01-01T01:00:00Z", str(f)])
    assert res.exit_code == 0, res.output
    assert "GangTimeout: gang timed out: waited 10m0s since 2026-01-01T00:00:00Z for minMember 2" in res.output
    assert "PodGroup event GangTimeout" in res.output


def test_explain_shows_a_card_reservation(tmp_path: Path) -> None:
    conf = tmp_path / "protect.conf"
    conf.write_text(BASIC_CONFIG + "  - name: cardprotect\n    arguments:\n      protectedModels: [NVIDIA-H200]\n")
    h200 = node("h200-1", cpu="64", memory="256Gi", labels={"nvidia.com/gpu.product": "NVIDIA-H200"}, nvidia_com__gpu="8")
    f = _write(tmp_path, [node("cpu-1", cpu="2"), h200, podgroup("cpu-job", 1), pod("c", "cpu-job", cpu="4")])
    res = runner.invoke(app, ["explain", "ns/c", "-c", str(conf), str(f)])
    assert res.exit_code == 0, res.output
    assert "1 Insufficient cpu, 1 node reserved for card model NVIDIA-H200" in res.output
