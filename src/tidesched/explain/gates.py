"""Why a gated pod waits (``spec.schedulingGates``): the lines ``explain`` and the web view give
for it (rules in :mod:`tidesched.model.gates`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.framework.features import QUEUE_ADMISSION
from tidesched.model.gates import QUEUE_ALLOCATION_GATE, only_volcano_gate, opted_in

if TYPE_CHECKING:
    from tidesched.framework.decisions import Decisions
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo


def gate_lines(ssn: Session, decisions: Decisions, task: TaskInfo, job: JobInfo) -> list[str]:
    """Nothing for a pod without gates."""
    gates = task.pod.scheduling_gates
    if not gates:
        return []
    lines = [f"Scheduling gates: {', '.join(gates)}. A pod is not scheduled while it has any gate "
             "(Kubernetes' pod scheduling readiness); no scheduler may bind it."]
    if not only_volcano_gate(gates):
        others = [g for g in gates if g != QUEUE_ALLOCATION_GATE]
        line = f"Their owner must remove {', '.join(others)}: tidesched never removes a gate it does not own"
        if QUEUE_ALLOCATION_GATE in gates:
            line += f", and removes {QUEUE_ALLOCATION_GATE} only once it is the pod's last gate"
        lines.append(line + ".")
        return lines
    if not opted_in(task.pod.meta.annotations):
        lines.append(f"The pod has Volcano's queue-admission gate but not the annotation "
                     f'{QUEUE_ALLOCATION_GATE}: "true" that asks for it, so nothing removes the gate.')
        return lines
    if task.key in decisions.ungated:
        lines.append(f"Queue {job.queue} takes the pod now: its queue-admission gate is being removed, "
                     "and a later session places it.")
    elif ssn.features.enabled(QUEUE_ADMISSION):
        lines.append(f"Volcano's queue-admission gate: it is removed once queue {job.queue} can take the pod.")
    else:
        lines.append(f"Volcano's queue-admission gate: the feature gate {QUEUE_ADMISSION} is off "
                     f"(--feature-gates={QUEUE_ADMISSION}=true), so nothing removes it.")
    return lines
