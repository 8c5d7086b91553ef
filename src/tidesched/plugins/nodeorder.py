"""nodeorder plugin (Volcano plugins/nodeorder): kube-scheduler scores, vectorised.

Registers NodeOrderFn: for the candidate rows of a task,
``Σ weight × score`` of

* ``leastrequested`` (weight 1): NodeResourcesFit LeastAllocated over cpu and memory,
* ``mostrequested`` (0): MostAllocated over cpu and memory,
* ``balancedresource`` (1): BalancedAllocation over cpu, memory and ``nvidia.com/gpu``,
* ``nodeaffinity`` (2): raw sum of matching preferred node-affinity term weights (Volcano
  does not normalise it),
* ``tainttoleration`` (3): untolerated PreferNoSchedule taints, reverse-normalised over the
  candidates,
* ``podaffinity`` (2): the pod's preferred pod (anti-)affinity terms against placed pods,
  min–max normalised over the candidates.
* ``podtopologyspread`` (2): the pod's ``ScheduleAnyway`` topology spread constraints,
  kube-scheduler's PodTopologySpread score normalised over the candidates (the least crowded
  domain scores 100; see ``rules/topology_spread.py``).

Arguments ``<name>.weight`` as Volcano; weight 0 disables a scorer. The ``imagelocality``
weight is accepted; image data is not part of the snapshot, so image locality scores 0.

Node "requested" is what kube-scheduler's NodeInfo for the node would hold (``NodeTable.held``:
the node's pods, less those evicted this session, plus those pipelined there) plus the incoming
pod. Least/Most allocated count every one of those pods with kube-scheduler's non-zero defaults
(100m CPU / 200Mi for a container naming no request); BalancedAllocation counts requests as
named and leaves out ``nvidia.com/gpu`` for a pod that requests none.
"""

from __future__ import annotations

from collections.abc import Mapping
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from tidesched.framework.plugin import Plugin, RowFn
from tidesched.rules import scoring
from tidesched.rules.node_index import NodeLabelIndex
from tidesched.rules.selectors import SelectorError, affinity_term_namespaces, compile_label_selector
from tidesched.rules.taints import TaintIndex
from tidesched.rules.topology_spread import spread_scores
from tidesched.plugins.predicates import node_labels, node_taints, template_key
from tidesched.plugins.topology_spread import spread_inputs

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo

WEIGHT_KEYS = {
    "leastrequested": "leastrequested.weight",
    "mostrequested": "mostrequested.weight",
    "balancedresource": "balancedresource.weight",
    "nodeaffinity": "nodeaffinity.weight",
    "podaffinity": "podaffinity.weight",
    "tainttoleration": "tainttoleration.weight",
    "imagelocality": "imagelocality.weight",
    "podtopologyspread": "podtopologyspread.weight",
}


def _least(alloc: np.ndarray, req: np.ndarray) -> np.ndarray:
    """LeastAllocated with equal cpu/memory weights, integer steps as kube-scheduler."""
    inc = alloc > 0
    safe = np.where(inc, alloc, 1)
    per = np.where(inc & (req <= alloc), np.floor((alloc - req) * 100 / safe), 0)
    cnt = inc.sum(axis=1)
    return np.where(cnt > 0, np.floor(per.sum(axis=1) / np.maximum(cnt, 1)), 0)


def _most(alloc: np.ndarray, req: np.ndarray) -> np.ndarray:
    inc = alloc > 0
    safe = np.where(inc, alloc, 1)
    per = np.where(inc, np.floor(np.minimum(req, alloc) * 100 / safe), 0)
    cnt = inc.sum(axis=1)
    return np.where(cnt > 0, np.floor(per.sum(axis=1) / np.maximum(cnt, 1)), 0)


def _least_row(alloc: "list[float]", req: "list[float]") -> float:
    """``_least`` for one node in plain floats (a placement updates one or two rows, where
    numpy's per-call overhead would dominate); same arithmetic, same results."""
    total, cnt = 0.0, 0
    for a, r in zip(alloc, req):
        if a > 0:
            cnt += 1
            if r <= a:
                total += math.floor((a - r) * 100 / a)
    return float(math.floor(total / cnt)) if cnt else 0.0


def _most_row(alloc: "list[float]", req: "list[float]") -> float:
    total, cnt = 0.0, 0
    for a, r in zip(alloc, req):
        if a > 0:
            cnt += 1
            total += math.floor(min(r, a) * 100 / a)
    return float(math.floor(total / cnt)) if cnt else 0.0


