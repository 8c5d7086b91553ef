"""Gang-safe victim choice for reclaim (TIDE-6, DEC-8).

Volcano evicts victims one task at a time, so reclaiming from ten gangs can take one pod from
each and kill all ten (its issues #4607, #5994). Here a victim job is treated as a unit:

* A job's **surplus** pods — those above ``max(minAvailable, 1)`` among its occupied pods —
  can be evicted one by one without breaking it. For a job with sub-groups (``subGroupPolicy``
  with ``minSubGroups``) a pod is surplus only if its sub-group is broken already (a pod of it
  is gone) or its policy has a ready sub-group to spare: the first pod taken from a ready
  sub-group breaks it, later pods of that sub-group cost nothing more — so surplus pods are
  taken from as few sub-groups as the policies allow, never below minSubGroups.
* Taking more than the surplus **breaks** the job: then every occupied pod of it is evicted,
  on every node, and all the resources it frees count (on the reclaimer's node now, on the
  other nodes for the reclaimer's next tasks). A job can be broken only when every one of
  its occupied pods is Running and acceptable as a victim to the Reclaimable plugins.

For one reclaimer task and one node, a **plan** is the set of evictions that makes the task
fit the node's FutureIdle. Plans are compared lexicographically (DEC-8): the highest
priority among the jobs broken (none broken beats any), then the number of jobs broken,
then the number of pods evicted, then the most recently started jobs; the ties left are
broken as Volcano's per-pod walk would: the first node in name order, then the jobs first
in Volcano's victim order there (the newest of equal jobs), then the job names. Surplus pods are used before any job is broken and dropped again when
a broken job freed enough; jobs are added lowest priority first, so a higher-priority job
is never broken while lower-priority ones would do.

Each node also says whether a **gang is at stake** there (``RowPlan.at_stake``): whether
evicting some of its victims one by one, as Volcano does, could leave a job of several pods
running below ``max(minAvailable, 1)``, or a policy of its sub-groups with fewer ready
sub-groups than ``minSubGroups``; ``gang_reclaim`` follows Volcano where no node does.

Plans are kept between the tasks of one reclaim action (``PlanCache``): tasks alike (same
queue, request, annotations and labels) share them, and only the nodes that changed since —
and the nodes of the victim jobs that have pods there — are planned again; the cheapest are
taken from a heap per task signature whose replaced entries are skipped lazily. The plan
finally chosen is always planned afresh before anything is evicted, so a stale entry can
cost a better choice at worst, never a wrong eviction.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from tidesched.actions.victims import devices_fit
from tidesched.model.status import ALLOCATED_STATUSES, TaskStatus

GROUP_NAME_KEY = "scheduling.k8s.io/group-name"
RowFn = Callable[[int], "RowPlan"]

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo

# Sorts before any real priority: a plan that breaks no job.
NO_JOB = float("-inf")


@dataclass
class RowPlan:
    """What one node offers a reclaimer task: the cheapest plan there (None: no plan is
    enough), and whether a gang is at stake there — whether evicting the node's victims one
    by one, as Volcano does, could leave a job of several pods running below minAvailable."""

    plan: "Plan | None"
    at_stake: bool


class Offers:
    """What the candidate nodes offer one reclaimer task: whether a gang is at stake on any
    of them, and their plans, cheapest first on demand."""

    def __init__(self, at_stake: bool, entry: "_Entry", allowed: list[bool]) -> None:
        self.at_stake = at_stake
        self._entry = entry
        self._allowed = allowed

    def cheapest(self, n: int) -> list["Plan"]:
        """The ``n`` cheapest plans (fewer when there are fewer), cheapest first."""
        return self._entry.cheapest(n, self._allowed)

    def all(self) -> list["Plan"]:
        """Every plan, cheapest first."""
        allowed = self._allowed
        return sorted((p for r, p in self._entry.plans.items() if allowed[r]), key=lambda p: p.cost)


@dataclass
class Plan:
    """Evictions that make one reclaimer task fit one node."""

    row: int
    cost: tuple
    surplus: list["TaskInfo"] = field(default_factory=list)
    broken: list["JobInfo"] = field(default_factory=list)

    def evictions(self, victims: "GangVictims") -> list["TaskInfo"]:
        """Every task the plan evicts, surplus pods first, each once, in key order per job."""
        out = list(self.surplus)
        seen = {t.uid for t in out}
        for job in self.broken:
            for t in victims.occupied(job):
                if t.uid not in seen:
                    seen.add(t.uid)
                    out.append(t)
        return out


class GangVictims:
    """Plans for one reclaimer task; caches what does not change while it is planned for."""

    def __init__(self, ssn: "Session", reclaimer: "TaskInfo") -> None:
        self.ssn = ssn
        self.reclaimer = reclaimer
        self._occupied: dict[str, list["TaskInfo"]] = {}
        self._breakable: dict[str, bool] = {}

    # -- facts about victim jobs ---------------------------------------------------------

    def occupied(self, job: "JobInfo") -> list["TaskInfo"]:
        """The job's tasks that hold node resources, in key order."""
        got = self._occupied.get(job.uid)
        if got is None:
            got = sorted((t for t in job.tasks.values() if t.status in ALLOCATED_STATUSES), key=lambda t: t.key)
            self._occupied[job.uid] = got
        return got

    def surplus_count(self, job: "JobInfo") -> int:
        return max(0, len(self.occupied(job)) - max(job.min_available, 1))

    def surplus_of(self, job: "JobInfo", tasks: list["TaskInfo"]) -> list["TaskInfo"]:
        """Of ``tasks`` (the job's victims on a node, in eviction order), those that can go one
        after another without breaking the gang (see the module doc)."""
        n = self.surplus_count(job)
        subs = job.sub_jobs
        if n <= 0 or subs is None or not any(subs.min_groups.values()):
            return tasks[:n]
        broken = {s.uid for s in subs.by_uid.values() if not s.is_ready()}
        spare = {gid: -m for gid, m in subs.min_groups.items()}
        for sub in subs.by_uid.values():
            if sub.is_ready():
                spare[sub.gid] = spare.get(sub.gid, 0) + 1
        out: list["TaskInfo"] = []
        for t in tasks:
            if len(out) >= n:
                break
            sub = subs.of(t)
            if sub is None:
                continue
            if sub.uid not in broken:
                if subs.min_groups.get(sub.gid, 0) and spare.get(sub.gid, 0) <= 0:
                    continue  # it would take its policy below minSubGroups
                broken.add(sub.uid)
                spare[sub.gid] = spare.get(sub.gid, 0) - 1
            out.append(t)
        return out

    def breakable(self, job: "JobInfo") -> bool:
        ok = self._breakable.get(job.uid)
        if ok is None:
            tasks = self.occupied(job)
            ok = bool(tasks) and all(t.status == TaskStatus.RUNNING and t.preemptable for t in tasks)
            if ok:
                accepted = {t.uid for t in self.ssn.reclaimable(self.reclaimer, list(tasks))}
                ok = all(t.uid in accepted for t in tasks)
            self._breakable[job.uid] = ok
        return ok

    def started(self, job: "JobInfo") -> float:
        """When the job started: its earliest running pod (else its PodGroup's creation)."""
        starts = [t.start_time for t in self.occupied(job) if t.start_time]
        return min(starts) if starts else job.creation

    def at_stake(self, victims: list["TaskInfo"]) -> bool:
        """Whether evicting some of ``victims`` (one node's) could leave a job of several
        pods running with fewer than ``max(minAvailable, 1)``. A job of one pod, or pods
        above minAvailable, are not at stake: evicting them breaks no gang."""
        here: dict[str, int] = {}
        for v in victims:
            here[v.job] = here.get(v.job, 0) + 1
        for uid, count in here.items():
            job = self.ssn.jobs[uid]
            occupied = len(self.occupied(job))
            if occupied > 1 and max(occupied - count, 1) < max(job.min_available, 1):
                return True
            if job.sub_jobs is not None and self._sub_groups_at_stake(job, [v for v in victims if v.job == uid]):
                return True
        return False

    @staticmethod
    def _sub_groups_at_stake(job: "JobInfo", victims: list["TaskInfo"]) -> bool:
        """Whether evicting ``victims`` could take a policy that has its minSubGroups ready
        below it."""
        subs = job.sub_jobs
        assert subs is not None
        hit = {s.uid for v in victims if (s := subs.of(v)) is not None}
        for gid, m in subs.min_groups.items():
            if not m:
                continue
            ready = [s.uid for s in subs.by_uid.values() if s.gid == gid and s.is_ready()]
            if len(ready) >= m and len([u for u in ready if u not in hit]) < m:
                return True
        return False

    def covers(self, plan: "Plan", most: int) -> int:
        """How many tasks like the reclaimer (itself included, at most ``most``) the room
        ``plan`` frees holds: on its node and on the nodes of the jobs it breaks."""
        table = self.ssn.table
        freed: dict[int, np.ndarray] = {}
        for t in plan.evictions(self):
            i = table.index.get(t.node_name)
            if i is not None:
                assert t.req_vec is not None
                freed[i] = freed.get(i, 0) + t.req_vec
        task = self.reclaimer
        assert task.req_vec is not None
        count = 0
        for i, room in freed.items():
            avail = table.future_idle[i] + room
            while count < most and table.fits_row(task, avail):
                avail = avail - task.req_vec
                count += 1
        return count

    def freed_on(self, job: "JobInfo", row: int) -> np.ndarray:
        node = self.ssn.table.names[row]
        total = np.zeros(len(self.ssn.table.dims))
        for t in self.occupied(job):
            if t.node_name == node:
                assert t.req_vec is not None
                total += t.req_vec
        return total

    # -- planning ------------------------------------------------------------------------

    def _fits(self, row: int, avail: np.ndarray, released: list["TaskInfo"]) -> bool:
        """The reclaimer fits ``avail`` on ``row`` and, a vGPU pod, the node's devices once
        ``released`` are gone (node room alone can hide devices too full, issue 26)."""
        return self.ssn.table.fits_row(self.reclaimer, avail) and devices_fit(self.ssn, self.reclaimer, row, released)

    def plan(self, row: int, victims: list["TaskInfo"]) -> Plan | None:
        """The cheapest plan on ``row`` using ``victims`` (the node's reclaimable tasks, in
        eviction order), or None when even breaking every breakable job there is not enough."""
        ssn, task = self.ssn, self.reclaimer
        table = ssn.table
        by_job: dict[str, list["TaskInfo"]] = {}
        for v in victims:
            by_job.setdefault(v.job, []).append(v)
        surplus: list["TaskInfo"] = []
        for uid, tasks in by_job.items():
            job = ssn.jobs[uid]
            surplus.extend(self.surplus_of(job, tasks))
        order = {v.uid: i for i, v in enumerate(victims)}
        surplus.sort(key=lambda t: order[t.uid])

        base = table.future_idle[row].copy()
        avail = base.copy()
        used: list["TaskInfo"] = []
        for t in surplus:
            if self._fits(row, avail, used):
                break
            assert t.req_vec is not None
            avail += t.req_vec
            used.append(t)
        if self._fits(row, avail, used):
            return Plan(row, (NO_JOB, 0, len(used), (), table.names[row], (), ()), surplus=used)

        jobs = [ssn.jobs[uid] for uid in by_job if self.breakable(ssn.jobs[uid])]
        if not jobs:
            return None
        # Each job's place in Volcano's victim order here (its first victim's): the tie-break
        # left after DEC-8's priority, jobs, pods and start (the newest of equal jobs first).
        rank: dict[str, int] = {}
        for i, v in enumerate(victims):
            rank.setdefault(v.job, i)
        # What breaking a job frees here beyond its surplus pods, which ``all_surplus``
        # already counts.
        freed = {j.uid: self.freed_on(j, row) for j in jobs}
        for t in surplus:
            if t.job in freed:
                freed[t.job] = freed[t.job] - t.req_vec
        all_surplus = base + sum((t.req_vec for t in surplus), np.zeros_like(base))
        for limit in sorted({j.priority for j in jobs}):
            pool = [j for j in jobs if j.priority <= limit]
            released = surplus + [t for j in pool for t in self.occupied(j)]
            if not self._fits(row, all_surplus + sum((freed[j.uid] for j in pool), np.zeros_like(base)), released):
                continue
            return self._plan_breaking(row, all_surplus, surplus, pool, freed, rank)
        return None

    def _plan_breaking(
        self,
        row: int,
        with_surplus: np.ndarray,
        surplus: list["TaskInfo"],
        pool: list["JobInfo"],
        freed: dict[str, np.ndarray],
        rank: dict[str, int],
    ) -> Plan:
        """Break as few jobs of ``pool`` as greedy choice finds (the pool with all surplus
        pods is known to be enough), then drop the surplus pods that are not needed.
        ``with_surplus`` is the node's FutureIdle plus every surplus pod."""
        task, table = self.reclaimer, self.ssn.table
        need = task.check_cols
        assert need is not None
        chosen: list["JobInfo"] = []
        avail = with_surplus.copy()
        left = list(pool)
        while left and not self._fits(row, avail, surplus + [t for j in chosen for t in self.occupied(j)]):
            deficit = np.maximum(need - avail, 0.0)
            scale = np.where(deficit > 0, deficit, 1.0)

            def value(j: "JobInfo") -> tuple:
                covered = float(np.sum(np.minimum(freed[j.uid], deficit) / scale))
                return (-covered, j.priority, len(self.occupied(j)), -self.started(j), rank[j.uid], j.key)

            best = min(left, key=value)
            left.remove(best)
            chosen.append(best)
            avail = avail + freed[best.uid]
        broken_uids = {j.uid for j in chosen}
        kept = [t for t in surplus if t.job not in broken_uids]
        # Drop surplus pods, the last in eviction order first, while the task still fits.
        broken_pods = [t for j in chosen for t in self.occupied(j)]
        for t in reversed(list(kept)):
            assert t.req_vec is not None
            if self._fits(row, avail - t.req_vec, broken_pods + [k for k in kept if k is not t]):
                avail = avail - t.req_vec
                kept.remove(t)
        chosen.sort(key=lambda j: j.key)
        pods = len(kept) + sum(len(self.occupied(j)) for j in chosen)
        cost = (
            max(j.priority for j in chosen),
            len(chosen),
            pods,
            tuple(sorted(-self.started(j) for j in chosen)),
            table.names[row],  # Volcano's walk: the first node in name order
            tuple(sorted(rank[j.uid] for j in chosen)),  # then its victim order on the node
            tuple(j.key for j in chosen),
        )
        return Plan(row, cost, surplus=kept, broken=chosen)


