"""rescheduling plugin (Volcano v1.15.1 plugins/rescheduling): chooses running pods for the
``shuffle`` action to evict, so that load moves from busy nodes to idle ones.

Arguments (Volcano's names and defaults)::

    interval: 5m              # how often the strategies run (Go duration)
    metricsPeriod: 5m         # which averaging period of the node usage to read
    strategies:               # default: lowNodeUtilization with the defaults below
    - name: lowNodeUtilization
      params:
        thresholds: {cpu: 100, memory: 100}         # percent, integers
        targetThresholds: {cpu: 100, memory: 100}

**lowNodeUtilization** (the one strategy Volcano registers): with the nodes' measured CPU and
memory use (``node_usage`` for ``metricsPeriod``), *low* nodes are the schedulable ones under
every ``thresholds`` value, *high* nodes the others above some ``targetThresholds`` value.
Nothing is evicted unless there are low nodes, not every node is low, and there are high
nodes. The room the low nodes have up to their targets (``(target − use)% × allocatable``, cpu
and memory) is shared out: high nodes in order of cpu + memory use, most loaded first; on each,
its pods from the lowest priority (pods without one first) and, at equal priority, BestEffort
before Burstable before Guaranteed; a running pod of ours becomes a victim and its requests
come off the room and (as a share of the node's capacity) off the node's use. A node stops
giving victims once it is no longer at or above a target, and all stop once the room of cpu or
memory is exactly used up.

Volcano files every metrics report under the period ``10m`` (``model/node_usage.py``), so with
the default ``metricsPeriod: 5m`` every node reads as idle and nothing is ever evicted; set
``metricsPeriod: 10m`` to use the reports. Kept as in Volcano.

The strategies run at most once per ``interval``, counted from just before the first session
under the config (Volcano: from the scheduler's start), in the session's time; the victims go to
the ``victim_tasks`` hook, which the ``shuffle`` action evicts (``enabledVictim`` gates it).

Differences: a pod is matched to a candidate task by namespace and name (Volcano by name alone); ties between nodes
and between pods go by name, where Volcano's order is unspecified; an unreadable ``interval``,
a ``metricsPeriod`` or threshold of the wrong type is refused at load (Volcano falls back to the
default, or stops); a node without ``status.capacity`` takes its allocatable as capacity
(Volcano divides by zero).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tidesched.model.durations import parse_go_duration
from tidesched.model.node_usage import NO_USAGE
from tidesched.model.problems import ObjectError
from tidesched.model.qos import RANK, pod_qos
from tidesched.model.status import TaskStatus
from tidesched.framework.plugin import Plugin

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo
    from tidesched.model.objects import Pod

NAME = "rescheduling"
LOW_NODE_UTILIZATION = "lowNodeUtilization"
DEFAULT_INTERVAL = 5 * 60.0
DEFAULT_METRICS_PERIOD = "5m"
STRATEGIES = (LOW_NODE_UTILIZATION,)  # Volcano's VictimFn registry
CPU, MEMORY = "cpu", "memory"


@dataclass(frozen=True)
class LowNodeUtilization:
    """The strategy's thresholds in percent (Volcano LowNodeUtilizationConf; ``pods``/``pod``
    entries are read as Volcano reads them but no node reports a pod use, so they never count)."""

    thresholds: dict[str, float] = field(default_factory=lambda: {CPU: 100.0, MEMORY: 100.0, "pods": 100.0})
    target_thresholds: dict[str, float] = field(default_factory=lambda: {CPU: 100.0, MEMORY: 100.0, "pods": 100.0})


@dataclass(frozen=True)
class ReschedulingArgs:
    interval: float = DEFAULT_INTERVAL
    metrics_period: str = DEFAULT_METRICS_PERIOD
    strategies: tuple[tuple[str, LowNodeUtilization | None], ...] = ((LOW_NODE_UTILIZATION, LowNodeUtilization()),)


def _thresholds(args: "Arguments", raw: Any, what: str, into: dict[str, float]) -> None:
    if raw is None:
        return
    if not isinstance(raw, Mapping):
        raise args.bad_value("strategies", f"a mapping for {what}", raw)
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise args.bad_value("strategies", f"an integer percentage for {what}.{key}", value)
        if key in (CPU, MEMORY, "pod"):  # the keys Volcano's parseThreshold reads
            into[str(key)] = float(value)


def parse_arguments(args: "Arguments") -> ReschedulingArgs:
    interval = DEFAULT_INTERVAL
    raw_interval = args.get_str("interval", "")
    if raw_interval:
        try:
            interval = parse_go_duration(raw_interval, "interval")
        except ObjectError:
            raise args.bad_value("interval", "a duration such as 5m or 1h", raw_interval) from None
    period = args.get_str("metricsPeriod", "") or DEFAULT_METRICS_PERIOD
    raw = args.get("strategies")
    if raw is None or raw == []:
        return ReschedulingArgs(interval, period)
    if not isinstance(raw, list):
        raise args.bad_value("strategies", "a list of {name, params}", raw)
    strategies = []
    for entry in raw:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise args.bad_value("strategies", "a list of {name, params}", entry)
        name, params = entry["name"], entry.get("params")
        if params is not None and not isinstance(params, Mapping):
            raise args.bad_value("strategies", f"a mapping for {name}.params", params)
        conf = None
        if name == LOW_NODE_UTILIZATION:
            conf = LowNodeUtilization()
            _thresholds(args, (params or {}).get("thresholds"), "thresholds", conf.thresholds)
            _thresholds(args, (params or {}).get("targetThresholds"), "targetThresholds", conf.target_thresholds)
        strategies.append((name, conf))
    return ReschedulingArgs(interval, period, tuple(strategies))


# -- lowNodeUtilization ----------------------------------------------------------------------


@dataclass
class NodeLoad:
    """One node as the strategy sees it (Volcano NodeUtilization)."""

    name: str
    unschedulable: bool
    utilization: dict[str, float]  # cpu, memory: percent
    allocatable: tuple[float, float]  # milli-cpu, bytes: the room's base (Volcano getNodeCapacity)
    capacity: tuple[float, float]  # milli-cpu, bytes: status.capacity, what a victim's share is of
    pods: list["Pod"]


def _is_low(node: NodeLoad, conf: LowNodeUtilization) -> bool:
    if node.unschedulable:
        return False
    return all(use < conf.thresholds[r] for r, use in node.utilization.items() if r in conf.thresholds)


def _is_high(node: NodeLoad, conf: LowNodeUtilization) -> bool:
    return any(use > conf.target_thresholds[r] for r, use in node.utilization.items() if r in conf.target_thresholds)


def _still_overused(node: NodeLoad, room: dict[str, int], conf: LowNodeUtilization) -> bool:
    over = any(use >= conf.target_thresholds[r] for r, use in node.utilization.items() if r in conf.target_thresholds)
    return over and all(v != 0 for v in room.values())


def _pod_order(pod: "Pod") -> tuple[Any, ...]:
    """Volcano sortPods: no priority first, then lower priority, then BestEffort, Burstable,
    Guaranteed (ties by key here)."""
    return (pod.priority is not None, pod.priority or 0, RANK[pod_qos(pod.raw_spec)], pod.key)


def _share(amount: float, capacity: float) -> float:
    return amount * 100 / capacity if capacity else float("inf")  # Go: a division by zero is +Inf


def low_node_utilization_victims(
    nodes: Sequence[NodeLoad], tasks: Sequence["TaskInfo"], conf: LowNodeUtilization
) -> list["TaskInfo"]:
    """Volcano victimsFnForLnu over ``nodes`` (every node of the session), choosing among
    ``tasks`` (the shuffle action's candidates: running tasks)."""
    low = [n for n in nodes if _is_low(n, conf)]
    high = [n for n in nodes if not _is_low(n, conf) and _is_high(n, conf)]
    if not low or len(low) == len(nodes) or not high:
        return []
    room = {CPU: 0, MEMORY: 0}
    for n in low:
        for k, r in enumerate((CPU, MEMORY)):
            base = n.allocatable[k]
            # convertPercentToQuan: int64 truncation of percent × amount × 0.01
            room[r] += int(conf.target_thresholds[r] * base * 0.01) - int(n.utilization[r] * base * 0.01)
    by_key = {t.key: t for t in tasks}
    victims: list["TaskInfo"] = []
    for node in sorted(high, key=lambda n: (-(n.utilization[CPU] + n.utilization[MEMORY]), n.name)):
        for pod in sorted(node.pods, key=_pod_order):
            if not _still_overused(node, room, conf):
                break
            task = by_key.get(pod.key)
            if task is None:
                continue
            cpu, mem = int(task.resreq.milli_cpu), int(task.resreq.memory)
            room[CPU] -= cpu
            room[MEMORY] -= mem
            node.utilization[CPU] -= _share(cpu, node.capacity[0])
            node.utilization[MEMORY] -= _share(mem, node.capacity[1])
            victims.append(task)
    return victims


def node_loads(ssn: "Session", metrics_period: str) -> list[NodeLoad]:
    """The session's nodes with their measured use for ``metrics_period`` and their pods."""
    out = []
    table = ssn.table
    for i, node in enumerate(table.nodes):
        u = ssn.snapshot.node_usage.get(node.name, NO_USAGE)
        cap = node.capacity or node.allocatable  # a node written without status.capacity: its allocatable
        out.append(NodeLoad(
            name=node.name,
            unschedulable=node.unschedulable,
            utilization={CPU: u.cpu_avg.get(metrics_period, 0.0), MEMORY: u.mem_avg.get(metrics_period, 0.0)},
            allocatable=(node.allocatable.milli_cpu, node.allocatable.memory),
            capacity=(cap.milli_cpu, cap.memory),
            pods=[t.pod for t in table.tasks[i].values()],
        ))
    return out


class ReschedulingPlugin(Plugin):
    name = NAME

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.args = parse_arguments(arguments)
        self.due = False

    @classmethod
    def unhonoured(cls, arguments: "Arguments") -> list[str]:
        notes = []
        for name, _conf in parse_arguments(arguments).strategies:
            if name not in STRATEGIES:
                notes.append(f"strategy {name!r} selects no victims (Volcano's only strategy is {LOW_NODE_UTILIZATION}), as in Volcano")
        return notes

    def on_session_open(self, ssn: "Session") -> None:
        # At most once per interval, counted from just before the first session under this
        # config (Volcano: from the process's start), so `interval: 0s` runs in every session.
        state = ssn.config.plugin_state.setdefault(NAME, {})
        last = state.setdefault("last_run", ssn.now - 1e-6)
        self.due = last + self.args.interval < ssn.now
        if self.due:
            state["last_run"] = ssn.now
            # Volcano registers its strategies' VictimTasksFns only when it is time to run.
            ssn.add_fn("victim_tasks", self.name, lambda tasks: self.victim_tasks(ssn, tasks))

    def victim_tasks(self, ssn: "Session", tasks: Sequence["TaskInfo"]) -> list["TaskInfo"]:
        """The victims of every configured strategy among ``tasks`` (running tasks), none when
        the interval has not passed. Duplicates are left out."""
        if not self.due:
            return []
        running = [t for t in tasks if t.status == TaskStatus.RUNNING]
        seen: set[str] = set()
        out: list["TaskInfo"] = []
        for name, conf in self.args.strategies:
            if name != LOW_NODE_UTILIZATION or conf is None:
                continue
            for v in low_node_utilization_victims(node_loads(ssn, self.args.metrics_period), running, conf):
                if v.key not in seen:
                    seen.add(v.key)
                    out.append(v)
        return out
