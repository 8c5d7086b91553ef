"""Benchmark: one scheduling session over a synthetic cluster.

Generates N nodes (in 4 zones and 2 node pools), M pending pods in gang jobs of mixed sizes
(1–16 pods, minMember = size) spread over several queues, with a node selector on about a
third of the pods, then times one session (open + enqueue + allocate + backfill + close) and
reports pods placed per second. The config is Volcano's default plugins with every scorer on:
nodeorder with all its weights non-zero, and binpack. Run by hand:

    .venv/bin/python benchmarks/session.py                # N = 1,000 / 5,000 / 10,000
    .venv/bin/python benchmarks/session.py --nodes 5000 --pods 20000
    .venv/bin/python benchmarks/session.py --scaling      # up to 20,000 nodes × 100,000 pods
    .venv/bin/python benchmarks/session.py --nodegroups   # plus the nodegroup plugin: 8 node
                                                          # groups, each queue requires 4
    .venv/bin/python benchmarks/session.py --nodes 5000 --spread 0.2   # a fifth of the jobs
        # with topology spread constraints (zone DoNotSchedule maxSkew 2, hostname ScheduleAnyway)
    .venv/bin/python benchmarks/session.py --nodes 5000 --pods 20000 --hypernodes
        # network topology (issue 34): the nodes in tier-1 HyperNodes of 10 and tier-2 ones of 10
        # leaves (5,000 nodes: 500 and 50), the network-topology-aware plugin on; every gang with a
        # hard tier-1 constraint, then the same cluster and pods without constraints
    .venv/bin/python benchmarks/session.py --nodes 5000 --v115   # plus Volcano v1.15's row-local
        # plugins resource-strategy-fit, usage and numa-aware (no usage or NUMA data: the cost
        # of having them in the config), against the same size without --v115
    .venv/bin/python benchmarks/session.py --cli --nodes 5000 --pods 20000 --repeat 3
        # `tidesched schedule` end to end in a child process (start, load, parse, session, JSON
        # out, exit) on the same input written as one JSON file
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tidesched.model.snapshot import build_snapshot
from tidesched.scheduler import config_from_text, open_session, run_actions, tune_gc

CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
    arguments:
      mostrequested.weight: 1  # every nodeorder scorer on (Volcano leaves this one at 0)
  - name: binpack
"""

GANG_SIZES = [1, 1, 2, 4, 4, 8, 16]
SCALING = [(1000, 5000), (5000, 20000), (10000, 50000), (20000, 100000)]


TOPOLOGY_PLUGIN = """  - name: network-topology-aware
"""
LEAF_NODES, SPINE_LEAVES = 10, 10

NODEGROUP_PLUGIN = """  - name: nodegroup
    arguments:
      enablePreferredOrder: true
"""
N_GROUPS = 8


def group_affinity(q: int) -> dict[str, Any]:
    """Queue q requires 4 of the 8 node groups (overlapping with its neighbours), prefers 2."""
    groups = [f"g{(2 * q + k) % N_GROUPS}" for k in range(4)]
    return {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": groups,
                                  "preferredDuringSchedulingIgnoredDuringExecution": groups[:2]}}


