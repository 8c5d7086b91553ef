"""kube-scheduler's structured allocator as tidesched runs it (model/dra): the cases of
k8s.io/dynamic-resource-allocation/structured's allocator tests that matter for placement —
counts, All, firstAvailable, constraints, admin access, taints, consumable capacity, shared
counters, pools (generations, incomplete) and node selection — asserted on the devices chosen."""

from __future__ import annotations

from typing import Any

import pytest

from tidesched.model.snapshot import build_snapshot
from tidesched.model.state import build_state

DRIVER = "gpu.example.com"
CLASS = {"kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"}}}


def rslice(name: str, devices: list[dict[str, Any]], *, pool: str = "", gen: int = 1, count: int = 1, **where: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": DRIVER, "pool": {"name": pool or name, "generation": gen, "resourceSliceCount": count}, "devices": devices}
    spec.update(where or {"nodeName": "n1"})
    return {"kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def claim(name: str, *requests: dict[str, Any], constraints: list[Any] | None = None, status: Any = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    obj = {"kind": "ResourceClaim", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": {"devices": devices}}
    if status:
        obj["status"] = status
    return obj


def exactly(name: str = "gpu", **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "gpu", **fields}}


def pod(name: str, *claims: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"schedulerName": "volcano", "resourceClaims": [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)],
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }


def place(objects: list[dict[str, Any]], pod_name: str = "p", node_name: str = "n1") -> dict[str, list[str]] | None:
    """The claim writes of placing the pod on the node: claim key -> devices (None: does not fit)."""
    snap = build_snapshot(objects, strict_kinds=False)
    state = build_state(snap, ("volcano",))
    ledger = state.table.dra
    task = next(t for t in state.tasks.values() if t.name == pod_name)
    row = state.table.index[node_name]
    if not ledger.check(task).passed[row]:
        return None
    from tidesched.model.status import TaskStatus

    task.status = TaskStatus.ALLOCATED
    ledger.add(row, task)
    writes = ledger.writes(task)
    assert writes is not None
    return {w.claim: [r["device"] for r in (w.allocation or {"devices": {"results": []}})["devices"]["results"]] for w in writes}


def test_first_free_devices_in_pool_and_slice_order() -> None:
    objs = [node("n1"), CLASS,
            rslice("b-slice", [{"name": "d3"}], pool="p", count=2), rslice("a-slice", [{"name": "d1"}, {"name": "d2"}], pool="p", count=2),
            claim("c", exactly(count=2)), pod("p", "c")]
    assert place(objs) == {"default/c": ["d1", "d2"]}


def test_incomplete_pool_gives_no_device_and_fails_all() -> None:
    objs = [node("n1"), CLASS, rslice("s", [{"name": "d1"}], count=2), claim("c", exactly()), pod("p", "c")]
    assert place(objs) is None


def test_newest_generation_wins() -> None:
    objs = [node("n1"), CLASS, rslice("old", [{"name": "old"}], pool="p", gen=1), rslice("new", [{"name": "new"}], pool="p", gen=2),
            claim("c", exactly()), pod("p", "c")]
    assert place(objs) == {"default/c": ["new"]}


def test_all_mode_takes_every_matching_device_and_needs_one() -> None:
    devs = [{"name": "a", "attributes": {"ok": {"bool": True}}}, {"name": "b", "attributes": {"ok": {"bool": False}}}, {"name": "c", "attributes": {"ok": {"bool": True}}}]
    sel = [{"cel": {"expression": f'device.attributes["{DRIVER}"].ok'}}]
    objs = [node("n1"), CLASS, rslice("s", devs), claim("c", exactly(allocationMode="All", selectors=sel)), pod("p", "c")]
    assert place(objs) == {"default/c": ["a", "c"]}
    busy = claim("busy", exactly(), status={"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "s", "device": "c"}]}}})
    assert place([*objs, busy]) is None  # one of "all" is taken


def test_distinct_attribute() -> None:
    devs = [{"name": f"d{i}", "attributes": {"numa": {"int": n}}} for i, n in enumerate([0, 0, 1])]
    objs = [node("n1"), CLASS, rslice("s", devs),
            claim("c", exactly(count=2), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}]), pod("p", "c")]
    assert place(objs) == {"default/c": ["d0", "d2"]}