def _balanced_row(alloc: "list[float]", req: "list[float]") -> float:
    frac = [min(r / a, 1.0) if a > 0 else 0.0 for a, r in zip(alloc, req)]
    inc = [a > 0 for a in alloc]
    cnt = sum(inc)
    if len(frac) == 2:
        std = abs(frac[0] - frac[1]) / 2 if cnt == 2 else 0.0
    else:
        mean = sum(frac) / max(cnt, 1)
        var = sum((f - mean) ** 2 for f, i in zip(frac, inc) if i) / max(cnt, 1)
        std = math.sqrt(var) if cnt >= 2 else 0.0
    return float(math.trunc((1.0 - std) * 100.0))


def _least2(a0: float, a1: float, r0: float, r1: float) -> float:
    """``_least_row`` over cpu and memory, unrolled (the one-row path runs per placement)."""
    total, cnt = 0.0, 0
    if a0 > 0:
        cnt = 1
        if r0 <= a0:
            total += math.floor((a0 - r0) * 100 / a0)
    if a1 > 0:
        cnt += 1
        if r1 <= a1:
            total += math.floor((a1 - r1) * 100 / a1)
    return float(math.floor(total / cnt)) if cnt else 0.0


def _most2(a0: float, a1: float, r0: float, r1: float) -> float:
    """``_most_row`` over cpu and memory, unrolled."""
    total, cnt = 0.0, 0
    if a0 > 0:
        cnt = 1
        total += math.floor(min(r0, a0) * 100 / a0)
    if a1 > 0:
        cnt += 1
        total += math.floor(min(r1, a1) * 100 / a1)
    return float(math.floor(total / cnt)) if cnt else 0.0


def _balanced2(a0: float, a1: float, r0: float, r1: float) -> float:
    """``_balanced_row`` over cpu and memory, unrolled."""
    if a0 > 0 and a1 > 0:
        std = abs(min(r0 / a0, 1.0) - min(r1 / a1, 1.0)) / 2
    else:
        std = 0.0
    return float(math.trunc((1.0 - std) * 100.0))


def _balanced(alloc: np.ndarray, req: np.ndarray) -> np.ndarray:
    """BalancedAllocation: (1 − std of requested fractions) × 100, fractions capped at 1."""
    inc = alloc > 0
    frac = np.minimum(np.where(inc, req / np.where(inc, alloc, 1), 0.0), 1.0)
    cnt = inc.sum(axis=1)
    if frac.shape[1] == 2:
        std = np.where(cnt == 2, np.abs(frac[:, 0] - frac[:, 1]) / 2, 0.0)
    else:
        mean = frac.sum(axis=1) / np.maximum(cnt, 1)
        var = (np.where(inc, (frac - mean[:, None]) ** 2, 0.0)).sum(axis=1) / np.maximum(cnt, 1)
        std = np.where(cnt >= 2, np.sqrt(var), 0.0)
    return np.trunc((1.0 - std) * 100.0)


