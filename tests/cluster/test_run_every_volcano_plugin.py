"""One config naming every action and plugin Volcano v1.15.1 registers (its actions/factory.go and
plugins/factory.go) starts ``tidesched schedule`` and ``tidesched run`` (a real process against the
fake API server), and both bind with it; each plugin's own behaviour is tested beside it."""

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
from tidesched.scheduler import known_actions, known_plugins

# Volcano v1.15.1's registries, by config name.
VOLCANO_ACTIONS = ["enqueue", "allocate", "backfill", "preempt", "reclaim", "gangpreempt", "gangreclaim", "shuffle"]
VOLCANO_PLUGINS = [
    "binpack", "capacity", "cdp", "conformance", "deviceshare", "drf", "extender", "gang", "network-topology-aware",
    "nodegroup", "nodeorder", "numa-aware", "overcommit", "pdb", "predicates", "priority", "proportion",
    "rescheduling", "resource-strategy-fit", "resourcequota", "sla", "task-topology", "tdm", "usage",
]
# nodegroup is known but left out of the config below: with no queue affinity its strict default
# keeps every pod off nodes without a node-group label (tests/scenarios/nodegroup.yaml).
CONFIG = """\
actions: "enqueue, allocate, backfill, preempt, reclaim, gangpreempt, gangreclaim, shuffle"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: sla
  - name: pdb
  - name: cdp
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: true
  - name: proportion
  - name: capacity
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
  - name: deviceshare
  - name: resource-strategy-fit
  - name: resourcequota
  - name: numa-aware
  - name: tdm
  - name: task-topology
  - name: usage
  - name: rescheduling
  - name: extender
    arguments:
      extender.urlPrefix: http://127.0.0.1:9/extender
"""


def _objects() -> list[dict]:
    return [queue("default"), node("n1", cpu="8"), podgroup("pg", 2, queue="default", phase="Pending"),
            pod("pg-0", "pg"), pod("pg-1", "pg")]


def test_every_volcano_action_and_plugin_is_known() -> None:
    assert set(VOLCANO_ACTIONS) <= set(known_actions())
    assert set(VOLCANO_PLUGINS) <= set(known_plugins())


def test_schedule_takes_the_config(tmp_path: Path) -> None:
    conf = tmp_path / "all.conf"
    conf.write_text(CONFIG)
    objs = tmp_path / "objs.yaml"
    objs.write_text(yaml.safe_dump_all(_objects()))
    result = CliRunner().invoke(app, ["schedule", "--config", str(conf), "--format", "json", str(objs)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["bound"] == {"ns/pg-0": "n1", "ns/pg-1": "n1"}


def test_run_starts_with_the_config_and_binds(tmp_path: Path) -> None:
    conf = tmp_path / "all.conf"
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
            assert bound_nodes(api) == {"ns/pg-0": "n1", "ns/pg-1": "n1"}
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, log.read_text(errors="replace")[-4000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert "Traceback" not in log.read_text(errors="replace")
