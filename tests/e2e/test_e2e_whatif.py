"""``tidesched simulate --from-cluster`` against the real control plane: the live cluster read once
(with the scheduler's own read-only ServiceAccount, as ``quota``; or with an operator's credentials,
then the config comes from the deployed ConfigMap), a new Volcano Job added, simulated forward: it
waits for the running job's expected end and binds where it frees cards; the cluster is untouched
(issue 14)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

from cluster import TIDESCHED, bound, create_queue, gpu_node, pods, volcano_job, wait_until

H200 = "NVIDIA-H200"
RUNTIME = "sim.tidesched.io/duration"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "COLUMNS": "250"}
    return subprocess.run([str(TIDESCHED), *args], capture_output=True, text=True, env=env, timeout=180)


def new_job(path: Path, ns: str) -> Path:
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "next", "namespace": ns, "annotations": {"volcano.sh/card.name": H200}},
        "spec": {"schedulerName": "volcano", "queue": "team-a", "minAvailable": 1, "tasks": [{
            "name": "worker", "replicas": 1,
            "template": {"metadata": {"annotations": {"volcano.sh/card.name": H200, RUNTIME: "30m"}},
                         "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {
                             "requests": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "8"},
                             "limits": {"nvidia.com/gpu": "8"}}}]}}}]},
    }
    path.write_text(yaml.safe_dump(job))
    return path


def test_what_if_on_the_live_cluster(e2e) -> None:
    api = e2e.api
    ns = e2e.namespace("whatif")
    gpu_node(api, "h200-1", H200, cards=8)
    gpu_node(api, "h200-2", H200, cards=8)
    create_queue(api, "team-a", annotations={"volcano.sh/card.quota": json.dumps({H200: 16})},
                 capability={"cpu": "64", "memory": "256Gi"})
    # Two running jobs of 8 cards: one expected to run 1 h, the other 3 h.
    short = volcano_job(api, ns, "short", replicas=1, queue="team-a", gpus=8, cpu="4", memory="8Gi",
                        annotations={"volcano.sh/card.name": H200}, pod_annotations={RUNTIME: "1h"})
    long = volcano_job(api, ns, "long", replicas=1, queue="team-a", gpus=8, cpu="4", memory="8Gi",
                       annotations={"volcano.sh/card.name": H200}, pod_annotations={RUNTIME: "3h"})
    e2e.scheduler()
    placed = wait_until(lambda: b if len(b := bound(api, ns)) == 2 else None, 30, "both jobs to bind")
    wait_until(lambda: all(p["status"].get("startTime") for p in pods(api, ns).values()), 30, "the pods to start")
    before = {n: p["metadata"]["resourceVersion"] for n, p in pods(api, ns).items()}
    add = new_job(e2e.tmp / "next.yaml", ns)

    # The scheduler's own ServiceAccount (read-only lists, as `quota`) with the config file.
    out = e2e.tmp / "whatif"
    sa = cli("simulate", "--from-cluster", "--kubeconfig", str(e2e.installed.kubeconfig), "--config",
             str(e2e.schedulers[0].conf), "--add", str(add), "--for", "2h", "--out", str(out), "--no-progress")
    assert sa.returncode == 0, sa.stderr + sa.stdout
    result = json.loads((out / "result.json").read_text())
    wi = result["whatif"]
    (job,) = wi["new_workloads"]
    assert job["wait"] is not None, result["events"][:20]
    assert job["name"] == f"{ns}/next"
    # It waits for the 1 h job (started seconds ago) and takes its node.
    assert 3400 <= job["wait"] <= 3601, job
    assert [(b["pod"], b["node"]) for b in wi["binds"] if b["new"]] == [(f"{ns}/next-worker-0", placed[short[0]])]
    assert wi["evictions_total"] == 0
    assert (out / "report.html").read_text().count(f"{ns}/next") >= 1
    assert f"Job {ns}/next (queue team-a): starts after" in sa.stdout

    # Without --config the deployed scheduler's ConfigMap is the config; the ServiceAccount may
    # not read ConfigMaps (least privilege), which is said plainly ...
    denied = cli("simulate", "--from-cluster", "--kubeconfig", str(e2e.installed.kubeconfig), "--add", str(add),
                 "--for", "2h", "--out", str(e2e.tmp / "denied"), "--no-progress")
    assert denied.returncode == 2 and "may not be read" in denied.stderr, denied.stderr
    # ... and an operator's credentials read it.
    admin = e2e.cp.kubeconfig(e2e.tmp / "admin.kubeconfig", e2e.cp.admin_token, user="admin")
    op = cli("simulate", "--from-cluster", "--kubeconfig", str(admin), "--add", str(add), "--for", "2h",
             "--out", str(e2e.tmp / "op"), "--no-progress")
    assert op.returncode == 0, op.stderr + op.stdout
    wi_op = json.loads((e2e.tmp / "op" / "result.json").read_text())["whatif"]
    assert wi_op["config"] == "ConfigMap volcano-system/tidesched-scheduler-configmap"
    assert 3400 <= wi_op["new_workloads"][0]["wait"] <= job["wait"]  # read later: less left to wait

    # Read-only: nothing was created or changed.
    after = {n: p["metadata"]["resourceVersion"] for n, p in pods(api, ns).items()}
    assert after == before and long[0] in after
