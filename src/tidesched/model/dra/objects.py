"""The DRA objects as records, parsed once (``resource.k8s.io/v1`` field names).

DeviceClass (selectors, config), ResourceSlice (a pool's devices with their attributes,
capacity, counters, taints and where they are usable), ResourceClaim (requests, constraints,
config; its allocation and who it is reserved for) and ResourceClaimTemplate (the claim spec
the resourceclaim controller copies for each pod). A malformed object raises ObjectError
naming the field, like every other parser (REL-1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tidesched.model.dra.nodes import NodeReach, NodeSelector, parse_node_selector
from tidesched.model.fields import list_of, mapping, mappings, parse_bool, parse_int, parse_str, parse_time
from tidesched.model.problems import ObjectError
from tidesched.model.quantity import QuantityError, parse_quantity

# resource.k8s.io/v1 limits and names kube-scheduler uses.
ALLOCATION_RESULTS_MAX = 32  # AllocationResultsMaxSize
RESERVED_FOR_MAX = 256  # ResourceClaimReservedForMaxSize
FIRST_AVAILABLE_MAX = 8  # FirstAvailableDeviceRequestMaxSize
EXACT_COUNT, ALL = "ExactCount", "All"
FINALIZER = "resource.kubernetes.io/delete-protection"


def _quantity(raw: Any, where: str) -> Decimal:
    try:
        return parse_quantity(raw)
    except (QuantityError, TypeError):
        raise ObjectError(where, f"invalid quantity {raw!r}") from None


def _meta(obj: Mapping[str, Any], namespaced: bool) -> tuple[str, str, str, float]:
    meta = mapping(obj, "metadata", "metadata")
    name = parse_str(meta.get("name"), "metadata.name")
    if not name:
        raise ObjectError("metadata.name", "missing or empty")
    ns = parse_str(meta.get("namespace"), "metadata.namespace", "default") if namespaced else ""
    key = f"{ns}/{name}" if ns else name
    return name, ns, parse_str(meta.get("uid"), "metadata.uid", key), parse_time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp")


def _selectors(obj: Mapping[str, Any], where: str) -> tuple[str, ...]:
    out = []
    for i, sel in enumerate(mappings(obj, "selectors", f"{where}.selectors")):
        cel = mapping(sel, "cel", f"{where}.selectors[{i}].cel")
        expr = parse_str(cel.get("expression"), f"{where}.selectors[{i}].cel.expression")
        if not expr:
            raise ObjectError(f"{where}.selectors[{i}].cel.expression", "missing or empty (only CEL selectors exist)")
        out.append(expr)
    return tuple(out)


# -- DeviceClass --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]
    config: tuple[Mapping[str, Any], ...]  # DeviceClassConfiguration, copied into allocations
    extended_resource_name: str = ""


def parse_device_class(obj: Mapping[str, Any]) -> DeviceClass:
    name, _ns, _uid, _del = _meta(obj, False)
    spec = mapping(obj, "spec", "spec")
    return DeviceClass(
        name=name,
        selectors=_selectors(spec, "spec"),
        config=tuple(mappings(spec, "config", "spec.config")),
        extended_resource_name=parse_str(spec.get("extendedResourceName"), "spec.extendedResourceName"),
    )


# -- ResourceSlice ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Capacity:
    value: Decimal
    policy: Mapping[str, Any] | None  # requestPolicy as written (consumable capacity)


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    # Qualified name -> int, bool, str, or ("version", text); list values -> ("list", ...) (not
    # selectable without DRAListTypeAttributes, which 1.36 leaves off)
    attributes: Mapping[str, Any]
    capacity: Mapping[str, Capacity]
    consumes: tuple[tuple[str, Mapping[str, Decimal]], ...]  # (counter set, counters)
    reach: NodeReach | None  # per-device node selection, else None (the slice's)
    taints: tuple[Mapping[str, Any], ...]
    binds_to_node: bool
    binding_conditions: tuple[str, ...]
    allow_multiple: bool


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    reach: NodeReach  # the slice's node selection (empty with perDeviceNodeSelection)
    per_device: bool
    devices: tuple[Device, ...]
    counters: Mapping[str, Mapping[str, Decimal]]  # sharedCounters: set -> counter -> value


_ATTR_KINDS = {"int": int, "bool": bool, "string": str, "version": str}


def _attribute(raw: Any, where: str) -> Any:
    if not isinstance(raw, Mapping) or len(raw) != 1:
        raise ObjectError(where, "expected exactly one of int, bool, string, version (or their lists)")
    (kind, value), = raw.items()
    if kind in ("ints", "bools", "strings", "versions"):
        return ("list", kind, tuple(value) if isinstance(value, list) else ())
    if kind not in _ATTR_KINDS:
        raise ObjectError(where, f"unknown attribute type {kind!r}")
    if kind == "int":
        return parse_int(value, f"{where}.int")
    if kind == "bool":
        if not isinstance(value, bool):
            raise ObjectError(f"{where}.bool", f"expected a boolean, got {value!r}")
        return value
    if not isinstance(value, str):
        raise ObjectError(f"{where}.{kind}", f"expected a string, got {value!r}")
    return ("version", value) if kind == "version" else value


def _reach(obj: Mapping[str, Any], where: str) -> NodeReach:
    selector: NodeSelector | None = None
    if obj.get("nodeSelector") is not None:
        selector = parse_node_selector(obj.get("nodeSelector"), f"{where}.nodeSelector")
    return NodeReach(
        node_name=parse_str(obj.get("nodeName"), f"{where}.nodeName"),
        all_nodes=bool(parse_bool(obj.get("allNodes"))),
        selector=selector,
    )


def _counters(raw: Any, where: str) -> dict[str, Decimal]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ObjectError(where, "expected a map of counters")
    out = {}
    for name, c in raw.items():
        if not isinstance(c, Mapping):
            raise ObjectError(f"{where}[{name!r}]", "expected {value: quantity}")
        out[str(name)] = _quantity(c.get("value"), f"{where}[{name!r}].value")
    return out


def _device(raw: Mapping[str, Any], where: str, per_device: bool) -> Device:
    name = parse_str(raw.get("name"), f"{where}.name")
    if not name:
        raise ObjectError(f"{where}.name", "missing or empty")
    attrs_raw = raw.get("attributes") or {}
    caps_raw = raw.get("capacity") or {}
    if not isinstance(attrs_raw, Mapping) or not isinstance(caps_raw, Mapping):
        raise ObjectError(where, "attributes and capacity must be maps")
    attributes = {str(k): _attribute(v, f"{where}.attributes[{k!r}]") for k, v in attrs_raw.items()}
    capacity = {}
    for k, v in caps_raw.items():
        at = f"{where}.capacity[{k!r}]"
        if not isinstance(v, Mapping):
            raise ObjectError(at, "expected {value: quantity}")
        policy = v.get("requestPolicy")
        capacity[str(k)] = Capacity(_quantity(v.get("value"), f"{at}.value"), policy if isinstance(policy, Mapping) else None)
    consumes = tuple(
        (parse_str(c.get("counterSet"), f"{where}.consumesCounters[{i}].counterSet"),
         _counters(c.get("counters"), f"{where}.consumesCounters[{i}].counters"))
        for i, c in enumerate(mappings(raw, "consumesCounters", f"{where}.consumesCounters"))
    )
    return Device(
        name=name,
        attributes=attributes,
        capacity=capacity,
        consumes=consumes,
        reach=_reach(raw, where) if per_device else None,
        taints=tuple(mappings(raw, "taints", f"{where}.taints")),
        binds_to_node=bool(parse_bool(raw.get("bindsToNode"))),
        binding_conditions=tuple(str(c) for c in list_of(raw, "bindingConditions", f"{where}.bindingConditions")),
        allow_multiple=bool(parse_bool(raw.get("allowMultipleAllocations"))),
    )


def parse_resource_slice(obj: Mapping[str, Any]) -> ResourceSlice:
    name, _ns, _uid, _del = _meta(obj, False)
    spec = mapping(obj, "spec", "spec")
    pool = mapping(spec, "pool", "spec.pool")
    per_device = bool(parse_bool(spec.get("perDeviceNodeSelection")))
    driver = parse_str(spec.get("driver"), "spec.driver")
    if not driver:
        raise ObjectError("spec.driver", "missing or empty")
    return ResourceSlice(
        name=name,
        driver=driver,
        pool=parse_str(pool.get("name"), "spec.pool.name"),
        generation=parse_int(pool.get("generation"), "spec.pool.generation"),
        slice_count=parse_int(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", 1),
        reach=_reach(spec, "spec"),
        per_device=per_device,
        devices=tuple(_device(d, f"spec.devices[{i}]", per_device) for i, d in enumerate(mappings(spec, "devices", "spec.devices"))),
        counters={
            parse_str(c.get("name"), f"spec.sharedCounters[{i}].name"): _counters(c.get("counters"), f"spec.sharedCounters[{i}].counters")
            for i, c in enumerate(mappings(spec, "sharedCounters", "spec.sharedCounters"))
        },
    )


# -- claims -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SubRequest:
    """An ``exactly`` request or one ``firstAvailable`` alternative."""

    name: str  # "req" or "req/sub"
    class_name: str
    selectors: tuple[str, ...]
    mode: str  # ExactCount or All
    count: int
    admin_access: bool | None
    tolerations: tuple[Mapping[str, Any], ...]
    capacity: Mapping[str, Decimal]  # capacity.requests

    @property
    def simple(self) -> bool:
        """Allocatable by counting free matching devices: a plain count, no admin access, no
        capacity to consume."""
        return self.mode == EXACT_COUNT and not self.admin_access and not self.capacity


@dataclass(frozen=True, slots=True)
class Request:
    name: str
    alternatives: tuple[SubRequest, ...]  # one for ``exactly``
    first_available: bool


@dataclass(frozen=True, slots=True)
class Constraint:
    requests: tuple[str, ...]
    attribute: str
    distinct: bool  # distinctAttribute, else matchAttribute


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[Request, ...]
    constraints: tuple[Constraint, ...]
    config: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool
    share_id: str
    consumed: Mapping[str, Decimal]

    @property
    def id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class Allocation:
    devices: tuple[AllocatedDevice, ...]
    node_selector: NodeSelector | None
    raw: Mapping[str, Any] = field(compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    name: str
    namespace: str
    uid: str
    deleting: bool
    spec: ClaimSpec
    allocation: Allocation | None
    reserved_for: tuple[tuple[str, str, str], ...]  # (resource, name, uid)
    owner_pod: tuple[str, str]  # (name, uid) of the controlling Pod, for claims from templates

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def reserved_for_pod(self, uid: str) -> bool:
        return any(r[0] == "pods" and r[2] == uid for r in self.reserved_for)

    def reservable(self) -> bool:
        return len(self.reserved_for) < RESERVED_FOR_MAX


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    name: str
    namespace: str
    spec: ClaimSpec
    raw_spec: Mapping[str, Any]  # spec.spec, copied into each claim made from the template
    claim_meta: Mapping[str, Any]  # spec.metadata (labels, annotations)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _sub(raw: Mapping[str, Any], name: str, where: str, admin: bool) -> SubRequest:
    mode = parse_str(raw.get("allocationMode"), f"{where}.allocationMode", EXACT_COUNT)
    if mode not in (EXACT_COUNT, ALL):
        raise ObjectError(f"{where}.allocationMode", f"must be ExactCount or All, got {mode!r}")
    count = parse_int(raw.get("count"), f"{where}.count", 1 if mode == EXACT_COUNT else 0)
    if mode == EXACT_COUNT and count < 1:
        raise ObjectError(f"{where}.count", f"must be at least 1, got {count}")
    caps = mapping(raw, "capacity", f"{where}.capacity")
    reqs = mapping(caps, "requests", f"{where}.capacity.requests")
    class_name = parse_str(raw.get("deviceClassName"), f"{where}.deviceClassName")
    if not class_name:
        raise ObjectError(f"{where}.deviceClassName", "missing or empty")
    return SubRequest(
        name=name,
        class_name=class_name,
        selectors=_selectors(raw, where),
        mode=mode,
        count=count,
        admin_access=parse_bool(raw.get("adminAccess")) if admin else None,
        tolerations=tuple(mappings(raw, "tolerations", f"{where}.tolerations")),
        capacity={str(k): _quantity(v, f"{where}.capacity.requests[{k!r}]") for k, v in reqs.items()},
    )


def parse_claim_spec(spec: Mapping[str, Any], where: str = "spec") -> ClaimSpec:
    devices = mapping(spec, "devices", f"{where}.devices")
    requests = []
    for i, r in enumerate(mappings(devices, "requests", f"{where}.devices.requests")):
        at = f"{where}.devices.requests[{i}]"
        name = parse_str(r.get("name"), f"{at}.name")
        exactly, first = r.get("exactly"), r.get("firstAvailable")
        if (exactly is None) == (not first):
            raise ObjectError(at, "must set exactly one of exactly and firstAvailable")
        if exactly is not None:
            if not isinstance(exactly, Mapping):
                raise ObjectError(f"{at}.exactly", "expected a mapping")
            requests.append(Request(name, (_sub(exactly, name, f"{at}.exactly", True),), False))
        else:
            subs = tuple(
                _sub(s, f"{name}/{parse_str(s.get('name'), f'{at}.firstAvailable[{j}].name')}", f"{at}.firstAvailable[{j}]", False)
                for j, s in enumerate(mappings(r, "firstAvailable", f"{at}.firstAvailable"))
            )
            requests.append(Request(name, subs, True))
    constraints = []
    for i, c in enumerate(mappings(devices, "constraints", f"{where}.devices.constraints")):
        at = f"{where}.devices.constraints[{i}]"
        match, distinct = c.get("matchAttribute"), c.get("distinctAttribute")
        if (match is None) == (distinct is None):
            raise ObjectError(at, "must set exactly one of matchAttribute and distinctAttribute")
        constraints.append(Constraint(
            tuple(str(x) for x in list_of(c, "requests", f"{at}.requests")),
            parse_str(match if match is not None else distinct, at), distinct is not None,
        ))
    return ClaimSpec(tuple(requests), tuple(constraints), tuple(mappings(devices, "config", f"{where}.devices.config")))


def _allocation(raw: Any) -> Allocation | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ObjectError("status.allocation", "expected a mapping")
    devices = mapping(raw, "devices", "status.allocation.devices")
    results = []
    for i, r in enumerate(mappings(devices, "results", "status.allocation.devices.results")):
        at = f"status.allocation.devices.results[{i}]"
        consumed = r.get("consumedCapacity") or {}
        results.append(AllocatedDevice(
            request=parse_str(r.get("request"), f"{at}.request"),
            driver=parse_str(r.get("driver"), f"{at}.driver"),
            pool=parse_str(r.get("pool"), f"{at}.pool"),
            device=parse_str(r.get("device"), f"{at}.device"),
            admin_access=bool(parse_bool(r.get("adminAccess"))),
            share_id=parse_str(r.get("shareID"), f"{at}.shareID"),
            consumed={str(k): _quantity(v, f"{at}.consumedCapacity[{k!r}]") for k, v in consumed.items()}
            if isinstance(consumed, Mapping) else {},
        ))
    selector = raw.get("nodeSelector")
    return Allocation(
        tuple(results),
        parse_node_selector(selector, "status.allocation.nodeSelector") if selector is not None else None,
        raw,
    )


def parse_resource_claim(obj: Mapping[str, Any]) -> ResourceClaim:
    name, ns, uid, deletion = _meta(obj, True)
    status = mapping(obj, "status", "status")
    owner = ("", "")
    for ref in mappings(mapping(obj, "metadata", "metadata"), "ownerReferences", "metadata.ownerReferences"):
        if ref.get("controller") is True and ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1":
            owner = (str(ref.get("name") or ""), str(ref.get("uid") or ""))
    reserved = tuple(
        (parse_str(r.get("resource"), f"status.reservedFor[{i}].resource"),
         parse_str(r.get("name"), f"status.reservedFor[{i}].name"),
         parse_str(r.get("uid"), f"status.reservedFor[{i}].uid"))
        for i, r in enumerate(mappings(status, "reservedFor", "status.reservedFor"))
    )
    return ResourceClaim(
        name=name, namespace=ns, uid=uid, deleting=bool(deletion),
        spec=parse_claim_spec(mapping(obj, "spec", "spec")),
        allocation=_allocation(status.get("allocation")),
        reserved_for=reserved,
        owner_pod=owner,
    )


def parse_resource_claim_template(obj: Mapping[str, Any]) -> ResourceClaimTemplate:
    name, ns, _uid, _del = _meta(obj, True)
    spec = mapping(obj, "spec", "spec")
    inner = mapping(spec, "spec", "spec.spec")
    return ResourceClaimTemplate(name, ns, parse_claim_spec(inner, "spec.spec"), inner, mapping(spec, "metadata", "spec.metadata"))


PARSERS = {
    "DeviceClass": parse_device_class,
    "ResourceSlice": parse_resource_slice,
    "ResourceClaim": parse_resource_claim,
    "ResourceClaimTemplate": parse_resource_claim_template,
}
NAMESPACED = frozenset({"ResourceClaim", "ResourceClaimTemplate"})
