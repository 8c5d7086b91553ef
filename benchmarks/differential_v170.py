"""Volcano v1.7.0's actions where they differ from Volcano master, run on tidesched's framework
and plugins: what ``benchmarks/differential.py`` uses to explain a mismatch between vc-scheduler
v1.7.0 and tidesched (which follows master).

Written from reading both versions' source (``git show v1.7.0:pkg/scheduler/actions/...`` and
``HEAD:...`` in the Volcano mirror); no code is taken from Volcano. Each difference is listed in
:data:`DIFFERENCES` with the master commit that changed v1.7.0's behaviour. The emulated actions
record in :class:`Fired` every decision where v1.7.0's rule decided otherwise than master's
would have, so an explanation names only the differences that actually acted in a world.

The emulation makes the choices vc-scheduler makes at random (equal node scores, Go map order
of nodes, queues and a node's tasks) deterministically, in name order; where those choices
matter the outcome may equal only one of vc-scheduler's runs, or none. With a seed they are
drawn at random instead, in the emulated parts and in tidesched's own allocate, backfill and
preempt alike (:func:`_random_ties`), so a replay without any v1.7.0 part shows what Volcano's
luck alone can give.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np

from tidesched.actions.reclaim.steps import reclaimees as reclaimees_of
from tidesched.actions.victims import candidate_nodes, validate_victims
from tidesched.framework.decisions import FitErrors
from tidesched.framework.placement import no_node_errors
from tidesched.framework.queues import PriorityQueue
from tidesched.framework.session import Session
from tidesched.framework.statement import Statement
from tidesched.framework.victim_order import order_victims
from tidesched.scheduler import ACTIONS, PLUGINS, load_registries
from tidesched.model.resource import MIN_RESOURCE
from tidesched.model.status import ALLOCATED_STATUSES, PodGroupPhase, TaskStatus

if TYPE_CHECKING:
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo
    from tidesched.model.resource import Resource


@dataclass(frozen=True)
class Difference:
    key: str
    part: str  # allocate, preempt, reclaim, session
    v170: str  # what v1.7.0 does
    master: str  # what master (and tidesched) does
    commit: str  # the master commit that changed it


DIFFERENCES: dict[str, Difference] = {d.key: d for d in (
    Difference(
        "allocate-stops-at-unfit-task", "allocate",
        "a job's turn ends at its first task that fits no node",
        "the job goes on to its next task while it can still reach minMember (NeedContinueAllocating)",
        "f82c6dd4f (refined by 0d511cee7)"),
    Difference(
        "predicate-error-cache-without-role", "allocate/preempt",
        "a node that failed a task (its predicates, and in allocate also the resource check) is "
        "skipped for the same job's later tasks in that job's turn (in preempt: the whole action) "
        "even when the pods name no task role, so tasks of other shapes share the failures",
        "the cache is only used for pods that name a task role (volcano.sh/task-spec)",
        "205eec5aa"),
    Difference(
        "allocate-pipelines-before-idle", "allocate",
        "the best-scored node among those where the task fits now or once releasing resources are "
        "freed is taken, so a task may be pipelined while another node has room now",
        "nodes where the task fits now come first, the others only when none does",
        "5e48157ae"),
    Difference(
        "preempt-skips-best-effort-victims", "preempt",
        "pods without resource requests are never preemption victims",
        "they are victims like any other pod (a best-effort preemptor only evicts best-effort pods)",
        "59b54cc3c"),
    Difference(
        "preempt-fit-ignores-queue-quota", "preempt",
        "a preemptor fits a node once its queue is not overused and the node's future idle holds it",
        "the queue must also allow the task (Allocatable) and the predicates must pass",
        "af5c56308 (Allocatable), 5a15213d8 (predicates)"),
    Difference(
        "preempt-keeps-failed-node-evictions", "preempt",
        "evictions made on a node where the preemptor still does not fit stay in the job's statement",
        "each node's evictions are staged apart and undone when the node does not work out",
        "b529ae51a"),
    Difference(
        "preempt-candidate-nodes", "preempt",
        "only nodes passing every plugin predicate are tried",
        "every node but those whose predicate failure eviction cannot resolve is tried",
        "7bee28e39 (refined by 8a3a6d238, c9a9f6d2c)"),
    Difference(
        "preempt-within-job-commits-failures", "preempt",
        "within a job, victims need not be preemptable, and a failed attempt's evictions are committed",
        "victims must be preemptable and a failed attempt is discarded",
        "a84d8f229, c64b2ec49"),
    Difference(
        "preempt-within-job-all-queues", "preempt",
        "after each queue's turn, every starving job of every queue preempts within itself, "
        "consuming those jobs' preemptor lists before their own queue's turn",
        "each queue's own starving jobs only, with a list of their own",
        "7910fbd6f, 8d4aa2e11"),
    Difference(
        "victims-must-not-be-empty", "preempt/reclaim",
        "a node without victims is passed over even when the task fits its future idle resources",
        "such a node is used without evicting anything",
        "5939cc189"),
    Difference(
        "reclaim-non-starving-jobs", "reclaim",
        "every job with pending tasks reclaims",
        "only starving jobs reclaim",
        "a561215e0"),
    Difference(
        "reclaim-evicts-without-rollback", "reclaim",
        "victims are evicted at once, one task of a job per turn, and stay evicted when the task "
        "is not pipelined in the end; only victims' resources count towards the request",
        "a job's evictions are staged per node and committed only if the job is pipelined; idle "
        "resources count",
        "3e7386508, 98f47f5d3, 305771369"),
    Difference(
        "reclaim-victims-unsorted", "reclaim",
        "victims are evicted in the order the Reclaimable plugins return them (the node's tasks "
        "in Go map order)",
        "in victim order (BuildVictimsPriorityQueue: reverse job order, reverse task order)",
        "836fea251"),
    Difference(
        "reclaim-candidate-nodes", "reclaim",
        "only nodes passing every plugin predicate are tried (a node out of pod slots is not)",
        "every node but those whose predicate failure eviction cannot resolve is tried",
        "7bee28e39 (refined by 8a3a6d238, c9a9f6d2c)"),
    Difference(
        "victims-empty-tier-stops-later-tiers", "victims",
        "once a plugin of some tier has named victims, a tier whose plugins end with none leaves "
        "every later tier's answer empty too (the intersection's start flag spans the tiers)",
        "each tier starts its intersection afresh, so a later tier may still name victims",
        "7976b63e2"),
    Difference(
        "reclaim-checks-allocatable", "reclaim",
        "a reclaiming task must pass Allocatable (its queue's share)",
        "it must pass Preemptive",
        "61f9c9d62"),
    Difference(
        "binpack-overflow-zeroes-term", "binpack",
        "a resource the task would overfill on a node scores 0 for that resource only; the "
        "node keeps the other resources' scores",
        "the node scores 0 altogether",
        "8944bfd7b"),
    Difference(
        "proportion-enqueue-uncapped-scalars", "proportion",
        "a queue's real capability keeps no scalar resource its capability does not name "
        "(helpers.Min), and enqueue compares such resources as unlimited",
        "a dimension the capability does not name keeps the cluster's amount (MinDimensionResource), "
        "and enqueue compares only the dimensions minResources names",
        "b5764b960"),
    Difference(
        "proportion-inqueue-counts-allocated", "proportion",
        "an Inqueue job reserves its whole minResources, also what it already has allocated",
        "it reserves minResources less what it has allocated",
        "6db3122b4"),
    Difference(
        "proportion-reclaimable-less-partly", "proportion",
        "a victim is skipped while its queue's remaining allocation is below the reclaimer's "
        "request in some dimension",
        "no such condition",
        "975277f55"),
    Difference(
        "podgroup-running-when-allocated", "session",
        "a PodGroup is Running once minMember of its tasks are allocated (also Allocated and Binding)",
        "once minMember are scheduled (Bound, Running, Succeeded, Failed)",
        "15a6a5a65"),
)}


@dataclass
class Fired:
    """Which differences decided something in an emulated run, with one example each."""

    seen: dict[str, str] = field(default_factory=dict)

    def __call__(self, key: str, example: str) -> None:
        assert key in DIFFERENCES, key
        self.seen.setdefault(key, example)


_FIRED: list[Fired] = []
# Set within emulating(seed=N): the choices vc-scheduler makes at random (Go map order of
# queues, nodes and a node's tasks; a node among equal best scores) are drawn from it instead
# of taken in name order.
_RNG: list[random.Random] = []


def _shuffled(items: list) -> list:
    items = sorted(items)
    if _RNG:
        _RNG[-1].shuffle(items)
    return items


def _fire(key: str, example: str) -> None:
    if _FIRED:
        _FIRED[-1](key, example)


# ------------------------------------------------------------------------------------------
# Shared helpers


def _rows_by_score(ssn: Session, task: "TaskInfo", mask: np.ndarray) -> list[int]:
    """Candidate rows, best NodeOrder score first, equal scores by node name (vc-scheduler: at
    random)."""
    idx = np.flatnonzero(mask)
    if len(idx) <= 1:
        return [int(i) for i in idx]
    scores = np.asarray(ssn.node_order(task, idx), dtype=float)
    tie = np.array(_shuffled(list(range(len(idx))))) if _RNG else idx
    order = np.lexsort((tie, -scores))
    return [int(idx[i]) for i in order]


def _fits(ssn: Session, task: "TaskInfo", row: int, which: str) -> bool:
    t = ssn.table
    return t.fits_row(task, t.idle[row] if which == "idle" else t.future_idle[row])


def _validate(ssn: Session, task: "TaskInfo", row: int, victims: list["TaskInfo"]) -> bool:
    """v1.7.0's ValidateVictims: some victims, and room for the task once they are gone."""
    if not victims:
        if _fits(ssn, task, row, "future"):
            _fire("victims-must-not-be-empty", f"{ssn.table.names[row]} passed over for {task.key}")
        return False
    return validate_victims(ssn, task, row, victims)


