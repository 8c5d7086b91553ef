"""Durations, the one home for reading and writing them. Three readers, for three grammars that
people write in three places, and three forms of output:

* :func:`parse_go_duration` — Go's ``time.ParseDuration`` (``3s``, ``1h30m``, ``-2m``, ``0``):
  Volcano's duration annotations and plugin arguments; a bad value is an ``ObjectError``.
* :func:`parse_flag_duration` — a command-line flag as vc-scheduler's (``--schedule-period``):
  a Go duration without a sign, or plain seconds.
* :func:`parse_span` — a scenario's times and durations: seconds, ``90s``, ``1h30m``, ``2.5h``,
  ``1d``, or a clock time ``08:30`` / ``1d08:30`` since the start.
* :func:`format_go` — Go's ``time.Duration`` text to the second (events that Volcano users
  read: ``1m30s``, ``2h0m0s``); :func:`format_compact` — summaries (``1h30m``, ``45s``);
  :func:`format_human` — tables and plots (``42 s``, ``3.5 min``, ``2.1 h``).
"""

from __future__ import annotations

import math
import re
from typing import Any

from tidesched.model.fields import shown
from tidesched.model.problems import ObjectError


class DurationError(ValueError):
    """A scenario duration that cannot be read; the message names where it was written."""


# Go's time.ParseDuration: an optional sign, then one or more decimal numbers each with a unit.
_GO_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_DURATION_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(value: Any, field_name: str) -> float:
    """Seconds from a Go duration string as ``time.ParseDuration`` reads it (``"3s"``,
    ``"1h30m"``, ``"1.5h"``, ``"-2m"``, ``"0"``); anything else is an ObjectError naming the
    field. Volcano's duration annotations and plugin arguments use this form."""
    if not isinstance(value, str):
        raise ObjectError(field_name, f"expected a duration such as 30s, 5m or 1h30m, got {shown(value)}")
    text = value.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0.0
    pos, total = 0, 0.0
    for part in _GO_DURATION_PART.finditer(body):
        if part.start() != pos:
            break
        total += float(part.group(1)) * _GO_DURATION_UNIT[part.group(2)]
        pos = part.end()
    if pos == 0 or pos != len(body):
        raise ObjectError(field_name, f"expected a duration such as 30s, 5m or 1h30m, got {shown(value)}")
    return sign * total


_FLAG_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_FLAG_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_flag_duration(text: str | float) -> float:
    """Go duration (``1s``, ``500ms``, ``1m30s``) or plain seconds → seconds."""
    if isinstance(text, (int, float)):
        return float(text)
    s = text.strip()
    try:
        return float(s)
    except ValueError:
        pass
    parts = _FLAG_DURATION.findall(s)
    if not parts or "".join(n + u for n, u in parts) != s:
        raise ValueError(f"invalid duration {text!r} (e.g. 1s, 500ms, 1m30s)")
    return sum(float(n) * _FLAG_UNIT[u] for n, u in parts)


_SPAN_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d)")
_CLOCK = re.compile(r"^(?:(\d+)d)?(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d*)?))?$")
_SPAN_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_span(value: Any, where: str) -> float:
    """Seconds from a number (seconds), ``"90s"``, ``"1h30m"``, ``"2.5h"``, ``"1d"`` or a
    clock time ``"08:30"`` / ``"1d08:30"`` (time since the start of the scenario)."""
    if isinstance(value, bool):
        raise DurationError(f"{where}: expected a duration, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0 or not math.isfinite(value):
            raise DurationError(f"{where}: expected a non-negative finite duration, got {value!r}")
        return float(value)
    if not isinstance(value, str) or not value.strip():
        raise DurationError(f"{where}: expected a duration such as 30s, 15m, 8h or 08:00, got {value!r}")
    text = value.strip()
    m = _CLOCK.match(text)
    if m:
        days, hours, minutes, seconds = m.groups()
        if int(minutes) >= 60 or (seconds is not None and float(seconds) >= 60):
            raise DurationError(f"{where}: invalid clock time {value!r}")
        return int(days or 0) * 86400.0 + int(hours) * 3600.0 + int(minutes) * 60.0 + float(seconds or 0)
    try:
        return float(text)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for part in _SPAN_PART.finditer(text):
        if part.start() != pos:
            break
        total += float(part.group(1)) * _SPAN_UNIT[part.group(2)]
        pos = part.end()
    if pos != len(text) or pos == 0:
        raise DurationError(
            f"{where}: expected a duration such as 30s, 15m, 8h, 1h30m or 08:00, got {value!r}"
        )
    return total


def format_go(seconds: float) -> str:
    """Go's time.Duration style, to the second: 90 → "1m30s", 7200 → "2h0m0s"."""
    total = int(round(seconds))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m}m{s}s"
    if m:
        return f"{m}m{s}s"
    return f"{s}s"


def format_compact(seconds: float) -> str:
    """Short human form (``1h30m``, ``45s``) for summaries."""
    s = float(seconds)
    if s < 60:
        return f"{s:g}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        n = int(s // size)
        if n:
            parts.append(f"{n}{unit}")
            s -= n * size
    if s >= 1:
        parts.append(f"{int(round(s))}s")
    return "".join(parts) or "0s"


def format_human(v: float | None) -> str:
    """Seconds → a short human duration (``42 s``, ``3.5 min``, ``2.1 h``, ``1.5 d``); ``—``
    for none."""
    if v is None:
        return "—"
    a = abs(v)
    if a < 120:
        return f"{v:.1f} s" if v != int(v) else f"{int(v)} s"
    if a < 7200:
        return f"{v / 60:.1f} min"
    if a < 172800:
        return f"{v / 3600:.1f} h"
    return f"{v / 86400:.1f} d"
