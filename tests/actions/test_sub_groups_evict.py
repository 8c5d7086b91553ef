"""Sub-groups in gangpreempt/gangreclaim and allocate's nomination fast path (Volcano v1.15.1
actions/utils/simulate.go, allocate.go allocateFromNomination): the pods a gang eviction places
are taken sub-group by sub-group, each sub-group in the first HyperNode of its own gradient that
takes it, whose name becomes the sub-group's nomination; allocate takes a nomination at once when
every pod may go to its nominated node there, and drops it otherwise."""

from __future__ import annotations

from typing import Any

from builders import node, pod, podgroup, queue
from tidesched.actions.gang_evict import pending_tasks
from tidesched.model.loader import Manifest
from tidesched.model.snapshot import build_snapshot
from tidesched.scheduler import config_from_text, open_session, run_actions
from topology_builders import hypernode

PART = "volcano.sh/partition-id"
SPEC = "volcano.sh/task-spec"
CONFIG = """actions: "{actions}"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: predicates
  - name: network-topology-aware
"""
POLICY = {"name": "w", "subGroupSize": 2, "minSubGroups": 2, "matchLabelKeys": [PART],
          "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}


def tree() -> list[dict[str, Any]]:
    """Two leaves of two 4-CPU nodes under a spine."""
    objs: list[dict[str, Any]] = [queue("q1", weight=1), {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100}]
    objs += [node(f"n{i}", cpu="4", memory="16Gi") for i in range(4)]
    objs += [hypernode("leaf-0", 1, ["n0", "n1"]), hypernode("leaf-1", 1, ["n2", "n3"]),
             hypernode("spine", 2, ["leaf-0", "leaf-1"], of="HyperNode")]
    return objs


def gang(pods: int, phase: str = "Inqueue", min_groups: int = 2, min_member: int = 0) -> list[dict[str, Any]]:
    """A gang of 4-CPU pods in two partitions, interleaved in task order (w0 and w2 in 0)."""
    objs = [podgroup("train", min_member or pods, queue="q1", phase=phase, priorityClassName="high",
                     networkTopology={"mode": "hard", "highestTierAllowed": 2},
                     subGroupPolicy=[dict(POLICY, minSubGroups=min_groups)])]
    objs += [pod(f"w{i}", "train", cpu="4", memory="1Gi", labels={PART: str(i % 2)}, priority=100) for i in range(pods)]
    return objs


def session(objs: list[dict[str, Any]], actions: str = "allocate"):  # type: ignore[no-untyped-def]
    return open_session(build_snapshot([Manifest(f"o{i}", o) for i, o in enumerate(objs)]),
                        config_from_text(CONFIG.format(actions=actions), "t"))


def test_pending_pods_go_sub_group_by_sub_group_and_only_the_first_of_a_ready_gang() -> None:
    # TestCollectPendingTasksForJobStartup_WorksheetOrder / ..._RunningJob_FirstWorksheetSubJobOnly.
    ssn = session(tree() + gang(4))
    assert [t.name for t in pending_tasks(ssn, ssn.jobs["ns/train"])] == ["w0", "w2", "w1", "w3"]
    running = tree() + gang(6, phase="Running", min_member=4)
    for p in running:
        if p.get("kind") == "Pod" and p["metadata"]["name"] in ("w0", "w1", "w2", "w3"):
            p["spec"]["nodeName"] = f"n{int(p['metadata']['name'][1])}"
            p["status"]["phase"] = "Running"
    for p in running:  # a third partition of two, not ready
        if p.get("kind") == "Pod" and p["metadata"]["name"] in ("w4", "w5"):
            p["metadata"]["labels"][PART] = "2"
    ssn = session(running)
    job = ssn.jobs["ns/train"]
    assert ssn.job_ready(job)
    assert [t.name for t in pending_tasks(ssn, job)] == ["w4", "w5"]


def test_gangpreempt_places_each_sub_group_in_its_own_leaf_and_nominates_it() -> None:
    objs = tree() + gang(4)
    for i in range(4):  # low-priority single pods fill every node
        objs += [podgroup(f"low{i}", 1, queue="q1", phase="Running"),
                 pod(f"low{i}", f"low{i}", cpu="4", memory="1Gi", node=f"n{i}", phase="Running")]
    ssn = session(objs, "gangpreempt")
    decisions = run_actions(ssn)
    out = decisions.to_json()
    assert sorted(out["evicted"]) == [f"ns/low{i}" for i in range(4)]
    # Partition 0 (w0, w2) in leaf-0, partition 1 (w1, w3) in leaf-1: not w0, w1 in leaf-0 as the
    # pods in task order would go.
    assert out["pipelined"] == {"ns/w0": "n0", "ns/w2": "n1", "ns/w1": "n2", "ns/w3": "n3"}
    assert ssn.topology.nominated == {"ns/train/w-0": "leaf-0", "ns/train/w-1": "leaf-1"}


def test_a_nomination_is_taken_as_it_stands_and_redeemed() -> None:
    # TestAllocateFromNomination_HappyPath in a session: each pod of partition 0 is nominated to
    # a node of leaf-1 (its gradient would pick leaf-0 first, by name), the partition to leaf-1.
    objs = tree() + gang(2, min_groups=1)
    for p in objs:
        if p.get("kind") == "Pod":
            p["metadata"]["labels"][PART] = "0"
    nominated = {"w0": "n3", "w1": "n2"}
    for p in objs:
        if p.get("kind") == "Pod":
            p["status"]["nominatedNodeName"] = nominated[p["metadata"]["name"]]
    ssn = session(objs)
    ssn.topology.nominated["ns/train/w-0"] = "leaf-1"
    out = run_actions(ssn).to_json()
    assert out["bound"] == {"ns/w0": "n3", "ns/w1": "n2"}
    assert ssn.topology.nominated == {}  # redeemed with the commit
    assert ssn.topology.sub_domain["ns/train/w-0"] == "leaf-1"


def test_a_nomination_that_does_not_hold_is_dropped_and_the_gradient_decides() -> None:
    # TestValidateNomination_MissBranches ("outside leaf set"): w1 is nominated to n0, outside
    # leaf-1: the nomination and the pods' nominated nodes are dropped; the gradient places the
    # partition in leaf-0, each pod by score (no longer on its nominated node first).
    objs = tree() + gang(2, min_groups=1)
    for p in objs:
        if p.get("kind") == "Pod":
            p["metadata"]["labels"][PART] = "0"
            p["status"]["nominatedNodeName"] = {"w0": "n3", "w1": "n0"}[p["metadata"]["name"]]
    ssn = session(objs)
    ssn.topology.nominated["ns/train/w-0"] = "leaf-1"
    out = run_actions(ssn).to_json()
    assert out["bound"] == {"ns/w0": "n0", "ns/w1": "n1"}
    assert ssn.topology.nominated == {}
    assert ssn.topology.unnominated == {t.uid for t in ssn.jobs["ns/train"].tasks.values()}


def test_a_pod_goes_to_its_nominated_node_first() -> None:
    # allocate.go's regular path (TestAllocate_FlatPathHonorsAndClearsNomination's pod): a pod
    # nominated to n3 goes there, not to n0, the first of equal nodes, unless it may not.
    objs = [queue("q1", weight=1), *(node(f"n{i}", cpu="4", memory="16Gi") for i in range(4)),
            podgroup("pg", 1, queue="q1"), pod("p", "pg", cpu="1", memory="1Gi")]
    objs[-1]["status"]["nominatedNodeName"] = "n3"
    assert run_actions(session(objs)).to_json()["bound"] == {"ns/p": "n3"}
    objs[-1]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "n1"}
    for n in objs[1:5]:
        n["metadata"]["labels"]["kubernetes.io/hostname"] = n["metadata"]["name"]
    assert run_actions(session(objs)).to_json()["bound"] == {"ns/p": "n1"}
