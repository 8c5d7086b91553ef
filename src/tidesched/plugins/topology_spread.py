"""Pod topology spread in a session: the counts it reads and the arrays it computes on.

Not a plugin of its own (kube-scheduler's PodTopologySpread is split as Volcano splits it):
the predicates plugin filters ``DoNotSchedule`` constraints (``predicate.PodTopologySpreadEnable``)
and nodeorder scores ``ScheduleAnyway`` ones (``podtopologyspread.weight``); both use this
module. The arithmetic is in :mod:`tidesched.rules.topology_spread`.

:class:`MatchingPods` counts, per node row, the placed pods of a namespace that a selector
matches: every pod on a node except Releasing ones (terminating, or evicted in this session),
so the pods this session allocated or pipelined count at once. It is made for a session on the
first pod with constraints (pods without them cost nothing) and kept current by an event
handler, so a Statement's discard and the preemption dry run's remove/restore revert it.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from tidesched.framework.plugin import EventHandler
from tidesched.rules.node_index import NodeLabelIndex
from tidesched.rules.selectors import CompiledLabelSelector, SelectorError
from tidesched.rules.taints import TaintIndex
from tidesched.rules.topology_spread import SpreadConstraint, SpreadInput
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo
    from tidesched.model.node_table import NodeTable

_Key = tuple[str, CompiledLabelSelector]
_Placed = dict[str, tuple[int, "TaskInfo"]]  # uid -> (row, task)


def _anchors(selector: CompiledLabelSelector) -> list[tuple[str, str]] | None:
    """(label key, value) pairs one of which every matching pod carries: the values of the
    selector's narrowest ``In`` requirement; None when it has none."""
    ins = [(k, values) for k, op, values in selector.requirements if op == "In"]
    if not ins:
        return None
    key, values = min(ins, key=lambda kv: len(kv[1]))
    return [(key, v) for v in values]


class MatchingPods:
    """Per-row counts of placed pods matching a (namespace, selector) pair.

    Selectors are usually a workload's ``matchLabels`` and there may be one per workload, so
    both directions are indexed by label: a new selector counts only the pods carrying one of
    its anchor labels, and a placement updates only the selectors anchored on its labels.
    Counts are kept sparse (row -> count) with dense arrays for the most recently used
    selectors only: thousands of workloads over thousands of nodes stay small."""

    DENSE_KEPT = 64

    def __init__(self, table: "NodeTable") -> None:
        self.table = table
        self.placed: _Placed = {}  # every counted pod
        self._by_ns: dict[str, _Placed] = {}
        self._by_label: dict[tuple[str, str, str], _Placed] = {}
        for row, tasks in enumerate(table.tasks):
            for t in tasks.values():
                if t.status != TaskStatus.RELEASING:
                    self._index(row, t)
        self._sparse: dict[_Key, dict[int, int]] = {}
        self._dense: OrderedDict[_Key, np.ndarray] = OrderedDict()
        # Selectors to update for a pod: by (namespace, label key, value), or per namespace.
        self._anchored: dict[tuple[str, str, str], list[_Key]] = {}
        self._unanchored: dict[str, list[_Key]] = {}

    def _index(self, row: int, task: "TaskInfo") -> None:
        entry = (row, task)
        self.placed[task.uid] = entry
        self._by_ns.setdefault(task.namespace, {})[task.uid] = entry
        for k, v in task.pod.meta.labels.items():
            self._by_label.setdefault((task.namespace, k, v), {})[task.uid] = entry

    def _unindex(self, task: "TaskInfo") -> tuple[int, "TaskInfo"] | None:
        entry = self.placed.pop(task.uid, None)
        if entry is not None:
            self._by_ns[task.namespace].pop(task.uid, None)
            for k, v in task.pod.meta.labels.items():
                self._by_label[(task.namespace, k, v)].pop(task.uid, None)
        return entry

    def counts(self, namespace: str, selector: CompiledLabelSelector) -> np.ndarray:
        """Matching pods per row (the array is the cache's own: do not modify it)."""
        key = (namespace, selector)
        dense = self._dense.get(key)
        if dense is not None:
            self._dense.move_to_end(key)
            return dense
        sparse = self._sparse.get(key)
        if sparse is None:
            sparse = self._sparse[key] = self._count(key)
        dense = np.zeros(len(self.table), dtype=np.int64)
        if sparse:
            dense[np.fromiter(sparse, dtype=np.int64, count=len(sparse))] = list(sparse.values())
        self._dense[key] = dense
        if len(self._dense) > self.DENSE_KEPT:
            self._dense.popitem(last=False)
        return dense

    def _count(self, key: _Key) -> dict[int, int]:
        namespace, selector = key
        anchors = _anchors(selector)
        if anchors is None:
            pools = [self._by_ns.get(namespace, {})]
            self._unanchored.setdefault(namespace, []).append(key)
        else:
            pools = [self._by_label.get((namespace, k, v), {}) for k, v in anchors]
            for k, v in anchors:
                self._anchored.setdefault((namespace, k, v), []).append(key)
        sparse: dict[int, int] = {}
        for pool in pools:
            for row, t in pool.values():
                if selector.matches(t.pod.meta.labels):
                    sparse[row] = sparse.get(row, 0) + 1
        return sparse

    def _shift(self, row: int, task: "TaskInfo", delta: int) -> None:
        ns, labels = task.namespace, task.pod.meta.labels
        keys = list(self._unanchored.get(ns, ()))
        for k, v in labels.items():
            keys.extend(self._anchored.get((ns, k, v), ()))
        for key in keys:
            if key[1].matches(labels):
                sparse = self._sparse[key]
                n = sparse.get(row, 0) + delta
                if n:
                    sparse[row] = n
                else:
                    sparse.pop(row, None)
                dense = self._dense.get(key)
                if dense is not None:
                    dense[row] += delta

    def on_allocate(self, task: "TaskInfo") -> None:
        if task.uid in self.placed or task.status == TaskStatus.RELEASING:
            return
        row = self.table.index.get(task.node_name) if task.node_name else None
        if row is None or task.uid not in self.table.tasks[row]:
            return
        self._index(row, task)
        self._shift(row, task, 1)

    def on_deallocate(self, task: "TaskInfo") -> None:
        entry = self._unindex(task)
        if entry is not None:
            self._shift(entry[0], task, -1)


