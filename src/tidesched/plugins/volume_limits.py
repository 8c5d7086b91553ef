"""The volume checks of Volcano's predicates plugin beside VolumeBinding, over all nodes:

* **VolumeZone** (kube-scheduler, ``predicate.VolumeZoneEnable``): a bound claim's PV labelled
  with a zone or region (``topology.kubernetes.io/zone`` and the others) fits only nodes in one
  of its zones — nodes without any such label fit anything. Its PreFilter also refuses a pod
  whose claim is missing, or unbound while its class binds ``Immediate``.
* **NodeVolumeLimits** (kube-scheduler's CSI limits, ``predicate.NodeVolumeLimitsEnable``): a
  node whose CSINode gives a driver an attach limit (``allocatable.count``) takes no more of that
  driver's volumes than that, a volume shared by pods counted once.
* **Volcano's attach count** (its scheduler cache, always on): every claim of a pod counts one
  ``attachable-volumes-csi-<driver>`` — the bound PV's CSI driver, else the class's
  ``csi.storage.k8s.io/csi-driver-name`` parameter or provisioner — unless the driver is one of
  ``--ignored-provisioners`` (with ``rancher.io/local-path`` and ``hostpath.csi.k8s.io`` always);
  a node has as many as its CSINode's limit for the driver (no limit: 2³¹−1), none when its
  CSINode does not list the driver. So an unbound claim of a class whose provisioner no CSINode
  lists (``kubernetes.io/no-provisioner``) fits no node unless that provisioner is ignored,
  which is why Volcano's own e2e runs pass ``--ignored-provisioners kubernetes.io/no-provisioner``.
  Volcano refuses such a pod when it binds it; here the node is refused with the reason.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from tidesched.model.status import TaskStatus
from tidesched.model.volumes import PersistentVolumeClaim, VolumeCatalog, csi_limit_key, not_owned

if TYPE_CHECKING:
    from tidesched.model.infos import TaskInfo
    from tidesched.model.node_table import NodeTable
    from tidesched.model.objects import Pod
    from tidesched.rules.node_index import NodeLabelIndex

REASON_ZONE = "node(s) had no available volume zone"
REASON_MAX_VOLUMES = "node(s) exceed max volume count"
ZONE_NAME = "VolumeZone"
# VolumeZone's topology labels; a PV's beta label also matches a node's GA one.
_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
_BETA_REGION = "failure-domain.beta.kubernetes.io/region"
_ZONE, _REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (_BETA_ZONE, _BETA_REGION, _ZONE, _REGION)
_GA = {_BETA_ZONE: _ZONE, _BETA_REGION: _REGION}
UNLIMITED = 2**31 - 1  # Volcano's DefaultAttachableVolumeQuantity for a driver without a limit


# -- VolumeZone -------------------------------------------------------------------------------


def zone_topologies(pod: "Pod", catalog: VolumeCatalog) -> list[tuple[str, frozenset[str]]] | str:
    """VolumeZone's PreFilter: the zone labels of the PVs the pod's claims are bound to, or why
    the pod fits no node. Only ``persistentVolumeClaim`` volumes count (not ephemeral ones)."""
    out: list[tuple[str, frozenset[str]]] = []
    for vol in pod.volumes:
        if vol.ephemeral:
            continue
        pvc = catalog.claim(pod.meta.namespace, vol.claim)
        if pvc is None:
            return f'persistentvolumeclaim "{vol.claim}" not found'
        if not pvc.volume_name:
            if not pvc.storage_class:
                return "PersistentVolumeClaim had no pv name and storageClass name"
            cls = catalog.classes.get(pvc.storage_class)
            if cls is None:
                return f'storageclass.storage.k8s.io "{pvc.storage_class}" not found'
            if cls.delayed:
                continue
            return "PersistentVolume had no name"
        pv = catalog.pvs.get(pvc.volume_name)
        if pv is None:
            return f'persistentvolume "{pvc.volume_name}" not found'
        for key in TOPOLOGY_LABELS:
            if key in pv.labels:
                zones = _zone_set(pv.labels[key])
                if zones is not None:
                    out.append((key, zones))
    return out


def _zone_set(value: str) -> frozenset[str] | None:
    """LabelZonesToSet: zones joined by ``__``; an empty one makes the label unreadable (None)."""
    zones = [z.strip() for z in value.split("__")]
    return None if any(not z for z in zones) else frozenset(zones)


def zone_mask(topologies: list[tuple[str, frozenset[str]]], labels: "NodeLabelIndex") -> np.ndarray:
    """Nodes VolumeZone's Filter lets through."""
    n = len(labels)
    unlabelled = np.ones(n, dtype=bool)
    for key in TOPOLOGY_LABELS:
        unlabelled &= labels.topology_codes(key) < 0
    ok = np.ones(n, dtype=bool)
    for key, zones in topologies:
        codes = labels.topology_codes(key)
        hit = _in(labels, key, codes, zones)
        ga = _GA.get(key)
        if ga is not None:  # the node lacks the beta label: its GA one is read instead
            hit |= (codes < 0) & _in(labels, ga, labels.topology_codes(ga), zones)
        ok &= hit
    return unlabelled | ok


