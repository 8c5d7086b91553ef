"""Field readers: the one validation path for every field type of the objects read (REL-1).

Every value taken from a raw object or an annotation goes through one of these: strings,
integers (with Kubernetes' int32/int64 bounds), booleans, timestamps, JSON annotations,
mappings, string maps and lists. Each returns the value or raises :class:`ObjectError`
naming the field; nothing deeper down (an ``OverflowError`` of an infinity, a
``RecursionError`` of deeply nested JSON, an ``AttributeError`` of a list where a mapping
belongs) reaches the caller. Quantities have their own grammar in :mod:`model.quantity`.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tidesched.model.problems import ObjectError

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
# Deeper JSON than this is refused before parsing (Python's parser would recurse out of stack).
MAX_JSON_DEPTH = 100


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_int(value: Any, field_name: str, default: int = 0, bounds: tuple[int, int] = INT64) -> int:
    """An int, or a float or string holding a whole number ("3", "3.0", "1e3"), within
    ``bounds`` (Kubernetes' int32/int64). Anything else — bools, NaN, infinities, fractions,
    overflow, digits other than ASCII ones — is an ObjectError naming the field."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ObjectError(field_name, f"expected an integer, got {shown(value)}")
    if isinstance(value, int):
        n = value
    else:
        if isinstance(value, str):
            value = value.strip()
            # int() and float() also read "١٠" and "1_000"; Kubernetes does not.
            if not value.isascii() or "_" in value:
                raise ObjectError(field_name, f"expected an integer, got {shown(value)}")
        try:
            n = int(value) if isinstance(value, str) else None  # exact for any length
        except ValueError:
            n = None
        if n is None:
            try:
                f = float(value)
            except (ValueError, OverflowError):
                raise ObjectError(field_name, f"expected an integer, got {shown(value)}") from None
            if not math.isfinite(f) or f != int(f):
                raise ObjectError(field_name, f"expected an integer, got {shown(value)}")
            n = int(f)
    lo, hi = bounds
    if not lo <= n <= hi:
        raise ObjectError(field_name, f"{shown(value)} is out of range ({lo}..{hi})")
    return n


def parse_count(value: Any, field_name: str, bounds: tuple[int, int] = (0, INT64[1])) -> int:
    """A count in JSON: a number holding a whole value within ``bounds`` (1, 2.0) — not a
    string or a bool."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ObjectError(field_name, f"expected a non-negative integer, got {shown(value)}")
    return parse_int(value, field_name, bounds=bounds)


def parse_str(value: Any, field_name: str, default: str = "") -> str:
    """A string; absent (None) or empty → ``default``. Numbers and booleans are refused as the
    API server refuses them for a string field."""
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise ObjectError(field_name, f"expected a string, got {type(value).__name__} {shown(value)}")
    return value


def parse_bool(value: Any) -> bool | None:
    """Go strconv.ParseBool; None when the value is not a boolean."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        v = value.strip()
        if v in ("1", "t", "T", "true", "TRUE", "True"):
            return True
        if v in ("0", "f", "F", "false", "FALSE", "False"):
            return False
    return None


def parse_flag(value: Any, field_name: str, default: bool = False) -> bool:
    """A boolean field (``true``/``false``, or a string strconv.ParseBool reads); absent →
    ``default``."""
    if value is None:
        return default
    parsed = parse_bool(value)
    if parsed is None:
        raise ObjectError(field_name, f"expected true or false, got {shown(value)}")
    return parsed


def parse_time(value: Any, field_name: str) -> float:
    """RFC 3339 timestamp → seconds since the epoch; absent → 0."""
    if value in (None, ""):
        return 0.0
    if isinstance(value, datetime):
        try:
            return value.timestamp()
        except (OverflowError, OSError, ValueError):
            raise ObjectError(field_name, f"timestamp out of range: {shown(value)}") from None
    if not isinstance(value, str):
        raise ObjectError(field_name, f"expected an RFC 3339 timestamp, got {shown(value)}")
    try:
        return _rfc3339_seconds(value)
    except (ValueError, OverflowError, OSError):
        raise ObjectError(field_name, f"invalid timestamp {shown(value)}") from None


@functools.lru_cache(maxsize=4096)
def _rfc3339_seconds(value: str) -> float:
    # Objects made in a burst share their timestamps (one-second resolution): parsed once.
    # Failures raise and are not cached.
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _json_depth_ok(text: str) -> bool:
    """Whether brackets nest at most MAX_JSON_DEPTH deep (strings' contents skipped)."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return True  # the usual case, at C speed: too few brackets to nest that deep
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def parse_json(text: Any, field_name: str) -> Any:
    """A JSON document held in a string (an annotation). Malformed JSON, nesting deeper than
    MAX_JSON_DEPTH, and integers too long to convert are ObjectErrors naming the field."""
    if not isinstance(text, str):
        raise ObjectError(field_name, f"expected a JSON string, got {type(text).__name__}")
    if not _json_depth_ok(text):
        raise ObjectError(field_name, f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ObjectError(field_name, f"invalid JSON: {exc.msg} (at {exc.pos})") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more than 4300 digits
        raise ObjectError(field_name, f"invalid JSON: {exc}") from None


def mapping(obj: Mapping[str, Any], key: str, field_name: str) -> Mapping[str, Any]:
    """``obj[key]`` as a mapping; absent → {}."""
    value = obj.get(key)
    if value is None:
        return {}
    # ``type(...) is dict`` first: parsed JSON/YAML is plain dicts, and the ABC check costs
    # about a microsecond, paid for every field of every object read.
    if type(value) is not dict and not isinstance(value, Mapping):
        raise ObjectError(field_name, f"expected a mapping, got {type(value).__name__}")
    return value


def str_map(obj: Mapping[str, Any], key: str, field_name: str) -> dict[str, str]:
    """A map of strings (labels, annotations, nodeSelector). Scalars are taken as their text,
    as a YAML author means them (``gpu.count: 8``); a nested mapping or list is an error."""
    out: dict[str, str] = {}
    for k, v in mapping(obj, key, field_name).items():
        if type(v) is str and type(k) is str:  # the usual case, without the checks below
            out[k] = v
            continue
        if isinstance(v, (Mapping, list, tuple, set)):
            raise ObjectError(f"{field_name}[{k}]", f"expected a string, got {type(v).__name__}")
        if isinstance(v, bool):
            out[str(k)] = "true" if v else "false"
        else:
            out[str(k)] = "" if v is None else str(v)
    return out


def list_of(obj: Mapping[str, Any], key: str, field_name: str) -> list[Any]:
    """``obj[key]`` as a list; absent → []."""
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ObjectError(field_name, f"expected a list, got {type(value).__name__}")
    return value


def mappings(obj: Mapping[str, Any], key: str, field_name: str) -> list[Mapping[str, Any]]:
    """``obj[key]`` as a list of mappings (containers, tolerations, ports); absent → []."""
    items = list_of(obj, key, field_name)
    for i, item in enumerate(items):
        if type(item) is not dict and not isinstance(item, Mapping):
            raise ObjectError(f"{field_name}[{i}]", f"expected a mapping, got {type(item).__name__}")
    return items


