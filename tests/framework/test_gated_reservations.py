"""What an admitted job reserves once its gated pods are left out (framework/gates.py,
Volcano ``JobInfo.DeductSchGatedResources``)."""

from __future__ import annotations

from builders import pod, podgroup
from tidesched.framework.gates import deduct_gated, held_outside, ungated_pending
from tidesched.model.gates import QUEUE_ALLOCATION_GATE
from tidesched.model.resource import Resource
from tidesched.model.snapshot import build_snapshot
from tidesched.model.state import build_state


def _job(*pods: dict):
    state = build_state(build_snapshot([podgroup("pg", 2), *pods]), ["volcano"])
    return state.jobs["ns/pg"]


def _gate(*names: str) -> dict:
    return {"schedulingGates": [{"name": n} for n in names]}


def test_outside_gated_pods_are_deducted_per_dimension_never_below_zero() -> None:
    job = _job(
        pod("a", "pg", cpu="2", memory="1Gi", extra_requests={"nvidia.com/gpu": "1"}, spec=_gate("example.com/g")),
        pod("b", "pg", cpu="3", memory="1Gi", spec=_gate("example.com/g", QUEUE_ALLOCATION_GATE)),
        pod("c", "pg", cpu="4", spec=_gate(QUEUE_ALLOCATION_GATE)),  # Volcano's gate alone: kept
        pod("d", "pg", cpu="8"),
    )
    reserved = Resource.from_resource_list({"cpu": "6", "memory": "1Gi", "example.com/fpga": "2"})
    out = deduct_gated(job, reserved)
    assert out.milli_cpu == 1000 and out.memory == 0  # 6 - (2 + 3) cpu; 1Gi - 2Gi → 0
    assert out.scalars == {"example.com/fpga": 2000}  # a scalar only the gated pods ask stays out
    assert reserved.milli_cpu == 6000  # the argument is not changed
    assert [t.name for t in job.tasks.values() if held_outside(t)] == ["a", "b"]
    assert [t.name for t in ungated_pending(job)] == ["d"]


def test_a_job_without_outside_gates_reserves_what_it_did() -> None:
    reserved = Resource.from_resource_list({"cpu": "6"})
    assert deduct_gated(_job(pod("a", "pg", spec=_gate(QUEUE_ALLOCATION_GATE)), pod("b", "pg")), reserved) is reserved
    assert deduct_gated(_job(pod("a", "pg", node="n1", phase="Running")), reserved) is reserved
