"""``network-topology-aware``: Volcano's HyperNode placement of gangs (v1.15.1), by config name.

It gives the session three things (as Volcano's plugin does):

* **the HyperNode gradient** (``hypernode_gradient``): for a gang (or one of its sub-groups)
  with a hard constraint of tier T (a soft one counts as hard up to the cluster top, a soft
  sub-group up to its gang's tier), the HyperNodes of tier ≤ T under the search root, grouped by
  tier, lowest first, that could hold it: whose idle or future-idle resources (summed at
  session open) cover the gang's ``minResources`` (a sub-group's: its pending pods' requests);
  once the gang (sub-group) has a domain, every HyperNode under its highest allowed ancestor
  qualifies. For eviction the groups go highest first and at most
  ``hypernode.gradient.evict.max-hypernodes`` HyperNodes are returned.
* **HyperNode scores** (``hypernode_order``, per sub-group: a gang without sub-groups is its own
  one): bin-packing of the sub-group's requests into the HyperNode's resources
  (``hypernode.binpack.cpu``, ``.memory``, ``.resources`` and their weights); where the best
  score ties, the share of the sub-group's pods already in it is added.
* **node scores**: for a pod of a sub-group with a constraint, how low the common HyperNode of
  the node's leaf and the sub-group's domain is (ties: the share of the sub-group there); for
  any other pod (``hypernode.binpack.normal-pod.*``) the bin-packing of its HyperNodes, tier by
  tier, weighted ``fading^(tier-1)``.

Scores are multiplied by 100 × ``weight``. The allocate action's use of all this is in
``actions/allocate_topology.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tidesched.framework.plugin import EventHandler, Plugin, RowFn
from tidesched.framework.topology import PURPOSE_EVICT
from tidesched.model.resource import CPU, MEMORY
from tidesched.model.status import TaskStatus
from tidesched.rules.scoring import MAX_NODE_SCORE

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo
    from tidesched.model.sub_jobs import SubJobInfo

WEIGHT = "weight"
BINPACK_CPU = "hypernode.binpack.cpu"
BINPACK_MEMORY = "hypernode.binpack.memory"
BINPACK_RESOURCES = "hypernode.binpack.resources"
NORMAL_POD_ENABLE = "hypernode.binpack.normal-pod.enable"
NORMAL_POD_FADING = "hypernode.binpack.normal-pod.fading"
EVICT_MAX_HYPERNODES = "hypernode.gradient.evict.max-hypernodes"


def _non_negative(value: int, default: int = 1) -> int:
    return default if value < 0 else value


class NetworkTopologyAwarePlugin(Plugin):
    name = "network-topology-aware"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.weight = _non_negative(arguments.get_int(WEIGHT, 1))
        self.binpack: dict[str, int] = {
            CPU: _non_negative(arguments.get_int(BINPACK_CPU, 1)),
            MEMORY: _non_negative(arguments.get_int(BINPACK_MEMORY, 1)),
        }
        listed = arguments.get(BINPACK_RESOURCES)  # Volcano reads it only when it is a string
        for name in (listed.split(",") if isinstance(listed, str) else []):
            name = name.strip()
            if name:
                self.binpack[name] = _non_negative(arguments.get_int(f"{BINPACK_RESOURCES}.{name}", 1))
        self.normal_enable = arguments.get_bool(NORMAL_POD_ENABLE, True)
        fading = arguments.get_float(NORMAL_POD_FADING, 0.8)
        self.fading = 0.8 if fading < 0 else fading
        evict_max = arguments.get_int(EVICT_MAX_HYPERNODES, 8)
        self.evict_max = 8 if evict_max <= 0 else evict_max

    def on_session_open(self, ssn: "Session") -> None:
        topo, table = ssn.topology, ssn.table
        self.ssn = ssn
        n_hn = len(topo.names)
        d = len(table.dims)
        # Per HyperNode: allocatable, used (kept up to date by the event handlers), and idle and
        # future idle as the session opened (Volcano's resource cache is not updated for them).
        self.alloc = np.zeros((n_hn, d))
        self.used = np.zeros((n_hn, d))
        self.idle = np.zeros((n_hn, d))
        self.future = np.zeros((n_hn, d))
        for h, rows in enumerate(topo.rows):
            if len(rows):
                self.alloc[h] = table.allocatable[rows].sum(axis=0)
                self.used[h] = table.used[rows].sum(axis=0)
                self.idle[h] = table.idle[rows].sum(axis=0)
                self.future[h] = table.future_idle[rows].sum(axis=0)
        tiers = topo.tree.tiers
        self.min_tier, self.max_tier = tiers[0], tiers[-1]
        self._tiers = np.array([topo.tier_of(n) for n in topo.names], dtype=np.int64)
        # Binpacked columns and their weights.
        self.cols = {name: table.dim_index[name] for name in self.binpack if name in table.dim_index}
        self._total_tier_weight = self._flat_weight = 0.0
        self._normal_tiers = self._tier_rows() if self.normal_enable else []
        self._requests: dict[str, dict[int, float]] = {}

        def moved(sign: float) -> Any:
            def handler(task: "TaskInfo") -> None:
                row = table.index.get(task.node_name)
                if row is None or task.req_vec is None:
                    return
                for h in topo.row_members[row]:
                    self.used[h] += sign * task.req_vec
            return handler

        ssn.add_event_handler(EventHandler(allocate=moved(1.0), deallocate=moved(-1.0)))
        ssn.add_fn("hypernode_gradient", self.name, self.gradient)
        ssn.add_fn("hypernode_order", self.name, self.hypernode_scores)
        ssn.add_fn("node_order", self.name, self.node_scores)
        # Row-local only where the score cannot tell nodes apart: no HyperNodes but the top, for
        # a pod without a constraint (every node shares the one HyperNode: the same score for
        # all, which changes no choice, so 0 stands in for it), or normal-pod bin-packing off.
        # Elsewhere the scores move with every placement in a HyperNode.
        flat = not topo.tree.has_hypernodes or not self.normal_enable
        constrained = topo.constrained

        def flat_key(task: "TaskInfo") -> tuple | None:
            if not flat:
                return None
            if task.job in constrained:
                job = ssn.jobs.get(task.job)
                if job is None or topo.task_has_topology(task, job):
                    return None
            return ("nta-flat",)

        ssn.add_row_fn("node_order", self.name, RowFn(
            flat_key,
            lambda task, rows: np.zeros(len(table) if rows is None else len(rows)),
        ))

    # -- the gradient ---------------------------------------------------------------------

    def gradient(self, job: "JobInfo", hypernode: str, purpose: str, sub: "SubJobInfo | None" = None) -> list[list[str]]:
        topo = self.ssn.topology
        if sub is None:
            highest = topo.hard_tier(job)
            domain = topo.domain.get(job.uid, "")
        else:
            highest = topo.sub_tier(job, sub)
            domain = topo.sub_domain.get(sub.uid, "")
        if highest is None:
            return [[hypernode]]
        if sub is not None:
            need = np.zeros(len(self.ssn.table.dims))
            for t in sub.tasks.values():
                if t.status == TaskStatus.PENDING and t.init_vec is not None:
                    need += t.init_vec
            need[self.ssn.table.pods_col] = 0
        else:
            need = self.ssn.table.vector(job.get_min_resources())
        root = self._search_root(hypernode, highest, domain)
        if root is None:
            return []
        eligible: dict[int, list[str]] = {}
        if root == topo.top and not domain:
            # Every HyperNode is under the top: one comparison over all of them, grouped by tier
            # (``names`` is in name order, so each group is too).
            ok = self._eligible_all(need, purpose) & (self._tiers <= highest)
            for tier in np.unique(self._tiers[ok]).tolist():
                eligible[int(tier)] = [topo.names[i] for i in np.flatnonzero(ok & (self._tiers == tier)).tolist()]
            return self._ordered(eligible, purpose)
        queue, seen = [root], {root}
        while queue:
            cur = queue.pop(0)
            info = topo.tree.infos.get(cur)
            if info is None:
                continue
            if self._eligible(cur, info.tier, highest, domain, need, purpose):
                eligible.setdefault(info.tier, []).append(cur)
            for child in info.children:
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
        return self._ordered(eligible, purpose)

    def _ordered(self, eligible: dict[int, list[str]], purpose: str) -> list[list[str]]:
        groups = [sorted(eligible[t]) for t in sorted(eligible)]
        if purpose != PURPOSE_EVICT:
            return groups
        # Eviction: the widest domains first, at most evict_max HyperNodes in all.
        out, left = [], self.evict_max
        for group in reversed(groups):
            if left == 0:
                break
            take = group if len(group) <= left else group[len(group) - left:]
            out.append(take)
            left -= len(take)
        return out

    def _search_root(self, available: str, highest: int, domain: str) -> str | None:
        if not domain:
            return available
        tree = self.ssn.topology.tree
        allowed = ""
        for ancestor in tree.ancestors(domain):
            if tree.tier_of(ancestor) > highest:
                break
            allowed = ancestor
        if not allowed:
            return None  # the gang already spans more than it may
        lca = tree.lca(available, allowed)
        if lca == allowed:
            return available
        if lca == available:
            return allowed
        return None

    def _eligible_all(self, need: np.ndarray, purpose: str) -> np.ndarray:
        fits = need < 0.1
        if purpose == PURPOSE_EVICT:
            return np.all(fits | (need < self.alloc + 0.1), axis=1)
        return np.all(fits | (need < self.idle + 0.1), axis=1) | np.all(fits | (need < self.future + 0.1), axis=1)

    def _eligible(self, name: str, tier: int, highest: int, domain: str, need: np.ndarray, purpose: str) -> bool:
        if tier > highest:
            return False
        if domain:
            return True
        h = self.ssn.topology.index[name]
        fits = need < 0.1  # Volcano LessEqual with its minimum-resource tolerance, per column
        if purpose == PURPOSE_EVICT:
            return bool(np.all(fits | (need < self.alloc[h] + 0.1)))
        return bool(np.all(fits | (need < self.idle[h] + 0.1)) or np.all(fits | (need < self.future[h] + 0.1)))

    # -- HyperNode scores -----------------------------------------------------------------

    def _binpack(self, h: int, request: dict[int, float]) -> float:
        total, weights = 0.0, 0
        for col, req in request.items():
            w = self.binpack[self.ssn.table.dims[col]]
            alloc, used = self.alloc[h, col], self.used[h, col]
            if used + req > alloc:
                return 0.0
            total += w * (used + req) / alloc
            weights += w
        return total / weights if weights > 0 else 0.0

    def _binpack_many(self, hs: np.ndarray, request: dict[int, float]) -> np.ndarray:
        """``_binpack`` of many HyperNodes at once."""
        if not request:
            return np.zeros(len(hs))
        cols = np.array(list(request), dtype=np.int64)
        req = np.array(list(request.values()))
        w = np.array([self.binpack[self.ssn.table.dims[c]] for c in cols.tolist()], dtype=float)
        if w.sum() <= 0:
            return np.zeros(len(hs))
        alloc = self.alloc[hs][:, cols]
        final = self.used[hs][:, cols] + req
        over = (final > alloc).any(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = (w * final / np.where(alloc > 0, alloc, 1.0)).sum(axis=1) / w.sum()
        out[over] = 0.0
        return out

    def hypernode_scores(self, job: "JobInfo", sub: "SubJobInfo", candidates: list[str], tie_bonus: bool = True) -> dict[str, float]:
        topo = self.ssn.topology
        request = self._requests.get(sub.uid)
        if request is None:  # every task of the sub-group, placed or not: fixed for the session
            request = self._requests[sub.uid] = {}
            for t in sub.tasks.values():
                if t.req_vec is None:
                    continue
                for name in t.resreq.resource_names():
                    col = self.cols.get(name)
                    if col is not None:
                        request[col] = request.get(col, 0.0) + float(t.req_vec[col])
        values = self._binpack_many(np.array([topo.index[c] for c in candidates], dtype=np.int64), request)
        scores = dict(zip(candidates, values.tolist()))
        best = max(scores.values(), default=-1.0)
        tied = [c for c, s in scores.items() if s >= best]
        if tie_bonus and len(tied) > 1:
            for c in tied:
                scores[c] += self._task_share(sub, c)
        scale = float(MAX_NODE_SCORE * self.weight)
        return {c: s * scale for c, s in scores.items()}

    def _task_share(self, sub: "SubJobInfo", hypernode: str) -> float:
        """The share of the sub-group's pods on the HyperNode's nodes (Volcano scoreWithTaskNum)."""
        if not sub.tasks:
            return 0.0
        nodes = self.ssn.topology.tree.infos[hypernode].nodes if hypernode in self.ssn.topology.tree.infos else frozenset()
        return sum(1 for t in sub.tasks.values() if t.node_name in nodes) / len(sub.tasks)

    # -- node scores ----------------------------------------------------------------------

    def node_scores(self, task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
        ssn = self.ssn
        job = ssn.jobs.get(task.job)
        if job is None:
            return np.zeros(len(idx))
        topo = ssn.topology
        sub = topo.sub_of(job, task) if job.uid in topo.constrained else None
        if sub is not None and topo.sub_has_topology(job, sub):
            scores = self._network_scores(sub, idx)
        else:
            scores = self._normal_scores(task, idx)
        return scores * float(MAX_NODE_SCORE * self.weight)

    def _network_scores(self, sub: "SubJobInfo", idx: np.ndarray) -> np.ndarray:
        topo = self.ssn.topology
        domain = topo.current.get(sub.uid, "")
        scores = np.zeros(len(idx))
        if not domain:
            return scores
        for k, row in enumerate(idx.tolist()):
            leaf = topo.leaf_name(row)
            if not leaf:
                continue
            if leaf == domain:
                scores[k] = 1.0
                continue
            lca = topo.tree.lca(leaf, domain)
            if lca:
                scores[k] = self._tier_score(topo.tier_of(lca))
        best = scores.max() if len(scores) else 0.0
        at_best = np.flatnonzero(scores >= best)
        if len(at_best) > 1:
            for k in at_best.tolist():
                leaf = topo.leaf_name(int(idx[k]))
                scores[k] += self._task_share(sub, leaf) if leaf else 0.0
        return scores

    def _tier_score(self, tier: int) -> float:
        lo, hi = self.min_tier, self.max_tier
        if lo == hi:
            return 1.0
        if lo <= tier <= hi:
            return (hi - tier) / (hi - lo)
        return 0.0

    def _tier_rows(self) -> list[tuple[float, np.ndarray]]:
        """Per tier from the lowest up to the top (every tier number between): its weight
        ``fading^(tier-1)`` and, per row, the HyperNode of that tier holding it (-1: none; the
        first by name where HyperNodes overlap). Tiers no node is in are left out: they add 1 ×
        weight to every node alike (``_flat_weight``)."""
        topo, table = self.ssn.topology, self.ssn.table
        out = []
        for tier in range(self.min_tier, self.max_tier + 1):
            of_row = np.full(len(table), -1, dtype=np.int64)
            for name in sorted(topo.names, reverse=True):  # the first by name wins
                if topo.tier_of(name) == tier:
                    of_row[topo.rows[topo.index[name]]] = topo.index[name]
            out.append((self.fading ** (tier - 1), of_row))
        self._total_tier_weight = sum(w for w, _ in out)
        self._flat_weight = sum(w for w, of_row in out if not (of_row >= 0).any())
        return [(w, of_row) for w, of_row in out if (of_row >= 0).any()]

    def _normal_scores(self, task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
        """Volcano's normal-pod bin-packing: per tier, the bin-packing of the node's HyperNode of
        that tier (1 where it has none), weighted by ``fading^(tier-1)``, over the weights' sum."""
        if not self.normal_enable or self._total_tier_weight <= 0:
            return np.zeros(len(idx))
        assert task.req_vec is not None
        request = {col: float(task.req_vec[col]) for name in task.resreq.resource_names()
                   if (col := self.cols.get(name)) is not None}
        all_hn = self._binpack_many(np.arange(len(self.alloc)), request)
        out = np.full(len(idx), float(self._flat_weight))
        for w, of_row in self._normal_tiers:
            hs = of_row[idx]
            out += w * np.where(hs >= 0, all_hn[np.maximum(hs, 0)], 1.0)
        return out / self._total_tier_weight
