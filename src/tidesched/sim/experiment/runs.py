"""Many runs of the FGD experiment at once: every (pod list, policy, seed), on a local process
pool (``parallel`` workers) or on an existing Dask cluster (``cluster``: a scheduler address
such as ``tcp://host:8786``; Dask is the optional extra ``tidesched[cluster]``). Each finished
run writes ``OUT/<pods>/<policy>/<seed>/result.json`` at once, so an interrupted table keeps
what was done; ``OUT/summary.csv`` and ``OUT/report.html`` are written at the end.

A worker reads each pod list once and keeps it for its later runs (``run.cached_workload``);
tasks go out grouped by pod list so that a worker's runs share it.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidesched.sim.experiment.policies import PolicySpec
from tidesched.sim.experiment.report import write_report
from tidesched.sim.experiment.results import summary_csv
from tidesched.sim.experiment.run import run_one, write_result


@dataclass(frozen=True)
class RunSpec:
    trace: str
    pods: str
    policy: PolicySpec
    seed: int
    inflate: float
    ties: str = "first"


def plan(trace: str, pods: Sequence[str], policies: Sequence[PolicySpec], seeds: Sequence[int], inflate: float,
         ties: str = "first") -> list[RunSpec]:
    return [RunSpec(trace, p, pol, s, inflate, ties) for p in pods for s in seeds for pol in policies]


def execute(spec: RunSpec) -> dict[str, Any]:
    return run_one(spec.trace, spec.pods, spec.policy, spec.seed, spec.inflate, spec.ties)


def _local(specs: list[RunSpec], parallel: int) -> Iterator[dict[str, Any]]:
    if parallel <= 1:
        for spec in specs:
            yield execute(spec)
        return
    import multiprocessing

    # fork: workers start at once with the parent's imports (numpy, the plugins) in place
    ctx = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
    with cf.ProcessPoolExecutor(max_workers=parallel, mp_context=ctx) as pool:
        futures = [pool.submit(execute, s) for s in specs]
        for fut in cf.as_completed(futures):
            yield fut.result()


def _dask(specs: list[RunSpec], address: str) -> Iterator[dict[str, Any]]:
    try:
        from distributed import Client, as_completed
    except ImportError:  # pragma: no cover - the extra is missing
        raise RuntimeError("--cluster needs Dask: pip install 'tidesched[cluster]'") from None
    with Client(address) as client:
        futures = client.map(execute, specs, pure=False)
        for fut in as_completed(futures):
            yield fut.result()


def run_all(
    specs: list[RunSpec], out: str | Path, parallel: int = 1, cluster: str | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every spec; write each result as it comes, then ``summary.csv`` and ``report.html``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    stream = _dask(specs, cluster) if cluster else _local(specs, parallel)
    for result in stream:
        write_result(out, result)
        results.append(result)
        if on_result is not None:
            on_result(result)
    (out / "summary.csv").write_text(summary_csv(results))
    write_report(out / "report.html", results)
    return results
