"""Tests for tidesched.model.resource: Volcano Resource semantics.

Table cases follow the behaviour pinned by Volcano's resource_info tests
(same inputs and expected outcomes), re-expressed for the Python API.
"""

from __future__ import annotations

import math
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidesched.model.quantity import QuantityError
from tidesched.model.resource import (
    CPU,
    MEMORY,
    MIN_RESOURCE,
    PODS,
    Dimension,
    Resource,
    exceeded_part,
    is_scalar_resource_name,
    max_resource,
    min_resource,
    share,
)

ZERO = Dimension.ZERO
INF = Dimension.INFINITY
S1 = "scalar.test/scalar1"
HP = "hugepages-test"
GPU = "nvidia.com/gpu"


def res(cpu: float = 0, mem: float = 0, scalars: dict[str, float] | None = None, pods: int = 0) -> Resource:
    return Resource(cpu, mem, scalars, pods)


# ---------------------------------------------------------------------------- basics


def test_constants() -> None:
    assert (CPU, MEMORY, PODS) == ("cpu", "memory", "pods")
    assert MIN_RESOURCE == 0.1
    assert Dimension.ZERO.value == "Zero" and Dimension.INFINITY.value == "Infinity"


def test_slots_and_defaults() -> None:
    r = Resource()
    assert Resource.__slots__ == ("milli_cpu", "memory", "scalars", "max_task_num")
    assert (r.milli_cpu, r.memory, r.scalars, r.max_task_num) == (0.0, 0.0, {}, 0)
    with pytest.raises(AttributeError):
        r.other = 1  # type: ignore[attr-defined]
    assert Resource.empty() == Resource()


def test_constructor_copies_scalars() -> None:
    scalars = {GPU: 1000.0}
    r = Resource(scalars=scalars)
    scalars[GPU] = 5.0
    assert r.scalars == {GPU: 1000.0}


def test_from_resource_list_units() -> None:
    r = Resource.from_resource_list(
        {
            "cpu": "4m",
            "memory": 2000,
            S1: 1,
            "hugepages-test": "2",
            "ephemeral-storage": "3",
        }
    )
    assert r.milli_cpu == 4
    assert r.memory == 2000
    assert r.scalars == {S1: 1000, HP: 2000, "ephemeral-storage": 3000}
    assert r.max_task_num == 0


def test_from_resource_list_typical_node() -> None:
    r = Resource.from_resource_list({"cpu": "64", "memory": "512Gi", GPU: "8", "pods": "110", "count/pods": "5"})
    assert r.milli_cpu == 64000
    assert r.memory == 512 * 1024**3
    assert r.scalars == {GPU: 8000}  # pods is not a scalar, count/* quota entries are skipped
    assert r.max_task_num == 110
    assert Resource.from_resource_list({}) == Resource()


def test_from_resource_list_rounding() -> None:
    r = Resource.from_resource_list({"cpu": "0.0001", "memory": "1.5", GPU: "0.0001"})
    assert r.milli_cpu == 1  # ceil to a millicore
    assert r.memory == 2  # ceil to a byte
    assert r.scalars[GPU] == 1


def test_from_resource_list_error_names_key() -> None:
    with pytest.raises(QuantityError) as info:
        Resource.from_resource_list({"cpu": "1", GPU: "4Gix"})
    assert GPU in str(info.value) and "4Gix" in str(info.value)
    with pytest.raises(QuantityError, match="memory"):
        Resource.from_resource_list({"memory": None})  # type: ignore[dict-item]


def test_clone_is_deep() -> None:
    a = res(1000, 2000, {GPU: 1000}, pods=10)
    b = a.clone()
    assert b == a and b is not a and b.scalars is not a.scalars
    b.add_scalar(GPU, 1)
    b.milli_cpu = 1
    assert a.scalars[GPU] == 1000 and a.milli_cpu == 1000
    assert b.max_task_num == 10


def test_infinite() -> None:
    r = Resource.infinite()
    assert r.milli_cpu == sys.float_info.max and r.memory == sys.float_info.max
    assert r.max_task_num == sys.maxsize and r.scalars == {}


def test_get_and_scalar_setters() -> None:
    r = res(1500, 1024, {GPU: 2000}, pods=7)
    assert r.get(CPU) == 1500 and r.get(MEMORY) == 1024 and r.get(GPU) == 2000
    assert r.get("missing") == 0.0
    assert r.get(PODS) == 7.0
    r.add_scalar("scalar1", 100)
    assert r.scalars["scalar1"] == 100
    r.add_scalar("scalar1", 100)
    r.set_scalar(GPU, 5)
    assert r.scalars == {GPU: 5, "scalar1": 200}


