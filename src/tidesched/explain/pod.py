"""Why one pod stays pending, or where it would go: the text ``tidesched explain NS/POD``
prints and the web view shows beside each pending pod (RUN-2). Read from a session and its
decisions; reads only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidesched.explain.claims import pod_claim_lines
from tidesched.explain.topology import topology_lines
from tidesched.explain.gates import gate_lines
from tidesched.framework.decisions import FitErrors
from tidesched.model.dequeue import honoured
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.decisions import Decisions
    from tidesched.framework.session import Session


def explain_lines(
    ssn: Session, decisions: Decisions, pod: str, task: Any = None, events: Any = None
) -> list[str]:
    """Human explanation for one pod from the session's structured reasons. ``task`` and
    ``events`` (any superset of the events about the pod, its PodGroup and queue), when given,
    spare a search of the whole session (the web view explains many pods per session)."""
    if task is None:
        task = next(t for t in ssn.tasks.values() if t.key == pod)
    job = ssn.jobs[task.job]
    lines: list[str] = []
    if pod in decisions.bound:
        return [f"{pod} would be bound to node {decisions.bound[pod]}."]
    if pod in decisions.pipelined:
        return [f"{pod} would be pipelined onto node {decisions.pipelined[pod]} (waiting for resources being released)."]
    if task.status not in (TaskStatus.PENDING, TaskStatus.ALLOCATED):
        return [f"{pod} is {task.status.label()} on node {task.node_name or '-'}; nothing to schedule."]
    lines.append(f"{pod} stays pending.")
    lines.append(
        f"PodGroup {job.uid} (queue {job.queue}, phase {decisions.podgroups.get(job.uid)}): "
        f"{job.ready_task_num()} of minMember {job.min_available} tasks ready."
    )
    lines.extend(topology_lines(ssn, job))
    lines.extend(gate_lines(ssn, decisions, task, job))
    queue = ssn.queues.get(job.queue)
    if queue is not None and not honoured(queue.queue.dequeue_strategy):
        lines.append(
            f"Queue {job.queue} asks for dequeueStrategy {queue.queue.dequeue_strategy}: Volcano v1.15.1 does not act "
            "on it, nor does tidesched; its jobs are dequeued as traverse (one that cannot start does not hold "
            "back those behind it)."
        )
    fe = job.fit_errors.get(task.uid)
    if isinstance(fe, FitErrors):
        lines.append("Nodes: " + fe.error())
    elif fe:
        reason = decisions.pod_condition_reasons.get(pod)
        lines.append(f"{reason}: {fe}" if reason else f"Gang: {fe}")
    lines.extend(pod_claim_lines(ssn, task))
    for e in decisions.events if events is None else events:
        if (e.kind == "Pod" and f"{e.namespace}/{e.name}" == pod) or (
            e.kind == "PodGroup" and f"{e.namespace}/{e.name}" == job.uid
        ) or (e.kind == "Queue" and e.name == job.queue):
            lines.append(f"{e.kind} event {e.reason}: {e.message}")
    return lines
