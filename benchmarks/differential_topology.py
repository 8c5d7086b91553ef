"""HyperNodes and gangs held to a network domain, drawn into the differential's v1.15.1 worlds
(``benchmarks/differential.py``, issue 33 item 3).

In about a third of the worlds (a random stream of its own, ``v1.15-topology-SEED``, so every
other draw of a seed stays as it was):

* a tree of HyperNodes (``topology.volcano.sh/v1alpha1``) over the world's nodes: two or three
  tier-1 HyperNodes ("leaves"), each over a run of nodes named by ``exactMatch`` (one member per
  node), by one ``regexMatch`` (``^node-[0-2]$``) or by a ``labelMatch`` on a label the draw
  gives its nodes (``differential.tidesched.io/leaf``); sometimes a node left outside every
  leaf (only under the cluster top); in two worlds of three a tier-2 HyperNode ("spine") over
  the leaves (all of them, or all but the last);
* the ``network-topology-aware`` plugin in the last tier, sometimes with v1.15.1's arguments
  (``weight``, ``hypernode.binpack.cpu`` / ``.memory``, ``hypernode.binpack.normal-pod.enable`` /
  ``.fading``);
* on about half of the pending PodGroups ``spec.networkTopology``: ``mode`` hard or soft and
  ``highestTierAllowed`` 1 or 2 (2 without a spine is the cluster top's tier).

vc-scheduler v1.15.1 reads HyperNodes without a feature gate or flag (its cache watches them when
the CRD is served: the planes install all of Volcano's CRDs, ``topology.volcano.sh_hypernodes``
among them) and applies the plugin as configured.

:func:`violations` checks an outcome for what a hard constraint promises: every hard-mode gang's
bound pods within one HyperNode of a tier no higher than allowed. ``compare`` reports a breach
by either scheduler as a difference (``hard-topology``), even where both agree otherwise.
"""

from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from differential import JobSpec, Outcome, World

TOPOLOGY_API = "topology.volcano.sh/v1alpha1"
HYPERNODES = f"/apis/{TOPOLOGY_API}/hypernodes"
LEAF_LABEL = "differential.tidesched.io/leaf"
PLUGIN = "network-topology-aware"
SHARE = 0.3  # of the worlds that get HyperNodes


def hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": TOPOLOGY_API, "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": members}}


def _exact(kind: str, name: str) -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def draw(world: World) -> None:
    """HyperNodes, the plugin and constraints on pending gangs, into ``world`` (or nothing)."""
    import yaml

    rng = random.Random(f"v1.15-topology-{world.seed}")
    if rng.random() >= SHARE or len(world.nodes) < 2:
        return
    names = [n.name for n in world.nodes]
    # Runs of consecutive nodes, one per leaf; maybe the last node outside every leaf.
    outside = rng.random() < 0.25 and len(names) >= 3
    inside = names[:-1] if outside else names
    k = min(len(inside), rng.choice([2, 2, 3]))
    cuts = sorted(rng.sample(range(1, len(inside)), k - 1))
    runs = [inside[a:b] for a, b in zip([0, *cuts], [*cuts, len(inside)])]
    leaves: list[dict[str, Any]] = []
    for i, run in enumerate(runs):
        how = rng.choice(["exact", "exact", "regex", "label"])
        if how == "regex":
            digits = "".join(n.removeprefix("node-") for n in run)
            members = [{"type": "Node", "selector": {"regexMatch": {"pattern": f"^node-[{digits}]$"}}}]
        elif how == "label":
            for n in world.nodes:
                if n.name in run:
                    n.labels[LEAF_LABEL] = f"leaf-{i}"
            members = [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {LEAF_LABEL: f"leaf-{i}"}}}}]
        else:
            members = [_exact("Node", n) for n in run]
        leaves.append(hypernode(f"leaf-{i}", 1, members))
    world.hypernodes = list(leaves)
    if rng.random() < 0.67:
        under = leaves if rng.random() < 0.7 or len(leaves) < 3 else leaves[:-1]
        world.hypernodes.append(hypernode("spine-0", 2, [_exact("HyperNode", h["metadata"]["name"]) for h in under]))

    conf = yaml.safe_load(world.config)
    plugin: dict[str, Any] = {"name": PLUGIN}
    if rng.random() < 0.5:
        args: dict[str, Any] = {}
        if rng.random() < 0.5:
            args["weight"] = rng.choice([1, 2, 5])
        if rng.random() < 0.5:
            args["hypernode.binpack.cpu"] = rng.choice([1, 2, 5])
            args["hypernode.binpack.memory"] = rng.choice([0, 1, 2])
        if rng.random() < 0.4:
            args["hypernode.binpack.normal-pod.enable"] = rng.random() < 0.5
        if rng.random() < 0.3:
            args["hypernode.binpack.normal-pod.fading"] = rng.choice([0.0, 0.5, 0.8])
        if args:
            plugin["arguments"] = args
    conf["tiers"][-1]["plugins"].append(plugin)
    world.config = yaml.safe_dump(conf, sort_keys=False)

    for j in world.jobs:
        if not j.running and rng.random() < 0.5:
            j.network_topology = {"mode": rng.choice(["hard", "hard", "soft"]),
                                  "highestTierAllowed": rng.choice([1, 1, 2])}