def test_add_scalar_table() -> None:
    r = res()
    r.add_scalar("scalar1", 100)
    assert r.scalars == {"scalar1": 100}
    r = res(4000, 8000, {HP: 2})
    r.add_scalar("scalar2", 200)
    assert r == res(4000, 8000, {HP: 2, "scalar2": 200})


def test_resource_names() -> None:
    r = res(0.2, 0.05, {"b": 1, "a": 0.1, "zero": 0.0, "tiny": 0.09})
    assert r.resource_names() == ["cpu", "a", "b"]
    assert res(1, 1).resource_names() == ["cpu", "memory"]
    assert Resource().resource_names() == []


def test_is_empty_and_best_effort() -> None:
    assert Resource().is_empty()
    assert res(0.09, 0.09, {GPU: 0.09}).is_empty()
    assert not res(0.1).is_empty()
    assert not res(0, 0.1).is_empty()
    assert not res(0, 0, {GPU: 0.1}).is_empty()
    # pods never makes a request non-empty
    assert res(pods=110).is_empty()
    assert res(scalars={PODS: 1}).is_empty()
    assert res(pods=1).is_best_effort()
    assert not res(100).is_best_effort()


def test_is_zero() -> None:
    assert res().is_zero(CPU)
    full = res(4000, 4000, {S1: 4, HP: 5})
    assert not full.is_zero(CPU) and not full.is_zero(MEMORY) and not full.is_zero(S1)
    assert res(4000, 4000, {S1: 0, HP: 5}).is_zero(S1)
    assert full.is_zero("unknown")


def test_eq_exact_and_missing_scalar_is_zero() -> None:
    assert res(1, 2, {GPU: 0}) == res(1, 2)
    assert res(1, 2, {GPU: 1}) != res(1, 2)
    assert res(1, 2) != res(1, 2.05)  # __eq__ has no tolerance
    assert res(pods=1) != res(pods=2)
    assert res() != "cpu 0"
    with pytest.raises(TypeError):
        hash(res())


def test_repr_natural_units() -> None:
    r = res(4000, 16 * 1024**3, {GPU: 2000, "huawei.com/npu": 500})
    assert repr(r) == "cpu 4, memory 16Gi, huawei.com/npu 0.5, nvidia.com/gpu 2"
    assert str(r) == repr(r)
    assert repr(res(500, 1536 * 1024**2, pods=110)) == "cpu 500m, memory 1536Mi, pods 110"
    assert res(1500, 0).to_natural() == {"cpu": "1.5", "memory": "0"}
    assert res(0, 0, {"hugepages-2Mi": 4 * 1024**2 * 1000}).to_natural()["hugepages-2Mi"] == "4Mi"


# ---------------------------------------------------------------------------- arithmetic


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(), res(4000, 2000, {S1: 1, HP: 2}), res(4000, 2000, {S1: 1, HP: 2})),
        (res(4000, 4000, {S1: 1, HP: 2}), res(4000, 2000, {S1: 4, HP: 5}), res(8000, 6000, {S1: 5, HP: 7})),
        (res(4000, 4000, {S1: 1}), res(4000, 2000, {S1: 4, HP: 5}), res(8000, 6000, {S1: 5, HP: 5})),
    ],
)
def test_add_table(left: Resource, right: Resource, expected: Resource) -> None:
    out = left.add(right)
    assert out is left
    assert left == expected and left.scalars.keys() == expected.scalars.keys()


def test_add_keeps_max_task_num() -> None:
    a = res(1, 1, pods=5)
    a.add(res(1, 1, pods=7))
    assert a.max_task_num == 5


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(4000, 2000, {S1: 1, HP: 2}), res(), res(4000, 2000, {S1: 1, HP: 2})),
        (
            res(4000, 4000, {S1: 1000, HP: 2000}),
            res(3000, 2000, {S1: 500, HP: 1000}),
            res(1000, 2000, {S1: 500, HP: 1000}),
        ),
    ],
)
def test_sub_table(left: Resource, right: Resource, expected: Resource) -> None:
    assert left.sub(right) is left
    assert left == expected


def test_sub_does_not_assert() -> None:
    r = res(1000, 10).sub(res(3000, 20, {GPU: 1000}))
    assert r == res(-2000, -10, {GPU: -1000})


