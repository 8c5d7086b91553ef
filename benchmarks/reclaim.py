"""Benchmark: one tidal reclaim session (issue 4, TIDE-6).

N nodes of 8 H200 cards, every card held by a running training gang (jobs of 1, 2 or 4 pods of
8 cards, minAvailable = their size, three priority classes, staggered start times) in a
reclaimable queue; P inference pods (Deployments of 10 replicas, 1/2/4/8 cards each) arrive in
a non-reclaimable high-priority queue with quota for all of them. The session runs seed 000's
actions (enqueue, allocate, backfill, reclaim) with gang-safe reclaim, and the script prints
the session time, the evictions, the jobs broken, and checks that no training job was left
below minAvailable. Each figure is the median of ``--repeat`` runs. Run by hand:

    .venv/bin/python benchmarks/reclaim.py
    .venv/bin/python benchmarks/reclaim.py --nodes 2000 --pods 1000 --volcano
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from tidesched.model.snapshot import build_snapshot
from tidesched.scheduler import config_from_text, open_session, run_actions
from tidesched.sim import bundled_example

H200 = "NVIDIA-H200"
# The bundled tidal day's configuration (seed 000's), with the reclaim switch.
CONFIG = (bundled_example().parent / "scheduler.conf").read_text() + (
    "configurations:\n- name: reclaim\n  arguments: {{enableGangSafeReclaim: {gang_safe}}}\n"
)


def _node(i: int) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": f"n{i:05d}", "labels": {"nvidia.com/gpu.product": H200, "nvidia.com/gpu.count": "8"}},
        "status": {"allocatable": {"cpu": "128", "memory": "1024Gi", "pods": "110", "nvidia.com/gpu": "8"}},
    }


def _pod(name: str, group: str, cards: int, node: str = "", start: str = "") -> dict[str, Any]:
    pod: dict[str, Any] = {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "annotations": {"scheduling.k8s.io/group-name": group, "volcano.sh/card.name": H200},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": str(cards)}}}],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"]["startTime"] = start
    return pod


def _podgroup(name: str, queue: str, min_member: int, service: str, phase: str, pc: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if pc:
        spec["priorityClassName"] = pc
    ann = {"volcano.sh/service.type": service, "volcano.sh/preemptable": str(service == "training").lower()}
    return {"kind": "PodGroup", "metadata": {"name": name, "namespace": "bench", "annotations": ann},
            "spec": spec, "status": {"phase": phase}}


def build(nodes: int, pods: int, seed: int = 7) -> tuple[list[dict[str, Any]], dict[str, int]]:
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = [_node(i) for i in range(nodes)]
    objs += [
        {"kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in (("train-low", 100), ("train-mid", 1000), ("train-high", 10000))
    ]
    objs.append({"kind": "Queue", "metadata": {"name": "training", "annotations": {"volcano.sh/card.quota": f'{{"{H200}":{nodes * 8}}}'}},
                 "spec": {"weight": 1, "priority": 20000, "reclaimable": True}})
    objs.append({"kind": "Queue", "metadata": {"name": "inference", "annotations": {"volcano.sh/card.quota": f'{{"{H200}":{pods * 8}}}'}},
                 "spec": {"weight": 1, "priority": 80000, "reclaimable": False}})
    min_members: dict[str, int] = {}
    i = j = 0
    while i < nodes:
        size = min(rng.choice([1, 2, 2, 4]), nodes - i)
        name = f"train-{j:05d}"
        pc = rng.choice(["train-low", "train-mid", "train-high"])
        objs.append(_podgroup(name, "training", size, "training", "Running", pc))
        start = f"2026-01-{1 + rng.randrange(28):02d}T{rng.randrange(24):02d}:00:00Z"
        objs += [_pod(f"{name}-{k}", name, 8, f"n{i + k:05d}", start) for k in range(size)]
        min_members[name] = size
        i += size
        j += 1
    for d in range(0, pods, 10):
        name = f"chat-{d // 10:04d}"
        cards = rng.choice([1, 2, 4, 8])
        objs.append(_podgroup(name, "inference", 1, "inference", "Inqueue"))
        objs += [_pod(f"{name}-{k}", name, cards) for k in range(min(10, pods - d))]
    return objs, min_members


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--volcano", action="store_true", help="Volcano's per-pod eviction (enableGangSafeReclaim: false)")
    args = ap.parse_args()
    objs, min_members = build(args.nodes, args.pods)
    snapshot = build_snapshot(objs)
    config = config_from_text(CONFIG.format(gang_safe="false" if args.volcano else "true"))
    times: list[float] = []
    decisions = None
    for _ in range(args.repeat):
        start = time.perf_counter()
        decisions = run_actions(open_session(snapshot, config))
        times.append(time.perf_counter() - start)
    assert decisions is not None
    evicted = set(decisions.evicted)
    broken: dict[str, int] = {}
    for key in evicted:
        job = key.split("/")[1].rsplit("-", 1)[0]
        broken[job] = broken.get(job, 0) + 1
    below = sorted(j for j, n in broken.items() if n < min_members[j])
    placed = len(decisions.pipelined) + len(decisions.bound)
    mode = "volcano per-pod" if args.volcano else "gang-safe"
    print(f"reclaim ({mode}): {args.nodes} nodes x 8 H200 full of {len(min_members)} training jobs, {args.pods} inference pods")
    print(f"  session time: median {statistics.median(times):.3f} s (runs: {', '.join(f'{t:.3f}' for t in times)})")
    print(f"  inference pods placed (pipelined): {placed}; pods evicted: {len(evicted)}; jobs broken: {len(broken)}")
    print(f"  training jobs left running below minAvailable: {len(below)}")


if __name__ == "__main__":
    main()
