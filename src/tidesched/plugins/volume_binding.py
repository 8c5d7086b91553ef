"""kube-scheduler's VolumeBinding plugin as Volcano's predicates plugin runs it
(``predicate.VolumeBindingEnable``, on by default): a session's view of the pods' claims.

* **PreFilter** (:meth:`VolumeBinder.claims`): every claim a pod names must exist (an ephemeral
  volume's claim, ``<pod>-<volume>``, owned by the pod), not be lost or being deleted; a claim
  not yet bound whose class binds ``Immediate`` leaves the pod unschedulable until the PV
  controller binds it ("pod has unbound immediate PersistentVolumeClaims").
* **Filter** (:meth:`VolumeBinder.filter`, over all nodes at once): a bound claim's PV must
  accept the node (its node affinity); an unbound ``WaitForFirstConsumer`` claim needs, on the
  node, a matching available PV (class, size, access modes, volume mode and attributes class,
  the claim's selector, the PV's node affinity; the smallest such, never one an earlier claim
  of the pod took there) — or its class must provision (a provisioner other than
  ``kubernetes.io/no-provisioner``) where its ``allowedTopologies`` allow. A claim already given
  a node to provision on (``volume.kubernetes.io/selected-node``) only fits that node.
* **Reserve / Unreserve** (the allocate and deallocate events): the PVs chosen are assumed bound
  to their claims, and the claims to provision assumed on the node, for the rest of the
  session — so two pods are never given the same PV, and a pod sharing a claim with one placed
  before it goes where that claim went. A discarded statement takes them back.
* **PreBind** (:meth:`VolumeBinder.plan`): what a dispatched pod's binding must write first, a
  :class:`~tidesched.model.volumes.VolumePlan` carried to the world with the decisions.

Volcano's VolumeBinding score (storage capacity) is off unless the StorageCapacityScoring
feature gate is, and capacity checks against CSIStorageCapacity only run with Volcano's
``--csi-storage``: neither is done here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tidesched.model.volumes import (
    PersistentVolume,
    PersistentVolumeClaim,
    VolumeCatalog,
    VolumePlan,
    not_owned,
)

if TYPE_CHECKING:
    from tidesched.model.infos import TaskInfo
    from tidesched.model.node_table import NodeTable
    from tidesched.rules.node_index import NodeLabelIndex

# kube-scheduler volumebinding ConflictReasons and PreFilter status (binder.go, volume_binding.go)
REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NAME = "VolumeBinding"


@dataclass(slots=True)
class PodClaims:
    """A pod's claims as GetPodVolumeClaims sorts them (immediate unbound ones fail PreFilter)."""

    bound: list[PersistentVolumeClaim] = field(default_factory=list)
    delayed: list[PersistentVolumeClaim] = field(default_factory=list)  # unbound, WaitForFirstConsumer


@dataclass(slots=True)
class _Evaluation:
    """FindPodVolumes over every node: why nodes fail, and per node what would be bound."""

    failures: list[tuple[str, np.ndarray]]
    matched: list[tuple[PersistentVolumeClaim, np.ndarray]]  # per claim matched: PV id per node, -1 none
    provisioned: list[PersistentVolumeClaim]  # claims already given a node (provisioned there)