def test_operators_do_not_mutate() -> None:
    a = res(1000, 10, {GPU: 1000})
    b = res(500, 5)
    assert a + b == res(1500, 15, {GPU: 1000})
    assert a - b == res(500, 5, {GPU: 1000})
    assert a == res(1000, 10, {GPU: 1000})


def test_multi() -> None:
    r = res(1000, 2048, {GPU: 2000}, pods=3)
    assert r.multi(1.5) is r
    assert r == res(1500, 3072, {GPU: 3000}, pods=3)


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(), res(4000, 2000, {S1: 1, HP: 2}), res(4000, 2000, {S1: 1, HP: 2})),
        (res(4000, 4000, {S1: 1, HP: 2}), res(4000, 2000, {S1: 4, HP: 5}), res(4000, 4000, {S1: 4, HP: 5})),
        (res(1, 1, {S1: 9}), res(0, 0, {S1: 1, HP: 3}), res(1, 1, {S1: 9, HP: 3})),
    ],
)
def test_set_max_resource(left: Resource, right: Resource, expected: Resource) -> None:
    assert left.set_max_resource(right) is None
    assert left == expected


def test_fit_delta() -> None:
    idle = res(4000, 8000, {GPU: 2000})
    idle.fit_delta(res(1000, 0, {GPU: 3000, "rdma": 0, "fpga": 1000}))
    assert idle.milli_cpu == pytest.approx(2999.9)
    assert idle.memory == 8000  # not requested: untouched
    assert idle.scalars[GPU] == pytest.approx(-1000.1)
    assert idle.scalars["fpga"] == pytest.approx(-1000.1)
    assert "rdma" not in idle.scalars


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(4000, 2000, {S1: 1, HP: 2}), res(3000, 2000, {S1: 0, HP: 0}), res(3000, 2000, {S1: 0, HP: 0})),
        (res(4000, 4000, {S1: 1000, HP: 2000}), res(5000, 2000, {S1: 0, HP: 3000}), res(4000, 2000, {S1: 0, HP: 2000})),
        (res(4000, 2000, {S1: 1, HP: 2}), res(3000, 2000, {S1: 0}), res(3000, 2000, {S1: 0, HP: 0})),
        (res(4000, 4000, {S1: 1000, HP: 2000}), res(sys.float_info.max, 2000), res(4000, 2000, {S1: 0, HP: 0})),
    ],
)
def test_min_dimension_resource_zero(left: Resource, right: Resource, expected: Resource) -> None:
    assert left.min_dimension_resource(right, ZERO) is left
    assert left == expected and left.scalars.keys() == expected.scalars.keys()


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(4000, 2000, {S1: 1, HP: 2}), res(3000, 2000, {S1: 0}), res(3000, 2000, {S1: 0, HP: 2})),
        (res(4000, 4000, {S1: 1000, HP: 2000}), res(sys.float_info.max, 2000), res(4000, 2000, {S1: 1000, HP: 2000})),
    ],
)
def test_min_dimension_resource_infinity(left: Resource, right: Resource, expected: Resource) -> None:
    left.min_dimension_resource(right, INF)
    assert left == expected


def test_min_dimension_resource_does_not_add_right_only_scalars() -> None:
    r = res(1, 1).min_dimension_resource(res(5, 5, {GPU: 1}), ZERO)
    assert r.scalars == {}


# ---------------------------------------------------------------------------- diff / exceeded part


@pytest.mark.parametrize(
    ("left", "right", "inc", "dec"),
    [
        (res(), res(), res(), res()),
        (res(1000, 2000), res(), res(1000, 2000), res()),
        (res(), res(1000, 2000), res(), res(1000, 2000)),
        (res(1000, 2000, {S1: 1000}), res(2000, 1000), res(0, 1000, {S1: 1000}), res(1000, 0)),
        (res(2000, 1000), res(1000, 2000, {S1: 1000}), res(1000, 0), res(0, 1000, {S1: 1000})),
        (res(1000, 2000, {S1: 3000}), res(2000, 1000, {S1: 1000}), res(0, 1000, {S1: 2000}), res(1000, 0)),
    ],
)
def test_diff_zero(left: Resource, right: Resource, inc: Resource, dec: Resource) -> None:
    got_inc, got_dec = left.diff(right, ZERO)
    assert (got_inc.milli_cpu, got_inc.memory, got_inc.scalars) == (inc.milli_cpu, inc.memory, inc.scalars)
    assert (got_dec.milli_cpu, got_dec.memory, got_dec.scalars) == (dec.milli_cpu, dec.memory, dec.scalars)