def generate(
    n_nodes: int, n_pods: int, n_queues: int = 4, seed: int = 1, nodegroups: bool = False,
    spread: float = 0.0,
) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = []
    for q in range(n_queues):
        spec: dict[str, Any] = {"weight": q + 1}
        if nodegroups:
            spec["affinity"] = group_affinity(q)
        objs.append({"kind": "Queue", "metadata": {"name": f"q{q}"}, "spec": spec})
    for i in range(n_nodes):
        objs.append(
            {
                "kind": "Node",
                "metadata": {
                    "name": f"node-{i:05d}",
                    "labels": {
                        "kubernetes.io/hostname": f"node-{i:05d}",
                        "zone": f"z{i % 4}",
                        "pool": "gpu" if i % 5 == 0 else "cpu",
                    },
                },
                "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
            }
        )
    made = 0
    j = 0
    while made < n_pods:
        size = min(rng.choice(GANG_SIZES), n_pods - made)
        queue = f"q{j % n_queues}"
        name = f"job-{j:06d}"
        cpu = rng.choice(["500m", "1", "2", "4"])
        mem = rng.choice(["1Gi", "2Gi", "4Gi", "8Gi"])
        selector = {"zone": f"z{rng.randrange(4)}"} if rng.random() < 0.33 else None
        spread_job = spread > 0 and rng.random() < spread
        objs.append(
            {
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "bench"},
                "spec": {"minMember": size, "queue": queue},
                "status": {"phase": "Inqueue"},
            }
        )
        for k in range(size):
            spec: dict[str, Any] = {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}],
            }
            if selector:
                spec["nodeSelector"] = selector
            if spread_job:
                mine = {"matchLabels": {"job": name}}
                spec["topologySpreadConstraints"] = [
                    {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": mine},
                    {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
                     "labelSelector": mine},
                ]
            objs.append(
                {
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-w-{k}",
                        "namespace": "bench",
                        "labels": {"job": name},
                        "annotations": {"scheduling.k8s.io/group-name": name, "volcano.sh/task-spec": "w"},
                    },
                    "spec": spec,
                }
            )
        made += size
        j += 1
    if nodegroups:
        for o in objs:
            if o["kind"] == "Node":
                o["metadata"]["labels"]["volcano.sh/nodegroup-name"] = f"g{int(o['metadata']['name'][5:]) % N_GROUPS}"
    return objs


