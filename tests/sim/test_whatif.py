"""What-if simulation from a dump (``kubectl get ... -o yaml``, a v1 List): the cluster at t=0, new
manifests added, running pods ending after their expected run times, the cluster's own config
(issue 14)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tidesched.cli import app
from tidesched.sim.vocabulary import DURATION_ANNOTATION
from tidesched.sim.whatif import WhatIfError, cluster_objects, from_dump, run_whatif

ROOT = Path(__file__).resolve().parents[2]
CONF = (ROOT / "tests/data/config/seed000_tidal.conf").read_text()
NOW = 1795000000.0  # the moment of the dump
H200 = "NVIDIA-H200"


def ts(seconds_before: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(NOW - seconds_before, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def gpu_node(name: str, cards: int = 8) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "creationTimestamp": ts(86400),
                     "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": H200, "nvidia.com/gpu.count": str(cards)}},
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(cards)},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def queue(name: str, quota: dict[str, int], reclaimable: bool = True, priority: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name, "creationTimestamp": ts(86400), "annotations": {"volcano.sh/card.quota": json.dumps(quota)}},
        "spec": {"weight": 1, "reclaimable": reclaimable, "priority": priority,
                 "capability": {"cpu": "256", "memory": "2Ti"}},
        "status": {"state": "Open"},
    }


def podgroup(ns: str, name: str, queue_name: str, phase: str, owner: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": ts(7200),
                     "ownerReferences": [{"apiVersion": "v1", "kind": owner, "name": name, "uid": f"uid-{name}", "controller": True}]},
        "spec": {"minMember": 1, "queue": queue_name},
        "status": {"phase": phase},
    }


def pod(ns: str, name: str, group: str, queue_name: str, cards: int, *, node: str = "", started: float | None = None,
        owner: str = "Job", runtime: str | None = None, priority_class: str | None = None) -> dict[str, Any]:
    ann = {"scheduling.k8s.io/group-name": group, "volcano.sh/card.name": H200, "scheduling.volcano.sh/queue-name": queue_name}
    if runtime:
        ann[DURATION_ANNOTATION] = runtime
    p: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}", "creationTimestamp": ts(7200), "annotations": ann,
                     "ownerReferences": [{"apiVersion": "v1", "kind": owner, "name": group, "uid": f"uid-{group}", "controller": True}]},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(cards)},
            "limits": {"nvidia.com/gpu": str(cards)}}}]},
        "status": {"phase": "Pending"},
    }
    if priority_class:
        p["spec"]["priorityClassName"] = priority_class
    if node:
        p["spec"]["nodeName"] = node
        p["status"] = {"phase": "Running", "startTime": ts(started or 0)}
    return p


def dump(tmp_path: Path, items: list[dict[str, Any]], name: str = "cluster.yaml", config: bool = True) -> Path:
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "tidesched-scheduler-configmap", "namespace": "volcano-system"},
          "data": {"volcano-scheduler.conf": CONF}}
    path = tmp_path / name
    items = [*items, cm] if config else items
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}))
    os.utime(path, (NOW, NOW))
    return path


def new_job(tmp_path: Path, cards: int, queue_name: str = "team-a", name: str = "new-train") -> Path:
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"schedulerName": "volcano", "queue": queue_name, "minAvailable": 1, "tasks": [{
            "name": "worker", "replicas": 1,
            "template": {"metadata": {"annotations": {"volcano.sh/card.name": H200}},
                         "spec": {"containers": [{"name": "c", "resources": {
                             "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(cards)},
                             "limits": {"nvidia.com/gpu": str(cards)}}}]}}}]},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def busy_cluster() -> list[dict[str, Any]]:
    """Two 8-card nodes: a 2 h training pod started 1 h ago fills h1; a service holds 4 cards
    of h2 (runs on); a pod without a run time holds the other 4 of h2."""
    return [
        gpu_node("h1"), gpu_node("h2"),
        queue("team-a", {H200: 16}), queue("default", {H200: 16}),
        podgroup("ml", "old-train", "team-a", "Running", "Job"),
        pod("ml", "old-train-0", "old-train", "team-a", 8, node="h1", started=3600, runtime="2h"),
        podgroup("web", "svc", "default", "Running", "ReplicaSet"),
        pod("web", "svc-abcde", "svc", "default", 4, node="h2", started=50000, owner="ReplicaSet"),
        podgroup("ml", "adhoc", "team-a", "Running", "Job"),
        pod("ml", "adhoc-0", "adhoc", "team-a", 4, node="h2", started=60),
    ]


def test_new_job_waits_for_the_running_pods_expected_end(tmp_path: Path) -> None:
    w = from_dump(dump(tmp_path, busy_cluster()), [new_job(tmp_path, 8)], default_runtime=7200.0)
    assert w.config_source == "ConfigMap volcano-system/tidesched-scheduler-configmap"
    assert w.config.actions == ["enqueue", "allocate", "backfill", "reclaim"]
    sim = run_whatif(w)
    wi = sim.result["whatif"]
    (job,) = wi["new_workloads"]
    assert job["name"] == "ml/new-train" and job["queue"] == "team-a"
    # old-train ran 1 h of its 2 h: h1 frees at t=1h (the adhoc pod, 2 h from now by default, later).
    assert 3600 <= job["wait"] <= 3602, job
    new_binds = [b for b in wi["binds"] if b["new"]]
    assert [(b["pod"], b["node"]) for b in new_binds] == [("ml/new-train-worker-0", "h1")]
    assert wi["evictions_total"] == 0 and not wi["never_started"]
    assert not sim.result["invariants"]["violations"]


def test_horizon_and_runtime_default(tmp_path: Path) -> None:
    path = dump(tmp_path, busy_cluster())
    short = run_whatif(from_dump(path, [new_job(tmp_path, 8)], default_runtime=7200.0, horizon=1800.0)).result["whatif"]
    assert short["never_started"] == ["ml/new-train"] and short["horizon"] == 1800.0
    # 4 cards fit once adhoc-0 (no run time: the default, from now) ends, before old-train does.
    quick = run_whatif(from_dump(path, [new_job(tmp_path, 4)], default_runtime=600.0)).result["whatif"]
    assert 600 <= quick["new_workloads"][0]["wait"] <= 602


def test_cluster_objects_rebase_times_and_set_remaining_run_times() -> None:
    warnings: list[str] = []
    done = pod("ml", "done", "old-train", "team-a", 1, node="h1", started=9000)
    done["status"]["phase"] = "Succeeded"
    leaving = pod("ml", "leaving", "old-train", "team-a", 1, node="h1", started=9000)
    leaving["metadata"]["deletionTimestamp"] = ts(-25)
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "web"}}
    objs = cluster_objects(busy_cluster() + [done, leaving, deploy], now=NOW, default_runtime=900.0, period=1.0,
                           warnings=warnings)
    by_name = {o["metadata"]["name"]: o for o in objs}
    assert "done" not in by_name and "d" not in by_name
    assert warnings == ["1 Deployment object(s) of the cluster are not simulated (pods they own are taken as they are)"]
    ann = lambda n: by_name[n]["metadata"]["annotations"].get(DURATION_ANNOTATION)  # noqa: E731
    assert ann("old-train-0") == "3600.0s"  # 2 h expected, 1 h run
    assert ann("adhoc-0") == "900.0s"  # no run time: the default, from now
    assert ann("svc-abcde") is None  # a service runs on
    assert ann("leaving") == "25.0s" and "deletionTimestamp" not in by_name["leaving"]["metadata"]
    # t=0 is the dump's moment: a pod started an hour before it started at -1 h.
    assert by_name["old-train-0"]["status"]["startTime"] == "2024-12-31T23:00:00Z"


def test_config_is_found_where_the_cluster_keeps_it(tmp_path: Path) -> None:
    def config_map(name: str, conf: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "volcano-system"},
                "data": {"volcano-scheduler.conf": conf}}

    tidesched_conf = 'actions: "enqueue, allocate, backfill, reclaim"\ntiers:\n- plugins:\n  - name: gang\n'
    volcano_conf = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: sla\n'
    # Neither: the default run uses, said so.
    bare = dump(tmp_path, [gpu_node("h1")], "bare.yaml", config=False)
    w = from_dump(bare)
    assert w.config.actions == ["enqueue", "allocate", "backfill"]
    assert w.config_source.startswith("the default configuration (Volcano's built-in, as tidesched run uses): "
                                      "no ConfigMap volcano-system/tidesched-scheduler-configmap or "
                                      "volcano-system/volcano-scheduler-configmap")
    # Volcano's, in a cluster where tidesched replaced vc-scheduler and kept Volcano's config.
    vc = dump(tmp_path, [gpu_node("h1"), config_map("volcano-scheduler-configmap", volcano_conf)], "vc.yaml",
              config=False)
    w = from_dump(vc)
    assert (w.config.actions, w.config_source) == (["enqueue", "allocate"], "ConfigMap volcano-system/volcano-scheduler-configmap")
    # tidesched's own first.
    both = dump(tmp_path, [gpu_node("h1"), config_map("volcano-scheduler-configmap", volcano_conf),
                           config_map("tidesched-scheduler-configmap", tidesched_conf)], "both.yaml", config=False)
    w = from_dump(both)
    assert w.config.actions == ["enqueue", "allocate", "backfill", "reclaim"]
    assert w.config_source == "ConfigMap volcano-system/tidesched-scheduler-configmap"
    # One named with --config-map must exist.
    w = from_dump(both, config_map="volcano-system/volcano-scheduler-configmap")
    assert w.config.actions == ["enqueue", "allocate"]


def test_missing_config_map_and_bad_manifests_are_named(tmp_path: Path) -> None:
    path = tmp_path / "bare.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [gpu_node("h1")]}))
    with pytest.raises(WhatIfError, match="ConfigMap team/sched not found in .*bare.yaml: give the scheduler config"):
        from_dump(path, config_map="team/sched")
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nmetadata: {name: p, annotations: {sim.tidesched.io/duration: soon}}\nspec: {}\n")
    with pytest.raises(WhatIfError, match=r"bad.yaml.*sim.tidesched.io/duration"):
        run_whatif(from_dump(dump(tmp_path, busy_cluster()), [bad]))


def test_cli_from_dump_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(app, [
        "simulate", "--from-dump", str(dump(tmp_path, busy_cluster())), "--add", str(new_job(tmp_path, 8)),
        "--default-runtime", "2h", "--for", "3h", "--out", str(out), "--no-progress",
    ])
    assert res.exit_code == 0, res.output
    assert "Job ml/new-train (queue team-a): starts after 1h" in res.output
    assert "bind ml/new-train-worker-0 -> h1" in res.output
    result = json.loads((out / "result.json").read_text())
    assert result["whatif"]["new_workloads"][0]["wait"] >= 3600 and result["duration"] == 10800
    html = (out / "report.html").read_text()
    assert "What if" in html and "ml/new-train" in html
    both = CliRunner().invoke(app, ["simulate", "--from-dump", "x.yaml", "--from-cluster"])
    assert both.exit_code == 2 and "not both" in both.output


def test_inference_added_reclaims_cards_from_training(tmp_path: Path) -> None:
    items = [
        gpu_node("h1"),
        queue("online", {H200: 8}, reclaimable=False, priority=80000), queue("offline", {H200: 8}),
        queue("default", {H200: 0}),
        podgroup("ml", "train", "offline", "Running", "Job"),
        pod("ml", "train-0", "train", "offline", 8, node="h1", started=600, runtime="10h"),
    ]
    deploy = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "chat", "namespace": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "chat"}}, "template": {
            "metadata": {"labels": {"app": "chat"},
                         "annotations": {"volcano.sh/card.name": H200, "scheduling.volcano.sh/queue-name": "online"}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}},
    }
    add = tmp_path / "chat.yaml"
    add.write_text(yaml.safe_dump(deploy))
    wi = run_whatif(from_dump(dump(tmp_path, items), [add], horizon=600.0)).result["whatif"]
    # The training pod (a Job's: training, by the config's owner mapping) makes room for inference.
    assert [(e["pod"], e["new"]) for e in wi["evictions"]] == [("ml/train-0", False)]
    assert "reclaim" in wi["evictions"][0]["reason"]
    (chat,) = wi["new_workloads"]
    assert chat["kind"] == "Deployment" and chat["started"] is not None
    assert [b["node"] for b in wi["binds"] if b["new"]] == ["h1"]
