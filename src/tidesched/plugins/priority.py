"""priority plugin (Volcano plugins/priority).

- TaskOrder: higher task priority first.
- JobOrder: higher job (PodGroup priority class) priority first.
- SubJobOrder: the sub-group whose highest pod priority is higher first.
- Preemptable: a victim of another job only if its job's priority is lower than the
  preemptor job's; within one job, only tasks of lower task priority.
- UnifiedEvictable (gangpreempt, gangreclaim): for gangpreempt, victims of jobs of lower
  priority than the preempting job; for gangreclaim, every candidate.
- JobStarving: the job still has tasks that are neither ready nor pipelined.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.framework.plugin import GANG_RECLAIM, PERMIT, Plugin

if TYPE_CHECKING:
    from tidesched.framework.plugin import EvictionContext
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo


def _desc(l: int, r: int) -> int:
    return 0 if l == r else (-1 if l > r else 1)


class PriorityPlugin(Plugin):
    name = "priority"

    def on_session_open(self, ssn: "Session") -> None:
        ssn.add_fn("task_order", self.name, lambda l, r: _desc(l.priority, r.priority))
        ssn.add_fn("job_order", self.name, lambda l, r: _desc(l.priority, r.priority))
        ssn.add_order_key(self.name, lambda job: -job.priority)
        ssn.add_fn("sub_job_order", self.name, lambda l, r: _desc(l.priority, r.priority))

        def preemptable(preemptor: "TaskInfo", preemptees: list["TaskInfo"]) -> tuple[list["TaskInfo"], int]:
            pjob = ssn.jobs[preemptor.job]
            victims = []
            for t in preemptees:
                vjob = ssn.jobs.get(t.job)
                if vjob is None:
                    continue
                if vjob.uid != pjob.uid:
                    if vjob.priority >= pjob.priority:
                        continue
                elif t.priority >= preemptor.priority:
                    continue
                victims.append(t)
            return victims, PERMIT

        ssn.add_fn("preemptable", self.name, preemptable)

        def unified_evictable(ctx: "EvictionContext", candidates: list["TaskInfo"]) -> tuple[list["TaskInfo"], int]:
            if ctx.kind == GANG_RECLAIM:
                return candidates, PERMIT  # reclaim is about queue shares, not priorities
            lower = [t for t in candidates if t.job in ssn.jobs and ssn.jobs[t.job].priority < ctx.job.priority]
            return lower, PERMIT

        ssn.add_fn("unified_evictable", self.name, unified_evictable)

        def starving(job: "JobInfo") -> bool:
            return job.ready_task_num() + job.waiting_task_num() < len(job.tasks)

        ssn.add_fn("job_starving", self.name, starving)
