"""Why a pod was evicted, as data every reader shares: the actions that evict (their config
names) and the reason text the session records for each eviction (``Decisions.eviction_reasons``),
which the simulator's counters and invariant checks read back with :func:`evicted_by`."""

from __future__ import annotations

# The actions that evict, by their config names.
PREEMPT = "preempt"
RECLAIM = "reclaim"


def eviction_reason(action: str, preemptor: str, node: str) -> str:
    """The reason recorded for a pod evicted by ``action`` to make room for the pod
    ``preemptor`` (its key) on ``node``; it starts with the action's name."""
    return f"{action}: evicted to make room for {preemptor} on node {node}"


def evicted_by(reason: str, action: str) -> bool:
    """Whether an eviction ``reason`` names ``action``: anywhere in the text, in any case, as
    the simulator has always counted reclaims and preemptions."""
    return action in reason.lower()