def _covers(ssn: Session, task: "TaskInfo", got: np.ndarray) -> bool:
    """request ≤ ``got`` as Volcano's LessEqual compares them (pod slots are no resource in
    v1.7.0)."""
    assert task.check_cols is not None
    pods = ssn.table.pods_col
    return bool((got[:pods] + MIN_RESOURCE > task.check_cols[:pods]).all())


def _v170_victim_order(ssn: Session, victims: list["TaskInfo"]) -> list["TaskInfo"]:
    """v1.7.0's preempt victim order: tasks of different jobs by reverse JobOrder (with its
    creation-time and UID fallback), of one job by reverse TaskOrder."""
    import functools

    def cmp(l: "TaskInfo", r: "TaskInfo") -> int:
        if l.job != r.job:
            lj, rj = ssn.jobs[l.job], ssn.jobs[r.job]
            return 1 if ssn.job_order_less(lj, rj) else (-1 if ssn.job_order_less(rj, lj) else 0)
        return 1 if ssn.task_order_less(l, r) else (-1 if ssn.task_order_less(r, l) else 0)

    return sorted(sorted(victims, key=lambda t: t.key), key=functools.cmp_to_key(cmp))


# ------------------------------------------------------------------------------------------
# allocate


def allocate(ssn: Session) -> None:
    has_enqueue = "enqueue" in ssn.config.actions
    jobs_of: dict[str, PriorityQueue] = {}
    for job in sorted(ssn.jobs.values(), key=lambda j: j.uid):
        if not has_enqueue:
            job.phase = PodGroupPhase.INQUEUE
        elif job.is_pending():
            continue
        vr = ssn.job_valid(job)
        if vr is not None and not vr.passed:
            continue
        if job.queue not in ssn.queues:
            continue
        jobs_of.setdefault(job.queue, PriorityQueue(ssn.job_order_less)).push(job)
    pending: dict[str, PriorityQueue] = {}
    while True:
        queue = None
        for quid in sorted(jobs_of):
            q = ssn.queues[quid]
            if ssn.overused(q):
                del jobs_of[quid]
                continue
            if jobs_of[quid].empty():
                continue
            if queue is None or ssn.queue_order_less(q, queue):
                queue = q
        if queue is None:
            break
        jobs = jobs_of[queue.uid]
        job = jobs.pop()
        if job.uid not in pending:
            waiting = [t for t in job.tasks_with_status(TaskStatus.PENDING) if not t.best_effort]
            pending[job.uid] = PriorityQueue(ssn.task_order_less, waiting)
        tasks = pending[job.uid]
        stmt = Statement(ssn)
        failed: dict[str, np.ndarray] = {}  # v1.7.0's predicate helper, one per job turn: role -> nodes
        while not tasks.empty():
            task = tasks.pop()
            if not ssn.allocatable(queue, task):
                continue
            err = ssn.pre_predicate(task)
            if err:
                job.fit_errors[task.uid] = FitErrors(total_nodes=len(ssn.table), message=err)
                break
            table = ssn.table
            passed = ssn.predicate_mask(task)
            future = table.fits(task, table.future_idle)
            raw = passed & future
            cached = failed.get(task.role)
            feasible = raw if cached is None else raw & ~cached
            if cached is not None and not task.role and (raw & cached).any():
                _fire("predicate-error-cache-without-role",
                      f"{task.key}: {table.names[int(np.flatnonzero(raw & cached)[0])]} skipped")
            failed[task.role] = ~raw if cached is None else cached | ~raw
            if not feasible.any():
                job.fit_errors[task.uid] = no_node_errors(ssn, task, future)
                if job.need_continue_allocating():
                    _fire("allocate-stops-at-unfit-task", f"{job.uid} stopped at {task.key}")
                break
            rows = _rows_by_score(ssn, task, feasible)
            row = rows[0]
            idle_rows = [r for r in rows if _fits(ssn, task, r, "idle")]
            if _fits(ssn, task, row, "idle"):
                stmt.allocate(task, table.names[row])
            else:
                if idle_rows:
                    _fire("allocate-pipelines-before-idle", f"{task.key} pipelined on {table.names[row]} "
                          f"while {table.names[idle_rows[0]]} had room")
                stmt.pipeline(task, table.names[row])
            if ssn.job_ready(job) and not tasks.empty():
                jobs.push(job)
                break
        if ssn.job_ready(job):
            stmt.commit()
        elif not ssn.job_pipelined(job):
            stmt.discard()


