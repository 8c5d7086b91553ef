"""A gang's network-topology constraints: the PodGroup's fields and a bare pod's annotations."""

from __future__ import annotations

import pytest

from tidesched.model.network_topology import HARD, SOFT, pod_network_topology, sub_group_key
from tidesched.model.objects import parse_podgroup
from tidesched.model.problems import ObjectError
from tidesched.model.snapshot import build_snapshot


def pg(spec: dict) -> dict:
    return {"kind": "PodGroup", "metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 2, **spec}}


def test_network_topology_and_sub_groups_are_read() -> None:
    rec = parse_podgroup(pg({
        "networkTopology": {"mode": "soft", "highestTierName": "spine"},
        "subGroupPolicy": [{"name": "w", "subGroupSize": 4, "minSubGroups": 2, "matchLabelKeys": ["volcano.sh/partition-id"],
                            "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "w"}},
                            "networkTopology": {"highestTierAllowed": 1}}],
    }))
    assert rec.topology is not None
    nt = rec.topology.network_topology
    assert nt is not None and (nt.mode, nt.highest_tier, nt.highest_tier_name) == (SOFT, None, "spine")
    [g] = rec.topology.sub_groups
    assert (g.name, g.size, g.min_groups, g.match_label_keys) == ("w", 4, 2, ("volcano.sh/partition-id",))
    assert g.network_topology is not None and (g.network_topology.mode, g.network_topology.highest_tier) == (HARD, 1)
    assert sub_group_key(g, {"volcano.sh/task-spec": "w", "volcano.sh/partition-id": "3"}) == "3"
    assert sub_group_key(g, {"volcano.sh/task-spec": "ps", "volcano.sh/partition-id": "3"}) is None
    assert parse_podgroup(pg({})).topology is None


@pytest.mark.parametrize("spec, field", [
    ({"networkTopology": {"mode": "strict"}}, "spec.networkTopology.mode"),
    ({"networkTopology": {"highestTierAllowed": -1}}, "spec.networkTopology.highestTierAllowed"),
    ({"subGroupPolicy": [{"subGroupSize": 0}]}, "spec.subGroupPolicy[0].subGroupSize"),
    ({"subGroupPolicy": "x"}, "spec.subGroupPolicy"),
])
def test_bad_constraints_name_the_field(spec: dict, field: str) -> None:
    with pytest.raises(ObjectError) as exc:
        parse_podgroup(pg(spec))
    assert exc.value.field == field


def test_a_bare_pods_group_takes_the_annotations_as_volcanos_podgroup_controller() -> None:
    assert pod_network_topology({}) is None
    t = pod_network_topology({"volcano.sh/network-topology-highest-tier": "2"})
    assert t is not None and t.network_topology is not None
    assert (t.network_topology.mode, t.network_topology.highest_tier) == (HARD, 2)
    t = pod_network_topology({"volcano.sh/network-topology-mode": "SOFT", "volcano.sh/network-topology-highest-tier": "x"})
    assert t is not None and t.network_topology is not None
    assert (t.network_topology.mode, t.network_topology.highest_tier) == (SOFT, None)
    snap = build_snapshot([{"kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u",
                            "annotations": {"volcano.sh/network-topology-mode": "hard", "volcano.sh/network-topology-highest-tier": "1"}},
                            "spec": {"schedulerName": "volcano", "containers": []}}])
    [made] = snap.podgroups
    assert made.topology is not None and made.topology.network_topology is not None
    assert made.topology.network_topology.highest_tier == 1
