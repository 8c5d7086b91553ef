"""``explain`` says why a gang waits in network-topology terms."""

from __future__ import annotations

from builders import pod, podgroup
from tidesched.explain.group import Target, explain_group
from tidesched.model.loader import Manifest
from tidesched.scheduler import config_from_text, open_session
from tidesched.model.snapshot import build_snapshot
from topology_builders import TOPOLOGY_CONFIG, fat_tree


def gpu_pod(name: str, group: str, node: str = "", phase: str = "Pending", gpus: int = 1) -> dict:
    return pod(name, group, cpu="1", memory="1Gi", node=node, phase=phase, extra_requests={"nvidia.com/gpu": str(gpus)})


def session(objs: list[dict]):
    snap = build_snapshot([Manifest(f"o{i}", o) for i, o in enumerate(objs)])
    return open_session(snap, config_from_text(TOPOLOGY_CONFIG, "t"))


def test_a_hard_gang_that_no_leaf_holds_is_explained_by_the_closest_leaf() -> None:
    # Three leaves of two 4-GPU nodes (8 GPUs each); busy pods leave 5, 2 and 6 free.
    objs = fat_tree(1, 3, 2, gpus=4)
    objs += [podgroup("busy", 1), gpu_pod("b0", "busy", "n0-0", "Running", 3),
             gpu_pod("b1", "busy", "n1-0", "Running", 4), gpu_pod("b2", "busy", "n1-1", "Running", 2),
             gpu_pod("b3", "busy", "n2-0", "Running", 2)]
    objs.append(podgroup("train", 8, networkTopology={"mode": "hard", "highestTierAllowed": 1}))
    objs += [gpu_pod(f"t{i}", "train") for i in range(8)]
    lines = explain_group(session(objs), Target("podgroup", "ns", "train"))
    text = "\n".join(lines)
    assert "Network topology: hard, tier 1; applied: within one HyperNode of tier ≤ 1." in text
    assert "no tier-1 HyperNode has 8 free nvidia.com/gpu for the gang's 8 pending pods; best: leaf-2 with 6" in text, text
    assert "This session: 0 bound" in text


def test_a_gang_held_in_a_leaf_says_where() -> None:
    objs = fat_tree(1, 2, 2, gpus=4)
    objs.append(podgroup("train", 2, networkTopology={"mode": "soft"}))
    objs += [gpu_pod("t0", "train", "n1-0", "Running"), gpu_pod("t1", "train", "n1-1", "Running"), gpu_pod("t2", "train")]
    text = "\n".join(explain_group(session(objs), Target("podgroup", "ns", "train")))
    assert "applied: anywhere, lowest HyperNode first" in text
    assert "Held in HyperNode leaf-1 (tier 1)" in text


def test_the_view_lists_the_tree_and_where_each_gang_sits() -> None:
    from tidesched.explain.topology import topology_view
    from tidesched.scheduler import run_actions

    objs = fat_tree(2, 2, 2, gpus=4)
    objs.append(podgroup("train", 4, networkTopology={"mode": "hard", "highestTierAllowed": 1}))
    objs += [gpu_pod(f"t{i}", "train", gpus=2) for i in range(4)]
    ssn = session(objs)
    run_actions(ssn)
    view = topology_view(ssn)
    names = [(h["name"], h["depth"]) for h in view["hypernodes"]]
    assert names[0] == ("<cluster-top-hypernode>", 0) and ("spine-1", 1) in names and ("leaf-3", 2) in names
    assert view["resource"] == "nvidia.com/gpu"
    [gang] = view["gangs"]
    assert gang["gang"] == "ns/train" and gang["tier"] == 1 and gang["domain"].startswith("leaf-")
    row = next(h for h in view["hypernodes"] if h["name"] == gang["domain"])
    assert row["gangs"] == ["ns/train"] and row["free"] == 0 and row["total"] == 8


