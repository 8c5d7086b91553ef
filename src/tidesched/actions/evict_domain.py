"""Topology-aware reclaim and preemption (issue 34; Volcano's reclaim and preempt actions are
topology-blind, its issue #4374 is open): a gang with a hard network-topology constraint takes
its room inside one HyperNode it may use, instead of wherever victims happen to sit first.

Volcano's reclaim (and preempt) walks the nodes in name order and evicts where the reclaimer's next pod fits:
for a gang that must sit in one leaf, that can free room spread over several leaves, so that
the victims are gone and the gang still does not fit any leaf (it stays pending, or Volcano's
allocate, which keeps it to a leaf, cannot use what was freed). Here the gang's turn is tried
once per HyperNode it may use (of a tier up to its highest allowed, under the HyperNode it is
already held in, if any), each a dry run with the candidate nodes limited to that HyperNode,
and the turn that makes the gang pipelined at the lowest cost is kept. Cost is DEC-8 extended:
the lowest highest priority among the jobs evicted; then the fewest jobs evicted; then the
fewest HyperNodes touched (lowest-tier HyperNodes holding an evicted pod: a gang evicted whole
inside the domain touches one, one broken elsewhere more); then the fewest pods evicted; then
the lower tier, then the name. A gang that no HyperNode can take evicts nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from tidesched.framework.statement import Statement
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo

# HyperNodes tried per reclaiming gang at most (the ones with the most room already first).
MAX_DOMAINS = 16


def constrained(ssn: "Session", job: "JobInfo") -> bool:
    """Whether the gang must stay within a HyperNode below the cluster top."""
    topo = ssn.topology
    tier = topo.hard_tier(job)
    return topo.ready and topo.tree.has_hypernodes and tier is not None and tier < topo.top_tier


def states_network_topology(job: "JobInfo") -> bool:
    """Volcano's ContainsNetworkTopology: the PodGroup, or one of its sub-groups, states a
    networkTopology (hard or soft)."""
    topo = job.pod_group.topology if job.pod_group is not None else None
    if topo is None:
        return False
    if topo.network_topology is not None:
        return True
    return job.sub_jobs is not None and any(s.network_topology is not None for s in job.sub_jobs.by_uid.values())


def held_domain(ssn: "Session", job: "JobInfo") -> str:
    """The widest HyperNode the gang may use around where it runs ("" when it runs nowhere)."""
    topo = ssn.topology
    tier = topo.hard_tier(job)
    held = topo.domain.get(job.uid, "")
    if not held or tier is None:
        return ""
    allowed = [a for a in topo.tree.ancestors(held) if topo.tier_of(a) <= tier]
    return allowed[-1] if allowed else ""


def domains(ssn: "Session", job: "JobInfo") -> list[str]:
    """The HyperNodes the gang may sit in, those with the most future-idle room for its pending
    pods first (ties: lower tier, then name), at most MAX_DOMAINS; only HyperNodes whose
    allocatable resources could hold the pods at all."""
    topo, table = ssn.topology, ssn.table
    tier = topo.hard_tier(job)
    assert tier is not None
    root = topo.top
    if topo.domain.get(job.uid, ""):
        root = held_domain(ssn, job)
        if not root:
            return []
    under = _under(ssn, root)
    need = np.zeros(len(table.dims))
    for t in job.tasks.values():
        if t.status == TaskStatus.PENDING and t.init_vec is not None:
            need += t.init_vec
    cols = np.flatnonzero(need > 0)
    scored = []
    for name in under:
        if name == topo.top or topo.tier_of(name) > tier:
            continue
        rows = topo.rows[topo.index[name]]
        if not len(rows) or np.any(table.allocatable[rows][:, cols].sum(axis=0) + 0.1 < need[cols]):
            continue
        room = float(np.minimum(table.future_idle[rows][:, cols].sum(axis=0) / np.maximum(need[cols], 1e-9), 1.0).min())
        scored.append((-room, topo.tier_of(name), name))
    return [name for _r, _t, name in sorted(scored)[:MAX_DOMAINS]]


def _under(ssn: "Session", root: str) -> list[str]:
    tree = ssn.topology.tree
    out, stack = [], [root]
    while stack:
        name = stack.pop()
        out.append(name)
        stack.extend(tree.infos[name].children if name in tree.infos else ())
    return out


def cost(ssn: "Session", stmt: Statement, domain: str) -> tuple:
    """DEC-8 extended with HyperNodes touched (see the module doc) of a statement's evictions."""
    topo = ssn.topology
    evicted = [task for op, task, _data in stmt.operations if op == "evict"]
    jobs = {t.job for t in evicted}
    highest = max((ssn.jobs[j].priority for j in jobs if j in ssn.jobs), default=-(2**31))
    touched = set()
    for t in evicted:
        row = ssn.table.index.get(t.node_name)
        if row is not None:
            touched.add(int(topo.leaf[row]))
    return (highest, len(jobs), len(touched), len(evicted), topo.tier_of(domain), domain)


def within_best_domain(
    ssn: "Session", stmt: Statement, job: "JobInfo", turn: Callable[[Statement], None],
    keep: Callable[[], Callable[[], None]] | None = None,
) -> str:
    """Run ``turn`` (the gang's reclaim or preempt turn into a statement) once per HyperNode
    the gang may use, each with the candidate nodes limited to it, and keep the cheapest that
    makes the gang pipelined, applied into ``stmt``; the HyperNode chosen, "" when none made
    it. ``keep()`` saves state a dry run may change besides the session and returns what
    puts it back."""
    topo = ssn.topology
    best: tuple | None = None
    for domain in domains(ssn, job):
        trial = Statement(ssn)
        restore = keep() if keep is not None else None
        topo.evict_within = topo.mask(domain)
        try:
            turn(trial)
            c = cost(ssn, trial, domain) if ssn.job_pipelined(job) else None
        finally:
            topo.evict_within = None
            trial.discard()
            if restore is not None:
                restore()
        if c is not None and (best is None or c < best):
            best = c
    if best is None:
        return ""
    domain = best[-1]
    topo.evict_within = topo.mask(domain)
    try:
        turn(stmt)
    finally:
        topo.evict_within = None
    return domain
