"""Why a pod's claims can be allocated on no node, request by request, as data for ``explain``
(issue 35: "which request of which claim no node could satisfy and why").

For each request of each claim the pod still has to allocate (each alternative of a
``firstAvailable`` request on its own), the nodes are sorted into populations by what they
have of the devices the request selects: none of the class at all, none matching the
request's selectors, fewer than the count, enough but all taken, enough but too few free —
counted over the nodes where the claims cannot be allocated. Nodes where every request alone
would fit but not all of them together (constraints, several claims sharing devices) are
counted apart, as are nodes an allocated claim's node selector leaves out. "Free" is the
ledger's later view: devices of claims whose pods are all releasing count as free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tidesched.model.dra.devices import DeviceIndex
from tidesched.model.dra.objects import ALL, SubRequest

if TYPE_CHECKING:
    from tidesched.model.dra.ledger import ClaimLedger
    from tidesched.model.infos import TaskInfo

# Populations, in the order they are told.
NO_CLASS_DEVICE = "no-class-device"  # no device of the request's class on the node
NO_MATCH = "no-match"  # devices of the class, none the selectors select
TOO_FEW = "too-few"  # some such devices, fewer than the count (per how many: ``have``)
ALL_TAKEN = "all-taken"  # enough such devices, none free
FEW_FREE = "few-free"  # enough such devices, some free but fewer than the count (``have`` free)


@dataclass
class RequestDiagnosis:
    """One request (or one ``firstAvailable`` alternative) of one claim, over the failing nodes."""

    claim: str  # namespace/name
    template: str  # the template the claim was made from, "" when named by the pod
    request: str  # "gpu", or "gpu/big" for an alternative
    count: int  # devices asked for (0: allocationMode All)
    class_name: str
    selectors: tuple[str, ...]  # the request's own CEL selectors, as written
    # (population, how many devices the nodes have — of any kind it counts — , nodes)
    populations: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def fails(self) -> int:
        return sum(n for _p, _h, n in self.populations)


@dataclass
class ClaimsDiagnosis:
    nodes: int  # nodes of the session
    problem: str = ""  # a reason no node can take the pod's claims at all (not made, no class)
    requests: list[RequestDiagnosis] = field(default_factory=list)
    outside: list[tuple[str, int]] = field(default_factory=list)  # (allocated claim, nodes it leaves out)
    together: int = 0  # nodes where each request alone fits, all of them together not
    fit: int = 0  # nodes where the claims can be allocated (the pod fails there for other reasons)


def _populations(index: DeviceIndex, sub: SubRequest, taken: np.ndarray, nodes: np.ndarray) -> list[tuple[str, int, int]]:
    match, _err = index.matching(sub)
    need = sub.count if sub.mode != ALL else 1
    exist = index.per_node(match)
    free = exist if sub.admin_access else index.per_node(match & ~taken)
    of_class = exist
    if sub.selectors:  # the class alone: does the node have such devices at all?
        bare = SubRequest(sub.name, sub.class_name, (), sub.mode, sub.count, sub.admin_access, sub.tolerations, sub.capacity)
        of_class = index.per_node(index.matching(bare)[0])
    failing = nodes & (free < need)
    out: list[tuple[str, int, int]] = []

    def add(population: str, mask: np.ndarray, have: np.ndarray | None = None) -> None:
        mask = failing & mask
        if have is None:
            if mask.any():
                out.append((population, 0, int(mask.sum())))
            return
        for value in np.unique(have[mask]).tolist():
            out.append((population, int(value), int((mask & (have == value)).sum())))

    add(NO_CLASS_DEVICE, of_class == 0)
    add(NO_MATCH, (of_class > 0) & (exist == 0))
    add(TOO_FEW, (exist > 0) & (exist < need), exist)
    add(ALL_TAKEN, (exist >= need) & (free == 0))
    add(FEW_FREE, (exist >= need) & (free > 0), free)
    return out


def diagnose(ledger: "ClaimLedger", task: "TaskInfo") -> ClaimsDiagnosis:
    """Why the pod's claims fit no node (or which nodes they fit), request by request."""
    n = len(ledger.names)
    pending, allowed, failures = ledger.to_allocate(task)
    out = ClaimsDiagnosis(nodes=n)
    if not allowed.any() and failures and all(m.all() for _r, m in failures):
        out.problem = failures[0][0]
        return out
    for reason, mask in failures:
        out.outside.append((reason, int(mask.sum())))
    check = ledger.check(task)
    out.fit = int(check.passed.sum())
    if not pending:
        return out
    taken = ledger.later_use().in_use
    failing = allowed & ~check.passed
    alone = allowed.copy()
    templates = {f"{task.namespace}/{pc.claim_name}": pc.template_name for pc in task.pod.claims}
    for key, claim in pending:
        for req in claim.spec.requests:
            fits_req = np.zeros(n, dtype=bool)
            found = []
            for sub in req.alternatives:
                pops = _populations(ledger.index, sub, taken, failing)
                match, _err = ledger.index.matching(sub)
                free = ledger.index.per_node(match if sub.admin_access else match & ~taken)
                fits_req |= free >= (sub.count if sub.mode != ALL else 1)
                found.append(RequestDiagnosis(key, templates.get(key, ""), sub.name, sub.count if sub.mode != ALL else 0,
                                              sub.class_name, sub.selectors, pops))
            alone &= fits_req
            out.requests.extend(d for d in found if d.populations)
    out.together = int((failing & alone).sum())
    return out
