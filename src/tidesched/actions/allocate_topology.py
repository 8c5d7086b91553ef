"""allocate, for a gang placed by the HyperNode gradient (one with a hard network-topology
constraint, or with sub-groups): Volcano v1.15.1's ``allocateForJob`` / ``allocateForSubJob`` /
``allocateResourcesForTasks``.

**The gang** (``allocate_gang``): the gradient plugin names the HyperNodes it may use in groups,
lowest tier first. Within a group each HyperNode is tried in a dry run (Statements, discarded):
the gang's sub-groups (actions/worksheet.py: a gang without sub-groups is its one), in
worksheet order, are each placed within that HyperNode; a sub-group placed but with pods left
goes back into the worksheet, one that finds no room drops out of it; this stops once the gang
is ready. A HyperNode counts when the gang ends up ready or pipelined there; its score is the
sum of its sub-groups' scores. The first group where some HyperNode counts decides: the best
wins and the gang is placed there (what was dropped stays out of the worksheet).

**A sub-group within the gang's HyperNode** (``place_within``): the same search one level down,
by the gradient for the sub-group (its own tier and domain; a sub-group without a hard
constraint takes the gang's HyperNode whole). Each HyperNode of the group is a dry run of the
sub-group's pods (``place_tasks``: in task order on that HyperNode's nodes only, the usual way —
idle before future idle, the plugins' node scores — until the sub-group is ready); those
where the sub-group ends up ready or pipelined count, the best by HyperNode score wins, and the
sub-group's domain grows to hold it. A sub-group that gangpreempt or gangreclaim nominated a
HyperNode for this session takes it at once when each of its pods may go to its nominated node
there (``allocate_nomination``).

Volcano tries every HyperNode of a group; here, where it gives the same answer, the candidates
go best score first and the search stops as soon as the answer is known: within a sub-group's
search a HyperNode's score does not depend on the dry runs (it is read from the resources as the
session stands, the dry runs being undone), so the first that takes the sub-group, among those
sharing the best score by name order (Volcano picks at random among ties), is the one Volcano
would choose. Only where the scores tie, the share of the sub-group's pods already in a
HyperNode breaks the tie among those that take it; all of those are tried then. For a gang
without sub-groups in a group of leaves this holds for the gang's search too. A gang with
sub-groups is tried in every HyperNode of the group (its score, a sum over sub-groups placed one
after another, depends on the runs). HyperNodes that cannot hold the pods still needed are
never tried (``_cannot_hold``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.actions.allocate_nomination import allocate_from_nomination
from tidesched.actions.worksheet import Worksheet, failed_role, need_continue, reset_fit_errors
from tidesched.framework.decisions import FitErrors
from tidesched.framework.gates import skip_gated
from tidesched.framework.placement import choose_node, no_node_errors
from tidesched.framework.predicate_cache import PredicateErrorCache, enabled as error_cache_enabled
from tidesched.framework.statement import Statement
from tidesched.framework.topology import PURPOSE_ALLOCATE

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo
    from tidesched.model.sub_jobs import SubJobInfo


# Try every HyperNode of a group, as Volcano does, without pruning or stopping early: the
# reference the tests hold the fast search to (same decisions).
EXHAUSTIVE = False


class _Run:
    """One placement of a sub-group's pods within a HyperNode: its statement, the pods it did
    not reach, and the sub-group's domain once it is kept."""

    __slots__ = ("stmt", "rest", "domain", "hypernode", "score")

    def __init__(self, stmt: Statement, rest: list["TaskInfo"], domain: str, hypernode: str, score: float = 0.0) -> None:
        self.stmt, self.rest, self.domain, self.hypernode, self.score = stmt, rest, domain, hypernode, score


class GangRun:
    """The gang placed within one HyperNode: the statement, the worksheet left, each placed
    sub-group's domain (Volcano's sub-job decisions) and the score."""

    __slots__ = ("stmt", "worksheet", "decisions", "hypernode", "score")

    def __init__(self, stmt: Statement, worksheet: Worksheet, decisions: dict[str, str], hypernode: str, score: float) -> None:
        self.stmt, self.worksheet, self.decisions, self.hypernode, self.score = stmt, worksheet, decisions, hypernode, score


