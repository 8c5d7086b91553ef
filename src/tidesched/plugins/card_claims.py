"""capacity-card's DRA side: the cards a pod asks for and holds through ResourceClaims
(docs/dra.md, "How claims are charged to queues").

A device's card model comes from its attributes (:mod:`tidesched.model.dra.cards`); the
plugin arguments ``draCardModelAttributes`` and ``draCardProfileAttributes`` say which.

* **What a pod asks**, before its claims are allocated: per request of each claim (the claim,
  or its template while kube-controller-manager has not made it yet), the card models of the
  devices the request's class and selectors select anywhere in the cluster, and a count —
  ``count`` (ExactCount), the most such devices one node has (``All``), the largest of the
  alternatives (``firstAvailable``): admission never counts less than allocation may take.
  Requests with ``adminAccess`` take no device from anybody and ask for no card. A claim
  already allocated asks for the devices it holds. One model selected (a selector naming a
  product, a class of one model): that model is charged. Several: the request takes any of
  them, like ``volcano.sh/card.name: "A|B"`` (CARD-4), and is charged for the model it gets.
  The pod's requests together are one card request, of the models every request can take;
  requests with no model in common are refused with an event, as CARD-4 refuses a mix.
  ``volcano.sh/card.name`` on the pod narrows and orders those models.
* **What a pod holds**: the devices its allocated claims hold (in the cluster, or allocated in
  this session), by model. A claim that several pods of one queue use is charged to that
  queue once (:class:`Held` carries the claim, the ledger counts references per queue).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tidesched.model.cards import (
    CARD_NAME_ANNOTATION,
    MILLI,
    CardSlot,
    PodCardRequest,
    WHOLE,
    group_label,
    split_card_names,
)
from tidesched.model.dra.cards import (
    DEFAULT_MODEL_ATTRIBUTES,
    DEFAULT_PROFILE_ATTRIBUTES,
    DRA_CARD_RESOURCE,
    CardNaming,
    DeviceCards,
)
from tidesched.model.dra.objects import ALL, ClaimSpec

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.dra.ledger import ClaimLedger
    from tidesched.model.infos import TaskInfo

MODEL_ATTRIBUTES_ARGUMENT = "draCardModelAttributes"
PROFILE_ATTRIBUTES_ARGUMENT = "draCardProfileAttributes"


def card_naming(arguments: "Arguments") -> CardNaming:
    """The plugin arguments naming the device attributes (lists of qualified names)."""
    out = []
    for key, default in ((MODEL_ATTRIBUTES_ARGUMENT, DEFAULT_MODEL_ATTRIBUTES),
                         (PROFILE_ATTRIBUTES_ARGUMENT, DEFAULT_PROFILE_ATTRIBUTES)):
        names = [x.strip() for x in arguments.get_str_list(key, default)]
        if not all(_qualified(x) for x in names):
            raise arguments.bad_value(key, "a list of qualified device attribute names (domain/name)", names)
        out.append(tuple(names))
    return CardNaming(out[0], out[1])


def _qualified(name: str) -> bool:
    domain, sep, ident = name.partition("/")
    return bool(domain and sep and ident) and "/" not in ident


@dataclass(frozen=True, slots=True)
class Held:
    """Cards (milli-units) of one model that one claim holds."""

    claim: str  # namespace/name
    model: str
    cards: float


class ClaimCards:
    """One session's reading of DRA devices and claims in card models."""

    def __init__(self, ledger: "ClaimLedger", cards: DeviceCards) -> None:
        self.ledger = ledger
        self.cards = cards
        self._requests: dict[str, PodCardRequest | None] = {}

    @classmethod
    def open(cls, ssn: "Session", naming: CardNaming) -> "ClaimCards | None":
        """None when the session has no DRA device that is a card."""
        ledger = ssn.table.dra
        if ledger is None or not len(ledger.index):
            return None
        cards = DeviceCards.of(ledger.index, naming)
        return cls(ledger, cards) if cards.models or cards.problems else None

    # -- the cluster's cards --------------------------------------------------------------

    def node_slots(self, names: list[str]) -> dict[str, list[CardSlot]]:
        """The cards each node offers through DRA, as capacity-card's card catalog keeps them."""
        counts = self.cards.per_node()
        out: dict[str, list[CardSlot]] = {}
        for model, rows in self.cards.offers().items():
            for row in np.flatnonzero(rows).tolist():
                slot = CardSlot(model, (DRA_CARD_RESOURCE,), WHOLE, float(counts[model][row]) * MILLI)
                out.setdefault(names[row], []).append(slot)
        return out

    def in_use(self) -> dict[str, np.ndarray]:
        """Per model, the cards per node row that allocated claims hold now."""
        return self.cards.per_node(self.ledger.use.in_use)

    # -- what a pod asks ------------------------------------------------------------------

    def _spec(self, task: "TaskInfo", claim_name: str, template: str) -> tuple[str, ClaimSpec | None]:
        objects = self.ledger.objects
        ns = task.namespace
        if claim_name:
            claim = objects.claims.get(f"{ns}/{claim_name}")
            return f"{ns}/{claim_name}", claim.spec if claim is not None else None
        made = objects.templates.get(f"{ns}/{template}") if template else None
        return "", made.spec if made is not None else None

    def _asks(self, spec: ClaimSpec) -> list[tuple[tuple[str, ...], float]]:
        """Per request that asks for cards: the models it may take, how many cards (a share of
        a device through consumable capacity: the most of a device it may take)."""
        index, cards = self.ledger.index, self.cards
        out = []
        for req in spec.requests:
            models: set[str] = set()
            count = 0.0
            for sub in req.alternatives:
                if sub.admin_access or sub.class_name not in index.classes:
                    continue
                match, _err = index.matching(sub)
                found = cards.models_among(match)
                if not found:
                    continue
                models.update(found)
                n = cards.most_on_a_node(match) if sub.mode == ALL else sub.count
                count = max(count, n * cards.request_share(sub, match))
            if models and count:
                out.append((tuple(sorted(models)), count))
        return out

    def request(self, task: "TaskInfo") -> PodCardRequest | None:
        """The cards the pod's claims ask for (allocated claims: what they hold), None when
        they ask for no card. Read once per session and pod."""
        if task.uid in self._requests:
            return self._requests[task.uid]
        asks: list[tuple[tuple[str, ...], float]] = []
        for pc in task.pod.claims:
            key, spec = self._spec(task, pc.claim_name, pc.template_name)
            devices = self.ledger.claim_devices(key) if key else None
            if devices is not None:
                for model, n in self._by_model(devices).items():
                    asks.append(((model,), n))
            elif spec is not None:
                asks.extend(self._asks(spec))
        self._requests[task.uid] = out = _combine(task, asks)
        return out

    def merge(self, task: "TaskInfo", base: PodCardRequest) -> PodCardRequest:
        """The pod's card request when it has claims: the claims' cards, narrowed and ordered
        by ``volcano.sh/card.name`` when the pod has it; refused when it asks for cards through
        both resources and claims."""
        dra = self.request(task)
        if dra is None:
            return base
        if base.count > 0:
            return PodCardRequest(
                named=True, label=base.label,
                error=f"pod asks for cards both through resources ({', '.join(base.resources)}) and "
                      f"ResourceClaims ({dra.label}); capacity-card charges one card request per pod",
            )
        raw = task.pod.meta.annotations.get(CARD_NAME_ANNOTATION)
        if raw is None or dra.error:
            return dra
        names, problem = split_card_names(raw)
        if problem:
            return PodCardRequest(named=True, error=problem, label=str(raw))
        models = tuple(m for m in names if m in dra.models)
        if not models:
            return PodCardRequest(
                named=True, label=group_label(names),
                error=f"the pod's ResourceClaims select card model {dra.label}, which {CARD_NAME_ANNOTATION} "
                      f"({raw}) does not name",
            )
        return PodCardRequest(models=models, resources=dra.resources, count=dra.count, named=True,
                              label=group_label(models))

    # -- what a pod holds -----------------------------------------------------------------

    def held(self, task: "TaskInfo") -> tuple[Held, ...]:
        """The cards the pod's allocated claims hold, per claim and model."""
        out: list[Held] = []
        seen: set[str] = set()
        for pc in task.pod.claims:
            if not pc.claim_name:
                continue
            key = f"{task.namespace}/{pc.claim_name}"
            devices = self.ledger.claim_devices(key)
            if key in seen or devices is None:
                continue
            seen.add(key)
            for model, n in sorted(self._by_model(devices).items()):
                out.append(Held(key, model, round(n * MILLI, 3)))
        return tuple(out)

    def _by_model(self, devices: Iterable[tuple[int, Any]]) -> dict[str, float]:
        """Cards by model of held devices: a whole device 1, a share its part of the device."""
        out: dict[str, float] = {}
        for i, consumed in devices:
            model = self.cards.model(i)
            if model:
                out[model] = out.get(model, 0.0) + self.cards.share(i, consumed)
        return out


def _combine(task: "TaskInfo", asks: list[tuple[tuple[str, ...], float]]) -> PodCardRequest | None:
    if not asks:
        return None
    common = set(asks[0][0])
    for models, _n in asks[1:]:
        common &= set(models)
    count = round(sum(n for _m, n in asks) * MILLI, 3)
    if not common:
        every = sorted({m for models, _n in asks for m in models})
        return PodCardRequest(
            named=True, count=count, label=group_label(every),
            error=f"the ResourceClaims of pod {task.key} ask for cards of models no one card model satisfies "
                  f"({', '.join(every)}); capacity-card charges one card model per pod",
        )
    models = tuple(sorted(common))
    return PodCardRequest(models=models, resources=(DRA_CARD_RESOURCE,), count=count, named=len(models) == 1,
                          label=group_label(models))


def slice_problems(cards: ClaimCards | None) -> Mapping[str, list[str]]:
    """Problems with devices' card attributes, by ResourceSlice."""
    out: dict[str, list[str]] = {}
    if cards is not None:
        for name, msg in cards.cards.problems:
            out.setdefault(name, []).append(msg)
    return out