# -- what a world's HyperNodes hold ----------------------------------------------------------


def _members(world: World, hn: dict[str, Any], by_name: dict[str, dict[str, Any]]) -> set[str]:
    nodes: set[str] = set()
    for m in hn["spec"]["members"]:
        sel = m["selector"]
        if m["type"] == "HyperNode":
            child = by_name.get(sel["exactMatch"]["name"])
            if child is not None:
                nodes |= _members(world, child, by_name)
        elif "exactMatch" in sel:
            nodes |= {n.name for n in world.nodes if n.name == sel["exactMatch"]["name"]}
        elif "regexMatch" in sel:
            pattern = re.compile(sel["regexMatch"]["pattern"])
            nodes |= {n.name for n in world.nodes if pattern.search(n.name)}
        else:
            want = sel["labelMatch"]["matchLabels"]
            nodes |= {n.name for n in world.nodes if all(n.labels.get(k) == v for k, v in want.items())}
    return nodes


def domains(world: World) -> list[tuple[int, str, set[str]]]:
    """(tier, name, nodes) of every HyperNode, and the cluster top (one tier above the highest)."""
    by_name = {h["metadata"]["name"]: h for h in world.hypernodes}
    out = [(h["spec"]["tier"], name, _members(world, h, by_name)) for name, h in by_name.items()]
    top = max((t for t, _, _ in out), default=0) + 1
    out.append((top, "<cluster-top>", {n.name for n in world.nodes}))
    return out


def violations(world: World, out: Outcome) -> dict[str, str]:
    """Job name -> what breaks its hard constraint in ``out`` (bound pods in no one HyperNode of
    an allowed tier); jobs that keep theirs are left out."""
    if not world.hypernodes:
        return {}
    doms = domains(world)
    res: dict[str, str] = {}
    for j in world.jobs:
        nt = j.network_topology
        if not nt or nt.get("mode", "hard") != "hard" or nt.get("highestTierAllowed") is None:
            continue
        placed = {(out.pods.get(p.name) or {}).get("node") for p in world.pods_of(j.name)}
        placed.discard(None)
        if not placed:
            continue
        allowed = [name for tier, name, nodes in doms if tier <= nt["highestTierAllowed"] and placed <= nodes]
        if not allowed:
            res[j.name] = f"pods on {', '.join(sorted(placed))}: in no HyperNode of tier <= {nt['highestTierAllowed']}"
    return res


def podgroup_spec(j: JobSpec) -> dict[str, Any]:
    """What the draw adds to a PodGroup's spec."""
    return {"networkTopology": dict(j.network_topology)} if j.network_topology else {}


# -- a plane between worlds -------------------------------------------------------------------


def clear(api: Any) -> None:
    """Every HyperNode goes (nothing to do where the CRD is not installed: v1.7.0's planes)."""
    from controlplane import ApiError

    try:
        api.delete(HYPERNODES)
    except ApiError as exc:
        if exc.status != 404:
            raise


def left(api: Any) -> bool:
    from controlplane import ApiError

    try:
        return bool(api.items(HYPERNODES))
    except ApiError as exc:
        if exc.status != 404:
            raise
        return False