def place_tasks(ssn: "Session", job: "JobInfo", sub: "SubJobInfo", queue: "QueueInfo",
                tasks: list["TaskInfo"], hypernode: str) -> _Run | None:
    """Volcano allocateResourcesForTasks: the sub-group's pods in order on ``hypernode``'s
    nodes; the run when the sub-group is then ready or pipelined, else None (undone)."""
    topo = ssn.topology
    within = None if hypernode == topo.top else topo.mask(hypernode)
    if within is not None and not EXHAUSTIVE and _cannot_hold(ssn, job, sub, tasks, hypernode):
        return None
    stmt = Statement(ssn)
    domain = topo.sub_domain.get(sub.uid, "")
    constrained = topo.sub_has_topology(job, sub)
    errors = PredicateErrorCache(error_cache_enabled(ssn))  # one per run, as Volcano's helper
    rest = list(tasks)
    while rest:
        task = rest.pop(0)
        if not ssn.allocatable(queue, task):
            continue
        if skip_gated(ssn, task):
            continue
        if failed_role(job, sub, task):
            continue
        err = ssn.pre_predicate(task)
        if err:
            job.fit_errors[task.uid] = FitErrors(total_nodes=len(ssn.table), message=err)
            if need_continue(job, sub):
                continue
            break
        if constrained:
            topo.current[sub.uid] = domain  # what the node scores read (task.JobAllocatedHyperNode)
        row, now, fit = choose_node(ssn, task, within, errors)
        if row is None:
            # The reasons are worked out only for the run that stays (see settle_fit_errors).
            job.fit_errors[task.uid] = FitErrors(total_nodes=len(ssn.table), message=_UNSETTLED)
            if need_continue(job, sub):
                continue
            break
        name = ssn.table.names[row]
        if now:
            stmt.allocate(task, name)
        else:
            stmt.pipeline(task, name)
        if constrained:
            leaf = topo.leaf_name(row)
            if leaf:
                domain = topo.tree.lca(leaf, domain)
        if ssn.sub_job_ready(job, sub):
            break
    topo.current.pop(sub.uid, None)
    if ssn.sub_job_ready(job, sub) or ssn.sub_job_pipelined(job, sub):
        return _Run(stmt, rest, domain, hypernode)
    stmt.discard()
    return None


_UNSETTLED = "\0unsettled"


def settle_fit_errors(ssn: "Session", job: "JobInfo") -> None:
    """The node reasons of the pods the last run left without a node (dry runs skip them)."""
    for uid, fe in list(job.fit_errors.items()):
        if isinstance(fe, FitErrors) and fe.message == _UNSETTLED:
            task = ssn.tasks.get(uid)
            if task is not None:
                job.fit_errors[uid] = no_node_errors(ssn, task, ssn.table.fits_cached(task, "future"))


def _static_part(task: "TaskInfo") -> tuple:
    spec = task.pod.raw_spec
    return spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")


def _alike(tasks: list["TaskInfo"]) -> bool:
    """Pods with the same requests and the same node filters, none of them asking to be near
    other pods (whose placement could open a node the first pod cannot use)."""
    first = tasks[0]
    if first.check_cols is None or (first.pod.affinity or {}).get("podAffinity") or first.pod.spread_constraints:
        return False  # placing some could open nodes to the others
    part = _static_part(first)
    return all(
        t is first or (t.check_cols is not None and np.array_equal(t.check_cols, first.check_cols) and _static_part(t) == part)
        for t in tasks
    )


def _still_needed(ssn: "Session", job: "JobInfo", sub: "SubJobInfo | None" = None) -> int:
    """Pods the gang (the sub-group) must still have placed before it is pipelined (gang's
    count; other plugins only add conditions), 0 when it is already, or when some plugin may
    let it through sooner (then nothing is pruned)."""
    if sub is None or job.sub_jobs is None:
        if ssn.job_pipelined(job):
            return 0
        return job.min_available - job.ready_task_num() - job.waiting_task_num() - job.pending_best_effort_num()
    if ssn.sub_job_pipelined(job, sub):
        return 0
    return sub.min_available - sub.ready_count - sub.waiting_count - sub.pending_best_effort


