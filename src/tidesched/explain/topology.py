"""Why a gang waits, in network-topology terms (``explain``, the web view): its constraint as
stated and as applied, the HyperNode it is held in, and, when no HyperNode it may use took it,
which came closest (``no tier-1 HyperNode has 8 free nvidia.com/gpu for the gang's 8 pending
pods; best: leaf-3 with 6``). Reads a session after its actions; changes nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo


def topology_lines(ssn: "Session", job: "JobInfo") -> list[str]:
    topo = ssn.topology
    pg_topo = job.pod_group.topology
    nt = pg_topo.network_topology if pg_topo is not None else None
    if nt is None:
        return []
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
    if domain:
        lines.append(f"  Held in HyperNode {domain} (tier {topo.tier_of(domain)}); its pods in {topo.sub_domain.get(job.uid) or domain}.")
    why = topo.waiting.get(job.uid)
    if why:
        lines.append(f"  Waiting for a domain: {why}.")
    return lines


def topology_view(ssn: "Session", max_hypernodes: int = 500) -> dict[str, Any]:
    """The HyperNode tree and where each gang with a constraint sits, as plain data (the web
    view's ``topology`` and the simulator's report): HyperNodes depth-first from the top, each
    with its tier, depth, node count, free and total of the main resource (the first extended
    resource the nodes have, a GPU, else cpu cores), and the gangs held in it; then each gang."""
    topo, table = ssn.topology, ssn.table
    if not topo.tree.has_hypernodes:
        return {"ready": topo.ready, "hypernodes": [], "gangs": [], "resource": ""}
    col = next((j for j in range(2, table.pods_col) if table.allocatable[:, j].any()), 0)
    resource = table.dims[col] if col else "cpu"
    held: dict[str, list[str]] = {}
    gangs = []
    for uid in sorted(topo.mode):
        job = ssn.jobs[uid]
        domain = topo.domain.get(uid, "")
        if domain:
            held.setdefault(domain, []).append(uid)
        nt = job.pod_group.topology.network_topology if job.pod_group.topology else None
        gangs.append({
            "gang": uid, "constraint": nt.describe() if nt else "", "domain": domain,
            "tier": topo.tier_of(domain) if domain else None, "waiting": topo.waiting.get(uid, ""),
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
