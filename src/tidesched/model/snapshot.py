"""A consistent cluster snapshot: typed records of every object the scheduler reads.

The scheduling core is a pure function of a snapshot and a config (RUN-4). Both worlds (the
simulator and the Kubernetes backend) build one of these and hand it to a Session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Iterable, Mapping
from typing import Any

from tidesched.model.dra.objects import NAMESPACED as DRA_NAMESPACED
from tidesched.model.dra.objects import PARSERS as DRA_PARSERS
from tidesched.model.dra.records import DraObjects
from tidesched.model.hypernodes import HyperNode, parse_hypernode
from tidesched.model.loader import Manifest
from tidesched.model.network_topology import pod_network_topology
from tidesched.model.objects import (
    DEFAULT_QUEUE,
    QUEUE_NAME_ANNOTATION,
    Meta,
    Node,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    Queue,
    parse_node,
    parse_pdb,
    parse_pod,
    parse_podgroup,
    parse_priority_class,
    parse_queue,
)
from tidesched.model.problems import Event, ObjectError, warning
from tidesched.model.node_usage import NodeUsage
from tidesched.model.numatopology import Numatopology, parse_numatopology
from tidesched.model.resource_quota import ResourceQuota, parse_resource_quota
from tidesched.model.resource import Resource
from tidesched.model.status import PodGroupPhase, QueueState
from tidesched.model.volumes import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeCatalog,
    parse_csi_node,
    parse_pv,
    parse_pvc,
    parse_storage_class,
)

DEFAULT_SCHEDULER_NAME = "volcano"

_PARSERS = {
    "Pod": parse_pod,
    "Node": parse_node,
    "PodGroup": parse_podgroup,
    "Queue": parse_queue,
    "PriorityClass": parse_priority_class,
    "PodDisruptionBudget": parse_pdb,
    "HyperNode": parse_hypernode,  # topology.volcano.sh (model.hypernodes)
    "ResourceQuota": parse_resource_quota,
    "Numatopology": parse_numatopology,
    # Storage (model/volumes.py): what the predicates' volume checks read
    "PersistentVolumeClaim": parse_pvc,
    "PersistentVolume": parse_pv,
    "StorageClass": parse_storage_class,
    "CSINode": parse_csi_node,
    **DRA_PARSERS,  # DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate
}
PARSERS = _PARSERS  # kind -> parse function (raises ObjectError naming the field)
# Namespaced kinds: their identity (duplicates) is ``namespace/name``.
_NAMESPACED = frozenset({"Pod", "PodGroup", "PodDisruptionBudget", "ResourceQuota", "PersistentVolumeClaim"}) | DRA_NAMESPACED
# The storage kinds and the ClusterSnapshot list each goes to.
VOLUME_KINDS = {
    "PersistentVolumeClaim": "pvcs",
    "PersistentVolume": "pvs",
    "StorageClass": "storage_classes",
    "CSINode": "csi_nodes",
}
# Kinds a scheduler snapshot does not use but that legitimately appear beside the ones it
# does (the simulator's controllers read some of them).
IGNORED_KINDS = frozenset(
    {
        "Namespace",
        "ConfigMap",
        "Secret",
        "Service",
        "ServiceAccount",
        "Deployment",
        "ReplicaSet",
        "StatefulSet",
        "DaemonSet",
        "Job",
        "CronJob",
        "HorizontalPodAutoscaler",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "TFJob",
        "PyTorchJob",
        "MPIJob",
        "Lease",
        "Event",
        "LimitRange",
    }
)


class UnknownKindError(ValueError):
    pass


@dataclass(slots=True)
class ClusterSnapshot:
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    podgroups: list[PodGroup] = field(default_factory=list)
    queues: list[Queue] = field(default_factory=list)
    priority_classes: list[PriorityClass] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)  # policy/v1, for preemption
    dra: DraObjects = field(default_factory=DraObjects)  # DRA classes, slices, claims, templates
    hypernodes: list[HyperNode] = field(default_factory=list)  # network topology (model.hypernode_tree)
    resource_quotas: list[ResourceQuota] = field(default_factory=list)  # for the resourcequota plugin
    numatopologies: list[Numatopology] = field(default_factory=list)  # for the numa-aware plugin
    # Measured load by node name (a metrics source's, in `tidesched run`): usage, rescheduling
    node_usage: dict[str, NodeUsage] = field(default_factory=dict)
    problems: list[Event] = field(default_factory=list)  # malformed objects, skipped
    ignored: list[str] = field(default_factory=list)  # sources of objects of unused kinds
    pvcs: list[PersistentVolumeClaim] = field(default_factory=list)
    pvs: list[PersistentVolume] = field(default_factory=list)
    storage_classes: list[StorageClass] = field(default_factory=list)
    csi_nodes: list[CSINode] = field(default_factory=list)
    # ``--ignored-provisioners``: whose volumes Volcano's cache does not count against attach limits
    ignored_provisioners: frozenset[str] = frozenset()
    catalog: VolumeCatalog | None = None  # made on first use (the cluster cache hands its own)

    def volumes(self) -> VolumeCatalog:
        """The storage objects as a :class:`VolumeCatalog`, made once."""
        if self.catalog is None:
            self.catalog = VolumeCatalog(
                self.pvcs, self.pvs, self.storage_classes, self.csi_nodes, self.ignored_provisioners
            )
        return self.catalog


def _kind_for_event(kind: str) -> str:
    return kind if kind in _PARSERS else "Object"


def _object_name(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return "", ""
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def synthesized_group_name(pod: Pod) -> str:
    return f"podgroup-{pod.meta.uid}".replace("/", "-")


def synthesize_podgroup(pod: Pod) -> PodGroup:
    """The PodGroup Volcano's podgroup controller creates for a pod that names none:
    minMember 1, the pod's queue annotation, priority class and requests, and the pod's
    ``volcano.sh/*`` annotations."""
    name = synthesized_group_name(pod)
    annotations = {k: v for k, v in pod.meta.annotations.items() if k.startswith("volcano.sh/")}
    meta = Meta(
        name=name,
        namespace=pod.meta.namespace,
        uid=f"{pod.meta.namespace}/{name}",
        labels={},
        annotations=annotations,
        creation=pod.meta.creation,
        deletion=0.0,
        owner_kind="Pod",
        owner_name=pod.meta.name,
    )
    running = pod.node_name != ""
    return PodGroup(
        meta=meta,
        min_member=1,
        min_task_member={},
        min_resources=pod.resreq.clone(),
        queue=pod.meta.annotations.get(QUEUE_NAME_ANNOTATION) or DEFAULT_QUEUE,
        priority_class=pod.priority_class,
        phase=PodGroupPhase.RUNNING if running else PodGroupPhase.PENDING,
        conditions=(),
        preemptable=pod.preemptable if "volcano.sh/preemptable" in pod.meta.annotations else False,
        topology=pod_network_topology(pod.meta.annotations),
    )


def default_queue() -> Queue:
    meta = Meta(DEFAULT_QUEUE, "", DEFAULT_QUEUE, {}, {}, 0.0, 0.0, "", "")
    return Queue(
        meta=meta,
        weight=1,
        capability=Resource(),
        capability_set=False,
        deserved=Resource(),
        deserved_set=False,
        guarantee=Resource(),
        reclaimable=True,
        priority=0,
        parent="",
        state=QueueState.OPEN,
    )


def build_snapshot(
    manifests: Iterable[Manifest | Mapping[str, Any]],
    *,
    scheduler_names: Iterable[str] = (DEFAULT_SCHEDULER_NAME,),
    synthesize_podgroups: bool = True,
    ensure_default_queue: bool = True,
    strict_kinds: bool = True,
    ignored_provisioners: Iterable[str] = (),
) -> ClusterSnapshot:
    """Parse raw objects into a snapshot. Malformed objects are skipped and reported as
    Warning events in ``problems``; an unknown kind raises UnknownKindError when
    ``strict_kinds`` (the CLI) and is reported otherwise."""
    snap = ClusterSnapshot(ignored_provisioners=frozenset(ignored_provisioners))
    ours = set(scheduler_names)
    seen: dict[tuple[str, str], str] = {}
    for item in manifests:
        # Objects from a world (not a file) have no source to name: messages start at the kind.
        source, obj = (item.source, item.obj) if isinstance(item, Manifest) else ("", item)
        at = f"{source}: " if source else ""
        if not isinstance(obj, Mapping):  # a world hands over what it holds: report, never raise
            shown = f"{type(obj).__name__} {obj!r}"[:80]
            snap.problems.append(warning("Object", "", "", "InvalidObject", f"{at}expected a Kubernetes object (mapping), got {shown}"))
            continue
        kind = obj.get("kind")
        ns, name = _object_name(obj)
        if not isinstance(kind, str):  # objects from a world, not the loader: report, never raise
            shown = "missing" if kind is None else f"{type(kind).__name__} {kind!r}"[:80]
            snap.problems.append(warning("Object", ns, name, "InvalidObject", f"{at}field kind must be a string, got {shown}"))
            continue
        if kind not in _PARSERS:
            if kind in IGNORED_KINDS:
                snap.ignored.append(f"{source}: {kind} {ns + '/' if ns else ''}{name}")
                continue
            msg = f"{at}unknown kind {kind!r} (scheduler objects: {', '.join(sorted(_PARSERS))})"
            if strict_kinds:
                raise UnknownKindError(msg)
            snap.problems.append(warning("Object", ns, name, "UnknownKind", msg))
            continue
        try:
            record = _PARSERS[kind](obj)
        except ObjectError as exc:
            snap.problems.append(
                warning(kind, ns, name, "InvalidObject", f"{at}{kind} {ns + '/' if ns else ''}{name}: {exc}")
            )
            continue
        ident = (kind, record.key if kind in _NAMESPACED else name)  # type: ignore[union-attr]
        if ident in seen:
            snap.problems.append(
                warning(kind, ns, name, "DuplicateObject", f"{at}{kind} {ident[1]} also defined {('at ' + seen[ident]) if seen[ident] else 'earlier'}; the later one wins")
            )
            _drop(snap, kind, ident[1])
        seen[ident] = source
        if kind in DRA_PARSERS:
            snap.dra.put(kind, ident[1], record)
        elif kind == "Pod":
            assert isinstance(record, Pod)
            snap.pods.append(record)
        elif kind == "Node":
            snap.nodes.append(record)  # type: ignore[arg-type]
        elif kind == "PodGroup":
            snap.podgroups.append(record)  # type: ignore[arg-type]
        elif kind == "Queue":
            snap.queues.append(record)  # type: ignore[arg-type]
        elif kind == "PodDisruptionBudget":
            snap.pdbs.append(record)  # type: ignore[arg-type]
        elif kind == "HyperNode":
            snap.hypernodes.append(record)  # type: ignore[arg-type]
        elif kind == "ResourceQuota":
            snap.resource_quotas.append(record)  # type: ignore[arg-type]
        elif kind == "Numatopology":
            snap.numatopologies.append(record)  # type: ignore[arg-type]
        elif kind in VOLUME_KINDS:
            getattr(snap, VOLUME_KINDS[kind]).append(record)
        else:
            snap.priority_classes.append(record)  # type: ignore[arg-type]

    if synthesize_podgroups:
        for pod in snap.pods:
            if not pod.group_name and pod.scheduler_name in ours:
                pg = synthesize_podgroup(pod)
                snap.podgroups.append(pg)
                object.__setattr__(pod, "group_name", pg.meta.name)
    if ensure_default_queue and not any(q.name == DEFAULT_QUEUE for q in snap.queues):
        snap.queues.append(default_queue())
    return snap


def _drop(snap: ClusterSnapshot, kind: str, key: str) -> None:
    if kind in DRA_PARSERS:
        snap.dra.put(kind, key, None)
    elif kind == "Pod":
        snap.pods = [p for p in snap.pods if p.key != key]
    elif kind == "PodGroup":
        snap.podgroups = [p for p in snap.podgroups if p.key != key]
    elif kind == "Node":
        snap.nodes = [n for n in snap.nodes if n.name != key]
    elif kind == "Queue":
        snap.queues = [q for q in snap.queues if q.name != key]
    elif kind == "PodDisruptionBudget":
        snap.pdbs = [p for p in snap.pdbs if p.key != key]
    elif kind == "HyperNode":
        snap.hypernodes = [h for h in snap.hypernodes if h.name != key]
    elif kind == "ResourceQuota":
        snap.resource_quotas = [q for q in snap.resource_quotas if q.key != key]
    elif kind == "Numatopology":
        snap.numatopologies = [t for t in snap.numatopologies if t.key != key]
    elif kind in VOLUME_KINDS:
        attr = VOLUME_KINDS[kind]
        setattr(snap, attr, [r for r in getattr(snap, attr) if _volume_key(r) != key])
    else:
        snap.priority_classes = [p for p in snap.priority_classes if p.name != key]


def _volume_key(record: object) -> str:
    key = getattr(record, "key", None)
    return key if isinstance(key, str) else str(getattr(record, "name", ""))
