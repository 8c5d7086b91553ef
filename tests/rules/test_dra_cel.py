"""DRA CEL selectors (rules/dra_cel.py): the device variable as kube-scheduler builds it, and
Kubernetes' quantity and semver libraries registered on the CEL runtime."""

from __future__ import annotations

import pytest

from tidesched.model.quantity import parse_quantity
from tidesched.rules.dra_cel import CelError, DeviceCel, compare_semver

CEL = DeviceCel(parse_quantity)
GPU = CEL.device_data(
    "gpu.nvidia.com",
    {"model": "H100", "cudaComputeCapability": ("version", "9.0.0"), "numa": 1, "mig": False, "other.io/rack": "r7"},
    {"memory": "80Gi"},
    False,
)


@pytest.mark.parametrize(
    "expression, expected",
    [
        ('device.driver == "gpu.nvidia.com"', True),
        ('device.attributes["gpu.nvidia.com"].model == "H100"', True),  # no domain: the driver's
        ('device.attributes["other.io"].rack == "r7"', True),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
        ('device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("80Gi"))', False),
        ('device.capacity["gpu.nvidia.com"].memory == quantity("81920Mi")', True),  # by value
        ('device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.9.0"))', True),
        ('semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', True),
        ('semver("1.2.3").minor() == 2', True),
        ('has(device.attributes["absent.io"].x)', False),  # a domain the device lacks: empty map
        ('cel.bind(g, device.attributes["gpu.nvidia.com"], g.numa == 1 && !g.mig)', True),
        ('device.attributes["gpu.nvidia.com"].model.lowerAscii().startsWith("h")', True),
        ('quantity("1.5").asApproximateFloat() == 1.5 && quantity("2k").asInteger() == 2000', True),
        ('quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi") && quantity("-1").sign() == -1', True),
        ('isQuantity("12Zi") || !isSemver("1.2")', True),
        ("device.allowMultipleAllocations", False),
    ],
)
def test_selector_answers(expression: str, expected: bool) -> None:
    assert CEL.compile(expression).matches(GPU) is expected


def test_a_missing_attribute_is_an_evaluation_error() -> None:
    with pytest.raises(CelError, match="foo"):
        CEL.compile('device.attributes["gpu.nvidia.com"].foo == 1').matches(GPU)


@pytest.mark.parametrize("expression", ['device.driver == ', '1 + 1', '"a" == 1'])
def test_bad_expressions_do_not_compile(expression: str) -> None:
    with pytest.raises(CelError):
        CEL.compile(expression)


def test_semver_precedence() -> None:
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
               "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0"]
    for a, b in zip(ordered, ordered[1:]):
        assert compare_semver(a, b) == -1 and compare_semver(b, a) == 1
    assert compare_semver("1.0.0+build.1", "1.0.0") == 0
