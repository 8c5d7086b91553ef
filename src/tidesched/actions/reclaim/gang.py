"""Gang-safe reclaim: one reclaiming job's turn (TIDE-6, DEC-8; ``enableGangSafeReclaim``).

For each task of the job, in the loop's order:

1. **Is a gang at stake?** Over every candidate node, the victims Volcano would consider
   (Reclaimable ∧ ValidateVictims) are checked: a gang is at stake when evicting some of one
   node's victims one by one could leave a job of several pods running below
   ``max(minAvailable, 1)``. A job of one pod, and pods above minAvailable, put no gang at
   stake.
2. **Room already being freed** by a job this planner evicted whole (on any node, for an
   earlier task) takes the task first, without evicting anything; when a gang is at stake,
   any room being released counts. Room idle now is left to allocate, as in Volcano.
3. **No gang at stake**: Volcano's per-pod walk decides (``steps.volcano_walk``), so
   the victims are exactly Volcano's: first working node in name order, victims in
   Volcano's victim order (the newest / highest-index task of equal jobs first). With
   ``victimOrder: tidal`` (the default where capacity-card decides reclaim), step 4 instead,
   as if a gang were at stake: DEC-8 ranks single-pod jobs too (TIDE-6).
4. **A gang at stake**: the whole-gang planner (``gang_victims``) gives each node's cheapest
   plan, ranked by DEC-8. The plan is chosen **for the job, not for the task**: when the job
   has more tasks to place and the cheapest plan's freed room does not hold them all, up to
   ``ALTERNATIVES`` other plans whose freed room holds more tasks like this one are tried
   too. Each candidate is taken in a dry run that then places the job's next ``HORIZON``
   tasks greedily (steps 1–4 without this lookahead), and the plan whose run places the
   most tasks, then costs least in DEC-8's order over everything the job's turn evicts
   with it (highest priority broken, jobs broken, pods evicted, most recently started,
   names), is taken; on a tie the cheapest plan stays, so the job never does worse than
   planning each task alone (over the horizon). The tasks the run covered then follow it (greedily, as in
   the run) before the job looks ahead again. So a Deployment needing two replicas breaks
   one two-node gang rather than a single-pod job for the first replica and the gang for
   the second. A dry run is skipped, or stopped early, once it cannot beat a run that
   placed every task.

The chosen plan is planned afresh before anything is evicted (plans are cached across
tasks, see ``PlanCache``), so a stale entry can cost a better choice at worst, never a
wrong eviction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from tidesched.actions.reclaim.gang_victims import NO_JOB, GangVictims, Offers, Plan, PlanCache, RowPlan
from tidesched.actions.reclaim.steps import ACTION, Placed, Step, eligible, place, reclaimees, volcano_walk
from tidesched.actions.victims import candidate_nodes, validate_victims
from tidesched.framework.reasons import eviction_reason
from tidesched.framework.victim_order import order_victims
from tidesched.framework.placement import best_node
from tidesched.framework.statement import Statement
from tidesched.model.status import ALLOCATED_STATUSES

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo

# Plans besides the cheapest one tried in a dry run for a job's remaining tasks, and how
# many of those tasks a dry run places at most.
ALTERNATIVES = 4
HORIZON = 8


class GangSafeReclaim:
    """The gang-safe choices of one reclaim action (plans cached across its tasks)."""

    def __init__(self, ssn: "Session", *, every_reclaim_by_dec8: bool = False) -> None:
        self.ssn = ssn
        # victimOrder tidal: DEC-8 ranks every reclaim, also where no gang is at stake.
        self.every_reclaim_by_dec8 = every_reclaim_by_dec8
        self.cache = PlanCache(ssn)
        # Nodes where a job evicted whole by this planner frees room.
        self.freed = np.zeros(len(ssn.table), dtype=bool)
        self.looked = False  # whether the last step compared dry runs
        # Pods per victim job evicted so far in the current job's turn: dry runs are scored
        # with them, so that a turn is ranked by everything it evicts.
        self.turn_evicted: dict[str, int] = {}

    def keep(self) -> "Callable[[], None]":
        """Save what a dry run of a job's turn may change here; the result puts it back."""
        freed, turn_evicted = self.freed.copy(), dict(self.turn_evicted)

        def restore() -> None:
            self.freed, self.turn_evicted = freed, turn_evicted

        return restore

    def job_turn(self, stmt: Statement, queue: "QueueInfo", job: "JobInfo", tasks: list["TaskInfo"]) -> None:
        """Reclaim for ``tasks`` (the job's pending tasks in TaskOrder) while the job starves."""
        ssn = self.ssn
        # The tasks a dry run placed greedily after the plan it chose follow that run
        # (greedy, as it did) instead of looking ahead again.
        look_from = 0
        self.turn_evicted = {}
        for i, task in enumerate(tasks):
            if not ssn.job_starving(job):
                break
            if not eligible(ssn, queue, task):
                continue
            self.looked = False
            got = self.step(stmt, queue, job, task, tasks[i + 1 :] if i >= look_from else None)
            if self.looked:
                look_from = i + 1 + HORIZON
            if got is not None:
                _count(self.turn_evicted, got)

    # -- one task ------------------------------------------------------------------------

    def step(
        self, stmt: Statement, queue: "QueueInfo", job: "JobInfo", task: "TaskInfo", rest: list["TaskInfo"] | None
    ) -> Step | None:
        """Place ``task`` (see the module rules); ``rest``: the job's later tasks, for the
        lookahead (None: no lookahead)."""
        ssn, table = self.ssn, self.ssn.table
        pred = ssn.predicate(task)
        planner = GangVictims(ssn, task)
        candidates = candidate_nodes(ssn, task, pred)

        def compute(row: int) -> RowPlan:
            return self._offer(planner, job, task, row)

        offers = self.cache.offers(task, candidates, compute)
        at_stake = offers.at_stake or self.every_reclaim_by_dec8

        releasing = pred.passed & table.fits_cached(task, "future") & ~table.fits_cached(task, "idle")
        if ssn.topology.evict_within is not None:
            releasing &= ssn.topology.evict_within
        if not at_stake:
            releasing &= self.freed
        if releasing.any():
            if not ssn.allocatable(queue, task):
                return None
            row = best_node(ssn, task, releasing)
            assert row is not None
            stmt.pipeline(task, table.names[row])
            return Step(task, row)
        if not at_stake:
            return volcano_walk(ssn, stmt, queue, job, task)

        if rest:
            cheapest = offers.cheapest(8 * (ALTERNATIVES + 1))
        else:
            cheapest = offers.cheapest(1)
        if not cheapest:
            return None
        first = cheapest[0]
        if rest and len(cheapest) > 1:
            first = self._lookahead(queue, job, task, rest[:HORIZON], planner, cheapest, offers)
            # The dry runs planned in their own states: the fallbacks are read afresh.
            offers = self.cache.offers(task, candidates, compute)
        return self._execute(stmt, queue, job, task, planner, first, offers)

    def _offer(self, planner: GangVictims, job: "JobInfo", task: "TaskInfo", row: int) -> RowPlan:
        ssn = self.ssn
        found = reclaimees(ssn, job, row)
        if not found:
            return RowPlan(None, False)
        victims = ssn.reclaimable(task, found)
        if not victims or not validate_victims(ssn, task, row, victims):
            return RowPlan(None, False)
        ordered = order_victims(ssn, victims, task)
        return RowPlan(planner.plan(row, ordered), planner.at_stake(ordered))

    def _execute(
        self,
        stmt: Statement,
        queue: "QueueInfo",
        job: "JobInfo",
        task: "TaskInfo",
        planner: GangVictims,
        first: Plan,
        others: Offers | None,
    ) -> Step | None:
        """Carry out ``first``, else the cheapest of ``others`` that still holds when
        planned afresh."""
        ssn, table = self.ssn, self.ssn.table
        plans = [first]
        more = others is not None
        while plans or more:
            if not plans:
                # Rare: only when the chosen plan no longer holds.
                assert others is not None
                plans = [p for p in others.all() if p is not first]
                more = False
                continue
            cached = plans.pop(0)
            plan = self._offer(planner, job, task, cached.row).plan
            if plan is None or plan.cost != cached.cost:
                self.cache.forget(task, cached.row)
                if plan is not None:
                    plans.append(plan)
                    plans.sort(key=lambda p: p.cost)
                continue
            reason = eviction_reason(ACTION, task.key, table.names[plan.row])
            reasons = {j.uid: f"{reason}; whole job {j.key} evicted (gang-safe reclaim)" for j in plan.broken}
            victims = plan.evictions(planner)
            placed = place(ssn, stmt, queue, task, plan.row, victims, reasons)
            if placed is Placed.YES:
                for j in plan.broken:
                    for t in planner.occupied(j):
                        i = table.index.get(t.node_name)
                        if i is not None:
                            self.freed[i] = True
                return Step(task, plan.row, victims)
            if placed is Placed.QUEUE_FULL:
                # The queue cannot take the task; evictions elsewhere would not change that.
                return None
        return None

    # -- the job's plan ------------------------------------------------------------------

    def _lookahead(
        self,
        queue: "QueueInfo",
        job: "JobInfo",
        task: "TaskInfo",
        rest: list["TaskInfo"],
        planner: GangVictims,
        cheapest: list[Plan],
        offers: Offers,
    ) -> Plan:
        """The plan best for the whole job among ``cheapest`` (cheapest first; see the
        module rules)."""
        everything = 1 + len(rest)
        greedy = cheapest[0]
        covered = planner.covers(greedy, everything)
        options = [greedy]
        if covered < everything:
            seen = {frozenset(t.uid for t in greedy.evictions(planner))}
            for plan in cheapest[1:]:
                if len(options) > ALTERNATIVES:
                    break
                victims = frozenset(t.uid for t in plan.evictions(planner))
                if victims in seen:
                    continue
                seen.add(victims)
                if planner.covers(plan, everything) > covered:
                    options.append(plan)
        if len(options) == 1:
            return greedy
        self.looked = True
        # The cheapest plan's run falls back on the other plans as the step itself would.
        best, best_score = greedy, self._dry_run(queue, job, task, rest, planner, greedy, None, offers)
        for plan in options[1:]:
            # A run costs at least its first plan; once a run placed every task, a run
            # whose evictions so far already cost more is not finished.
            bound = best_score[1:4] if best_score[0] == -everything else None
            if bound is not None and (-everything, *plan.cost[:4]) > best_score[:5]:
                continue
            score = self._dry_run(queue, job, task, rest, planner, plan, bound, None)
            if score is not None and score < best_score:
                best, best_score = plan, score
        return best

    def _dry_run(
        self,
        queue: "QueueInfo",
        job: "JobInfo",
        task: "TaskInfo",
        rest: list["TaskInfo"],
        planner: GangVictims,
        plan: Plan,
        bound: tuple | None,
        fallback: Offers | None,
    ) -> tuple | None:
        """The score of taking ``plan`` for ``task`` and placing ``rest`` greedily after it;
        None when the evictions exceed ``bound`` (highest priority, jobs, pods broken)."""
        ssn = self.ssn
        freed = self.freed.copy()
        trial = Statement(ssn)
        steps: list[Step] = []
        evicted = dict(self.turn_evicted)  # pods per job, this turn's earlier steps included
        aborted = False

        def took(got: Step) -> None:
            steps.append(got)
            _count(evicted, got)

        first = self._execute(trial, queue, job, task, planner, plan, fallback)
        if first is not None:
            took(first)
            for t in rest:
                if bound is not None and self._so_far(evicted) > bound:
                    aborted = True
                    break
                if not ssn.job_starving(job):
                    break
                if eligible(ssn, queue, t):
                    got = self.step(trial, queue, job, t, None)
                    if got is not None:
                        took(got)
        trial.discard()
        self.freed = freed
        return None if aborted else self._score(task, steps, evicted)

    def _so_far(self, evicted: dict[str, int]) -> tuple:
        """Highest priority, jobs and pods broken by a dry run so far (``evicted``: pods
        per job), read in the run's own state."""
        broken = []
        for uid in evicted:
            j = self.ssn.jobs[uid]
            if sum(j.status_count[s] for s in ALLOCATED_STATUSES) < max(j.min_available, 1):
                broken.append(j)
        return (max((j.priority for j in broken), default=NO_JOB), len(broken), sum(evicted.values()))

    def _score(self, task: "TaskInfo", steps: list[Step], evicted: dict[str, int]) -> tuple:
        """Most tasks placed by the run ``steps``, then DEC-8 over everything the turn evicts
        with it (``evicted``: pods per job), as a plan's cost; read after the run was undone."""
        ssn = self.ssn
        facts = GangVictims(ssn, task)
        in_run: dict[str, int] = {}
        for s in steps:
            _count(in_run, s)
        # Broken: left with fewer than its minimum (the turn's earlier evictions are already
        # out of ``occupied``; the run's are subtracted).
        broken = [
            j
            for uid in evicted
            if len(facts.occupied(j := ssn.jobs[uid])) - in_run.get(uid, 0) < max(j.min_available, 1)
        ]
        return (
            -len(steps),
            max((j.priority for j in broken), default=NO_JOB),
            len(broken),
            sum(evicted.values()),
            tuple(sorted(-facts.started(j) for j in broken)),
            tuple(sorted(j.key for j in broken)),
        )


def _count(evicted: dict[str, int], step: Step) -> None:
    for v in step.victims:
        evicted[v.job] = evicted.get(v.job, 0) + 1
