"""Numatopology objects (model/numatopology.py): Volcano's CRD read, bad ones reported."""

from __future__ import annotations

import pytest

from tidesched.model.cache import ClusterCache
from tidesched.model.numatopology import parse_cpuset, parse_numatopology
from tidesched.model.problems import ObjectError
from tidesched.rules.cpu_assignment import CpuInfo


def _topo(**spec: object) -> dict:
    return {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": "n1"}, "spec": spec}


def test_parse() -> None:
    t = parse_numatopology(_topo(
        policies={"CPUManagerPolicy": "static", "TopologyManagerPolicy": "restricted"},
        numares={"cpu": {"allocatable": "0-3,6", "capacity": 8}},
        cpuDetail={"0": {"numa": 0, "socket": 0, "core": 0}, "6": {"numa": 1, "socket": 1, "core": 3}},
        resReserved={"cpu": "1500m", "memory": "1Gi"},
    ))
    assert (t.key, t.cpu_manager_policy, t.topology_manager_policy) == ("n1", "static", "restricted")
    assert t.allocatable == {"cpu": frozenset({0, 1, 2, 3, 6})} and t.capacity == {"cpu": 8}
    assert t.cpu_detail == {0: CpuInfo(0, 0, 0), 6: CpuInfo(1, 1, 3)}
    assert t.reserved_cpu_milli == 1500


def test_cpuset() -> None:
    assert parse_cpuset("", "f") == frozenset()
    assert parse_cpuset("0-2, 5 ,7-7", "f") == frozenset({0, 1, 2, 5, 7})
    for bad in ("a", "3-1", "-1"):
        with pytest.raises(ObjectError):
            parse_cpuset(bad, "f")


@pytest.mark.parametrize("spec, field", [
    ({"numares": {"cpu": {"allocatable": "x"}}}, "spec.numares[cpu].allocatable"),
    ({"cpuDetail": {"zero": {"numa": 0}}}, "spec.cpuDetail[zero]"),
    ({"resReserved": {"cpu": "lots"}}, "spec.resReserved[cpu]"),
])
def test_bad_fields_are_named(spec: dict, field: str) -> None:
    with pytest.raises(ObjectError) as err:
        parse_numatopology(_topo(**spec))
    assert err.value.field == field


def test_cache_lists_numatopologies() -> None:
    cache = ClusterCache()
    cache.update("Numatopology", "n1", _topo(numares={"cpu": {"allocatable": "0-1"}}))
    cache.update("Numatopology", "n2", {**_topo(numares={"cpu": {"allocatable": "?"}}), "metadata": {"name": "n2"}})
    snap = cache.snapshot()
    assert [t.name for t in snap.numatopologies] == ["n1"]
    assert any("Numatopology n2" in e.message for e in snap.problems)
