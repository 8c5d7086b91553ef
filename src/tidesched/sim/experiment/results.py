"""A run's figures as the FGD paper's analysis reports them (the authors'
``experiments/analysis/merge_*_discrete.py``): for every whole per cent ``a`` of GPU capacity
that has *arrived* (0 … the target), the mean over the pods after which the arrived share,
rounded, was ``a`` (or, where no pod ended exactly there, within ±1) of

* ``allocation_by_arrival``: the GPU allocation, milli-GPU allocated ÷ capacity, in per cent
  (each sample rounded to 2 decimals before the mean, as theirs);
* ``fragmentation_by_arrival``: FGD's fragmentation amount as a per cent of the capacity;
* ``fragmentation_ratio_by_arrival``: fragmentation as a per cent of the free GPU share.

Means are rounded to 2 decimals. ``summary.csv`` has one row per run in the shape of their
``analysis_allo_discrete.csv``: ``workload, policy, tune, seed, total_gpus, 0 … 130``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from tidesched.model.gpu_nodes import KINDS
from tidesched.rules.gpu_frag import CLASSES
from tidesched.sim.experiment.placement import Placement


def by_arrival(arrived_pct: np.ndarray, values: np.ndarray, top: int) -> dict[str, float | None]:
    """Mean of ``values`` per whole per cent of arrival 0 … ``top`` (None where no sample)."""
    rounded = np.round(arrived_pct)
    out: dict[str, float | None] = {}
    for a in range(top + 1):
        sel = rounded == a
        if not sel.any():
            sel = (rounded >= a - 1) & (rounded <= a + 1)
        out[str(a)] = round(float(values[sel].mean()), 2) if sel.any() else None
    return out


def figures(p: Placement, capacity_milli: int, inflate: float) -> dict[str, Any]:
    top = int(round(inflate * 100))
    arrived_pct = p.arrived / capacity_milli * 100
    alloc_pct = np.round(p.allocated / capacity_milli * 100, 2)
    frag_pct = p.fragmented / capacity_milli * 100
    free = capacity_milli - p.allocated
    frag_ratio = np.where(free > 0, p.fragmented / np.where(free > 0, free, 1) * 100, 0.0)
    classes = p.classes if p.classes is not None else np.zeros(len(CLASSES))
    final_free = capacity_milli - int(p.allocated[-1]) if len(p.allocated) else capacity_milli
    return {
        "allocation_by_arrival": by_arrival(arrived_pct, alloc_pct, top),
        "fragmentation_by_arrival": by_arrival(arrived_pct, frag_pct, top),
        "fragmentation_ratio_by_arrival": by_arrival(arrived_pct, frag_ratio, top),
        "failed_pods": {k: int(p.failed.get(k, 0)) for k in KINDS},
        "final": {
            "arrived_milli_gpu": int(p.arrived[-1]) if len(p.arrived) else 0,
            "allocated_milli_gpu": int(p.allocated[-1]) if len(p.allocated) else 0,
            "allocation": round(float(p.allocated[-1]) / capacity_milli * 100, 2) if len(p.allocated) else 0.0,
            "fragmented_milli_gpu": round(float(p.fragmented[-1]), 2) if len(p.fragmented) else 0.0,
            "fragmentation_ratio": round(float(p.fragmented[-1]) / final_free * 100, 2) if final_free > 0 else 0.0,
            "free_by_class": {c: round(float(v), 2) for c, v in zip(CLASSES, classes)},
            "pods_placed": int((p.node >= 0).sum()),
            "pods_failed": int((p.node < 0).sum()),
        },
    }


def summary_header(top: int) -> list[str]:
    return ["workload", "policy", "tune", "seed", "total_gpus"] + [str(a) for a in range(top + 1)]


def summary_row(result: Mapping[str, Any]) -> list[Any]:
    alloc = result["allocation_by_arrival"]
    return [result["workload"], result["policy"], result["inflate"], result["seed"], result["total_gpus"]] + [
        "" if alloc.get(str(a)) is None else alloc[str(a)] for a in range(int(round(result["inflate"] * 100)) + 1)
    ]


def summary_csv(results: Iterable[Mapping[str, Any]]) -> str:
    rows = sorted(results, key=lambda r: (r["workload"], r["policy"], r["seed"]))
    top = max((int(round(r["inflate"] * 100)) for r in rows), default=130)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(summary_header(top))
    for r in rows:
        w.writerow(summary_row(r))
    return buf.getvalue()
