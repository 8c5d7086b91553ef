"""Differential runs against Volcano v1.7.0's vc-scheduler (``benchmarks/differential.py``): a
fixed set of worlds — the twelve hand-made kinds (gang fit and a gang too big, proportion 1:3
and surplus, queue capability, drf, priority order, minMember below replicas, forced nodes,
many PodGroups, preempt, reclaim) and a handful of random seeds — each run through vc-scheduler
and through ``tidesched run`` on a control plane of its own, with the same objects and
configuration, and compared at job level. A difference passes only when it is explained: a
known difference between v1.7.0 and Volcano master (which tidesched follows), confirmed by
replaying the world with v1.7.0's variant of the part concerned, or vc-scheduler's own random
choices (a rerun of it giving tidesched's outcome). Everything else fails the test, naming the
world; ``benchmarks/differential.py --only SEED`` (or ``--preset NAME``) replays it.

The two control planes are made here (Volcano v1.7.0's CRDs, deploy/'s RBAC), not taken from
the session's, and emptied between worlds. About two and a half minutes on two cores.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from controlplane import find_assets
from volcano import V170, find_volcano

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import differential  # noqa: E402

# Random worlds chosen to cover what the presets do not: several queues with capabilities,
# GPUs, taints and selectors, preempt and reclaim together, and worlds where v1.7.0 and master
# decide differently, whose mismatches must come out explained (10: preempt's queue check and
# binpack; 18: proportion's uncapped GPUs at enqueue; 35: reclaim on a node without victims;
# 1137: allocate stopping at an unfit task; 305: the predicate error cache without roles).
# Seed 100, which showed allocate stopping too, left: on one CI run both of vc-scheduler's runs
# also evicted a pod of j01 that its other runs here never evicted, and a v1.7.0 difference
# together with such a run-to-run change of vc-scheduler's is beyond what the explainer replays
# (docs/fidelity.md). 1137 came out the same in three runs.
SEEDS = (2, 10, 18, 35, 1137, 305)


def _required(what: str, missing: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} required in CI: {missing}")
    pytest.skip(f"the differential test needs {what}: {missing}")


def test_no_unexplained_difference_from_vc_scheduler(tmp_path: Path) -> None:
    assets, missing = find_assets()
    if assets is None:
        _required("a control plane", missing)
    volcano, vc_missing = find_volcano(binaries=("vc-scheduler",), version=V170)
    if volcano is None:
        _required("Volcano's vc-scheduler", vc_missing)
    assert assets is not None and volcano is not None
    worlds = [make(1) for make in differential.PRESETS.values()] + [differential.generate(s) for s in SEEDS]
    lines: list[str] = []
    verdicts = differential.run_worlds(
        iter(worlds), len(worlds), assets, volcano, differential.Options(), tmp_path / "mismatches",
        reruns=1, say=lines.append,
    )
    summary = differential.report(verdicts, tmp_path / "mismatches")
    sys.stderr.write("\n".join(lines) + summary + "\n")
    assert len(verdicts) == len(worlds)
    bad = [v for v in verdicts if v.status == "unexplained"]
    assert not bad, "unexplained differences from vc-scheduler v1.7.0:\n" + "\n".join(
        f"{v.kind} {v.seed}: {v.explanation or ''}\n    " + "\n    ".join(v.diffs) for v in bad
    )
