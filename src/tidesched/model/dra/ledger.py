"""A session's ledger of DRA claims: where a pod's claims can be allocated, and the devices
each placement takes.

The node table holds one (``NodeTable.dra``) and calls it on every placement and removal, so
a task allocated or pipelined in the session takes its claims' devices at once and gives them
back when a statement is discarded — a gang never counts one device for two tasks. Devices
of claims allocated in the cluster stay taken for the whole session (a pod evicted now holds
them until it is gone and kube-controller-manager's resourceclaim controller deallocates).

:meth:`ClaimLedger.check` answers for every node at once, as kube-scheduler's
dynamicresources plugin does in PreFilter and Filter:

* each claim must exist (a template's claim made), not be deleted, belong to the pod when made
  from a template; an allocated claim must have room in ``reservedFor`` and the node must
  match its allocation's node selector; an unallocated one needs its device classes;
* claims to allocate are allocated on the node: one request of a plain count is a count of
  free matching devices per node (one array comparison over the nodes); anything else
  (several requests or claims, ``All``, ``firstAvailable``, constraints, admin access,
  capacity, counters) runs the exhaustive search (:mod:`.allocator`) on the nodes that pass
  the counts.

Every failure is unresolvable — evicting pods cannot allocate a claim (kube-scheduler returns
UnschedulableAndUnresolvable from this plugin, so nothing is preempted for it) — unless a plugin
makes claimed devices evictable (``evictable``: capacity-card, whose tidal reclaim treats claimed
cards like counted ones): then "such devices exist on the node but are taken" is resolvable.

**Now and later.** Like a node's idle and future-idle resources, the ledger answers for now and
for once the pods being released are gone: a claim allocated in the cluster whose pods (its
``reservedFor``) are all releasing — deleted, or evicted in this session — frees its devices
*later* (kube-controller-manager deallocates it once they are gone). A pod may be pipelined
onto such devices (``Check.passed``), allocated only onto devices free now (``Check.now``). A
pipelined placement takes released devices only in the later view.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tidesched.model.dra.allocator import ClaimAllocation, Use, allocate
from tidesched.model.dra.devices import DeviceIndex
from tidesched.model.dra.nodes import NodeSelector
from tidesched.model.dra.objects import ResourceClaim
from tidesched.model.dra.records import DraObjects
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.model.infos import TaskInfo

_PLACING = frozenset({TaskStatus.ALLOCATED, TaskStatus.PIPELINED})


@dataclass
class SessionClaim:
    """A claim allocated in this session: its allocation, node row and the tasks using it;
    ``later``: the devices it took that are free only once releasing pods are gone."""

    allocation: ClaimAllocation
    row: int
    holders: set[str] = field(default_factory=set)
    later: frozenset[int] = frozenset()


@dataclass
class Check:
    """Where a pod's claims can go — now or once releasing pods are gone (``passed``), now
    (``now``) — and the reasons of the other nodes: (reason, nodes, unresolvable)."""

    passed: np.ndarray
    now: np.ndarray
    failures: list[tuple[str, np.ndarray, bool]]


@dataclass(frozen=True)
class ClaimWrite:
    """What a bind writes to one claim before the Binding: the allocation (None when the claim
    was allocated before this session) and the pod added to ``reservedFor``."""

    claim: str  # namespace/name
    uid: str
    allocation: dict[str, Any] | None


class ClaimLedger:
    def __init__(self, objects: DraObjects, index: DeviceIndex, use: Use, names: list[str],
                 labels: list[Any]) -> None:
        self.objects = objects
        self.index = index
        self.use = use
        self.names = names
        self.labels = labels
        self.session: dict[str, SessionClaim] = {}
        self.task_claims: dict[str, list[str]] = {}
        self._selector_rows: dict[int, np.ndarray] = {}
        # Allocations found per (task, row, later), valid while nothing was taken or released since.
        self._found: dict[tuple[str, int, bool], list[ClaimAllocation] | None | str] = {}
        self._found_version: tuple[int, int] = (0, 0)
        self._checked: dict[str, tuple[tuple[int, int], Check]] = {}
        self.version = 0
        # Tasks that held their place at session open and are releasing or off their node now.
        self.away: set[str] = set()
        self.away_version = 0
        self._later: tuple[tuple[int, int], Use] | None = None
        self._holders: dict[str, list[str]] | None = None
        # Set by a plugin that evicts for claimed devices (capacity-card): "taken" is resolvable.
        self.evictable = False

    @classmethod
    def open(cls, objects: DraObjects, table: Any) -> "ClaimLedger":
        names = table.names
        labels = table.memo(("dra-node-labels",), lambda: [n.meta.labels for n in table.nodes])
        index = objects.index(names, labels, table.shared)
        ledger = cls(objects, index, objects.use(index), names, labels)
        if objects.claims:  # pods being deleted release their claims' devices later
            for i in np.flatnonzero(table.releasing[:, table.pods_col]).tolist():
                for t in table.tasks[i].values():
                    if t.status == TaskStatus.RELEASING and t.pod.claims:
                        ledger._set_away(t.uid, True)
        return ledger

    def copy(self) -> "ClaimLedger":
        new = ClaimLedger(self.objects, self.index, self.use.copy(), self.names, self.labels)
        new.session = {k: SessionClaim(v.allocation, v.row, set(v.holders), v.later) for k, v in self.session.items()}
        new.task_claims = {k: list(v) for k, v in self.task_claims.items()}
        new._selector_rows = self._selector_rows
        new.away = set(self.away)
        new.evictable = self.evictable
        new._holders = self._holders
        return new

    # -- later: devices of claims whose pods are all releasing -----------------------------------

    def _holder_map(self) -> dict[str, list[str]]:
        """The cluster-allocated claims each pod holds (is in ``reservedFor`` of), by pod uid."""
        if self._holders is None:
            holders: dict[str, list[str]] = {}
            for key, claim in self.objects.claims.items():
                if claim.allocation is not None:
                    for resource, _name, uid in claim.reserved_for:
                        if resource == "pods":
                            holders.setdefault(uid, []).append(key)
            self._holders = holders
        return self._holders

    def _set_away(self, uid: str, away: bool) -> None:
        """Note that a pod that holds claims in the cluster is (not) leaving its place."""
        if away == (uid in self.away) or (away and uid not in self._holder_map()):
            return
        if away:
            self.away.add(uid)
        else:
            self.away.discard(uid)
        self.away_version += 1

    def _released(self) -> list[tuple[int, Any]]:
        """Devices (and shares) of cluster-allocated claims every pod of which is away."""
        holders = self._holder_map()
        out = []
        seen: set[str] = set()
        for uid in sorted(self.away):
            for key in holders.get(uid, ()):
                claim = self.objects.claims[key]
                if key in seen or claim.allocation is None:
                    continue
                seen.add(key)
                if all(r[2] in self.away for r in claim.reserved_for if r[0] == "pods"):
                    for d in claim.allocation.devices:
                        i = self.index.ids.get(d.id)
                        if i is not None and not d.admin_access:
                            out.append((i, d.consumed if d.share_id else None))
        return out

    def later_use(self) -> Use:
        """What is taken once the releasing pods are gone (``use`` itself when none is)."""
        if not self.away:
            return self.use
        key = (self.version, self.away_version)
        if self._later is None or self._later[0] != key:
            later = self.use.copy()
            for i, consumed in self._released():
                later.take(self.index, i, consumed, -1)
            for held in self.session.values():
                for ch in held.allocation.devices:
                    if ch.index in held.later:
                        later.take(self.index, ch.index, ch.consumed)
            self._later = (key, later)
        return self._later[1]

    # -- reading a pod's claims ---------------------------------------------------------------

    def _claims(self, task: "TaskInfo") -> tuple[list[tuple[str, ResourceClaim]], str]:
        """The pod's claims, or why they cannot be used (kube-scheduler's PreEnqueue/PreFilter)."""
        pod = task.pod
        out = []
        for pc in pod.claims:
            if not pc.claim_name:
                return [], f"waiting for the ResourceClaim of {pc.describe()} to be created"
            key = f"{pod.meta.namespace}/{pc.claim_name}"
            claim = self.objects.claims.get(key)
            if claim is None:
                return [], f"resourceclaim {key} not found ({pc.describe()})"
            if claim.deleting:
                return [], f"resourceclaim {key} is being deleted"
            if pc.template_name and claim.owner_pod[1] != pod.meta.uid:
                return [], f"ResourceClaim {key} was not created for pod {pod.key} (pod is not owner)"
            out.append((key, claim))
        return out, ""

    def _rows_of(self, selector: NodeSelector) -> np.ndarray:
        hit = self._selector_rows.get(id(selector))
        if hit is None:
            hit = self._selector_rows[id(selector)] = np.array(
                [selector.matches(n, lb) for n, lb in zip(self.names, self.labels)], dtype=bool)
        return hit

    def to_allocate(self, task: "TaskInfo") -> tuple[list[tuple[str, ResourceClaim]], np.ndarray, list[tuple[str, np.ndarray]]]:
        """Claims the pod must allocate, the nodes its allocated claims allow, and failures."""
        n = len(self.names)
        claims, why = self._claims(task)
        if why:
            return [], np.zeros(n, dtype=bool), [(why, np.ones(n, dtype=bool))]
        allowed = np.ones(n, dtype=bool)
        failures: list[tuple[str, np.ndarray]] = []
        pending = []
        for key, claim in claims:
            held = self.session.get(key)
            if held is not None:  # allocated in this session for another pod: that node only
                rows = self._alloc_rows(held.allocation.result, held.row)
            elif claim.allocation is not None:
                if not claim.reservable() and not claim.reserved_for_pod(task.uid):
                    return [], np.zeros(n, dtype=bool), [(f"resourceclaim {key} in use", np.ones(n, dtype=bool))]
                sel = claim.allocation.node_selector
                rows = self._rows_of(sel) if sel is not None else np.ones(n, dtype=bool)
            else:
                for req in claim.spec.requests:
                    for sub in req.alternatives:
                        if sub.class_name not in self.index.classes:
                            why = f"request {sub.name}: device class {sub.class_name} does not exist"
                            return [], np.zeros(n, dtype=bool), [(why, np.ones(n, dtype=bool))]
                pending.append((key, claim))
                continue
            lost = allowed & ~rows
            if lost.any():
                failures.append((f"resourceclaim {key} not available on the node", lost))
            allowed &= rows
        return pending, allowed, failures

    def _alloc_rows(self, result: dict[str, Any], row: int) -> np.ndarray:
        n = len(self.names)
        if "nodeSelector" not in result:
            return np.ones(n, dtype=bool)
        rows = np.zeros(n, dtype=bool)
        terms = result["nodeSelector"]["nodeSelectorTerms"]
        if len(terms) == 1 and terms[0].get("matchFields"):
            rows[row] = True
            return rows
        from tidesched.model.dra.nodes import parse_node_selector  # noqa: PLC0415 - rare path
        return self._rows_of(parse_node_selector(result["nodeSelector"], "allocation.nodeSelector"))

    # -- the check ------------------------------------------------------------------------------

    def check(self, task: "TaskInfo") -> Check:
        key = (self.version, self.away_version)
        hit = self._checked.get(task.uid)
        if hit is not None and hit[0] == key:
            return hit[1]
        pending, allowed, failures = self.to_allocate(task)
        if not pending:
            out = Check(allowed, allowed, [(r, m, True) for r, m in failures])
        else:
            later = self.later_use()
            passed, more = self._check_with(task, pending, allowed, later, later is not self.use)
            now = passed if later is self.use else self._check_with(task, pending, allowed, self.use, False)[0]
            out = Check(passed, now, [(r, m, True) for r, m in failures] + more)
        self._checked[task.uid] = (key, out)
        return out

    def fits_without(self, task: "TaskInfo", row: int, uids: Iterable[str]) -> bool:
        """Could the pod's claims be allocated on ``row`` once these pods (and those releasing
        already) are gone? (The reclaim and preempt actions' question about their victims.)"""
        added = [u for u in uids if u not in self.away]
        for u in added:
            self._set_away(u, True)
        try:
            pending, allowed, _failures = self.to_allocate(task)
            if not pending or not allowed[row]:
                return bool(allowed[row])
            only = np.zeros(len(self.names), dtype=bool)
            only[row] = True
            later = self.later_use()
            return bool(self._check_with(task, pending, only, later, later is not self.use)[0][row])
        finally:
            for u in added:
                self._set_away(u, False)

    def _check_with(self, task: "TaskInfo", pending: list[tuple[str, ResourceClaim]], allowed: np.ndarray,
                    use: Use, later: bool) -> tuple[np.ndarray, list[tuple[str, np.ndarray, bool]]]:
        """Where the pending claims can be allocated among ``allowed`` with ``use`` taken."""
        failures: list[tuple[str, np.ndarray, bool]] = []
        taken_ok = not self.evictable  # "taken" failures are unresolvable unless evictions may free them
        specs = [c.spec for _k, c in pending]
        simple = self._simple(specs)
        if simple is not None:
            sub, match = simple
            free = self.index.per_node(match & ~use.in_use)
            enough = free >= sub.count
            exist = self.index.per_node(match)
            what = f"claim {pending[0][0]} request {sub.name} ({_wanted(sub)})"
            few = exist < sub.count  # too few on the node at all, before any is taken
            for text, mask, unresolvable in (
                ("no such device on the node", exist == 0, True),
                (f"only {'one' if sub.count == 2 else 'some'} such device on the node", (exist > 0) & few, True),
                ("every such device is taken", ~few & (free == 0), taken_ok),
                (f"fewer than {sub.count} such devices free", ~few & (free > 0), taken_ok),
            ):
                nodes = allowed & ~enough & mask
                if nodes.any():
                    failures.append((f"cannot allocate all claims: {what}: {text}", nodes, unresolvable))
            return allowed & enough, failures
        passed = allowed.copy()
        for why, short, unresolvable in self._necessary(pending, use):
            lost = passed & short
            if lost.any():
                failures.append((f"cannot allocate all claims: {why}", lost, unresolvable or taken_ok))
            passed &= ~short
        what = ", ".join(k for k, _c in pending)
        failed = np.zeros(len(self.names), dtype=bool)
        timed = np.zeros(len(self.names), dtype=bool)
        for row in np.flatnonzero(passed).tolist():
            found = self._allocate(task, specs, row, use, later, build=False)
            if found is None:
                failed[row] = True
            elif isinstance(found, str):
                timed[row] = True
        if failed.any():
            failures.append((f"cannot allocate all claims ({what})", failed, True))
        if timed.any():
            failures.append(("timed out trying to allocate devices", timed, True))
        return passed & ~failed & ~timed, failures

    def _simple(self, specs: list[Any]) -> tuple[Any, np.ndarray] | None:
        """The one request to count devices for, when the claims are that simple."""
        if len(specs) != 1 or len(specs[0].requests) != 1 or specs[0].constraints:
            return None
        req = specs[0].requests[0]
        if req.first_available or not req.alternatives[0].simple:
            return None
        sub = req.alternatives[0]
        match, _err = self.index.matching(sub)
        special = self.index.multi | self.index.counted | self.index.policed
        if (match & special).any():
            return None
        return sub, match

    def _necessary(self, pending: list[tuple[str, ResourceClaim]], use: Use) -> list[tuple[str, np.ndarray, bool]]:
        """Per request, the nodes where it alone cannot find enough matching devices that are
        free or shareable, and why — too few on the node at all (unresolvable), or taken — (the
        nodes left are a superset of those the search succeeds on)."""
        out = []
        avail = ~use.in_use | self.index.multi
        n = len(self.names)
        for key, claim in pending:
            for req in claim.spec.requests:
                ok = np.zeros(n, dtype=bool)
                exist = np.zeros(n, dtype=bool)
                for sub in req.alternatives:
                    match, _err = self.index.matching(sub)
                    need = sub.count if sub.mode != "All" else 1
                    counts = self.index.per_node(match if sub.admin_access else match & avail)
                    ok |= counts >= need
                    exist |= self.index.per_node(match) >= need
                alts = " or ".join(_wanted(s) for s in req.alternatives)
                what = f"claim {key} request {req.name} ({alts})"
                out.append((f"{what}: too few such devices on the node", ~exist, True))
                out.append((f"{what}: not enough such devices free", exist & ~ok, False))
        return out

    def _allocate(self, task: "TaskInfo", specs: list[Any], row: int, use: Use, later: bool,
                  build: bool = True) -> list[ClaimAllocation] | None | str | bool:
        """The search's answer on one node, kept while nothing is taken or released; only
        whether it succeeds (True) unless ``build``: a check tries many nodes, a placement one."""
        version = (self.version, self.away_version)
        if self._found_version != version:
            self._found = {}
            self._found_version = version
        key = (task.uid, row, later)
        found = self._found.get(key)
        if key not in self._found or (build and found is True):
            found = self._found[key] = allocate(self.index, use, specs, self.index.classes, row, self.names[row],
                                                build=build)
        return found

    # -- placements -----------------------------------------------------------------------------

    def add(self, row: int, task: "TaskInfo") -> None:
        """A task placed on ``row`` in the session takes its claims' devices there (a pipelined
        one may take devices that are free only later); a releasing one will free its claims'."""
        self._set_away(task.uid, task.status == TaskStatus.RELEASING)
        if task.status not in _PLACING or task.uid in self.task_claims:
            return
        pending, allowed, _failures = self.to_allocate(task)
        if not allowed[row]:
            return
        keys: list[str] = []
        if pending:
            specs = [c.spec for _k, c in pending]
            use = self.later_use() if task.status == TaskStatus.PIPELINED else self.use
            found = self._allocate(task, specs, row, use, use is not self.use)
            if not isinstance(found, list):
                return  # not allocatable here: the task carries no claim writes, so is not bound
            for (key, _claim), alloc in zip(pending, found):
                later = frozenset(ch.index for ch in alloc.devices
                                  if use is not self.use and not ch.admin and ch.consumed is None
                                  and self.use.in_use[ch.index])
                for ch in alloc.devices:
                    if not ch.admin and ch.index not in later:
                        self.use.take(self.index, ch.index, ch.consumed)
                self.session[key] = SessionClaim(alloc, row, {task.uid}, later)
            self.version += 1
        claims, _why = self._claims(task)
        for key, _claim in claims:
            held = self.session.get(key)
            if held is not None:
                held.holders.add(task.uid)
            keys.append(key)
        self.task_claims[task.uid] = keys

    def remove(self, row: int, task: "TaskInfo") -> None:
        self._set_away(task.uid, True)  # off its place: back with add(), unless it leaves
        keys = self.task_claims.pop(task.uid, None)
        if not keys:
            return
        for key in keys:
            held = self.session.get(key)
            if held is None:
                continue
            held.holders.discard(task.uid)
            if not held.holders:
                for ch in held.allocation.devices:
                    if not ch.admin and ch.index not in held.later:
                        self.use.take(self.index, ch.index, ch.consumed, -1)
                del self.session[key]
                self.version += 1

    def writes(self, task: "TaskInfo") -> list[ClaimWrite] | None:
        """The claim writes a bind of the task needs, None when its claims are not all allocated
        (then it must not be bound)."""
        keys = self.task_claims.get(task.uid)
        if keys is None or len(keys) != len(task.pod.claims):
            return None
        out = []
        for key in keys:
            claim = self.objects.claims[key]
            held = self.session.get(key)
            if held is not None:
                out.append(ClaimWrite(key, claim.uid, dict(held.allocation.result)))
            elif claim.allocation is not None:
                out.append(ClaimWrite(key, claim.uid, None))
            else:
                return None
        return out

    def claim_devices(self, key: str) -> list[tuple[int, Any]] | None:
        """The devices a claim holds (its allocation in this session, else in the cluster), each
        with the capacity its share consumes (None: the device itself), without those it has
        for admin access (watched, not taken); None when the claim is not allocated."""
        held = self.session.get(key)
        if held is not None:
            return [(ch.index, ch.consumed) for ch in held.allocation.devices if not ch.admin]
        claim = self.objects.claims.get(key)
        if claim is None or claim.allocation is None:
            return None
        out = []
        for d in claim.allocation.devices:
            i = self.index.ids.get(d.id)
            if i is not None and not d.admin_access:
                out.append((i, d.consumed if d.share_id else None))
        return out

    def allocated_devices(self) -> Iterable[tuple[str, int]]:
        """Claims allocated in this session and their device indices (for quota readers)."""
        for key, held in self.session.items():
            for ch in held.allocation.devices:
                yield key, ch.index


def _wanted(sub: Any) -> str:
    """What a request asks for, in a reason: count, class, the selectors as written (shortened)."""
    sel = " && ".join(sub.selectors)
    if len(sel) > 100:
        sel = sel[:97] + "..."
    return f"{sub.count} device{'s' if sub.count != 1 else ''} of class {sub.class_name}" + (f" where {sel}" if sel else "")
