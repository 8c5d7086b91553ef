"""The card models of DRA devices, so capacity-card can keep quotas per card model for GPUs
that pods get through ResourceClaims (docs/dra.md, "How claims are charged to queues").

A device is a card of the model its product attribute names:

* **Model**: the first of ``CardNaming.model_attributes`` the device has (a qualified name; in
  its slice the device's own driver domain may be left off, as everywhere in DRA), a string,
  with spaces made dashes as NVIDIA's GPU feature discovery writes the node label
  ``nvidia.com/gpu.product`` ("NVIDIA H200" → ``NVIDIA-H200``). So a card model has one name
  whether its node publishes it through the device plugin or through a DRA driver, and one
  ``volcano.sh/card.quota`` entry covers both. NVIDIA's DRA driver (``gpu.nvidia.com``) writes
  ``productName`` on every GPU, MIG and VFIO device.
* **Slices**: a device that also has one of ``CardNaming.profile_attributes`` (NVIDIA's MIG
  devices carry ``profile: 1g.18gb``) is a slice ``<model>/mig-<profile>-mixed``, the name
  CARD-1 gives the device plugin's MIG slices.
* A device without a product attribute is no card (a NIC, a CPU set) and is charged to no card
  model. A product attribute that makes no model name (empty, or holding ``|``) is reported
  and its device is no card either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from tidesched.model.cards import is_model_name, mig_model_name
from tidesched.model.dra.allocator import lookup_attribute
from tidesched.model.dra.devices import DeviceIndex
from tidesched.model.dra.objects import Device, SubRequest

DEFAULT_MODEL_ATTRIBUTES = ("gpu.nvidia.com/productName",)
DEFAULT_PROFILE_ATTRIBUTES = ("gpu.nvidia.com/profile",)
# The resource name capacity-card's card catalog gives models offered through DRA devices
# (a card catalog keeps the resources each model comes through; DRA devices are no resource).
DRA_CARD_RESOURCE = "resource.k8s.io/devices"


@dataclass(frozen=True, slots=True)
class CardNaming:
    """Which device attributes name a card model and a slice profile."""

    model_attributes: tuple[str, ...] = DEFAULT_MODEL_ATTRIBUTES
    profile_attributes: tuple[str, ...] = DEFAULT_PROFILE_ATTRIBUTES


def _first_string(driver: str, device: Device, names: Sequence[str]) -> str | None:
    for name in names:
        value = lookup_attribute(device.attributes, driver, name)
        if isinstance(value, str):
            return value
    return None


def device_model(driver: str, device: Device, naming: CardNaming, where: str = "") -> tuple[str, str]:
    """(card model, problem) of one device: ("", "") for a device that is no card."""
    product = _first_string(driver, device, naming.model_attributes)
    if product is None:
        return "", ""
    model = "-".join(product.split())
    where = where or f"device {driver}/{device.name}"
    if not is_model_name(model):
        return "", f"{where}: product {product!r} is not a card model name; the device is charged to no card model"
    profile = _first_string(driver, device, naming.profile_attributes)
    if profile is not None:
        profile = profile.strip()
        if not profile or not is_model_name(profile):
            return "", f"{where}: profile {profile!r} is not a slice profile; the device is charged to no card model"
        return mig_model_name(model, profile), ""
    return model, ""


def device_share(device: Device, consumed: Mapping[str, Decimal] | None) -> float:
    """The part of a device that a share consuming ``consumed`` of its capacity takes (consumable
    capacity): its largest part of any one capacity; the whole device (None): 1."""
    if not consumed:
        return 1.0
    caps = device.capacity
    parts = [float(v / caps[k].value) for k, v in consumed.items() if k in caps and caps[k].value > 0]
    return min(1.0, max(parts)) if parts else 1.0


class DeviceCards:
    """The card model of every device of one :class:`DeviceIndex`, as codes into ``models``
    (-1: not a card), worked out once per index and naming."""

    def __init__(self, index: DeviceIndex, naming: CardNaming) -> None:
        self.index = index
        names: list[str] = []
        problems: list[tuple[str, str]] = []  # (ResourceSlice, message)
        for e in index.entries:
            where = f"device {e.driver}/{e.pool}/{e.device.name} (ResourceSlice {e.slice.name})"
            model, problem = device_model(e.driver, e.device, naming, where)
            names.append(model)
            if problem:
                problems.append((e.slice.name, problem))
        self.models: tuple[str, ...] = tuple(sorted({m for m in names if m}))
        code = {m: i for i, m in enumerate(self.models)}
        self.codes = np.array([code.get(m, -1) for m in names], dtype=np.int64)
        self.is_card = self.codes >= 0
        self.problems = tuple(problems)
        self._asks: dict[object, tuple[object, float]] = {}  # request -> (request, share)
        self._totals: dict[str, np.ndarray] | None = None
        self._offers: dict[str, np.ndarray] | None = None

    @classmethod
    def of(cls, index: DeviceIndex, naming: CardNaming) -> "DeviceCards":
        key = ("card-models", naming)
        hit = index.derived.get(key)
        if hit is None:
            hit = index.derived[key] = cls(index, naming)
        return hit

    def model(self, i: int) -> str:
        c = int(self.codes[i])
        return self.models[c] if c >= 0 else ""

    def share(self, i: int, consumed: Mapping[str, Decimal] | None) -> float:
        return device_share(self.index.entries[i].device, consumed)

    def request_share(self, sub: SubRequest, selected: np.ndarray) -> float:
        """The part of a device a request that asks for capacity (consumable capacity) takes,
        at most, among the selected devices: 1 for a request of whole devices."""
        if not sub.capacity:
            return 1.0
        key = (sub.class_name, sub.selectors, tuple(sorted(sub.capacity.items())))
        hit = self._asks.get(key)
        if hit is None:
            most = 0.0
            for i in np.flatnonzero(selected & self.is_card).tolist():
                device = self.index.entries[i].device
                if not device.allow_multiple:
                    most = 1.0  # the request takes the whole of a device that is not shared
                    break
                most = max(most, self.share(i, sub.capacity))
            hit = self._asks[key] = (sub, most or 1.0)
        return hit[1]

    def models_among(self, selected: np.ndarray) -> tuple[str, ...]:
        """The card models of the selected devices, by name."""
        return tuple(self.models[int(c)] for c in np.unique(self.codes[selected & self.is_card]))

    def most_on_a_node(self, selected: np.ndarray) -> int:
        """The most selected cards one node reaches (what ``allocationMode: All`` may take)."""
        counts = self.index.per_node(selected & self.is_card)
        return int(counts.max()) if len(counts) else 0

    def per_node(self, selected: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Per card model, how many of its (selected) devices each node row has; a device that
        several nodes reach (``allNodes``, a node selector) counts on the first of them, so the
        sums are the cluster's cards. Also: which rows reach a model at all (``offers``)."""
        if selected is None and self._totals is not None:
            return self._totals
        index = self.index
        chosen = self.is_card if selected is None else selected & self.is_card
        out: dict[str, np.ndarray] = {}
        for c, model in enumerate(self.models):
            mine = chosen & (self.codes == c)
            local = mine & index.local
            out[model] = np.bincount(index.row[local], minlength=index.n_nodes)[: index.n_nodes].astype(np.int64)
        for i, mask in index.shared.items():
            c = int(self.codes[i])
            if c >= 0 and chosen[i] and mask.any():
                out[self.models[c]][int(np.argmax(mask))] += 1
        if selected is None:
            self._totals = out  # static while the index is: the caller must not change it
        return out

    def offers(self) -> dict[str, np.ndarray]:
        """Per card model, the node rows that reach one of its devices (do not change them)."""
        if self._offers is not None:
            return self._offers
        index = self.index
        out: dict[str, np.ndarray] = {}
        for c, model in enumerate(self.models):
            mine = self.codes == c
            rows = np.zeros(index.n_nodes, dtype=bool)
            local = index.row[mine & index.local]
            rows[local] = True
            for i, mask in index.shared.items():
                if mine[i]:
                    rows |= mask
            out[model] = rows
        self._offers = out
        return out