class PlanCache:
    """Per-node plans of alike reclaimer tasks, kept up to date from the node change log."""

    def __init__(self, ssn: "Session") -> None:
        self.ssn = ssn
        self._entries: dict[Any, _Entry] = {}

    def signature(self, task: "TaskInfo") -> Any:
        """What the plans for a task depend on: its queue (victims come from other queues),
        what the Reclaimable plugins may read (PodGroup and pod annotations and labels,
        owner kind, priority — not the group name, which only says which job), and its
        request."""
        assert task.check_cols is not None
        meta = task.pod.meta
        job = self.ssn.jobs[task.job]
        pg = job.pod_group.meta
        return (
            job.queue,
            tuple(sorted(pg.annotations.items())),
            tuple(sorted(pg.labels.items())),
            pg.owner_kind,
            task.check_cols.tobytes(),
            tuple(sorted((k, v) for k, v in meta.annotations.items() if k != GROUP_NAME_KEY)),
            tuple(sorted(meta.labels.items())),
            meta.owner_kind,
            task.priority,
        )

    def _dirty(self, since: int, queue: str) -> set[int]:
        """Rows changed since ``since``, plus every row where a job with a pod on one of
        them has pods (its surplus or breakability may have changed) — jobs of the
        reclaimer's own ``queue`` aside: they are never its victims."""
        table, jobs = self.ssn.table, self.ssn.jobs
        rows = set(table.change_log[since:])
        touched: set[str] = set()
        for r in rows:
            touched.update(t.job for t in table.tasks[r].values())
        for uid in touched:
            job = jobs.get(uid)
            if job is None or job.queue == queue:
                continue
            for t in job.tasks.values():
                i = table.index.get(t.node_name) if t.node_name else None
                if i is not None:
                    rows.add(i)
        return rows

    def offers(self, task: "TaskInfo", candidates: np.ndarray, compute: RowFn) -> Offers:
        """What the ``candidates`` (a node mask) offer ``task``, cached where still valid."""
        sig = self.signature(task)
        entry = self._entries.get(sig)
        if entry is None:
            entry = self._entries[sig] = _Entry(len(self.ssn.table))
        elif entry.pos < len(self.ssn.table.change_log):
            for r in self._dirty(entry.pos, sig[0]):
                entry.drop(r)
        for r in np.flatnonzero(candidates & ~entry.known).tolist():
            got = compute(r)
            entry.known[r] = True
            entry.stake[r] = got.at_stake
            if got.plan is not None:
                entry.add(r, got.plan)
        entry.pos = len(self.ssn.table.change_log)
        at_stake = bool((entry.stake & candidates).any())
        return Offers(at_stake, entry, candidates.tolist())

    def forget(self, task: "TaskInfo", row: int) -> None:
        entry = self._entries.get(self.signature(task))
        if entry is not None:
            entry.drop(row)


