"""The network-topology-aware plugin, cases ported from Volcano v1.15.1's
pkg/scheduler/plugins/network-topology-aware/network_topology_aware_test.go: its arguments, the
eviction gradient's order and cap, the normal-pod node scores and the HyperNode scores."""

from __future__ import annotations

import numpy as np
import pytest

from builders import node, pod, podgroup, queue
from tidesched.framework.arguments import Arguments
from tidesched.framework.topology import PURPOSE_ALLOCATE, PURPOSE_EVICT
from tidesched.model.loader import Manifest
from tidesched.model.snapshot import build_snapshot
from tidesched.plugins.network_topology_aware import NetworkTopologyAwarePlugin
from tidesched.scheduler import config_from_text, open_session
from topology_builders import hypernode


def plugin(**args: object) -> NetworkTopologyAwarePlugin:
    return NetworkTopologyAwarePlugin(Arguments(dict(args), owner="network-topology-aware"))


def test_new_without_arguments() -> None:  # TestNew: "build plugin with no arguments"
    p = plugin()
    assert (p.weight, p.binpack, p.normal_enable, p.fading, p.evict_max) == (1, {"cpu": 1, "memory": 1}, True, 0.8, 8)


def test_new_with_valid_arguments() -> None:  # TestNew: "... customized valid arguments"
    p = plugin(**{
        "weight": 2, "hypernode.binpack.cpu": 3, "hypernode.binpack.memory": 4,
        "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
        "hypernode.binpack.resources.nvidia.com/gpuxxx": 5, "hypernode.binpack.resources.example.com/foo": 6,
        "hypernode.binpack.normal-pod.enable": False, "hypernode.binpack.normal-pod.fading": 0,
    })
    assert p.weight == 2
    # nvidia.com/gpu is listed, but its weight was given under another name: the default.
    assert p.binpack == {"cpu": 3, "memory": 4, "nvidia.com/gpu": 1, "example.com/foo": 6}
    assert (p.normal_enable, p.fading) == (False, 0)


def test_new_with_negative_arguments_takes_the_defaults() -> None:  # TestNew: "... invalid arguments"
    p = plugin(**{
        "weight": -1, "hypernode.binpack.cpu": -1, "hypernode.binpack.memory": -1,
        "hypernode.binpack.resources": "nvidia.com/gpuxxx, example.com/foo",
        "hypernode.binpack.resources.nvidia.com/gpu": -1, "hypernode.binpack.resources.example.com/foo": -1,
        "hypernode.binpack.normal-pod.fading": -1, "hypernode.gradient.evict.max-hypernodes": 0,
    })
    assert p.weight == 1
    assert p.binpack == {"cpu": 1, "memory": 1, "nvidia.com/gpuxxx": 1, "example.com/foo": 1}
    assert (p.fading, p.evict_max) == (0.8, 8)


def test_eviction_gradients_go_widest_first_and_are_capped() -> None:  # TestReverseAndCapEvictionGradients
    p = plugin(**{"hypernode.gradient.evict.max-hypernodes": 3})
    assert p._ordered({1: ["a", "b"], 2: ["c", "d"]}, PURPOSE_EVICT) == [["c", "d"], ["b"]]
    assert p._ordered({1: ["a", "b"], 2: ["c", "d"]}, PURPOSE_ALLOCATE) == [["a", "b"], ["c", "d"]]


# TestBatchNodeOrderFn's and TestHyperNodeOrderFn's cluster: s0 (tier 3) over s1, s2 (tier 2) over
# s3..s6 (tier 1), two nodes each, of different sizes.
SIZES = {"s3": ("2", "4G"), "s4": ("4", "4G"), "s5": ("2", "8G"), "s6": ("4", "8G")}


def cluster() -> list[dict]:
    objs: list[dict] = [queue("q1", weight=1)]
    for leaf, (cpu, mem) in SIZES.items():
        names = [f"{leaf}-n1", f"{leaf}-n2"]
        objs += [node(n, cpu=cpu, memory=mem, pods="10") for n in names]
        objs.append(hypernode(leaf, 1, names))
    objs += [hypernode("s1", 2, ["s3", "s4"], of="HyperNode"), hypernode("s2", 2, ["s5", "s6"], of="HyperNode"),
             hypernode("s0", 3, ["s1", "s2"], of="HyperNode")]
    return objs


def session(objs: list[dict], args: str = ""):  # type: ignore[no-untyped-def]
    conf = f"""actions: "allocate"
tiers:
- plugins:
  - name: network-topology-aware
{args}"""
    snap = build_snapshot([Manifest(f"o{i}", o) for i, o in enumerate(objs)])
    return open_session(snap, config_from_text(conf, "t"))