_SESSIONS: "weakref.WeakKeyDictionary[Session, MatchingPods]" = weakref.WeakKeyDictionary()


def matching_pods(ssn: "Session") -> MatchingPods:
    """The session's counts, made (and hooked to its events) on first use."""
    counter = _SESSIONS.get(ssn)
    if counter is None:
        counter = MatchingPods(ssn.table)
        ssn.add_event_handler(EventHandler(allocate=counter.on_allocate, deallocate=counter.on_deallocate))
        _SESSIONS[ssn] = counter
    return counter


def spread_inputs(
    ssn: "Session",
    labels: NodeLabelIndex,
    taints: TaintIndex,
    task: "TaskInfo",
    constraints: list[SpreadConstraint],
) -> list[SpreadInput]:
    """The constraints of one kind as arrays over the session's nodes, for ``task``."""
    n = len(ssn.table)
    counter = matching_pods(ssn)
    pod_labels = task.pod.meta.labels
    affinity_mask: np.ndarray | None = None
    taint_mask: np.ndarray | None = None
    own = counter.placed.get(task.uid)  # a placed task does not count against itself
    out: list[SpreadInput] = []
    for c in constraints:
        included = np.ones(n, dtype=bool)
        if c.honor_affinity:
            if affinity_mask is None:
                try:
                    affinity_mask = labels.pod_node_mask(task.pod.raw_spec)
                except SelectorError:  # the NodeAffinity predicate reports it
                    affinity_mask = np.zeros(n, dtype=bool)
            included &= affinity_mask
        if c.honor_taints:
            if taint_mask is None:
                try:
                    taint_mask = taints.filter_mask(task.pod.tolerations)
                except SelectorError:  # the TaintToleration predicate reports it
                    taint_mask = np.zeros(n, dtype=bool)
            included &= taint_mask
        if c.counts_pods:
            counts = counter.counts(task.namespace, c.selector)
            if own is not None and c.selector.matches(pod_labels):
                counts = counts.copy()
                counts[own[0]] -= 1
        else:
            counts = np.zeros(n, dtype=np.int64)
        codes = labels.topology_codes(c.topology_key)
        out.append(
            SpreadInput(
                constraint=c,
                codes=codes,
                domains=len(labels.topology_values(c.topology_key)),
                counts=counts,
                included=included,
                self_match=int(c.selector.matches(pod_labels)),
            )
        )
    return out
