"""Benchmark: the FGD paper's experiment (``tidesched experiment``) — CPU seconds per run and runs
per hour, and the comparison of a finished table with the paper's published figures.

One run is one pod list tuned to ``--inflate`` × the GPU capacity (seeded), shuffled, and placed
pod by pod on the trace's 1,213 GPU nodes by one policy. The default measures the run the
issue names (default list, FGD, 130 %, seed 42) ``--repeat`` times in this process and prints
CPU and wall seconds per run, runs per hour on one core, and the peak memory::

    .venv/bin/python benchmarks/experiment.py
    .venv/bin/python benchmarks/experiment.py --policy bestfit --pods openb_pod_list_gpushare100 --repeat 3

``--compare OUT --paper CSV`` reads a finished ``tidesched experiment --out OUT`` and the
authors' ``analysis_allo_discrete.csv`` (``experiments/analysis/expected_results/`` of their
simulator's repository) and prints, per pod list and policy, the mean allocation over the seeds
both ran at 100 % and at 130 % arrived, side by side, with the difference in points; it also
prints the table's CPU seconds per run and runs per hour::

    .venv/bin/python benchmarks/experiment.py --compare /tmp/fgd-full --paper analysis_allo_discrete.csv

The trace is not part of tidesched; ``--trace`` points at it (default ``../shared/traces/
alibaba-gpu-v2023`` beside the repository).
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tidesched.sim.experiment.policies import PAPER_NAMES, POLICIES, bundled  # noqa: E402
from tidesched.sim.experiment.run import run_one  # noqa: E402

DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "alibaba-gpu-v2023"


def measure(args: argparse.Namespace) -> None:
    spec = bundled(args.policy)
    cpu, wall = [], []
    result = None
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = run_one(str(args.trace), args.pods, spec, args.seed, args.inflate)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    assert result is not None
    top = str(int(round(args.inflate * 100)))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{result['workload']} / {args.policy} / seed {args.seed} / {args.inflate:g}: {result['pods']} pods on "
          f"{result['nodes']} nodes, {result['total_gpus']} GPUs")
    print(f"allocation {result['allocation_by_arrival']['100']} % at 100 %, {result['allocation_by_arrival'][top]} % "
          f"at {top} % ({result['final']['allocated_milli_gpu']:,} of {result['total_gpus'] * 1000:,} milli-GPU)")
    print(f"CPU s per run: {', '.join(f'{c:.2f}' for c in cpu)} (median {statistics.median(cpu):.2f}); "
          f"wall s: median {statistics.median(wall):.2f} (the first run reads the pod list)")
    print(f"runs per hour on one core: {3600 / statistics.median(cpu):.0f}; peak RSS {rss:.0f} MiB")


def compare(args: argparse.Namespace) -> None:
    ours: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for path in Path(args.compare).glob("*/*/*/result.json"):
        r = json.loads(path.read_text())
        ours[(r["workload"], r["policy"])].append(r)
    paper: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    if args.paper:
        with open(args.paper, newline="") as fh:
            for row in csv.DictReader(fh):
                paper[(row["workload"], row["sc_policy"])][row["seed"]] = row
    print("| pod list | policy | seeds | tidesched at 100 % | paper at 100 % | Δ | tidesched at 130 % | paper at 130 % | Δ |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    order = {p: k for k, p in enumerate(POLICIES)}
    cpu = []
    for (workload, policy), runs in sorted(ours.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99))):
        cpu.extend(r["cpu_seconds"] for r in runs)
        theirs = paper.get((workload, PAPER_NAMES.get(policy, policy)), {})
        seeds = sorted({str(r["seed"]) for r in runs} & set(theirs)) if theirs else sorted({str(r["seed"]) for r in runs})
        mine = [r for r in runs if str(r["seed"]) in seeds]

        def mean(values: list) -> float | None:
            vals = [float(v) for v in values if v not in (None, "")]
            return statistics.mean(vals) if vals else None

        cells = []
        for at in ("100", "130"):
            a = mean([r["allocation_by_arrival"].get(at) for r in mine])
            b = mean([theirs[s].get(at) for s in seeds]) if theirs else None
            cells += [f"{a:.2f}" if a is not None else "–", f"{b:.2f}" if b is not None else "–",
                      f"{a - b:+.2f}" if a is not None and b is not None else "–"]
        print(f"| {workload.replace('openb_pod_list_', '')} | {policy} | {len(mine)} | " + " | ".join(cells) + " |")
    if cpu:
        print(f"\n{len(cpu)} runs: CPU s per run median {statistics.median(cpu):.2f}, mean {statistics.mean(cpu):.2f}, "
              f"max {max(cpu):.2f}; {3600 / statistics.mean(cpu):.0f} runs per CPU-hour")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--pods", default="openb_pod_list_default")
    ap.add_argument("--policy", default="fgd", choices=POLICIES)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--inflate", type=float, default=1.3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compare", type=Path, help="a finished `tidesched experiment --out` directory")
    ap.add_argument("--paper", type=Path, help="the authors' analysis_allo_discrete.csv")
    args = ap.parse_args()
    if args.compare:
        compare(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