@pytest.mark.parametrize(
    ("left", "right", "inc", "dec"),
    [
        # the dimension missing on the right is infinite there: decreased by infinity
        (res(1000, 2000, {S1: 1000}), res(2000, 1000), res(0, 1000), res(1000, 0, {S1: math.inf})),
        (res(2000, 1000), res(1000, 2000, {S1: 1000}), res(1000, 0, {S1: math.inf}), res(0, 1000)),
    ],
)
def test_diff_infinity(left: Resource, right: Resource, inc: Resource, dec: Resource) -> None:
    got_inc, got_dec = left.diff(right, INF)
    assert (got_inc.milli_cpu, got_inc.memory, got_inc.scalars) == (inc.milli_cpu, inc.memory, inc.scalars)
    assert (got_dec.milli_cpu, got_dec.memory, got_dec.scalars) == (dec.milli_cpu, dec.memory, dec.scalars)


def test_diff_tie_goes_to_decreased() -> None:
    inc, dec = res(1, 1, {GPU: 5}).diff(res(1, 1, {GPU: 5}), ZERO)
    assert inc.scalars == {} and dec.scalars == {GPU: 0}


def test_diff_does_not_mutate() -> None:
    a, b = res(1, 2, {GPU: 3}), res(3, 2, {"x": 1})
    a.diff(b, INF)
    assert a == res(1, 2, {GPU: 3}) and b == res(3, 2, {"x": 1})
    assert a.scalars.keys() == {GPU} and b.scalars.keys() == {"x"}


def test_exceeded_part() -> None:
    used = res(3000, 1024, {GPU: 4000, "rdma": 1000})
    quota = res(2000, 2048, {GPU: 2000})
    over = used.exceeded_part(quota)
    assert over == res(1000, 0, {GPU: 2000, "rdma": 1000})
    assert exceeded_part(used, quota) == over
    assert exceeded_part(used, None) is used
    assert exceeded_part(None, quota) == Resource()


# ---------------------------------------------------------------------------- comparison tables


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(), res(), False),
        (res(), res(4000, 2000, {S1: 1000, HP: 2000}), True),
        (res(4000, 4000, {S1: 1000, HP: 2000}), res(8000, 8000, {S1: 4000, HP: 5000}), True),
        (res(4000, 4000, {S1: 5000, HP: 2000}), res(8000, 8000, {S1: 4000, HP: 5000}), False),
        (res(9000, 4000, {S1: 1000, HP: 2000}), res(8000, 8000, {S1: 4000, HP: 5000}), False),
    ],
)
def test_less_zero(left: Resource, right: Resource, expected: bool) -> None:
    assert left.less(right, ZERO) is expected


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(1000, 1000, {S1: 1000, HP: 2000}), res(2000, 2000, {HP: 3000}), True),
        (res(1000, 1000, {HP: 1000}), res(2000, 2000, {S1: 1000, HP: 2000}), False),
        (res(1000, 1000, {HP: 2000}), res(2000, 2000, {S1: 1000, HP: 2000}), False),
    ],
)
def test_less_infinity(left: Resource, right: Resource, expected: bool) -> None:
    assert left.less(right, INF) is expected


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(), res(), True),
        (res(), res(4000, 2000, {S1: 1000, HP: 2000}), True),
        (res(4000, 2000, {S1: 1000, HP: 2000}), res(), False),
        (res(4000, 4000, {S1: 1000, HP: 2000}), res(8000, 8000, {S1: 4000, HP: 5000}), True),
        (res(4000, 8000, {S1: 1000, HP: 2000}), res(8000, 8000, {S1: 4000, HP: 5000}), True),
        (res(4000, 4000, {S1: 4000, HP: 2000}), res(8000, 8000, {S1: 4000, HP: 5000}), True),
        (res(4000, 4000, {S1: 5000, HP: 2000}), res(8000, 8000, {S1: 4000, HP: 5000}), False),
        (res(9000, 4000, {S1: 1000, HP: 2000}), res(8000, 8000, {S1: 4000, HP: 5000}), False),
    ],
)
def test_less_equal_zero(left: Resource, right: Resource, expected: bool) -> None:
    assert left.less_equal(right, ZERO) is expected


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(), res(), True),
        (res(), res(4000, 2000, {S1: 1000, HP: 2000}), False),
        (res(4000, 2000, {S1: 1000, HP: 2000}), res(), False),
        (res(4000, 2000), res(4000, 2000, {S1: 1000, HP: 2000}), False),
        (res(4000, 2000, {S1: 1000, HP: 2000}), res(4000, 2000), True),
    ],
)
def test_less_equal_infinity(left: Resource, right: Resource, expected: bool) -> None:
    assert left.less_equal(right, INF) is expected


