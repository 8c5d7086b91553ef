"""What gangpreempt and gangreclaim share (Volcano actions/gangpreempt, gangreclaim and
actions/utils, restated): their arguments, the loop over starving jobs, the victims taken
bundle by bundle, and the dry run that places a whole job before anything is evicted.

* **Arguments** (``configurations: - name: gangpreempt`` / ``gangreclaim``): ``maxDomains``
  (default 8; 0 or less: the default, as Volcano, with a warning when the config loads) and
  ``allowWholeBundle`` (default true: victims may be whole jobs whose gang breaks). The dry run
  honours allocate's ``predicateErrorCacheEnable``, which changes nothing here (predicate
  results are exact).
* **Jobs**: not Pending, JobValid, queue exists; queues in QueueOrder, each once, its starving
  jobs in JobOrder; one Statement per job, committed when JobPipelined holds afterwards, else
  discarded. (gangreclaim skips a queue that is Overused.)
* **Pending pods** of a job: its Pending pods that request resources and have no scheduling
  gate, sub-group by sub-group in worksheet order (actions/worksheet.py; a gang without
  sub-groups is its one), each in TaskOrder — of a job already ready, only the first
  sub-group's. The **need** is the sum of their requests (with init containers).
* **Domains**: HyperNodes from the network-topology plugin's gradients for eviction (the widest
  first, at most ``hypernode.gradient.evict.max-hypernodes``), at most ``maxDomains``; when there
  are none, the whole cluster, unless the job or a sub-group of it has a hard constraint (then
  no domain). Within a domain each sub-group goes, for a gang with a hard constraint anywhere,
  to the first HyperNode of its own gradient for eviction under the domain where it fits, else
  to the domain's nodes; the HyperNode each sub-group took is its **nomination**, which allocate
  tries first in the rest of the session (actions/allocate_nomination.py).
* **Per domain** the action's bundles (``bundles``), in its order, are taken one after another;
  once the domain's idle and releasing room plus everything taken so far holds the need, the
  **dry run** tries: evict every victim taken so far, then pipeline each pending pod in
  TaskOrder, sub-group by sub-group, on the best node of its HyperNode — among those where the
  pod fits the idle room, else those where it fits once released room is free; nodes failing
  a predicate unresolvably are out — each pod needing Allocatable(queue, pod) and PrePredicate;
  a sub-group counts when all its pods are placed and it is ready or pipelined, and the run
  stops once the job is pipelined (a job already ready: after its first sub-group). It works
  when every sub-group it came to was placed and the job is pipelined; then its evictions and
  pipelines are the job's, else it is undone and the next bundle is added. Every placement is
  a pipeline, even on idle room: the pods bind in a later session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from tidesched.actions.bundles import WHOLE, Bundle, flatten, keep_allowed, request_sum
from tidesched.actions.victims import candidate_nodes
from tidesched.actions.worksheet import Worksheet, organize
from tidesched.framework.placement import best_node
from tidesched.framework.plugin import EvictionContext
from tidesched.actions.starving import starving_turns
from tidesched.framework.reasons import gang_eviction_reason
from tidesched.framework.statement import Statement
from tidesched.framework.topology import PURPOSE_EVICT
from tidesched.model.resource import MIN_RESOURCE
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo
    from tidesched.model.sub_jobs import SubJobInfo

MAX_DOMAINS = "maxDomains"
ALLOW_WHOLE_BUNDLE = "allowWholeBundle"
DEFAULT_MAX_DOMAINS = 8
CLUSTER = ""  # the domain of the whole cluster (Volcano's cluster top HyperNode)


@dataclass(frozen=True, slots=True)
class GangEvictOptions:
    max_domains: int = DEFAULT_MAX_DOMAINS
    allow_whole_bundle: bool = True
    warnings: tuple[str, ...] = ()

    @classmethod
    def from_arguments(cls, args: "Arguments") -> "GangEvictOptions":
        max_domains = args.get_int(MAX_DOMAINS, DEFAULT_MAX_DOMAINS)
        warnings: tuple[str, ...] = ()
        if max_domains <= 0:
            warnings = (f"{args.owner}: {MAX_DOMAINS} {max_domains} is not positive; "
                        f"the default {DEFAULT_MAX_DOMAINS} is used (as Volcano does)",)
            max_domains = DEFAULT_MAX_DOMAINS
        return cls(max_domains, args.get_bool(ALLOW_WHOLE_BUNDLE, True), warnings)


# An action's choice of bundles for a job in a domain: (session, job, need, domain rows, options).
Select = Callable[["Session", "JobInfo", np.ndarray, np.ndarray, GangEvictOptions], list[Bundle]]
# Whether the queue may evict for the job's pending pods at all (gangreclaim: Preemptive).
Gate = Callable[["Session", "QueueInfo", list["TaskInfo"]], bool]


def width(ssn: "Session") -> int:
    """The resource dimensions the gang actions sum over: all but the pod slots (Volcano's
    requests carry no pod count)."""
    return ssn.table.pods_col


def _evictable_pending(task: "TaskInfo") -> bool:
    return task.status == TaskStatus.PENDING and not task.best_effort and not task.sch_gated


def worksheet(ssn: "Session", job: "JobInfo") -> Worksheet:
    """Volcano organizeEvictionWorksheet: allocate's worksheet, gated pods left out."""
    return organize(ssn, job, keep=_evictable_pending)