def test_normal_pod_scores_with_default_arguments() -> None:
    # TestBatchNodeOrderFn: "score empty nodes for single task with no network topology and default plugin arguments"
    objs = cluster() + [podgroup("pg1", 1, queue="q1", namespace="ns1"),
                        pod("p1", "pg1", cpu="2", memory="4G", namespace="ns1")]
    ssn = session(objs)
    p = ssn.plugins["network-topology-aware"]
    task = next(t for t in ssn.tasks.values() if t.name == "p1")
    scores = dict(zip(ssn.table.names, p.node_scores(task, np.arange(len(ssn.table))).tolist()))
    want = {"s3-n1": 25.8, "s3-n2": 25.8, "s4-n1": 21.6, "s4-n2": 21.6, "s5-n1": 19.9, "s5-n2": 19.9, "s6-n1": 15.7, "s6-n2": 15.7}
    assert scores == pytest.approx(want, abs=0.05)


def test_normal_pod_scores_off() -> None:
    # TestBatchNodeOrderFn: "... no network topology and no hypernode-level binpacking"
    objs = cluster() + [podgroup("pg1", 1, queue="q1", namespace="ns1"), pod("p1", "pg1", cpu="2", memory="4G", namespace="ns1")]
    ssn = session(objs, "    arguments:\n      hypernode.binpack.normal-pod.enable: false\n")
    p = ssn.plugins["network-topology-aware"]
    task = next(t for t in ssn.tasks.values() if t.name == "p1")
    assert not p.node_scores(task, np.arange(len(ssn.table))).any()


def test_hypernode_scores_with_default_arguments() -> None:
    # TestHyperNodeOrderFn: "score hypernodes for a subjob with default plugin arguments"
    objs = cluster() + [podgroup("pg1", 2, queue="q1", namespace="ns1", networkTopology={"mode": "hard", "highestTierAllowed": 2})]
    objs += [pod(f"p{i}", "pg1", cpu="4", memory="4G", namespace="ns1", annotations={"volcano.sh/task-spec": "worker"}) for i in (1, 2)]
    ssn = session(objs)
    job = ssn.jobs["ns1/pg1"]
    scores = ssn.hypernode_order(job, ssn.topology.whole(job), ["s0", "s1", "s2", "s3", "s4", "s5", "s6"])
    want = {"s0": 25.0, "s1": 58.3, "s2": 45.8, "s3": 0.0, "s4": 100.0, "s5": 0.0, "s6": 75.0}
    assert scores == pytest.approx(want, abs=0.05)


# -- sub-groups (each scored and searched on its own) -------------------------------------------

def _worker_subgroup(**nt: object) -> list[dict]:
    policy: dict = {"name": "task1", "matchLabelKeys": ["volcano.sh/task-spec"]}
    if nt:
        policy["networkTopology"] = dict(nt)
    return [policy]


def test_node_scores_for_a_sub_group_read_its_domain_and_its_pods() -> None:
    # TestBatchNodeOrderFn: "score nodes for tasks with network topology" (the sub-group task1
    # held to tier 2; its pods' domain is s1, one of them runs on s4-n1).
    objs = cluster() + [podgroup("pg1", 2, queue="q1", namespace="ns1", networkTopology={"mode": "hard", "highestTierAllowed": 2},
                                 subGroupPolicy=_worker_subgroup(mode="hard", highestTierAllowed=2))]
    objs += [pod("p1", "pg1", cpu="2", memory="4G", namespace="ns1", labels={"volcano.sh/task-spec": "worker"}),
             pod("p2", "pg1", cpu="2", memory="4G", namespace="ns1", labels={"volcano.sh/task-spec": "worker"},
                 node="s4-n1", phase="Running")]
    ssn = session(objs)
    job = ssn.jobs["ns1/pg1"]
    task = next(t for t in ssn.tasks.values() if t.name == "p1")
    sub = ssn.topology.sub_of(job, task)
    assert sub.uid == "ns1/pg1/task1-worker"
    ssn.topology.current[sub.uid] = "s1"  # what allocate sets while it places the sub-group
    p = ssn.plugins["network-topology-aware"]
    scores = dict(zip(ssn.table.names, p.node_scores(task, np.arange(len(ssn.table))).tolist()))
    want = {"s3-n1": 66.7, "s3-n2": 66.7, "s4-n1": 116.7, "s4-n2": 116.7, "s5-n1": 33.3, "s5-n2": 33.3, "s6-n1": 33.3, "s6-n2": 33.3}
    assert scores == pytest.approx(want, abs=0.05)