def test_less_equal_tolerance() -> None:
    assert res(1000.09).less_equal(res(1000))
    assert not res(1000.1).less_equal(res(1000))
    assert res(0, 0, {GPU: 1000.05}).less_equal(res(0, 0, {GPU: 1000}))
    # tolerance also works at magnitudes where x + 0.1 == x
    big = 2.0**60
    assert res(big).less_equal(res(big))
    assert not res(math.inf).less_equal(res(math.inf))  # as in Go: inf - inf is NaN


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(), res(), False),
        (res(), res(2000, 2000, {S1: 1000, HP: 2000}), True),
        (res(2000, 2000, {S1: 1000, HP: 2000}), res(), False),
        (res(2000, 2000, {S1: 1000, HP: 2000}), res(4000, 2000, {S1: 1000, HP: 2000}), True),
        (res(2000, 2000, {S1: 1000, HP: 2000}), res(2000, 4000, {S1: 1000, HP: 2000}), True),
        (res(2000, 2000, {S1: 1000, HP: 2000}), res(2000, 2000, {S1: 2000, HP: 2000}), True),
        (res(2000, 2000, {HP: 2000}), res(2000, 2000, {S1: 1000, HP: 2000}), True),
        (res(4000, 4000, {S1: 1000, HP: 2000}), res(2000, 2000, {S1: 1000, HP: 2000}), False),
        (res(2000, 2000, {S1: 1000, HP: 2000}), res(2000, 2000, {HP: 2000}), False),
    ],
)
def test_less_partly_zero(left: Resource, right: Resource, expected: bool) -> None:
    assert left.less_partly(right, ZERO) is expected


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(2000, 2000, {HP: 2000}), res(2000, 2000, {S1: 1000, HP: 2000}), False),
        (res(2000, 2000, {S1: 1000, HP: 2000}), res(2000, 2000, {HP: 2000}), True),
    ],
)
def test_less_partly_infinity(left: Resource, right: Resource, expected: bool) -> None:
    assert left.less_partly(right, INF) is expected


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(), res(), True),
        (res(), res(2000, 2000, {S1: 1000, HP: 2000}), True),
        (res(2000, 2000, {S1: 1000, HP: 2000}), res(), False),
        (res(2000, 2000, {S1: 1000, HP: 2000}), res(4000, 2000, {S1: 1000, HP: 2000}), True),
        (res(2000, 2000, {S1: 1000, HP: 2000}), res(2000, 4000, {S1: 1000, HP: 2000}), True),
        (res(2000, 2000, {S1: 1000, HP: 2000}), res(2000, 2000, {S1: 2000, HP: 2000}), True),
        (res(2000, 2000, {HP: 2000}), res(2000, 2000, {S1: 1000, HP: 2000}), True),
        (res(4000, 4000, {S1: 1000, HP: 2000}), res(2000, 2000, {S1: 1000, HP: 2000}), True),
        (res(2000, 2000, {S1: 1000, HP: 2000}), res(2000, 2000, {HP: 2000}), True),
        (res(4000, 4000, {S1: 1000}), res(2000, 2000, {S1: 999}), False),
    ],
)
def test_less_equal_partly_zero(left: Resource, right: Resource, expected: bool) -> None:
    assert left.less_equal_partly(right, ZERO) is expected


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(2000, 2000, {HP: 2000}), res(2000, 2000, {S1: 1000, HP: 2000}), True),
        (res(2000, 2000, {S1: 1000, HP: 2000}), res(2000, 2000, {HP: 2000}), True),
        (res(3000, 3000, {HP: 3000}), res(2000, 2000, {S1: 1000, HP: 2000}), False),
        (res(3000, 3000, {S1: 1, HP: 3000}), res(2000, 2000, {HP: 2000}), True),
    ],
)
def test_less_equal_partly_infinity(left: Resource, right: Resource, expected: bool) -> None:
    assert left.less_equal_partly(right, INF) is expected


