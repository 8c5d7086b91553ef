"""Accelerator card naming: the one place that decides what a card model is called (CARD-1, DEC-10).

Everything that needs a card model name — node discovery, pod and job requests, queue quotas —
goes through this module, so the scheduler, the CLI and the simulator can never disagree on
names. Nothing here raises on bad input: malformed labels or annotations become *problems*
(strings the caller turns into Warning events) and the affected cards or entries are left out,
which is the conservative choice (a card without a trustworthy name is never handed out).

Node discovery (CARD-1), from a node's labels and ``status.allocatable``:

* Whole cards: the label ``<vendor-domain>/<type>.product`` names the model (e.g.
  ``nvidia.com/gpu.product: NVIDIA-H200``; ``huawei.com/npu.product: Ascend-910B``), with
  ``<vendor-domain>/<type>.count`` and ``<vendor-domain>/<type>.memory`` (MiB) beside it. The
  whole-card count is the node's allocatable of every resource under that vendor domain that
  is not a MIG or MPS resource (``nvidia.com/gpu``, ``huawei.com/Ascend910``, ...).
  Labels whose type starts with ``mig-`` (``nvidia.com/mig-1g.10gb.product``, written by GPU
  feature discovery on MIG nodes) describe MIG slices, not a whole-card product (DEC-10).
* MPS: allocatable ``nvidia.com/gpu.shared`` with label ``nvidia.com/gpu.replicas`` gives
  slices named ``<product>/mps-<memGi>g*1/<replicas>``, memGi = card memory rounded to whole GiB.
* MIG: allocatable ``nvidia.com/mig-<profile>`` gives slices ``<product>/mig-<profile>-mixed``.
* A node may offer whole cards and slices at once (7 whole H200 + MIG slices of the 8th).
* vGPU devices (Volcano deviceshare, ``model.vgpu``) are whole cards of the product, counted in
  card equivalents through ``VGPU_CARD_RESOURCE`` when callers pass ``node_card_scalars``; a
  vGPU pod asks for its compute share (``pod_card_scalars``).
* Non-card scalars (RDMA, hugepages, ...) are ignored.

Requests and quotas (CARD-2..5, DEC-2..6, DEC-11):

* Pod ``volcano.sh/card.name``: one model or ``A|B|C`` alternatives in preference order; the
  count is the pod's request of that model's resource. Alternatives must share one resource
  name. A pod requesting a card resource without the annotation accepts every model of that
  resource (DEC-3).
* Job ``volcano.sh/card.request``: JSON ``{"<model or A|B>": count}``; any bad entry makes the
  whole annotation ignored (DEC-6).
* Queue ``volcano.sh/card.quota``: JSON ``{"<model>": count}``; each entry is validated on its
  own, bad entries are dropped, unparsable JSON means no card quota (DEC-6).

Amounts are in Volcano's internal milli-units (5 cards = 5000, OBJ-1).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from tidesched.model.fields import shown, parse_count, parse_json
from tidesched.model.problems import ObjectError
from tidesched.model.vgpu import VGPU_CARD_RESOURCE

CARD_NAME_ANNOTATION = "volcano.sh/card.name"
CARD_REQUEST_ANNOTATION = "volcano.sh/card.request"
CARD_QUOTA_ANNOTATION = "volcano.sh/card.quota"

ALTERNATIVE_SEPARATOR = "|"
MPS_RESOURCE = "nvidia.com/gpu.shared"
MPS_REPLICAS_LABEL = "nvidia.com/gpu.replicas"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
NVIDIA_DOMAIN = "nvidia.com"
MILLI = 1000.0

WHOLE = "whole"
MIG = "mig"
MPS = "mps"

# <vendor-domain>/<type>.product; the type may hold dots (MIG profiles), filtered below.
_PRODUCT_LABEL = re.compile(
    r"^(?P<domain>[A-Za-z0-9][A-Za-z0-9.-]*)/(?P<type>[A-Za-z0-9][A-Za-z0-9._-]*)\.product$"
)
# A model name as it may appear in a label value or an annotation: no separators or spaces.
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._*/-]*$")
# Card resources known without any node label, so that quota cannot be bypassed on a node
# whose operator forgot the product label (DEC-3).
_WELL_KNOWN_CARD_RESOURCE = re.compile(
    r"^(nvidia\.com/(gpu|gpu\.shared|mig-.+)|amd\.com/gpu|huawei\.com/Ascend.+|[A-Za-z0-9.-]+/(gpu|npu))$"
)


def is_product_label(key: str) -> bool:
    """``<vendor-domain>/<type>.product`` naming a whole-card product (not a MIG slice label)."""
    m = _PRODUCT_LABEL.match(key)
    return m is not None and not m.group("type").startswith("mig-")


def is_model_name(value: str) -> bool:
    """A card model name as a label or an annotation may carry it: no spaces, no ``|``."""
    return bool(_MODEL_NAME.match(value)) and ALTERNATIVE_SEPARATOR not in value


def model_product(model: str) -> str:
    """The product a model is a card or slice of: ``NVIDIA-H200/mig-1g.18gb-mixed`` → ``NVIDIA-H200``."""
    return model.split("/", 1)[0]


def is_mig_resource(name: str) -> bool:
    return name.startswith(MIG_RESOURCE_PREFIX)


def is_mps_resource(name: str) -> bool:
    return name == MPS_RESOURCE


def resource_domain(name: str) -> str:
    """``nvidia.com/gpu`` → ``nvidia.com``; a name without a domain → ""."""
    head, sep, _ = name.partition("/")
    return head if sep else ""


def mps_model_name(product: str, memory_mib: int, replicas: int) -> str:
    """``<product>/mps-<memGi>g*1/<replicas>``; memGi rounds half up, as Go's math.Round."""
    mem_gi = math.floor(memory_mib / 1024 + 0.5)
    return f"{product}/mps-{mem_gi}g*1/{replicas}"


