"""Why a gang waits, in network-topology terms (``explain``, the web view): its constraint as
stated and as applied, the HyperNode it is held in, and, when no HyperNode it may use took it,
which came closest (``no tier-1 HyperNode has 8 free nvidia.com/gpu for the gang's 8 pending
pods; best: leaf-3 with 6``); for a gang with sub-groups, each policy's sub-groups — how many
are ready against minSubGroups, where each is held, and which wait and why, in the same terms.
Reads a session after its actions; changes nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo
    from tidesched.model.sub_jobs import SubJobInfo


def topology_lines(ssn: "Session", job: "JobInfo") -> list[str]:
    topo = ssn.topology
    pg_topo = job.pod_group.topology
    nt = pg_topo.network_topology if pg_topo is not None else None
    if nt is None:
        return sub_group_lines(ssn, job)
    tier = topo.hard_tier(job)
    if tier is None:
        applied = "not applied (no such tier)"
    elif tier >= topo.top_tier:
        applied = "anywhere, lowest HyperNode first"
    else:
        applied = f"within one HyperNode of tier ≤ {tier}"
    lines = [f"Network topology: {nt.describe()}; applied: {applied}."]
    if not topo.ready:
        lines.append(
            "  HyperNodes are not ready (a HyperNode with two parents, or a cycle: see the HyperNode "
            "warnings): gangs with a network topology wait until that is fixed."
        )
        return lines
    domain = topo.domain.get(job.uid, "")
    if domain and job.sub_jobs is None:
        lines.append(f"  Held in HyperNode {domain} (tier {topo.tier_of(domain)}); its pods in {topo.sub_domain.get(job.uid) or domain}.")
    elif domain:
        lines.append(f"  Held in HyperNode {domain} (tier {topo.tier_of(domain)}).")
    why = topo.waiting.get(job.uid)
    if why:
        lines.append(f"  Waiting for a domain: {why}.")
    return lines + sub_group_lines(ssn, job)


MAX_SUB_GROUPS = 20  # sub-groups listed per policy; the rest are counted


def sub_group_lines(ssn: "Session", job: "JobInfo") -> list[str]:
    """Each policy of the gang's ``subGroupPolicy``: its sub-groups ready against minSubGroups,
    its constraint as applied, and each sub-group's pods placed, where it is held, and why it
    waits (none without sub-groups)."""
    subs = job.sub_jobs
    if subs is None:
        return []
    topo = ssn.topology
    lines = ["Sub-groups (subGroupPolicy): each a gang of its own within its own HyperNode."]
    by_gid: dict[str, list[SubJobInfo]] = {}
    for sub in subs.by_uid.values():
        by_gid.setdefault(sub.gid, []).append(sub)
    groups = [(f"{job.uid}/{p.name}", p.name, p.size, p.min_groups, p.network_topology) for p in subs.policies]
    if job.uid in subs.by_uid:
        nt = job.pod_group.topology.network_topology if job.pod_group.topology else None
        groups.append((job.uid, "(pods of no policy)", 1, 0, nt))
    for gid, name, size, min_groups, nt in groups:
        members = sorted(by_gid.get(gid, []), key=lambda s: (s.match_index, s.uid))
        ready = sum(1 for s in members if ssn.sub_job_ready(job, s))
        tier = topo.sub_tier(job, members[0]) if members else None
        if nt is None:
            applied = "no network topology"
        elif tier is None:
            applied = f"network topology {nt.describe()}, not applied (no such tier)"
        else:
            applied = f"network topology {nt.describe()}, applied: within one HyperNode of tier ≤ {tier}"
        need = f", minSubGroups {min_groups}" if gid != job.uid else ""
        lines.append(f"  {name}: {_count(len(members), 'sub-group')} of {_count(size, 'pod')}, {ready} ready{need}; {applied}.")
        if min_groups and len(members) < min_groups:
            lines.append(f"    Only {len(members)} of the {min_groups} sub-groups it needs have pods: the gang is not valid until more come.")
        elif min_groups and ready < min_groups:
            waiting = [s for s in members if not ssn.sub_job_ready(job, s)]
            total, parts, each = topo.room_for(job, waiting[0]) if waiting else (0, [], "")
            room = ""
            if each:
                held = ", ".join(f"{h} {n}" for h, n in parts if n) or "none"
                room = f" The HyperNodes of its tier have room for {total} more at once ({held}; {each} each)."
            lines.append(f"    The gang waits for {min_groups - ready} more of them to be ready.{room}")
        for sub in members[:MAX_SUB_GROUPS]:
            lines.append("    " + _sub_line(ssn, job, sub))
        if len(members) > MAX_SUB_GROUPS:
            lines.append(f"    ... {len(members) - MAX_SUB_GROUPS} more sub-groups")
    return lines


def _sub_line(ssn: "Session", job: "JobInfo", sub: SubJobInfo) -> str:
    topo = ssn.topology
    placed = sub.ready_count + sub.waiting_count
    text = f"{sub.name}: {placed} of {sub.min_available} placed"
    held = topo.sub_domain.get(sub.uid, "")
    if held:
        text += f", held in {held}"
    if ssn.sub_job_ready(job, sub):
        return text + "; ready."
    if ssn.sub_job_pipelined(job, sub) and sub.waiting_count:
        return text + "; pipelined (on room being freed)."
    room, why = topo.sub_waiting(job, sub)
    if room and not ssn.job_ready(job):
        return text + "; waiting with its gang (it alone would fit: see above)."
    return text + (f"; waiting: {why}." if why else "; waiting: see its pods' reasons.")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def topology_view(ssn: "Session", max_hypernodes: int = 500) -> dict[str, Any]:
    """The HyperNode tree and where each gang with a constraint sits, as plain data (the web
    view's ``topology`` and the simulator's report): HyperNodes depth-first from the top, each
    with its tier, depth, node count, free and total of the main resource (the first extended
    resource the nodes have, a GPU, else cpu cores), and the gangs held in it; then each gang
    with a network topology (its own or its sub-groups'), and where each of its sub-groups is held."""
    topo, table = ssn.topology, ssn.table
    if not topo.tree.has_hypernodes:
        return {"ready": topo.ready, "hypernodes": [], "gangs": [], "resource": ""}
    col = next((j for j in range(2, table.pods_col) if table.allocatable[:, j].any()), 0)
    resource = table.dims[col] if col else "cpu"
    held: dict[str, list[str]] = {}
    gangs = []
    for uid in sorted(topo.constrained):
        job = ssn.jobs[uid]
        domain = topo.domain.get(uid, "")
        if domain:
            held.setdefault(domain, []).append(uid)
        nt = job.pod_group.topology.network_topology if job.pod_group.topology else None
        subs = sorted(job.sub_jobs.by_uid.values(), key=lambda s: (s.match_index, s.uid)) if job.sub_jobs else []
        gangs.append({
            "gang": uid, "constraint": nt.describe() if nt else "", "domain": domain,
            "tier": topo.tier_of(domain) if domain else None, "waiting": topo.waiting.get(uid, ""),
            # each sub-group and where it is held ("" while it waits)
            "sub_groups": [{"name": s.name, "domain": topo.sub_domain.get(s.uid, "")} for s in subs[:50]],
        })
    rows: list[dict[str, Any]] = []
    stack = [(topo.top, 0)]
    while stack and len(rows) < max_hypernodes:
        name, depth = stack.pop()
        info = topo.tree.infos[name]
        r = topo.rows[topo.index[name]]
        scale = 1000.0 if col != 1 else 2.0**30
        rows.append({
            "name": name, "tier": info.tier, "depth": depth, "nodes": int(len(r)),
            "free": round(float(table.idle[r, col].sum()) / scale, 3) if len(r) else 0.0,
            "total": round(float(table.allocatable[r, col].sum()) / scale, 3) if len(r) else 0.0,
            "gangs": held.get(name, []),
        })
        stack.extend((c, depth + 1) for c in reversed(info.children))
    return {"ready": topo.ready, "resource": resource, "hypernodes": rows, "gangs": gangs}
