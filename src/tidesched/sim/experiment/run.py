"""One run of the FGD paper's experiment: a pod list, a policy, a seed → ``result.json``."""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from tidesched.sim.experiment.placement import place_all
from tidesched.sim.experiment.policies import PolicySpec, check_placeable, gpu_policies, measuring_fgd, parse
from tidesched.sim.experiment.results import figures
from tidesched.sim.experiment.sessions import place_by_sessions
from tidesched.sim.experiment.workload import Workload, arrival_order, gpu_nodes, load_workload


@functools.lru_cache(maxsize=8)
def cached_workload(trace: str, pods: str) -> Workload:
    """A worker process reads each pod list once for all its runs."""
    return load_workload(trace, pods)


def run_one(trace: str, pods: str, spec: PolicySpec, seed: int, inflate: float, ties: str = "first") -> dict[str, Any]:
    """Place the tuned, shuffled pod list with the policy; the run's figures (see ``results``).
    A config with GPU placement plugins runs the fast loop (``placement``), any other one
    session per pod (``sessions``)."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    workload = cached_workload(str(trace), str(pods))
    config = check_placeable(parse(spec))
    policies = gpu_policies(config)
    nodes = gpu_nodes(workload.nodes)
    capacity = nodes.capacity_milli
    fgd = measuring_fgd(policies)
    nodes.set_typical(fgd.typical([r.shape() for r in workload.requests]))
    order = arrival_order(workload.requests, capacity, inflate, seed)
    requests = [workload.requests[k] for k in order]
    misfits = 0
    if policies:
        placement = place_all(nodes, requests, policies, np.random.default_rng([seed, 1]), ties)
    else:
        placement, misfits = place_by_sessions(workload.nodes, nodes, requests, config)
    out: dict[str, Any] = {
        "workload": workload.name,
        "policy": spec.label,
        "config": spec.source,
        "seed": seed,
        "inflate": inflate,
        "ties": ties,
        "placed_by": "placement plugins" if policies else "sessions",
        "pods": len(requests),
        "nodes": len(nodes),
        "total_gpus": capacity // 1000,
        "typical_pods": len(nodes.typical) if nodes.typical is not None else 0,
    }
    out.update(figures(placement, capacity, inflate))
    out["final"]["device_misfits"] = misfits
    out["cpu_seconds"] = round(time.process_time() - cpu0, 3)
    out["wall_seconds"] = round(time.perf_counter() - wall0, 3)
    return out


def result_path(out: str | Path, result: dict[str, Any]) -> Path:
    return Path(out) / result["workload"] / result["policy"] / str(result["seed"]) / "result.json"


def write_result(out: str | Path, result: dict[str, Any]) -> Path:
    path = result_path(out, result)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return path