class _ClassIndex:
    """A storage class's PVs as arrays over them (name order), for matching a claim against all
    of them at once: capacity, whether free in the catalog (Available, no claimRef, not being
    deleted), volume mode, attributes class, access modes as bits, and the one node row a PV
    fits (-1: none, or several — ``spans``). Made once per catalog and node set."""

    __slots__ = (
        "pvs",
        "capacity",
        "free",
        "mode",
        "vac",
        "codes",
        "access",
        "bits",
        "row",
        "spans",
        "order",
        "bound_to",
    )

    def __init__(self, pvs: list[PersistentVolume], masks: list[np.ndarray]) -> None:
        self.pvs = pvs
        self.bits: dict[str, int] = {}
        self.capacity = np.array([pv.capacity for pv in pvs], dtype=np.int64)
        self.free = np.array(
            [pv.phase == "Available" and pv.claim_ref is None and not pv.deleting for pv in pvs], dtype=bool
        )
        # volume modes and attributes classes as codes (a value no PV has: -1)
        self.codes: dict[str, int] = {}
        self.mode = np.array(
            [self.codes.setdefault(pv.volume_mode, len(self.codes)) for pv in pvs], dtype=np.int64
        )
        self.vac = np.array(
            [self.codes.setdefault(pv.attributes_class, len(self.codes)) for pv in pvs], dtype=np.int64
        )
        self.access = np.array([self.access_bits(pv.access_modes, grow=True) for pv in pvs], dtype=np.int64)
        counts = np.array([int(m.sum()) for m in masks], dtype=np.int64)
        self.row = np.array(
            [int(np.argmax(m)) if c == 1 else -1 for m, c in zip(masks, counts)], dtype=np.int64
        )
        self.spans = counts > 1
        self.order = np.lexsort((np.arange(len(pvs)), self.capacity))  # smallest first, then name order
        self.bound_to: dict[str, list[int]] = {}  # claim key -> positions of PVs whose claimRef names it
        for i, pv in enumerate(pvs):
            if pv.claim_ref is not None:
                self.bound_to.setdefault(pv.claim_ref.key, []).append(i)

    def access_bits(self, modes: frozenset[str], grow: bool = False) -> int:
        """Access modes as bits; a mode no PV of the class offers gets a bit none has."""
        out = 0
        for mode in sorted(modes):
            bit = self.bits.get(mode)
            if bit is None:
                if not grow:
                    return -1
                bit = self.bits[mode] = 1 << len(self.bits)
            out |= bit
        return out


@dataclass(slots=True)
class _Reservation:
    node: str
    static: list[tuple[PersistentVolume, PersistentVolumeClaim]]
    provision: list[PersistentVolumeClaim]


def claim_error(task: "TaskInfo", catalog: VolumeCatalog) -> str | None:
    """podHasPVCs: why the pod's claims keep it from any node (a claim missing, lost, being
    deleted, or an ephemeral volume's claim not made for this pod), None when they do not."""
    pod = task.pod
    ns = pod.meta.namespace
    for vol in pod.volumes:
        pvc = catalog.claim(ns, vol.claim)
        if pvc is None:
            if vol.ephemeral:
                waiting = "waiting for ephemeral volume controller to create the persistentvolumeclaim"
                return f'{waiting} "{vol.claim}"'
            return f'persistentvolumeclaim "{vol.claim}" not found'
        if pvc.phase == "Lost":
            missing = f'persistentvolume "{pvc.volume_name}"'
            return f'persistentvolumeclaim "{pvc.name}" bound to non-existent {missing}'
        if pvc.deleting:
            return f'persistentvolumeclaim "{pvc.name}" is being deleted'
        if vol.ephemeral and pvc.controller_uid != pod.meta.uid:
            return not_owned(ns, pvc.name, pod.meta.name)
    return None