# ------------------------------------------------------------------------------------------
# preempt


def preempt(ssn: Session) -> None:
    preemptors: dict[str, PriorityQueue] = {}
    tasks_of: dict[str, PriorityQueue] = {}
    under_request: list["JobInfo"] = []
    queues: dict[str, "QueueInfo"] = {}
    for job in sorted(ssn.jobs.values(), key=lambda j: j.uid):
        if job.is_pending():
            continue
        vr = ssn.job_valid(job)
        if vr is not None and not vr.passed:
            continue
        if job.queue not in ssn.queues:
            continue
        queues.setdefault(job.queue, ssn.queues[job.queue])
        if ssn.job_starving(job):
            preemptors.setdefault(job.queue, PriorityQueue(ssn.job_order_less)).push(job)
            under_request.append(job)
            tasks_of[job.uid] = PriorityQueue(ssn.task_order_less, job.tasks_with_status(TaskStatus.PENDING))
    # vc-scheduler walks the queues in Go map order.
    names = _shuffled(list(queues))
    for n, quid in enumerate(names):
        jobs = preemptors.get(quid)
        while jobs is not None and not jobs.empty():
            pjob = jobs.pop()
            stmt = Statement(ssn)
            assigned = False
            while ssn.job_starving(pjob) and not tasks_of[pjob.uid].empty():
                preemptor = tasks_of[pjob.uid].pop()

                def between(task: "TaskInfo", preemptor: "TaskInfo" = preemptor,
                            pjob: "JobInfo" = pjob) -> bool:
                    if task.status != TaskStatus.RUNNING or not task.preemptable:
                        return False
                    j = ssn.jobs.get(task.job)
                    if j is None or j.queue != pjob.queue or task.job == preemptor.job:
                        return False
                    if task.best_effort:
                        _fire("preempt-skips-best-effort-victims",
                              f"{task.key} not a victim for {preemptor.key}")
                        return False
                    return True

                if _preempt(ssn, stmt, preemptor, between):
                    assigned = True
            if ssn.job_pipelined(pjob):
                stmt.commit()
            else:
                stmt.discard()
                continue
            if assigned:
                jobs.push(pjob)
        for job in under_request:
            if job.queue != quid and n + 1 < len(names):
                if any(t.status == TaskStatus.PENDING for t in job.tasks.values()):
                    _fire("preempt-within-job-all-queues", f"{job.uid} in {job.queue} during {quid}'s turn")
            tasks_of[job.uid] = PriorityQueue(ssn.task_order_less, job.tasks_with_status(TaskStatus.PENDING))
            while not tasks_of[job.uid].empty():
                preemptor = tasks_of[job.uid].pop()
                stmt = Statement(ssn)

                def within(task: "TaskInfo", preemptor: "TaskInfo" = preemptor) -> bool:
                    if task.status != TaskStatus.RUNNING or task.best_effort or task.job != preemptor.job:
                        return False
                    if not task.preemptable:
                        _fire("preempt-within-job-commits-failures", f"{task.key} (not preemptable) a victim")
                    return True

                done = _preempt(ssn, stmt, preemptor, within)
                if not done and len(stmt):
                    _fire("preempt-within-job-commits-failures", f"evictions for {preemptor.key} committed")
                stmt.commit()
                if not done:
                    break


