"""Pod scheduling gates (``spec.schedulingGates``) and Volcano v1.15's queue-admission gate.

Kubernetes' rule: a pod with any scheduling gate is not scheduled — no scheduler may bind it
(the API server refuses the binding) — until every gate is removed; gates can only be removed
after the pod is created, never added. Volcano v1.15.1 reads a pod as gated (``SchGated``) when
it has any gate, and then:

* every action leaves gated pods alone (allocate, backfill, preempt, reclaim), except that
  allocate still asks its queue whether it may take a pod whose *only* gate is Volcano's own,
  ``scheduling.volcano.sh/queue-allocation-gate`` — the queue-admission gate;
* the resources of pods gated by anything else are left out of what an admitted job reserves
  in its queue ("inqueue": ``JobInfo.DeductSchGatedResources`` in proportion, overcommit and
  capacity), so a job waiting on an outside gate does not hold quota; a pod held only by
  Volcano's gate is waiting for exactly that quota and keeps its share;
* no ``FailedScheduling`` event or ``PodScheduled`` condition is written on a gated pod (the
  API server gives it ``PodScheduled=False, reason SchedulingGated``).

The queue-admission gate (feature ``SchedulingGatesQueueAdmission``, off by default): a pod opts
in with the annotation of the same name set to ``"true"``; Volcano's admission webhook then adds
the gate at creation, and the scheduler removes it once the pod's queue admits it (capacity's
Allocatable passes), so that cluster autoscalers see a pod as unschedulable only when nodes, not
queue quota, are short. What a session does about gated pods is in :mod:`tidesched.framework.gates`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidesched.model.fields import mappings, parse_str
from tidesched.model.problems import ObjectError

# The annotation a pod opts in with, and the gate's name: Volcano uses one key for both.
QUEUE_ALLOCATION_GATE = "scheduling.volcano.sh/queue-allocation-gate"


def parse_scheduling_gates(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The gates' names in ``spec.schedulingGates`` (in order); each needs a name."""
    names = []
    for i, gate in enumerate(mappings(spec, "schedulingGates", "spec.schedulingGates")):
        name = parse_str(gate.get("name"), f"spec.schedulingGates[{i}].name")
        if not name:
            raise ObjectError(f"spec.schedulingGates[{i}].name", "missing or empty")
        names.append(name)
    return tuple(names)


def raw_gate_names(spec: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The gates' names in a raw pod spec, for the worlds' quick looks at objects they hold
    (a malformed entry reads as an unnamed gate: still a gate; the parser reports it)."""
    gates = (spec or {}).get("schedulingGates")
    if not isinstance(gates, list):
        return ()
    return tuple(str(g.get("name") or "") if isinstance(g, Mapping) else "" for g in gates)


def only_volcano_gate(gates: tuple[str, ...]) -> bool:
    """Held by Volcano's queue-admission gate and by nothing else (Volcano
    ``HasOnlyVolcanoSchedulingGate``): the one gate the scheduler itself may lift."""
    return len(gates) == 1 and gates[0] == QUEUE_ALLOCATION_GATE


def opted_in(annotations: Mapping[str, str]) -> bool:
    """The pod asked for queue admission by gate (Volcano ``HasQueueAllocationGateAnnotation``)."""
    return annotations.get(QUEUE_ALLOCATION_GATE) == "true"
