"""Persistent storage as the scheduler reads it: PersistentVolumeClaims, PersistentVolumes,
StorageClasses and CSINodes (records parsed once, like the other kinds), a pod's claim volumes,
and :class:`VolumeCatalog`, the index a session looks them up in.

The rules that use them (kube-scheduler's VolumeBinding, VolumeZone and NodeVolumeLimits as
Volcano's predicates plugin runs them) are in ``plugins/volume_binding.py`` and
``plugins/volume_limits.py``; what a bind writes back is :class:`VolumePlan`.

A pod uses a claim through a ``persistentVolumeClaim`` volume (the claim named) or an
``ephemeral`` volume, whose claim the ephemeral-volume controller creates as ``<pod>-<volume>``,
owned by the pod. Other volume kinds need no scheduling and are not read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from tidesched.model.fields import list_of, mapping, mappings, parse_count, parse_str, parse_time, str_map
from tidesched.model.problems import ObjectError
from tidesched.model.quantity import QuantityError, value as quantity_value
from tidesched.rules.selectors import CompiledLabelSelector, SelectorError, compile_label_selector

# Annotations and names the PV controller and kube-scheduler agree on
# (k8s.io/component-helpers/storage/volume).
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
CSI_DRIVER_PARAMETER = "csi.storage.k8s.io/csi-driver-name"
# Volcano's scheduler cache never counts these provisioners' volumes against a node's attach
# limits (cache.go defaultIgnoredProvisioners); ``--ignored-provisioners`` adds to them.
DEFAULT_IGNORED_PROVISIONERS = frozenset({"rancher.io/local-path", "hostpath.csi.k8s.io"})
# Volume limit resource names (k8s volume util GetCSIAttachLimitKey).
CSI_LIMIT_PREFIX = "attachable-volumes-csi-"
_RESOURCE_NAME_LIMIT = 63


def csi_limit_key(driver: str) -> str:
    """The resource name a CSI driver's attach limit goes by: the prefix and the driver name,
    shortened with a hash of it when the whole would pass 63 characters."""
    if len(CSI_LIMIT_PREFIX) + len(driver) < _RESOURCE_NAME_LIMIT:
        return CSI_LIMIT_PREFIX + driver
    digest = hashlib.sha1(driver.encode()).hexdigest()[:16]
    return CSI_LIMIT_PREFIX + driver[:23] + digest


# --------------------------------------------------------------------------------------------
# A pod's claim volumes


@dataclass(frozen=True, slots=True)
class PodVolume:
    """One volume of a pod that uses a claim: its name in the pod and the claim's name."""

    name: str
    claim: str
    ephemeral: bool  # the claim is made by the ephemeral-volume controller, owned by the pod


def not_owned(namespace: str, claim: str, pod: str) -> str:
    """Why an ephemeral volume's claim may not be used (ephemeral.VolumeIsForPod)."""
    return f"PVC {namespace}/{claim} was not created for pod {namespace}/{pod} (pod is not owner)"


def pod_volumes(spec: Mapping[str, Any], pod_name: str) -> tuple[PodVolume, ...]:
    """The pod's ``persistentVolumeClaim`` and ``ephemeral`` volumes in spec order."""
    entries = mappings(spec, "volumes", "spec.volumes")
    if not entries:
        return ()
    out: list[PodVolume] = []
    for i, vol in enumerate(entries):
        at = f"spec.volumes[{i}]"
        claim = vol.get("persistentVolumeClaim")
        ephemeral = vol.get("ephemeral")
        if claim is None and ephemeral is None:
            continue
        name = parse_str(vol.get("name"), f"{at}.name")
        if claim is not None:
            source = mapping(vol, "persistentVolumeClaim", f"{at}.persistentVolumeClaim")
            claim_name = parse_str(source.get("claimName"), f"{at}.persistentVolumeClaim.claimName")
            if not claim_name:
                raise ObjectError(f"{at}.persistentVolumeClaim.claimName", "missing or empty")
            out.append(PodVolume(name, claim_name, False))
        else:
            mapping(vol, "ephemeral", f"{at}.ephemeral")
            if not name:
                raise ObjectError(
                    f"{at}.name", "missing or empty (an ephemeral volume's claim is named by it)"
                )
            out.append(PodVolume(name, f"{pod_name}-{name}", True))
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Records