def partitioned(extra: list[dict]) -> list[dict]:
    """Two leaves of two 4-GPU nodes (and ``extra``); a gang of three partitions of two 4-GPU
    pods, each held to a leaf, two of them needed, the gang held to the spine."""
    objs = fat_tree(1, 2, 2, gpus=4) + extra
    policy = {"name": "part", "subGroupSize": 2, "minSubGroups": 2, "matchLabelKeys": ["volcano.sh/partition-id"],
              "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    objs.append(podgroup("train", 4, networkTopology={"mode": "hard", "highestTierAllowed": 2}, subGroupPolicy=[policy]))
    for i in range(6):
        p = gpu_pod(f"t{i}", "train", gpus=4)
        p["metadata"]["labels"] = {"volcano.sh/partition-id": str(i // 2)}
        objs.append(p)
    return objs


def test_explain_says_which_sub_group_waits_and_why() -> None:
    # Two leaves of two 4-GPU nodes; a busy pod leaves leaf-1 with 5 GPUs. The gang asks three
    # partitions of two 4-GPU pods, each held to a leaf, two of them needed: partition 0 takes
    # leaf-0, partition 1 waits (no leaf has 8 GPUs free), partition 2 too: 1 of 2 ready.
    objs = partitioned([podgroup("busy", 1), gpu_pod("b0", "busy", "n1-0", "Running", 3)])
    text = "\n".join(explain_group(session(objs), Target("podgroup", "ns", "train")))
    assert "Sub-groups (subGroupPolicy): each a gang of its own within its own HyperNode." in text, text
    assert ("  part: 3 sub-groups of 2 pods, 0 ready, minSubGroups 2; network topology hard, tier 1, "
            "applied: within one HyperNode of tier ≤ 1.") in text, text
    assert ("    The gang waits for 2 more of them to be ready. The HyperNodes of its tier have room for 1 more at once "
            "(leaf-0 1; 8 free nvidia.com/gpu each).") in text, text
    assert "    part-1: 0 of 2 placed; waiting with its gang (it alone would fit: see above)." in text, text
    assert ("Waiting for a domain: no tier ≤ 2 HyperNode has 16 free nvidia.com/gpu for the 4 pods the gang needs to start; "
            "best: spine-0 with 13.") in text


def test_explain_counts_sub_groups_a_gang_lacks() -> None:
    objs = fat_tree(1, 2, 2, gpus=4)
    policy = {"name": "part", "subGroupSize": 2, "minSubGroups": 2, "matchLabelKeys": ["volcano.sh/partition-id"]}
    objs.append(podgroup("train", 2, subGroupPolicy=[policy]))
    for i in range(2):
        p = gpu_pod(f"t{i}", "train")
        p["metadata"]["labels"] = {"volcano.sh/partition-id": "0"}
        objs.append(p)
    text = "\n".join(explain_group(session(objs), Target("podgroup", "ns", "train")))
    assert "  part: 1 sub-group of 2 pods, 0 ready, minSubGroups 2; no network topology." in text, text
    assert "Only 1 of the 2 sub-groups it needs have pods: the gang is not valid until more come." in text


def test_a_sub_group_left_over_when_the_gang_runs_says_why_it_waits() -> None:
    # Room for two partitions (one per leaf), three asked, two needed: the gang runs; the third
    # partition waits for a leaf within the gang's spine.
    objs = partitioned([])
    text = "\n".join(explain_group(session(objs), Target("podgroup", "ns", "train")))
    assert "  part: 3 sub-groups of 2 pods, 2 ready, minSubGroups 2;" in text, text
    assert "    part-0: 2 of 2 placed, held in leaf-0; ready." in text
    from tidesched.explain.topology import topology_view
    ssn = session(objs)
    explain_group(ssn, Target("podgroup", "ns", "train"))
    [gang] = topology_view(ssn)["gangs"]
    assert gang["domain"] == "spine-0" and gang["sub_groups"] == [
        {"name": "part-0", "domain": "leaf-0"}, {"name": "part-1", "domain": "leaf-1"}, {"name": "part-2", "domain": ""}]
    assert "    part-1: 2 of 2 placed, held in leaf-1; ready." in text
    assert ("    part-2: 0 of 2 placed; waiting: no tier-1 HyperNode within spine-0 has 8 free nvidia.com/gpu for "
            "sub-group part-2's 2 pending pods; best: leaf-0 with 0.") in text, text
