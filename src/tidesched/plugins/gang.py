"""gang plugin (Volcano plugins/gang): all-or-nothing scheduling of a PodGroup.

- JobValid: enough valid tasks in total (minMember) and per role (minTaskMember), and enough
  sub-groups of each ``subGroupPolicy`` (minSubGroups; model.sub_jobs).
- JobReady: ready tasks (+ pending best-effort) reach minMember and every role minimum, and
  each policy has minSubGroups ready sub-groups.
- JobPipelined: ready + pipelined tasks reach the minimums (Permit), else Reject.
- SubJobReady / SubJobPipelined: a sub-group's ready (+ pipelined) pods reach its
  subGroupSize; SubJobOrder: sub-groups not yet ready first.
- JobStarving: ready + pipelined < minMember.
- JobOrder: jobs that are not yet ready go first.
- Preemptable / Reclaimable: take victims from a job only while it keeps more than
  minMember ready tasks. UnifiedEvictable (gangpreempt, gangreclaim): every candidate — those
  actions keep gangs whole themselves (their safe and whole bundles).
- On close: PodGroup condition Unschedulable (NotEnoughResources, with the reason) for jobs
  with tasks that are not ready — unless their terminating pods still on nodes cover
  minMember — and Scheduled for the others.

Gang timeout (EXT-1, seed 003 §4.2): a PodGroup that has never reached its minimums
within its wait time — annotation ``scheduling.tidesched.io/gang-timeout-seconds``, else the
argument ``defaultGangTimeoutSeconds`` for PodGroups of more than one member — counted from
its creationTimestamp to the session's time, stops holding the cluster: it is taken out of
Inqueue before the queue plugins open, JobValid and JobEnqueueable refuse it (so nothing of it
is allocated, pipelined or admitted), and on close it gets condition Unschedulable with
reason GangTimeout, a Warning event GangTimeout, and its pending pods PodScheduled=False with
reason GangTimeout. "Reached" is remembered by the PodGroup itself: phase Running or
Completed, or a Scheduled=True condition (written when the gang was ready), or enough placed
pods now (so a restarted member of a gang that ran can rejoin).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from tidesched.framework.plugin import ABSTAIN, PERMIT, REJECT, Plugin, ValidateResult
from tidesched.model.durations import format_go
from tidesched.model.status import PodGroupPhase, TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo
    from tidesched.model.sub_jobs import SubJobInfo

NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"
NOT_ENOUGH_PODS = "NotEnoughTasks"
NOT_ENOUGH_RESOURCES = "NotEnoughResources"
GANG_TIMEOUT = "GangTimeout"
GANG_TIMEOUT_ANNOTATION = "scheduling.tidesched.io/gang-timeout-seconds"
DEFAULT_TIMEOUT_ARGUMENT = "defaultGangTimeoutSeconds"


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timeout(raw: object) -> tuple[float | None, str]:
    """The annotation's value as seconds (a positive number), or (None, why not)."""
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        return None, f"annotation {GANG_TIMEOUT_ANNOTATION}={raw!r} is not a positive number of seconds"
    return value, ""


def reached_minimum(job: "JobInfo") -> bool:
    """Has the gang ever reached minMember (and its per-task minimums)? The PodGroup's own
    status remembers it; pods placed now count too."""
    pg = job.pod_group
    if pg.phase in (PodGroupPhase.RUNNING, PodGroupPhase.COMPLETED):
        return True
    if any(c.get("type") == "Scheduled" and c.get("status") == "True" for c in pg.conditions):
        return True
    return job.ready_task_num() >= job.min_available and job.check_task_ready()


