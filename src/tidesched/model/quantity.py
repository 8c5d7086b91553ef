"""Kubernetes resource quantities: parsing to exact decimals and human formatting.

Parsing follows the grammar documented on apimachinery's ``resource.Quantity``::

    quantity  ::= sign? number suffix
    number    ::= digits | digits "." digits | digits "." | "." digits
    suffix    ::= "" | binarySI | decimalSI | ("e" | "E") sign? digits
    binarySI  ::= Ki | Mi | Gi | Ti | Pi | Ei
    decimalSI ::= n | u | m | k | M | G | T | P | E

plus the two normalisations the Go parser applies to the parsed value:
non-zero values are kept only down to nano precision (rounded away from zero,
so "0.1n" becomes 1n) and binary-suffixed values are capped at 2**63 - 1.
Surrounding whitespace is rejected, as ``resource.ParseQuantity`` does.

``milli_value`` / ``value`` mirror ``Quantity.MilliValue()`` / ``Value()``: the
result is rounded to an integer *away from zero* (ceil for positive values,
floor for negative ones).

The ``format_*`` helpers render the scheduler's internal float units (millicores,
bytes, milli-units) back into short strings that ``parse_quantity`` accepts.
"""

from __future__ import annotations

import functools
import json
import math
import re
from decimal import Decimal

__all__ = [
    "QuantityError",
    "QuantityInput",
    "parse_quantity",
    "milli_value",
    "value",
    "format_cpu",
    "format_memory",
    "format_scalar",
    "format_amount",
]

QuantityInput = str | int | float | Decimal


class QuantityError(ValueError):
    """Raised for a string or number that is not a valid Kubernetes quantity."""


# Powers of two for binary suffixes, powers of ten for decimal SI suffixes.
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_NUMBER_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", re.DOTALL)
_EXPONENT_RE = re.compile(r"[eE]([+-]?[0-9]+)", re.DOTALL)

_NANO_EXP = -9
_MAX_INT64 = 2**63 - 1
_MIN_INT64 = -(2**63)
# Go stores the decimal exponent in an int32.
_MAX_EXPONENT = 2**31 - 1


def _show(raw: object) -> str:
    # Double-quoted like Go's %q for strings so whitespace problems are visible.
    return json.dumps(raw) if isinstance(raw, str) else repr(raw)


def _error(raw: object, reason: str) -> QuantityError:
    return QuantityError(f"invalid quantity {_show(raw)}: {reason}")


def _digit_count(n: int) -> int:
    return len(str(n)) if n else 0


def _parse_string(text: str, raw: object) -> Decimal:
    if text == "":
        raise _error(raw, "empty string")
    match = _NUMBER_RE.fullmatch(text)
    assert match is not None  # the pattern accepts any string
    sign, whole, frac, suffix = match.groups()
    frac = frac or ""
    if not whole and not frac:
        # The Go scanner would read "Gi" or "." as zero, but the documented
        # grammar requires at least one digit; a digit-less quantity is a typo.
        raise _error(raw, "no digits in the numeric part")

    exp10 = -len(frac)
    exp2 = 0
    binary = False
    if suffix in _DECIMAL_SUFFIXES:
        exp10 += _DECIMAL_SUFFIXES[suffix]
    elif suffix in _BINARY_SUFFIXES:
        exp2 = _BINARY_SUFFIXES[suffix]
        binary = True
    else:
        exp_match = _EXPONENT_RE.fullmatch(suffix)
        if exp_match is None:
            raise _error(raw, f"unknown suffix {_show(suffix)}")
        exponent = int(exp_match.group(1))
        if abs(exponent) > _MAX_EXPONENT:
            raise _error(raw, "exponent out of range")
        exp10 += exponent

    mantissa = int(whole + frac or "0") << exp2
    if mantissa == 0:
        return Decimal(0)

    if exp10 < _NANO_EXP:
        # Keep nano precision only, rounding away from zero like the Go parser.
        shift = _NANO_EXP - exp10
        if shift > _digit_count(mantissa):
            mantissa = 1  # everything is below 1n: the minimum non-zero amount
        else:
            quotient, remainder = divmod(mantissa, 10**shift)
            mantissa = quotient + (1 if remainder else 0)
        exp10 = _NANO_EXP

    if binary and exp10 >= 0 and mantissa > _MAX_INT64 // 10**exp10:
        mantissa, exp10 = _MAX_INT64, 0  # Go silently caps binarySI at 2**63-1
    elif binary and exp10 < 0 and mantissa > _MAX_INT64 * 10 ** (-exp10):
        mantissa, exp10 = _MAX_INT64, 0

    return Decimal(f"{'-' if sign == '-' else ''}{mantissa}E{exp10}")


