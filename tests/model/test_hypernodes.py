"""HyperNodes: parsing, the tree over the nodes, its problems, and incremental upkeep."""

from __future__ import annotations

from typing import Any

import pytest

from tidesched.model.cache import ClusterCache
from tidesched.model.hypernode_tree import CLUSTER_TOP, HyperNodeIndex, build_tree
from tidesched.model.hypernodes import parse_hypernode
from tidesched.model.problems import ObjectError
from tidesched.model.snapshot import build_snapshot
from tidesched.model.state import build_state


def hn(name: str, tier: int, *members: Any, tier_name: str = "") -> dict[str, Any]:
    ms = []
    for m in members:
        if isinstance(m, dict):
            ms.append(m)
        elif m.startswith("hn:"):
            ms.append({"type": "HyperNode", "selector": {"exactMatch": {"name": m[3:]}}})
        elif m.startswith("re:"):
            ms.append({"type": "Node", "selector": {"regexMatch": {"pattern": m[3:]}}})
        else:
            ms.append({"type": "Node", "selector": {"exactMatch": {"name": m}}})
    spec: dict[str, Any] = {"tier": tier, "members": ms}
    if tier_name:
        spec["tierName"] = tier_name
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name}, "spec": spec}


def node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def tree_of(*objs: dict[str, Any]):
    return build_state(build_snapshot(objs), ["volcano"]).hypernodes


FAT_TREE = [
    *(node(f"n{i}", rack=f"r{i // 2}") for i in range(8)),
    hn("s0", 1, "n0", "n1"), hn("s1", 1, "n2", "n3"), hn("s2", 1, "n4", "n5"), hn("s3", 1, "n6", "n7"),
    hn("s4", 2, "hn:s0", "hn:s1", tier_name="spine"), hn("s5", 2, "hn:s2", "hn:s3", tier_name="spine"),
    hn("s6", 3, "hn:s4", "hn:s5"),
]


def test_three_tiers_under_the_cluster_top() -> None:
    t = tree_of(*FAT_TREE)
    assert t.ready and not t.problems
    assert t.tiers == [1, 2, 3, 4]
    assert t.top.tier == 4 and t.top.children == ("s6",) and t.infos["s6"].parent == CLUSTER_TOP
    assert t.infos["s4"].nodes == {"n0", "n1", "n2", "n3"}
    assert t.infos["s6"].nodes == {f"n{i}" for i in range(8)}
    assert t.infos["s4"].children == ("s0", "s1")
    assert t.lca("s0", "s1") == "s4" and t.lca("s0", "s3") == "s6" and t.lca("", "s2") == "s2"
    assert t.ancestors("s1") == ("s1", "s4", "s6", CLUSTER_TOP)
    assert t.leaf_of["n5"] == "s2"
    assert t.tier_names == {"spine": 2}


def test_without_hypernodes_the_top_holds_every_node() -> None:
    t = tree_of(node("a"), node("b"))
    assert t.tiers == [1] and t.top.nodes == {"a", "b"} and t.leaf_of == {"a": CLUSTER_TOP, "b": CLUSTER_TOP}
    assert not t.has_hypernodes


