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

from tidesched.model.volumes import PersistentVolume, PersistentVolumeClaim, VolumeCatalog, VolumePlan, not_owned

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
                return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{vol.claim}"'
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
        # PVs given to a claim this session (by reservations: counted, shared by pods of a claim)
        self._assumed_pv: dict[str, PersistentVolumeClaim] = {}
        self._assumed_pv_count: Counter[str] = Counter()
        # claims given a node to provision on this session
        self._assumed_node: dict[str, str] = {}
        self._assumed_node_count: Counter[str] = Counter()
        self._reserved: dict[str, _Reservation] = {}
        self._pv_ids: dict[str, int] = {}
        self._pv_list: list[PersistentVolume] = []

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

    def filter(self, claims: PodClaims) -> list[tuple[str, np.ndarray]]:
        """Per reason, the nodes failing for it, in kube-scheduler's order of reasons (a node
        failing for several is named by the first)."""
        return self._evaluate(claims).failures

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

    def _match(self, pvc: PersistentVolumeClaim, chosen: list[np.ndarray]) -> np.ndarray:
        """FindMatchingVolume on every node: the id of the PV the claim gets there, -1 none. A PV
        bound (or pre-bound) to the claim decides alone; else the smallest available PV that
        matches, first by name among equals, not taken by an earlier claim of the pod there."""
        best = np.full(len(self.names), -1, dtype=np.int64)
        available: list[PersistentVolume] = []
        for pv in self.catalog.pvs_of_class(pvc.storage_class):
            ref = self._claim_ref(pv)
            if ref is not None and not self._bound_to(ref, pvc):
                continue
            if pv.capacity < pvc.request or pv.volume_mode != pvc.volume_mode:
                continue
            if pv.attributes_class != pvc.attributes_class or pv.deleting:
                continue
            if ref is not None:  # bound to this claim: it or nothing
                return np.where(self._affinity(pv), self._pv_id(pv), -1)
            if pv.phase != "Available":
                continue
            if pvc.selector is not None and not pvc.selector.matches(pv.labels):
                continue
            if not pvc.access_modes <= pv.access_modes:
                continue
            available.append(pv)
        for pv in sorted(available, key=lambda v: v.capacity):  # stable: name order among equals
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
        return self.table.memo(("volumes.any-node",), lambda: _read_only(np.ones(len(self.names), dtype=bool)))

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
        evaluation = self._evaluate(claims)
        if any(mask[row] for _r, mask in evaluation.failures):
            return  # not where the volumes fit (placed by a path that did not ask)
        static = [(self._pv_list[int(best[row])], pvc) for pvc, best in evaluation.matched if best[row] >= 0]
        provision = list(evaluation.provisioned) + [pvc for pvc, best in evaluation.matched if best[row] < 0]
        for pv, pvc in static:
            self._assumed_pv[pv.name] = pvc
            self._assumed_pv_count[pv.name] += 1
        for pvc in provision:
            self._assumed_node[pvc.key] = task.node_name
            self._assumed_node_count[pvc.key] += 1
        self._reserved[task.uid] = _Reservation(task.node_name, static, provision)

    def unreserve(self, task: "TaskInfo") -> None:
        """The task's placement was taken back: so are its assumptions."""
        res = self._reserved.pop(task.uid, None)
        if res is None:
            return
        for pv, _pvc in res.static:
            self._assumed_pv_count[pv.name] -= 1
            if not self._assumed_pv_count[pv.name]:
                del self._assumed_pv_count[pv.name]
                del self._assumed_pv[pv.name]
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
