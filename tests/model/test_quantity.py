"""Tests for tidesched.model.quantity: k8s quantity grammar, rounding and formatting."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidesched.model.quantity import (
    QuantityError,
    format_amount,
    format_cpu,
    format_memory,
    format_scalar,
    milli_value,
    parse_quantity,
    value,
)

GI = 1024**3
MI = 1024**2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100m", Decimal("0.1")),
        ("1.5", Decimal("1.5")),
        ("4Gi", Decimal(4 * GI)),
        ("1G", Decimal(10**9)),
        ("3k", Decimal(3000)),
        ("2e3", Decimal(2000)),
        ("1E-3", Decimal("0.001")),
        ("1e+3", Decimal(1000)),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("1.G", Decimal(10**9)),
        ("-1", Decimal(-1)),
        ("+7", Decimal(7)),
        ("0", Decimal(0)),
        ("-0", Decimal(0)),
        ("0Gi", Decimal(0)),
        ("007", Decimal(7)),
        ("1Ki", Decimal(1024)),
        ("7Mi", Decimal(7 * MI)),
        ("5Ti", Decimal(5 * 1024**4)),
        ("4Pi", Decimal(4 * 1024**5)),
        ("3Ei", Decimal(3 * 1024**6)),
        ("0.5Mi", Decimal(MI // 2)),
        ("100.035Ki", Decimal("102435.84")),
        ("5n", Decimal("5e-9")),
        ("4u", Decimal("4e-6")),
        ("8k", Decimal(8000)),
        ("7M", Decimal(7 * 10**6)),
        ("5T", Decimal(5 * 10**12)),
        ("2P", Decimal(2 * 10**15)),
        ("1E", Decimal(10**18)),  # "E" alone is the exa suffix, not an exponent
        ("1.3E+6", Decimal(1_300_000)),
        ("0.5e-2", Decimal("0.005")),
        ("100.035k", Decimal(100035)),
    ],
)
def test_parse_valid(text: str, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Values are kept down to nano precision, rounded away from zero.
        ("3.001n", Decimal("4e-9")),
        ("1.1E-9", Decimal("2e-9")),
        ("0.0000000001", Decimal("1e-9")),
        ("0.9n", Decimal("1e-9")),
        ("0.00000012345", Decimal("124e-9")),
        ("-0.1n", Decimal("-1e-9")),
        ("1e-400", Decimal("1e-9")),
        # Binary quantities are capped at 2**63 - 1.
        ("9Ei", Decimal(2**63 - 1)),
        ("9223372036854775807Ki", Decimal(2**63 - 1)),
        ("-9Ei", Decimal(-(2**63 - 1))),
        # Decimal quantities are not capped.
        ("12E", Decimal(12 * 10**18)),
    ],
)
def test_parse_normalisation_like_go(text: str, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "4Gix",
        "1.2.3",
        " 1",
        "1 ",
        "1\n",
        "Gi",
        ".",
        "-",
        "+",
        "m",
        "1e",
        "-3.01e-",
        "1K",
        "1i",
        ".5i",
        "0.1mi",
        "0.1am",
        "1.1.M",
        "1+1.0M",
        "1kM",
        "1e3k",
        "１",  # full-width digit
        "NaN",
        "inf",
    ],
)
def test_parse_invalid(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize("bad", [None, True, False, math.nan, math.inf, -math.inf, [1], b"1"])
def test_parse_invalid_types(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]


def test_error_message_names_input() -> None:
    with pytest.raises(QuantityError, match=r'invalid quantity "4Gix"'):
        parse_quantity("4Gix")
    with pytest.raises(QuantityError, match=r'invalid quantity " 1"'):
        parse_quantity(" 1")
    assert issubclass(QuantityError, ValueError)


def test_numbers_accepted() -> None:
    assert parse_quantity(2) == 2
    assert parse_quantity(-3) == -3
    # floats go through their shortest repr: 0.1 is one tenth, not 0.1000000000000000055...
    assert parse_quantity(0.1) == Decimal("0.1")
    assert milli_value(0.1) == 100
    assert parse_quantity(1e-05) == Decimal("0.00001")
    assert parse_quantity(2.5e3) == Decimal(2500)
    assert parse_quantity(Decimal("1.5")) == Decimal("1.5")


@pytest.mark.parametrize(
    ("text", "milli", "units"),
    [
        ("100m", 100, 1),
        ("1", 1000, 1),
        ("1.5", 1500, 2),
        ("0.1m", 1, 1),
        ("1.0001", 1001, 2),
        ("1n", 1, 1),
        ("4Gi", 4 * GI * 1000, 4 * GI),
        ("0", 0, 0),
        # negative values round away from zero (Go's ScaledValue), i.e. floor
        ("-1.5", -1500, -2),
        ("-0.1m", -1, -1),
        ("-100m", -100, -1),
        ("-1n", -1, -1),
    ],
)
def test_rounding(text: str, milli: int, units: int) -> None:
    assert milli_value(text) == milli
    assert value(text) == units


def test_value_out_of_int64_range() -> None:
    assert value("9Ei") == 2**63 - 1
    with pytest.raises(QuantityError, match="range"):
        milli_value("9Ei")
    with pytest.raises(QuantityError, match="range"):
        value("1e30")
    with pytest.raises(QuantityError, match="range"):
        value("1e2000000000")


@pytest.mark.parametrize(
    ("milli", "text"),
    [
        (4000, "4"),
        (500, "500m"),
        (1500, "1.5"),
        (1001, "1.001"),
        (0, "0"),
        (1, "1m"),
        (250.5, "250.5m"),
        (-500, "-500m"),
        (-2000, "-2"),
        (64000.0, "64"),
        (math.inf, "inf"),
    ],
)
def test_format_cpu(milli: float, text: str) -> None:
    assert format_cpu(milli) == text


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (17179869184, "16Gi"),
        (1536 * MI, "1536Mi"),
        (GI, "1Gi"),
        (1024, "1Ki"),
        (1023, "1023"),
        (1500, "1500"),
        (0, "0"),
        (16e9, "16G"),  # shorter than the exact binary form "15625000Ki"
        (float(2 * GI), "2Gi"),
        (-1024, "-1Ki"),
        (1536.5, "1536.5"),
    ],
)
def test_format_memory(nbytes: float, text: str) -> None:
    assert format_memory(nbytes) == text


@pytest.mark.parametrize(("milli", "text"), [(5000, "5"), (500, "0.5"), (1, "0.001"), (0, "0"), (8000.0, "8")])
def test_format_scalar(milli: float, text: str) -> None:
    assert format_scalar(milli) == text


@pytest.mark.parametrize(
    ("name", "internal", "text"),
    [
        ("cpu", 2500, "2.5"),
        ("memory", 16 * GI, "16Gi"),
        ("nvidia.com/gpu", 2000, "2"),
        ("huawei.com/Ascend910", 500, "0.5"),
        ("pods", 110, "110"),
        # byte-valued scalars are stored in milli-bytes, like every scalar
        ("ephemeral-storage", 10 * GI * 1000, "10Gi"),
        ("hugepages-2Mi", 4 * MI * 1000, "4Mi"),
        ("hugepages-1Gi", 1500, "1.5"),
    ],
)
def test_format_amount(name: str, internal: float, text: str) -> None:
    assert format_amount(name, internal) == text


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_cpu_round_trip(milli: int) -> None:
    assert milli_value(format_cpu(milli)) == milli
    assert milli_value(format_cpu(float(milli))) == milli


@given(st.integers(min_value=-(2**62), max_value=2**62))
def test_memory_round_trip(nbytes: int) -> None:
    text = format_memory(nbytes)
    assert value(text) == nbytes
    assert parse_quantity(text) == nbytes


@given(st.integers(min_value=0, max_value=2**20), st.sampled_from([1024, MI, GI, 1024**4, 1000, 10**9]))
def test_memory_suffix_multiples_are_short(n: int, mult: int) -> None:
    text = format_memory(n * mult)
    assert value(text) == n * mult
    assert len(text) <= len(str(n)) + 2


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_scalar_round_trip(milli: int) -> None:
    assert milli_value(format_scalar(milli)) == milli


@given(st.integers(min_value=-(10**9), max_value=10**9))
def test_fractional_milli_round_trip_exact(tenths: int) -> None:
    # one decimal of a millicore stays exact through format -> parse
    milli = tenths / 10
    assert parse_quantity(format_cpu(milli)) * 1000 == Decimal(repr(milli))
    assert parse_quantity(format_scalar(milli)) * 1000 == Decimal(repr(milli))


@given(
    st.sampled_from(["", "-", "+"]),
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=0, max_value=999),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e2", "E-1"]),
)
def test_parse_matches_decimal_model(sign: str, whole: int, frac: int, suffix: str) -> None:
    text = f"{sign}{whole}.{frac:03d}{suffix}"
    factor = {
        "": Decimal(1), "m": Decimal("0.001"), "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9),
        "Ki": Decimal(1024), "Mi": Decimal(MI), "Gi": Decimal(GI), "e2": Decimal(100), "E-1": Decimal("0.1"),
    }[suffix]
    expected = Decimal(f"{whole}.{frac:03d}") * factor
    if sign == "-":
        expected = -expected
    assert parse_quantity(text) == expected
    # milli_value rounds away from zero
    scaled = expected * 1000
    rounded = math.ceil(scaled) if scaled >= 0 else math.floor(scaled)
    assert milli_value(text) == rounded