def _preempt(ssn: Session, stmt: Statement, preemptor: "TaskInfo",
             accept: Callable[["TaskInfo"], bool]) -> bool:
    if ssn.pre_predicate(preemptor):
        return False
    job = ssn.jobs[preemptor.job]
    queue = ssn.queues[job.queue]
    table = ssn.table
    pred = ssn.predicate(preemptor)
    passed = pred.passed
    resolvable = ~np.zeros(len(table), dtype=bool)
    for f in pred.failures:
        if f.unresolvable:
            resolvable &= ~f.nodes
    if (resolvable & ~passed).any():
        _fire("preempt-candidate-nodes",
              f"{preemptor.key}: {table.names[int(np.flatnonzero(resolvable & ~passed)[0])]} not tried")
    for row in _rows_by_score(ssn, preemptor, passed):
        preemptees = sorted((t for t in table.tasks[row].values() if accept(t)), key=lambda t: t.key)
        victims = ssn.preemptable(preemptor, preemptees) if preemptees else []
        if not _validate(ssn, preemptor, row, victims):
            continue
        node = table.names[row]
        evicted = 0

        def fits() -> bool:
            ok = not ssn.overused(queue) and _fits(ssn, preemptor, row, "future")
            if ok and not ssn.allocatable(queue, preemptor):
                _fire("preempt-fit-ignores-queue-quota",
                      f"{preemptor.key} fits {node} beyond its queue's share")
            return ok

        for victim in _v170_victim_order(ssn, victims):
            if fits():
                break
            stmt.evict(victim, f"preempt: evicted to make room for {preemptor.key} on node {node}")
            evicted += 1
        if fits():
            stmt.pipeline(preemptor, node)
            return True
        if evicted:
            _fire("preempt-keeps-failed-node-evictions",
                  f"{evicted} evicted on {node} for {preemptor.key} in vain")
    return False