def _in(labels: "NodeLabelIndex", key: str, codes: np.ndarray, values: frozenset[str]) -> np.ndarray:
    wanted = [labels.value_code(key, v) for v in values]
    wanted = [c for c in wanted if c >= 0]
    return np.isin(codes, wanted) if wanted else np.zeros(len(codes), dtype=bool)


# -- which driver a claim's volume counts against --------------------------------------------


def csi_volume(pvc: PersistentVolumeClaim, catalog: VolumeCatalog) -> tuple[str, str]:
    """NodeVolumeLimits' (driver, volume handle) of a claim: the bound PV's CSI source, else
    (unbound, or its PV not found) the class's provisioner and a handle naming the claim; ("",
    "") when the volume is not a CSI one or there is no class."""
    if pvc.volume_name:
        pv = catalog.pvs.get(pvc.volume_name)
        if pv is not None:
            return (pv.csi.driver, pv.csi.handle) if pv.csi is not None else ("", "")
    cls = catalog.classes.get(pvc.storage_class) if pvc.storage_class else None
    if cls is None:
        return "", ""
    return cls.provisioner, f"unbound-claim-{pvc.key}"


def volcano_driver(pvc: PersistentVolumeClaim, catalog: VolumeCatalog) -> str:
    """Volcano's cache getCSIDriverInfo: the bound PV's CSI driver ("" when not CSI), else the
    class's csi-driver-name parameter or provisioner."""
    if pvc.volume_name:
        pv = catalog.pvs.get(pvc.volume_name)
        if pv is not None:
            return pv.csi.driver if pv.csi is not None else ""
    cls = catalog.classes.get(pvc.storage_class) if pvc.storage_class else None
    return cls.csi_driver if cls is not None else ""


def attach_counts(pod: "Pod", catalog: VolumeCatalog) -> dict[str, int]:
    """Per driver, how many of the node's attachable volumes Volcano charges the pod; nothing
    while a claim is missing or an ephemeral claim is not the pod's (its cache retries then)."""
    counts: Counter[str] = Counter()
    for vol in pod.volumes:
        pvc = catalog.claim(pod.meta.namespace, vol.claim)
        if pvc is None or (vol.ephemeral and pvc.controller_uid != pod.meta.uid):
            return {}
        driver = volcano_driver(pvc, catalog)
        if driver and driver not in catalog.ignored_provisioners:
            counts[driver] += 1
    return dict(counts)


# -- the per-session checks -----------------------------------------------------------------