def mig_model_name(product: str, profile: str) -> str:
    return f"{product}/mig-{profile}-mixed"


def format_count(milli: float) -> str:
    """Milli-units as a natural count: 2000 → "2", 500 → "0.5"."""
    value = milli / MILLI
    if value == int(value):
        return str(int(value))
    return f"{value:g}"


# --------------------------------------------------------------------------------------------
# Node discovery


@dataclass(frozen=True, slots=True)
class CardSlot:
    """One card model a node offers: its name, the resource(s) that carry it, how many."""

    model: str
    resources: tuple[str, ...]
    kind: str  # WHOLE | MIG | MPS
    count: float  # milli-units


@dataclass(frozen=True, slots=True)
class NodeCards:
    """What one node offers, by card model."""

    node: str
    product: str = ""
    vendor_domain: str = ""
    card_type: str = ""
    memory_mib: int | None = None
    label_count: int | None = None
    slots: tuple[CardSlot, ...] = ()
    # Card resources present on the node that no model could be given to (missing or bad
    # labels): such cards are never handed out by capacity-card.
    unnamed_resources: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(s.model for s in self.slots)

    def slot(self, model: str) -> CardSlot | None:
        for s in self.slots:
            if s.model == model:
                return s
        return None

    def model_for_resource(self, resource: str) -> str | None:
        for s in self.slots:
            if resource in s.resources:
                return s.model
        return None


def _parse_int_label(labels: Mapping[str, str], key: str, problems: list[str], node: str) -> int | None:
    raw = labels.get(key)
    if raw is None:
        return None
    text = str(raw).strip()
    if not re.fullmatch(r"[0-9]+", text):
        problems.append(f"node {node}: label {key}={raw!r} is not a non-negative integer; ignored")
        return None
    return int(text)


def _pick_product(node: str, labels: Mapping[str, str], problems: list[str]) -> tuple[str, str, str]:
    """(product, vendor domain, card type) from the product labels, or ("", "", "")."""
    found: list[tuple[str, str, str, str]] = []  # (domain, type, key, value)
    for key in sorted(labels):
        m = _PRODUCT_LABEL.match(key)
        if m is None:
            continue
        ctype = m.group("type")
        if ctype.startswith("mig-"):
            continue  # DEC-10: MIG slice descriptions, not a whole-card product
        found.append((m.group("domain"), ctype, key, str(labels[key]).strip()))
    if not found:
        return "", "", ""
    if len(found) > 1:
        # One card family per node; prefer NVIDIA's standard label (DEC-10), else the first.
        preferred = [f for f in found if f[2] == f"{NVIDIA_DOMAIN}/gpu.product"] or found[:1]
        chosen = preferred[0]
        others = ", ".join(f[2] for f in found if f is not chosen)
        problems.append(f"node {node}: several card product labels; using {chosen[2]}, ignoring {others}")
    else:
        chosen = found[0]
    domain, ctype, key, value = chosen
    if not value or not _MODEL_NAME.match(value) or ALTERNATIVE_SEPARATOR in value:
        problems.append(
            f"node {node}: label {key}={value!r} is not a valid card model name; its cards are not used"
        )
        return "", domain, ctype
    return value, domain, ctype


