"""allocate, for a gang with a network-topology constraint: Volcano v1.15.1's HyperNode gradient
(``allocateForJob`` / ``allocateForSubJob`` / ``allocateResourcesForTasks``).

The gradient plugin names the HyperNodes to try in groups, lowest tier first. Within a group,
each HyperNode is tried in a dry run (a Statement, discarded): the gang's pending pods placed
in task order on that HyperNode's nodes only, the usual way (idle before future idle, the
plugins' node scores). The first group where some HyperNode takes the gang (ready, or
pipelined) decides: the best of those by the HyperNode scores wins, and the gang is placed
there. For the pods inside the HyperNode chosen for the job, the same search runs again one
level down (the job may be given a spine, its pods a leaf of it).

Volcano tries every HyperNode of the group; here the candidates go best score first and the
search stops as soon as the answer is known: a HyperNode's score does not depend on the dry run
(it is read from the resources as the session stands, the dry runs being undone), so the first
HyperNode that takes the gang, among those sharing the best score by name order (Volcano picks
at random among ties), is the one Volcano would choose. Only where the scores tie, the share of
the gang's pods already in a HyperNode breaks the tie among those that take it; all of those
are tried then. The same decisions, a few dry runs instead of one per HyperNode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.framework.decisions import FitErrors
from tidesched.framework.placement import choose_node, no_node_errors
from tidesched.framework.statement import Statement
from tidesched.framework.topology import PURPOSE_ALLOCATE

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo


# Try every HyperNode of a group, as Volcano does, without pruning or stopping early: the
# reference the tests hold the fast search to (same decisions).
EXHAUSTIVE = False


class _Run:
    """One placement of the gang's pods within a HyperNode: its statement, the pods it did not
    reach, and the HyperNode holding what it placed (the sub-job's new domain)."""

    __slots__ = ("stmt", "rest", "domain", "hypernode", "score")

    def __init__(self, stmt: Statement, rest: list["TaskInfo"], domain: str, hypernode: str, score: float = 0.0) -> None:
        self.stmt, self.rest, self.domain, self.hypernode, self.score = stmt, rest, domain, hypernode, score


def place_tasks(ssn: "Session", job: "JobInfo", queue: "QueueInfo", tasks: list["TaskInfo"], hypernode: str) -> _Run | None:
    """Volcano allocateResourcesForTasks: the pods in order on ``hypernode``'s nodes; the run
    when the gang is then ready or pipelined, else None (undone)."""
    topo = ssn.topology
    within = None if hypernode == topo.top else topo.mask(hypernode)
    if within is not None and not EXHAUSTIVE and _cannot_hold(ssn, job, tasks, hypernode):
        return None
    stmt = Statement(ssn)
    domain = topo.sub_domain.get(job.uid, "")
    constrained = topo.has_topology(job)
    rest = list(tasks)
    while rest:
        task = rest.pop(0)
        if not ssn.allocatable(queue, task):
            continue
        if job.task_has_fit_errors(task):
            continue
        err = ssn.pre_predicate(task)
        if err:
            job.fit_errors[task.uid] = FitErrors(total_nodes=len(ssn.table), message=err)
            if job.need_continue_allocating():
                continue
            break
        if constrained:
            topo.current[job.uid] = domain  # what the node scores read (task.JobAllocatedHyperNode)
        row, now, fit = choose_node(ssn, task, within)
        if row is None:
            # The reasons are worked out only for the run that stays (see settle_fit_errors).
            job.fit_errors[task.uid] = FitErrors(total_nodes=len(ssn.table), message=_UNSETTLED)
            if job.need_continue_allocating():
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
        if ssn.job_ready(job):
            break
    topo.current.pop(job.uid, None)
    if ssn.job_ready(job) or ssn.job_pipelined(job):
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


def _still_needed(ssn: "Session", job: "JobInfo") -> int:
    """Pods the gang must still have placed before it is pipelined (gang's count; other
    plugins only add conditions), 0 when it is already, or when some plugin may let it through
    sooner (then nothing is pruned)."""
    if ssn.job_pipelined(job):
        return 0
    return job.min_available - job.ready_task_num() - job.waiting_task_num() - job.pending_best_effort_num()


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


def _cannot_hold(ssn: "Session", job: "JobInfo", tasks: list["TaskInfo"], hypernode: str) -> bool:
    """Whether the run is sure to fail, so that it need not be made: the gang still needs k
    pods placed, and the HyperNode's future-idle resources, summed, fall short of the k
    smallest requests in some dimension (every pod placed takes its request from one node of
    it). A run that passes may still fail; one that fails here always would."""
    k = _still_needed(ssn, job)
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


def _ranked(ssn: "Session", job: "JobInfo", group: list[str]) -> list[list[str]]:
    """The group in levels of equal score (each as the only candidate), best first, names in
    order within a level."""
    scores = ssn.hypernode_order(job, group, tie_bonus=False)
    levels: dict[float, list[str]] = {}
    for name in group:
        levels.setdefault(scores[name], []).append(name)
    return [sorted(levels[s]) for s in sorted(levels, reverse=True)]


def place_within(ssn: "Session", job: "JobInfo", queue: "QueueInfo", tasks: list["TaskInfo"], hypernode: str) -> _Run | None:
    """Volcano allocateForSubJob: the gang's pods within ``hypernode``, by the gradient under
    it; the run kept (its statement applied), with its score and the sub-job's new domain."""
    topo = ssn.topology
    for group in ssn.hypernode_gradient(job, hypernode, PURPOSE_ALLOCATE, sub=True):
        for level in ([sorted(group)] if EXHAUSTIVE else _ranked(ssn, job, group)):
            if len(level) == 1:
                job.fit_errors.clear()
                run = place_tasks(ssn, job, queue, tasks, level[0])
                if run is None or not len(run.stmt):
                    continue
                return _chosen(ssn, job, run, ssn.hypernode_order(job, level)[level[0]])
            taking = []
            for name in level:
                job.fit_errors.clear()
                run = place_tasks(ssn, job, queue, tasks, name)
                if run is not None and len(run.stmt):
                    taking.append(name)
                if run is not None:
                    run.stmt.discard()
            if not taking:
                continue
            # Scores tie: among those that take the gang, the share of it already in each
            # breaks the tie (only where more than one takes it).
            scores = ssn.hypernode_order(job, taking)
            pick = max(taking, key=lambda n: scores[n])  # the first by name among equals
            job.fit_errors.clear()
            run = place_tasks(ssn, job, queue, tasks, pick)  # the same run again, kept
            assert run is not None
            return _chosen(ssn, job, run, scores[pick])
    return None


def _chosen(ssn: "Session", job: "JobInfo", run: _Run, score: float) -> _Run:
    run.score = score
    run.domain = ssn.topology.tree.lca(ssn.topology.sub_domain.get(job.uid, ""), run.hypernode)
    return run


def allocate_gang(
    ssn: "Session", job: "JobInfo", queue: "QueueInfo", tasks: list["TaskInfo"]
) -> tuple[Statement, list["TaskInfo"], str, str] | None:
    """Volcano allocateForJob from the cluster top: the statement placing the gang (staged, for
    the caller to commit when the gang is ready), the pods left for a later turn, the HyperNode
    chosen for the job and the one holding its pods (the domains to commit with it); None
    when no HyperNode of the gradient takes the gang."""
    topo = ssn.topology
    saved_sub = topo.sub_domain.get(job.uid, "")
    try:
        for group in ssn.hypernode_gradient(job, topo.top, PURPOSE_ALLOCATE):
            # A gradient's group is one tier: HyperNodes without children if that tier has none.
            leaves_only = not EXHAUSTIVE and bool(group) and topo.childless_tier(topo.tier_of(group[0]))
            results: dict[str, float] = {}
            hopeless = _hopeless(ssn, job, tasks, group) if leaves_only else set()
            for level in (_ranked(ssn, job, group) if leaves_only else [sorted(group)]):
                for name in level:
                    if name in hopeless:
                        continue  # a run there is sure to fail (see _cannot_hold)
                    job.fit_errors.clear()
                    run = _gang_in(ssn, job, queue, tasks, name)
                    topo.sub_domain[job.uid] = saved_sub  # Volcano RecoverSubJobStatus
                    if run is None:
                        continue
                    if leaves_only:
                        # The best score, the first by name among equals: nothing later beats it.
                        return run.stmt, run.rest, name, run.domain
                    results[name] = run.score
                    run.stmt.discard()
            if not results:
                continue
            pick = max(sorted(results), key=lambda n: results[n])
            job.fit_errors.clear()
            run = _gang_in(ssn, job, queue, tasks, pick)
            assert run is not None
            return run.stmt, run.rest, pick, run.domain
        return None
    finally:
        topo.sub_domain[job.uid] = saved_sub


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


def _gang_in(ssn: "Session", job: "JobInfo", queue: "QueueInfo", tasks: list["TaskInfo"], hypernode: str) -> _Run | None:
    """The gang placed within ``hypernode`` (Volcano's loop over a job's sub-jobs, of which a
    gang without sub-groups has one) until it is ready; None unless ready or pipelined."""
    topo = ssn.topology
    merged = Statement(ssn)
    rest, score, domain = tasks, 0.0, topo.sub_domain.get(job.uid, "")
    while rest:
        run = place_within(ssn, job, queue, rest, hypernode)
        if run is None or not len(run.stmt):
            break
        merged.merge(run.stmt)
        score += run.score
        rest, domain = run.rest, run.domain
        topo.sub_domain[job.uid] = domain
        if ssn.job_ready(job):
            break
    if not len(merged):
        return None
    if not (ssn.job_ready(job) or ssn.job_pipelined(job)):
        merged.discard()
        return None
    return _Run(merged, rest, domain, hypernode, score)