class VolumeBinder:
    """One session's VolumeBinding: the catalog read, the assumptions made."""

    def __init__(
        self, catalog: VolumeCatalog, labels: "NodeLabelIndex", table: "NodeTable", timeout: float = 600.0
    ) -> None:
        self.catalog = catalog
        self.timeout = timeout
        self.labels = labels
        self.table = table
        self.names = np.array(table.names, dtype=object)
        # PVs given to a claim this session (by reservations: counted, shared by pods of a claim),
        # also as a mask over PV ids and as the PVs given to each claim
        self._assumed_pv: dict[str, PersistentVolumeClaim] = {}
        self._assumed_pv_count: Counter[str] = Counter()
        self._taken = np.zeros(0, dtype=bool)
        self._given: dict[str, set[int]] = {}
        # claims given a node to provision on this session
        self._assumed_node: dict[str, str] = {}
        self._assumed_node_count: Counter[str] = Counter()
        self._reserved: dict[str, _Reservation] = {}
        self._pv_ids: dict[str, int] = {}
        self._pv_list: list[PersistentVolume] = []
        self._class_offsets: dict[str, int] = {}  # a class's first PV id in _pv_list
        # The last evaluation, reused while the task and the session's assumptions are the same
        # (the Filter of a placement and its Reserve).
        self._epoch = 0
        self._last: tuple[str, int, _Evaluation] | None = None

    # -- PreFilter ------------------------------------------------------------------------

    def claims(self, task: "TaskInfo") -> PodClaims | str:
        """The pod's claims sorted as kube-scheduler does, or why it fits no node."""
        error = claim_error(task, self.catalog)
        if error is not None:
            return error
        out = PodClaims()
        immediate = False
        ns = task.pod.meta.namespace
        for vol in task.pod.volumes:
            pvc = self.catalog.claim(ns, vol.claim)
            assert pvc is not None
            if pvc.fully_bound:
                out.bound.append(pvc)
                continue
            cls = self.catalog.classes.get(pvc.storage_class) if pvc.storage_class else None
            if cls is not None and cls.delayed and not pvc.volume_name:
                out.delayed.append(pvc)
            else:
                immediate = True
        if immediate:
            return UNBOUND_IMMEDIATE
        return out

    # -- Filter ---------------------------------------------------------------------------

    def filter(self, claims: PodClaims, task: "TaskInfo | None" = None) -> list[tuple[str, np.ndarray]]:
        """Per reason, the nodes failing for it, in kube-scheduler's order of reasons (a node
        failing for several is named by the first)."""
        return self._evaluation(claims, task).failures

    def _evaluation(self, claims: PodClaims, task: "TaskInfo | None") -> _Evaluation:
        last = self._last
        if task is not None and last is not None and last[0] == task.uid and last[1] == self._epoch:
            return last[2]
        evaluation = self._evaluate(claims)
        if task is not None:
            self._last = (task.uid, self._epoch, evaluation)
        return evaluation

    def _evaluate(self, claims: PodClaims) -> _Evaluation:
        n = len(self.names)
        node_conflict = np.zeros(n, dtype=bool)
        pv_missing = np.zeros(n, dtype=bool)
        remaining = np.ones(n, dtype=bool)
        for pvc in claims.bound:  # checkBoundClaims: the first failing claim ends the check
            pv = self.catalog.pvs.get(pvc.volume_name)
            if pv is None:
                pv_missing |= remaining
                break
            ok = self._affinity(pv)
            node_conflict |= remaining & ~ok
            remaining &= ok

        satisfied = np.ones(n, dtype=bool)
        provisioned: list[PersistentVolumeClaim] = []
        to_match: list[PersistentVolumeClaim] = []
        for pvc in claims.delayed:
            node = self._assumed_node.get(pvc.key, pvc.selected_node)
            if node is not None:
                satisfied &= self.names == node
                provisioned.append(pvc)
            else:
                to_match.append(pvc)
        matched: list[tuple[PersistentVolumeClaim, np.ndarray]] = []
        chosen: list[np.ndarray] = []
        for pvc in sorted(to_match, key=lambda c: c.request):  # smallest claims choose first
            best = self._match(pvc, chosen)
            chosen.append(best)
            matched.append((pvc, best))
        for pvc in provisioned:
            satisfied &= self._provisionable(pvc)
        for pvc, best in matched:
            unmatched = best < 0
            if unmatched.any():
                satisfied &= ~unmatched | self._provisionable(pvc)

        failures = [
            (REASON_NODE_CONFLICT, node_conflict),
            (REASON_BIND_CONFLICT, ~satisfied),
            (REASON_PV_NOT_EXIST, pv_missing),
        ]
        return _Evaluation([(r, m) for r, m in failures if m.any()], matched, provisioned)

    def _claim_ref(self, pv: PersistentVolume) -> tuple[str, str, str] | None:
        """(namespace, name, uid) of the claim the PV is bound to, as this session sees it."""
        assumed = self._assumed_pv.get(pv.name)
        if assumed is not None:
            return assumed.namespace, assumed.name, assumed.uid
        ref = pv.claim_ref
        return None if ref is None else (ref.namespace, ref.name, ref.uid)

    @staticmethod
    def _bound_to(ref: tuple[str, str, str], pvc: PersistentVolumeClaim) -> bool:
        """IsVolumeBoundToClaim: same namespace and name, and the uid when the PV names one."""
        return ref[0] == pvc.namespace and ref[1] == pvc.name and (not ref[2] or ref[2] == pvc.uid)

    def _pv_id(self, pv: PersistentVolume) -> int:
        i = self._pv_ids.get(pv.name)
        if i is None:
            i = self._pv_ids[pv.name] = len(self._pv_list)
            self._pv_list.append(pv)
        return i

    def _class_index(self, name: str) -> tuple[_ClassIndex, int]:
        """The class's PV index and the id of its first PV (its PVs have consecutive ids)."""
        shared = self.table.shared

        def build() -> tuple[object, _ClassIndex]:
            pvs = self.catalog.pvs_of_class(name)
            return shared, _ClassIndex(pvs, [self._affinity(pv) for pv in pvs])

        index = self.catalog.memo(("volume-binding.class", name, id(shared)), build)[1]
        offset = self._class_offsets.get(name)
        if offset is None:
            offset = self._class_offsets[name] = len(self._pv_list)
            for pv in index.pvs:
                self._pv_ids[pv.name] = len(self._pv_list)
                self._pv_list.append(pv)
            self._taken = np.concatenate([self._taken, np.zeros(len(index.pvs), dtype=bool)])
        return index, offset

    def _match(self, pvc: PersistentVolumeClaim, chosen: list[np.ndarray]) -> np.ndarray:
        """FindMatchingVolume on every node: the id of the PV the claim gets there, -1 none. A PV
        bound (or pre-bound) to the claim decides alone; else the smallest available PV that
        matches, first by name among equals, not taken by an earlier claim of the pod there.
        The PVs of the class are filtered as arrays; node-local PVs (one node each, the usual
        kind) are then placed at once, the first in order per node."""
        best = np.full(len(self.names), -1, dtype=np.int64)
        index, offset = self._class_index(pvc.storage_class)
        if not index.pvs:
            return best
        end = offset + len(index.pvs)
        given = [i - offset for i in self._given.get(pvc.key, ()) if offset <= i < end]
        bound = sorted({*index.bound_to.get(pvc.key, ()), *given})
        for i in bound:  # bound to this claim (in name order): the first that fits decides alone
            pv = index.pvs[i]
            ref = self._claim_ref(pv)
            if ref is None or not self._bound_to(ref, pvc):
                continue
            if pv.capacity < pvc.request or pv.volume_mode != pvc.volume_mode:
                continue
            if pv.attributes_class != pvc.attributes_class or pv.deleting:
                continue
            return np.where(self._affinity(pv), offset + i, -1)
        need = index.access_bits(pvc.access_modes)
        mode, vac = index.codes.get(pvc.volume_mode, -1), index.codes.get(pvc.attributes_class, -1)
        if need < 0 or mode < 0 or vac < 0:
            return best
        ok = index.free & (index.capacity >= pvc.request) & (index.mode == mode) & (index.vac == vac)
        ok &= (index.access & need) == need
        ok &= ~self._taken[offset:end]  # not given to a claim this session
        if pvc.selector is not None:
            for i in np.flatnonzero(ok).tolist():
                ok[i] = pvc.selector.matches(index.pvs[i].labels)
        order = index.order[ok[index.order]]  # the candidates, smallest first, then name order
        if not index.spans[order].any():
            rows = index.row[order]
            ids = order + offset
            keep = rows >= 0
            for taken in chosen:
                keep &= taken[np.maximum(rows, 0)] != ids
            rows, ids = rows[keep], ids[keep]
            # The first candidate of each node: assigned last to first, so the first one stays.
            best[rows[::-1]] = ids[::-1]
            return best
        for pv in (index.pvs[i] for i in order.tolist()):
            rows = self._rows(pv)
            free = rows[best[rows] < 0]
            if not free.size:
                continue
            pid = self._pv_id(pv)
            for taken in chosen:
                free = free[taken[free] != pid]
            best[free] = pid
        return best

    def _affinity(self, pv: PersistentVolume) -> np.ndarray:
        """Nodes the PV's required node affinity accepts (read-only, per node set)."""
        if pv.node_terms is None:
            return self._any_node()
        return self._terms_mask(pv.affinity_key, pv.node_terms)

    def _any_node(self) -> np.ndarray:
        return self.table.memo(
            ("volumes.any-node",), lambda: _read_only(np.ones(len(self.names), dtype=bool))
        )

    def _terms_mask(self, key: str, terms: tuple[Mapping[str, Any], ...]) -> np.ndarray:
        """Nodes matching any of the node selector terms (read-only, per node set and terms)."""

        def build() -> np.ndarray:
            required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
            return _read_only(self.labels.required_affinity_mask(required))

        return self.table.memo(("volumes.terms", key), build)

    def _rows(self, pv: PersistentVolume) -> np.ndarray:
        key = pv.affinity_key if pv.node_terms is not None else None
        return self.table.memo(("volumes.pv-rows", key), lambda: np.flatnonzero(self._affinity(pv)))

    def _provisionable(self, pvc: PersistentVolumeClaim) -> np.ndarray:
        """checkVolumeProvisions for one claim: its class provisions, and the node is in the
        class's allowed topologies."""
        cls = self.catalog.classes.get(pvc.storage_class)
        if cls is None or not cls.provisions:
            return np.zeros(len(self.names), dtype=bool)
        if not cls.allowed_topologies:
            return self._any_node()
        return self._terms_mask(cls.allowed_topologies_key, cls.allowed_topologies)

    # -- Reserve / Unreserve ----------------------------------------------------------------

    def reserve(self, task: "TaskInfo") -> None:
        """The task was placed (allocated or pipelined): assume its volumes on its node."""
        if task.uid in self._reserved:
            return
        row = self.table.index.get(task.node_name)
        claims = self.claims(task)
        if row is None or isinstance(claims, str):
            return
        evaluation = self._evaluation(claims, task)
        if any(mask[row] for _r, mask in evaluation.failures):
            return  # not where the volumes fit (placed by a path that did not ask)
        static = [(self._pv_list[int(best[row])], pvc) for pvc, best in evaluation.matched if best[row] >= 0]
        provision = list(evaluation.provisioned) + [pvc for pvc, best in evaluation.matched if best[row] < 0]
        for pv, pvc in static:
            self._assumed_pv[pv.name] = pvc
            self._assumed_pv_count[pv.name] += 1
            pid = self._pv_ids[pv.name]
            self._taken[pid] = True
            self._given.setdefault(pvc.key, set()).add(pid)
        for pvc in provision:
            self._assumed_node[pvc.key] = task.node_name
            self._assumed_node_count[pvc.key] += 1
        self._reserved[task.uid] = _Reservation(task.node_name, static, provision)
        self._epoch += 1

    def unreserve(self, task: "TaskInfo") -> None:
        """The task's placement was taken back: so are its assumptions."""
        res = self._reserved.pop(task.uid, None)
        if res is None:
            return
        self._epoch += 1
        for pv, pvc in res.static:
            self._assumed_pv_count[pv.name] -= 1
            if not self._assumed_pv_count[pv.name]:
                del self._assumed_pv_count[pv.name]
                del self._assumed_pv[pv.name]
                pid = self._pv_ids[pv.name]
                self._taken[pid] = False
                self._given[pvc.key].discard(pid)
        for pvc in res.provision:
            self._assumed_node_count[pvc.key] -= 1
            if not self._assumed_node_count[pvc.key]:
                del self._assumed_node_count[pvc.key]
                del self._assumed_node[pvc.key]

    # -- PreBind --------------------------------------------------------------------------

    def plan(self, task: "TaskInfo") -> VolumePlan | None:
        """What the task's binding must write first; None when its claims are all bound."""
        res = self._reserved.get(task.uid)
        if res is None or not (res.static or res.provision):
            return None
        return VolumePlan(
            node=res.node,
            static=tuple((pv.name, pvc.key, pvc.uid) for pv, pvc in res.static),
            provision=tuple(pvc.key for pvc in res.provision),
            timeout=self.timeout,
        )


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