# ------------------------------------------------------------------------------------------
# reclaim


def reclaim(ssn: Session) -> None:
    queues = PriorityQueue(ssn.queue_order_less)
    seen: set[str] = set()
    reclaimers: dict[str, PriorityQueue] = {}
    tasks_of: dict[str, PriorityQueue] = {}
    for job in sorted(ssn.jobs.values(), key=lambda j: j.uid):
        if job.is_pending():
            continue
        vr = ssn.job_valid(job)
        if vr is not None and not vr.passed:
            continue
        if job.queue not in ssn.queues:
            continue
        if job.queue not in seen:
            seen.add(job.queue)
            queues.push(ssn.queues[job.queue])
        pending = job.tasks_with_status(TaskStatus.PENDING)
        if pending:
            reclaimers.setdefault(job.queue, PriorityQueue(ssn.job_order_less)).push(job)
            tasks_of[job.uid] = PriorityQueue(ssn.task_order_less, pending)
    table = ssn.table
    while not queues.empty():
        queue = queues.pop()
        if ssn.overused(queue):
            continue
        jobs = reclaimers.get(queue.uid)
        if jobs is None or jobs.empty():
            continue
        job = jobs.pop()
        tasks = tasks_of[job.uid]
        if tasks.empty():
            continue
        task = tasks.pop()
        if not ssn.allocatable(queue, task):
            if ssn.preemptive(queue, task):
                _fire("reclaim-checks-allocatable", f"{task.key} not Allocatable but Preemptive")
            continue
        if ssn.pre_predicate(task):
            continue
        starving = ssn.job_starving(job)
        assigned = False
        pred = ssn.predicate(task)
        passed = pred.passed
        for row in np.flatnonzero(candidate_nodes(ssn, task, pred) & ~passed).tolist():
            if reclaimees_of(ssn, job, int(row)):
                _fire("reclaim-candidate-nodes", f"{task.key}: {table.names[int(row)]} not tried")
                break
        # vc-scheduler walks the nodes, and a node's tasks, in Go map order.
        for row in _shuffled([int(r) for r in np.flatnonzero(passed)]):
            reclaimees = []
            on_node = {t.key: t for t in table.tasks[row].values()}
            for t in (on_node[k] for k in _shuffled(list(on_node))):
                if t.status != TaskStatus.RUNNING or not t.preemptable:
                    continue
                j = ssn.jobs.get(t.job)
                if j is None or j.queue == job.queue:
                    continue
                if not ssn.queues[j.queue].reclaimable:
                    continue
                reclaimees.append(t)
            victims = ssn.reclaimable(task, reclaimees) if reclaimees else []
            if not _validate(ssn, task, row, victims):
                continue
            node = table.names[row]
            got = np.zeros(len(table.dims))
            master_order = order_victims(ssn, victims, task)
            for k, v in enumerate(victims):
                if master_order[k] is not v:
                    _fire("reclaim-victims-unsorted",
                          f"{v.key} evicted for {task.key} before {master_order[k].key}")
                stmt = Statement(ssn)
                stmt.evict(v, f"reclaim: evicted to make room for {task.key} on node {node}")
                stmt.commit()
                if not starving:
                    _fire("reclaim-non-starving-jobs", f"{job.uid} (not starving) evicted {v.key}")
                got = got + v.req_vec
                if _covers(ssn, task, got):
                    break
            if _covers(ssn, task, got):
                Statement(ssn).pipeline(task, node)
                assigned = True
                break
            _fire("reclaim-evicts-without-rollback",
                  f"evictions on {node} for {task.key} kept, task not pipelined")
        if assigned:
            jobs.push(job)
        queues.push(queue)