class GangPlugin(Plugin):
    name = "gang"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.default_timeout: float | None = None
        if arguments.get(DEFAULT_TIMEOUT_ARGUMENT) is not None:
            value = arguments.get_float(DEFAULT_TIMEOUT_ARGUMENT, 0.0)
            if not 0 < value < float("inf"):
                raise arguments.bad_value(DEFAULT_TIMEOUT_ARGUMENT, "a positive number of seconds", value)
            self.default_timeout = value
        self.timed_out: dict[str, str] = {}  # job uid -> message, for this session

    def timeout_of(self, ssn: "Session", job: "JobInfo") -> float | None:
        raw = job.pod_group.meta.annotations.get(GANG_TIMEOUT_ANNOTATION)
        if raw is not None:
            value, problem = parse_timeout(raw)
            if value is not None:
                return value
            ssn.event("PodGroup", job.namespace, job.name, "Warning", "InvalidGangTimeout",
                      f"PodGroup {job.uid}: {problem}; " + (
                          f"using {DEFAULT_TIMEOUT_ARGUMENT} ({format_go(self.default_timeout)})"
                          if self.default_timeout is not None else "no gang timeout"))
        # The default is for gangs: a single-pod group (a Deployment's pod) is not timed out.
        return self.default_timeout if job.min_available > 1 else None

    def before_session_open(self, ssn: "Session") -> None:
        self.timed_out = {}
        for job in ssn.jobs.values():
            timeout = self.timeout_of(ssn, job)
            if timeout is None or not job.creation or reached_minimum(job):
                continue
            due = job.creation + timeout
            if ssn.now < due:
                ssn.wake(due)
                continue
            ready = job.ready_task_num()
            roles = "".join(
                f", {job.allocated_roles(r)} of {m} {r}" for r, m in sorted(job.task_min_available.items()) if m
            )
            # Only stable facts in the message: a text that changed every session (the time
            # waited so far) would rewrite each pod's condition and the PodGroup every period.
            self.timed_out[job.uid] = (
                f"gang timed out: waited {format_go(timeout)} since {_rfc3339(job.creation)} "
                f"for minMember {job.min_available}, {ready} of {job.min_available} tasks scheduled{roles}; "
                "its pods are no longer scheduled"
            )
            if job.phase == PodGroupPhase.INQUEUE:
                job.phase = PodGroupPhase.PENDING  # releases what admission reserved for it

    def on_session_open(self, ssn: "Session") -> None:
        timed_out = self.timed_out

        def valid(job: "JobInfo") -> ValidateResult | None:
            msg = timed_out.get(job.uid)
            if msg is not None:
                return ValidateResult(False, GANG_TIMEOUT, msg)
            if not job.check_task_valid():
                return ValidateResult(
                    False, NOT_ENOUGH_PODS_OF_TASK, "Not enough valid pods of each task for gang-scheduling"
                )
            if job.sub_jobs is not None and not job.sub_jobs.check_valid():
                return ValidateResult(
                    False, NOT_ENOUGH_PODS_OF_TASK, "Not enough valid subGroups of each task for gang-scheduling"
                )
            vtn = job.valid_task_num()
            if vtn < job.min_available:
                return ValidateResult(
                    False,
                    NOT_ENOUGH_PODS,
                    f"Not enough valid tasks for gang-scheduling, valid: {vtn}, min: {job.min_available}",
                )
            return None

        ssn.add_fn("job_valid", self.name, valid)
        if timed_out:
            ssn.add_fn("job_enqueueable", self.name, lambda job: REJECT if job.uid in timed_out else ABSTAIN)

        def evictable(_actor: "TaskInfo", evictees: list["TaskInfo"]) -> tuple[list["TaskInfo"], int]:
            occupied: dict[str, int] = {}
            victims = []
            for t in evictees:
                job = ssn.jobs.get(t.job)
                if job is None:
                    continue
                if job.uid not in occupied:
                    occupied[job.uid] = job.ready_task_num()
                if occupied[job.uid] > job.min_available:
                    occupied[job.uid] -= 1
                    victims.append(t)
            return victims, PERMIT

        ssn.add_fn("preemptable", self.name, evictable)
        ssn.add_fn("reclaimable", self.name, evictable)
        # gangpreempt/gangreclaim keep gangs whole by their bundles: gang allows every candidate.
        ssn.add_fn("unified_evictable", self.name, lambda _ctx, candidates: (candidates, PERMIT))

        ssn.add_fn("job_order", self.name, _ready_last)
        ssn.add_order_key(self.name, lambda job: job.is_ready())  # not ready (False) first
        ssn.add_fn("job_ready", self.name, lambda job: job.check_task_ready() and (
            job.sub_jobs is None or job.sub_jobs.check_ready()) and job.is_ready())

        def pipelined(job: "JobInfo") -> int:
            occupied = job.waiting_task_num() + job.ready_task_num()
            if job.sub_jobs is not None and not job.sub_jobs.check_pipelined():
                return REJECT
            return PERMIT if job.check_task_pipelined() and occupied >= job.min_available else REJECT

        ssn.add_fn("job_pipelined", self.name, pipelined)
        ssn.add_fn("sub_job_ready", self.name, lambda sub: sub.is_ready())
        ssn.add_fn("sub_job_pipelined", self.name, lambda sub: PERMIT if sub.is_pipelined() else REJECT)

        ssn.add_fn("sub_job_order", self.name, _ready_last)
        ssn.add_fn(
            "job_starving", self.name, lambda job: job.waiting_task_num() + job.ready_task_num() < job.min_available
        )

    def on_session_close(self, ssn: "Session") -> None:
        for job in ssn.jobs.values():
            msg = self.timed_out.get(job.uid)
            if msg is not None:
                self._close_timed_out(ssn, job, msg)
                continue
            if not job.tasks:
                continue  # a PodGroup whose pods do not exist yet has nothing to report
            if not job.is_ready() and job.ready_task_num() + _releasing_on_node(job) < job.min_available:
                schedulable = job.ready_task_num()
                unready = job.min_available - schedulable
                msg = f"{unready}/{len(job.tasks)} tasks in gang unschedulable: {ssn.job_fit_error(job)}"
                job.job_fit_error = msg
                _set_condition(job, "Unschedulable", ssn.uid, NOT_ENOUGH_RESOURCES, msg)
                for t in job.tasks.values():
                    if t.status == TaskStatus.ALLOCATED and t.uid not in job.fit_errors:
                        job.fit_errors[t.uid] = msg
            else:
                _set_condition(job, "Scheduled", ssn.uid, "tasks in gang are ready to be scheduled", "")


    @staticmethod
    def _close_timed_out(ssn: "Session", job: "JobInfo", msg: str) -> None:
        job.job_fit_error = msg
        _set_condition(job, "Unschedulable", ssn.uid, GANG_TIMEOUT, msg)
        ssn.event("PodGroup", job.namespace, job.name, "Warning", GANG_TIMEOUT, msg)
        ssn.podgroups_warned.add(job.uid)
        for t in job.tasks.values():
            if t.status == TaskStatus.PENDING:
                job.fit_errors[t.uid] = msg
                ssn.pod_condition_reasons[t.key] = GANG_TIMEOUT


def _ready_last(l: "JobInfo | SubJobInfo", r: "JobInfo | SubJobInfo") -> int:
    """JobOrder and SubJobOrder: what is not ready yet goes first."""
    lr, rr = l.is_ready(), r.is_ready()
    if lr == rr:
        return 0
    return 1 if lr else -1


def _releasing_on_node(job: "JobInfo") -> int:
    if not job.status_count[TaskStatus.RELEASING]:
        return 0  # the common case, without a pass over the job's tasks
    return sum(1 for t in job.tasks.values() if t.status == TaskStatus.RELEASING and t.node_name)


def _set_condition(job: "JobInfo", type_: str, transition: str, reason: str, message: str) -> None:
    cond = {"type": type_, "status": "True", "transitionID": transition, "reason": reason, "message": message}
    job.conditions = [c for c in job.conditions if c.get("type") != type_] + [cond]