def test_a_sub_group_without_a_topology_is_scored_as_a_normal_pod() -> None:
    # Volcano batchNodeOrderFn: the network score only for a pod whose sub-group states a
    # topology; here the PodGroup does, its sub-group task1 does not.
    objs = cluster() + [podgroup("pg1", 1, queue="q1", namespace="ns1", networkTopology={"mode": "hard", "highestTierAllowed": 2},
                                 subGroupPolicy=_worker_subgroup())]
    objs += [pod("p1", "pg1", cpu="2", memory="4G", namespace="ns1", labels={"volcano.sh/task-spec": "worker"})]
    ssn = session(objs)
    task = next(t for t in ssn.tasks.values() if t.name == "p1")
    scores = dict(zip(ssn.table.names, ssn.plugins["network-topology-aware"].node_scores(task, np.arange(len(ssn.table))).tolist()))
    want = {"s3-n1": 25.8, "s3-n2": 25.8, "s4-n1": 21.6, "s4-n2": 21.6, "s5-n1": 19.9, "s5-n2": 19.9, "s6-n1": 15.7, "s6-n2": 15.7}
    assert scores == pytest.approx(want, abs=0.05)


def test_hypernode_scores_for_a_sub_group_count_its_pods_only() -> None:
    # TestHyperNodeOrderFn scores the sub-group task1-worker: a master pod of another
    # sub-group (the default one) changes nothing of it.
    objs = cluster() + [podgroup("pg1", 2, queue="q1", namespace="ns1", networkTopology={"mode": "hard", "highestTierAllowed": 2},
                                 subGroupPolicy=_worker_subgroup())]
    objs += [pod(f"p{i}", "pg1", cpu="4", memory="4G", namespace="ns1", labels={"volcano.sh/task-spec": "worker"}) for i in (1, 2)]
    objs += [pod("m", "pg1", cpu="8", memory="8G", namespace="ns1")]
    ssn = session(objs)
    job = ssn.jobs["ns1/pg1"]
    sub = job.sub_jobs.by_uid["ns1/pg1/task1-worker"]
    scores = ssn.hypernode_order(job, sub, ["s0", "s1", "s2", "s3", "s4", "s5", "s6"])
    want = {"s0": 25.0, "s1": 58.3, "s2": 45.8, "s3": 0.0, "s4": 100.0, "s5": 0.0, "s6": 75.0}
    assert scores == pytest.approx(want, abs=0.05)


def test_the_gradient_of_a_sub_group_is_by_its_own_tier_and_pending_pods() -> None:
    # Volcano HyperNodeGradientForSubJobFn: the sub-group's tier (1) and its pending pods'
    # requests (two of 3 CPUs: only the leaves with 8 free CPUs, s4 and s6), under the HyperNode
    # given; the gang's own tier (2) and the sub-group of the master do not count.
    objs = cluster() + [podgroup("pg1", 3, queue="q1", namespace="ns1", networkTopology={"mode": "hard", "highestTierAllowed": 2},
                                 subGroupPolicy=_worker_subgroup(mode="hard", highestTierAllowed=1))]
    objs += [pod(f"p{i}", "pg1", cpu="3", memory="1G", namespace="ns1", labels={"volcano.sh/task-spec": "worker"}) for i in (1, 2)]
    objs += [pod("m", "pg1", cpu="1", memory="1G", namespace="ns1")]
    ssn = session(objs)
    job = ssn.jobs["ns1/pg1"]
    sub = job.sub_jobs.by_uid["ns1/pg1/task1-worker"]
    assert ssn.hypernode_gradient(job, "s0", PURPOSE_ALLOCATE, sub) == [["s4", "s6"]]
    assert ssn.hypernode_gradient(job, "s2", PURPOSE_ALLOCATE, sub) == [["s6"]]
    assert ssn.hypernode_gradient(job, ssn.topology.top, PURPOSE_ALLOCATE) == [["s3", "s4", "s5", "s6"], ["s1", "s2"]]
    default = job.sub_jobs.by_uid["ns1/pg1"]  # the master's: the gang's constraint, tier 2
    assert ssn.hypernode_gradient(job, "s1", PURPOSE_ALLOCATE, default) == [["s3", "s4"], ["s1"]]
    # Eviction: by allocatable, widest first.
    assert ssn.hypernode_gradient(job, "s0", PURPOSE_EVICT, sub) == [["s4", "s6"]]
