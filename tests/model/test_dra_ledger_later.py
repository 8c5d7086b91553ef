"""The claim ledger's view of devices that releasing pods free later (model/dra/ledger.py):
a pod may be pipelined onto them, not allocated, and the reclaim and preempt actions ask
whether their victims' claims would make room (what the tidal reclaim of claimed cards uses)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tidesched.model.snapshot import build_snapshot
from tidesched.model.state import build_state
from tidesched.model.status import TaskStatus

DRIVER = "gpu.nvidia.com"
CLASS = {"kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def node(name: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"}}}


def state_of(objects: list[dict[str, Any]]) -> Any:
    return build_state(build_snapshot(objects, strict_kinds=False), ("volcano",))


def _held_world(deleting: bool) -> list[dict[str, Any]]:
    holder: dict[str, Any] = {"name": "old", "namespace": "default", "uid": "uid-old"}
    if deleting:
        holder["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return [
        node("n1"), CLASS,
        {"kind": "ResourceSlice", "metadata": {"name": "n1"},
         "spec": {"driver": DRIVER, "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "gpu-0"}]}},
        {"kind": "ResourceClaim", "metadata": {"name": "held", "namespace": "default"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
         "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]}},
                    "reservedFor": [{"resource": "pods", "name": "old", "uid": "uid-old"}]}},
        {"kind": "ResourceClaim", "metadata": {"name": "mine", "namespace": "default"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}},
        {"kind": "Pod", "metadata": holder, "spec": {"schedulerName": "volcano", "nodeName": "n1",
         "resourceClaims": [{"name": "gpu", "resourceClaimName": "held"}], "containers": [{"name": "c"}]},
         "status": {"phase": "Running"}},
        {"kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
         "spec": {"schedulerName": "volcano", "resourceClaims": [{"name": "gpu", "resourceClaimName": "mine"}], "containers": [{"name": "c"}]}},
    ]


def test_devices_of_a_deleted_pods_claim_are_free_later_not_now() -> None:
    state = state_of(_held_world(deleting=True))
    p = next(t for t in state.tasks.values() if t.name == "p")
    check = state.table.dra.check(p)
    assert check.passed.tolist() == [True] and check.now.tolist() == [False]
    state = state_of(_held_world(deleting=False))
    p = next(t for t in state.tasks.values() if t.name == "p")
    check = state.table.dra.check(p)
    assert check.passed.tolist() == [False] and check.now.tolist() == [False]
    assert [u for _r, _m, u in check.failures] == [True]  # taken: unresolvable unless evictable


def test_a_pipelined_pod_takes_released_devices_only_later_and_gives_them_back() -> None:
    state = state_of(_held_world(deleting=True))
    table, ledger = state.table, state.table.dra
    p = next(t for t in state.tasks.values() if t.name == "p")
    table.prepare_task(p)
    p.status, p.node_name = TaskStatus.PIPELINED, "n1"
    table.add_task(0, p)
    assert ledger.session["default/mine"].later == frozenset({0})
    assert bool(ledger.use.in_use[0])  # still held now, by the deleted pod's claim
    assert bool(ledger.later_use().in_use[0])  # and later, by the pipelined pod
    assert ledger.writes(p) is not None
    table.remove_task(0, p)
    assert bool(ledger.use.in_use[0]) and not ledger.later_use().in_use[0]


def test_fits_without_asks_about_victims_and_forgets_them() -> None:
    state = state_of(_held_world(deleting=False))
    ledger = state.table.dra
    p = next(t for t in state.tasks.values() if t.name == "p")
    assert ledger.fits_without(p, 0, ["uid-old"]) is True
    assert ledger.fits_without(p, 0, []) is False
    assert not ledger.away and not np.any(ledger.check(p).passed)
