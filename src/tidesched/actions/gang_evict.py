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
* **Pending pods** of a job: its Pending pods that request resources, in TaskOrder (Volcano's
  worksheet of the job's one sub-job). The **need** is the sum of their requests (with init
  containers).
* **Domains**: HyperNodes from the network-topology plugin's gradients for eviction (the widest
  first, at most ``hypernode.gradient.evict.max-hypernodes``), at most ``maxDomains``; when there
  are none, the whole cluster, unless the job has a hard constraint (then no domain). Within a
  domain the pods go to its nodes directly (Volcano looks for a lower HyperNode inside it first,
  for a gang with a hard constraint: not done here).
* **Per domain** the action's bundles (``bundles``), in its order, are taken one after another;
  once the domain's idle and releasing room plus everything taken so far holds the need, the
  **dry run** tries: evict every victim taken so far, then pipeline each pending pod in
  TaskOrder on the best node of the domain — among those where the pod fits the idle room,
  else those where it fits once released room is free; nodes failing a predicate
  unresolvably are out — each pod needing Allocatable(queue, pod) and PrePredicate. It works
  when every pod is placed and the job is pipelined; then its evictions and pipelines are the
  job's, else it is undone and the next bundle is added. Every placement is a pipeline, even
  on idle room: the pods bind in a later session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from tidesched.actions.bundles import WHOLE, Bundle, flatten, keep_allowed, request_sum
from tidesched.actions.victims import candidate_nodes
from tidesched.framework.gates import ungated_pending
from tidesched.framework.placement import best_node
from tidesched.framework.plugin import EvictionContext
from tidesched.actions.starving import starving_turns
from tidesched.framework.reasons import gang_eviction_reason
from tidesched.framework.statement import Statement
from tidesched.framework.topology import PURPOSE_EVICT
from tidesched.model.resource import MIN_RESOURCE

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo

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


def pending_tasks(ssn: "Session", job: "JobInfo") -> list["TaskInfo"]:
    """The job's pending pods that ask for resources and have no scheduling gate, in TaskOrder
    (Volcano's eviction worksheet skips gated and best-effort tasks)."""
    return ssn.sort_tasks(t for t in ungated_pending(job) if not t.best_effort)


def holds(need: np.ndarray, avail: np.ndarray) -> bool:
    """Volcano ``need.LessEqual(avail, Zero)``: cpu and memory always, other resources where
    the need asks for them."""
    check = need.copy()
    check[2:][check[2:] <= 0] = -np.inf
    return bool(np.all(avail + MIN_RESOURCE > check))


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
    if not names and topo.hard_tier(job) is None:
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


def dry_run(ssn: "Session", queue: "QueueInfo", job: "JobInfo", rows: np.ndarray,
            victims: list["TaskInfo"], action: str) -> Statement | None:
    """Evict ``victims`` and pipeline the job's pending pods in the domain's ``rows`` (see the
    module rules): the Statement when the job ends up pipelined, else None with everything undone."""
    tasks = pending_tasks(ssn, job)
    if not tasks:
        return None
    table = ssn.table
    plan = Statement(ssn)
    reason = gang_eviction_reason(action, job.uid)
    for victim in victims:
        plan.evict(victim, reason)
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
        plan.pipeline(task, table.names[row])
    else:
        # Volcano asks for the job's (one) sub-job ready or pipelined, then the job pipelined.
        if ssn.job_pipelined(job):
            return plan
    plan.discard()
    return None


def evict_for_job(ssn: "Session", stmt: Statement, queue: "QueueInfo", job: "JobInfo",
                  opts: GangEvictOptions, select: Select, action: str, gate: Gate | None = None) -> bool:
    """Volcano preemptJobInDomains / reclaimJobInDomains: True when a plan was taken into ``stmt``."""
    tasks = pending_tasks(ssn, job)
    if not tasks or (gate is not None and not gate(ssn, queue, tasks)):
        return False
    w = width(ssn)
    need = np.zeros(w)
    for t in tasks:
        assert t.init_vec is not None
        need += t.init_vec[:w]
    table = ssn.table
    for _name, rows in domains(ssn, job, opts):
        bundles = select(ssn, job, need, rows, opts)
        if not bundles:
            continue
        room = (table.idle[rows] + table.releasing[rows]).sum(axis=0)[:w]
        taken: list["TaskInfo"] = []
        for bundle in bundles:
            taken += bundle.tasks
            if not holds(need, room + request_sum(taken, w)):
                continue
            plan = dry_run(ssn, queue, job, rows, list(taken), action)
            if plan is not None:
                stmt.merge(plan)
                return True
    return False


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
            evict_for_job(ssn, stmt, queue, job, opts, select, action, gate)
            if ssn.job_pipelined(job):
                stmt.commit()
            else:
                stmt.discard()
