"""ResourceQuota in the simulator: the world holds quotas (as given: no quota controller keeps
status.used) and the resourcequota plugin keeps a job whose minResources its namespace's quota
cannot hold out of the queue, while a job in another namespace runs."""

from __future__ import annotations

from pathlib import Path

from sim.test_engine import h200_node, load, queue, train_job

from tidesched.sim import run

CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: resourcequota
- plugins:
  - name: predicates
  - name: nodeorder
"""


def test_quota_keeps_a_job_pending(tmp_path: Path) -> None:
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "small", "namespace": "ml"},
             "spec": {"hard": {"cpu": "1"}}, "status": {"hard": {"cpu": "1"}, "used": {"cpu": "0"}}}
    free = train_job("free", 1, 4, "10m")
    free["metadata"]["namespace"] = "research"
    doc = {
        "name": "resourcequota",
        "schedulePeriod": "1m",
        "duration": "30m",
        "scheduler": {"config": CONFIG},
        "objects": [h200_node("n1"), queue("train"), quota, train_job("held", 1, 4, "10m"), free],
    }
    r = run(load(tmp_path, doc)).result
    jobs = {j["name"]: j for j in r["jobs"]}
    assert jobs["research/free"]["phase"] == "Completed"
    assert jobs["ml/held"]["started"] is None
    held = [e for e in r["events"] if e["reason"] == "Unschedulable" and e["message"].startswith("resource quota insufficient")]
    assert held, "no quota event"
    assert r["invariants"]["violations"] == []
