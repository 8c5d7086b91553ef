"""``explain`` on a gated pod says it is gated, by which gates, and who lifts them."""

from __future__ import annotations

from builders import BASIC_CONFIG, node, pod, podgroup, queue
from tidesched.explain.pod import explain_lines
from tidesched.framework.features import parse_feature_gates
from tidesched.model.gates import QUEUE_ALLOCATION_GATE
from tidesched.model.loader import Manifest
from tidesched.scheduler import config_from_text, schedule_manifests


def _explain(spec: dict, annotations: dict | None = None, features: str = "", cpu: str = "4") -> str:
    objs = [node("n1"), queue("default", weight=1, capability={"cpu": cpu}), podgroup("pg", 1),
            pod("p", "pg", annotations=annotations, spec=spec)]
    config = config_from_text(BASIC_CONFIG.replace("  - name: nodeorder", "  - name: capacity\n  - name: nodeorder"))
    ssn, d = schedule_manifests([Manifest("t", o) for o in objs], config, features=parse_feature_gates(features))
    assert "ns/p" not in d.bound
    assert not any(e.kind == "Pod" and e.reason == "FailedScheduling" for e in d.events)
    return "\n".join(explain_lines(ssn, d, "ns/p"))


def test_an_outside_gate_is_named_and_left_to_its_owner() -> None:
    text = _explain({"schedulingGates": [{"name": "example.com/g"}, {"name": QUEUE_ALLOCATION_GATE}]})
    assert "Scheduling gates: example.com/g, scheduling.volcano.sh/queue-allocation-gate." in text
    assert "Their owner must remove example.com/g" in text
    assert f"removes {QUEUE_ALLOCATION_GATE} only once it is the pod's last gate" in text


def test_volcanos_gate_without_the_opt_in_annotation_is_never_lifted() -> None:
    text = _explain({"schedulingGates": [{"name": QUEUE_ALLOCATION_GATE}]})
    assert "not the annotation" in text and "nothing removes the gate" in text


def test_volcanos_gate_with_the_opt_in_waits_for_the_queue_or_the_feature() -> None:
    gate, opt_in = {"schedulingGates": [{"name": QUEUE_ALLOCATION_GATE}]}, {QUEUE_ALLOCATION_GATE: "true"}
    text = _explain(gate, opt_in)
    assert "the feature gate SchedulingGatesQueueAdmission is off" in text and "nothing removes it" in text
    text = _explain(gate, opt_in, "SchedulingGatesQueueAdmission=true")
    assert "Queue default takes the pod now: its queue-admission gate is being removed" in text
    text = _explain(gate, opt_in, "SchedulingGatesQueueAdmission=true", cpu="500m")
    assert "it is removed once queue default can take the pod" in text


def test_a_fifo_queue_is_said_to_be_dequeued_as_traverse() -> None:
    objs = [node("n1", cpu="1"), queue("default", weight=1, dequeueStrategy="fifo"), podgroup("pg", 1),
            pod("p", "pg", cpu="2")]
    ssn, d = schedule_manifests([Manifest("t", o) for o in objs], config_from_text(BASIC_CONFIG))
    text = "\n".join(explain_lines(ssn, d, "ns/p"))
    assert "Queue default asks for dequeueStrategy fifo: Volcano v1.15.1 does not act on it" in text
