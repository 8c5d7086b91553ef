"""shuffle (Volcano actions/shuffle): evict what the eviction plugins choose.

Rules (Volcano ``shuffle.go``, restated):

* The candidates are every **Running** task of the session's jobs.
* The plugins' VictimTasks fns (the ``victim_tasks`` hook, gated by ``enabledVictim``) choose
  among them — or beyond them: tdm picks the preemptable pods on revocable nodes whose zone
  has closed, rescheduling the pods on overused nodes. Within a tier their answers are
  united; the first tier that chooses any decides (``SessionHooks.victim_tasks``).
* Each chosen task is evicted at once, on its own: nothing is pipelined in its place (the
  allocate action of a later session places what its owner recreates).

A chosen task already on its way out (Releasing), on no node, or of no job of the session (a
pod another scheduler placed; Volcano's Evict refuses it too) is left alone. The reason
recorded names the plugins that chose the pod.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.framework.reasons import shuffle_reason
from tidesched.framework.statement import Statement
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session


def execute(ssn: "Session") -> None:
    running = [
        t
        for job in ssn.jobs.values()
        if job.status_count[TaskStatus.RUNNING]
        for t in job.tasks.values()
        if t.status == TaskStatus.RUNNING
    ]
    running.sort(key=lambda t: t.key)
    for victim, plugins in ssn.victim_tasks(running):
        if victim.status == TaskStatus.RELEASING or not victim.node_name or victim.job not in ssn.jobs:
            continue
        stmt = Statement(ssn)
        stmt.evict(victim, shuffle_reason(", ".join(plugins)))
        stmt.commit()
