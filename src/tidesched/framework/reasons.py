"""Reasons as data every reader shares.

* Why a pod was evicted: the actions that evict (their config names) and the reason text the
  session records for each eviction (``Decisions.eviction_reasons``), which the simulator's
  counters and invariant checks read back with :func:`evicted_by`.
* Why a pod with ResourceClaims fits no node (:func:`claims_reason`).
* Why a node fails a vGPU pod (the deviceshare predicate): ``model.devices`` finds the cause as a
  :class:`~tidesched.model.devices.Reason`; :func:`device_reason` words it for the pod's
  ``FailedScheduling`` event and ``explain`` (docs/gpu-sharing.md lists them).
"""

from __future__ import annotations

import re

from tidesched.model import devices
from tidesched.model.claims import PodClaim
from tidesched.model.vgpu import format_percent

# The actions that evict, by their config names (gangpreempt's and gangreclaim's reasons name
# them, so the simulator counts them with preempt's and reclaim's).
PREEMPT = "preempt"
RECLAIM = "reclaim"
GANG_PREEMPT = "gangpreempt"
GANG_RECLAIM = "gangreclaim"
SHUFFLE = "shuffle"


def eviction_reason(action: str, preemptor: str, node: str) -> str:
    """The reason recorded for a pod evicted by ``action`` to make room for the pod
    ``preemptor`` (its key) on ``node``; it starts with the action's name."""
    return f"{action}: evicted to make room for {preemptor} on node {node}"


_EVICTION_REASON = re.compile(r"^([^:\s]+): evicted to make room for (\S+) on node (\S+)$")


def eviction_source(reason: str) -> tuple[str, str, str] | None:
    """(action, preemptor key, node) of a reason :func:`eviction_reason` wrote; None for any
    other text."""
    m = _EVICTION_REASON.match(reason)
    return (m[1], m[2], m[3]) if m else None


def gang_eviction_reason(action: str, job: str) -> str:
    """The reason recorded for a pod gangpreempt or gangreclaim (``action``) evicts to make room
    for the job ``job`` (its key)."""
    return f"{action}: evicted to make room for job {job}"


def shuffle_reason(plugins: str) -> str:
    """The reason recorded for a pod the shuffle action evicts: ``plugins`` names the
    plugins whose VictimTasks fns chose it."""
    return f"{SHUFFLE}: evicted as chosen by {plugins}"


def evicted_by(reason: str, action: str) -> bool:
    """Whether an eviction ``reason`` names ``action``: anywhere in the text, in any case, as
    the simulator has always counted reclaims and preemptions."""
    return action in reason.lower()


# Why a node fails a vGPU pod: the words of each ``model.devices`` reason kind.
NO_VGPU_DEVICES = "node registers no vGPU devices"
NO_DEVICE_COMBINATION = "no GPU with both the compute and the memory the pod asks for"
_QUALIFY = {
    devices.UNUSABLE: "usable GPU",
    devices.NO_SHARE: "GPU with a free share (each takes at most its split count of pods)",
    devices.NOT_IDLE: "unshared GPU (a 100 % compute request takes a whole device)",
}


def device_reason(reason: devices.Reason) -> str:
    """The words of a vGPU fit reason, e.g. ``no device with 60 % compute free; best has 40 %``."""
    kind, need = reason.kind, reason.need
    if kind == devices.NO_DEVICES:
        return NO_VGPU_DEVICES
    if kind == devices.MODE:
        return f"pod asks for vGPU mode {reason.names[0]}, node is {reason.names[1]}"
    if kind == devices.TOO_FEW:
        return f"node has {reason.total} GPUs, pod asks for {need}"
    if kind in _QUALIFY:
        if need > 1:
            return f"{reason.have} of {reason.total} GPUs qualify as {_QUALIFY[kind]}, {need} needed"
        return f"no {_QUALIFY[kind]}"
    if kind == devices.COMPUTE:
        return _too_little(f"{format_percent(reason.want)} compute", format_percent(reason.best), reason)
    if kind == devices.MEMORY:
        asked = f"{reason.want} % memory" if reason.percent else f"{reason.want} MiB memory"
        return _too_little(asked, f"{reason.best} MiB", reason)
    if kind == devices.GROUP_SPREAD:
        return f"no GPU free of PodGroup {reason.names[0]}'s pods (vgpu-podgroup-policy spread)"
    return NO_DEVICE_COMBINATION


def _too_little(asked: str, best: str, reason: devices.Reason) -> str:
    if reason.need == 1:
        return f"no device with {asked} free; best has {best}"
    return f"only {reason.have} devices with {asked} free, {reason.need} needed; best has {best}"



def claims_reason(claims: tuple[PodClaim, ...]) -> str:
    """Why a pod with DRA ResourceClaims fits no node when its session read no DRA objects at
    all (a session opened without a claim ledger): it stays pending rather than bind without
    its devices."""
    named = ", ".join(c.describe() for c in claims)
    return f"pod uses ResourceClaims ({named}) and no DRA objects were read; it stays pending rather than bind without its devices"
