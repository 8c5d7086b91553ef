"""preempt (ACT-4, ACT-6): within a queue, starving jobs evict lower-priority tasks.

Rules (Volcano actions/preempt, restated):

* **Preemptor jobs**: not Pending, JobValid, their queue exists, and JobStarving. Their
  pending tasks, in TaskOrder, are the preemptors.
* **Phase 1, between jobs** — queues in QueueOrder; per queue, starving jobs in JobOrder;
  each job gets one Statement and its preemptors are tried while the job is still starving.
  Victims are Bound/Running tasks of *other jobs of the same queue* whose ``preemptable``
  flag is set. The job's Statement is committed if JobPipelined holds afterwards, else
  discarded (evictions and pipelines of that job are all undone).
* **Phase 2, within a job** — then, for each starving job of the queue, its pending tasks
  (TaskOrder) may evict Bound/Running preemptable tasks of the *same job*; every success
  commits on its own; the first failure stops the job.
* A best-effort preemptor may only evict best-effort tasks; a preemptor with
  ``preemptionPolicy: Never`` never preempts; a failing PrePredicate skips the task.
* **Candidate nodes**: every node whose predicate failure (now, or recorded by allocate) is
  not unresolvable (see ``victims``).
* **Normal preemption**: nodes in NodeOrder score order (ties: node name). On a node:
  Preemptable plugin filter → ValidateVictims → evict in victim order, checking before
  each eviction whether Allocatable(queue) ∧ request ≤ FutureIdle ∧ predicates hold; when
  they do, pipeline the preemptor there. A node's evictions are staged in their own
  Statement, merged into the job's on success and discarded otherwise.
* **Topology-aware preemption** (``enableTopologyAwarePreemption: true``): a dry run over
  the candidate nodes in name order (Volcano starts at a random offset; we start at 0 so
  runs are reproducible), stopping once max(minCandidateNodesPercentage% of them,
  minCandidateNodesAbsolute), capped by maxCandidateNodesAbsolute, nodes yielded a plan.
  On a node (kube-scheduler SelectVictimsOnNode): the potential victims are split into
  PodDisruptionBudget-violating and non-violating ones (``actions.pdb``: most important
  first, each guarding budget counting down). Remove victims until the preemptor fits —
  non-violating ones first, violating ones only when those do not suffice, each group in
  victim order — then reprieve (put back) the removed victims that are not needed:
  violating ones first, then the others, the most important first in each group. The
  plan's PDB violations are the violating victims left in it. The plan chosen (ACT-6):
  fewest PDB violations, lowest highest-victim priority, lowest sum of victim priorities,
  fewest victims, latest start time of the highest-priority victims, then node name. Its
  victims are evicted and the preemptor pipelined. (kube-scheduler removes every potential
  victim before reprieving; we keep removing only as many as the preemptor needs, so a
  victim never removed is never reconsidered. Without budgets the order is as before.)
* Normal preemption does not look at PodDisruptionBudgets (neither does Volcano's); the
  Eviction API still refuses an eviction a budget does not allow (K8S-2).
* **Gangs with a network topology** (``enableNetworkTopologyPreemption``, tidesched's own,
  default true): a gang held to a HyperNode preempts inside one (above, ``actions/evict_domain.py``).
  ``false`` gives Volcano v1.15.1's rule: a job whose PodGroup or any of its sub-groups states a
  ``networkTopology`` (hard or soft) does not preempt at all, in either phase (its preempt.go,
  volcano-sh/volcano#4374).
* Arguments (``configurations: - name: preempt``): ``predicateErrorCacheEnable`` is
  accepted and ignored (our predicate results are exact per call, nothing is cached
  across tasks); ``topologyAwarePreemptWorkerNum`` is accepted and ignored (the dry run is
  sequential).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from tidesched.actions.evict_domain import constrained, held_domain, states_network_topology, within_best_domain
from tidesched.actions.pdb import BudgetView, budget_view
from tidesched.actions.starving import starving_turns
from tidesched.actions.victims import (
    TentativeEvictions,
    candidate_nodes,
    fits_now,
    node_tasks_sorted,
    validate_victims,
)
from tidesched.framework.gates import ungated_pending
from tidesched.framework.reasons import PREEMPT, eviction_reason
from tidesched.framework.victim_order import order_victims
from tidesched.framework.queues import PriorityQueue
from tidesched.framework.statement import Statement
from tidesched.model.status import PREEMPTABLE_STATUSES

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo

ACTION = PREEMPT
# Volcano adds MaxInt32+1 per victim to the priority sum so that more victims always cost
# more, even with negative priorities.
_PRIORITY_OFFSET = 2**31

TaskFilter = Callable[["TaskInfo"], bool]


@dataclass(frozen=True, slots=True)
class PreemptOptions:
    topology_aware: bool = False
    min_candidate_percentage: int = 10
    min_candidate_absolute: int = 1
    max_candidate_absolute: int = 100
    network_topology: bool = True  # enableNetworkTopologyPreemption (false: Volcano v1.15.1's skip)

    @classmethod
    def from_session(cls, ssn: "Session") -> "PreemptOptions":
        return cls.from_arguments(ssn.config.action_arguments(ACTION))

    @classmethod
    def from_arguments(cls, args: "Arguments") -> "PreemptOptions":
        args.get_bool("predicateErrorCacheEnable", True)  # validated, not needed (see docstring)
        args.get_int("topologyAwarePreemptWorkerNum", 16)  # validated, the dry run is sequential
        return cls(
            topology_aware=args.get_bool("enableTopologyAwarePreemption", False),
            min_candidate_percentage=args.get_int("minCandidateNodesPercentage", 10),
            min_candidate_absolute=args.get_int("minCandidateNodesAbsolute", 1),
            max_candidate_absolute=args.get_int("maxCandidateNodesAbsolute", 100),
            network_topology=args.get_bool("enableNetworkTopologyPreemption", True),
        )

    def num_candidates(self, nodes: int) -> int:
        """How many dry-run plans to collect among ``nodes`` candidate nodes."""
        n = nodes * self.min_candidate_percentage // 100
        n = max(n, self.min_candidate_absolute)
        n = min(n, self.max_candidate_absolute)
        return max(0, min(n, nodes))




def execute(ssn: "Session") -> None:
    opts = PreemptOptions.from_session(ssn)
    turns = starving_turns(ssn, skip=None if opts.network_topology else states_network_topology)
    preemptor_jobs = turns.starving  # by queue (a queue's uid is its name)
    preemptor_tasks: dict[str, PriorityQueue] = {}
    under_request: dict[str, list["JobInfo"]] = {}
    for job in turns.jobs:
        under_request.setdefault(job.queue, []).append(job)
        preemptor_tasks[job.uid] = PriorityQueue(ssn.task_order_less, ungated_pending(job))

    queues = PriorityQueue(ssn.queue_order_less, (ssn.queues[q] for q in sorted(preemptor_jobs)))
    while not queues.empty():
        queue = queues.pop()
        jobs = preemptor_jobs[queue.uid]
        # Phase 1: between jobs of the queue.
        while not jobs.empty():
            job = jobs.pop()
            stmt = Statement(ssn)
            tasks = preemptor_tasks[job.uid]
            if constrained(ssn, job):
                # A gang held to one HyperNode takes its room inside one (actions/evict_domain.py).
                pending = [tasks.pop() for _ in range(len(tasks))]

                def turn(s: Statement, job: "JobInfo" = job, pending: list["TaskInfo"] = pending) -> None:
                    for preemptor in pending:
                        if not ssn.job_starving(job):
                            break
                        preempt_task(ssn, s, preemptor, _between_jobs_filter(ssn, preemptor, job), opts)

                within_best_domain(ssn, stmt, job, turn)
            while ssn.job_starving(job) and not tasks.empty():
                preemptor = tasks.pop()
                preempt_task(ssn, stmt, preemptor, _between_jobs_filter(ssn, preemptor, job), opts)
            if ssn.job_pipelined(job):
                stmt.commit()
            else:
                stmt.discard()
        # Phase 2: between tasks of one job.
        for job in under_request[queue.uid]:
            domain = ""
            if constrained(ssn, job):
                # A gang held to a HyperNode evicts its own pods only inside the one it may use;
                # where it runs nowhere it has no pods to evict (its room is allocate's business).
                domain = held_domain(ssn, job)
                if not domain:
                    continue
            ssn.topology.evict_within = ssn.topology.mask(domain) if domain else None
            try:
                tasks = PriorityQueue(ssn.task_order_less, ungated_pending(job))
                while not tasks.empty():
                    preemptor = tasks.pop()
                    stmt = Statement(ssn)
                    if not preempt_task(ssn, stmt, preemptor, _within_job_filter(preemptor), opts):
                        stmt.discard()
                        break
                    stmt.commit()
            finally:
                ssn.topology.evict_within = None


def _may_be_victim(preemptor: "TaskInfo", task: "TaskInfo") -> bool:
    """What both phases ask of a victim: placed, preemptable, and no resource-less
    preemptor evicting a pod that holds resources."""
    if task.status not in PREEMPTABLE_STATUSES:
        return False
    if preemptor.best_effort and not task.best_effort:
        return False
    return task.preemptable


def _between_jobs_filter(ssn: "Session", preemptor: "TaskInfo", pjob: "JobInfo") -> TaskFilter:
    def accept(task: "TaskInfo") -> bool:
        if not _may_be_victim(preemptor, task):
            return False
        job = ssn.jobs.get(task.job)
        if job is None:
            return False
        return job.queue == pjob.queue and task.job != preemptor.job

    return accept


def _within_job_filter(preemptor: "TaskInfo") -> TaskFilter:
    def accept(task: "TaskInfo") -> bool:
        return _may_be_victim(preemptor, task) and task.job == preemptor.job

    return accept


def preempt_task(
    ssn: "Session", stmt: Statement, preemptor: "TaskInfo", accept: TaskFilter, opts: PreemptOptions
) -> bool:
    """Try to make room for ``preemptor``; on success its evictions and its pipeline are in
    ``stmt`` and True is returned."""
    if preemptor.pod.preemption_policy == "Never" or not _nomination_allows(ssn, preemptor):
        return False
    job = ssn.jobs.get(preemptor.job)
    if job is None or job.queue not in ssn.queues:
        return False
    if ssn.pre_predicate(preemptor):
        return False
    pred = ssn.predicate(preemptor)
    candidates = candidate_nodes(ssn, preemptor, pred)
    if not candidates.any():
        return False
    queue = ssn.queues[job.queue]
    if opts.topology_aware:
        return _topology_aware(ssn, stmt, preemptor, queue, accept, candidates, opts)
    return _normal(ssn, stmt, preemptor, queue, accept, candidates, pred.passed)


def _nomination_allows(ssn: "Session", preemptor: "TaskInfo") -> bool:
    """Volcano taskEligibleToPreempt for a pod with a nominatedNodeName (an earlier preemption
    chose that node): it preempts again only when the node is in the session, fails the
    predicates there (else allocate could place it: "should not happen"; without this
    session's PrePredicate state they fail, see SessionHooks.predicate_state_missing), and
    either fails them for good (UnschedulableAndUnresolvable) or no lower-priority pod there
    is still terminating by a scheduler's preemption (the room it waits for is on its way)."""
    name = preemptor.pod.nominated_node
    if not name:
        return True
    row = ssn.table.index.get(name)
    if row is None:
        return False
    pred = ssn.predicate(preemptor)
    if any(f.unresolvable and f.nodes[row] for f in pred.failures):
        return True
    # Before this session's PrePredicate of the task (allocate did not try it, e.g. its queue
    # was overused) Volcano's predicates answer an Error for want of PreFilter state: the
    # node counts as failing, and the task preempts again unless room is on its way.
    if pred.passed[row] and not ssn.predicate_state_missing(preemptor):
        return False
    return not any(t.priority < preemptor.priority and t.pod.meta.deletion > 0 and t.pod.preempted
                   for t in ssn.table.tasks[row].values())


# -- normal preemption ------------------------------------------------------------------------


def _rows_by_score(ssn: "Session", task: "TaskInfo", candidates: np.ndarray) -> list[int]:
    """Candidate rows, best NodeOrder score first; equal scores in node-name order."""
    idx = np.flatnonzero(candidates)
    if len(idx) <= 1:
        return [int(i) for i in idx]
    scores = ssn.node_order(task, idx)
    order = np.lexsort((idx, -np.asarray(scores, dtype=float)))
    return [int(idx[i]) for i in order]


def _normal(
    ssn: "Session",
    stmt: Statement,
    preemptor: "TaskInfo",
    queue: "QueueInfo",
    accept: TaskFilter,
    candidates: np.ndarray,
    passed_before: np.ndarray,
) -> bool:
    table = ssn.table
    for row in _rows_by_score(ssn, preemptor, candidates):
        preemptees = node_tasks_sorted(ssn, row, accept)
        # No candidates, no plugin call: every Preemptable fn answers [] to [].
        victims = ssn.preemptable(preemptor, preemptees) if preemptees else []
        if not validate_victims(ssn, preemptor, row, victims):
            continue
        node = table.names[row]
        node_stmt = Statement(ssn)
        # Before any eviction on this node the predicate result computed for the task is
        # still current (other nodes' attempts were undone); afterwards recompute.
        fits = fits_now(ssn, queue, preemptor, row, bool(passed_before[row]))
        for victim in order_victims(ssn, victims, preemptor):
            if fits:
                break
            node_stmt.evict(victim, eviction_reason(ACTION, preemptor.key, node))
            fits = fits_now(ssn, queue, preemptor, row)
        if fits:
            node_stmt.pipeline(preemptor, node, eviction_occurred=len(node_stmt) > 0)
            stmt.merge(node_stmt)
            return True
        node_stmt.discard()
    return False


# -- topology-aware preemption (dry run) ------------------------------------------------------


@dataclass(slots=True)
class _Plan:
    row: int
    name: str
    victims: list["TaskInfo"]
    violations: int = 0  # victims whose eviction violates a PodDisruptionBudget


class _DryRun:
    """Fit checks for the dry run on one node.

    When plugins registered Simulate* hooks, the queue check is SimulateAllocatable and the
    predicate check SimulatePredicate on a cloned cycle state, as in Volcano. When the
    session has no simulate hook of a kind, the plain check runs instead: the dry run
    applies its removals to the session itself (``TentativeEvictions``), so Allocatable and
    the predicates see the node and the queues as they would be after the evictions.
    """

    def __init__(self, ssn: "Session", preemptor: "TaskInfo", queue: "QueueInfo", row: int) -> None:
        self.ssn = ssn
        self.preemptor = preemptor
        self.queue = queue
        self.row = row
        self.sim_alloc = ssn.has_hook("simulate_allocatable")
        self.sim_pred = ssn.has_hook("simulate_predicate")
        self.state = ssn.simulate_state(preemptor)
        self.moves = TentativeEvictions(ssn)

    def remove(self, task: "TaskInfo") -> None:
        self.ssn.simulate_remove_task(self.state, self.preemptor, task, self.row)
        self.moves.remove(task)

    def add(self, task: "TaskInfo") -> None:
        self.ssn.simulate_add_task(self.state, self.preemptor, task, self.row)
        self.moves.restore(task)

    def fits(self) -> bool:
        ssn, task = self.ssn, self.preemptor
        if self.sim_alloc:
            if not ssn.simulate_allocatable(self.state, self.queue, task):
                return False
        elif not ssn.allocatable(self.queue, task):
            return False
        if not ssn.table.fits_row(task, ssn.table.future_idle[self.row]):
            return False
        if self.sim_pred:
            return ssn.simulate_predicate(self.state, task, self.row)
        return bool(ssn.predicate(task).passed[self.row])

    def close(self) -> None:
        self.moves.restore_all()


def select_victims_on_node(
    ssn: "Session",
    preemptor: "TaskInfo",
    queue: "QueueInfo",
    row: int,
    accept: TaskFilter,
    budgets: BudgetView | None = None,
) -> tuple[list["TaskInfo"], int] | None:
    """The smallest victim set (after reprieves) that lets ``preemptor`` fit on the node,
    most important first, and how many of them violate a PodDisruptionBudget; None when the
    node cannot serve the preemptor. The session is left unchanged. ``budgets``: the view
    shared by the nodes of one attempt (a fresh one when omitted)."""
    preemptees = node_tasks_sorted(ssn, row, accept)
    victims = ssn.preemptable(preemptor, preemptees) if preemptees else []
    if not validate_victims(ssn, preemptor, row, victims):
        return None
    ordered = order_victims(ssn, victims, preemptor)  # the least important first
    rank = {v.uid: i for i, v in enumerate(ordered)}
    violating = (budgets or budget_view(ssn)).violating(reversed(ordered))
    run = _DryRun(ssn, preemptor, queue, row)
    try:
        removed: list[TaskInfo] = []
        fits = run.fits()
        for victim in sorted(ordered, key=lambda v: (v.uid in violating, rank[v.uid])):
            if fits:
                break
            run.remove(victim)
            removed.append(victim)
            fits = run.fits()
        if not fits:
            # Unlike Volcano (which would return every removed task as a plan that still
            # does not fit) a node that cannot serve the preemptor yields no plan (k8s).
            return None
        chosen: list[TaskInfo] = []
        # Reprieve the violating victims first, then the others; the most important first.
        for victim in sorted(removed, key=lambda v: (v.uid not in violating, -rank[v.uid])):
            run.add(victim)
            if not run.fits():
                run.remove(victim)
                chosen.append(victim)
        chosen.sort(key=lambda v: -rank[v.uid])
        return chosen, sum(1 for v in chosen if v.uid in violating)
    finally:
        run.close()


def _start_time(ssn: "Session", task: "TaskInfo") -> float:
    # k8s GetPodStartTime: a pod that has not started counts as starting now.
    return task.start_time if task.start_time else ssn.now


def plan_key(ssn: "Session", plan: _Plan) -> tuple:
    """Sort key of a dry-run plan, best first (ACT-6 candidate order)."""
    victims = plan.victims
    if not victims:
        # Volcano scores an empty plan 0 on the priority criteria and best on start time.
        return (0, 0, 0, 0, float("-inf"), plan.name)
    prios = [v.priority for v in victims]
    highest = max(prios)
    earliest = min(_start_time(ssn, v) for v in victims if v.priority == highest)
    return (
        plan.violations,
        highest,
        sum(p + _PRIORITY_OFFSET for p in prios),
        len(victims),
        -earliest,
        plan.name,
    )


def _topology_aware(
    ssn: "Session",
    stmt: Statement,
    preemptor: "TaskInfo",
    queue: "QueueInfo",
    accept: TaskFilter,
    candidates: np.ndarray,
    opts: PreemptOptions,
) -> bool:
    table = ssn.table
    rows = [int(r) for r in np.flatnonzero(candidates)]
    wanted = opts.num_candidates(len(rows))
    plans: list[_Plan] = []
    budgets = budget_view(ssn)  # one view for every node of this attempt
    for row in rows:
        if len(plans) >= wanted:
            break
        found = select_victims_on_node(ssn, preemptor, queue, row, accept, budgets)
        if found is not None:
            plans.append(_Plan(row, table.names[row], found[0], found[1]))
    if not plans:
        return False
    best = min(plans, key=lambda p: plan_key(ssn, p))
    node_stmt = Statement(ssn)
    for victim in order_victims(ssn, best.victims, preemptor):
        node_stmt.evict(victim, eviction_reason(ACTION, preemptor.key, best.name))
    # Volcano re-checks the node with the preempt predicate before pipelining.
    if candidate_nodes(ssn, preemptor, ssn.predicate(preemptor))[best.row]:
        node_stmt.pipeline(preemptor, best.name, eviction_occurred=True)
        stmt.merge(node_stmt)
        return True
    node_stmt.discard()
    return False
