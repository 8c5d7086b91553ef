"""``tidesched explain NS/job/NAME --kubeconfig`` against the live cluster: a Volcano Job held back at
admission by its queue's card quota (so Volcano's job controller has made no pod yet) is explained
through its PodGroup, with its task role, the reason it is not admitted, and the same quota numbers
the scheduler serves (OBS-1, OBS-2)."""

from __future__ import annotations

import json
import os
import subprocess

from cluster import TIDESCHED, bound, condition, events, create_queue, gpu_node, podgroup, podgroup_name, pods, replicaset_pods, volcano_job, wait_until

H200 = "NVIDIA-H200"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "COLUMNS": "300"}
    return subprocess.run([str(TIDESCHED), *args], capture_output=True, text=True, env=env, timeout=120)


def test_explain_a_volcano_job_on_the_live_cluster(e2e) -> None:
    api = e2e.api
    ns = e2e.namespace("explain")
    gpu_node(api, "h200-1", H200, cards=8)
    create_queue(api, "team-x", annotations={"volcano.sh/card.quota": json.dumps({H200: 8})})
    card = {"volcano.sh/card.name": H200, "scheduling.volcano.sh/queue-name": "team-x"}
    serving = replicaset_pods(api, ns, "serve", 1, annotations=card, gpus=4, cpu="4", memory="8Gi")[0]
    sched = e2e.scheduler()  # deploy/configmap.yaml: capacity-card
    wait_until(lambda: serving in bound(api, ns), 30, "the serving pod to bind")
    # Two workers of 4 cards each: 4 used + 8 > the queue's 8, so the gang waits on quota.
    workers = volcano_job(api, ns, "train", replicas=2, queue="team-x", pod_annotations=card,
                          annotations={"volcano.sh/card.request": json.dumps({H200: 8})},
                          gpus=4, cpu="4", memory="8Gi")
    pg_name = podgroup_name(api, ns, "train")
    # Its card request does not fit the quota left: not admitted, so the job controller makes no pod.
    wait_until(lambda: events(api, ns, pg_name, "InsufficientQuota"), 30, "the quota refusal on the PodGroup")
    assert not set(workers) & set(pods(api, ns))
    live = sched.get("/api/v1/queues").json()["queues"]["team-x"][H200]

    kubeconfig = str(e2e.installed.kubeconfig)  # the scheduler's own ServiceAccount: read-only suffices
    res = cli("explain", f"{ns}/job/train", "--kubeconfig", kubeconfig, "--config", str(sched.conf))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == f"Volcano Job {ns}/train: PodGroup {ns}/{pg_name}", res.stdout
    assert lines[1] == f"PodGroup {ns}/{pg_name} (queue team-x, owned by Job train)"
    assert lines[2] == "Gang: minMember 2; 0 ready, 0 valid, 0 pending of 0 pods; phase Pending."
    assert lines[3].startswith("  Not admitted: the PodGroup is Pending, and Volcano's job controller creates"), lines[3]
    assert "  worker: minTaskMember 2; 0 pods: 0 running, 0 bound, 0 pending, 0 other  short by 2" in lines
    # The quota rows are the ones the scheduler serves (cluster as it is: one pod of 4 cards used).
    start = lines.index("Queue team-x (capacity-card): resource quota / used / inqueue / pending")
    assert lines[start + 1] == f"  {H200}: {live['quota']:g} / {live['used']:g} / {live['inqueue']:g} / {live['pending']:g}"
    assert (live["quota"], live["used"]) == (8, 4)
    assert "This session: 0 bound, 0 pipelined, 0 evicted." in lines
    assert (f"PodGroup event InsufficientQuota: Queue <team-x> has insufficient <{H200}> quota: requested 8, "
            "total would be 12, but capability is 8") in lines, res.stdout