def _object_meta(obj: Mapping[str, Any], namespaced: bool) -> tuple[str, str, Mapping[str, Any]]:
    meta = mapping(obj, "metadata", "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError("metadata.name", "missing or empty")
    ns = parse_str(meta.get("namespace"), "metadata.namespace", "default") if namespaced else ""
    return ns, name, meta


def _controller_uid(meta: Mapping[str, Any]) -> str:
    """The uid of the owner reference marked ``controller: true``, "" when there is none."""
    for i, ref in enumerate(mappings(meta, "ownerReferences", "metadata.ownerReferences")):
        if ref.get("controller") is True:
            return parse_str(ref.get("uid"), f"metadata.ownerReferences[{i}].uid")
    return ""


def _bytes(raw: Any, field_name: str) -> int:
    if raw is None:
        return 0
    try:
        return quantity_value(raw)
    except QuantityError as exc:
        raise ObjectError(field_name, str(exc)) from None


def _access_modes(spec: Mapping[str, Any], field_name: str) -> frozenset[str]:
    modes = list_of(spec, "accessModes", field_name)
    return frozenset(parse_str(m, f"{field_name}[{i}]") for i, m in enumerate(modes))


def _class_of(annotations: Mapping[str, str], spec: Mapping[str, Any], field_name: str) -> str:
    """The beta annotation wins over ``storageClassName`` (GetPersistentVolume(Claim)Class)."""
    if BETA_STORAGE_CLASS in annotations:
        return annotations[BETA_STORAGE_CLASS]
    return parse_str(spec.get("storageClassName"), field_name)


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    uid: str
    storage_class: str  # "" when it names none
    volume_name: str  # spec.volumeName: the PV it is (or is being) bound to, "" when none
    request: int  # spec.resources.requests.storage in bytes
    access_modes: frozenset[str]
    volume_mode: str
    attributes_class: str  # spec.volumeAttributesClassName
    selector: CompiledLabelSelector | None  # spec.selector; None: any PV's labels
    phase: str
    deleting: bool
    selected_node: str | None  # the volume.kubernetes.io/selected-node annotation, when set
    bind_completed: bool  # pv.kubernetes.io/bind-completed: the PV controller finished binding
    controller_uid: str  # the controlling owner's uid (a pod, for an ephemeral volume's claim)
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")

    @property
    def fully_bound(self) -> bool:
        """kube-scheduler's isPVCFullyBound: a volume named and the binding completed."""
        return bool(self.volume_name) and self.bind_completed


def parse_pvc(obj: Mapping[str, Any]) -> PersistentVolumeClaim:
    ns, name, meta = _object_meta(obj, True)
    annotations = str_map(meta, "annotations", "metadata.annotations")
    spec = mapping(obj, "spec", "spec")
    status = mapping(obj, "status", "status")
    requests = mapping(mapping(spec, "resources", "spec.resources"), "requests", "spec.resources.requests")
    selector = None
    if spec.get("selector") is not None:
        try:
            selector = compile_label_selector(spec.get("selector"), "spec.selector")
        except SelectorError as exc:
            where, _, problem = str(exc).partition(": ")
            raise ObjectError(where, problem) from None
    return PersistentVolumeClaim(
        namespace=ns,
        name=name,
        uid=parse_str(meta.get("uid"), "metadata.uid", f"{ns}/{name}"),
        storage_class=_class_of(annotations, spec, "spec.storageClassName"),
        volume_name=parse_str(spec.get("volumeName"), "spec.volumeName"),
        request=_bytes(requests.get("storage"), "spec.resources.requests.storage"),
        access_modes=_access_modes(spec, "spec.accessModes"),
        volume_mode=parse_str(spec.get("volumeMode"), "spec.volumeMode", "Filesystem"),
        attributes_class=parse_str(spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"),
        selector=selector,
        phase=parse_str(status.get("phase"), "status.phase", "Pending"),
        deleting=parse_time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp") > 0,
        selected_node=annotations.get(SELECTED_NODE),
        bind_completed=BIND_COMPLETED in annotations,
        controller_uid=_controller_uid(meta),
    )


@dataclass(frozen=True, slots=True)
class CsiSource:
    driver: str
    handle: str


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    uid: str
    labels: dict[str, str]
    storage_class: str
    capacity: int  # spec.capacity.storage in bytes
    access_modes: frozenset[str]
    volume_mode: str
    attributes_class: str
    claim_ref: ClaimRef | None
    phase: str
    deleting: bool
    # spec.nodeAffinity.required.nodeSelectorTerms (None: no required affinity, any node), and
    # a text naming them, under which their node mask is cached per node set.
    node_terms: tuple[Mapping[str, Any], ...] | None
    affinity_key: str
    csi: CsiSource | None
    bound_by_controller: bool


def _node_terms(spec: Mapping[str, Any]) -> tuple[tuple[Mapping[str, Any], ...] | None, str]:
    affinity = mapping(spec, "nodeAffinity", "spec.nodeAffinity")
    if affinity.get("required") is None:
        return None, ""
    required = mapping(affinity, "required", "spec.nodeAffinity.required")
    terms = tuple(mappings(required, "nodeSelectorTerms", "spec.nodeAffinity.required.nodeSelectorTerms"))
    return terms, _json_key(terms)


def _json_key(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # what orjson refuses (an integer past 64 bits)
        return repr(value)


def parse_pv(obj: Mapping[str, Any]) -> PersistentVolume:
    _, name, meta = _object_meta(obj, False)
    annotations = str_map(meta, "annotations", "metadata.annotations")
    spec = mapping(obj, "spec", "spec")
    status = mapping(obj, "status", "status")
    claim_ref = None
    if spec.get("claimRef") is not None:
        ref = mapping(spec, "claimRef", "spec.claimRef")
        claim_ref = ClaimRef(
            parse_str(ref.get("namespace"), "spec.claimRef.namespace", "default"),
            parse_str(ref.get("name"), "spec.claimRef.name"),
            parse_str(ref.get("uid"), "spec.claimRef.uid"),
        )
    csi = None
    if spec.get("csi") is not None:
        source = mapping(spec, "csi", "spec.csi")
        csi = CsiSource(
            parse_str(source.get("driver"), "spec.csi.driver"),
            parse_str(source.get("volumeHandle"), "spec.csi.volumeHandle"),
        )
    terms, affinity_key = _node_terms(spec)
    return PersistentVolume(
        name=name,
        uid=parse_str(meta.get("uid"), "metadata.uid", name),
        labels=str_map(meta, "labels", "metadata.labels"),
        storage_class=_class_of(annotations, spec, "spec.storageClassName"),
        capacity=_bytes(mapping(spec, "capacity", "spec.capacity").get("storage"), "spec.capacity.storage"),
        access_modes=_access_modes(spec, "spec.accessModes"),
        volume_mode=parse_str(spec.get("volumeMode"), "spec.volumeMode", "Filesystem"),
        attributes_class=parse_str(spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"),
        claim_ref=claim_ref,
        phase=parse_str(status.get("phase"), "status.phase", "Pending"),
        deleting=parse_time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp") > 0,
        node_terms=terms,
        affinity_key=affinity_key,
        csi=csi,
        bound_by_controller=BOUND_BY_CONTROLLER in annotations,
    )


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str
    binding_mode: str  # Immediate (the API server's default) or WaitForFirstConsumer
    # allowedTopologies as node selector terms (``key In values`` per expression); empty: any node
    allowed_topologies: tuple[Mapping[str, Any], ...]
    allowed_topologies_key: str  # a text naming them, under which their node mask is cached
    csi_driver: str  # parameters[csi.storage.k8s.io/csi-driver-name], else the provisioner

    @property
    def delayed(self) -> bool:
        return self.binding_mode == WAIT_FOR_FIRST_CONSUMER

    @property
    def provisions(self) -> bool:
        """Whether claims of the class can be provisioned at all (checkVolumeProvisions)."""
        return self.provisioner not in ("", NO_PROVISIONER)


def parse_storage_class(obj: Mapping[str, Any]) -> StorageClass:
    _, name, _meta = _object_meta(obj, False)
    mode = parse_str(obj.get("volumeBindingMode"), "volumeBindingMode", IMMEDIATE)
    if mode not in (IMMEDIATE, WAIT_FOR_FIRST_CONSUMER):
        expected = f"expected {IMMEDIATE} or {WAIT_FOR_FIRST_CONSUMER}"
        raise ObjectError("volumeBindingMode", f"{expected}, got {mode!r}")
    terms: list[Mapping[str, Any]] = []
    for i, term in enumerate(mappings(obj, "allowedTopologies", "allowedTopologies")):
        at = f"allowedTopologies[{i}].matchLabelExpressions"
        exprs = []
        for j, expr in enumerate(mappings(term, "matchLabelExpressions", at)):
            key = parse_str(expr.get("key"), f"{at}[{j}].key")
            raw = list_of(expr, "values", f"{at}[{j}].values")
            values = [parse_str(v, f"{at}[{j}].values[{k}]") for k, v in enumerate(raw)]
            exprs.append({"key": key, "operator": "In", "values": values})
        # An empty term selects no node (MatchTopologySelectorTerms); an empty node selector
        # term matches none either.
        terms.append({"matchExpressions": exprs})
    provisioner = parse_str(obj.get("provisioner"), "provisioner")
    parameters = str_map(obj, "parameters", "parameters")
    return StorageClass(
        name=name,
        provisioner=provisioner,
        binding_mode=mode,
        allowed_topologies=tuple(terms),
        allowed_topologies_key=_json_key(terms),
        csi_driver=parameters.get(CSI_DRIVER_PARAMETER, provisioner),
    )


@dataclass(frozen=True, slots=True)
class CSINode:
    name: str
    # Per driver on the node: its attach limit (spec.drivers[].allocatable.count), None when unset.
    drivers: dict[str, int | None]


def parse_csi_node(obj: Mapping[str, Any]) -> CSINode:
    _, name, _meta = _object_meta(obj, False)
    drivers: dict[str, int | None] = {}
    for i, d in enumerate(mappings(mapping(obj, "spec", "spec"), "drivers", "spec.drivers")):
        driver = parse_str(d.get("name"), f"spec.drivers[{i}].name")
        count = mapping(d, "allocatable", f"spec.drivers[{i}].allocatable").get("count")
        at = f"spec.drivers[{i}].allocatable.count"
        drivers[driver] = None if count is None else parse_count(count, at)
    return CSINode(name=name, drivers=drivers)


# --------------------------------------------------------------------------------------------
# The catalog


@dataclass(frozen=True, slots=True)
class VolumePlan:
    """What binding a pod writes before its Binding (kube-scheduler's PreBind): each static PV
    bound to its claim (``spec.claimRef``), each claim to provision given the node
    (``volume.kubernetes.io/selected-node``). Then it waits until the PV controller has bound
    every claim of the pod."""

    node: str
    static: tuple[tuple[str, str, str], ...]  # (PV name, claim key, claim uid)
    provision: tuple[str, ...]  # claim keys
    timeout: float = 600.0  # how long to wait for the PV controller (volumebinding.bindTimeoutSeconds)

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "static": {pv: claim for pv, claim, _uid in self.static},
            "provision": list(self.provision),
        }


class VolumeCatalog:
    """The storage objects of a snapshot by key, and the PVs of each class: what a session
    looks claims and volumes up in. Immutable once built; a session keeps its own assumptions
    (PVs given to claims, nodes chosen for provisioning) beside it."""

    __slots__ = ("pvcs", "pvs", "classes", "csi_nodes", "ignored_provisioners", "_by_class", "_memo")

    def __init__(
        self,
        pvcs: Iterable[PersistentVolumeClaim] = (),
        pvs: Iterable[PersistentVolume] = (),
        classes: Iterable[StorageClass] = (),
        csi_nodes: Iterable[CSINode] = (),
        ignored_provisioners: Iterable[str] = (),
    ) -> None:
        self.pvcs = {c.key: c for c in pvcs}
        self.pvs = {v.name: v for v in sorted(pvs, key=lambda v: v.name)}
        self.classes = {c.name: c for c in classes}
        self.csi_nodes = {n.name: n for n in csi_nodes}
        self.ignored_provisioners = DEFAULT_IGNORED_PROVISIONERS | frozenset(ignored_provisioners)
        self._by_class: dict[str, list[PersistentVolume]] | None = None
        self._memo: dict[Any, Any] = {}

    def memo(self, key: Any, build: Callable[[], Any]) -> Any:
        """``build()`` once per catalog (what readers derive from these objects alone)."""
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = build()
            return value

    def pvs_of_class(self, name: str) -> list[PersistentVolume]:
        """The PVs of a storage class in name order (the assume cache's ListPVs)."""
        if self._by_class is None:
            by_class: dict[str, list[PersistentVolume]] = {}
            for pv in self.pvs.values():
                by_class.setdefault(pv.storage_class, []).append(pv)
            self._by_class = by_class
        return self._by_class.get(name, [])

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.pvcs.get(f"{namespace}/{name}")