def discover_node_cards(node: str, labels: Mapping[str, str], allocatable: Mapping[str, float]) -> NodeCards:
    """The card models a node offers. ``allocatable`` holds scalar resources in milli-units
    (``Resource.scalars``). Never raises; problems are reported in the result."""
    problems: list[str] = []
    try:
        product, domain, ctype = _pick_product(node, labels, problems)
        prefix = f"{domain}/{ctype}" if domain else ""
        memory = _parse_int_label(labels, f"{prefix}.memory", problems, node) if prefix else None
        count = _parse_int_label(labels, f"{prefix}.count", problems, node) if prefix else None

        slots: list[CardSlot] = []
        unnamed: list[str] = []
        whole_resources: list[str] = []
        whole_count = 0.0
        for res in sorted(allocatable):
            amount = float(allocatable[res])
            if not math.isfinite(amount) or amount < 0:
                continue
            # A zero amount still names a model (its cards may be failed or re-split), but
            # an unnamable zero (a CPU node advertising nvidia.com/gpu: 0) is not a problem.
            unnamed_problem = ""
            if is_mps_resource(res):
                replicas = _parse_int_label(labels, MPS_REPLICAS_LABEL, problems, node)
                if not product:
                    unnamed_problem = f"{res} without a card product label; MPS slices are not used"
                elif replicas is None or replicas <= 0:
                    unnamed_problem = f"{res} needs label {MPS_REPLICAS_LABEL} (a positive integer); MPS slices are not used"
                elif memory is None:
                    unnamed_problem = f"{res} needs label {prefix}.memory (MiB); MPS slices are not used"
                else:
                    slots.append(CardSlot(mps_model_name(product, memory, replicas), (res,), MPS, amount))
            elif is_mig_resource(res):
                profile = res[len(MIG_RESOURCE_PREFIX) :]
                if not product:
                    unnamed_problem = f"{res} without a card product label; MIG slices are not used"
                elif not profile or not _MODEL_NAME.match(profile):
                    unnamed_problem = f"MIG resource {res} has an invalid profile; not used"
                else:
                    slots.append(CardSlot(mig_model_name(product, profile), (res,), MIG, amount))
            elif (domain and resource_domain(res) == domain) or (res == VGPU_CARD_RESOURCE and product):
                # vGPU devices (node_card_scalars) are cards of the node's product, in equivalents.
                whole_resources.append(res)
                whole_count += amount
            elif _WELL_KNOWN_CARD_RESOURCE.match(res):
                unnamed_problem = f"card resource {res} has no <vendor-domain>/<type>.product label; not used"
            if unnamed_problem and amount > 0:
                unnamed.append(res)
                problems.append(f"node {node}: {unnamed_problem}")
        if whole_resources:
            if product:
                slots.insert(0, CardSlot(product, tuple(whole_resources), WHOLE, whole_count))
            elif whole_count > 0:
                unnamed.extend(whole_resources)
        elif product and not slots:
            problems.append(
                f"node {node}: card model {product} is labelled but the node has no {domain} resource"
            )
        return NodeCards(
            node=node,
            product=product,
            vendor_domain=domain,
            card_type=ctype,
            memory_mib=memory,
            label_count=count,
            slots=tuple(slots),
            unnamed_resources=tuple(sorted(set(unnamed))),
            problems=tuple(problems),
        )
    except Exception as exc:  # noqa: BLE001  # pragma: no cover - discovery must never stop a session
        return NodeCards(node=node, problems=(f"node {node}: card discovery failed: {exc}",))


