"""pdb plugin (Volcano plugins/pdb): PodDisruptionBudgets in victim selection.

One filter, registered for three hooks: Preemptable and Reclaimable (victims of preempt and
reclaim) and VictimTasks (what shuffle evicts). Given candidate pods, in their order, it keeps
those whose eviction violates no budget (Volcano ``pdbFilterFn``, restated):

* A budget **guards** a pod when it is in the pod's namespace and its selector matches the
  pod's labels; a nil or empty selector guards nothing, and a pod named in the budget's
  ``status.disruptedPods`` is no longer counted against it (``actions.pdb``, shared with
  topology-aware preempt).
* Each candidate takes one disruption from every budget guarding it, counting down from
  ``status.disruptionsAllowed`` afresh on every call; a candidate that takes a budget below
  zero is dropped.
* **A pod without labels is dropped** — never a victim while this plugin is configured.
  Volcano does exactly this (it skips such pods before checking any budget, and so never
  returns them); tidesched keeps it, so the plugin decides as vc-scheduler's does.
* The plugin always votes (Permit): an empty answer leaves the tier without victims.

As a VictimTasks fn the same filter returns every candidate that violates no budget, so with
``shuffle`` and ``enabledVictim`` on, pdb alone chooses every labelled Running pod its budgets
allow (Volcano's behaviour; pair it with the plugin that should choose, in an earlier tier,
or set ``enabledVictim: false`` on pdb).

Difference from Volcano, on the safe side: the count-down starts from
``disruptionsAllowed`` less the pods this session has already evicted that the budget guards
(Volcano reads the budgets' status, which the API server lowers only after the session), so
one session never takes a budget below zero across several preemptions.

Argument (tidesched's own): ``countSessionEvictions`` (default true, the rule above);
``false`` gives Volcano v1.15.1's rule, every call counting down from ``disruptionsAllowed``
afresh, so a job's statement may evict two pods of a budget that allows one (differential
seed 3168).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.actions.pdb import budget_view
from tidesched.framework.plugin import PERMIT, Plugin

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo


class PdbPlugin(Plugin):
    name = "pdb"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.count_session = arguments.get_bool("countSessionEvictions", True)

    def on_session_open(self, ssn: "Session") -> None:
        def allowed(tasks: list["TaskInfo"]) -> list["TaskInfo"]:
            view = budget_view(ssn, own_evictions=self.count_session)
            labelled = [t for t in tasks if t.pod.meta.labels]
            violating = view.violating(labelled)
            return [t for t in labelled if t.uid not in violating]

        def evictable(_actor: "TaskInfo", candidates: list["TaskInfo"]) -> tuple[list["TaskInfo"], int]:
            return allowed(candidates), PERMIT

        ssn.add_fn("victim_tasks", self.name, allowed)
        ssn.add_fn("preemptable", self.name, evictable)
        ssn.add_fn("reclaimable", self.name, evictable)