def test_regex_is_searched_as_go_does_and_label_match_selects_by_labels() -> None:
    t = tree_of(
        node("gpu-a1"), node("gpu-a2"), node("cpu-a1"), node("x", rack="r9"), node("y", rack="r9"),
        hn("a", 1, "re:a[0-9]$"), hn("lab", 1, {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r9"}}}}),
    )
    assert t.infos["a"].nodes == {"gpu-a1", "gpu-a2", "cpu-a1"}  # unanchored, as regexp.MatchString
    assert t.infos["lab"].nodes == {"x", "y"}


def test_a_pattern_go_cannot_compile_selects_nothing_and_is_reported() -> None:
    t = tree_of(node("n1"), hn("bad", 1, "re:(?=n)n1"), hn("good", 1, "n1"))
    assert t.infos["bad"].nodes == frozenset() and t.infos["good"].nodes == {"n1"}
    assert t.ready
    [p] = [p for p in t.problems if p.name == "bad"]
    assert p.reason == "InvalidHyperNodeMember" and "regexMatch.pattern" in p.message


def test_a_hypernode_with_two_parents_keeps_the_first_and_the_tree_is_not_ready() -> None:
    t = tree_of(node("n1"), hn("leaf", 1, "n1"), hn("p1", 2, "hn:leaf"), hn("p2", 2, "hn:leaf"))
    assert not t.ready
    assert t.infos["leaf"].parent == "p1" and t.infos["p2"].nodes == frozenset()
    assert any(p.name == "p2" and p.reason == "HyperNodeConflict" and "already belongs to p1" in p.message for p in t.problems)


def test_a_cycle_is_cut_reported_and_the_tree_is_not_ready() -> None:
    t = tree_of(node("n1"), hn("a", 2, "hn:b", "n1"), hn("b", 2, "hn:a"))
    assert not t.ready
    assert any(p.reason == "HyperNodeCycle" for p in t.problems)
    assert t.ancestors("a")[-1] == CLUSTER_TOP and t.ancestors("b")[-1] == CLUSTER_TOP  # no endless walk
    assert t.infos["b"].nodes == {"n1"} or t.infos["a"].nodes == {"n1"}


def test_missing_member_hypernode_is_ignored_and_reported() -> None:
    t = tree_of(node("n1"), hn("p", 2, "hn:ghost", "n1"))
    assert t.ready and t.infos["p"].nodes == {"n1"}
    assert [p.reason for p in t.problems] == ["HyperNodeMemberNotFound"]


def test_nodes_not_ready_are_outside_every_hypernode() -> None:
    down = node("n1")
    down["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    t = tree_of(down, node("n2"), hn("s", 1, "n1", "n2"))
    assert t.infos["s"].nodes == {"n2"} and t.top.nodes == {"n2"}


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"members": []}, "spec.tier"),
        ({"tier": "x"}, "spec.tier"),
        ({"tier": 1, "members": [{"type": "Switch", "selector": {"exactMatch": {"name": "a"}}}]}, "spec.members[0].type"),
        ({"tier": 1, "members": [{"type": "Node", "selector": {}}]}, "spec.members[0].selector"),
        ({"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "b"}}}]},
         "spec.members[0].selector"),
        ({"tier": -1}, "spec.tier"),
    ],
)
def test_malformed_hypernodes_name_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ObjectError) as exc:
        parse_hypernode({"kind": "HyperNode", "metadata": {"name": "h"}, "spec": spec})
    assert exc.value.field == field


def test_a_malformed_hypernode_is_a_warning_and_the_others_stay() -> None:
    snap = build_snapshot([node("n1"), hn("good", 1, "n1"), {"kind": "HyperNode", "metadata": {"name": "bad"}, "spec": {}}])
    assert [h.name for h in snap.hypernodes] == ["good"]
    assert any(p.name == "bad" and "spec.tier" in p.message for p in snap.problems)


def test_index_follows_label_changes_incrementally() -> None:
    index = HyperNodeIndex()
    index.set_node("a", {"rack": "1"})
    index.set_node("b", {"rack": "2"})
    index.set_hypernode("r1", parse_hypernode(hn("r1", 1, {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "1"}}}})))
    t1 = index.tree()
    assert t1.infos["r1"].nodes == {"a"}
    assert index.tree() is t1  # nothing changed: the same tree
    index.set_node("b", {"rack": "1"})
    assert index.tree().infos["r1"].nodes == {"a", "b"}
    index.set_node("a", None)
    assert index.tree().infos["r1"].nodes == {"b"}


def test_cache_keeps_the_tree_as_the_rebuild_does() -> None:
    cache = ClusterCache()
    for obj in FAT_TREE:
        kind, name = obj["kind"], obj["metadata"]["name"]
        cache.update(kind, name, obj)
    _snap, state = cache.open()
    rebuilt = tree_of(*FAT_TREE)
    assert {n: (i.parent, i.nodes, i.tier) for n, i in state.hypernodes.infos.items()} == {
        n: (i.parent, i.nodes, i.tier) for n, i in rebuilt.infos.items()
    }
    # Move n7 to s2 by its name: only that HyperNode changes.
    cache.update("HyperNode", "s2", hn("s2", 1, "n4", "n5", "n7"))
    cache.update("HyperNode", "s3", hn("s3", 1, "n6"))
    _snap, state = cache.open()
    assert state.hypernodes.infos["s2"].nodes == {"n4", "n5", "n7"} and state.hypernodes.leaf_of["n7"] == "s2"
    cache.update("HyperNode", "s6", None)
    _snap, state = cache.open()
    assert state.hypernodes.infos["s4"].parent == CLUSTER_TOP and "s6" not in state.hypernodes.infos
    assert build_tree([], [("x", {})]).top.nodes == {"x"}