@pytest.mark.parametrize(
    ("left", "right", "req", "expected", "names"),
    [
        (res(), res(), None, True, []),
        (res(5000, 4000), res(), None, False, ["cpu", "memory"]),
        (res(5000), res(4000, 2000, {S1: 1000}), res(1000), False, ["cpu"]),
        (res(3000, 3000), res(4000, 2000), res(0, 1000), False, ["memory"]),
        (res(4, 4000), res(), res(), True, []),
        (res(4, 4000, {GPU: 1}), res(8, 8000), res(4, 2000, {GPU: 1}), False, [GPU]),
        (
            res(10, 4000, {GPU: 1}),
            res(100, 8000, {"nvidia.com/A100": 1}),
            res(10, 4000, {GPU: 0, "nvidia.com/A100": 1, "scalar": 1}),
            True,
            [],
        ),
        (
            res(110, 4000, {GPU: 1, "nvidia.com/A100": 1, "scalar": 1}),
            res(100, 8000, {"nvidia.com/A100": 1, "scalar": 1}),
            res(0, 4000, {GPU: 0, "nvidia.com/A100": 1, "scalar": 1}),
            True,
            [],
        ),
        # pods is never compared
        (res(0, 0, {PODS: 5}), res(), res(0, 0, {PODS: 1}), True, []),
    ],
)
def test_less_equal_with_dimension(
    left: Resource, right: Resource, req: Resource | None, expected: bool, names: list[str]
) -> None:
    assert left.less_equal_with_dimension(right, req) is expected
    assert left.less_equal_with_dimension_names(right, req) == (expected, names)


def test_less_equal_with_dimension_has_no_tolerance() -> None:
    assert not res(1000.05).less_equal_with_dimension(res(1000), res(1))
    assert res(1000.05).less_equal(res(1000))


@pytest.mark.parametrize(
    ("left", "right", "default", "names"),
    [
        (res(), res(), ZERO, []),
        (res(), res(4000, 2000, {S1: 1000, HP: 2000}), ZERO, []),
        (res(4000, 2000, {S1: 1000, HP: 2000}), res(), ZERO, ["cpu", "memory", HP, S1]),
        (res(4000, 4000, {S1: 5000, HP: 2000}), res(8000, 8000, {S1: 4000, HP: 5000}), ZERO, [S1]),
        (res(9000, 4000, {S1: 1000, HP: 2000}), res(8000, 8000, {S1: 4000, HP: 5000}), ZERO, ["cpu"]),
        (res(), res(4000, 2000, {S1: 1000, HP: 2000}), INF, []),
        (res(4000, 2000, {S1: 1000, HP: 2000}), res(), INF, ["cpu", "memory"]),
    ],
)
def test_less_equal_with_names(left: Resource, right: Resource, default: Dimension, names: list[str]) -> None:
    assert left.less_equal_with_names(right, default) == (not names, names)


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (res(), res(), True),
        (res(2000, 2000, {}), res(2000, 2000, {S1: 0}), True),
        (res(2000, 2000, {HP: 2000}), res(2000, 2000, {HP: 2000}), True),
        (res(), res(2000, 4000, {S1: 1000, HP: 2000}), False),
        (res(2000, 2000.05), res(2000.05, 2000), True),
        # symmetric: a scalar only on the right counts too
        (res(1, 1), res(1, 1, {GPU: 1000}), False),
        (res(1, 1, {GPU: 1000}), res(1, 1), False),
    ],
)
def test_equal_zero(left: Resource, right: Resource, expected: bool) -> None:
    assert left.equal(right, ZERO) is expected
    assert right.equal(left, ZERO) is expected


def test_equal_infinity_requires_same_scalar_names() -> None:
    assert res(1, 1, {GPU: 1}).equal(res(1, 1, {GPU: 1}), INF)
    assert not res(1, 1, {GPU: 0}).equal(res(1, 1), INF)
    assert res(1, 1, {GPU: 0}).equal(res(1, 1), ZERO)


# ---------------------------------------------------------------------------- helpers


def test_max_resource() -> None:
    left = res(1, 1024, {"gpu": 1, "common": 4, "neg": -1})
    right = res(2, 1024, {"npu": 2, "common": 5})
    assert max_resource(left, right) == res(2, 1024, {"gpu": 1, "npu": 2, "common": 5})
    assert "neg" not in max_resource(left, right).scalars


def test_min_resource() -> None:
    left = res(1, 2048, {"gpu": 1, "common": 4})
    right = res(2, 1024, {"npu": 2, "common": 5})
    out = min_resource(left, right)
    assert out == res(1, 1024, {"gpu": 0, "common": 4})
    assert out.scalars.keys() == {"gpu", "common"}
    assert min_resource(left, res(5, 5)).scalars == {}


