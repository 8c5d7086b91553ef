"""What every part of the simulator shares: the annotations it reads on objects, the kinds a
simulated world holds, :class:`ScenarioError`, and scenario durations (``90s``, ``1h30m``,
``08:00``)."""

from __future__ import annotations

import math
import re
from typing import Any

# Annotations the simulator reads on pods (or inherits from their Job/Deployment).
DURATION_ANNOTATION = "sim.tidesched.io/duration"  # run time once started; absent: runs forever
EXIT_CODE_ANNOTATION = "sim.tidesched.io/exit-code"  # non-zero: the pod ends Failed
VOLCANO_JOB_API = "batch.volcano.sh"
# Kinds the simulated world keeps and acts on.
WORLD_KINDS = (
    "Node",
    "Queue",
    "PriorityClass",
    "PodGroup",
    "Job",
    "Deployment",
    "ReplicaSet",
    "Pod",
    "PodDisruptionBudget",
)


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message names the file and entry."""


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d)")
_CLOCK = re.compile(r"^(?:(\d+)d)?(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d*)?))?$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: Any, where: str) -> float:
    """Seconds from a number (seconds), ``"90s"``, ``"1h30m"``, ``"2.5h"``, ``"1d"`` or a
    clock time ``"08:30"`` / ``"1d08:30"`` (time since the start of the scenario)."""
    if isinstance(value, bool):
        raise ScenarioError(f"{where}: expected a duration, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0 or not math.isfinite(value):
            raise ScenarioError(f"{where}: expected a non-negative finite duration, got {value!r}")
        return float(value)
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError(f"{where}: expected a duration such as 30s, 15m, 8h or 08:00, got {value!r}")
    text = value.strip()
    m = _CLOCK.match(text)
    if m:
        days, hours, minutes, seconds = m.groups()
        if int(minutes) >= 60 or (seconds is not None and float(seconds) >= 60):
            raise ScenarioError(f"{where}: invalid clock time {value!r}")
        return int(days or 0) * 86400.0 + int(hours) * 3600.0 + int(minutes) * 60.0 + float(seconds or 0)
    try:
        return float(text)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for part in _DURATION_PART.finditer(text):
        if part.start() != pos:
            break
        total += float(part.group(1)) * _UNIT[part.group(2)]
        pos = part.end()
    if pos != len(text) or pos == 0:
        raise ScenarioError(
            f"{where}: expected a duration such as 30s, 15m, 8h, 1h30m or 08:00, got {value!r}"
        )
    return total


def format_duration(seconds: float) -> str:
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
