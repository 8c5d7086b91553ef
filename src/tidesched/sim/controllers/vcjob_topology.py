"""What Volcano's Job controller (v1.15.1) writes of a Job's network topology: the Job's
``spec.networkTopology`` onto its PodGroup (``highestTierAllowed`` winning over
``highestTierName``), each task's ``partitionPolicy`` as a ``subGroupPolicy`` (pods of the task,
grouped by their ``volcano.sh/partition-id`` label, ``partitionSize`` pods per partition,
``minPartitions`` of them needed), and each pod's partition label (its index divided by the
partition size)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidesched.model.network_topology import PARTITION_ID_LABEL
from tidesched.model.objects import TASK_SPEC_KEY


def _partition(task: Mapping[str, Any]) -> Mapping[str, Any] | None:
    pp = task.get("partitionPolicy")
    return pp if isinstance(pp, Mapping) else None


def podgroup_topology(job_spec: Mapping[str, Any]) -> dict[str, Any]:
    """The PodGroup spec fields the controller sets from the Job (none when it states none)."""
    out: dict[str, Any] = {}
    nt = job_spec.get("networkTopology")
    if isinstance(nt, Mapping):
        pg_nt: dict[str, Any] = {"mode": nt.get("mode") or "hard"}
        if nt.get("highestTierAllowed") is not None:
            pg_nt["highestTierAllowed"] = nt["highestTierAllowed"]
        elif nt.get("highestTierName"):
            pg_nt["highestTierName"] = nt["highestTierName"]
        out["networkTopology"] = pg_nt
    groups = []
    for task in job_spec.get("tasks") or []:
        pp = _partition(task) if isinstance(task, Mapping) else None
        if pp is None:
            continue
        group: dict[str, Any] = {
            "name": task.get("name"),
            "subGroupSize": pp.get("partitionSize"),
            "minSubGroups": pp.get("minPartitions") or 0,
            "labelSelector": {"matchLabels": {TASK_SPEC_KEY: task.get("name")}},
            "matchLabelKeys": [PARTITION_ID_LABEL],
        }
        if isinstance(pp.get("networkTopology"), Mapping):
            group["networkTopology"] = dict(pp["networkTopology"])
        groups.append(group)
    if groups:
        out["subGroupPolicy"] = groups
    return out


def min_task_member(task: Mapping[str, Any], replicas: int) -> int | None:
    """A task's minimum from its partitions when it states no minAvailable (else None)."""
    pp = _partition(task)
    if task.get("minAvailable") is None and pp and pp.get("minPartitions") and pp.get("partitionSize"):
        return int(pp["minPartitions"]) * int(pp["partitionSize"])
    return None


def partition_labels(job_spec: Mapping[str, Any], task_name: str, index: int) -> dict[str, str]:
    for task in job_spec.get("tasks") or []:
        if isinstance(task, Mapping) and task.get("name") == task_name:
            pp = _partition(task)
            if pp is None:
                return {}
            size = pp.get("partitionSize")
            size = size if isinstance(size, int) and size > 0 else 0
            return {PARTITION_ID_LABEL: str(index // size if size else 0)}
    return {}
