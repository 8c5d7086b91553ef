"""PodDisruptionBudgets in victim selection (ACT-6), after kube-scheduler's preemption.

Rules (kube-scheduler ``filterPodsWithPDBViolation`` and ``SelectVictimsOnNode``, restated):

* A budget **guards** a pod when it is in the pod's namespace and its selector matches the
  pod's labels. A nil or empty selector guards nothing, a pod without labels is guarded by
  nothing, and a pod named in the budget's ``status.disruptedPods`` (its eviction is already
  being processed) no longer counts against it.
* **Classification** of a node's potential victims, most important first: every budget
  guarding a pod gives up one disruption for it; a pod that takes any of its budgets below
  zero is a *violating* victim. The count-down is per classification (per node): plans for
  different nodes are compared on equal terms.
* What the budgets start from: ``status.disruptionsAllowed`` minus the pods this session has
  already evicted (staged or committed) that the budget guards. kube-scheduler preempts for
  one pod per cycle and the Eviction API lowers the budget before the next; a session
  preempts for many pods on one snapshot, so it subtracts its own evictions itself.

A :class:`BudgetView` holds those starting values for one preemptor: dry runs move tasks to
Pending and always undo it, so the values stay valid across all nodes of one attempt.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo
    from tidesched.model.objects import PodDisruptionBudget

_INDEXES: "weakref.WeakKeyDictionary[Session, _BudgetIndex]" = weakref.WeakKeyDictionary()


class _BudgetIndex:
    """Per session: the budgets by namespace and, per task, the budgets guarding it."""

    __slots__ = ("ssn", "by_namespace", "_guards", "_guarded")

    def __init__(self, ssn: "Session") -> None:
        self.ssn = ssn
        self.by_namespace: dict[str, list["PodDisruptionBudget"]] = {}
        for pdb in sorted(ssn.snapshot.pdbs, key=lambda p: p.key):
            self.by_namespace.setdefault(pdb.namespace, []).append(pdb)
        self._guards: dict[str, tuple["PodDisruptionBudget", ...]] = {}
        self._guarded: dict[str, list["TaskInfo"]] | None = None

    def guards(self, task: "TaskInfo") -> tuple["PodDisruptionBudget", ...]:
        """The budgets a disruption of ``task`` counts against, in key order."""
        hit = self._guards.get(task.uid)
        if hit is None:
            labels = task.pod.meta.labels
            candidates = self.by_namespace.get(task.namespace, ()) if labels else ()
            hit = tuple(
                p
                for p in candidates
                if p.covers(task.namespace, labels) and task.name not in p.disrupted_pods
            )
            self._guards[task.uid] = hit
        return hit

    def evicted_here(self, pdb: "PodDisruptionBudget") -> int:
        """How many pods guarded by ``pdb`` this session has evicted so far."""
        if self._guarded is None:
            guarded: dict[str, list["TaskInfo"]] = {}
            if self.by_namespace:
                for task in sorted(self.ssn.tasks.values(), key=lambda t: t.key):
                    for p in self.guards(task):
                        guarded.setdefault(p.key, []).append(task)
            self._guarded = guarded
        return sum(
            1
            for t in self._guarded.get(pdb.key, ())
            if t.status == TaskStatus.RELEASING and t.pod.status != TaskStatus.RELEASING
        )


class BudgetView:
    """The budgets as they stand for one preemption attempt."""

    __slots__ = ("_index", "_start", "_own")

    def __init__(self, index: _BudgetIndex, own_evictions: bool = True) -> None:
        self._index = index
        self._start: dict[str, int] = {}
        self._own = own_evictions  # take this session's evictions off (see the module rules)

    @property
    def empty(self) -> bool:
        return not self._index.by_namespace

    def allowed(self, pdb: "PodDisruptionBudget") -> int:
        """Disruptions ``pdb`` still allows, this session's evictions taken off."""
        n = self._start.get(pdb.key)
        if n is None:
            n = pdb.disruptions_allowed - (self._index.evicted_here(pdb) if self._own else 0)
            self._start[pdb.key] = n
        return n

    def violating(self, victims_most_important_first: Iterable["TaskInfo"]) -> set[str]:
        """UIDs of the victims whose eviction would violate a budget (see the module rules).
        The input order matters: the more important pods use up the budgets first."""
        if self.empty:
            return set()
        left: dict[str, int] = {}
        out: set[str] = set()
        for task in victims_most_important_first:
            for pdb in self._index.guards(task):
                n = left.get(pdb.key)
                n = (self.allowed(pdb) if n is None else n) - 1
                left[pdb.key] = n
                if n < 0:
                    out.add(task.uid)
        return out


def budget_view(ssn: "Session", own_evictions: bool = True) -> BudgetView:
    """A fresh view of the session's budgets (the per-session index is built once);
    ``own_evictions=False``: from ``status.disruptionsAllowed`` alone, as Volcano's pdb plugin."""
    index = _INDEXES.get(ssn)
    if index is None:
        index = _BudgetIndex(ssn)
        _INDEXES[ssn] = index
    return BudgetView(index, own_evictions)
