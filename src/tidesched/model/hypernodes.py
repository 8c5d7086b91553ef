"""HyperNodes (``topology.volcano.sh/v1alpha1``, cluster-scoped): the network-topology domains a
gang may be held within, as records parsed once from raw objects.

A HyperNode has a ``spec.tier`` (1 is the closest domain: a leaf switch), an optional
``spec.tierName`` (what a PodGroup's ``highestTierName`` names) and ``spec.members``: nodes
(``type: Node``, by ``exactMatch``, ``regexMatch`` or ``labelMatch``) or other HyperNodes
(``type: HyperNode``, by ``exactMatch`` only, as in Volcano). How the members become a tree
over the node table is :mod:`tidesched.model.hypernode_tree`'s job.

A HyperNode whose shape is wrong (no tier, an unknown member type, a selector with none or
several of the three ways) is an ObjectError naming the field: it is dropped with a Warning,
as every malformed object is (REL-1). A regular expression or label selector that cannot be
compiled only empties its member (Volcano's scheduler selects no node with it either); the
tree reports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidesched.model.fields import INT32, list_of, mapping, parse_int, parse_str
from tidesched.model.objects import Meta, parse_meta
from tidesched.model.problems import ObjectError
from tidesched.rules.hypernode_match import EXACT, LABEL, REGEX, MemberSelector, compile_member_selector

KIND = "HyperNode"
API_VERSION = "topology.volcano.sh/v1alpha1"
MEMBER_NODE, MEMBER_HYPERNODE = "Node", "HyperNode"


@dataclass(frozen=True, slots=True)
class HyperNodeMember:
    type: str  # MEMBER_NODE | MEMBER_HYPERNODE
    selector: MemberSelector
    where: str  # spec.members[i], for messages


@dataclass(frozen=True, slots=True)
class HyperNode:
    meta: Meta
    tier: int
    tier_name: str
    members: tuple[HyperNodeMember, ...]

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def key(self) -> str:
        return self.meta.name

    @property
    def hypernode_members(self) -> list[HyperNodeMember]:
        return [m for m in self.members if m.type == MEMBER_HYPERNODE]

    @property
    def node_members(self) -> list[HyperNodeMember]:
        return [m for m in self.members if m.type == MEMBER_NODE]


def _selector(raw: Any, where: str) -> MemberSelector:
    sel = mapping({"s": raw}, "s", f"{where}.selector")
    present = [how for how in (EXACT, REGEX, LABEL) if sel.get(how) is not None]
    if not present:
        raise ObjectError(f"{where}.selector", "one of exactMatch, regexMatch or labelMatch is required")
    if len(present) > 1:
        raise ObjectError(f"{where}.selector", f"only one of exactMatch, regexMatch or labelMatch may be given, got {', '.join(present)}")
    how = present[0]
    body = sel[how]
    if not isinstance(body, Mapping):
        raise ObjectError(f"{where}.selector.{how}", f"expected a mapping, got {type(body).__name__}")
    if how == EXACT and not parse_str(body.get("name"), f"{where}.selector.exactMatch.name"):
        raise ObjectError(f"{where}.selector.exactMatch.name", "missing or empty")
    if how == REGEX and not parse_str(body.get("pattern"), f"{where}.selector.regexMatch.pattern"):
        raise ObjectError(f"{where}.selector.regexMatch.pattern", "missing or empty")
    return compile_member_selector(how, body, f"{where}.selector")


def parse_hypernode(obj: Mapping[str, Any]) -> HyperNode:
    meta = parse_meta(obj, namespaced=False)
    spec = mapping(obj, "spec", "spec")
    if spec.get("tier") is None:
        raise ObjectError("spec.tier", "missing")
    tier = parse_int(spec.get("tier"), "spec.tier", bounds=(0, INT32[1]))
    members = []
    for i, raw in enumerate(list_of(spec, "members", "spec.members")):
        where = f"spec.members[{i}]"
        if not isinstance(raw, Mapping):
            raise ObjectError(where, f"expected a mapping, got {type(raw).__name__}")
        mtype = parse_str(raw.get("type"), f"{where}.type")
        if mtype not in (MEMBER_NODE, MEMBER_HYPERNODE):
            raise ObjectError(f"{where}.type", f"must be Node or HyperNode, got {raw.get('type')!r}")
        members.append(HyperNodeMember(mtype, _selector(raw.get("selector"), where), where))
    return HyperNode(
        meta=meta,
        tier=tier,
        tier_name=parse_str(spec.get("tierName"), "spec.tierName"),
        members=tuple(members),
    )
