"""What a session decided (``Decisions``, the world applies it) and why a task found no node
(``FitErrors``): the records actions, the session and every reader of a session share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tidesched.model.dra.ledger import ClaimWrite
from tidesched.model.problems import Event
from tidesched.model.volumes import VolumePlan


@dataclass(slots=True)
class FitErrors:
    """Why a task found no node: per-reason node counts, plus a job-level message."""

    total_nodes: int
    reasons: dict[str, int] = field(default_factory=dict)
    message: str = ""
    unresolvable: np.ndarray | None = None  # mask of nodes failing for unresolvable reasons

    def error(self) -> str:
        if self.message:
            return self.message
        if not self.reasons:
            return f"0/{self.total_nodes} nodes are unavailable"
        hist = sorted(f"{n} {r}" for r, n in self.reasons.items())
        return f"0/{self.total_nodes} nodes are unavailable: {', '.join(hist)}."


@dataclass(slots=True)
class Decisions:
    """What a session decided; the world applies it."""

    bound: dict[str, str]
    pipelined: dict[str, str]
    evicted: list[str]
    podgroups: dict[str, str]
    podgroup_conditions: dict[str, list[dict[str, Any]]]
    queue_allocated: dict[str, dict[str, str]]
    events: list[Event]
    eviction_reasons: dict[str, str] = field(default_factory=dict)
    # Pods left pending for a reason other than "Unschedulable" (the PodScheduled=False
    # condition's reason, e.g. GangTimeout), by pod key.
    pod_condition_reasons: dict[str, str] = field(default_factory=dict)
    # The earliest session time (seconds since the epoch) at which a time-based rule (a gang
    # timeout) falls due, if any: a world that skips idle sessions must hold one then.
    wake_at: float | None = None
    # Annotations to write on a bound pod with its binding (the vGPU devices it was given,
    # plugins/deviceshare.py), by pod key.
    bind_annotations: dict[str, dict[str, str]] = field(default_factory=dict)
    # The DRA claim writes each bound pod with ResourceClaims needs before its Binding (the
    # allocation when the session made it, and the pod added to reservedFor), by pod key.
    claim_writes: dict[str, list[ClaimWrite]] = field(default_factory=dict)
    # Pods whose queue now takes them: their Volcano queue-admission gate is to be removed
    # (feature SchedulingGatesQueueAdmission; framework/gates.py), by pod key, in that order.
    ungated: list[str] = field(default_factory=list)
    # What each bind writes first (PVs bound to claims, claims to provision), by pod key.
    volume_bindings: dict[str, VolumePlan] = field(default_factory=dict)
    # Pipelined pods to get status.nominatedNodeName (preempt or reclaim evicted for them on
    # that node; allocate tries it first next session), by pod key.
    nominated: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {
            "bound": dict(sorted(self.bound.items())),
            "pipelined": dict(sorted(self.pipelined.items())),
            "evicted": sorted(self.evicted),
            "podgroups": dict(sorted(self.podgroups.items())),
            "events": [e.to_dict() for e in self.events],
        }
        if self.claim_writes:
            out["claims"] = {k: {w.claim: _devices(w) for w in v} for k, v in sorted(self.claim_writes.items())}
        if self.bind_annotations:
            out["bind_annotations"] = {k: dict(sorted(v.items())) for k, v in sorted(self.bind_annotations.items())}
        if self.ungated:
            out["ungated"] = sorted(self.ungated)
        if self.nominated:
            out["nominated"] = dict(sorted(self.nominated.items()))
        if self.volume_bindings:
            out["volume_bindings"] = {k: v.to_json() for k, v in sorted(self.volume_bindings.items())}
        return out


def _devices(write: ClaimWrite) -> list[str]:
    """A claim write in the JSON decisions: its devices as driver/pool/device ([] when the
    claim was allocated before, so the bind only reserves it)."""
    if write.allocation is None:
        return []
    return ["/".join((r["driver"], r["pool"], r["device"])) for r in write.allocation["devices"]["results"]]