class NodeOrderPlugin(Plugin):
    name = "nodeorder"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        defaults = scoring.VOLCANO_NODEORDER_DEFAULT_WEIGHTS
        self.weights = {k: arguments.get_int(arg, int(defaults.get(k, 0))) for k, arg in WEIGHT_KEYS.items()}

    def on_session_open(self, ssn: "Session") -> None:
        self.ssn = ssn
        table = ssn.table
        self.balanced_cols = [table.dim_index[d] for d in ("cpu", "memory", "nvidia.com/gpu") if d in table.dim_index]
        self._labels: NodeLabelIndex | None = None
        self._taints: TaintIndex | None = None
        # Per template key: no PreferNoSchedule taint on any node goes untolerated.
        self._taint_free: dict[str, bool] = {}
        self._computes: dict[bytes, tuple[object, Any]] = {}
        ssn.add_fn("node_order", self.name, self.score)
        ssn.add_row_fn("node_order", self.name, RowFn(self._row_key, self._rows))

    @property
    def labels(self) -> NodeLabelIndex:
        if self._labels is None:
            self._labels = node_labels(self.ssn.table)
        return self._labels

    @property
    def taints(self) -> TaintIndex:
        if self._taints is None:
            self._taints = node_taints(self.ssn.table)[0]
        return self._taints

    def score(self, task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
        w = self.weights
        total = self._resource_scores(task)[idx]
        if w["nodeaffinity"]:
            preferred = self._preferred_node_terms(task)
            if preferred:
                try:
                    total += w["nodeaffinity"] * self.labels.preferred_affinity_scores(preferred)[idx]
                except SelectorError:
                    pass  # the predicate already reports a malformed affinity
        if w["tainttoleration"]:
            counts = self.taints.prefer_no_schedule_counts(task.pod.tolerations)[idx]
            if counts.any():
                total += w["tainttoleration"] * scoring.default_normalize(counts, 100, reverse=True)
            else:
                total += w["tainttoleration"] * 100.0
        if w["podaffinity"]:
            total += w["podaffinity"] * self._pod_affinity_scores(task, idx)
        if w["podtopologyspread"] and task.pod.spread_constraints:
            soft = [c for c in task.pod.spread_constraints if not c.hard]
            if soft:
                inputs = spread_inputs(self.ssn, self.labels, self.taints, task, soft)
                total += w["podtopologyspread"] * spread_scores(inputs, idx)
        return total

    # -- row-local form (Session.node_order_all) ---------------------------------------------

    def _row_key(self, task: "TaskInfo") -> tuple[object, str] | None:
        """Row-local unless a scorer reads placed pods on other nodes (pod affinity, topology
        spread) or normalises over the candidates (untolerated PreferNoSchedule taints)."""
        w = self.weights
        if w["podaffinity"] and self._preferred_pod_terms(task):
            return None
        if w["podtopologyspread"] and any(not c.hard for c in task.pod.spread_constraints):
            return None
        template = template_key(task)
        if w["tainttoleration"]:
            free = self._taint_free.get(template)
            if free is None:
                free = self._taint_free[template] = not self.taints.prefer_no_schedule_counts(task.pod.tolerations).any()
            if not free:
                return None
        # The template enters the scores only through preferred node affinity (the taint
        # part is the same constant for every taint-free template): pods that differ only in
        # selectors or tolerations share one vector, so fewer vectors fall behind.
        preferred = w["nodeaffinity"] and self._preferred_node_terms(task)
        return self._resource_compute(task)[0], template if preferred else ""

    def _rows(self, task: "TaskInfo", rows: np.ndarray | None) -> np.ndarray:
        """``score`` for the given rows when ``_row_key`` holds, summed in the same order."""
        w = self.weights
        total = self._resource_compute(task)[1](rows)
        if w["nodeaffinity"]:
            preferred = self._preferred_node_terms(task)
            if preferred:
                try:
                    scores = self.labels.preferred_affinity_scores(preferred)
                    total += w["nodeaffinity"] * (scores if rows is None else scores[rows])
                except SelectorError:
                    pass
        if w["tainttoleration"]:
            total += w["tainttoleration"] * 100.0
        return total

    def _resource_scores(self, task: "TaskInfo") -> np.ndarray:
        """least/most/balanced for every node, cached per request shape and updated only
        for rows whose usage changed (NodeTable.row_cached)."""
        key, compute = self._resource_compute(task)
        return self.ssn.table.row_cached(key, compute)

    def _resource_compute(self, task: "TaskInfo") -> tuple[object, Any]:
        """The request shape's cache key, and least/most/balanced for given rows (all when
        None) as a fresh array; made once per request shape."""
        assert task.init_vec is not None and task.nonzero_req is not None
        shape = task.init_vec.tobytes() + task.nonzero_req.tobytes()
        got = self._computes.get(shape)
        if got is None:
            got = self._computes[shape] = self._make_resource_compute(task)
        return got

    def _make_resource_compute(self, task: "TaskInfo") -> tuple[object, Any]:
        """Least/Most allocated over cpu and memory count the node's pods and the incoming one
        with kube-scheduler's defaults for unnamed requests (``held_nonzero``,
        ``nonzero_req``); BalancedAllocation counts their requests as named (``held``,
        ``init_vec``) over cpu, memory and the GPU column, leaving out the GPU when the pod
        requests none (kube-scheduler bypasses an extended resource the pod does not ask for)."""
        w = self.weights
        table = self.ssn.table
        pod_req = task.init_vec
        assert pod_req is not None and task.nonzero_req is not None
        nonzero = task.nonzero_req
        cols = [c for c in self.balanced_cols if c < 2 or pod_req[c] > 0]
        balanced_req = pod_req[cols]
        use_balanced = bool(w["balancedresource"] and np.any(balanced_req > 0))

        wl, wm, wb = w["leastrequested"], w["mostrequested"], w["balancedresource"]
        nz0, nz1 = nonzero.tolist()
        breq = balanced_req.tolist()
        alloc_rows, held_rows, held_nz_rows = table.allocatable, table.held, table.held_nonzero
        two_balanced = cols == [0, 1]  # BalancedAllocation over cpu and memory only

        def compute_rows(rows: np.ndarray) -> np.ndarray:
            values = []
            for i in rows.tolist():
                alloc = alloc_rows[i].tolist()
                held = held_rows[i].tolist()
                a0, a1 = alloc[0], alloc[1]
                r0, r1 = held_nz_rows[i].tolist()
                r0 += nz0
                r1 += nz1
                v = 0.0
                if wl:
                    v += wl * _least2(a0, a1, r0, r1)
                if wm:
                    v += wm * _most2(a0, a1, r0, r1)
                if use_balanced:
                    if two_balanced:
                        v += wb * _balanced2(a0, a1, held[0] + breq[0], held[1] + breq[1])
                    else:
                        v += wb * _balanced_row([alloc[c] for c in cols], [held[c] + b for c, b in zip(cols, breq)])
                values.append(v)
            return np.array(values)

        def compute(rows: np.ndarray | None) -> np.ndarray:
            if rows is not None and len(rows) <= 8:
                return compute_rows(rows)
            sel = slice(None) if rows is None else rows
            out = np.zeros(len(table) if rows is None else len(rows))
            if w["leastrequested"] or w["mostrequested"]:
                alloc = table.allocatable[sel, :2]
                req = table.held_nonzero[sel] + nonzero
                if w["leastrequested"]:
                    out += w["leastrequested"] * _least(alloc, req)
                if w["mostrequested"]:
                    out += w["mostrequested"] * _most(alloc, req)
            if use_balanced:
                alloc = table.allocatable[sel][:, cols]
                req = table.held[sel][:, cols] + balanced_req
                out += w["balancedresource"] * _balanced(alloc, req)
            return out

        key = ("nodeorder", nonzero.tobytes(), tuple(cols), balanced_req.tobytes() if use_balanced else b"")
        return key, compute

    @staticmethod
    def _preferred_node_terms(task: "TaskInfo") -> list[Mapping[str, Any]]:
        if not task.pod.affinity:  # most pods: no ABC isinstance checks on the hot path
            return []
        aff = task.pod.affinity.get("nodeAffinity") if isinstance(task.pod.affinity, Mapping) else None
        if not isinstance(aff, Mapping):
            return []
        return list(aff.get("preferredDuringSchedulingIgnoredDuringExecution") or [])

    @staticmethod
    def _preferred_pod_terms(task: "TaskInfo") -> list[tuple[Mapping[str, Any], int]]:
        """The pod's preferred pod affinity (+weight) and anti-affinity (−weight) terms."""
        if not task.pod.affinity:
            return []
        aff = task.pod.affinity if isinstance(task.pod.affinity, Mapping) else {}
        terms: list[tuple[Mapping[str, Any], int]] = []
        for kind, sign in (("podAffinity", 1), ("podAntiAffinity", -1)):
            part = aff.get(kind)
            if isinstance(part, Mapping):
                for wt in part.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
                    if isinstance(wt, Mapping) and isinstance(wt.get("podAffinityTerm"), Mapping):
                        terms.append((wt["podAffinityTerm"], sign * int(wt.get("weight", 0))))
        return terms

    def _pod_affinity_scores(self, task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
        terms = self._preferred_pod_terms(task)
        if not terms:
            return np.zeros(len(idx))
        table = self.ssn.table
        n = len(table)
        contributions = []
        for term, weight in terms:
            try:
                selector = compile_label_selector(term.get("labelSelector"))
                namespaces = affinity_term_namespaces(term, task.namespace)
            except SelectorError:
                continue
            per_node = np.zeros(n, dtype=np.int64)
            for row, tasks in enumerate(table.tasks):
                for other in tasks.values():
                    if other.uid != task.uid and other.namespace in namespaces and selector.matches(other.pod.meta.labels):
                        per_node[row] += weight
            contributions.append((self.labels.topology_codes(str(term.get("topologyKey", ""))), per_node))
        cand = np.zeros(n, dtype=bool)
        cand[idx] = True
        return scoring.interpod_affinity_scores(contributions, n, cand)[idx]