def pending_tasks(ssn: "Session", job: "JobInfo") -> list["TaskInfo"]:
    """The job's pending pods the gang actions place (Volcano CollectPendingTasksForGangEviction):
    of a job already ready, its first sub-group's; else all, sub-group by sub-group."""
    ws = worksheet(ssn, job)
    if ws.empty():
        return []
    if ssn.job_ready(job):
        return ws.tasks[ws.queue.pop().uid]
    return ws.pending()


def holds(need: np.ndarray, avail: np.ndarray) -> bool:
    """Volcano ``need.LessEqual(avail, Zero)``: cpu and memory always, other resources where
    the need asks for them."""
    check = need.copy()
    check[2:][check[2:] <= 0] = -np.inf
    return bool(np.all(avail + MIN_RESOURCE > check))


def hard_somewhere(ssn: "Session", job: "JobInfo") -> bool:
    """Whether the job or one of its sub-groups has a hard constraint (ContainsHardTopology)."""
    topo = ssn.topology
    return topo.hard_tier(job) is not None or any(topo.sub_tier(job, s) is not None for s in topo.sub_jobs(job))


def domains(ssn: "Session", job: "JobInfo", opts: GangEvictOptions) -> list[tuple[str, np.ndarray]]:
    """The domains to look for victims in, best first, each with its rows of the node table
    (Volcano GetCandidateDomains)."""
    topo = ssn.topology
    names: list[str] = []
    for group in ssn.hypernode_gradient(job, topo.top, PURPOSE_EVICT):
        for name in group:
            if name not in names:
                names.append(name)
    names = names[: opts.max_domains]
    if not names and not hard_somewhere(ssn, job):
        names = [topo.top]
    return [(CLUSTER if n == topo.top else n, np.ones(len(ssn.table), dtype=bool) if n == topo.top else topo.mask(n))
            for n in names]


def job_may_lose_pods(job: "JobInfo") -> bool:
    """Volcano IsJobPreemptableForGangEviction: a PodGroup that sets ``volcano.sh/preemptable``
    (annotation or label) is taken at its word; one that does not set it may lose pods."""
    meta = job.pod_group.meta
    if "volcano.sh/preemptable" in meta.annotations or "volcano.sh/preemptable" in meta.labels:
        return job.preemptable
    return True


def dry_run(ssn: "Session", queue: "QueueInfo", job: "JobInfo", domain: str, rows: np.ndarray,
            victims: list["TaskInfo"], action: str) -> tuple[Statement, dict[str, str]] | None:
    """Evict ``victims`` and pipeline the job's pending pods in the domain (see the module rules;
    Volcano BuildNominationPlanInDomain): the Statement when the job ends up pipelined, with the
    HyperNode each sub-group took, else None with everything undone."""
    ws = worksheet(ssn, job)
    if ws.empty():
        return None
    topo = ssn.topology
    was_ready = ssn.job_ready(job)
    hard = hard_somewhere(ssn, job)
    plan = Statement(ssn)
    reason = gang_eviction_reason(action, job.uid)
    for victim in victims:
        plan.evict(victim, reason)
    nominations: dict[str, str] = {}
    pipelined = False
    while not ws.empty():
        sub = ws.queue.pop()
        tasks = ws.tasks[sub.uid]
        won: tuple[Statement, str] | None = None
        if hard:
            for group in ssn.hypernode_gradient(job, domain or topo.top, PURPOSE_EVICT, sub):
                for name in group:
                    trial = _trial(ssn, queue, job, sub, tasks, rows if name == (domain or topo.top) else topo.mask(name),
                                   bool(victims))
                    if trial is not None:
                        won = (trial, name)
                        break
                if won is not None:
                    break
        else:
            trial = _trial(ssn, queue, job, sub, tasks, rows, bool(victims))
            won = (trial, domain or topo.top) if trial is not None else None
        if won is None:
            plan.discard()
            return None
        plan.merge(won[0])
        nominations[sub.uid] = won[1]
        pipelined = ssn.job_pipelined(job)
        if was_ready or pipelined:
            break
    if not pipelined:
        plan.discard()
        return None
    return plan, nominations


