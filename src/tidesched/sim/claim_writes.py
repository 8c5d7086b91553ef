"""What a bind in the simulated world writes to a pod's DRA claims before the binding, as
kube-scheduler's PreBind (and ``tidesched run``'s claim writer) does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidesched.sim.world import World


def write_claims(world: "World", pod_key: str, writes: Any, now: str) -> bool:
    """A bind's DRA claim writes, before the binding as kube-scheduler's PreBind does: the
    allocation (unless the claim has it already — another pod of the session wrote the
    same one) and the pod in ``reservedFor``. False, writing nothing, when a claim is gone
    or holds another allocation."""
    pod = world.get("Pod", pod_key)
    if pod is None:
        return False
    ref = {"resource": "pods", "name": pod_key.rpartition("/")[2], "uid": str((pod.get("metadata") or {}).get("uid") or "")}
    updates = []
    for w in writes:
        claim = world.get("ResourceClaim", w.claim)
        if claim is None or (claim.get("metadata") or {}).get("deletionTimestamp"):
            return False
        st = dict(claim.get("status") or {})
        if w.allocation is not None:
            have = st.get("allocation")
            if have is not None and have.get("devices") != w.allocation.get("devices"):
                return False
            if have is None:
                st["allocation"] = dict(w.allocation, allocationTimestamp=now)
        elif st.get("allocation") is None:
            return False
        reserved = list(st.get("reservedFor") or [])
        if all(r.get("uid") != ref["uid"] for r in reserved):
            reserved.append(ref)
        st["reservedFor"] = reserved
        new = dict(claim)
        new["status"] = st
        updates.append(new)
    for new in updates:
        world.put("ResourceClaim", new)
    return True

