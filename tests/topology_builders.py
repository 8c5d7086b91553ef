"""Builders for network-topology tests: HyperNodes and small fat-trees of GPU nodes."""

from __future__ import annotations

from typing import Any

from builders import node

TOPOLOGY_CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: nodeorder
  - name: network-topology-aware
"""


def hypernode(name: str, tier: int, members: list[str], of: str = "Node", tier_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"tier": tier, "members": [{"type": of, "selector": {"exactMatch": {"name": m}}} for m in members]}
    if tier_name:
        spec["tierName"] = tier_name
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name}, "spec": spec}


def fat_tree(spines: int, leaves_per_spine: int, nodes_per_leaf: int, gpus: int = 8) -> list[dict[str, Any]]:
    """Nodes ``n<leaf>-<i>`` with ``gpus`` GPUs each, leaves ``leaf-<k>`` (tier 1), spines
    ``spine-<s>`` (tier 2)."""
    objs: list[dict[str, Any]] = []
    leaf = 0
    for s in range(spines):
        leaves = []
        for _ in range(leaves_per_spine):
            names = [f"n{leaf}-{i}" for i in range(nodes_per_leaf)]
            objs += [node(n, cpu="64", memory="256Gi", nvidia_com__gpu=str(gpus)) for n in names]
            objs.append(hypernode(f"leaf-{leaf}", 1, names, tier_name="leaf"))
            leaves.append(f"leaf-{leaf}")
            leaf += 1
        objs.append(hypernode(f"spine-{s}", 2, leaves, of="HyperNode", tier_name="spine"))
    return objs