def _trial(ssn: "Session", queue: "QueueInfo", job: "JobInfo", sub: "SubJobInfo", tasks: list["TaskInfo"],
           rows: np.ndarray, victims_present: bool) -> Statement | None:
    """Every one of the sub-group's pods pipelined on ``rows`` (Volcano
    runSimulateTrialAtHyperNode): the Statement when the sub-group is then ready or pipelined,
    else None, undone."""
    table = ssn.table
    trial = Statement(ssn)
    for task in tasks:
        if not ssn.allocatable(queue, task):
            break
        nodes = candidate_nodes(ssn, task, ssn.predicate(task)) & rows
        if not nodes.any() or ssn.pre_predicate(task) is not None:
            break
        future = nodes & table.fits(task, table.future_idle)
        idle = future & table.fits(task, table.idle)
        row = best_node(ssn, task, idle if idle.any() else future)
        if row is None:
            break
        trial.pipeline(task, table.names[row], victims_present)
    else:
        if len(trial) and (ssn.sub_job_ready(job, sub) or ssn.sub_job_pipelined(job, sub)):
            return trial
    trial.discard()
    return None


def evict_for_job(ssn: "Session", stmt: Statement, queue: "QueueInfo", job: "JobInfo",
                  opts: GangEvictOptions, select: Select, action: str, gate: Gate | None = None) -> dict[str, str] | None:
    """Volcano preemptJobInDomains / reclaimJobInDomains: when a plan was taken into ``stmt``,
    the HyperNode each sub-group took (its nomination), else None."""
    tasks = pending_tasks(ssn, job)
    if not tasks or (gate is not None and not gate(ssn, queue, tasks)):
        return None
    w = width(ssn)
    need = np.zeros(w)
    for t in tasks:
        assert t.init_vec is not None
        need += t.init_vec[:w]
    table = ssn.table
    for name, rows in domains(ssn, job, opts):
        bundles = select(ssn, job, need, rows, opts)
        if not bundles:
            continue
        room = (table.idle[rows] + table.releasing[rows]).sum(axis=0)[:w]
        taken: list["TaskInfo"] = []
        for bundle in bundles:
            taken += bundle.tasks
            if not holds(need, room + request_sum(taken, w)):
                continue
            found = dry_run(ssn, queue, job, name, rows, list(taken), action)
            if found is not None:
                stmt.merge(found[0])
                return found[1]
    return None


def candidates_in(ssn: "Session", rows: np.ndarray,
                  accept: Callable[["TaskInfo"], bool]) -> dict[str, list["TaskInfo"]]:
    """The pods on the domain's nodes that ``accept`` takes, per job, in key order."""
    by_job: dict[str, list["TaskInfo"]] = {}
    for row in np.flatnonzero(rows):
        for task in sorted(ssn.table.tasks[row].values(), key=lambda t: t.key):
            if accept(task):
                by_job.setdefault(task.job, []).append(task)
    return by_job


def allowed(ssn: "Session", ctx: EvictionContext, bundles: list[Bundle],
            order: Callable[[list[Bundle]], list[Bundle]], opts: GangEvictOptions) -> list[Bundle]:
    """The bundles, in the action's ``order``, as the plugins' UnifiedEvictable fns allow them
    (a whole bundle all or nothing), without whole bundles unless ``allowWholeBundle``."""
    if not bundles:
        return []
    bundles = order(bundles)
    ok = {t.uid for t in ssn.unified_evictable(ctx, flatten(bundles))}
    if not ok:
        return []
    kept = order(keep_allowed(bundles, ok, width(ssn)))
    return [b for b in kept if b.kind != WHOLE or opts.allow_whole_bundle]


def execute_gang_eviction(ssn: "Session", action: str, select: Select, skip_overused: bool,
                          gate: Gate | None = None) -> None:
    """The action's loop over queues and starving jobs (see the module rules)."""
    opts = GangEvictOptions.from_arguments(ssn.config.action_arguments(action))
    turns = starving_turns(ssn)
    queues, starving = turns.queues, turns.starving
    while not queues.empty():
        queue = queues.pop()
        if skip_overused and ssn.overused(queue):
            continue
        jobs = starving.get(queue.uid)
        while jobs is not None and not jobs.empty():
            job = jobs.pop()
            stmt = Statement(ssn)
            nominations = evict_for_job(ssn, stmt, queue, job, opts, select, action, gate)
            if ssn.job_pipelined(job):
                stmt.commit()
                # Volcano ApplySubJobNominations: allocate tries them first this session.
                ssn.topology.nominated.update(nominations or {})
            else:
                stmt.discard()
