"""A config naming every Volcano v1.15 action and plugin of issue 32's first part (gangpreempt,
gangreclaim, shuffle; pdb, cdp, tdm, task-topology) starts ``tidesched schedule`` and
``tidesched run`` (the latter as a real process against the fake API server), and both
schedule with it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from builders import node, pod, podgroup, queue
from cluster_helpers import bound_nodes, fake_api, wait
from tidesched.cli import app

CONFIG = """\
actions: "enqueue, allocate, backfill, gangpreempt, gangreclaim, shuffle"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: pdb
    enabledVictim: false
  - name: cdp
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: tdm
    arguments:
      tdm.revocable-zone.rz1: "0:00-0:00"
      tdm.evict.period: 1m
  - name: task-topology
    arguments:
      task-topology.weight: 10
configurations:
- name: gangpreempt
  arguments: {maxDomains: 4, allowWholeBundle: true}
- name: gangreclaim
  arguments: {maxDomains: 4, allowWholeBundle: false}
"""


def _objects() -> list[dict]:
    pg = podgroup("tf", 2, queue="default", phase="Pending")
    pg["metadata"]["annotations"] = {"volcano.sh/task-topology-affinity": "ps,worker"}
    pods = [pod(f"tf-{role}-0", "tf", annotations={"volcano.sh/task-spec": role, "volcano.sh/revocable-zone": "*"})
            for role in ("ps", "worker")]
    revocable = node("r1", cpu="4", labels={"volcano.sh/revocable-zone": "rz1"})
    return [queue("default"), node("n1", cpu="4"), revocable, pg, *pods]


def test_schedule_takes_the_config(tmp_path: Path) -> None:
    conf = tmp_path / "v115.conf"
    conf.write_text(CONFIG)
    objs = tmp_path / "objs.yaml"
    objs.write_text(yaml.safe_dump_all(_objects()))
    result = CliRunner().invoke(app, ["schedule", "--config", str(conf), "--format", "json", str(objs)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    # task-topology packs the bucket, tdm scores the open revocable node first for these pods.
    assert out["bound"] == {"ns/tf-ps-0": "r1", "ns/tf-worker-0": "r1"}


def test_run_starts_with_the_config_and_binds(tmp_path: Path) -> None:
    conf = tmp_path / "v115.conf"
    conf.write_text(CONFIG)
    log = tmp_path / "run.log"
    with fake_api() as api:
        api.create_many(_objects())
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tidesched.cli", "run", f"--master={api.url}", f"--scheduler-conf={conf}",
                 "--schedule-period=100ms", "-v=0"],
                stdout=out, stderr=subprocess.STDOUT)
        try:
            assert wait(lambda: all(bound_nodes(api).values()), 30), log.read_text(errors="replace")[-4000:]
            assert bound_nodes(api) == {"ns/tf-ps-0": "r1", "ns/tf-worker-0": "r1"}
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, log.read_text(errors="replace")[-4000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert "Traceback" not in log.read_text(errors="replace")
