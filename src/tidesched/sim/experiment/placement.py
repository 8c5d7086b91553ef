"""The placement loop of the FGD paper's experiment: pods arrive one at a time, each is placed
once (or fails) by the configured GPU placement plugins' own scoring code, none leaves; after
every pod the loop records the GPU share that has arrived, the share allocated and the
cluster's fragmentation (as the authors' simulator logs it after each pod).

A node's score is the weighted sum of the plugins' scores (a plugin that draws, as ``random``
does, adds a fresh draw per pod); the plugin with the largest weight chooses the device of a
shared pod. Nodes that tie go to the first in name order (``ties="first"``): that is
tidesched's rule, and the authors' simulator (on their fork of kube-scheduler) does the same —
their published FGD figures are reproduced with it, and not with upstream kube-scheduler's
uniform draw among tied nodes, which ``ties="random"`` runs (seeded). Scores are row-local, so
they are kept per request shape and recomputed only for the nodes changed since the shape was
last placed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tidesched.model.gpu_nodes import GpuNodes, GpuRequest
from tidesched.plugins.gpu_policy import GpuPolicy

FIRST, RANDOM = "first", "random"
TIES = (FIRST, RANDOM)


@dataclass
class Placement:
    """What one run recorded: per pod (in arrival order) the milli-GPU arrived so far, allocated
    and fragmented after it, and where it went (-1: failed)."""

    arrived: np.ndarray
    allocated: np.ndarray
    fragmented: np.ndarray
    node: np.ndarray
    failed: Counter[str] = field(default_factory=Counter)
    classes: np.ndarray | None = None  # the cluster's free GPU share by FGD class at the end


class _ShapeCache:
    __slots__ = ("fit", "score", "device", "seen")

    def __init__(self, n: int) -> None:
        self.fit = np.zeros(n, dtype=bool)
        self.score = np.zeros(n)
        self.device = np.full(n, -1, dtype=np.int64)
        self.seen = 0


def _refresh(entry: _ShapeCache, nodes: GpuNodes, req: GpuRequest, rows: np.ndarray,
             policies: Sequence[tuple[GpuPolicy, int]], chooser: GpuPolicy) -> None:
    fit = nodes.fits(req, rows)
    entry.fit[rows] = fit
    ok = rows[fit]
    if not len(ok):
        return
    total = np.zeros(len(ok))
    for plugin, weight in policies:
        scores, devices = plugin.score_rows(nodes, req, ok)
        total += weight * scores
        if plugin is chooser:
            entry.device[ok] = devices
    entry.score[ok] = total


def place_all(
    nodes: GpuNodes,
    requests: Sequence[GpuRequest],
    policies: Sequence[tuple[GpuPolicy, int]],
    rng: np.random.Generator,
    ties: str = FIRST,
) -> Placement:
    """Place ``requests`` in order on ``nodes`` (changed in place)."""
    if ties not in TIES:
        raise ValueError(f"ties must be one of {', '.join(TIES)}, got {ties!r}")
    drawing = [(plugin, weight) for plugin, weight in policies if plugin.draws]
    if not policies:
        raise ValueError("no GPU placement plugin to place pods with")
    chooser = max(policies, key=lambda pw: pw[1])[0]
    n = len(nodes)
    count = len(requests)
    arrived = np.zeros(count, dtype=np.int64)
    allocated = np.zeros(count, dtype=np.int64)
    fragmented = np.zeros(count)
    where = np.full(count, -1, dtype=np.int64)
    failed: Counter[str] = Counter()
    cache: dict[GpuRequest, _ShapeCache] = {}
    all_rows = np.arange(n)
    arrived_milli = 0
    allocated_milli = nodes.allocated_milli
    measure = nodes.typical is not None
    frag_total = nodes.frag_total()
    for k, req in enumerate(requests):
        arrived_milli += req.total_milli
        entry = cache.get(req)
        log = nodes.changes
        if entry is None:
            entry = cache[req] = _ShapeCache(n)
            _refresh(entry, nodes, req, all_rows, policies, chooser)
        elif entry.seen < len(log):
            stale = log[entry.seen:]
            rows = all_rows if len(stale) >= n else np.unique(np.array(stale, dtype=np.int64))
            _refresh(entry, nodes, req, rows, policies, chooser)
        entry.seen = len(log)
        candidates = np.flatnonzero(entry.fit)
        if not len(candidates):
            failed[req.kind] += 1
        else:
            scores = entry.score[candidates]
            for plugin, weight in drawing:
                scores = scores + weight * plugin.draw(rng, len(candidates))
            best = candidates[scores == scores.max()]
            i = int(best[rng.integers(len(best))]) if len(best) > 1 and ties == RANDOM else int(best[0])
            device = chooser.pick_device(nodes, i, req, int(entry.device[i]), rng)
            if measure:
                frag_total -= nodes.frag[i]
            nodes.place(i, req, device)
            if measure:
                frag_total += nodes.frag[i]
            allocated_milli += req.total_milli
            where[k] = i
        arrived[k] = arrived_milli
        allocated[k] = allocated_milli
        fragmented[k] = frag_total
    classes = nodes.frag_classes() if measure else None
    return Placement(arrived, allocated, fragmented, where, failed, classes)
