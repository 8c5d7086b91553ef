"""Scenario 3: the seed's tidal story on a real API server (TIDE-1..6, DEC-8, K8S-2).

Training gangs (Volcano Jobs, run by Volcano's own job controller, ``PodEvicted: RestartJob``) fill
the H200 nodes at night; in the morning ReplicaSet-owned inference pods arrive. Whole training jobs
are evicted through the Eviction API (never a part of a gang), the job controller restarts the
evicted job, its new pods wait without being placed or evicted again, and the inference pods bind
once the evicted pods are gone."""

from __future__ import annotations

import json
import threading
import time

from cluster import (
    bound,
    create_queue,
    events,
    gpu_node,
    pods,
    replicaset_pods,
    volcano_job,
    volcano_job_status,
    wait_until,
)

H200 = "NVIDIA-H200"
# Longest a gang may be seen partly running while its evictions are being sent (seconds): the
# calls go out together, milliseconds apart on a quiet machine.
PARTIAL_GANG_WINDOW = 3.0
# How long the restarted job is watched for a second round of evictions (a fight between the job
# controller recreating pods and the scheduler placing and evicting them again).
QUIET_WINDOW = 8.0
TRAINING = {"volcano.sh/service.type": "training", "volcano.sh/preemptable": "true"}
INFERENCE = {
    "volcano.sh/service.type": "inference",
    "volcano.sh/preemptable": "false",
    "volcano.sh/card.name": H200,
    "scheduling.volcano.sh/queue-name": "online",
}


