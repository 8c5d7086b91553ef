"""A session's view of the network topology: the HyperNode tree over this session's node table
(rows per HyperNode, which HyperNodes hold a row), each gang's effective constraint, and the
HyperNode each gang is held in (Volcano's ``AllocatedHyperNode``).

At open, as Volcano's session does (``adjustNetworkTopologySpec``): a ``highestTierName`` is
translated to its tier (a name no HyperNode carries leaves the gang unconstrained, with a
Warning), and a *soft* constraint becomes a hard one up to the virtual cluster top, so that
both modes take the same gradient search. A gang's domain is what the last sessions chose
(``domains``, kept by the cluster cache), dropped when its HyperNode is gone or the gang has no
placed pod, and otherwise rebuilt from where its pods run: the lowest HyperNode holding all of
them (``recoverAllocatedHyperNode``), which is all there is after a restart.

Sub-groups (``subGroupPolicy``) are read but placed as one gang with the PodGroup's constraint:
their own constraints are not applied yet (docs/topology.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.model.hypernode_tree import CLUSTER_TOP, HyperNodeTree
from tidesched.model.network_topology import SOFT
from tidesched.model.problems import Event, warning
from tidesched.model.status import ALLOCATED_STATUSES

if TYPE_CHECKING:
    from tidesched.model.infos import JobInfo, TaskInfo
    from tidesched.model.node_table import NodeTable

PURPOSE_ALLOCATE, PURPOSE_EVICT = "allocate", "evict"


class SessionTopology:
    def __init__(self, tree: HyperNodeTree, table: "NodeTable", jobs: dict[str, "JobInfo"], domains: dict[str, tuple[str, str]]) -> None:
        self.tree = tree
        self.table = table
        self.ready = tree.ready
        self.top = CLUSTER_TOP
        self.top_tier = tree.top.tier
        self.events: list[Event] = []
        shape = table.shared.get("hypernode-shape")
        if shape is None or shape[0] is not tree:  # per node set and tree: built once for both
            shape = table.shared["hypernode-shape"] = _shape(tree, table)
        _tree, self.names, self.index, self.rows, self.row_members, self.leaf, self.leaves_disjoint = shape
        # Effective hard tier per gang with a constraint (None: stated but not applied).
        self.tier: dict[str, int | None] = {}
        self.mode: dict[str, str] = {}
        # The cache's memory across sessions: job uid -> (the gang's HyperNode, its pods').
        self.domains = domains
        # Volcano keeps two: the job's AllocatedHyperNode (the HyperNode the gradient chose for
        # the job) and its default sub-job's (the lowest holding the pods it placed).
        self.domain: dict[str, str] = {}
        self.sub_domain: dict[str, str] = {}
        self.current: dict[str, str] = {}  # a gang's domain while its tasks are being placed
        self._masks: dict[str, np.ndarray] = {}
        self._childless: dict[int, bool] = {}
        self.waiting: dict[str, str] = {}  # job uid -> why no HyperNode took it, in topology terms
        # Set while a topology-aware reclaim or preempt tries one HyperNode: the only nodes
        # its victims and the reclaimer's pods may be on.
        self.evict_within: np.ndarray | None = None
        for job in jobs.values():
            topo = job.pod_group.topology
            nt = topo.network_topology if topo is not None else None
            if nt is None:
                continue
            self.mode[job.uid] = nt.mode
            tier = nt.highest_tier
            if tier is None and nt.highest_tier_name:
                tier = tree.tier_names.get(nt.highest_tier_name)
                if tier is None:
                    self.events.append(warning(
                        "PodGroup", job.namespace, job.name, "UnknownHyperNodeTier",
                        f"PodGroup {job.uid}: spec.networkTopology.highestTierName {nt.highest_tier_name!r} names no "
                        "HyperNode tier; the constraint is not applied",
                    ))
            if nt.mode == SOFT:
                tier = self.top_tier
            self.tier[job.uid] = tier
            if self.ready:
                kept_job, kept_sub = domains.get(job.uid, ("", ""))
                sub = self._recover(job, kept_sub)
                self.sub_domain[job.uid] = sub
                self.domain[job.uid] = self._valid(job, kept_job) or sub

    # -- gangs ----------------------------------------------------------------------------

    def has_topology(self, job: "JobInfo") -> bool:
        return job.uid in self.mode

    def hard_tier(self, job: "JobInfo") -> int | None:
        """The highest tier the gang may span (a soft gang: the top's), None when unconstrained."""
        return self.tier.get(job.uid)

    def commit_domain(self, job: "JobInfo", hypernode: str, sub_hypernode: str) -> None:
        """The gang was placed within ``hypernode`` (its pods within ``sub_hypernode``): its
        domains grow to hold them (Volcano UpdateDecisionToJob) and the cache remembers them
        for the next sessions."""
        new = self.tree.lca(self.domain.get(job.uid, ""), hypernode)
        sub = self.tree.lca(self.sub_domain.get(job.uid, ""), sub_hypernode)
        self.domain[job.uid], self.sub_domain[job.uid] = new, sub
        self.domains[job.uid] = (new, sub)

    def _placed_nodes(self, job: "JobInfo") -> list[str]:
        return [t.node_name for t in job.tasks.values() if t.status in ALLOCATED_STATUSES and t.node_name]

    def _valid(self, job: "JobInfo", kept: str) -> str:
        """``kept`` unless its HyperNode is gone or the gang has no placed pod (Volcano
        removeInvalidAllocatedHyperNode)."""
        return kept if kept and kept in self.index and self._placed_nodes(job) else ""

    def _recover(self, job: "JobInfo", kept: str) -> str:
        kept = self._valid(job, kept)
        placed = self._placed_nodes(job)
        if kept or not placed:
            return kept
        return self.lowest_holding(placed)

    def lowest_holding(self, nodes: list[str]) -> str:
        """The lowest-tier HyperNode holding every one of ``nodes`` ("" when none does)."""
        best = ""
        for name in self.names:
            info = self.tree.infos[name]
            if all(n in info.nodes for n in nodes) and (not best or info.tier < self.tree.infos[best].tier):
                best = name
        return best

    def note_waiting(self, job: "JobInfo", tasks: list["TaskInfo"]) -> None:
        """Why no HyperNode the gang may use took it, for ``explain``: the most free of the
        gang's main resource (its first extended resource, a GPU, else cpu) in any of them."""
        tier = self.hard_tier(job)
        if tier is None:
            return
        table = self.table
        need = np.zeros(len(table.dims))
        for t in tasks:
            if t.init_vec is not None:
                need += t.init_vec
        cols = [j for j in range(2, table.pods_col) if need[j] > 0] or [0]
        col = cols[0]
        dim = table.dims[col]
        allowed = [n for n in self.names if self.tier_of(n) <= tier]
        where = f"tier-{tier}" if tier == self.tree.tiers[0] else f"tier ≤ {tier}"
        if tier >= self.top_tier:
            where = "any"
        if not allowed:
            self.waiting[job.uid] = f"no HyperNode of tier ≤ {tier} exists"
            return
        free = {n: float(table.idle[self.rows[self.index[n]], col].sum()) if len(self.rows[self.index[n]]) else 0.0 for n in allowed}
        best = max(sorted(free), key=lambda n: free[n])
        want = _amount(dim, float(need[col]))
        have = _amount(dim, free[best])
        pods = len(tasks)
        if free[best] + 0.1 > need[col]:
            self.waiting[job.uid] = (
                f"no {where} HyperNode takes the gang's {pods} pending pods, though {best} has {have} free {dim} "
                f"of the {want} they ask for: see the pods' reasons"
            )
        else:
            self.waiting[job.uid] = f"no {where} HyperNode has {want} free {dim} for the gang's {pods} pending pods; best: {best} with {have}"

    # -- HyperNodes over the node table --------------------------------------------------

    def tier_of(self, name: str) -> int:
        return self.tree.tier_of(name)

    def childless_tier(self, tier: int) -> bool:
        """Whether no HyperNode of ``tier`` has a HyperNode under it."""
        got = self._childless.get(tier)
        if got is None:
            got = self._childless[tier] = not any(
                i.children for n, i in self.tree.infos.items() if i.tier == tier and n != self.top)
        return got

    def leaf_name(self, row: int) -> str:
        i = self.leaf[row]
        return self.names[i] if i >= 0 else ""

    def mask(self, name: str) -> np.ndarray:
        """The HyperNode's nodes as a mask over the table's rows (do not modify it)."""
        m = self._masks.get(name)
        if m is None:
            m = np.zeros(len(self.table), dtype=bool)
            m[self.rows[self.index[name]]] = True
            m.flags.writeable = False
            self._masks[name] = m
        return m


def _amount(dim: str, value: float) -> str:
    """A table amount in the units people read (cores, GiB, whole devices)."""
    if dim == "memory":
        return f"{value / 2**30:g}Gi"
    return f"{value / 1000:g}"


def _shape(tree: HyperNodeTree, table: "NodeTable") -> tuple:
    """What depends on the tree and the node set only (kept per node set and tree)."""
    names = [n for n in tree.infos]  # real HyperNodes by name, then the top
    index = {n: i for i, n in enumerate(names)}
    rows = []
    row_members: list[list[int]] = [[] for _ in range(len(table))]
    for i, name in enumerate(names):
        r = np.array(sorted(table.index[n] for n in tree.infos[name].nodes if n in table.index), dtype=np.int64)
        rows.append(r)
        for row in r:
            row_members[row].append(i)
    leaf = np.full(len(table), -1, dtype=np.int64)
    for node, hn in tree.leaf_of.items():
        row = table.index.get(node)
        if row is not None:
            leaf[row] = index[hn]
    # Whether every node is in at most one HyperNode of the lowest tier (then ``leaf`` says all).
    lowest = tree.tiers[0]
    disjoint = sum(len(rows[i]) for i, n in enumerate(names) if tree.infos[n].tier == lowest) == int((leaf >= 0).sum())
    return tree, names, index, rows, row_members, leaf, disjoint