def parse_quantity(value: QuantityInput) -> Decimal:
    """Parse a Kubernetes quantity ("100m", "4Gi", "2e3", 2, 0.5) to an exact Decimal.

    Numbers are accepted because YAML turns ``cpu: 2`` into an int; floats go
    through their shortest repr so ``0.1`` means one tenth, not its binary
    approximation.
    """
    if isinstance(value, bool):
        raise _error(value, "booleans are not quantities")
    if isinstance(value, str):
        return _parse_string(value, value)
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _error(value, "not a finite number")
        return _parse_string(repr(value), value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise _error(value, "not a finite number")
        return _parse_string(format(value, "f"), value)
    raise _error(value, f"unsupported type {type(value).__name__}")


def _scaled_int(raw: QuantityInput, scale: int) -> int:
    """Return ``q * 10**scale`` rounded away from zero, as Go's ScaledValue does."""
    q = parse_quantity(raw)
    sign, digits, exp = q.as_tuple()
    assert isinstance(exp, int)
    mantissa = int("".join(map(str, digits)) or "0")
    if mantissa == 0:
        return 0
    exp += scale
    if exp >= 0:
        if len(digits) + exp > 20:  # clearly beyond int64; avoid building huge ints
            raise _error(raw, "value out of int64 range")
        result = mantissa * 10**exp
    elif -exp > len(digits):
        result = 1  # 0 < |q| * 10**scale < 1 rounds away from zero to 1
    else:
        quotient, remainder = divmod(mantissa, 10 ** (-exp))
        result = quotient + (1 if remainder else 0)
    if sign:
        result = -result
    if not _MIN_INT64 <= result <= _MAX_INT64:
        # Go silently overflows here; an exception is more useful to a scheduler.
        raise _error(raw, "value out of int64 range")
    return result


# A cluster spells the same few quantities ("1", "500m", "4Gi") on thousands of objects: the
# string forms are parsed once. Failures are not cached (lru_cache does not keep exceptions).
_scaled_str = functools.lru_cache(maxsize=4096)(_scaled_int)


def milli_value(value: QuantityInput) -> int:
    """Quantity in thousandths, rounded away from zero (k8s ``MilliValue``)."""
    return _scaled_str(value, 3) if type(value) is str else _scaled_int(value, 3)


def value(value: QuantityInput) -> int:
    """Quantity as an integer, rounded away from zero (k8s ``Value``)."""
    return _scaled_str(value, 0) if type(value) is str else _scaled_int(value, 0)


# ---------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------

def _non_finite(x: float) -> str | None:
    # Volcano's "infinite" resources use MaxFloat64; print those as inf too.
    if math.isnan(x):
        return "nan"
    if math.isinf(x) or abs(x) >= 1.7976931348623157e308:
        return "inf" if x > 0 else "-inf"
    return None


def _exact(x: float | int) -> Decimal:
    # repr gives the shortest decimal that round-trips, i.e. what the user meant.
    if isinstance(x, int) and not isinstance(x, bool):
        return Decimal(x)
    return Decimal(repr(float(x)))


def _plain(d: Decimal) -> str:
    """Fixed-point text without trailing zeros ("1.50" -> "1.5", "5E+3" -> "5000")."""
    if d == 0:
        return "0"
    text = format(d, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def format_cpu(milli: float) -> str:
    """Millicores to text: 4000 -> "4", 500 -> "500m", 1500 -> "1.5"."""
    special = _non_finite(milli)
    if special is not None:
        return special
    d = _exact(milli)
    if d % 1000 == 0 or abs(d) >= 1000:
        return _plain(d.scaleb(-3))
    return _plain(d) + "m"


def format_scalar(milli: float) -> str:
    """Milli-units of a countable resource to units: 5000 -> "5", 500 -> "0.5"."""
    special = _non_finite(milli)
    if special is not None:
        return special
    return _plain(_exact(milli).scaleb(-3))


_BINARY_STEPS = [(suffix, 1 << bits) for suffix, bits in sorted(_BINARY_SUFFIXES.items(), key=lambda kv: -kv[1])]
_DECIMAL_STEPS = [(suffix, 10**e) for suffix, e in sorted(_DECIMAL_SUFFIXES.items(), key=lambda kv: -kv[1]) if e > 0]


def format_memory(nbytes: float) -> str:
    """Bytes to the shortest exact text: 17179869184 -> "16Gi", 1536Mi -> "1536Mi".

    Candidates are the largest exact binary suffix, the largest exact decimal
    suffix and plain bytes; the shortest wins, binary on ties.  So "16G" stays
    "16G" instead of "15625000Ki", and 1500 bytes print as "1500".
    """
    special = _non_finite(nbytes)
    if special is not None:
        return special
    d = _exact(nbytes)
    if d != d.to_integral_value():
        return _plain(d)
    n = int(d)
    if n == 0:
        return "0"
    sign = "-" if n < 0 else ""
    a = abs(n)
    candidates: list[str] = []
    for steps in (_BINARY_STEPS, _DECIMAL_STEPS):
        for suffix, mult in steps:
            if a % mult == 0:
                candidates.append(f"{a // mult}{suffix}")
                break
    candidates.append(str(a))
    return sign + min(candidates, key=len)


_BYTE_SCALARS = ("ephemeral-storage",)


def format_natural(resource_name: str, value: float | None) -> str:
    """Format a value already in natural units (cores, bytes, cards; the quota report's): memory
    as the shortest exact quantity, anything else as a plain number, ``-`` for none."""
    if value is None:
        return "-"
    if resource_name == "memory":
        return format_memory(round(value))
    return f"{value:g}"


def format_rough(resource_name: str, internal_value: float) -> str:
    """An internal amount in round figures for invariant violations: cpu as ``2 CPU``, memory
    in ``Gi`` (``1.5Gi``), anything else in units."""
    if resource_name == "cpu":
        return f"{internal_value / 1000:g} CPU"
    if resource_name == "memory":
        return f"{internal_value / (1 << 30):g}Gi"
    return f"{internal_value / 1000:g}"


def format_amount(resource_name: str, internal_value: float) -> str:
    """Format a value held in the scheduler's internal unit for ``resource_name``.

    cpu is in millicores, memory in bytes, ``pods`` is a plain count and every
    other resource is a scalar in milli-units.  Byte-valued scalars
    (ephemeral-storage, hugepages-*) are stored in milli-bytes like any scalar,
    so they are divided by 1000 before getting memory formatting.
    """
    if resource_name == "cpu":
        return format_cpu(internal_value)
    if resource_name == "memory":
        return format_memory(internal_value)
    if resource_name == "pods":
        special = _non_finite(internal_value)
        return special if special is not None else _plain(_exact(internal_value))
    if resource_name in _BYTE_SCALARS or resource_name.startswith("hugepages-"):
        special = _non_finite(internal_value)
        if special is not None:
            return special
        nbytes = _exact(internal_value).scaleb(-3)
        if nbytes == nbytes.to_integral_value():
            return format_memory(int(nbytes))
        return _plain(nbytes)
    return format_scalar(internal_value)
