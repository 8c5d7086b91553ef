"""What every part of the simulator shares: the annotations it reads on objects, the kinds a
simulated world holds, :class:`ScenarioError`, and scenario durations (``90s``, ``1h30m``,
``08:00``)."""

from __future__ import annotations

from typing import Any

from tidesched.model.durations import DurationError, parse_span

# Annotations the simulator reads on pods (or inherits from their Job/Deployment).
DURATION_ANNOTATION = "sim.tidesched.io/duration"  # run time once started; absent: runs forever
EXIT_CODE_ANNOTATION = "sim.tidesched.io/exit-code"  # non-zero: the pod ends Failed
VOLCANO_JOB_API = "batch.volcano.sh"
# Kinds the simulated world keeps and acts on.
WORLD_KINDS = (
    "Node",
    "Queue",
    "PriorityClass",
    "PodGroup",
    "Job",
    "Deployment",
    "ReplicaSet",
    "Pod",
    "PodDisruptionBudget",
    "HyperNode",  # network topology (model.hypernodes); the world only keeps them
    "ResourceQuota",  # held as given: no quota controller keeps its status.used here
    "Numatopology",  # held as given: no resource exporter updates it here
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    # DRA (resource.k8s.io/v1): the simulated resourceclaim controller makes and frees claims
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaimTemplate",
    "ResourceClaim",
)
# The world's namespaced kinds (the others are cluster-scoped).
NAMESPACED_KINDS = frozenset(
    {"Pod", "PodGroup", "Job", "Deployment", "ReplicaSet", "PodDisruptionBudget", "ResourceQuota", "PersistentVolumeClaim",
     "ResourceClaim", "ResourceClaimTemplate"}
)


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message names the file and entry."""


def parse_duration(value: Any, where: str) -> float:
    """A scenario duration (``model.durations.parse_span``), a ScenarioError naming ``where``
    when it cannot be read."""
    try:
        return parse_span(value, where)
    except DurationError as exc:
        raise ScenarioError(str(exc)) from None
