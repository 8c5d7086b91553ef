"""usage plugin (Volcano v1.15.1 plugins/usage): keep pods off nodes whose measured load is
high, and prefer the least loaded nodes.

Arguments (Volcano's names and defaults)::

    usage.weight: 5
    cpu.weight: 1
    memory.weight: 1
    thresholds: {cpu: 80, mem: 80}     # percent, integers

The load is the snapshot's ``node_usage`` (a metrics source's 10-minute averages, see
``cluster/metrics_source.py``). A node whose last report is older than five minutes (or that
never had one) is neither filtered nor scored: the plugin knows nothing of it.

* predicate: a node with CPU use above ``thresholds.cpu`` fails with "the CPU load of the node
  exceeds the upper limit.", else with memory use above ``thresholds.mem`` with "the memory
  load of the node exceeds the upper limit." (unresolvable: evicting pods does not lower a
  measured load). ``enablePredicate: false`` keeps only the score, as in Volcano.
* node_order: ``((100−cpu)/100·cpu.weight + (100−mem)/100·memory.weight) / (cpu.weight +
  memory.weight) · 100 · usage.weight``.

Both are the same for every task in a session, so they are offered row-local with the
session's usage in their key. Stricter than Volcano (CONF-3): a threshold that is not an
integer (Volcano reads it as 0) and weights summing to 0 (a division by zero) are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from tidesched.framework.plugin import NodeFailure, Plugin, PredicateResult, RowFn
from tidesched.model.node_usage import NO_USAGE, NODE_METRICS_PERIOD

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo

NAME = "usage"
MAX_NODE_SCORE = 100
METRICS_ACTIVE_TIME = 5 * 60.0  # seconds: older reports are not used
CPU_REASON = "the CPU load of the node exceeds the upper limit."
MEMORY_REASON = "the memory load of the node exceeds the upper limit."


def parse_thresholds(arguments: "Arguments") -> tuple[float, float]:
    cpu, mem = 80.0, 80.0
    raw = arguments.get_mapping("thresholds")
    for key, value in raw.items():
        if key not in ("cpu", "mem"):
            continue  # Volcano reads only these two
        if isinstance(value, bool) or not isinstance(value, int):
            raise arguments.bad_value("thresholds", f"an integer percentage for thresholds.{key}", value)
        if key == "cpu":
            cpu = float(value)
        else:
            mem = float(value)
    return cpu, mem


class UsagePlugin(Plugin):
    name = NAME

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.usage_weight = arguments.get_int("usage.weight", 5)
        self.cpu_weight = arguments.get_int("cpu.weight", 1)
        self.memory_weight = arguments.get_int("memory.weight", 1)
        if self.cpu_weight + self.memory_weight == 0:
            raise arguments.bad_value("memory.weight", "weights whose sum with cpu.weight is not 0", self.memory_weight)
        self.cpu_threshold, self.mem_threshold = parse_thresholds(arguments)

    def on_session_open(self, ssn: "Session") -> None:
        table = ssn.table
        usage: Mapping[str, object] = ssn.snapshot.node_usage
        n = len(table)
        fresh = np.zeros(n, dtype=bool)
        cpu = np.zeros(n)
        mem = np.zeros(n)
        has_cpu = np.zeros(n, dtype=bool)
        has_mem = np.zeros(n, dtype=bool)
        for i, name in enumerate(table.names):
            u = usage.get(name, NO_USAGE)
            t = u.metrics_time  # type: ignore[attr-defined]
            if t <= 0 or ssn.now - t > METRICS_ACTIVE_TIME:  # never reported, or too old
                continue
            fresh[i] = True
            c = u.cpu_avg.get(NODE_METRICS_PERIOD)  # type: ignore[attr-defined]
            m = u.mem_avg.get(NODE_METRICS_PERIOD)  # type: ignore[attr-defined]
            has_cpu[i], has_mem[i] = c is not None, m is not None
            cpu[i], mem[i] = c or 0.0, m or 0.0
        # Predicate: CPU first, then memory (Volcano returns at the first).
        cpu_over = fresh & (cpu > self.cpu_threshold)
        mem_over = fresh & ~cpu_over & (mem > self.mem_threshold)
        passed = ~(cpu_over | mem_over)
        failures = [NodeFailure(CPU_REASON, cpu_over, True), NodeFailure(MEMORY_REASON, mem_over, True)]
        failures = [f for f in failures if f.nodes.any()]
        # Score: 0 where nothing is known or a figure is missing.
        w_sum = float(self.cpu_weight + self.memory_weight)
        scores = ((100 - cpu) / 100 * self.cpu_weight + (100 - mem) / 100 * self.memory_weight) / w_sum
        scores *= float(MAX_NODE_SCORE * self.usage_weight)
        scores[~(fresh & has_cpu & has_mem)] = 0.0
        # What every value depends on: the same bytes, the same values (carried across sessions).
        key = (NAME, self.usage_weight, self.cpu_weight, self.memory_weight, self.cpu_threshold,
               self.mem_threshold, passed.tobytes(), scores.tobytes())

        def predicate(task: "TaskInfo") -> PredicateResult:
            return PredicateResult(passed.copy(), [NodeFailure(f.reason, f.nodes.copy(), True) for f in failures])

        def score(task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
            return scores[idx]

        def rows(values: np.ndarray) -> RowFn:
            return RowFn(lambda t: key, lambda t, r: values.copy() if r is None else values[r])

        ssn.add_fn("predicate", self.name, predicate)
        ssn.add_row_fn("predicate", self.name, rows(passed))
        ssn.add_fn("node_order", self.name, score)
        ssn.add_row_fn("node_order", self.name, rows(scores))
