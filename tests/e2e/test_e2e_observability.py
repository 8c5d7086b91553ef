"""Scenario 10: health, metrics and the quota API of ``tidesched run``, and ``tidesched quota`` /
``tidesched explain --kubeconfig`` against the live cluster, give what the cluster holds
(OBS-1, OBS-2)."""

from __future__ import annotations

import json
import os
import subprocess

from cluster import TIDESCHED, bound, create_queue, events, gpu_node, replicaset_pods, wait_until

H200 = "NVIDIA-H200"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "COLUMNS": "250"}
    return subprocess.run([str(TIDESCHED), *args], capture_output=True, text=True, env=env, timeout=120)


def test_endpoints_and_cli_report_the_live_cluster(e2e) -> None:
    api = e2e.api
    ns = e2e.namespace("obs")
    gpu_node(api, "h200-1", H200, cards=8)
    create_queue(api, "team-a", annotations={"volcano.sh/card.quota": json.dumps({H200: 6})})
    ann = {"volcano.sh/card.name": H200, "scheduling.volcano.sh/queue-name": "team-a"}
    running = replicaset_pods(api, ns, "serve", 1, annotations=ann, gpus=4, cpu="4", memory="8Gi")[0]
    sched = e2e.scheduler()
    wait_until(lambda: running in bound(api, ns), 30, "the first pod to bind")
    pending = replicaset_pods(api, ns, "serve", 1, start=1, annotations=ann, gpus=4, cpu="4", memory="8Gi")[0]
    event = wait_until(lambda: events(api, ns, pending, "InsufficientQuota"), 30, "the quota event")[0]

    assert sched.get("/readyz").status_code == 200
    assert sched.get("/healthz").status_code == 200
    assert sched.metric("tidesched_pods_bound_total") == 1
    assert sched.metric("tidesched_sessions_total") >= 1
    assert sched.metric("tidesched_leader") == 1  # no election: the only instance schedules
    assert sched.metric("tidesched_queue_quota", queue="team-a", resource=H200) == 6
    assert sched.metric("tidesched_queue_allocated", queue="team-a", resource=H200) == 4
    assert sched.metric("tidesched_queue_pending", queue="team-a", resource=H200) == 4
    assert sched.metric("tidesched_cluster_allocatable", resource=H200) == 8

    live = sched.get("/api/v1/queues").json()
    assert live["source"] == "capacity-card"
    assert live["queues"]["team-a"][H200]["quota"] == 6
    assert live["queues"]["team-a"][H200]["used"] == 4
    assert live["queues"]["team-a"][H200]["pending"] == 4

    kubeconfig = str(e2e.installed.kubeconfig)  # the scheduler's own ServiceAccount: read-only suffices
    conf = str(sched.conf)
    quota = cli("quota", "--kubeconfig", kubeconfig, "--config", conf, "--format", "json")
    assert quota.returncode == 0, quota.stderr
    report = json.loads(quota.stdout)
    assert report["queues"]["team-a"][H200] == live["queues"]["team-a"][H200]

    table = cli("quota", "--kubeconfig", kubeconfig, "--config", conf)
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if "team-a" in line and H200 in line)
    cells = [c.strip() for c in row.strip().strip("│|").split("│")]
    assert cells == ["team-a", H200, "6", "4", "0", "4"], row

    explain = cli("explain", f"{ns}/{pending}", "--kubeconfig", kubeconfig, "--config", conf)
    assert explain.returncode == 0, explain.stderr
    assert event["message"] in " ".join(explain.stdout.split()), explain.stdout
    bound_explain = cli("explain", f"{ns}/{running}", "--kubeconfig", kubeconfig, "--config", conf)
    assert bound_explain.returncode == 0 and "h200-1" in bound_explain.stdout
