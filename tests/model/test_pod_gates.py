"""Pod ``spec.schedulingGates`` as read into the record and the session's task (model/gates.py)."""

from __future__ import annotations

import pytest

from builders import pod
from tidesched.model.gates import QUEUE_ALLOCATION_GATE, only_volcano_gate, opted_in
from tidesched.model.infos import TaskInfo
from tidesched.model.objects import parse_pod
from tidesched.model.problems import ObjectError


def _gated(*names: str, annotations: dict | None = None) -> dict:
    return pod("p", "pg", annotations=annotations, spec={"schedulingGates": [{"name": n} for n in names]})


def test_gates_are_read_in_order_and_make_the_task_gated() -> None:
    rec = parse_pod(_gated("example.com/a", QUEUE_ALLOCATION_GATE))
    assert rec.scheduling_gates == ("example.com/a", QUEUE_ALLOCATION_GATE)
    assert TaskInfo(rec, "ns/pg", 0).sch_gated
    for spec in ({}, {"schedulingGates": []}, {"schedulingGates": None}):
        plain = parse_pod(pod("p", "pg", spec=spec))
        assert plain.scheduling_gates == () and not TaskInfo(plain, "ns/pg", 0).sch_gated


@pytest.mark.parametrize(
    ("gates", "field"),
    [("g", "spec.schedulingGates"), (["g"], "spec.schedulingGates[0]"), ([{}], "spec.schedulingGates[0].name"),
     ([{"name": 3}], "spec.schedulingGates[0].name")],
)
def test_a_malformed_gate_names_its_field(gates: object, field: str) -> None:
    with pytest.raises(ObjectError) as exc:
        parse_pod(pod("p", "pg", spec={"schedulingGates": gates}))
    assert exc.value.field == field


def test_only_volcanos_gate_and_the_opt_in_annotation() -> None:
    assert only_volcano_gate((QUEUE_ALLOCATION_GATE,))
    assert not only_volcano_gate((QUEUE_ALLOCATION_GATE, "example.com/a"))
    assert not only_volcano_gate(("example.com/a",)) and not only_volcano_gate(())
    assert opted_in({QUEUE_ALLOCATION_GATE: "true"})
    assert not opted_in({QUEUE_ALLOCATION_GATE: "True"}) and not opted_in({})  # Volcano compares with "true"
