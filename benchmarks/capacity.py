"""Benchmark: the cost of the capacity plugin in one scheduling session.

Builds one synthetic cluster (N nodes of 32 CPU / 128Gi, M pending pods in gang jobs of 1–16
pods with minResources, plus a running pod per 4 nodes) spread over 100 leaf queues, and
times the same session (open + enqueue + allocate + backfill + close) three ways:

* ``base``: priority, gang, conformance | predicates, nodeorder — no queue-quota plugin;
* ``flat``: the same plus ``capacity`` over 100 flat queues;
* ``tree``: the same plus ``capacity`` with ``enableHierarchy: true`` over a 3-level tree
  (root → 5 departments → 20 teams → 100 leaf queues).

Quotas are generous (capability = the cluster, deserved = a slice of it) so all three runs
place the same pods and the difference is the plugin's own work: attribute building, the
per-task Allocatable / JobEnqueueable checks, the event handlers and the queue order. Each
figure is the median of ``--repeat`` runs. Run by hand:

    .venv/bin/python benchmarks/capacity.py
    .venv/bin/python benchmarks/capacity.py --nodes 5000 --pods 20000
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from tidesched.model.snapshot import build_snapshot
from tidesched.scheduler import config_from_text, open_session, run_actions

BASE = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: predicates
{capacity}  - name: nodeorder
"""
CAPACITY = {
    "base": "",
    "flat": "  - name: capacity\n",
    "tree": "  - name: capacity\n    enableHierarchy: true\n",
}
GANG_SIZES = [1, 1, 2, 4, 4, 8, 16]
DEPTS, TEAMS_PER_DEPT, LEAVES_PER_TEAM = 5, 4, 5  # 100 leaves


def _queue(name: str, parent: str | None, cpu: int, mem_gi: int, deserved_share: float) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "capability": {"cpu": str(cpu), "memory": f"{mem_gi}Gi"},
        "deserved": {"cpu": str(max(1, int(cpu * deserved_share))), "memory": f"{max(1, int(mem_gi * deserved_share))}Gi"},
    }
    if parent is not None:
        spec["parent"] = parent
    return {"kind": "Queue", "metadata": {"name": name}, "spec": spec}


def generate(n_nodes: int, n_pods: int, tree: bool, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    cpu, mem = 32 * n_nodes, 128 * n_nodes
    objs: list[dict[str, Any]] = []
    leaves: list[str] = []
    if tree:
        objs.append({"kind": "Queue", "metadata": {"name": "root"}, "spec": {}})
        for d in range(DEPTS):
            dept = f"dept{d}"
            objs.append(_queue(dept, "root", cpu, mem, 1 / DEPTS))
            for t in range(TEAMS_PER_DEPT):
                team = f"{dept}-team{t}"
                objs.append(_queue(team, dept, cpu, mem, 1 / (DEPTS * TEAMS_PER_DEPT)))
                for leaf in range(LEAVES_PER_TEAM):
                    name = f"{team}-q{leaf}"
                    objs.append(_queue(name, team, cpu, mem, 1 / 100))
                    leaves.append(name)
    else:
        for i in range(100):
            name = f"q{i:03d}"
            objs.append(_queue(name, None, cpu, mem, 1 / 100))
            leaves.append(name)
    for i in range(n_nodes):
        objs.append({
            "kind": "Node",
            "metadata": {"name": f"node-{i:05d}", "labels": {"zone": f"z{i % 4}"}},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
        })
    # Some running work so queues start with usage.
    for i in range(0, n_nodes, 4):
        name = f"run-{i:05d}"
        objs.append({"kind": "PodGroup", "metadata": {"name": name, "namespace": "bench"},
                     "spec": {"minMember": 1, "queue": leaves[i % len(leaves)]}, "status": {"phase": "Running"}})
        objs.append({"kind": "Pod", "metadata": {"name": name, "namespace": "bench",
                                                 "annotations": {"scheduling.k8s.io/group-name": name}},
                     "spec": {"schedulerName": "volcano", "nodeName": f"node-{i:05d}",
                              "containers": [{"name": "c", "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}]},
                     "status": {"phase": "Running"}})
    made = j = 0
    while made < n_pods:
        size = min(rng.choice(GANG_SIZES), n_pods - made)
        name = f"job-{j:06d}"
        cpu_req = rng.choice([1, 2, 4])
        mem_req = rng.choice([1, 2, 4, 8])
        objs.append({
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench"},
            "spec": {"minMember": size, "queue": leaves[j % len(leaves)],
                     "minResources": {"cpu": str(cpu_req * size), "memory": f"{mem_req * size}Gi"}},
            "status": {"phase": "Pending"},
        })
        for k in range(size):
            objs.append({
                "kind": "Pod",
                "metadata": {"name": f"{name}-w-{k}", "namespace": "bench",
                             "annotations": {"scheduling.k8s.io/group-name": name, "volcano.sh/task-spec": "w"}},
                "spec": {"schedulerName": "volcano",
                         "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu_req), "memory": f"{mem_req}Gi"}}}]},
            })
        made += size
        j += 1
    return objs


def time_session(objs: list[dict[str, Any]], mode: str, repeat: int) -> tuple[float, int]:
    config = config_from_text(BASE.format(capacity=CAPACITY[mode]))
    times = []
    placed = 0
    for _ in range(repeat):
        snapshot = build_snapshot(objs)
        t0 = time.perf_counter()
        decisions = run_actions(open_session(snapshot, config))
        times.append(time.perf_counter() - t0)
        placed = len(decisions.bound)
    return statistics.median(times), placed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for tree in (False, True):
        objs = generate(args.nodes, args.pods, tree)
        base, base_placed = time_session(objs, "base", args.repeat)
        mode = "tree" if tree else "flat"
        with_cap, placed = time_session(objs, mode, args.repeat)
        print(f"{mode}: nodes={args.nodes} pods={args.pods} queues={'100 leaves in 3 levels' if tree else '100 flat'}  "
              f"without={base:6.2f}s ({base_placed} placed)  with capacity={with_cap:6.2f}s ({placed} placed)  "
              f"overhead={100 * (with_cap / base - 1):+5.1f}%")


if __name__ == "__main__":
    main()
