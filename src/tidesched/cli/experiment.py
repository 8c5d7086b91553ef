"""``tidesched experiment``: the FGD paper's policy experiments (``sim/experiment``) — many runs of
(pod list × policy × seed) on a local process pool or a Dask cluster, each writing
``OUT/<pods>/<policy>/<seed>/result.json``, then ``OUT/summary.csv`` and ``OUT/report.html``."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from tidesched.cli.common import app, fail, out


def parse_seeds(text: str) -> list[int]:
    """``42``, ``42-51`` or ``42,45,50-51``."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise ValueError(f"--seeds: {part!r} is not a seed or a range such as 42-51") from None
        if b < a:
            raise ValueError(f"--seeds: empty range {part!r}")
        seeds.extend(range(a, b + 1))
    if not seeds:
        raise ValueError("--seeds: no seed given")
    return list(dict.fromkeys(seeds))


def _names(values: Optional[list[str]]) -> list[str]:
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


@app.command("experiment")
def experiment_cmd(
    trace: Annotated[Path, typer.Option("--trace", help="Trace directory in the Alibaba GPU v2023 layout (csv/).")],
    pods: Annotated[
        Optional[list[str]],
        typer.Option("--pods", help="Pod list(s), comma-separated or repeated: a file in DIR/csv, with or "
                                    "without .csv, or a path (default: openb_pod_list_default)."),
    ] = None,
    policy: Annotated[
        Optional[list[str]],
        typer.Option("--policy", help="Bundled policies, comma-separated or repeated: random, dotprod, "
                                      "gpuclustering, gpupacking, bestfit, fgd."),
    ] = None,
    config: Annotated[
        Optional[list[Path]],
        typer.Option("--config", "-c", help="Scheduler config(s) to run instead of (or beside) --policy: any "
                                            "config. With GPU placement plugins their scores place the pods "
                                            "(fast loop); otherwise one scheduling session per pod with the "
                                            "whole config."),
    ] = None,
    inflate: Annotated[float, typer.Option("--inflate", help="Tune each pod list to this share of GPU capacity.")] = 1.3,
    seeds: Annotated[str, typer.Option("--seeds", help="Seeds: 42, 42-51 or 42,45.")] = "42",
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("tidesched-experiment"),
    parallel: Annotated[int, typer.Option("--parallel", "-j", help="Local worker processes.")] = 1,
    cluster: Annotated[
        Optional[str],
        typer.Option("--cluster", help="Run on an existing Dask cluster: its scheduler address (tcp://host:8786)."),
    ] = None,
    ties: Annotated[
        str, typer.Option("--ties", help="Equal node scores: first (by node name, as tidesched and the paper's "
                                         "simulator) or random (as upstream kube-scheduler).")
    ] = "first",
    progress: Annotated[
        Optional[bool], typer.Option("--progress/--no-progress", help="Progress bar (default: on a terminal).")
    ] = None,
) -> None:
    """Run the FGD paper's policy experiments: place each pod list's tuned, shuffled pods once
    with each policy and seed; record GPU allocation and fragmentation as demand arrives."""
    from tidesched.framework.arguments import ConfigError
    from tidesched.sim.experiment.policies import POLICIES, bundled, from_file
    from tidesched.sim.experiment.runs import plan, run_all
    from tidesched.sim.experiment.workload import DEFAULT_PODS, resolve
    from tidesched.sim.trace import TraceError

    try:
        seed_list = parse_seeds(seeds)
        if ties not in ("first", "random"):
            raise ValueError(f"--ties: expected first or random, got {ties!r}")
        if inflate <= 0:
            raise ValueError(f"--inflate: expected a positive share, got {inflate}")
        if parallel < 1:
            raise ValueError(f"--parallel: expected at least 1, got {parallel}")
        names = _names(policy)
        if not names and not config:
            names = list(POLICIES)
        specs = [bundled(n) for n in names] + [from_file(c) for c in config or []]
        pod_lists = _names(pods) or [DEFAULT_PODS]
        for p in pod_lists:
            resolve(trace, p)
    except (ValueError, ConfigError, TraceError, OSError) as exc:
        fail(str(exc))
        return
    runs = plan(str(trace), pod_lists, specs, seed_list, inflate, ties)
    show = progress if progress is not None else (out.is_terminal and not os.environ.get("CI"))
    start = time.perf_counter()
    try:
        if show:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            with Progress(TextColumn("runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=out, transient=True) as bar:
                task = bar.add_task("runs", total=len(runs))
                results = run_all(runs, out_dir, parallel, cluster, on_result=lambda _r: bar.advance(task))
        else:
            results = run_all(runs, out_dir, parallel, cluster)
    except (ConfigError, TraceError, RuntimeError, OSError) as exc:
        fail(str(exc))
        return
    wall = time.perf_counter() - start
    cpu = sum(r["cpu_seconds"] for r in results)
    top = str(int(round(inflate * 100)))
    for r in sorted(results, key=lambda r: (r["workload"], r["policy"], r["seed"])):
        a = r["allocation_by_arrival"]
        out.print(f"{r['workload']} {r['policy']} seed {r['seed']}: allocation {a.get('100')} % at 100 %, "
                  f"{a.get(top)} % at {top} %; {r['cpu_seconds']:.1f} CPU s", highlight=False)
    out.print(f"{len(results)} runs in {wall:.1f} s ({cpu / max(len(results), 1):.1f} CPU s per run); "
              f"{out_dir}/summary.csv, {out_dir}/report.html", highlight=False)
