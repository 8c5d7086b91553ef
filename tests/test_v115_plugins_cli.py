"""A config naming every plugin of Volcano v1.15.1 that issue 32's plugin part brought
(resource-strategy-fit, resourcequota, usage, rescheduling, numa-aware, extender) starts
``tidesched schedule`` (with the shuffle action), which reads the ResourceQuota and Numatopology
objects beside the others. (``tidesched run`` with the same plugins:
tests/e2e/test_e2e_v115_plugins.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from builders import node, pod, podgroup, queue
from tidesched.cli import app

CONFIG = """
actions: "enqueue, allocate, backfill, shuffle"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: resourcequota
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: resource-strategy-fit
    arguments:
      resources: {nvidia.com/*: {type: MostAllocated, weight: 2}, cpu: {type: LeastAllocated, weight: 1}}
      sra: {enable: true, resources: nvidia.com/gpu, weight: 1}
  - name: usage
  - name: rescheduling
  - name: numa-aware
  - name: extender
    arguments:
      extender.urlPrefix: http://127.0.0.1:9
      extender.onSessionOpenVerb: onSessionOpen
      extender.ignorable: true
metrics:
  type: prometheus
  address: http://prometheus.monitoring:9090
"""


def test_schedule_with_every_v115_plugin(tmp_path: Path) -> None:
    conf = tmp_path / "all.conf"
    conf.write_text(CONFIG)
    topo = {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": "n1"},
            "spec": {"policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "best-effort"},
                     "numares": {"cpu": {"allocatable": "0-3", "capacity": 4}},
                     "cpuDetail": {str(c): {"numa": 0, "socket": 0, "core": c} for c in range(4)}}}
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "ns"},
             "status": {"hard": {"cpu": "2"}, "used": {"cpu": "0"}}}
    objs = [node("n1"), node("n2", nvidia_com__gpu="4"), queue("default"), topo, quota,
            podgroup("small", 1, phase="Pending", min_resources={"cpu": "1"}), pod("s", "small"),
            podgroup("big", 1, phase="Pending", min_resources={"cpu": "4"}), pod("b", "big", cpu="4")]
    f = tmp_path / "objs.yaml"
    f.write_text(yaml.safe_dump_all(objs))
    res = CliRunner().invoke(app, ["schedule", "-c", str(conf), "--format", "json", str(f)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["podgroups"]["ns/big"] == "Pending"  # the quota holds 2 cpu
    assert out["podgroups"]["ns/small"] != "Pending"
