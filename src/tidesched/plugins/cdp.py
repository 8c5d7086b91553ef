"""cdp plugin (Volcano plugins/cdp): cooldown protection.

A pod may carry ``volcano.sh/cooldown-time`` (a Go duration such as ``600s`` or ``10m``) as a
label or, when there is no such label, an annotation (the vcjob controller copies the Job's
onto its pods, the podgroup controller a plain pod's onto its PodGroup). A Running pod whose
``PodScheduled`` condition turned True less than that long ago is protected: preempt and
reclaim do not take it as a victim. Elastic jobs are so kept from losing a pod that has only
just started (Volcano issue 2075).

Hooks (Volcano's): Preemptable and Reclaimable, both the same filter — every candidate that
is not protected, and always a vote (Permit), so an empty answer leaves the tier without
victims. A pod without the key, with a value that is no duration, not Running, or without a
True ``PodScheduled`` condition is not protected.

Time is the session's (``Session.now``: the clock in ``run``, ``--now`` in ``schedule``,
simulated time in ``simulate``); a protection that runs out later asks the world for a session
then (``Session.wake``). A value that is no duration is reported as a Warning event on the pod
(Volcano only logs it). No arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.framework.plugin import PERMIT, Plugin
from tidesched.model.durations import parse_go_duration
from tidesched.model.problems import ObjectError

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo

COOLDOWN_TIME = "volcano.sh/cooldown-time"


def cooldown_of(task: "TaskInfo") -> tuple[float | None, str]:
    """(seconds, "") when the pod asks for a cooldown, (None, why not) when its value is no
    duration, (None, "") when it asks for none. The label is read first, as in Volcano."""
    meta = task.pod.meta
    where = "label" if COOLDOWN_TIME in meta.labels else "annotation"
    raw = meta.labels.get(COOLDOWN_TIME, meta.annotations.get(COOLDOWN_TIME))
    if raw is None:
        return None, ""
    try:
        return parse_go_duration(raw, f"{where} {COOLDOWN_TIME}"), ""
    except ObjectError as exc:
        return None, str(exc)


class CdpPlugin(Plugin):
    name = "cdp"

    def on_session_open(self, ssn: "Session") -> None:
        warned: set[str] = set()

        def protected(task: "TaskInfo") -> bool:
            cooldown, problem = cooldown_of(task)
            if cooldown is None:
                if problem and task.uid not in warned:
                    warned.add(task.uid)
                    ssn.event("Pod", task.namespace, task.name, "Warning", "InvalidCooldownTime",
                              f"{problem}; the pod has no cooldown protection")
                return False
            since = task.pod.scheduled_time
            if task.pod.phase != "Running" or not since:
                return False
            until = since + cooldown
            if until > ssn.now:
                ssn.wake(until)
                return True
            return False

        def victims(_evictor: "TaskInfo", candidates: list["TaskInfo"]) -> tuple[list["TaskInfo"], int]:
            return [t for t in candidates if not protected(t)], PERMIT

        ssn.add_fn("preemptable", self.name, victims)
        ssn.add_fn("reclaimable", self.name, victims)