class VolumeLimits:
    """NodeVolumeLimits and Volcano's attach count for one session. ``evicted`` is the
    predicates plugin's set of pods evicted this session (uid → row): kube-scheduler's view of a
    node drops them, Volcano's count keeps them until they are gone."""

    def __init__(self, catalog: VolumeCatalog, table: "NodeTable", evicted: dict[str, int]) -> None:
        self.catalog = catalog
        self.table = table
        self.evicted = evicted
        n = len(table)
        self._limit_rows: dict[str, list[tuple[int, int]]] = {}  # limit key -> (row, count)
        self._capacity: dict[str, np.ndarray] = {}  # driver -> Volcano's attach capacity per node
        for name, csi in catalog.csi_nodes.items():
            row = table.index.get(name)
            if row is None:
                continue
            for driver, count in csi.drivers.items():
                if count is not None:
                    self._limit_rows.setdefault(csi_limit_key(driver), []).append((row, count))
                cap = self._capacity.setdefault(driver, np.zeros(n, dtype=np.int64))
                cap[row] = UNLIMITED if count is None else count
        self._used: dict[str, np.ndarray] | None = None  # driver -> attach count charged per node
        self._charged: dict[str, tuple[int, dict[str, int]]] = {}  # uid -> (row, counts) this session
        self._volumes: dict[str, dict[str, str]] = {}  # uid -> CSI volumes of a placed pod

    # Volcano's attach count

    def attach_failures(self, task: "TaskInfo") -> list[tuple[str, np.ndarray]]:
        counts = attach_counts(task.pod, self.catalog)
        if not counts:
            return []
        used = self._used_counts()
        n = len(self.table)
        out = []
        for driver in sorted(counts):
            cap = self._capacity.get(driver)
            have = np.zeros(n, dtype=np.int64) if cap is None else cap
            short = used.get(driver, np.zeros(n, dtype=np.int64)) + counts[driver] > have
            if short.any():
                out.append((f"Insufficient {csi_limit_key(driver)}", short))
        return out

    def _used_counts(self) -> dict[str, np.ndarray]:
        if self._used is None:
            used: dict[str, np.ndarray] = {}
            for row, tasks in enumerate(self.table.tasks):
                for t in tasks.values():
                    if t.pod.volumes and t.status != TaskStatus.PIPELINED and t.uid not in self._charged:
                        self._add(used, row, attach_counts(t.pod, self.catalog))
            for row, counts in self._charged.values():
                self._add(used, row, counts)
            self._used = used
        return self._used

    def _add(self, used: dict[str, np.ndarray], row: int, counts: dict[str, int], sign: int = 1) -> None:
        for driver, c in counts.items():
            arr = used.get(driver)
            if arr is None:
                arr = used[driver] = np.zeros(len(self.table), dtype=np.int64)
            arr[row] += sign * c

    def allocated(self, task: "TaskInfo") -> None:
        """A task placed this session (allocated, not pipelined) is charged on its node."""
        if not task.pod.volumes or task.uid in self._charged or task.status == TaskStatus.PIPELINED:
            return
        row = self.table.index.get(task.node_name)
        counts = attach_counts(task.pod, self.catalog)
        if row is None or not counts:
            return
        self._charged[task.uid] = (row, counts)
        if self._used is not None:
            self._add(self._used, row, counts)

    def deallocated(self, task: "TaskInfo") -> None:
        charged = self._charged.pop(task.uid, None)
        if charged is not None and self._used is not None:
            self._add(self._used, charged[0], charged[1], -1)

    # kube-scheduler's NodeVolumeLimits (CSI)

    def _csi_volumes(self, pod: "Pod", new: bool) -> dict[str, str] | str:
        """filterAttachableVolumes: unique volume name → limit key; for the pod being placed, a
        missing or foreign claim is an error (a placed pod's is skipped)."""
        out: dict[str, str] = {}
        ns = pod.meta.namespace
        for vol in pod.volumes:
            pvc = self.catalog.claim(ns, vol.claim)
            if pvc is None:
                if new:
                    return f'looking up PVC {ns}/{vol.claim}: persistentvolumeclaim "{vol.claim}" not found'
                continue
            if vol.ephemeral and pvc.controller_uid != pod.meta.uid:
                if new:
                    return not_owned(ns, pvc.name, pod.meta.name)
                continue
            driver, handle = csi_volume(pvc, self.catalog)
            if driver and handle:
                out[f"{driver}/{handle}"] = csi_limit_key(driver)
        return out

    def limit_failures(self, task: "TaskInfo") -> tuple[list[tuple[str, np.ndarray]], str | None]:
        """Nodes over a driver's limit with the pod, and an error that fails every node."""
        new = self._csi_volumes(task.pod, True)
        if isinstance(new, str):
            return [], new
        limits: dict[int, dict[str, int]] = {}  # row -> limit key -> limit, for the pod's drivers
        for key in set(new.values()):
            for row, count in self._limit_rows.get(key, ()):
                limits.setdefault(row, {})[key] = count
        if not limits:
            return [], None
        over = np.zeros(len(self.table), dtype=bool)
        for row in sorted(limits):
            attached: dict[str, str] = {}
            for other in self.table.tasks[row].values():
                if other.uid == task.uid or other.uid in self.evicted or not other.pod.volumes:
                    continue
                vols = self._volumes.get(other.uid)
                if vols is None:
                    found = self._csi_volumes(other.pod, False)
                    vols = self._volumes[other.uid] = found if isinstance(found, dict) else {}
                attached.update(vols)
            current = Counter(attached.values())
            adding = Counter(k for u, k in new.items() if u not in attached)
            for key, count in adding.items():
                limit = limits[row].get(key)
                if limit is not None and current[key] + count > limit:
                    over[row] = True
                    break
        return ([(REASON_MAX_VOLUMES, over)] if over.any() else []), None
