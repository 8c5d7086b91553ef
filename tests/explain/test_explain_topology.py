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
