"""What the scheduler reads of a pod's ``status.conditions``: when the pod was scheduled, and
whether a scheduler's preemption is what is terminating it.

The API server sets the ``PodScheduled`` condition to True when a pod is bound; its
``lastTransitionTime`` is when that happened. The cdp plugin (cooldown protection) counts a
pod's cooldown from it, as Volcano's does. vc-scheduler marks a pod it evicts with
``DisruptionTarget`` True, reason ``PreemptionByScheduler``; preempt reads it (Volcano
podTerminatingByPreemption).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidesched.model.fields import list_of, parse_time


def scheduled_time(status: Mapping[str, Any]) -> float:
    """The ``lastTransitionTime`` of the first ``PodScheduled`` condition that is True (as
    Volcano's cdp looks it up), 0 when there is none; a malformed time is an ObjectError naming
    the condition's field."""
    for i, cond in enumerate(list_of(status, "conditions", "status.conditions")):
        if not isinstance(cond, Mapping) or cond.get("type") != "PodScheduled":
            continue
        if cond.get("status") != "True":
            continue
        return parse_time(cond.get("lastTransitionTime"), f"status.conditions[{i}].lastTransitionTime")
    return 0.0


def preempted_by_scheduler(status: Mapping[str, Any]) -> bool:
    """The first ``DisruptionTarget`` condition is True with reason ``PreemptionByScheduler``."""
    for cond in list_of(status, "conditions", "status.conditions"):
        if isinstance(cond, Mapping) and cond.get("type") == "DisruptionTarget":
            return cond.get("status") == "True" and cond.get("reason") == "PreemptionByScheduler"
    return False
