"""Benchmark: the Alibaba GPU trace (v2023, "openb") through the simulator.

Loads the default pod list (8,152 pods) on its node list (1,523 nodes, 6,212 GPUs) with
``fill`` — every pod submitted at t = 0, as FGD does to saturate the cluster — and runs
``tidesched.sim.runner`` to the end: pods finish after their trace run times, Deployments are
deleted when the trace deletes their pod, and the scheduler refills the freed cards. Prints the
wall time (load and simulation), simulated pods per second (pods bound per wall second of
simulation) and the process's peak memory (``resource.getrusage``). Run by hand:

    .venv/bin/python benchmarks/trace.py                          # the full default list
    .venv/bin/python benchmarks/trace.py --limit 1000 --report /tmp/trace-report.html
    .venv/bin/python benchmarks/trace.py --pods csv/openb_pod_list_gpuspec33.csv --compression 60
    .venv/bin/python benchmarks/trace.py --all                    # every pod list, real times, CLI
    .venv/bin/python benchmarks/trace.py --gpu-sharing mps        # the MPS approximation instead of vGPU

``--all`` runs ``tidesched simulate --trace`` once per ``openb_pod_list_*.csv`` with its real
arrival and run times (the command a user runs, report included), one process each, and prints
a table: wall and CPU time, peak memory, sessions and whether every invariant held.

The trace is not part of tidesched; ``--trace`` points at it (default: ``../shared/traces/
alibaba-gpu-v2023`` beside the repository).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tidesched.sim.runner import run, summary_lines
from tidesched.sim.trace import trace_scenario

DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "alibaba-gpu-v2023"


def _peak_rss_mib() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def run_all(trace: Path) -> int:
    """Every pod list of the trace through the command line, one process each."""
    exe = Path(sys.executable).with_name("tidesched")
    lists = sorted((trace / "csv").glob("openb_pod_list_*.csv"))
    print(f"{'pod list':<34} {'pods':>6} {'days':>6} {'sessions':>8} {'wall s':>7} {'CPU s':>6} "
          f"{'RSS MiB':>7}  invariants")
    failed = 0
    for f in lists:
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            proc = subprocess.Popen(
                [str(exe), "simulate", "--trace", str(trace), "--pods", f.name, "--out", out, "--no-progress"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            )
            output = proc.stdout.read().decode() if proc.stdout else ""
            _pid, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
            code = os.waitstatus_to_exitcode(status)
            result_file = Path(out) / "result.json"
            if code not in (0, 1) or not result_file.exists():
                failed += 1
                print(f"{f.name:<34} exit {code}\n{output[-2000:]}")
                continue
            r = json.loads(result_file.read_text())
        s = r["summary"]
        viol = len(r["invariants"]["violations"])
        failed += bool(viol)
        print(f"{f.name:<34} {s['pods_bound']:>6,} {r['duration'] / 86400:>6.1f} {s['sessions']:>8,} "
              f"{wall:>7.1f} {usage.ru_utime + usage.ru_stime:>6.1f} {usage.ru_maxrss / 1024:>7,.0f}  "
              + ("all held" if not viol else f"{viol} VIOLATED"), flush=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="trace directory (holding csv/)")
    ap.add_argument("--pods", type=str, default=None, help="pod CSV, relative to --trace (default: openb_pod_list_default)")
    ap.add_argument("--limit", type=int, default=None, help="first N pods only")
    ap.add_argument("--no-fill", action="store_true", help="replay the trace's arrival times instead of t=0")
    ap.add_argument("--compression", type=float, default=1.0, help="divide run times and gaps by this")
    ap.add_argument("--period", type=float, default=1.0, help="schedule period in simulated seconds")
    ap.add_argument("--config", type=Path, default=None, help="Volcano scheduler config (default: Volcano's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gpu-sharing", choices=("vgpu", "mps"), default="vgpu",
                    help="per-device vGPU (default) or the older whole-node MPS approximation")
    ap.add_argument("--report", type=Path, default=None, help="also write the HTML report here")
    ap.add_argument("--result", type=Path, default=None, help="also write result.json here")
    ap.add_argument("--all", action="store_true", help="every pod list with real times, via the CLI")
    args = ap.parse_args(argv)
    if not (args.trace / "csv").is_dir():
        print(f"trace not found at {args.trace} (use --trace)", file=sys.stderr)
        return 2
    if args.all:
        return run_all(args.trace)
    source = args.trace / args.pods if args.pods else args.trace

    t0 = time.perf_counter()
    scenario, summary = trace_scenario(
        source, fill=not args.no_fill, time_compression=args.compression, limit=args.limit, seed=args.seed,
        schedule_period=args.period, config_path=args.config, name="alibaba-gpu-v2023",
        gpu_sharing=args.gpu_sharing,
    )
    load_s = time.perf_counter() - t0
    print(f"loaded {summary.pods:,} pods ({summary.inference:,} inference, {summary.training:,} training, "
          f"{summary.fractional:,} fractional) on {summary.nodes:,} nodes ({summary.gpus:,} GPUs, "
          f"{summary.shared_nodes:,} MPS-shared nodes, GPU sharing {args.gpu_sharing}) in {load_s:.2f} s")

    started = time.perf_counter()
    last = [started]

    def progress(t: float, _end: float | None) -> None:
        # A line every 30 s of wall time, so a long run shows it is moving.
        now = time.perf_counter()
        if now - last[0] >= 30:
            last[0] = now
            print(f"  … {now - started:.0f} s wall, simulated t = {t:,.0f} s", flush=True)

    sim = run(scenario, seed=args.seed, progress=progress)
    result = sim.result
    s = result["summary"]
    for line in summary_lines(sim):
        print(line)
    bound = s.get("pods_bound", 0)
    print(f"wall time: load {load_s:.2f} s, simulation {sim.wall_seconds:.2f} s "
          f"({sim.sessions:,} sessions, {result['duration'] / 86400:.1f} simulated days)")
    print(f"simulated pods per second: {bound / sim.wall_seconds if sim.wall_seconds else 0:,.0f} "
          f"({bound:,} pods bound)")
    print(f"peak memory (max RSS): {_peak_rss_mib():,.0f} MiB")
    if args.result is not None:
        from tidesched.sim.runner import result_json

        args.result.write_text(result_json(result), encoding="utf-8")
    if args.report is not None:
        from tidesched.sim.report import render_html

        t1 = time.perf_counter()
        args.report.write_text(render_html(result), encoding="utf-8")
        print(f"report: {args.report} ({time.perf_counter() - t1:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
