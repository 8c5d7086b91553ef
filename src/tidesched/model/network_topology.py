"""A gang's network-topology constraints, as a PodGroup states them (Volcano v1.15).

``spec.networkTopology``: ``mode`` (``hard``: the gang must sit within one HyperNode of at most
``highestTierAllowed``, or of the tier named ``highestTierName``; ``soft``: it should sit as low
as it can; the CRD's default is hard) and the tier. ``spec.subGroupPolicy``: sub-groups of the
gang (pods matched by ``labelSelector``, grouped by the values of ``matchLabelKeys``), each of
``subGroupSize`` pods, of which ``minSubGroups`` must run, each sub-group with a topology of its
own. A bare pod's PodGroup takes its constraint from the pod's annotations, as Volcano's PodGroup
controller does (``volcano.sh/network-topology-mode``, ``volcano.sh/network-topology-highest-tier``).

Each reader raises ObjectError naming the field (REL-1); ``pod_network_topology`` never raises:
the controller logs a bad annotation value and uses the default, and so do we.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidesched.model.fields import INT32, list_of, mapping, parse_int, parse_str
from tidesched.model.problems import ObjectError
from tidesched.rules.selectors import CompiledLabelSelector, SelectorError, compile_label_selector

HARD, SOFT = "hard", "soft"
MODE_ANNOTATION = "volcano.sh/network-topology-mode"
HIGHEST_TIER_ANNOTATION = "volcano.sh/network-topology-highest-tier"
PARTITION_ID_LABEL = "volcano.sh/partition-id"  # a Volcano Job's pods, by partition (tasks[].partitionPolicy)


@dataclass(frozen=True, slots=True)
class NetworkTopology:
    mode: str  # HARD | SOFT
    highest_tier: int | None = None  # highestTierAllowed
    highest_tier_name: str = ""

    def describe(self) -> str:
        tier = f"tier {self.highest_tier}" if self.highest_tier is not None else (
            f"tier {self.highest_tier_name!r}" if self.highest_tier_name else "any tier")
        return f"{self.mode}, {tier}"


@dataclass(frozen=True, slots=True)
class SubGroupPolicy:
    name: str
    size: int  # subGroupSize: pods per sub-group, all of which must run together
    min_groups: int  # minSubGroups: sub-groups of this policy the gang needs
    selector: CompiledLabelSelector | None  # None: every pod
    match_label_keys: tuple[str, ...]
    network_topology: NetworkTopology | None


@dataclass(frozen=True, slots=True)
class GangTopology:
    network_topology: NetworkTopology | None
    sub_groups: tuple[SubGroupPolicy, ...] = ()


def parse_network_topology(raw: Any, where: str) -> NetworkTopology | None:
    if raw is None:
        return None
    nt = mapping({"v": raw}, "v", where)
    mode = parse_str(nt.get("mode"), f"{where}.mode", HARD)
    if mode not in (HARD, SOFT):
        raise ObjectError(f"{where}.mode", f"must be hard or soft, got {mode!r}")
    tier = None
    if nt.get("highestTierAllowed") is not None:
        tier = parse_int(nt.get("highestTierAllowed"), f"{where}.highestTierAllowed", bounds=(0, INT32[1]))
    return NetworkTopology(mode, tier, parse_str(nt.get("highestTierName"), f"{where}.highestTierName"))


def _sub_group(raw: Any, where: str) -> SubGroupPolicy:
    if not isinstance(raw, Mapping):
        raise ObjectError(where, f"expected a mapping, got {type(raw).__name__}")
    size = parse_int(raw.get("subGroupSize"), f"{where}.subGroupSize", default=1, bounds=(1, INT32[1]))
    min_groups = parse_int(raw.get("minSubGroups"), f"{where}.minSubGroups", default=0, bounds=(0, INT32[1]))
    selector = None
    if raw.get("labelSelector") is not None:
        try:
            selector = compile_label_selector(raw.get("labelSelector"), f"{where}.labelSelector")
        except SelectorError as exc:
            field, _, problem = str(exc).partition(": ")
            raise ObjectError(field, problem) from None
    keys = tuple(parse_str(k, f"{where}.matchLabelKeys[{i}]") for i, k in enumerate(list_of(raw, "matchLabelKeys", f"{where}.matchLabelKeys")))
    return SubGroupPolicy(
        name=parse_str(raw.get("name"), f"{where}.name"),
        size=size,
        min_groups=min_groups,
        selector=selector,
        match_label_keys=keys,
        network_topology=parse_network_topology(raw.get("networkTopology"), f"{where}.networkTopology"),
    )


def parse_gang_topology(spec: Mapping[str, Any]) -> GangTopology | None:
    """A PodGroup's constraints from its spec; None when it states none."""
    nt = parse_network_topology(spec.get("networkTopology"), "spec.networkTopology")
    groups = tuple(_sub_group(g, f"spec.subGroupPolicy[{i}]") for i, g in enumerate(list_of(spec, "subGroupPolicy", "spec.subGroupPolicy")))
    if nt is None and not groups:
        return None
    return GangTopology(nt, groups)


def pod_network_topology(annotations: Mapping[str, str]) -> GangTopology | None:
    """The constraint Volcano's PodGroup controller gives a bare pod's PodGroup: hard unless the
    mode annotation says soft; an unreadable tier is left out (logged there, ignored here)."""
    mode_text = annotations.get(MODE_ANNOTATION)
    tier_text = annotations.get(HIGHEST_TIER_ANNOTATION)
    if mode_text is None and tier_text is None:
        return None
    mode = (mode_text or "").lower()
    tier = None
    if tier_text is not None:
        try:
            tier = int(tier_text.strip(), 10)
        except ValueError:
            tier = None
    return GangTopology(NetworkTopology(mode if mode in (HARD, SOFT) else HARD, tier))


def sub_group_key(policy: SubGroupPolicy, labels: Mapping[str, str]) -> str | None:
    """The sub-group a pod joins under ``policy`` (Volcano getSubJobMatchValues): None when the
    selector does not match or a match key is missing or empty. A policy without match keys
    gives no sub-group (its pods stay in the gang's default group, as in Volcano)."""
    if policy.selector is not None and not policy.selector.matches(labels):
        return None
    values = []
    for key in policy.match_label_keys:
        value = labels.get(key)
        if not value:
            return None
        values.append(value)
    return "-".join(values) if values else None
