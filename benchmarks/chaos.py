"""Benchmark: chaos simulations over many seeds (issue 13, REL-1..3).

Each seed generates a random cluster, workload and faults over a simulated day
(``tidesched.sim.chaos.generate``) and runs it with every invariant checked at every step.
Prints the totals — runs, sessions (steps checked), simulated days, faults by kind, workload
events, binds, evictions and reclaims, and invariant violations by rule — and, for a failing
seed, the shrunk scenario file that reproduces it (``--out``). Run by hand:

    .venv/bin/python benchmarks/chaos.py                  # seeds 0..199
    .venv/bin/python benchmarks/chaos.py --seeds 1000 --start 5000 --out /tmp/chaos
    .venv/bin/python benchmarks/chaos.py --seeds 20 --hours 6 --no-shrink

Exit code 1 when any seed violated an invariant.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from tidesched.sim.chaos import FAULT_KINDS, WORKLOAD_KINDS, run_chaos, write_reproducer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200, help="number of seeds (default 200)")
    ap.add_argument("--start", type=int, default=0, help="first seed (default 0)")
    ap.add_argument("--hours", type=float, default=24.0, help="simulated hours per seed (default 24)")
    ap.add_argument("--shrink", action=argparse.BooleanOptionalAction, default=True,
                    help="shrink failing scenarios (default on)")
    ap.add_argument("--out", type=Path, default=Path("chaos-failures"),
                    help="directory for reproducers of failing seeds (default ./chaos-failures)")
    ap.add_argument("--quiet", action="store_true", help="no line per seed")
    args = ap.parse_args(argv)

    faults: Counter[str] = Counter()
    violations: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    failing: list[tuple[int, str, Path]] = []
    wall0 = time.perf_counter()
    for seed in range(args.start, args.start + args.seeds):
        t0 = time.perf_counter()
        outcome = run_chaos(seed, hours=args.hours, shrink_failures=args.shrink)
        r = outcome.sim.result
        s = r["summary"]
        kinds = outcome.faults()
        faults.update(kinds)
        totals["runs"] += 1
        totals["sessions"] += s["sessions"]
        totals["steps_checked"] += r["invariants"]["checked_steps"]
        totals["simulated_seconds"] += int(r["duration"])
        for k in ("pods_bound", "pods_evicted", "reclaims", "preemptions", "stale_decisions"):
            totals[k] += s[k]
        totals["events_ignored"] += s["events_by_reason"].get("ScenarioEventIgnored", 0)
        for v in r["invariants"]["violations"]:
            violations[v["rule"]] += 1
        if outcome.failed:
            path = write_reproducer(outcome, args.out / f"chaos-{seed}.yaml")
            failing.append((seed, r["invariants"]["violations"][0]["rule"], path))
        if not args.quiet:
            print(
                f"seed {seed}: {s['sessions']} sessions, {sum(kinds[k] for k in FAULT_KINDS)} faults, "
                f"bound {s['pods_bound']}, evicted {s['pods_evicted']} (reclaim {s['reclaims']}), "
                f"violations {len(r['invariants']['violations'])}, {time.perf_counter() - t0:.1f}s",
                flush=True,
            )
    wall = time.perf_counter() - wall0

    print()
    print(f"runs {totals['runs']} (seeds {args.start}..{args.start + args.seeds - 1}), "
          f"{totals['simulated_seconds'] / 86400:.1f} simulated days, wall {wall:.0f}s "
          f"({wall / max(1, totals['runs']):.2f}s per run)")
    print(f"sessions {totals['sessions']}, steps checked {totals['steps_checked']}")
    print(f"pods bound {totals['pods_bound']}, evicted {totals['pods_evicted']} (reclaim {totals['reclaims']}, "
          f"preempt {totals['preemptions']}), stale decisions {totals['stale_decisions']}, "
          f"scenario events ignored (target gone) {totals['events_ignored']}")
    print(f"faults {sum(faults[k] for k in FAULT_KINDS)}:")
    for k in FAULT_KINDS:
        print(f"  {k:18} {faults[k]}")
    print("workload events: " + ", ".join(f"{k} {faults[k]}" for k in WORKLOAD_KINDS))
    print(f"invariant violations {sum(violations.values())}" + (":" if violations else ""))
    for rule, n in sorted(violations.items()):
        print(f"  {rule:18} {n}")
    for seed, rule, path in failing:
        print(f"  seed {seed}: {rule}; reproduce: tidesched simulate {path}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