def test_inference_reclaims_whole_training_gangs(e2e) -> None:
    api, kubelet = e2e.api, e2e.kubelet
    e2e.priority_class("e2e-pc-high", 80000)
    e2e.priority_class("e2e-pc-low", 40000)
    research, online = e2e.namespace("research"), e2e.namespace("online")
    gpu_node(api, "h200-1", H200, cards=8)
    gpu_node(api, "h200-2", H200, cards=8)
    create_queue(api, "online", priority=80000, reclaimable=False,
                 annotations={"volcano.sh/card.quota": json.dumps({H200: 16})})
    create_queue(api, "offline", priority=20000, reclaimable=True,
                 annotations={"volcano.sh/card.quota": json.dumps({H200: 16})})
    jobs = {}
    for name in ("pretrain-a", "pretrain-b"):
        jobs[name] = volcano_job(
            api, research, name, replicas=2, queue="offline", priority_class="e2e-pc-low",
            annotations={**TRAINING, "volcano.sh/card.request": json.dumps({H200: 8})},
            pod_annotations={"volcano.sh/card.name": H200}, gpus=4, cpu="16", memory="64Gi",
            policies=[{"event": "PodEvicted", "action": "RestartJob"}],
        )
    sched = e2e.scheduler()  # deploy/configmap.yaml: the seed-000 tidal configuration
    training = [p for names in jobs.values() for p in names]
    wait_until(lambda: set(training) <= set(bound(api, research)), 30, "the training gangs to fill the nodes")
    wait_until(lambda: all(k.startswith(research) for k in kubelet.started) and len(kubelet.started) == 4, 30,
               "the training pods Running")
    for name in jobs:
        wait_until(lambda: volcano_job_status(api, research, name).get("state", {}).get("phase") == "Running", 30,
                   f"Volcano Job {name} Running")
    uids = {n: p["metadata"]["uid"] for n, p in pods(api, research).items()}

    # Watch every training pod while reclaim happens: a gang must never be left partly running.
    # The evictions of one gang are separate API calls sent together, so an observer may catch
    # the instant between two of them; what must not happen is a gang *staying* partly running
    # (a plan that evicts part of a gang, or a lost eviction that is not retried).
    partial: list[dict[str, list[str]]] = []
    partial_since: dict[str, float] = {}
    stop = threading.Event()

    def observe() -> None:
        while not stop.is_set():
            live = {n: p for n, p in pods(api, research).items() if not p["metadata"].get("deletionTimestamp")}
            now = time.monotonic()
            for job, names in jobs.items():
                running = [n for n in names if n in live and live[n]["spec"].get("nodeName")]
                if 0 < len(running) < len(names):
                    if now - partial_since.setdefault(job, now) > PARTIAL_GANG_WINDOW:
                        partial.append({job: running})
                else:
                    partial_since.pop(job, None)
            stop.wait(0.05)

    watcher = threading.Thread(target=observe, daemon=True)
    watcher.start()
    kubelet.hold_deletions = True  # evicted pods linger (grace period) until we let them go
    serve = replicaset_pods(api, online, "chat-7d9f", 2, annotations=INFERENCE, priority_class="e2e-pc-high",
                            gpus=4, cpu="8", memory="32Gi")

    def evicting() -> set[str]:
        return {n for n, p in pods(api, research).items() if p["metadata"].get("deletionTimestamp")}

    victims = wait_until(evicting, 30, "training pods to be evicted")
    # The inference pods wait for the cards: nothing binds onto a node still held by a victim.
    assert not set(serve) & set(bound(api, online))
    assert sched.metric("tidesched_pods_evicted_total") >= 1
    kubelet.release_deletions()
    placed = wait_until(lambda: (b := bound(api, online)) and set(serve) <= set(b) and b, 30,
                        "the inference pods to bind")
    stop.set()
    watcher.join(5)

    victims = {k.split("/", 1)[1] for k in kubelet.deleted if k.startswith(f"{research}/")}
    evicted_jobs = [job for job, names in jobs.items() if set(names) <= victims]
    assert evicted_jobs, f"no whole job evicted: {sorted(victims)}"
    for job, names in jobs.items():
        assert set(names) <= victims or not set(names) & victims, f"{job} partly evicted: {sorted(victims)}"
    # Exactly one job's cards were needed (2 pods × 4 cards): the cheapest plan breaks one gang.
    assert len(evicted_jobs) == 1, evicted_jobs
    assert not partial, f"a training gang stayed partly running: {partial[:3]}"
    assert set(training) - victims <= set(bound(api, research)), "a job that was not a victim lost pods"
    assert len(placed) == 2
    # Every victim was evicted through the Eviction API by the scheduler's ServiceAccount, once.
    evictions = [a for a in e2e.cp.audit("eviction") if a.namespace == research]
    # The job controller's own kills of a restarting job are deletions, not evictions: every
    # eviction is the scheduler's, one per victim pod.
    evicted = sorted(a.name for a in evictions if a.code == 201)
    assert set(evicted) <= victims and len(evicted) == len(set(evicted)) == len(jobs[evicted_jobs[0]])
    assert {a.user for a in evictions} == {"system:serviceaccount:volcano-system:tidesched"}
    assert not events(api, research, reason="FailedEviction")

    # Volcano's job controller acted on PodEvicted: RestartJob. The evicted job is restarted and
    # its new pods (same names, new uids) wait: no cards are free for them and training may not
    # reclaim, so they are neither bound nor is anything evicted again; the other job is untouched.
    loser, kept = evicted_jobs[0], next(j for j in jobs if j != evicted_jobs[0])
    wait_until(lambda: volcano_job_status(api, research, loser).get("retryCount", 0) >= 1, 30,
               f"Volcano Job {loser} to be restarted")

    def recreated() -> bool:
        now = pods(api, research)
        return all(n in now and now[n]["metadata"]["uid"] != uids[n] for n in jobs[loser])

    wait_until(recreated, 60, f"the job controller to recreate {loser}'s pods")
    evictions_before = len(e2e.cp.audit("eviction"))
    time.sleep(QUIET_WINDOW)
    now = pods(api, research)
    assert all(not now[n]["spec"].get("nodeName") for n in jobs[loser]), "a restarted pod was placed on taken cards"
    assert len(e2e.cp.audit("eviction")) == evictions_before, "evictions went on after the inference pods bound"
    assert {n: now[n]["metadata"]["uid"] for n in jobs[kept]} == {n: uids[n] for n in jobs[kept]}
    assert set(serve) <= set(bound(api, online))
