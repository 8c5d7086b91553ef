"""A session's view of the network topology: the HyperNode tree over this session's node table
(rows per HyperNode, which HyperNodes hold a row), each gang's and each sub-group's effective
constraint, and the HyperNode each is held in (Volcano's job and sub-job ``AllocatedHyperNode``).

At open, as Volcano's session does (``adjustNetworkTopologySpec``): a ``highestTierName`` is
translated to its tier (a name no HyperNode carries leaves the constraint unapplied, with a
Warning), and a *soft* constraint becomes a hard one: a gang's up to the virtual cluster top, a
sub-group's up to its gang's tier (the top's when the gang states none), so that every mode
takes the same gradient search. Domains are what the last sessions chose (``domains``, kept by
the cluster cache), dropped when their HyperNode is gone or nothing of the gang (sub-group) is
placed, and otherwise rebuilt from where its pods run: a sub-group's, the lowest HyperNode
holding all its placed pods; the gang's, the lowest holding its sub-groups' domains
(``recoverAllocatedHyperNode``), which is all there is after a restart.

A gang's sub-groups (model.sub_jobs) are placed each within its own HyperNode under the gang's
(actions/allocate_topology.py). A gang without a ``subGroupPolicy`` is its own one sub-group
(``whole``): the same id, its tasks, the gang's constraint.

``nominated`` holds the HyperNode gangpreempt or gangreclaim found for a sub-group this session
(Volcano's in-memory ``NominatedHyperNode``): allocate tries it first, and forgets it once the
gang is placed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.model.hypernode_tree import CLUSTER_TOP, HyperNodeTree
from tidesched.model.network_topology import SOFT, NetworkTopology
from tidesched.model.problems import Event, warning
from tidesched.model.status import ALLOCATED_STATUSES
from tidesched.model.sub_jobs import SubJobInfo

if TYPE_CHECKING:
    from tidesched.model.infos import JobInfo, TaskInfo
    from tidesched.model.node_table import NodeTable

PURPOSE_ALLOCATE, PURPOSE_EVICT = "allocate", "evict"
# What the cluster cache keeps per gang across sessions: (the gang's HyperNode, its sub-groups').
Domains = dict[str, tuple[str, dict[str, str]]]


class SessionTopology:
    def __init__(self, tree: HyperNodeTree, table: "NodeTable", jobs: dict[str, "JobInfo"], domains: Domains) -> None:
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
        # Effective hard tier per gang with a constraint (None: stated but not applied), and per
        # sub-group policy with one (by its group id); the default sub-group shares its gang's.
        self.tier: dict[str, int | None] = {}
        self.mode: dict[str, str] = {}
        self.group_tier: dict[str, int | None] = {}
        # Gangs with a network topology of their own or in a sub-group (ContainsNetworkTopology).
        self.constrained: set[str] = set()
        # The cache's memory across sessions: job uid -> (the gang's HyperNode, its sub-groups').
        self.domains = domains
        # Volcano's AllocatedHyperNode of the job (the HyperNode the gradient chose for it) and
        # of each sub-group (sub_domain, by sub-group id: the default sub-group's is the job's).
        self.domain: dict[str, str] = {}
        self.sub_domain: dict[str, str] = {}
        self.nominated: dict[str, str] = {}
        self.unnominated: set[str] = set()  # pods whose nominatedNodeName this session dropped
        self.current: dict[str, str] = {}  # a sub-group's domain while its tasks are being placed
        self._whole: dict[str, SubJobInfo] = {}
        self._masks: dict[str, np.ndarray] = {}
        self._childless: dict[int, bool] = {}
        self.waiting: dict[str, str] = {}  # job uid -> why no HyperNode took it, in topology terms
        # Set while a topology-aware reclaim or preempt tries one HyperNode: the only nodes
        # its victims and the reclaimer's pods may be on.
        self.evict_within: np.ndarray | None = None
        for job in jobs.values():
            topo = job.pod_group.topology
            if topo is None:
                continue
            nt = topo.network_topology
            if nt is not None:
                self.mode[job.uid] = nt.mode
                tier = self._translate(job, nt, "spec.networkTopology")
                self.tier[job.uid] = self.top_tier if nt.mode == SOFT else tier
                self.constrained.add(job.uid)
            if job.sub_jobs is not None:
                # A soft sub-group stays within its gang's tier (Volcano convertSoftToHardTopology).
                bound = self.tier.get(job.uid)
                bound = self.top_tier if bound is None else bound
                for i, policy in enumerate(job.sub_jobs.policies):
                    pnt = policy.network_topology
                    if pnt is None:
                        continue
                    tier = self._translate(job, pnt, f"spec.subGroupPolicy[{i}].networkTopology")
                    self.group_tier[f"{job.uid}/{policy.name}"] = bound if pnt.mode == SOFT else tier
                if any(s.network_topology is not None for s in job.sub_jobs.by_uid.values()):
                    self.constrained.add(job.uid)
            if self.ready and job.uid in self.constrained:
                self._recover(job)

    def _translate(self, job: "JobInfo", nt: NetworkTopology, field: str) -> int | None:
        tier = nt.highest_tier
        if tier is None and nt.highest_tier_name:
            tier = self.tree.tier_names.get(nt.highest_tier_name)
            if tier is None:
                self.events.append(warning(
                    "PodGroup", job.namespace, job.name, "UnknownHyperNodeTier",
                    f"PodGroup {job.uid}: {field}.highestTierName {nt.highest_tier_name!r} names no "
                    "HyperNode tier; the constraint is not applied",
                ))
        return tier

    # -- gangs and their sub-groups --------------------------------------------------------

    def has_topology(self, job: "JobInfo") -> bool:
        """Whether the PodGroup itself states a network topology."""
        return job.uid in self.mode

    def hard_tier(self, job: "JobInfo") -> int | None:
        """The highest tier the gang may span (a soft gang: the top's), None when unconstrained."""
        return self.tier.get(job.uid)

    def sub_jobs(self, job: "JobInfo") -> list[SubJobInfo]:
        """The gang's sub-groups; a gang without a subGroupPolicy is its own one (``whole``)."""
        if job.sub_jobs is not None:
            return list(job.sub_jobs.by_uid.values())
        return [self.whole(job)]

    def whole(self, job: "JobInfo") -> SubJobInfo:
        """A gang without sub-groups as its one sub-group: its id, tasks and constraint (no
        counts of its own: ask the gang)."""
        sub = self._whole.get(job.uid)
        if sub is None:
            nt = job.pod_group.topology.network_topology if job.pod_group.topology else None
            sub = self._whole[job.uid] = SubJobInfo(job.uid, job.uid, job.uid, "", job.min_available, nt)
            sub.tasks = job.tasks
        return sub

    def sub_of(self, job: "JobInfo", task: "TaskInfo") -> SubJobInfo:
        if job.sub_jobs is not None:
            sub = job.sub_jobs.of(task)
            if sub is not None:
                return sub
        return self.whole(job)

    def sub_tier(self, job: "JobInfo", sub: SubJobInfo) -> int | None:
        """The highest tier the sub-group may span, None when it has no hard constraint."""
        if sub.uid == job.uid:
            return self.tier.get(job.uid)
        return self.group_tier.get(sub.gid)

    def sub_has_topology(self, job: "JobInfo", sub: SubJobInfo) -> bool:
        """Whether the sub-group states a network topology (the default sub-group: its gang's)."""
        if sub.uid == job.uid:
            return job.uid in self.mode
        return sub.network_topology is not None

    def task_has_topology(self, task: "TaskInfo", job: "JobInfo") -> bool:
        return self.sub_has_topology(job, self.sub_of(job, task))

    def uses_gradient(self, job: "JobInfo") -> bool:
        """Whether allocate places the gang by the HyperNode gradient, sub-group by sub-group
        (Volcano: ContainsHardTopology or ContainsSubJobPolicy)."""
        if job.sub_jobs is not None:
            return True
        return self.tier.get(job.uid) is not None

    def nominated_node(self, task: "TaskInfo") -> str:
        """The pod's status.nominatedNodeName, unless a failed nomination dropped it."""
        node = task.pod.nominated_node
        return node if node and task.uid not in self.unnominated else ""

    def commit_domain(self, job: "JobInfo", hypernode: str, subs: dict[str, str]) -> None:
        """The gang was placed within ``hypernode``, its sub-groups within ``subs``: their
        domains grow to hold them (Volcano UpdateDecisionToJob), their nominations are
        redeemed, and the cache remembers them for the next sessions."""
        self.domain[job.uid] = self.tree.lca(self.domain.get(job.uid, ""), hypernode)
        for uid, hn in subs.items():
            self.sub_domain[uid] = self.tree.lca(self.sub_domain.get(uid, ""), hn)
            self.nominated.pop(uid, None)
        self._remember(job)

    def _remember(self, job: "JobInfo") -> None:
        subs = {s.uid: self.sub_domain[s.uid] for s in self.sub_jobs(job) if self.sub_domain.get(s.uid)}
        self.domains[job.uid] = (self.domain.get(job.uid, ""), subs)

    def _placed_nodes(self, tasks: "dict[str, TaskInfo]") -> list[str]:
        return [t.node_name for t in tasks.values() if t.status in ALLOCATED_STATUSES and t.node_name]

    def _valid(self, kept: str, tasks: "dict[str, TaskInfo]") -> str:
        """``kept`` unless its HyperNode is gone or nothing of it is placed (Volcano
        removeInvalidAllocatedHyperNode)."""
        return kept if kept and kept in self.index and self._placed_nodes(tasks) else ""

    def _recover(self, job: "JobInfo") -> None:
        """The gang's and its sub-groups' domains at open (see the module doc)."""
        kept_job, kept_subs = self.domains.get(job.uid, ("", {}))
        recovered = False
        for sub in self.sub_jobs(job):
            kept = self._valid(kept_subs.get(sub.uid, ""), sub.tasks)
            if not kept and self.sub_has_topology(job, sub):
                placed = self._placed_nodes(sub.tasks)
                if placed:
                    kept = self.lowest_holding(placed)
                    recovered = recovered or bool(kept)
            if kept:
                self.sub_domain[sub.uid] = kept
        domain = self._valid(kept_job, job.tasks)
        if not domain or recovered:
            domain = ""
            for sub in self.sub_jobs(job):
                if self.sub_domain.get(sub.uid):
                    domain = self.tree.lca(domain, self.sub_domain[sub.uid])
        self.domain[job.uid] = domain

    def lowest_holding(self, nodes: list[str]) -> str:
        """The lowest-tier HyperNode holding every one of ``nodes`` ("" when none does)."""
        best = ""
        for name in self.names:
            info = self.tree.infos[name]
            if all(n in info.nodes for n in nodes) and (not best or info.tier < self.tree.infos[best].tier):
                best = name
        return best

    def note_waiting(self, job: "JobInfo", tasks: list["TaskInfo"]) -> None:
        """Why no HyperNode the gang may use took it, for ``explain``: the pods it needs to
        start (or to go on), against the HyperNode with the most room for them."""
        tier = self.hard_tier(job)
        if tier is None:
            return
        short = job.min_available - job.ready_task_num() - job.waiting_task_num() - job.pending_best_effort_num()
        k = short if 0 < short < len(tasks) else len(tasks)
        whose = f"the {k} pods the gang needs to start" if k < len(tasks) else f"the gang's {len(tasks)} pending pods"
        self.waiting[job.uid] = self._why(tier, tasks, whose, self.top, k)[1]

    def sub_waiting(self, job: "JobInfo", sub: SubJobInfo) -> tuple[bool, str]:
        """Why a sub-group's pending pods are not placed: whether some HyperNode it may use,
        within the one its gang may use, has the room for them, and the words ("" when it has
        no hard constraint or no pending pods)."""
        tier = self.sub_tier(job, sub)
        pending = [t for t in sub.pending() if not t.best_effort]
        if tier is None or not pending:
            return False, ""
        root = self.top
        held, job_tier = self.domain.get(job.uid, ""), self.hard_tier(job)
        if held and job_tier is not None:
            allowed = [a for a in self.tree.ancestors(held) if self.tier_of(a) <= job_tier]
            root = allowed[-1] if allowed else held
        return self._why(tier, pending, f"sub-group {sub.name}'s {len(pending)} pending pods", root, len(pending))

    def _main_need(self, tasks: list["TaskInfo"], k: int) -> tuple[int, str, float]:
        """The pods' main resource (their first extended resource, a GPU, else cpu): its
        column, name, and what the ``k`` smallest of them ask of it."""
        table = self.table
        vecs = [t.init_vec for t in tasks if t.init_vec is not None]
        total = np.sum(vecs, axis=0) if vecs else np.zeros(len(table.dims))
        cols = [j for j in range(2, table.pods_col) if total[j] > 0] or [0]
        col = cols[0]
        need = float(np.sort([v[col] for v in vecs])[:k].sum()) if vecs else 0.0
        return col, table.dims[col], need

    def room_for(self, job: "JobInfo", sub: SubJobInfo) -> tuple[int, list[tuple[str, int]], str]:
        """How many sub-groups like ``sub`` (its pending pods) the HyperNodes of its tier, within
        the one its gang may use, could take at once by free main resource: the total, per
        HyperNode, and what one asks ("" when it has no hard constraint)."""
        tier = self.sub_tier(job, sub)
        pending = [t for t in sub.pending() if not t.best_effort] or list(sub.tasks.values())
        if tier is None or not pending:
            return 0, [], ""
        tier = max((t for t in self.tree.tiers if t <= tier), default=tier)
        col, dim, need = self._main_need(pending, len(pending))
        held, job_tier = self.domain.get(job.uid, ""), self.hard_tier(job)
        under = None
        if held and job_tier is not None:
            allowed = [a for a in self.tree.ancestors(held) if self.tier_of(a) <= job_tier]
            under = self.tree.infos[allowed[-1] if allowed else held].nodes
        parts = []
        for name in self.names:
            if self.tier_of(name) != tier or (under is not None and not self.tree.infos[name].nodes <= under):
                continue
            rows = self.rows[self.index[name]]
            free = float(self.table.idle[rows, col].sum()) if len(rows) else 0.0
            parts.append((name, int((free + 0.1) // need) if need > 0 else len(pending)))
        return sum(n for _h, n in parts), parts, f"{_amount(dim, need)} free {dim}"

    def _why(self, tier: int, tasks: list["TaskInfo"], whose: str, root: str, k: int) -> tuple[bool, str]:
        """Whether some HyperNode of tier ≤ ``tier`` under ``root`` has room for the ``k``
        smallest of the pods in their main resource, and the words: the one with the most of it
        free."""
        table = self.table
        col, dim, need = self._main_need(tasks, k)
        under = self.tree.infos[root].nodes if root != self.top else None
        allowed = [n for n in self.names if self.tier_of(n) <= tier
                   and (under is None or (n == root or self.tree.infos[n].nodes <= under))]
        where = f"tier-{tier}" if tier == self.tree.tiers[0] else f"tier ≤ {tier}"
        if tier >= self.top_tier:
            where = "any"
        within = f" within {root}" if under is not None else ""
        if not allowed:
            return False, f"no HyperNode of tier ≤ {tier} exists{within}"
        free = {n: float(table.idle[self.rows[self.index[n]], col].sum()) if len(self.rows[self.index[n]]) else 0.0 for n in allowed}
        best = max(sorted(free), key=lambda n: free[n])
        want, have = _amount(dim, need), _amount(dim, free[best])
        if free[best] + 0.1 > need:
            return True, (f"no {where} HyperNode{within} takes {whose}, though {best} has {have} free {dim} "
                          f"of the {want} they ask for: see the pods' reasons")
        return False, f"no {where} HyperNode{within} has {want} free {dim} for {whose}; best: {best} with {have}"

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

