"""The simulator's Job controller writes a Job's network topology and partitions as Volcano's does."""

from __future__ import annotations

from tidesched.sim.controllers.vcjob_topology import min_task_member, partition_labels, podgroup_topology

JOB = {
    "networkTopology": {"mode": "hard", "highestTierAllowed": 2, "highestTierName": "ignored"},
    "tasks": [
        {"name": "ps", "replicas": 1},
        {"name": "w", "replicas": 8, "partitionPolicy": {"totalPartitions": 2, "partitionSize": 4, "minPartitions": 1,
                                                          "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}},
    ],
}


def test_podgroup_fields_from_the_job() -> None:
    out = podgroup_topology(JOB)
    assert out["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    [g] = out["subGroupPolicy"]
    assert g == {"name": "w", "subGroupSize": 4, "minSubGroups": 1,
                 "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "w"}},
                 "matchLabelKeys": ["volcano.sh/partition-id"],
                 "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    assert podgroup_topology({"tasks": [{"name": "a"}]}) == {}


def test_partition_labels_and_task_minimum() -> None:
    assert [partition_labels(JOB, "w", i) for i in (0, 3, 4, 7)] == [{"volcano.sh/partition-id": v} for v in "0011"]
    assert partition_labels(JOB, "ps", 0) == {}
    assert min_task_member(JOB["tasks"][1], 8) == 4 and min_task_member(JOB["tasks"][0], 1) is None
