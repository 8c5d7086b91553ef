"""A generated fat-tree for a simulation (``simulate --topology LEAFxSPINE``) and network-topology
constraints for its gangs (``--gang-topology MODE[:TIER]``).

The nodes of the scenario, GPU nodes only when it has any, in name order, go into leaf HyperNodes
(tier 1, ``tierName: leaf``) of ``nodes_per_leaf`` nodes, and the leaves into spine HyperNodes
(tier 2, ``tierName: spine``) of ``leaves_per_spine`` leaves. The constraint is written on every
gang the scenario submits: Volcano Jobs (their controller copies it to the PodGroup) and
PodGroups of more than one pod; ``none`` leaves them as they are. Only a config naming the
``network-topology-aware`` plugin honours it (docs/topology.md).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from tidesched.model.loader import Manifest
from tidesched.model.network_topology import HARD, SOFT
from tidesched.sim.events import Scenario, object_kind
from tidesched.sim.vocabulary import ScenarioError

_SHAPE = re.compile(r"^(\d+)x(\d+)$")


def parse_shape(text: str) -> tuple[int, int]:
    """``NODESxLEAVES``: nodes per leaf, leaves per spine."""
    m = _SHAPE.match(text.strip())
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise ScenarioError(f"--topology {text!r}: expected NODESxLEAVES (nodes per leaf x leaves per spine), e.g. 4x2")
    return int(m.group(1)), int(m.group(2))


def parse_constraint(text: str) -> dict[str, Any] | None:
    """``hard:1``, ``hard:2``, ``soft`` or ``none``: a PodGroup's ``spec.networkTopology``."""
    mode, _, tier = text.strip().partition(":")
    if mode == "none" and not tier:
        return None
    if mode not in (HARD, SOFT) or (mode == HARD and not tier.isdigit()) or (mode == SOFT and tier and not tier.isdigit()):
        raise ScenarioError(f"--gang-topology {text!r}: expected hard:TIER, soft[:TIER] or none")
    out: dict[str, Any] = {"mode": mode}
    if tier:
        out["highestTierAllowed"] = int(tier)
    return out


def _is_gpu_node(obj: dict[str, Any]) -> bool:
    alloc = ((obj.get("status") or {}).get("allocatable") or {})
    return any("gpu" in str(k) for k in alloc)


def add_fat_tree(sc: Scenario, nodes_per_leaf: int, leaves_per_spine: int) -> list[str]:
    """Append the HyperNodes to the scenario's objects; the leaves' names."""
    nodes = [m.obj for m in sc.objects if object_kind(m.obj) == "Node"]
    gpu = [n for n in nodes if _is_gpu_node(n)]
    names = sorted(str((n.get("metadata") or {}).get("name")) for n in (gpu or nodes))
    leaves: list[str] = []
    for k in range(0, len(names), nodes_per_leaf):
        leaf = f"leaf-{len(leaves)}"
        leaves.append(leaf)
        sc.objects.append(Manifest("--topology", _hypernode(leaf, 1, "leaf", "Node", names[k:k + nodes_per_leaf])))
    for s in range(0, len(leaves), leaves_per_spine):
        sc.objects.append(Manifest("--topology", _hypernode(f"spine-{s // leaves_per_spine}", 2, "spine", "HyperNode",
                                                           leaves[s:s + leaves_per_spine])))
    return leaves


def _hypernode(name: str, tier: int, tier_name: str, of: str, members: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
        "spec": {"tier": tier, "tierName": tier_name,
                 "members": [{"type": of, "selector": {"exactMatch": {"name": m}}} for m in members]},
    }


def constrain_gangs(sc: Scenario, constraint: dict[str, Any] | None) -> int:
    """Write ``constraint`` on every gang the scenario submits (at t=0 and by its events);
    how many were constrained."""
    if constraint is None:
        return 0
    count = 0

    def visit(m: Manifest) -> Manifest:
        nonlocal count
        obj = m.obj
        kind = object_kind(obj)
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else None
        if spec is None:
            return m
        if kind == "Job":
            pods = sum(int(t.get("replicas") or 0) for t in spec.get("tasks") or [] if isinstance(t, dict))
            if pods <= 1:
                return m
        elif kind == "PodGroup":
            if int(spec.get("minMember") or 1) <= 1:
                return m
        else:
            return m
        count += 1
        new = copy.deepcopy(obj)
        new["spec"]["networkTopology"] = dict(constraint)
        return Manifest(m.source, new)

    sc.objects = [visit(m) for m in sc.objects]
    for ev in sc.events:
        objs = ev.args.get("objects") if isinstance(ev.args, dict) else None
        if isinstance(objs, list):
            objs[:] = [visit(m) if isinstance(m, Manifest) else m for m in objs]
    return count