@dataclass(slots=True)
class CardCatalog:
    """The card models of a cluster (built from every node the snapshot holds)."""

    nodes: dict[str, NodeCards] = field(default_factory=dict)
    model_resources: dict[str, frozenset[str]] = field(default_factory=dict)
    models_by_resource: dict[str, tuple[str, ...]] = field(default_factory=dict)
    vendor_domains: frozenset[str] = frozenset()
    problems: list[tuple[str, str]] = field(default_factory=list)  # (node, message)

    @classmethod
    def build(
        cls,
        nodes: Iterable[tuple[str, Mapping[str, str], Mapping[str, float]]],
        extra_slots: Mapping[str, Sequence[CardSlot]] | None = None,
    ) -> "CardCatalog":
        """The catalog of these nodes; ``extra_slots``: cards nodes offer besides their
        resources, by node name (DRA devices, ``model.dra.cards``)."""
        cat = cls()
        resources: dict[str, set[str]] = {}
        domains: set[str] = set()
        for name, labels, scalars in nodes:
            nc = discover_node_cards(name, labels, scalars)
            more = extra_slots.get(name) if extra_slots else None
            if more:
                nc = replace(nc, slots=nc.slots + tuple(more))
            cat.nodes[name] = nc
            for p in nc.problems:
                cat.problems.append((name, p))
            if nc.vendor_domain:
                domains.add(nc.vendor_domain)
            for s in nc.slots:
                resources.setdefault(s.model, set()).update(s.resources)
        # A model offered through the device plugin and through DRA on other nodes is one model.
        extra = {r for slots in (extra_slots or {}).values() for s in slots for r in s.resources}
        for model, res in resources.items():
            plugin = {r for r in res if r not in extra}
            if len(plugin) > 1 and any(is_mig_resource(r) or is_mps_resource(r) for r in plugin):
                # A model name reused for different kinds of resource (mislabelled nodes).
                cat.problems.append(
                    ("", f"card model {model} is offered through different resources {sorted(res)}")
                )
        cat.model_resources = {m: frozenset(r) for m, r in sorted(resources.items())}
        by_res: dict[str, list[str]] = {}
        for m, res in cat.model_resources.items():
            for r in res:
                by_res.setdefault(r, []).append(m)
        cat.models_by_resource = {r: tuple(sorted(ms)) for r, ms in sorted(by_res.items())}
        cat.vendor_domains = frozenset(domains)
        return cat

    @property
    def models(self) -> list[str]:
        return list(self.model_resources)

    def knows(self, model: str) -> bool:
        return model in self.model_resources

    def is_card_resource(self, name: str) -> bool:
        """A resource that carries cards: offered as some model, under a vendor domain that
        has card labels, or a well-known card resource name."""
        if name in self.models_by_resource:
            return True
        if is_mig_resource(name) or is_mps_resource(name) or name == VGPU_CARD_RESOURCE:
            return True
        if resource_domain(name) in self.vendor_domains:
            return True
        return bool(_WELL_KNOWN_CARD_RESOURCE.match(name))


# --------------------------------------------------------------------------------------------
# Card names and groups


def split_card_names(value: str) -> tuple[tuple[str, ...], str]:
    """``"A|B|C"`` → (("A", "B", "C"), ""); duplicates are dropped keeping the first, spaces
    around names are ignored. A malformed value gives ((), problem)."""
    if not isinstance(value, str):
        return (), f"card name {value!r} is not a string"
    parts = [p.strip() for p in value.split(ALTERNATIVE_SEPARATOR)]
    if not value.strip() or any(not p for p in parts):
        return (), f"malformed card name {value!r}: empty alternative"
    out: list[str] = []
    for p in parts:
        if not _MODEL_NAME.match(p):
            return (), f"malformed card name {value!r}: {p!r} is not a card model name"
        if p not in out:
            out.append(p)
    return tuple(out), ""


def group_key(models: Iterable[str]) -> tuple[str, ...]:
    """The accounting key of a set of alternatives (order-free)."""
    return tuple(sorted(set(models)))


def group_label(models: Iterable[str]) -> str:
    return ALTERNATIVE_SEPARATOR.join(models)


def different_resources_message(label: str, resources: Iterable[str]) -> str:
    """DEC-11 text for alternatives that do not share one resource name."""
    return f'card alternatives "{label}" use different resources ({", ".join(resources)})'


