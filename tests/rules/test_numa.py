"""NUMA hints, topology manager policies and CPU assignment (rules/numa_hints.py,
rules/cpu_assignment.py): the cases of Volcano v1.15.1's plugins/numaaware/policy/*_test.go and
provider/cpumanager/cpu_mng_test.go, each asserting the hint or CPU set Volcano's test asserts."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tidesched.rules.cpu_assignment import CpuInfo, Topology, allocate_cpus, cpu_hints, exclusive_cpus, take_by_topology
from tidesched.rules.numa_hints import (
    BEST_EFFORT,
    NONE,
    RESTRICTED,
    SINGLE_NUMA_NODE,
    Hint,
    iterate_masks,
    mask_of,
    narrower,
    policy_predicate,
)

M01, M0, M1 = mask_of(0, 1), mask_of(0), mask_of(1)


def H(mask: int | None, preferred: bool) -> Hint:
    return Hint(mask, preferred)


# The providers' hints of the policy tests: cpu and gpu hints per case.
CASES = {
    "test-1": ([H(M01, False), H(M0, True)], [H(M01, False), H(M0, True)]),
    "test-2": ([H(M01, False), H(M1, True)], [H(M01, False), H(M1, True)]),
    "test-3": ([H(M01, False), H(M0, True), H(M1, True)], [H(M01, False), H(M0, True), H(M1, True)]),
    "test-4": ([H(M01, False), H(M0, True)], [H(M01, False), H(M1, True)]),
    "test-5": ([H(M01, False), H(M0, True)], [H(M01, True)]),
    "test-6": ([H(M01, True)], [H(M01, True)]),
}
EXPECT = {
    # best-effort and restricted expect the same best hints (policy_*_test.go)
    BEST_EFFORT: {"test-1": H(M0, True), "test-2": H(M1, True), "test-3": H(M0, True), "test-4": H(M0, False),
                  "test-5": H(M0, True), "test-6": H(M01, True)},
    RESTRICTED: {"test-1": H(M0, True), "test-2": H(M1, True), "test-3": H(M0, True), "test-4": H(M0, False),
                 "test-5": H(M0, True), "test-6": H(M01, True)},
    SINGLE_NUMA_NODE: {"test-1": H(M0, True), "test-2": H(M1, True), "test-3": H(M0, True), "test-4": H(M01, False),
                       "test-5": H(M01, False)},
}


@pytest.mark.parametrize("policy, case", [(p, c) for p, cases in EXPECT.items() for c in cases])
def test_policy_best_hint(policy: str, case: str) -> None:
    cpu, gpu = CASES[case]
    best, admit = policy_predicate(policy, [0, 1], [{"cpu": cpu}, {"gpu": gpu}])
    assert best == EXPECT[policy][case]
    assert admit is (policy == BEST_EFFORT or best.preferred)


def test_policy_none() -> None:  # policy_none_test.go test-1
    assert policy_predicate(NONE, [0, 1], []) == (Hint(None, False), True)


def test_no_preference_and_no_possibility() -> None:
    # A provider with no hints at all: any node, preferred; an empty list: nothing possible.
    assert policy_predicate(RESTRICTED, [0, 1], [None]) == (H(M01, True), True)
    assert policy_predicate(RESTRICTED, [0, 1], [{"cpu": []}]) == (H(M01, False), False)


def test_bitmask_helpers() -> None:
    assert list(iterate_masks([0, 1, 2])) == [1, 2, 4, 3, 5, 6, 7]
    assert narrower(M0, M01) and narrower(M0, M1) and not narrower(M1, M0)


# -- cpu_mng_test.go ---------------------------------------------------------------------------

TOPO = Topology({
    0: CpuInfo(0, 0, 0), 1: CpuInfo(0, 0, 0), 2: CpuInfo(0, 0, 1), 3: CpuInfo(0, 0, 1),
    4: CpuInfo(1, 1, 2), 5: CpuInfo(1, 1, 2), 6: CpuInfo(1, 1, 3), 7: CpuInfo(1, 1, 3),
})
ALL = set(range(8))


@pytest.mark.parametrize("case, request_, free, want", [
    ("test-1", 4, ALL, [H(M0, True), H(M1, True), H(M01, False)]),
    ("test-2", 4, ALL - {0}, [H(M1, True), H(M01, False)]),
    ("test-3", 5, ALL, [H(M01, True)]),
    ("test-4", 8, ALL, [H(M01, True)]),
    ("test-5", 9, ALL, []),
    ("test-6", 4, {2, 3, 4, 5}, [H(M01, False)]),
])
def test_cpu_hints(case: str, request_: int, free: set[int], want: list[Hint]) -> None:
    assert cpu_hints(TOPO, free, request_, None) == want


@pytest.mark.parametrize("case, request_, free, best, want", [
    ("test-1", 4, ALL, H(M0, True), {0, 1, 2, 3}),
    ("test-2", 4, ALL - {0}, H(M1, True), {4, 5, 6, 7}),
    ("test-3", 5, ALL, H(M01, True), {0, 1, 2, 3, 4}),
    ("test-4", 5, ALL - {0}, H(M01, True), {1, 4, 5, 6, 7}),
    ("test-5", 8, ALL - {0}, H(M01, True), set()),
])
def test_allocate(case: str, request_: int, free: set[int], best: Hint, want: set[int]) -> None:
    assert allocate_cpus(TOPO, free, request_, best, None) == want


def test_reserved_cpus_are_taken_out_first() -> None:
    # 1.5 cores reserved → 2 CPUs (a whole core: 0 and 1) are never hinted nor given.
    assert cpu_hints(TOPO, ALL, 4, 1500) == [H(M1, True), H(M01, False)]
    assert allocate_cpus(TOPO, ALL, 2, H(M0, True), 1500) == {2, 3}


def test_take_by_topology_prefers_whole_sockets_then_cores() -> None:
    assert take_by_topology(TOPO, ALL, 4) == {0, 1, 2, 3}
    assert take_by_topology(TOPO, ALL - {0}, 2) == {2, 3}  # a whole free core before CPU 1
    assert take_by_topology(TOPO, {1, 2, 3, 5}, 3) == {1, 2, 3}  # single CPUs next to the taken core


def test_exclusive_cpus() -> None:
    assert [exclusive_cpus(Decimal(x)) for x in ("2", "1.5", "0.5")] == [2, 0, 0]
    assert exclusive_cpus(None) == 0
