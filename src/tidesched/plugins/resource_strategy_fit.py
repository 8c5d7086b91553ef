"""resource-strategy-fit plugin (Volcano v1.15.1 plugins/resource-strategy-fit): a node score
per resource, LeastAllocated or MostAllocated, with wildcard resource names; scarce-resource
avoidance (``sra``); and a predicate keeping CPU and memory in proportion to a node's idle
scarce resources (``proportional``).

Arguments (Volcano's names and defaults)::

    resourceStrategyFitWeight: 10          # missing or negative: 10; 0 turns this score off
    resources:                             # missing or empty: cpu and memory, LeastAllocated, 1
      nvidia.com/gpu: {type: MostAllocated, weight: 2}
      cloudml.gpu/*:  {type: LeastAllocated, weight: 1}   # one trailing '*': a prefix
    sra: {enable: true, resources: "nvidia.com/t4, nvidia.com/a10", weight: 10,
          resourceWeight: {nvidia.com/t4: 1}}              # weight default 0, resourceWeight 1
    proportional: {enable: true, resources: nvidia.com/gpu,
                   resourceProportion: {nvidia.com/gpu.cpu: 4, nvidia.com/gpu.memory: 8}}

Scores (``node_order``), summed:

* **fit**: over the resources the task requests that match a ``resources`` entry (an exact
  name first, else the longest matching ``prefix*``), ``Σ s_r / Σ w_r · 100 · weight`` with
  ``s_r = w_r·(used+request)/allocatable`` for MostAllocated and
  ``w_r·(allocatable−used−request)/allocatable`` for LeastAllocated; a resource the node lacks
  scores 0 but its weight counts; a request the node cannot hold (used+request > allocatable)
  makes the node's fit score 0. A pod may choose its own strategy with the annotations
  ``volcano.sh/resource-strategy-scoring-type`` (the type) and
  ``volcano.sh/resource-strategy-weight`` (a JSON map resource → weight; only those resources
  count); a missing or unreadable weight map scores every node 0.
* **sra**: a node missing a resource the task requests scores 0; otherwise
  ``(1 − Σ w_r over the sra resources the node has / Σ w_r) · 100 · sra.weight``: nodes without
  scarce resources come first for tasks that do not need them.

Predicate (only with ``proportional.enable``): a task requesting none of the listed resources
fits a node holding idle amount ``g`` of one of them only if the node keeps
``g·cpu`` cores and ``g·memory`` GB idle after it (``UnschedulableAndUnresolvable``).

Both offer row-local forms (``RowFn``): the values depend on a node's own row (allocatable,
used, idle) and the task's request, so the session keeps them per request shape.

Where tidesched is stricter than Volcano (CONF-3, a bad argument is refused at load): a
``resources`` key with a '*' anywhere but once at the end (Volcano drops it with a log line)
and a ``type`` other than LeastAllocated or MostAllocated (Volcano scores it LeastAllocated).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from tidesched.framework.plugin import NodeFailure, Plugin, PredicateResult, RowFn
from tidesched.model.resource import CPU, MEMORY, PODS

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo
    from tidesched.model.node_table import NodeTable

NAME = "resource-strategy-fit"
DEFAULT_WEIGHT = 10
MAX_NODE_SCORE = 100  # kube-scheduler framework.MaxNodeScore
LEAST, MOST = "LeastAllocated", "MostAllocated"
SCORING_TYPE_ANNOTATION = "volcano.sh/resource-strategy-scoring-type"
SCORING_WEIGHT_ANNOTATION = "volcano.sh/resource-strategy-weight"
DEFAULT_RESOURCES = {CPU: (LEAST, 1), MEMORY: (LEAST, 1)}


@dataclass(frozen=True)
class StrategyArgs:
    """The plugin's arguments once read: every field as Volcano's plugin holds it."""

    weight: int = DEFAULT_WEIGHT
    resources: dict[str, tuple[str, int]] = field(default_factory=lambda: dict(DEFAULT_RESOURCES))
    sra_weight: int = 0
    sra_resources: dict[str, int] = field(default_factory=dict)  # empty: sra off
    proportional: dict[str, tuple[float, float]] | None = None  # resource -> (cpu, memory) rates

    @property
    def sra_weight_sum(self) -> int:
        return sum(self.sra_resources.values())

    def key(self) -> tuple[Any, ...]:
        """Everything here as a hashable value (part of the row caches' keys)."""
        return (self.weight, tuple(sorted(self.resources.items())), self.sra_weight,
                tuple(sorted(self.sra_resources.items())))


def valid_pattern(name: str) -> bool:
    """A resource key may hold one '*', at its end, after a non-empty prefix (Volcano
    isValidWildcardPattern)."""
    if "*" not in name:
        return True
    return name != "*" and name.endswith("*") and name.count("*") == 1


def strategy_for(resource: str, resources: Mapping[str, tuple[str, int]]) -> tuple[str, int] | None:
    """The entry for ``resource``: its exact name, else the wildcard with the longest matching
    prefix (Volcano findResourceConfigWithPrefix), else None."""
    exact = resources.get(resource)
    if exact is not None:
        return exact
    best: tuple[str, int] | None = None
    best_len = 0
    for key, value in resources.items():
        if key.endswith("*"):
            prefix = key[:-1]
            if resource.startswith(prefix) and len(prefix) > best_len:
                best, best_len = value, len(prefix)
    return best


def _comma_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _section(args: "Arguments", key: str) -> dict[str, Any]:
    return args.get_mapping(key)


def _int_field(args: "Arguments", key: str, sub: str, value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise args.bad_value(key, f"an integer for {sub}", value)
    return value


def parse_arguments(args: "Arguments") -> StrategyArgs:
    weight = args.get_int("resourceStrategyFitWeight", DEFAULT_WEIGHT)
    if weight < 0:
        weight = DEFAULT_WEIGHT
    resources: dict[str, tuple[str, int]] = {}
    for name, entry in _section(args, "resources").items():
        if not valid_pattern(str(name)):
            raise args.bad_value(
                "resources", "resource names with at most one '*', at the end after a prefix "
                f"(e.g. 'cloudml.gpu/*'; Volcano ignores {name!r} with a log line)", name)
        if not isinstance(entry, Mapping):
            raise args.bad_value("resources", f"a mapping with type and weight for {name!r}", entry)
        kind = entry.get("type") or LEAST
        if kind not in (LEAST, MOST):
            raise args.bad_value("resources", f"type {LEAST} or {MOST} for {name!r}", kind)
        w = _int_field(args, "resources", f"{name}.weight", entry.get("weight"), 1)
        resources[str(name)] = (kind, w if w > 0 else 1)
    if not resources:
        resources = dict(DEFAULT_RESOURCES)

    sra_weight, sra_resources = 0, {}
    sra = _section(args, "sra")
    if _flag(args, "sra", sra):
        sra_weight = _int_field(args, "sra", "weight", sra.get("weight"), 0)
        per = sra.get("resourceWeight") or {}
        if not isinstance(per, Mapping):
            raise args.bad_value("sra", "a mapping for resourceWeight", per)
        for name in _comma_list(_str_field(args, "sra", sra)):
            w = _int_field(args, "sra", f"resourceWeight[{name}]", per.get(name), 1)
            sra_resources[name] = w if w >= 0 else 1

    proportional = None
    prop = _section(args, "proportional")
    if _flag(args, "proportional", prop):
        rates = prop.get("resourceProportion") or {}
        if not isinstance(rates, Mapping):
            raise args.bad_value("proportional", "a mapping for resourceProportion", rates)
        proportional = {}
        for name in _comma_list(_str_field(args, "proportional", prop)):
            proportional[name] = (
                _rate(args, rates, f"{name}.cpu"), _rate(args, rates, f"{name}.memory"))
    return StrategyArgs(weight, resources, sra_weight, sra_resources, proportional)


def _flag(args: "Arguments", key: str, section: Mapping[str, Any]) -> bool:
    value = section.get("enable", False)
    if not isinstance(value, bool):
        raise args.bad_value(key, "true or false for enable", value)
    return value


def _str_field(args: "Arguments", key: str, section: Mapping[str, Any]) -> str:
    value = section.get("resources") or ""
    if not isinstance(value, str):
        raise args.bad_value(key, "a comma-separated string for resources", value)
    return value


def _rate(args: "Arguments", rates: Mapping[str, Any], key: str) -> float:
    value = rates.get(key, 1.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise args.bad_value("proportional", f"a number for resourceProportion[{key}]", value)
    return float(value) if value >= 0 else 1.0  # Volcano: a negative rate counts as 1


def pod_strategy(annotations: Mapping[str, str]) -> tuple[str, dict[str, int] | None] | None:
    """The pod's own strategy from its annotations: None when it names none; (type, None)
    when its weight map is missing or unreadable (every node then scores 0, as in Volcano)."""
    kind = annotations.get(SCORING_TYPE_ANNOTATION, "")
    if not kind:
        return None
    raw = annotations.get(SCORING_WEIGHT_ANNOTATION, "")
    try:
        weights = json.loads(raw) if raw else None
    except ValueError:
        weights = None
    if not isinstance(weights, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in weights.values()
    ):
        return kind, None
    return kind, {str(k): v for k, v in weights.items()}


def _requested(task: "TaskInfo") -> list[tuple[str, float]]:
    """What the task requests, as Volcano's Resreq.ResourceNames lists it (``pods`` included:
    every task requests one)."""
    req = task.resreq
    return [(name, req.get(name)) for name in req.resource_names()] + [(PODS, 1.0)]


class ResourceStrategyFitPlugin(Plugin):
    name = NAME

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.args = parse_arguments(arguments)

    def on_session_open(self, ssn: "Session") -> None:
        a = self.args
        table = ssn.table
        if a.proportional:
            self._open_proportional(ssn, table, a.proportional)
        if a.weight <= 0 and a.sra_weight <= 0:
            return  # Volcano registers no scorer when both weights are zero
        plans: dict[object, tuple[object, Callable[[np.ndarray | None], np.ndarray]]] = {}
        by_pod: dict[int, tuple[object, Callable[[np.ndarray | None], np.ndarray]]] = {}

        def plan(task: "TaskInfo") -> tuple[object, Callable[[np.ndarray | None], np.ndarray]]:
            # Asked twice per placement (key, then values): once per pod record is enough.
            got = by_pod.get(id(task.pod))
            if got is None:
                got = by_pod[id(task.pod)] = shape_plan(task)
            return got

        def shape_plan(task: "TaskInfo") -> tuple[object, Callable[[np.ndarray | None], np.ndarray]]:
            strategy = pod_strategy(task.pod.meta.annotations)
            requested = tuple(_requested(task))
            memo = (requested, strategy and (strategy[0], tuple(sorted((strategy[1] or {}).items()))))
            got = plans.get(memo)
            if got is None:
                got = plans[memo] = self._plan(table, requested, strategy)
            return got

        def score(task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
            key, compute = plan(task)
            return table.row_cached(key, compute)[idx]

        ssn.add_fn("node_order", self.name, score)
        ssn.add_row_fn("node_order", self.name, RowFn(lambda t: plan(t)[0], lambda t, rows: plan(t)[1](rows)))

    # -- scores ----------------------------------------------------------------------------

    def _plan(
        self, table: "NodeTable", requested: tuple[tuple[str, float], ...],
        strategy: tuple[str, dict[str, int] | None] | None,
    ) -> tuple[object, Callable[[np.ndarray | None], np.ndarray]]:
        """The cache key and the score function of one request shape."""
        a = self.args
        # (column or -1, request, type, weight) per scored resource, in Volcano's order.
        terms: list[tuple[int, float, str, int]] = []
        broken = False  # a pod weight map Volcano cannot read: every node 0
        if a.weight > 0:
            if strategy is not None:
                kind, weights = strategy
                if weights is None:
                    broken = True
                else:
                    terms = [(table.dim_index.get(n, -1), r, kind, weights[n]) for n, r in requested if n in weights]
            else:
                for n, r in requested:
                    entry = strategy_for(n, a.resources)
                    if entry is not None:
                        terms.append((table.dim_index.get(n, -1), r, entry[0], entry[1]))
        weight_sum = sum(t[3] for t in terms)
        fit_scale = float(MAX_NODE_SCORE * a.weight)
        needed = [table.dim_index.get(n, -1) for n, _r in requested]
        sra_scale = float(MAX_NODE_SCORE * a.sra_weight)
        sra_cols = [(table.dim_index.get(n, -1), w) for n, w in a.sra_resources.items()]
        sra_sum = a.sra_weight_sum

        def compute_rows(rows: np.ndarray) -> np.ndarray:
            """``compute`` for a few rows in plain floats (numpy's per-call overhead would
            dominate one row); the same arithmetic in the same order."""
            out = np.zeros(len(rows))
            for k, i in enumerate(rows.tolist()):
                alloc, used = table.allocatable[i].tolist(), table.used[i].tolist()
                total = 0.0
                if a.weight > 0 and not broken and terms:
                    fit, over = 0.0, False
                    for col, req, kind, w in terms:
                        if col < 0 or w == 0 or kind not in (LEAST, MOST):
                            continue
                        cap = alloc[col]
                        if cap == 0:
                            continue
                        final = used[col] + req
                        fit += final * w / cap if kind == MOST else (cap - final) * w / cap
                        over = over or final > cap
                    if weight_sum > 0:
                        fit /= weight_sum
                    total += 0.0 if over else fit * fit_scale
                if a.sra_weight > 0:
                    if all(col >= 0 and alloc[col] != 0 for col in needed):
                        held = sum(float(w) for col, w in sra_cols if col >= 0 and alloc[col] > 0)
                        sra = 1.0 - held / sra_sum if sra_sum > 0 else held
                        total += sra * sra_scale
                out[k] = total
            return out

        def compute(rows: np.ndarray | None) -> np.ndarray:
            if rows is not None and len(rows) <= 8:
                return compute_rows(rows)
            sel = slice(None) if rows is None else rows
            alloc, used = table.allocatable[sel], table.used[sel]
            n = alloc.shape[0]
            out = np.zeros(n)
            if a.weight > 0 and not broken and terms:
                fit = np.zeros(n)
                over = np.zeros(n, dtype=bool)
                for col, req, kind, w in terms:
                    if col < 0 or w == 0 or kind not in (LEAST, MOST):
                        continue  # scores 0, its weight still counts (as in Volcano)
                    cap = alloc[:, col]
                    final = used[:, col] + req
                    has = cap != 0
                    safe = np.where(has, cap, 1.0)
                    part = final * w / safe if kind == MOST else (cap - final) * w / safe
                    fit += np.where(has, part, 0.0)
                    over |= has & (final > cap)
                if weight_sum > 0:
                    fit /= weight_sum
                fit *= fit_scale
                fit[over] = 0.0
                out += fit
            if a.sra_weight > 0:
                lacking = np.zeros(n, dtype=bool)
                for col in needed:
                    lacking |= (alloc[:, col] == 0) if col >= 0 else True
                held = np.zeros(n)
                for col, w in sra_cols:
                    if col >= 0:
                        held += np.where(alloc[:, col] > 0, float(w), 0.0)
                sra = 1.0 - held / sra_sum if sra_sum > 0 else held
                sra = sra * sra_scale
                sra[lacking] = 0.0
                out += sra
            return out

        key = (NAME, a.key(), tuple(terms), broken, tuple(needed))
        return key, compute

    # -- proportional predicate --------------------------------------------------------------

    def _open_proportional(self, ssn: "Session", table: "NodeTable", rates: dict[str, tuple[float, float]]) -> None:
        # In a fixed order, so the first failing resource names the reason deterministically.
        checks = [(n, table.dim_index.get(n, -1), cpu, mem) for n, (cpu, mem) in sorted(rates.items())]
        # Which nodes report each resource at all (Volcano reads the node's idle map).
        reports = table.memo(
            (NAME, "reports", tuple(rates)),
            lambda: {n: np.array([n in node.allocatable.scalars for node in table.nodes], dtype=bool) for n in rates},
        )
        cpu_col, mem_col = table.dim_index[CPU], table.dim_index[MEMORY]

        def exempt(task: "TaskInfo") -> bool:
            return any(task.resreq.get(n) > 0 for n in rates)

        def failing(task: "TaskInfo", rows: np.ndarray | None) -> list[tuple[str, np.ndarray]]:
            sel = slice(None) if rows is None else rows
            idle = table.idle[sel]
            left_cpu = idle[:, cpu_col] - task.resreq.milli_cpu
            left_mem = idle[:, mem_col] - task.resreq.memory
            out = []
            undecided = np.ones(idle.shape[0], dtype=bool)
            for name, col, cpu_rate, mem_rate in checks:
                if col < 0:
                    continue
                g = idle[:, col]
                bad = reports[name][sel] & undecided & ((left_cpu < g * cpu_rate) | (left_mem < g * mem_rate * 1e6))
                if bad.any():
                    out.append((name, bad))
                    undecided &= ~bad
            return out

        def predicate(task: "TaskInfo") -> PredicateResult:
            n = len(table)
            if exempt(task):
                return PredicateResult(np.ones(n, dtype=bool))
            failures = [
                NodeFailure(f"proportional of resource {name} check failed", bad, True)
                for name, bad in failing(task, None)
            ]
            passed = np.ones(n, dtype=bool)
            for f in failures:
                passed &= ~f.nodes
            return PredicateResult(passed, failures)

        def row_key(task: "TaskInfo") -> object:
            if exempt(task):
                return (NAME, "exempt")
            return (NAME, "proportional", tuple(checks), task.resreq.milli_cpu, task.resreq.memory)

        def rows(task: "TaskInfo", rows: np.ndarray | None) -> np.ndarray:
            n = len(table) if rows is None else len(rows)
            passed = np.ones(n, dtype=bool)
            if not exempt(task):
                for _name, bad in failing(task, rows):
                    passed &= ~bad
            return passed

        ssn.add_fn("predicate", self.name, predicate)
        ssn.add_row_fn("predicate", self.name, RowFn(row_key, rows))