class _Entry:
    """One signature's cache: which rows are known, which put a gang at stake, their plans
    (and a heap of them by cost, whose entries for replaced plans are skipped lazily)."""

    __slots__ = ("pos", "known", "stake", "plans", "heap", "pushed")

    def __init__(self, rows: int) -> None:
        self.pos = 0  # change-log position the entry is valid for
        self.known = np.zeros(rows, dtype=bool)
        self.stake = np.zeros(rows, dtype=bool)
        self.plans: dict[int, Plan] = {}
        # (cost, row, push number, plan): the number keeps equal costs from comparing plans.
        self.heap: list[tuple[tuple, int, int, Plan]] = []
        self.pushed = 0

    def add(self, row: int, plan: Plan) -> None:
        self.plans[row] = plan
        self.pushed += 1
        if len(self.heap) > 4 * len(self.plans) + 64:
            self.heap = [(p.cost, r, i, p) for i, (r, p) in enumerate(self.plans.items(), self.pushed)]
            self.pushed += len(self.heap)
            heapq.heapify(self.heap)
        else:
            heapq.heappush(self.heap, (plan.cost, row, self.pushed, plan))

    def drop(self, row: int) -> None:
        self.known[row] = False
        self.stake[row] = False
        self.plans.pop(row, None)

    def cheapest(self, n: int, allowed: list[bool]) -> list[Plan]:
        heap, plans = self.heap, self.plans
        found: list[Plan] = []
        kept: list[tuple[tuple, int, int, Plan]] = []
        while heap and len(found) < n:
            item = heapq.heappop(heap)
            _cost, row, _n, plan = item
            if plans.get(row) is not plan:
                continue  # replaced or dropped since
            kept.append(item)
            if allowed[row]:
                found.append(plan)
        for item in kept:
            heapq.heappush(heap, item)
        return found