def unknown_model_message(model: str) -> str:
    return f'unknown card model "{model}"'


def _resources_in_order(models: Iterable[str], catalog: CardCatalog) -> list[str]:
    seen: list[str] = []
    for m in models:
        for r in sorted(catalog.model_resources.get(m, ())):
            if r not in seen:
                seen.append(r)
    return seen


def resolve_alternatives(
    names: tuple[str, ...], catalog: CardCatalog
) -> tuple[tuple[str, ...], tuple[str, ...], str, tuple[str, ...]]:
    """Check alternatives against the catalog.

    Returns (known models in order, their shared resource names, error, warnings). Unknown
    alternatives are dropped with a warning while at least one is known (a model may be
    missing only because its nodes are away); all unknown is an error (DEC-4). Known
    alternatives that do not share one resource set are an error (CARD-4, DEC-11)."""
    known = tuple(n for n in names if catalog.knows(n))
    unknown = [n for n in names if not catalog.knows(n)]
    if not known:
        return (), (), unknown_model_message(unknown[0] if unknown else group_label(names)), ()
    warnings = tuple(
        unknown_model_message(n) + f" in {group_label(names)!r}; alternative ignored" for n in unknown
    )
    resource_sets = {catalog.model_resources[m] for m in known}
    if len(resource_sets) > 1:
        return (
            (),
            (),
            different_resources_message(group_label(names), _resources_in_order(known, catalog)),
            warnings,
        )
    return known, tuple(sorted(next(iter(resource_sets)))), "", warnings


# --------------------------------------------------------------------------------------------
# Pod requests (CARD-3, CARD-4, DEC-2, DEC-3, DEC-4)


@dataclass(frozen=True, slots=True)
class PodCardRequest:
    """What card a pod asks for.

    ``models`` are the acceptable models in preference order (for an unnamed card pod: every
    model of its resource, DEC-3); ``count`` is in milli-units. ``error`` set means the pod
    must not be scheduled (it stays Pending with that reason); ``warnings`` are reported but
    do not stop it."""

    models: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    count: float = 0.0
    named: bool = False
    error: str = ""
    warnings: tuple[str, ...] = ()
    label: str = ""  # how to name the request in messages: "A|B", or the resource (DEC-3)

    @property
    def uses_cards(self) -> bool:
        return bool(self.error) or self.count > 0 or self.named

    @property
    def key(self) -> tuple[str, ...]:
        return group_key(self.models)


NO_CARDS = PodCardRequest()


def pod_card_request(
    annotations: Mapping[str, str], scalars: Mapping[str, float], catalog: CardCatalog
) -> PodCardRequest:
    """The card request of a pod from its ``volcano.sh/card.name`` annotation and its scalar
    requests (milli-units). Never raises."""
    raw = annotations.get(CARD_NAME_ANNOTATION)
    card_scalars = {r: v for r, v in scalars.items() if v > 0 and catalog.is_card_resource(r)}
    if raw is None:
        if not card_scalars:
            return NO_CARDS
        if len(card_scalars) > 1:
            return PodCardRequest(
                named=False,
                error=f"pod requests several card resources ({', '.join(sorted(card_scalars))}); name one model with {CARD_NAME_ANNOTATION}",
                label=", ".join(sorted(card_scalars)),
            )
        ((res, amount),) = card_scalars.items()
        models = catalog.models_by_resource.get(res, ())
        if not models:
            return PodCardRequest(
                resources=(res,), count=amount, error=f'no card model offers resource "{res}"', label=res
            )
        return PodCardRequest(models=models, resources=(res,), count=amount, named=False, label=res)

    names, problem = split_card_names(raw)
    if problem:
        return PodCardRequest(named=True, error=problem, label=str(raw))
    label = group_label(names)
    models, resources, error, warnings = resolve_alternatives(names, catalog)
    if error:
        return PodCardRequest(models=names, named=True, error=error, warnings=warnings, label=label)
    count = sum(scalars.get(r, 0.0) for r in resources)
    if count <= 0:
        others = sorted(set(card_scalars) - set(resources))
        detail = f" (it requests {', '.join(others)})" if others else ""
        return PodCardRequest(
            models=models,
            resources=resources,
            named=True,
            error=f'pod names card model "{label}" but requests no {", ".join(resources)}{detail}',
            warnings=warnings,
            label=label,
        )
    return PodCardRequest(
        models=models, resources=resources, count=count, named=True, warnings=warnings, label=label
    )