def _room(ssn: "Session", task: "TaskInfo", rows: np.ndarray | None = None) -> np.ndarray:
    """Per node (of ``rows``, all when None), at most how many pods like ``task`` it could take:
    its future-idle resources over the request, none where a predicate refuses the pod."""
    assert task.check_cols is not None
    table = ssn.table
    cols = np.flatnonzero(task.check_cols > 0)
    sel = slice(None) if rows is None else rows
    room = np.floor((table.future_idle[sel][:, cols] + 0.1) / task.check_cols[cols]).min(axis=1).clip(min=0)
    room[~ssn.predicate_mask(task)[sel]] = 0
    return room


def _cannot_hold(ssn: "Session", job: "JobInfo", sub: "SubJobInfo | None", tasks: list["TaskInfo"], hypernode: str) -> bool:
    """Whether the run is sure to fail, so that it need not be made: the gang (sub-group) still
    needs k pods placed, and the HyperNode's future-idle resources, summed, fall short of the k
    smallest requests in some dimension (every pod placed takes its request from one node of
    it). A run that passes may still fail; one that fails here always would."""
    k = _still_needed(ssn, job, sub)
    if k <= 0:
        return False
    if k > len(tasks):
        return True
    rows = ssn.topology.rows[ssn.topology.index[hypernode]]
    if not len(rows):
        return True
    table = ssn.table
    first = tasks[0]
    if _alike(tasks):
        return bool(_room(ssn, first, rows).sum() < k)
    reqs = [t.init_vec for t in tasks if t.init_vec is not None]
    if len(reqs) < k:
        return False
    need = np.sort(np.array(reqs), axis=0)[:k].sum(axis=0)
    return bool(np.any(need > table.future_idle[rows].sum(axis=0) + 0.1))


def _ranked(ssn: "Session", job: "JobInfo", sub: "SubJobInfo", group: list[str]) -> list[list[str]]:
    """The group in levels of equal score (each as the only candidate), best first, names in
    order within a level."""
    scores = ssn.hypernode_order(job, sub, group, tie_bonus=False)
    levels: dict[float, list[str]] = {}
    for name in group:
        levels.setdefault(scores[name], []).append(name)
    return [sorted(levels[s]) for s in sorted(levels, reverse=True)]


def place_within(ssn: "Session", job: "JobInfo", sub: "SubJobInfo", queue: "QueueInfo",
                 tasks: list["TaskInfo"], hypernode: str) -> _Run | None:
    """Volcano allocateForSubJob: the sub-group's pods within ``hypernode``, from its
    nomination or by the gradient under it; the run kept (its statement applied), with its
    score and the sub-group's new domain."""
    topo = ssn.topology
    if topo.nominated.get(sub.uid):
        stmt = allocate_from_nomination(ssn, job, sub, queue, tasks)
        if stmt is not None:
            return _chosen(ssn, sub, _Run(stmt, [], "", topo.nominated[sub.uid]), 0.0)
    for group in ssn.hypernode_gradient(job, hypernode, PURPOSE_ALLOCATE, sub):
        for level in ([sorted(group)] if EXHAUSTIVE else _ranked(ssn, job, sub, group)):
            if len(level) == 1:
                reset_fit_errors(job, sub)
                run = place_tasks(ssn, job, sub, queue, tasks, level[0])
                if run is None or not len(run.stmt):
                    continue
                return _chosen(ssn, sub, run, ssn.hypernode_order(job, sub, level)[level[0]])
            taking = []
            for name in level:
                reset_fit_errors(job, sub)
                run = place_tasks(ssn, job, sub, queue, tasks, name)
                if run is not None and len(run.stmt):
                    taking.append(name)
                if run is not None:
                    run.stmt.discard()
            if not taking:
                continue
            # Scores tie: among those that take the sub-group, the share of it already in each
            # breaks the tie (only where more than one takes it).
            scores = ssn.hypernode_order(job, sub, taking)
            pick = max(taking, key=lambda n: scores[n])  # the first by name among equals
            reset_fit_errors(job, sub)
            run = place_tasks(ssn, job, sub, queue, tasks, pick)  # the same run again, kept
            assert run is not None
            return _chosen(ssn, sub, run, scores[pick])
    return None


def _chosen(ssn: "Session", sub: "SubJobInfo", run: _Run, score: float) -> _Run:
    run.score = score
    run.domain = ssn.topology.tree.lca(ssn.topology.sub_domain.get(sub.uid, ""), run.hypernode)
    return run