def hypernodes(n_nodes: int) -> list[dict[str, Any]]:
    """Tier-1 HyperNodes of LEAF_NODES consecutive nodes, tier-2 ones of SPINE_LEAVES leaves."""
    def hn(name: str, tier: int, of: str, members: list[str]) -> dict[str, Any]:
        return {"kind": "HyperNode", "metadata": {"name": name}, "spec": {"tier": tier, "members": [
            {"type": of, "selector": {"exactMatch": {"name": m}}} for m in members]}}

    leaves = [f"leaf-{k:04d}" for k in range((n_nodes + LEAF_NODES - 1) // LEAF_NODES)]
    objs = [hn(leaf, 1, "Node", [f"node-{i:05d}" for i in range(k * LEAF_NODES, min(n_nodes, (k + 1) * LEAF_NODES))])
            for k, leaf in enumerate(leaves)]
    objs += [hn(f"spine-{s:03d}", 2, "HyperNode", leaves[s * SPINE_LEAVES:(s + 1) * SPINE_LEAVES])
             for s in range((len(leaves) + SPINE_LEAVES - 1) // SPINE_LEAVES)]
    return objs


def run_topology(n_nodes: int, n_pods: int) -> None:
    """The same cluster and pods twice: every gang with a hard tier-1 constraint, then none."""
    for constrained in (True, False):
        objs = generate(n_nodes, n_pods) + hypernodes(n_nodes)
        if constrained:
            for o in objs:
                if o["kind"] == "PodGroup":
                    o["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
        print("hard tier-1 gangs:" if constrained else "unconstrained:   ", end=" ", flush=True)
        run_objects(objs, config_from_text(CONFIG + TOPOLOGY_PLUGIN), n_nodes, n_pods)


V115_PLUGINS = """\
  - name: resource-strategy-fit
    arguments:
      resources: {cpu: {type: MostAllocated, weight: 1}, memory: {type: LeastAllocated, weight: 1}}
  - name: usage
  - name: numa-aware
"""


def run(n_nodes: int, n_pods: int, nodegroups: bool = False, spread: float = 0.0, v115: bool = False) -> None:
    objs = generate(n_nodes, n_pods, nodegroups=nodegroups, spread=spread)
    config = config_from_text(CONFIG + (NODEGROUP_PLUGIN if nodegroups else "") + (V115_PLUGINS if v115 else ""))
    run_objects(objs, config, n_nodes, n_pods)


def run_objects(objs: list[dict[str, Any]], config: Any, n_nodes: int, n_pods: int) -> None:
    t0 = time.perf_counter()
    snapshot = build_snapshot(objs)
    t1 = time.perf_counter()
    ssn = open_session(snapshot, config)
    t2 = time.perf_counter()
    decisions = run_actions(ssn)
    t3 = time.perf_counter()
    placed = len(decisions.bound)
    session = t3 - t1
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(
        f"nodes={n_nodes:>6} pending={n_pods:>6}  parse={t1 - t0:6.2f}s  open={t2 - t1:5.2f}s  "
        f"actions+close={t3 - t2:6.2f}s  session={session:6.2f}s  placed={placed:>6}  "
        f"pods/s={placed / session:8.0f}  peak RSS={rss:6.0f} MiB",
        flush=True,
    )


def run_cli(n_nodes: int, n_pods: int, repeat: int) -> None:
    """Time `tidesched schedule -o json` as a user runs it: a fresh process per run, wall time
    from spawn to exit, pods placed read back from its output."""
    with tempfile.TemporaryDirectory() as tmp:
        manifests, config = Path(tmp, "cluster.json"), Path(tmp, "scheduler.conf")
        manifests.write_text(json.dumps(generate(n_nodes, n_pods)))
        config.write_text(CONFIG)
        size_mb = manifests.stat().st_size / 2**20
        cmd = [sys.executable, "-c", "from tidesched.cli import main; main()",
               "schedule", "-c", str(config), "-o", "json", str(manifests)]
        walls: list[float] = []
        for _ in range(repeat):
            cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            done = subprocess.run(cmd, check=True, capture_output=True)
            wall = time.perf_counter() - t0
            cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            placed = len(json.loads(done.stdout)["bound"])
            walls.append(wall)
            cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
            print(
                f"schedule nodes={n_nodes:>6} pending={n_pods:>6} input={size_mb:.1f} MiB  wall={wall:6.2f}s  "
                f"cpu={cpu:6.2f}s  placed={placed:>6}  pods/s={placed / wall:8.0f}  "
                f"peak RSS={cpu1.ru_maxrss / 1024:6.0f} MiB",
                flush=True,
            )
        if repeat > 1:
            best, median = min(walls), statistics.median(walls)
            print(f"schedule best {best:.2f}s ({placed / best:.0f} pods/s), median {median:.2f}s "
                  f"({placed / median:.0f} pods/s) over {repeat} runs", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, nargs="*", default=[1000, 5000, 10000])
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument(
        "--scaling", action="store_true",
        help="the scaling table: 1,000 × 5,000 up to 20,000 × 100,000, each size in its own process (peak RSS per size)",
    )
    ap.add_argument("--nodegroups", action="store_true", help="label nodes with 8 groups, give queues affinity, add the nodegroup plugin")
    ap.add_argument("--spread", type=float, default=0.0, help="fraction of jobs with topology spread constraints")
    ap.add_argument("--hypernodes", action="store_true",
                    help="HyperNodes of 10 nodes and 10 leaves, network-topology-aware on; hard tier-1 gangs, then unconstrained")
    ap.add_argument("--v115", action="store_true", help="add resource-strategy-fit, usage and numa-aware")
    ap.add_argument("--cli", action="store_true", help="time `tidesched schedule` end to end in a child process")
    ap.add_argument("--repeat", type=int, default=1, help="with --cli: runs per size")
    args = ap.parse_args()
    if args.cli:
        for n in args.nodes:
            run_cli(n, args.pods, args.repeat)
        return
    if args.scaling:
        for n, m in SCALING:
            subprocess.run([sys.executable, __file__, "--nodes", str(n), "--pods", str(m)], check=True)
        return
    tune_gc()  # as the command line does
    for n in args.nodes:
        if args.hypernodes:
            run_topology(n, args.pods)
        else:
            run(n, args.pods, args.nodegroups, args.spread, args.v115)


if __name__ == "__main__":
    main()
