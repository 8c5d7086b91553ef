"""Nodes' measured load (Volcano's NodeUsage): the CPU and memory use, in percent, that a
metrics source reported for each node, and when. The usage and rescheduling plugins read it
from the snapshot (``ClusterSnapshot.node_usage``); ``tidesched run`` fills it from the source
named in the config's ``metrics`` section (``cluster/metrics_source.py``). A node without a
report has no usage (metrics time 0), which both plugins treat as "nothing known".
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The period Volcano's scheduler cache files every report under (source.NODE_METRICS_PERIOD):
# averages over the last 10 minutes. The rescheduling plugin reads the period its
# ``metricsPeriod`` argument names (default 5m), so it finds a value only when that is 10m.
NODE_METRICS_PERIOD = "10m"


@dataclass(frozen=True, slots=True)
class NodeMetrics:
    """One report of a metrics source for one node (Volcano source.NodeMetrics)."""

    metrics_time: float  # seconds since the epoch; 0: never reported
    cpu: float  # percent
    memory: float  # percent


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """A node's usage as the plugins read it: averages per period (Volcano api.NodeUsage)."""

    metrics_time: float = 0.0
    cpu_avg: dict[str, float] = field(default_factory=dict)
    mem_avg: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_metrics(cls, m: NodeMetrics) -> "NodeUsage":
        """As Volcano's cache files a report (setMetricsData): under NODE_METRICS_PERIOD."""
        return cls(m.metrics_time, {NODE_METRICS_PERIOD: m.cpu}, {NODE_METRICS_PERIOD: m.memory})


NO_USAGE = NodeUsage()
