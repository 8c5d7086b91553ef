"""gang plugin (Volcano plugins/gang): all-or-nothing scheduling of a PodGroup.

- JobValid: enough valid tasks in total (minMember) and per role (minTaskMember).
- JobReady: ready tasks (+ pending best-effort) reach minMember and every role minimum.
- JobPipelined: ready + pipelined tasks reach the minimums (Permit), else Reject.
- JobStarving: ready + pipelined < minMember.
- JobOrder: jobs that are not yet ready go first.
- Preemptable / Reclaimable: take victims from a job only while it keeps more than
  minMember ready tasks.
- On close: PodGroup condition Unschedulable (NotEnoughResources, with the reason) for jobs
  with tasks that are not ready — unless their terminating pods still on nodes cover
  minMember — and Scheduled for the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.framework.plugin import PERMIT, REJECT, Plugin, ValidateResult, register_plugin
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo

NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"
NOT_ENOUGH_PODS = "NotEnoughTasks"
NOT_ENOUGH_RESOURCES = "NotEnoughResources"


@register_plugin
class GangPlugin(Plugin):
    name = "gang"

    def on_session_open(self, ssn: "Session") -> None:
        def valid(job: "JobInfo") -> ValidateResult | None:
            if not job.check_task_valid():
                return ValidateResult(
                    False, NOT_ENOUGH_PODS_OF_TASK, "Not enough valid pods of each task for gang-scheduling"
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

        def job_order(l: "JobInfo", r: "JobInfo") -> int:
            lr, rr = l.is_ready(), r.is_ready()
            if lr == rr:
                return 0
            return 1 if lr else -1

        ssn.add_fn("job_order", self.name, job_order)
        ssn.add_fn("job_ready", self.name, lambda job: job.check_task_ready() and job.is_ready())

        def pipelined(job: "JobInfo") -> int:
            occupied = job.waiting_task_num() + job.ready_task_num()
            return PERMIT if job.check_task_pipelined() and occupied >= job.min_available else REJECT

        ssn.add_fn("job_pipelined", self.name, pipelined)
        ssn.add_fn(
            "job_starving", self.name, lambda job: job.waiting_task_num() + job.ready_task_num() < job.min_available
        )

    def on_session_close(self, ssn: "Session") -> None:
        for job in ssn.jobs.values():
            if not job.tasks:
                continue  # a PodGroup whose pods do not exist yet has nothing to report
            releasing_on_node = sum(
                1 for t in job.tasks.values() if t.status == TaskStatus.RELEASING and t.node_name
            )
            if not job.is_ready() and job.ready_task_num() + releasing_on_node < job.min_available:
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


def _set_condition(job: "JobInfo", type_: str, transition: str, reason: str, message: str) -> None:
    cond = {"type": type_, "status": "True", "transitionID": transition, "reason": reason, "message": message}
    job.conditions = [c for c in job.conditions if c.get("type") != type_] + [cond]
