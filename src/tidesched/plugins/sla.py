"""sla plugin (Volcano plugins/sla): a job waiting-time service level agreement.

A job's waiting time is its PodGroup's annotation ``volcano.sh/sla-waiting-time``, else
``sla-waiting-time`` (the Job's annotation, which Volcano's job controller copies to the
PodGroup), else the plugin argument ``sla-waiting-time``; all Go durations (``3s``, ``1h30m``).
A job without one is not affected.

- JobOrder: jobs with a waiting time first, by deadline (PodGroup creation + waiting time),
  earliest first; jobs without one tie.
- JobEnqueueable and JobPipelined: Permit once the deadline has passed (the job is admitted,
  and kept as pipelined, whatever later tiers say), else Abstain.

Differences from Volcano: an unreadable or non-positive annotation is ignored as there, and
also reported as a Warning event on the PodGroup; an unreadable argument is a config error
(Volcano logs it and goes on without a default).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from tidesched.framework.plugin import ABSTAIN, PERMIT, Plugin
from tidesched.model.durations import parse_go_duration
from tidesched.model.problems import ObjectError

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo

WAITING_TIME = "sla-waiting-time"  # plugin argument and the Job's annotation
WAITING_TIME_ANNOTATION = "volcano.sh/sla-waiting-time"  # the PodGroup's own, read first


@functools.lru_cache(maxsize=256)
def _waiting_time(raw: str, key: str) -> tuple[float | None, str]:
    """(seconds, "") for a positive Go duration, else (None, why not)."""
    try:
        seconds = parse_go_duration(raw, key)
    except ObjectError as exc:
        return None, str(exc)
    if seconds <= 0:
        return None, f"{key}: {raw!r} is not a positive duration"
    return seconds, ""


class SlaPlugin(Plugin):
    name = "sla"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.default: float | None = None
        raw = arguments.get_str(WAITING_TIME, "")
        if raw:
            value, _ = _waiting_time(raw, WAITING_TIME)
            if value is None:
                raise arguments.bad_value(WAITING_TIME, "a positive Go duration such as 30s, 5m or 1h30m", raw)
            self.default = value

    def waiting_time(self, ssn: "Session", job: "JobInfo") -> float | None:
        annotations = job.pod_group.meta.annotations
        for key in (WAITING_TIME_ANNOTATION, WAITING_TIME):
            raw = annotations.get(key)
            if raw is None:
                continue
            value, problem = _waiting_time(raw, key)
            if value is not None:
                return value
            ssn.event("PodGroup", job.namespace, job.name, "Warning", "InvalidSLAWaitingTime",
                      f"PodGroup {job.uid}: annotation {problem}; ignored")
        return self.default

    def on_session_open(self, ssn: "Session") -> None:
        deadlines: dict[str, float | None] = {}

        def deadline(job: "JobInfo") -> float | None:
            if job.uid not in deadlines:
                wait = self.waiting_time(ssn, job)
                deadlines[job.uid] = None if wait is None else job.creation + wait
            return deadlines[job.uid]

        def order_key(job: "JobInfo") -> tuple[int, float]:
            due = deadline(job)
            return (1, 0.0) if due is None else (0, due)

        def job_order(l: "JobInfo", r: "JobInfo") -> int:
            lk, rk = order_key(l), order_key(r)
            return 0 if lk == rk else (-1 if lk < rk else 1)

        def permitted(job: "JobInfo") -> int:
            due = deadline(job)
            if due is None:
                return ABSTAIN
            if ssn.now < due:
                ssn.wake(due)  # a world that skips idle sessions still holds one at the deadline
                return ABSTAIN
            return PERMIT

        ssn.add_fn("job_order", self.name, job_order)
        ssn.add_order_key(self.name, order_key)
        ssn.add_fn("job_enqueueable", self.name, permitted)
        ssn.add_fn("job_pipelined", self.name, permitted)
