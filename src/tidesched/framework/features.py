"""Feature gates, as vc-scheduler's ``--feature-gates`` flag sets them (``Name=true,Other=false``).

Volcano v1.15.1 registers its gates in ``pkg/features/volcano_features.go``; the flag also takes
Kubernetes' own gates. tidesched acts on one: ``SchedulingGatesQueueAdmission`` (off by
default), which lets the scheduler remove Volcano's queue-admission gate from a pod its queue
admits (:mod:`tidesched.framework.gates`). Every other Volcano gate tidesched behaves as at its
default; a value given for one of them, or for a gate tidesched does not know, is taken and
said (``notes``), never an error — vc-scheduler refuses a name it does not know, but it knows
Kubernetes' gates, which tidesched does not list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tidesched.model.fields import parse_bool

QUEUE_ADMISSION = "SchedulingGatesQueueAdmission"

# Volcano v1.15.1's gates and their defaults.
VOLCANO_DEFAULTS: Mapping[str, bool] = {
    "WorkLoadSupport": True,
    "VolcanoJobSupport": True,
    "PodDisruptionBudgetsSupport": True,
    "QueueCommandSync": True,
    "PriorityClass": True,
    "CSIStorage": False,
    "ResourceTopology": True,
    "CronVolcanoJobSupport": True,
    QUEUE_ADMISSION: False,
}
ACTED_ON = frozenset({QUEUE_ADMISSION})


@dataclass(frozen=True)
class FeatureGates:
    """The gates a flag set; every other one is at Volcano's default."""

    given: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, name: str) -> bool:
        return self.given.get(name, VOLCANO_DEFAULTS.get(name, False))

    def notes(self) -> list[str]:
        """What was set that tidesched does not act on (for the start-up log)."""
        out = []
        for name, value in sorted(self.given.items()):
            if name in ACTED_ON:
                continue
            if name not in VOLCANO_DEFAULTS:
                out.append(f"feature gate {name}={str(value).lower()}: not a Volcano v1.15.1 gate "
                           "tidesched knows; ignored")
            elif value != VOLCANO_DEFAULTS[name]:
                out.append(f"feature gate {name}={str(value).lower()}: tidesched behaves as with "
                           f"the default ({str(VOLCANO_DEFAULTS[name]).lower()})")
        return out

    def flag(self) -> str:
        """The ``--feature-gates`` text these gates came from (sorted)."""
        return ",".join(f"{k}={str(v).lower()}" for k, v in sorted(self.given.items()))


def parse_feature_gates(text: str | Mapping[str, object] | None) -> FeatureGates:
    """``Name=bool[,Name=bool...]`` (component-base's format: spaces around items ignored, the
    value as Go's strconv.ParseBool reads it), or a mapping of names to booleans. Raises
    ValueError naming the item."""
    if text is None:
        return FeatureGates()
    if isinstance(text, Mapping):
        items = [(str(k), v) for k, v in text.items()]
    else:
        items = []
        for part in str(text).split(","):
            part = part.strip()
            if not part:
                continue
            name, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"missing bool value for {name.strip()}")
            items.append((name.strip(), value.strip()))
    given: dict[str, bool] = {}
    for name, value in items:
        parsed = parse_bool(value)
        if parsed is None:
            raise ValueError(f"invalid value of {name}={value}: expected true or false")
        given[name] = parsed
    return FeatureGates(given)