@pytest.mark.parametrize(("alloc", "deserved", "expected"), [(0, 0, 0.0), (5, 0, 1.0), (1, 4, 0.25), (6, 4, 1.5)])
def test_share(alloc: float, deserved: float, expected: float) -> None:
    assert share(alloc, deserved) == expected


# ---------------------------------------------------------------------------- properties

NAMES = [GPU, "huawei.com/npu", "rdma/hca", "hugepages-2Mi"]
amounts = st.integers(min_value=0, max_value=10**9).map(float)
positive_amounts = st.integers(min_value=1, max_value=10**6).map(float)


def resources(values: st.SearchStrategy[float] = amounts) -> st.SearchStrategy[Resource]:
    return st.builds(
        Resource,
        st.integers(min_value=0, max_value=10**6).map(float),
        st.integers(min_value=0, max_value=2**40).map(float),
        st.dictionaries(st.sampled_from(NAMES), values, max_size=len(NAMES)),
    )


def float_resources() -> st.SearchStrategy[Resource]:
    fl = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)
    return st.builds(
        Resource,
        fl,
        st.floats(min_value=0, max_value=2.0**40, allow_nan=False, allow_infinity=False),
        st.dictionaries(st.sampled_from(NAMES), fl, max_size=len(NAMES)),
    )


def _pairs(a: Resource, b: Resource, default: Dimension) -> list[tuple[float, float]]:
    """Reference model: every dimension as (left, right) with missing scalars filled in."""
    fill = 0.0 if default is ZERO else math.inf
    pairs = [(a.milli_cpu, b.milli_cpu), (a.memory, b.memory)]
    for name in a.scalars.keys() | b.scalars.keys():
        pairs.append((a.scalars.get(name, fill), b.scalars.get(name, fill)))
    return pairs


def _le(left: float, right: float) -> bool:
    return left < right or left - right < MIN_RESOURCE


@given(float_resources(), float_resources())
def test_add_then_sub_restores(a: Resource, b: Resource) -> None:
    restored = a.clone().add(b).sub(b)
    assert restored.equal(a, ZERO)
    assert a.clone().sub(b).add(b).equal(a, ZERO)


@given(float_resources())
def test_less_equal_reflexive(a: Resource) -> None:
    assert a.less_equal(a, ZERO)
    assert a.less_equal(a, INF)
    assert a.equal(a, ZERO) and a.equal(a, INF)
    assert not a.less(a, ZERO)


@given(float_resources(), float_resources())
def test_less_equal_after_add(a: Resource, b: Resource) -> None:
    total = a + b
    assert a.less_equal(total, ZERO)
    # under INFINITY a scalar that only b brings in is "infinite" on the left side
    assert a.less_equal(total, INF) is (b.scalars.keys() <= a.scalars.keys())


@given(resources(), resources())
def test_exceeded_part_plus_min_is_left(a: Resource, b: Resource) -> None:
    over = exceeded_part(a, b)
    assert all(v >= 0 for v in (over.milli_cpu, over.memory, *over.scalars.values()))
    assert (over + min_resource(a, b)).equal(a, ZERO)


@given(resources(), resources())
def test_diff_model(a: Resource, b: Resource) -> None:
    inc, dec = a.diff(b, ZERO)
    delta = inc - dec
    assert delta.equal(a - b, ZERO)
    for r in (inc, dec):
        assert all(v >= 0 for v in (r.milli_cpu, r.memory, *r.scalars.values()))


@given(resources(positive_amounts), resources(positive_amounts), st.sampled_from([ZERO, INF]))
def test_comparisons_match_reference_model(a: Resource, b: Resource, default: Dimension) -> None:
    pairs = _pairs(a, b, default)
    assert a.less(b, default) is all(left < right for left, right in pairs)
    assert a.less_equal(b, default) is all(_le(left, right) for left, right in pairs)
    assert a.less_partly(b, default) is any(left < right for left, right in pairs)
    assert a.less_equal_partly(b, default) is any(_le(left, right) for left, right in pairs)
    assert a.equal(b, default) is all(left == right for left, right in pairs)