# ------------------------------------------------------------------------------------------
# session close


def pod_group_phase(self: Session, job: "JobInfo", unschedulable: bool) -> str:
    c = job.status_count
    if c[TaskStatus.RUNNING] and unschedulable:
        return PodGroupPhase.UNKNOWN
    allocated = sum(c[s] for s in ALLOCATED_STATUSES) + c[TaskStatus.SUCCEEDED]
    if allocated >= job.min_available:
        scheduled = (c[TaskStatus.RUNNING] + c[TaskStatus.BOUND] + c[TaskStatus.SUCCEEDED]
                     + c[TaskStatus.FAILED])
        if scheduled < job.min_available:
            _fire("podgroup-running-when-allocated", f"{job.uid} Running with {allocated} allocated")
        return PodGroupPhase.RUNNING
    if job.phase != PodGroupPhase.INQUEUE:
        return PodGroupPhase.PENDING
    return job.phase


# ------------------------------------------------------------------------------------------
# Preemptable / Reclaimable across tiers


def _victims_v170(self: Session, hook: str, actor: "TaskInfo", candidates: list["TaskInfo"]) -> list["TaskInfo"]:
    """v1.7.0's Preemptable and Reclaimable: per tier the intersection of the plugins' answers,
    an empty answer ending the tier, the first tier with victims deciding; but the flag that
    says "the intersection has started" is set once for all tiers, so after a tier that ended
    empty, a later tier's answers intersect with nothing."""
    from tidesched.framework.plugin import ABSTAIN

    victims: list["TaskInfo"] | None = None
    started = False
    for tier in self._chain(hook):
        for _name, fn in tier:
            chosen, vote = fn(actor, candidates)
            if vote == ABSTAIN:
                continue
            if not chosen:
                victims = None
                break
            if not started:
                victims, started = list(chosen), True
            else:
                keep = {t.uid for t in chosen}
                victims = [v for v in victims or () if v.uid in keep] or None
        if victims:
            break
    got = victims or []
    master = _SAVED_VICTIMS[0](self, hook, actor, candidates)
    if [t.uid for t in got] != [t.uid for t in master]:
        _fire("victims-empty-tier-stops-later-tiers",
              f"{hook} for {actor.key}: {len(got)} victims, not {len(master)}")
    return got


_SAVED_VICTIMS: list[Callable[..., list["TaskInfo"]]] = []


# ------------------------------------------------------------------------------------------
# binpack