def test_match_attribute_across_requests_and_missing_attribute() -> None:
    devs = [{"name": "x"}, {"name": "a", "attributes": {"pcie": {"string": "r1"}}}, {"name": "b", "attributes": {"pcie": {"string": "r2"}}},
            {"name": "c", "attributes": {"pcie": {"string": "r1"}}}]
    objs = [node("n1"), CLASS, rslice("s", devs),
            claim("c", exactly("one"), exactly("two"), constraints=[{"requests": ["one", "two"], "matchAttribute": f"{DRIVER}/pcie"}]),
            pod("p", "c")]
    assert place(objs) == {"default/c": ["a", "c"]}


def test_tainted_device_needs_a_toleration() -> None:
    devs = [{"name": "t", "taints": [{"key": "broken", "effect": "NoSchedule"}]}, {"name": "u"}]
    objs = [node("n1"), CLASS, rslice("s", devs)]
    assert place([*objs, claim("c", exactly()), pod("p", "c")]) == {"default/c": ["u"]}
    tol = [{"key": "broken", "operator": "Exists"}]
    assert place([*objs, claim("c", exactly(count=2, tolerations=tol)), pod("p", "c")]) == {"default/c": ["t", "u"]}


def test_admin_access_takes_a_device_in_use() -> None:
    busy = claim("busy", exactly(), status={"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "s", "device": "d"}]}}})
    objs = [node("n1"), CLASS, rslice("s", [{"name": "d"}]), busy]
    assert place([*objs, claim("c", exactly()), pod("p", "c")]) is None
    assert place([*objs, claim("c", exactly(adminAccess=True)), pod("p", "c")]) == {"default/c": ["d"]}


def test_consumable_capacity_shares_a_device_until_it_is_full() -> None:
    dev = {"name": "shared", "allowMultipleAllocations": True, "capacity": {"memory": {"value": "40Gi"}}}
    held = claim("held", exactly(capacity={"requests": {"memory": "30Gi"}}), status={"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "s", "device": "shared", "shareID": "s1", "consumedCapacity": {"memory": "30Gi"}}]}}})
    objs = [node("n1"), CLASS, rslice("s", [dev]), held]
    assert place([*objs, claim("c", exactly(capacity={"requests": {"memory": "10Gi"}})), pod("p", "c")]) == {"default/c": ["shared"]}
    assert place([*objs, claim("c", exactly(capacity={"requests": {"memory": "11Gi"}})), pod("p", "c")]) is None


def test_shared_counters_limit_partitions() -> None:
    counters = [{"name": "mem", "counters": {"memory": {"value": "40Gi"}}}]
    parts = [{"name": f"half-{i}", "consumesCounters": [{"counterSet": "mem", "counters": {"memory": {"value": "20Gi"}}}]} for i in range(3)]
    counter_slice = {"kind": "ResourceSlice", "metadata": {"name": "counters"},
                     "spec": {"driver": DRIVER, "pool": {"name": "s", "generation": 1, "resourceSliceCount": 2}, "nodeName": "n1", "sharedCounters": counters}}
    objs = [node("n1"), CLASS, rslice("s", parts, pool="s", count=2), counter_slice]
    assert place([*objs, claim("c", exactly(count=2)), pod("p", "c")]) == {"default/c": ["half-0", "half-1"]}
    assert place([*objs, claim("c", exactly(count=3)), pod("p", "c")]) is None


def test_devices_of_a_node_selector_slice_and_the_allocation_selector() -> None:
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    objs = [node("n1", rack="r1"), node("n2", rack="r2"), CLASS, rslice("net", [{"name": "fabric-0"}], nodeSelector=sel),
            claim("c", exactly()), pod("p", "c")]
    assert place(objs, node_name="n2") is None
    snap = build_snapshot(objs, strict_kinds=False)
    state = build_state(snap, ("volcano",))
    task = next(iter(state.tasks.values()))
    from tidesched.model.status import TaskStatus

    task.status = TaskStatus.ALLOCATED
    state.table.dra.add(0, task)
    (write,) = state.table.dra.writes(task)
    assert write.allocation["nodeSelector"] == sel  # not pinned to n1: the slice's selector


@pytest.mark.parametrize("count, fits", [(2, True), (3, False)])
def test_one_request_counts_over_all_nodes(count: int, fits: bool) -> None:
    objs = [node("n1"), CLASS, rslice("s", [{"name": "a"}, {"name": "b"}]), claim("c", exactly(count=count)), pod("p", "c")]
    assert (place(objs) is not None) is fits