@given(resources(), resources())
def test_zero_versus_infinity_on_missing_dims(a: Resource, b: Resource) -> None:
    if a.scalars.keys() == b.scalars.keys():
        assert a.less_equal(b, ZERO) is a.less_equal(b, INF)
        assert a.less(b, ZERO) is a.less(b, INF)
    # INFINITY never accepts a dimension that is missing on the left but listed on the right
    if not b.scalars.keys() <= a.scalars.keys():
        assert not a.less_equal(b, INF)
    # ...and treats one missing on the right as unlimited: dropping b's extra
    # information can only make ZERO stricter than INFINITY
    if b.scalars.keys() <= a.scalars.keys() and a.less_equal(b, ZERO):
        assert a.less_equal(b, INF)


@given(resources(), resources(), st.sampled_from([ZERO, INF]))
def test_partial_order_consistency(a: Resource, b: Resource, default: Dimension) -> None:
    le_ab = a.less_equal(b, default)
    le_ba = b.less_equal(a, default)
    if a.less(b, default):
        assert le_ab
        assert not le_ba  # integer amounts: strictly less means at least 1 apart
    if a.equal(b, default):
        assert le_ab and le_ba
    if le_ab and le_ba:
        assert a.equal(b, default)
    if le_ab:
        assert a.less_equal_partly(b, default)
    # "partly" is the negation of the opposite "for all" relation
    if not (default is ZERO and _has_zero_gap(a, b)):
        assert a.less_partly(b, default) is not le_ba


def _has_zero_gap(a: Resource, b: Resource) -> bool:
    # Volcano's less_partly(ZERO) answers True for any scalar listed only on the
    # right, even when its value is 0; that is the one place the duality breaks.
    return any(name not in a.scalars and b.scalars[name] == 0 for name in b.scalars)


@given(resources(), resources(), resources())
def test_less_equal_with_dimension_matches_filtered_less_equal(a: Resource, b: Resource, req: Resource) -> None:
    expected = True
    if req.milli_cpu > 0 and a.milli_cpu > b.milli_cpu:
        expected = False
    if req.memory > 0 and a.memory > b.memory:
        expected = False
    if a.scalars:
        for name, q in req.scalars.items():
            if q > 0 and a.get(name) > b.get(name):
                expected = False
    assert a.less_equal_with_dimension(b, req) is expected
    # requesting nothing never blocks
    assert a.less_equal_with_dimension(b, Resource())


@given(resources())
def test_natural_round_trip(a: Resource) -> None:
    back = Resource.from_resource_list(a.to_natural())
    assert back == a


# ---------------------------------------------------------------------------- names Volcano counts


@pytest.mark.parametrize(
    "name, counted",
    [
        ("nvidia.com/gpu", True),
        ("huawei.com/Ascend910", True),
        ("nvidia.com/mig-1g.5gb", True),
        ("volcano.sh/vgpu-memory", True),
        ("ephemeral-storage", True),
        ("hugepages-2Mi", True),
        ("attachable-volumes-aws-ebs", True),
        ("kubernetes.io/batch-cpu", True),
        # quota-style names Volcano's job and podgroup controllers write into minResources
        ("requests.cpu", False),
        ("requests.memory", False),
        ("requests.nvidia.com/gpu", False),
        ("limits.cpu", False),
        ("count/pods", False),
        # native names without a domain that are no resource, and invalid extended names
        ("gpu", False),
        ("Example.com/gpu", False),
        ("a/b/c", False),
    ],
)
def test_scalar_resource_names_as_volcano_counts_them(name: str, counted: bool) -> None:
    assert is_scalar_resource_name(name) is counted
    r = Resource.from_resource_list({name: "2"})
    assert (name in r.scalars) is counted


def test_min_resources_as_volcanos_job_controller_writes_them() -> None:
    # spec.minResources of the PodGroup vc-controller-manager v1.7.0 made for a Job of one master
    # (2 cpu, 4Gi) and four workers (2 cpu, 4Gi, 4 GPUs): the quota-style duplicates and the pod
    # counts must not become dimensions no queue or node has.
    written = {
        "count/pods": "5", "cpu": "10", "memory": "20Gi", "nvidia.com/gpu": "16", "pods": "5",
        "requests.cpu": "10", "requests.memory": "20Gi", "requests.nvidia.com/gpu": "16",
    }
    r = Resource.from_resource_list(written)
    assert r == Resource.from_resource_list({"cpu": "10", "memory": "20Gi", "nvidia.com/gpu": "16", "pods": "5"})
    assert r.resource_names() == ["cpu", "memory", "nvidia.com/gpu"]
    assert r.max_task_num == 5
