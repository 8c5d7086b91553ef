"""The HyperNode gradient search: the fast search (best score first, sure failures pruned,
stopping once the answer is known) decides as trying every HyperNode, as Volcano does."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tidesched.actions.allocate_topology as allocate_topology
from builders import pod, podgroup
from tidesched.model.loader import Manifest
from tidesched.scheduler import config_from_text, schedule_manifests
from topology_builders import TOPOLOGY_CONFIG, fat_tree


def world(seed: int) -> list[dict]:
    rng = random.Random(seed)
    objs = fat_tree(rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 3), gpus=rng.choice([2, 4]))
    nodes = [o["metadata"]["name"] for o in objs if o["kind"] == "Node"]
    objs.append(podgroup("busy", 1))
    for i in range(rng.randint(0, len(nodes))):
        objs.append(pod(f"b{i}", "busy", cpu="1", memory="1Gi", node=rng.choice(nodes), phase="Running",
                        extra_requests={"nvidia.com/gpu": str(rng.randint(1, 2))}))
    for g in range(rng.randint(1, 5)):
        size = rng.randint(1, 6)
        mode = rng.choice(["hard", "soft", None])
        nt = {"mode": mode, "highestTierAllowed": rng.choice([1, 2])} if mode else None
        extra = {"networkTopology": nt} if nt else {}
        objs.append(podgroup(f"g{g}", rng.randint(1, size), **extra))
        gpus = rng.choice([1, 2])
        for k in range(size):
            objs.append(pod(f"g{g}-{k}", f"g{g}", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu": str(gpus)}))
    return objs


def decide(objs: list[dict], exhaustive: bool) -> dict:
    allocate_topology.EXHAUSTIVE = exhaustive
    try:
        _ssn, d = schedule_manifests([Manifest(f"o{i}", o) for i, o in enumerate(objs)], config_from_text(TOPOLOGY_CONFIG, "t"))
    finally:
        allocate_topology.EXHAUSTIVE = False
    out = d.to_json()
    return {k: out[k] for k in ("bound", "pipelined", "evicted", "podgroups")}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_fast_search_decides_as_trying_every_hypernode(seed: int) -> None:
    objs = world(seed)
    assert decide(objs, exhaustive=False) == decide(objs, exhaustive=True)


@pytest.mark.parametrize("seed", [3, 17, 2024])
def test_some_worlds_place_constrained_gangs(seed: int) -> None:
    # The property above must not pass vacuously: these worlds bind gang pods under constraints.
    bound = decide(world(seed), exhaustive=False)["bound"]
    assert any(k.startswith("ns/g") for k in bound)


def test_gang_eviction_domains_come_from_the_eviction_gradient() -> None:
    """gangpreempt/gangreclaim (Volcano GetCandidateDomains): a hard tier-1 gang looks for victims
    in the leaves, the widest first, at most maxDomains; a gang without a constraint in the
    whole cluster; with HyperNodes ``network-topology-aware`` caps them at its own limit."""
    from tidesched.actions.gang_evict import CLUSTER, GangEvictOptions, domains
    from tidesched.model.snapshot import build_snapshot
    from tidesched.scheduler import open_session
    from topology_builders import fat_tree

    objs = fat_tree(2, 2, 2, gpus=4)
    objs.append(podgroup("hard", 2, networkTopology={"mode": "hard", "highestTierAllowed": 1}))
    objs += [pod(f"hard-{i}", "hard", extra_requests={"nvidia.com/gpu": "4"}) for i in range(2)]
    objs.append(podgroup("free", 2))
    objs += [pod(f"free-{i}", "free", extra_requests={"nvidia.com/gpu": "4"}) for i in range(2)]
    conf = TOPOLOGY_CONFIG.replace("  - name: network-topology-aware", "  - name: network-topology-aware\n    arguments:\n      hypernode.gradient.evict.max-hypernodes: 3")
    ssn = open_session(build_snapshot([Manifest(f"o{i}", o) for i, o in enumerate(objs)]), config_from_text(conf, "t"))
    got = domains(ssn, ssn.jobs["ns/hard"], GangEvictOptions(max_domains=8))
    assert [name for name, _rows in got] == ["leaf-1", "leaf-2", "leaf-3"]  # the last 3 of tier 1 (Volcano's cap)
    name, rows = got[0]
    assert [ssn.table.names[r] for r in rows.nonzero()[0]] == ["n1-0", "n1-1"]
    assert [n for n, _r in domains(ssn, ssn.jobs["ns/hard"], GangEvictOptions(max_domains=2))] == ["leaf-1", "leaf-2"]
    free = domains(ssn, ssn.jobs["ns/free"], GangEvictOptions(max_domains=8))
    assert [n for n, _r in free] == [CLUSTER] and free[0][1].all()