# --------------------------------------------------------------------------------------------
# Job requests (CARD-5) and queue quotas (CARD-2)


# A card count above this is a typo, not a cluster (and would lose precision as milli-units).
MAX_CARD_COUNT = 2**31 - 1


def _count_value(value: object) -> float | None:
    """A JSON count → milli-units, or None when it is not a non-negative integer (up to
    MAX_CARD_COUNT), through the one integer reader (model.fields)."""
    try:
        return parse_count(value, "count", bounds=(0, MAX_CARD_COUNT)) * MILLI
    except ObjectError:
        return None


def _load_object(raw: str, what: str) -> tuple[dict | None, str]:
    try:
        data = parse_json(raw, what)
    except ObjectError as exc:
        return None, f"{what} is not valid JSON ({str(exc).removeprefix(what + ': invalid JSON: ')})"
    if not isinstance(data, dict):
        return None, f"{what} must be a JSON object of card name to count, got {type(data).__name__}"
    return data, ""


@dataclass(frozen=True, slots=True)
class JobCardDemand:
    """One entry of a job's card request: acceptable models (in order) and a count."""

    models: tuple[str, ...]
    count: float  # milli-units
    label: str

    @property
    def key(self) -> tuple[str, ...]:
        return group_key(self.models)


@dataclass(frozen=True, slots=True)
class JobCardRequest:
    demands: tuple[JobCardDemand, ...] = ()
    error: str = ""  # the request can never be satisfied (unknown models, mixed resources)
    problems: tuple[str, ...] = ()  # malformed annotation: ignored (DEC-6)
    present: bool = False  # a usable annotation was given


def parse_card_request(raw: str | None, catalog: CardCatalog) -> JobCardRequest:
    """``volcano.sh/card.request`` → demands. A malformed annotation (bad JSON, a bad entry)
    is ignored as a whole with a problem (DEC-6); a well-formed one naming only unknown
    models, or alternatives with different resources, gives an ``error``."""
    if raw is None or not str(raw).strip():
        return JobCardRequest()
    what = f"annotation {CARD_REQUEST_ANNOTATION}"
    data, problem = _load_object(str(raw), what)
    if data is None:
        return JobCardRequest(problems=(problem + "; ignored",))
    demands: list[JobCardDemand] = []
    warnings: list[str] = []
    for name, value in data.items():
        count = _count_value(value)
        names, bad = split_card_names(name)
        if bad or count is None:
            reason = bad or f"count {shown(value)} for {shown(name)} is not a non-negative integer"
            return JobCardRequest(problems=(f"{what}: {reason}; annotation ignored",))
        label = group_label(names)
        models, _resources, error, warns = resolve_alternatives(names, catalog)
        warnings.extend(warns)
        if error:
            return JobCardRequest(error=error, problems=tuple(warnings), present=True)
        if count > 0:
            demands.append(JobCardDemand(models, count, label))
    return JobCardRequest(demands=tuple(demands), problems=tuple(warnings), present=True)


def parse_card_quota(raw: str | None) -> tuple[dict[str, float], list[str]]:
    """``volcano.sh/card.quota`` → {model: milli-units}. Each entry is checked on its own;
    a bad one (not a single model name, negative or non-integer count) is dropped with a
    problem. Unparsable JSON gives no card quota at all (every model 0) and a problem."""
    if raw is None or not str(raw).strip():
        return {}, []
    what = f"annotation {CARD_QUOTA_ANNOTATION}"
    data, problem = _load_object(str(raw), what)
    if data is None:
        return {}, [problem + "; no card quota (every card model 0)"]
    quota: dict[str, float] = {}
    problems: list[str] = []
    for name, value in data.items():
        count = _count_value(value)
        names, bad = split_card_names(name)
        if bad or len(names) != 1:
            problems.append(f"{what}: entry {name!r} is not a single card model name; entry dropped")
            continue
        if count is None:
            problems.append(
                f"{what}: count {shown(value)} for {shown(name)} is not a non-negative integer; entry dropped"
            )
            continue
        quota[names[0]] = quota.get(names[0], 0.0) + count
    return quota, problems
