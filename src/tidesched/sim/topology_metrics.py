"""Network-topology figures of a simulation run (issue 34), sampled with the recorded steps:

* **gangs placed** within one tier-1 HyperNode, within a tier-2 one, or across (only the
  cluster top holds them): every gang (a PodGroup of more than one pod) once, when it first
  has ``minMember`` pods running, by the lowest HyperNode holding the nodes they run on;
* **time waiting for a domain**: from a gang's PodGroup's creation to that moment, for the gangs
  with a network-topology constraint and for all;
* **fragmentation of free GPUs per HyperNode**: how scattered the free GPUs are over the leaves,
  ``1 − (free GPUs of the leaf with most) / (free GPUs in all leaves)`` (0: all in one leaf),
  averaged over the samples; and the mean free GPUs per leaf.

A run without HyperNodes reports none of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tidesched.model.objects import GROUP_NAME_ANNOTATION
from tidesched.sim.world import annotations, meta, sim_time, spec, status

if TYPE_CHECKING:
    from tidesched.sim.world import World

GPU = "nvidia.com/gpu"
INTERVAL = 10.0  # seconds of simulated time between samples: waits are known to this


class TopologyMetrics:
    def __init__(self, world: "World") -> None:
        self.world = world
        self.placed: dict[str, tuple[float, int, bool, str]] = {}  # gang -> (wait, tier of span, constrained, holder)
        self.tree_rows: list[dict[str, Any]] = []
        self.frag: list[float] = []
        self.free_per_leaf: list[float] = []
        self.top_tier = 0
        self._last = -INTERVAL

    def sample(self, t: float) -> None:
        """At most every INTERVAL simulated seconds (a pass over the pods)."""
        cache = self.world.cache
        if not cache.records["HyperNode"] or t - self._last < INTERVAL:
            return
        self._last = t
        tree = cache.hypernodes()
        self.top_tier = tree.top.tier
        running: dict[str, list[str]] = {}
        for key, pod in self.world.items("Pod"):
            node = spec(pod).get("nodeName")
            group = annotations(pod).get(GROUP_NAME_ANNOTATION)
            if node and group and status(pod).get("phase") == "Running":
                running.setdefault(f"{key.split('/', 1)[0]}/{group}", []).append(node)
        for key, pg in self.world.items("PodGroup"):
            if key in self.placed:
                continue
            want = int(spec(pg).get("minMember") or 1)
            nodes = running.get(key, [])
            if want <= 1 or len(nodes) < want:
                continue
            holder = _lowest_holding(tree, set(nodes))
            created = sim_time(meta(pg).get("creationTimestamp")) or 0.0
            self.placed[key] = (max(0.0, t - created), tree.tier_of(holder) if holder else self.top_tier,
                                bool(spec(pg).get("networkTopology")), holder)
        self._fragmentation(tree)
        if not self.tree_rows:
            self.tree_rows = _tree_rows(tree)

    def _fragmentation(self, tree: Any) -> None:
        table = self.world.cache.node_table()
        col = table.dim_index.get(GPU)
        if col is None:
            return
        lowest = tree.tiers[0]
        free = []
        for name, info in tree.infos.items():
            if info.tier != lowest or not info.nodes:
                continue
            rows = [table.index[n] for n in info.nodes if n in table.index]
            free.append(float(table.idle[rows, col].sum()) / 1000.0 if rows else 0.0)
        total = sum(free)
        if free:
            self.free_per_leaf.append(total / len(free))
            self.frag.append(1.0 - max(free) / total if total > 0 else 0.0)

    def summary(self) -> dict[str, Any]:
        if not self.placed and not self.frag:
            return {}
        tiers = [p[1] for p in self.placed.values()]
        constrained = [p[0] for p in self.placed.values() if p[2]]
        every = [p[0] for p in self.placed.values()]
        return {
            "gangs_placed": len(self.placed),
            "gangs_within_tier1": sum(1 for t in tiers if t <= 1),
            "gangs_within_tier2": sum(1 for t in tiers if t == 2),
            "gangs_across": sum(1 for t in tiers if t > 2),
            "gang_mean_wait": round(float(np.mean(every)), 3) if every else None,
            "constrained_gang_mean_wait": round(float(np.mean(constrained)), 3) if constrained else None,
            "free_gpu_fragmentation": round(float(np.mean(self.frag)), 4) if self.frag else None,
            "mean_free_gpus_per_leaf": round(float(np.mean(self.free_per_leaf)), 3) if self.free_per_leaf else None,
        }


    def detail(self) -> dict[str, Any]:
        """The tree (depth-first from the top) with the gangs first placed in each HyperNode."""
        if not self.tree_rows:
            return {}
        held: dict[str, list[str]] = {}
        for gang, p in sorted(self.placed.items()):
            held.setdefault(p[3], []).append(gang)
        return {"hypernodes": [{**row, "gangs": held.get(row["name"], [])} for row in self.tree_rows]}


def _tree_rows(tree: Any) -> list[dict[str, Any]]:
    from tidesched.model.hypernode_tree import CLUSTER_TOP

    rows, stack = [], [(CLUSTER_TOP, 0)]
    while stack:
        name, depth = stack.pop()
        info = tree.infos[name]
        rows.append({"name": name, "tier": info.tier, "depth": depth, "nodes": len(info.nodes)})
        stack.extend((c, depth + 1) for c in reversed(info.children))
    return rows


def _lowest_holding(tree: Any, nodes: set[str]) -> str:
    best = ""
    for name, info in tree.infos.items():
        if nodes <= info.nodes and (not best or info.tier < tree.infos[best].tier):
            best = name
    return best
