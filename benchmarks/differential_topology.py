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
  ``.fading``); with preempt, its ``enableNetworkTopologyPreemption: false`` (Volcano v1.15.1's
  preempt skips a job with a network topology; tidesched's preempts inside its HyperNode unless
  told so);
* on about half of the pending PodGroups ``spec.networkTopology``: ``mode`` hard or soft and
  ``highestTierAllowed`` 1 or 2 (2 without a spine is the cluster top's tier); a third of those
  with a ``subGroupPolicy`` (pods labelled ``volcano.sh/partition-id``, one sub-group per
  partition of one or two pods, each hard within a leaf, ``minSubGroups`` drawn).

vc-scheduler v1.15.1 reads HyperNodes without a feature gate or flag (its cache watches them when
the CRD is served: the planes install all of Volcano's CRDs, ``topology.volcano.sh_hypernodes``
among them) and applies the plugin as configured. Never beside ``task-topology``: vc-scheduler
v1.15.1 panics there (seed 3126; see :func:`draw`); and no network topology on a gang with
WaitForFirstConsumer claims: v1.15.1 gives one local PV to two pods there (seed 3133).

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
PARTITION_LABEL = "volcano.sh/partition-id"
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
    if "name: task-topology" in world.config:
        # vc-scheduler v1.15.1 panics there: allocate's search over HyperNodes replays a sub-job's
        # allocations (Statement.RecoverOperations), and task-topology's bucket then subtracts a
        # task's request a second time ("resource is not sufficient", seed 3126), as with the gang
        # actions (differential_plugins).
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
    if "preempt" in conf["actions"]:
        # tidesched's preempt keeps a constrained gang's room inside its HyperNode; Volcano
        # v1.15.1's does not preempt for a job with a network topology at all: its side, by the
        # documented switch (docs/topology.md).
        conf.setdefault("configurations", []).append(
            {"name": "preempt", "arguments": {"enableNetworkTopologyPreemption": False}})
    world.config = yaml.safe_dump(conf, sort_keys=False)

    wffc = ((world.objects or {}).get("volumes") or {}).get("wffc") or {}
    for j in world.jobs:
        if not j.running and rng.random() < 0.5:
            nt = {"mode": rng.choice(["hard", "hard", "soft"]), "highestTierAllowed": rng.choice([1, 1, 2])}
            pods = len(world.pods_of(j.name))
            sub_groups = None
            if pods >= 2 and rng.random() < 0.35:
                # Partitions as Volcano's Job controller writes a task's partitionPolicy: pods
                # labelled by partition, one sub-group per label value, each held to a leaf.
                size = rng.choice([s for s in (1, 2) if pods % s == 0])
                sub_groups = [{"name": "part", "matchLabelKeys": [PARTITION_LABEL], "subGroupSize": size,
                               "minSubGroups": rng.randint(1, pods // size),
                               "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]
            if any(p.name in wffc for p in world.pods_of(j.name)):
                # Not on a gang with WaitForFirstConsumer claims (drawn all the same, so that the
                # other jobs' draws stay as they were): vc-scheduler v1.15.1 hands one local PV to
                # two pods there (seed 3133). Its search over HyperNodes replays the gang's
                # allocations (Statement.RecoverOperations); the replayed AssumePodVolumes finds
                # its binding's PV already claimed ("not dirty") and leaves the PV cache restored,
                # so a later pod is given the same PV, and whichever binds second fails its
                # PreBind: a gang bound below minMember, a different one from run to run.
                continue
            j.network_topology, j.sub_groups = nt, sub_groups


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


def _breach(doms: list[tuple[int, str, set[str]]], nt: dict[str, Any] | None, placed: set[str]) -> str:
    if not nt or nt.get("mode", "hard") != "hard" or nt.get("highestTierAllowed") is None or not placed:
        return ""
    if any(tier <= nt["highestTierAllowed"] and placed <= nodes for tier, _, nodes in doms):
        return ""
    return f"pods on {', '.join(sorted(placed))}: in no HyperNode of tier <= {nt['highestTierAllowed']}"


def violations(world: World, out: Outcome) -> dict[str, str]:
    """Job name -> what breaks its hard constraint, or a hard constraint of one of its partitions,
    in ``out`` (bound pods in no one HyperNode of an allowed tier); jobs that keep theirs are left
    out."""
    if not world.hypernodes:
        return {}
    doms = domains(world)
    res: dict[str, str] = {}
    for j in world.jobs:
        where = {p.name: (out.pods.get(p.name) or {}).get("node") for p in world.pods_of(j.name)}
        problems = [_breach(doms, j.network_topology, {n for n in where.values() if n})]
        for sg in j.sub_groups or []:
            parts: dict[str, set[str]] = {}
            for p in world.pods_of(j.name):
                if where[p.name]:
                    parts.setdefault(partition(p.name, sg), set()).add(where[p.name])
            problems += [f"partition {k}: {b}" for k, nodes in sorted(parts.items())
                         if (b := _breach(doms, sg.get("networkTopology"), nodes))]
        if any(problems):
            res[j.name] = "; ".join(x for x in problems if x)
    return res


def partition(pod: str, sub_group: dict[str, Any]) -> str:
    """A pod's partition: its replica index (the name's last part) by the sub-group's size."""
    return str(int(pod.rpartition("-")[2]) // sub_group["subGroupSize"])


def podgroup_spec(j: JobSpec) -> dict[str, Any]:
    """What the draw adds to a PodGroup's spec."""
    spec: dict[str, Any] = {"networkTopology": dict(j.network_topology)} if j.network_topology else {}
    if j.sub_groups:
        spec["subGroupPolicy"] = [dict(sg) for sg in j.sub_groups]
    return spec


def pod_labels(pod: str, j: JobSpec) -> dict[str, str]:
    """What the draw adds to a pod's labels (its partition, in a job with sub-groups)."""
    return {PARTITION_LABEL: partition(pod, j.sub_groups[0])} if j.sub_groups else {}


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