def _binpack_v170() -> type:
    from tidesched.plugins.binpack import MAX_NODE_SCORE, BinpackPlugin

    class BinpackV170(BinpackPlugin):
        def on_session_open(self, ssn: Session) -> None:
            if self.weight == 0:
                return
            table = ssn.table
            scale = float(MAX_NODE_SCORE * self.weight)

            def score(task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
                assert task.req_vec is not None
                names = [n for n in task.resreq.resource_names() if n in self.resource_weights]
                out = np.zeros(len(idx))
                for k, i in enumerate(idx.tolist()):
                    total, wsum, over, rest = 0.0, 0, False, 0.0
                    for n in names:
                        w = self.resource_weights[n]
                        wsum += w
                        c = table.dim_index.get(n, -1)
                        cap = float(table.allocatable[i][c]) if c >= 0 else 0.0
                        if cap == 0 or w == 0:
                            continue
                        final = float(table.used[i][c]) + float(task.req_vec[c])
                        if final > cap:
                            over = True
                            continue
                        term = final * w / cap
                        total += term
                        rest += term
                    if wsum > 0:
                        total /= wsum
                    out[k] = total * scale
                    if over and rest > 0:
                        _fire("binpack-overflow-zeroes-term",
                              f"{task.key} on {table.names[i]}: {out[k]:.2f}, not 0")
                return out

            ssn.add_fn("node_order", self.name, score)

    return BinpackV170


VARIANTS: dict[str, Callable[..., object]] = {
    "allocate": allocate, "preempt": preempt, "reclaim": reclaim, "session": pod_group_phase,
}


# ------------------------------------------------------------------------------------------
# proportion


_TOL = 0.1  # Volcano's minResource


def _le_v170(l: "Resource", r: "Resource", infinity: bool) -> bool:
    """v1.7.0's Resource.LessEqual: cpu, memory, and the left side's scalars (one missing on
    the right is unlimited with ``infinity``, else 0)."""
    def le(a: float, b: float) -> bool:
        return a < b or abs(a - b) < _TOL

    if not le(l.milli_cpu, r.milli_cpu) or not le(l.memory, r.memory):
        return False
    for name, v in l.scalars.items():
        if name not in r.scalars:
            if infinity:
                continue
            if not le(v, 0.0):
                return False
        elif not le(v, r.scalars[name]):
            return False
    return True


def _less_partly_v170(l: "Resource", r: "Resource") -> bool:
    """v1.7.0's Resource.LessPartly with Zero: some dimension of ``l`` below ``r``'s (the left
    side's scalars only)."""
    if l.milli_cpu < r.milli_cpu or l.memory < r.memory:
        return True
    return any(v < r.scalars.get(name, 0.0) for name, v in l.scalars.items())


def _proportion_v170() -> type:
    from tidesched.framework.plugin import PERMIT, REJECT
    from tidesched.model.resource import Dimension, Resource, min_resource
    from tidesched.plugins.proportion import ProportionPlugin, reserved_for

    class ProportionV170(ProportionPlugin):
        def on_session_open(self, ssn: Session) -> None:
            super().on_session_open(ssn)
            attrs = self.attrs
            total_guarantee = Resource()
            for q in ssn.queues.values():
                total_guarantee.add(q.queue.guarantee)
            real: dict[str, Resource] = {}
            for name, a in attrs.items():
                r = ssn.total_resource.clone().sub(total_guarantee).add(a.guarantee)
                real[name] = r if a.capability is None else min_resource(r, a.capability)
            for job in ssn.jobs.values():
                a = attrs.get(job.queue)
                if a is not None and job.phase == PodGroupPhase.INQUEUE and job.min_resources is not None:
                    extra = job.min_resources.clone().sub(reserved_for(job))
                    if not extra.is_empty():
                        _fire("proportion-inqueue-counts-allocated",
                              f"{job.uid} reserves its allocated part again")
                        a.inqueue.add(extra)

            def job_enqueueable(job: "JobInfo") -> int:
                if job.min_resources is None:
                    return PERMIT
                a = attrs[job.queue]
                need = job.min_resources.clone().add(a.allocated).add(a.inqueue).sub(a.elastic)
                ok = _le_v170(need, real[job.queue], infinity=True)
                if ok != need.less_equal_with_dimension_names(a.real_capability, job.min_resources)[0]:
                    _fire("proportion-enqueue-uncapped-scalars",
                          f"{job.uid} {'admitted' if ok else 'refused'}")
                if ok:
                    a.inqueue.add(job.min_resources)
                    return PERMIT
                return REJECT

            def reclaimable(reclaimer: "TaskInfo",
                            reclaimees: list["TaskInfo"]) -> tuple[list["TaskInfo"], int]:
                left: dict[str, Resource] = {}
                victims = []
                for t in reclaimees:
                    job = ssn.jobs.get(t.job)
                    if job is None or job.queue not in attrs:
                        continue
                    a = attrs[job.queue]
                    alloc = left.setdefault(job.queue, a.allocated.clone())
                    if _less_partly_v170(alloc, reclaimer.resreq):
                        if not alloc.less_equal(a.deserved, Dimension.ZERO):
                            _fire("proportion-reclaimable-less-partly", f"{t.key} spared for {reclaimer.key}")
                        continue
                    if not alloc.less_equal(a.deserved, Dimension.ZERO):
                        alloc.sub(t.resreq)
                        victims.append(t)
                return victims, PERMIT

            ssn.add_fn("job_enqueueable", self.name, job_enqueueable)
            ssn.add_fn("job_enqueued", self.name, lambda job: None)
            ssn.add_fn("reclaimable", self.name, reclaimable)

    return ProportionV170


PLUGIN_VARIANTS: dict[str, Callable[[], type]] = {"binpack": _binpack_v170, "proportion": _proportion_v170}
PARTS = ("allocate", "preempt", "reclaim", "session", "victims", *PLUGIN_VARIANTS)


# ------------------------------------------------------------------------------------------
# vc-scheduler's random choices in tidesched's own actions
#
# tidesched takes the first node by name among equal scores where Volcano (v1.7.0 and master
# alike) takes one at random (SelectBestNode) or in the order its parallel predicate pass
# happened to find them (preempt). With a seed, the replay of tidesched's own rules draws those
# ties as the emulated v1.7.0 parts do: a world whose vc-scheduler outcome master's rules give
# under some draw is Volcano's luck, not a difference.


def _top_rows(scores: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    if not len(scores):
        return np.zeros(0, dtype=np.int64)
    masked = np.where(candidates, scores, -np.inf)
    top = masked.max()
    return np.zeros(0, dtype=np.int64) if top == -np.inf else np.flatnonzero(masked == top)


def _draw(rows: np.ndarray) -> int | None:
    if not len(rows):
        return None
    return int(rows[_RNG[-1].randrange(len(rows))]) if _RNG and len(rows) > 1 else int(rows[0])


def _random_best_row(scores: np.ndarray, candidates: np.ndarray) -> int | None:
    return _draw(_top_rows(scores, candidates))


def _random_best_node(ssn: Session, task: "TaskInfo", candidates: np.ndarray) -> int | None:
    scores = ssn.node_order_all(task)
    if scores is None:
        idx = np.flatnonzero(candidates)
        if len(idx) <= 1:
            return int(idx[0]) if len(idx) else None
        scores = np.full(len(candidates), -np.inf)
        scores[idx] = np.asarray(ssn.node_order(task, idx), dtype=float)
    return _draw(_top_rows(scores, candidates))


@contextlib.contextmanager
def _random_ties() -> Iterator[None]:
    import tidesched.actions.backfill as backfill
    import tidesched.actions.preempt as master_preempt
    import tidesched.actions.reclaim.gang as gang
    import tidesched.framework.placement as placement

    patches = [(placement, "_best_row", _random_best_row), (placement, "best_node", _random_best_node),
               (backfill, "best_node", _random_best_node), (gang, "best_node", _random_best_node),
               (master_preempt, "_rows_by_score", _rows_by_score)]
    saved = [(m, name, getattr(m, name)) for m, name, _ in patches]
    try:
        for m, name, fn in patches:
            setattr(m, name, fn)
        yield
    finally:
        for m, name, fn in saved:
            setattr(m, name, fn)


@contextlib.contextmanager
def emulating(parts: set[str] | frozenset[str], fired: Fired | None = None,
              seed: int | None = None) -> Iterator[Fired]:
    """Within the block, tidesched's sessions run v1.7.0's variant of each part named
    (:data:`PARTS`) and report what fired; with ``seed``, vc-scheduler's random choices are
    drawn from ``random.Random(seed)`` (else name order), in the emulated parts and in
    tidesched's own actions alike (equal node scores)."""
    from tidesched.framework.hooks import SessionHooks

    load_registries()
    fired = fired if fired is not None else Fired()
    saved_actions = {name: ACTIONS[name] for name in ("allocate", "preempt", "reclaim")}
    saved_phase = Session.pod_group_phase
    saved_victims = SessionHooks._victims
    saved_plugins = dict(PLUGINS)
    ties = _random_ties() if seed is not None else contextlib.nullcontext()
    try:
        for part in parts:
            if part == "session":
                Session.pod_group_phase = pod_group_phase  # type: ignore[method-assign]
            elif part == "victims":
                _SAVED_VICTIMS.append(saved_victims)
                SessionHooks._victims = _victims_v170  # type: ignore[method-assign,assignment]
            elif part in PLUGIN_VARIANTS:
                PLUGINS[part] = PLUGIN_VARIANTS[part]()
            else:
                ACTIONS[part] = VARIANTS[part]  # type: ignore[assignment]
        _FIRED.append(fired)
        if seed is not None:
            _RNG.append(random.Random(seed))
        with ties:
            yield fired
    finally:
        if seed is not None:
            _RNG.pop()
        _FIRED.pop()
        ACTIONS.update(saved_actions)
        PLUGINS.clear()
        PLUGINS.update(saved_plugins)
        Session.pod_group_phase = saved_phase  # type: ignore[method-assign]
        SessionHooks._victims = saved_victims  # type: ignore[method-assign]
        if "victims" in parts:
            _SAVED_VICTIMS.pop()