def allocate_gang(ssn: "Session", job: "JobInfo", queue: "QueueInfo", worksheet: Worksheet) -> GangRun | None:
    """Volcano allocateForJob from the cluster top: the gang placed (its statement staged, for
    the caller to commit when the gang is ready), what is left of its worksheet, the HyperNode
    chosen and its sub-groups' domains (to commit with it); None when no HyperNode of the
    gradient takes the gang."""
    topo = ssn.topology
    saved = {uid: topo.sub_domain.get(uid, "") for uid in worksheet.tasks}
    whole = job.sub_jobs is None
    try:
        for group in ssn.hypernode_gradient(job, topo.top, PURPOSE_ALLOCATE):
            # A gradient's group is one tier: HyperNodes without children if that tier has none.
            leaves_only = not EXHAUSTIVE and bool(group) and topo.childless_tier(topo.tier_of(group[0]))
            results: dict[str, float] = {}
            hopeless = _hopeless(ssn, job, worksheet.pending(), group) if leaves_only else set()
            early = leaves_only and whole
            levels = _ranked(ssn, job, topo.whole(job), group) if early else [sorted(group)]
            for level in levels:
                for name in level:
                    if name in hopeless:
                        continue  # a run there is sure to fail (see _cannot_hold)
                    job.fit_errors.clear()
                    run = _gang_in(ssn, job, queue, worksheet, name)
                    _restore(topo, saved)  # Volcano RecoverSubJobStatus
                    if run is None:
                        continue
                    if early:
                        # The best score, the first by name among equals: nothing later beats it.
                        return run
                    results[name] = run.score
                    run.stmt.discard()
            if not results:
                continue
            pick = max(sorted(results), key=lambda n: results[n])
            job.fit_errors.clear()
            run = _gang_in(ssn, job, queue, worksheet, pick)
            assert run is not None
            return run
        return None
    finally:
        _restore(topo, saved)


def _restore(topo: "object", saved: dict[str, str]) -> None:
    for uid, domain in saved.items():
        if domain:
            topo.sub_domain[uid] = domain  # type: ignore[attr-defined]
        else:
            topo.sub_domain.pop(uid, None)  # type: ignore[attr-defined]


def _hopeless(ssn: "Session", job: "JobInfo", tasks: list["TaskInfo"], group: list[str]) -> set[str]:
    """The lowest-tier HyperNodes of ``group`` that cannot hold the pods the gang still needs,
    all at once for pods alike (one pass over the nodes), else none."""
    topo = ssn.topology
    k = _still_needed(ssn, job)
    if k <= 0 or not tasks or not topo.leaves_disjoint or not _alike(tasks):
        return set()
    if topo.tier_of(group[0]) != topo.tree.tiers[0]:  # a group is one tier
        return set()
    room = _room(ssn, tasks[0])
    has_leaf = topo.leaf >= 0
    per = np.bincount(topo.leaf[has_leaf], weights=room[has_leaf], minlength=len(topo.names))
    return {n for n in group if per[topo.index[n]] < k}


def _gang_in(ssn: "Session", job: "JobInfo", queue: "QueueInfo", worksheet: Worksheet, hypernode: str) -> GangRun | None:
    """The gang placed within ``hypernode``, sub-group by sub-group from a copy of its
    worksheet, until it is ready; None unless ready or pipelined."""
    topo = ssn.topology
    ws = worksheet.copy()
    merged = Statement(ssn)
    score = 0.0
    decisions: dict[str, str] = {}
    while not ws.empty():
        sub = ws.queue.pop()
        run = place_within(ssn, job, sub, queue, ws.tasks[sub.uid], hypernode)
        if run is None or not len(run.stmt):
            continue  # it found no room here: out of this worksheet
        merged.merge(run.stmt)
        score += run.score
        ws.tasks[sub.uid] = run.rest
        topo.sub_domain[sub.uid] = decisions[sub.uid] = run.domain
        if run.rest:
            ws.queue.push(sub)
        if ssn.job_ready(job):
            break
    if not len(merged):
        return None
    if not (ssn.job_ready(job) or ssn.job_pipelined(job)):
        merged.discard()
        return None
    return GangRun(merged, ws, decisions, hypernode, score)
