"""Scenario files: cluster manifests plus timed events (SIM-1). The format is documented in
``docs/simulator.md``; in short::

    name: tidal-day
    schedulePeriod: 1s          # a session every period (SES-1)
    duration: 24h               # simulated time; omitted: run until nothing is left to do
    scheduler:
      configFile: scheduler.conf   # Volcano scheduler config, relative to this file
    manifests: [cluster.yaml, workloads/]   # loaded at t=0: any mix of Node, Queue, ...
    events:
    - {at: 08:00, scale: {deployment: online/chat, replicas: 6}}
    - {at: 2h, submit: jobs/train-a.yaml}

A plain manifest file or directory (the seeds' YAMLs as they are) is a scenario too: its
objects start at t=0 with the default settings.

Everything is checked on load; a bad entry raises :class:`ScenarioError` whose message names
the file and the entry (``scenario.yaml: events[3].scale.replicas: ...``). Objects a
scenario event names but that do not exist when the event fires are a runtime matter: the
simulator records a Warning event and goes on.

Code that builds scenarios itself (the trace loader) constructs :class:`Scenario` directly
and adds events with :func:`make_event`, which applies the same checks.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tidesched.framework.config import ConfigError, SchedulerConfig
from tidesched.model.loader import InputError, Manifest, load_paths, load_text
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME, IGNORED_KINDS

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

SCENARIO_FILE_NAMES = ("scenario.yaml", "scenario.yml")

_TOP_KEYS = {
    "name",
    "description",
    "schedulePeriod",
    "duration",
    "evictionGracePeriod",
    "deletionGracePeriod",
    "finishedTTL",
    "recordEvery",
    "maxIdleGap",
    "durationJitter",
    "scheduler",
    "manifests",
    "objects",
    "events",
    "trace",
    "checkRestart",
}
_TRACE_KEYS = {"dir", "pods", "compression", "fill", "limit", "seed"}
_SCHEDULER_KEYS = {"config", "configFile", "names"}

ACTIONS = (
    "submit",
    "delete",
    "scale",
    "addNode",
    "removeNode",
    "cordon",
    "uncordon",
    "setNode",
    "setQuota",
    "failPod",
    "setConfig",
)


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message names the file and entry."""


@dataclass(frozen=True, slots=True)
class TimedEvent:
    """One scenario event, normalised. ``args`` per action:

    * submit / addNode: ``{"objects": [Manifest, ...]}``
    * delete: ``{"kind": str, "name": str}`` (``ns/name`` for namespaced kinds)
    * scale: ``{"kind": "Deployment"|"ReplicaSet", "name": "ns/name", "replicas": int}``
    * removeNode / cordon / uncordon: ``{"names": [str, ...]}``
    * setNode: ``{"name": str, "labels": {k: str|None}, "allocatable": {k: str|None},
      "ready": bool|None, "unschedulable": bool|None}``
    * setQuota: ``{"queue": str, "cardQuota": dict|None (absent: unchanged; null: remove),
      "capability": dict|None, "state": str|None}``
    * failPod: ``{"name": "ns/name", "exitCode": int}``, or instead of ``name`` an owner
      (``"deployment"``/``"job": "ns/name"``): its first running pod in name order
    * setConfig: ``{"config": SchedulerConfig, "source": str}`` (a scheduler config reload)
    """

    at: float
    action: str
    args: Mapping[str, Any]
    source: str


@dataclass
class Scenario:
    """Everything a simulation needs. ``config`` None means Volcano's default config."""

    name: str
    objects: list[Manifest] = field(default_factory=list)
    events: list[TimedEvent] = field(default_factory=list)
    config: SchedulerConfig | None = None
    config_source: str = "<volcano default>"
    schedule_period: float = 1.0
    duration: float | None = None
    eviction_grace: float = 30.0
    deletion_grace: float = 30.0
    finished_ttl: float = 0.0
    record_every: int = 60
    max_idle_gap: float | None = None
    duration_jitter: float = 0.0
    scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME,)
    description: str = ""
    source: str = "<scenario>"
    warnings: list[str] = field(default_factory=list)
    # REL-3: every session is also decided by a scheduler rebuilt from the objects (a restart);
    # the two must decide the same (doubles session time; chaos runs turn it on).
    check_restart: bool = False

    def add_event(self, at: float | str, action: str, args: Any, source: str | None = None) -> TimedEvent:
        """Validate and append one event (``args`` as in the YAML form)."""
        src = source or f"{self.source}: events[{len(self.events)}]"
        ev = make_event(at, action, args, src)
        self.events.append(ev)
        return ev

    def sorted_events(self) -> list[TimedEvent]:
        # Stable: events at the same time keep their file order.
        return sorted(self.events, key=lambda e: e.at)


# --------------------------------------------------------------------------------------------
# Durations


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


# --------------------------------------------------------------------------------------------
# Objects


def object_kind(obj: Mapping[str, Any]) -> str:
    """The world kind of a raw object: ``Job`` only for Volcano Jobs; other kinds as given."""
    kind = obj.get("kind")
    if not isinstance(kind, str):
        return ""
    if kind == "Job":
        api = str(obj.get("apiVersion") or "")
        spec = obj.get("spec")
        if api.startswith(VOLCANO_JOB_API) or (not api and isinstance(spec, Mapping) and "tasks" in spec):
            return "Job"
        return "batch/v1 Job"
    return kind


def object_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return ""
    ns = meta.get("namespace")
    name = meta.get("name")
    return f"{ns}/{name}" if ns else str(name or "")


def check_objects(manifests: Iterable[Manifest], warnings: list[str]) -> list[Manifest]:
    """Keep objects of the kinds the world knows; objects of kinds the world does not use are
    dropped with a warning; unknown kinds and nameless objects are errors."""
    kept: list[Manifest] = []
    for m in manifests:
        obj = m.obj
        kind = object_kind(obj)
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta.get("name"):
            raise ScenarioError(f"{m.source}: {kind or 'object'} without metadata.name")
        if kind in WORLD_KINDS:
            _check_sim_annotations(m)
            problem = _object_problem(kind, obj)
            if problem:
                # Kept all the same: the world holds it as a cluster would, and the scheduler
                # skips it with a Warning event; this one names the file too (REL-1).
                warnings.append(f"{m.source}: {kind} {object_name(obj)}: {problem}")
            kept.append(m)
        elif kind == "batch/v1 Job" or kind in IGNORED_KINDS:
            warnings.append(f"{m.source}: {kind} {object_name(obj)} is not simulated; ignored")
        else:
            known = ", ".join(WORLD_KINDS)
            raise ScenarioError(f"{m.source}: unknown kind {obj.get('kind')!r} (the simulator knows {known})")
    return kept


def _object_problem(kind: str, obj: Mapping[str, Any]) -> str:
    """What the scheduler (or, for a Volcano Job, the simulated job controller) will refuse in
    ``obj``, or ""."""
    from tidesched.model.problems import ObjectError
    from tidesched.model.snapshot import PARSERS
    from tidesched.sim.controllers import parse_job

    try:
        if kind == "Job":
            parse_job(obj)
        elif kind in PARSERS:
            PARSERS[kind](obj)
    except (ObjectError, ValueError) as exc:
        return str(exc)
    return ""


def _annotation_maps(obj: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        yield "metadata.annotations", meta.get("annotations")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return
    tmpl = spec.get("template")
    if isinstance(tmpl, Mapping) and isinstance(tmpl.get("metadata"), Mapping):
        yield "spec.template.metadata.annotations", tmpl["metadata"].get("annotations")
    tasks = spec.get("tasks")
    if isinstance(tasks, list):
        for i, task in enumerate(tasks):
            if isinstance(task, Mapping):
                t = task.get("template")
                if isinstance(t, Mapping) and isinstance(t.get("metadata"), Mapping):
                    yield f"spec.tasks[{i}].template.metadata.annotations", t["metadata"].get("annotations")


def _check_sim_annotations(m: Manifest) -> None:
    for where, ann in _annotation_maps(m.obj):
        if not isinstance(ann, Mapping):
            continue
        label = f"{m.source}: {object_kind(m.obj)} {object_name(m.obj)}: {where}"
        if DURATION_ANNOTATION in ann:
            parse_duration(ann[DURATION_ANNOTATION], f"{label}[{DURATION_ANNOTATION}]")
        if EXIT_CODE_ANNOTATION in ann:
            try:
                int(str(ann[EXIT_CODE_ANNOTATION]))
            except ValueError:
                raise ScenarioError(
                    f"{label}[{EXIT_CODE_ANNOTATION}]: expected an integer, got {ann[EXIT_CODE_ANNOTATION]!r}"
                ) from None


def _objects_arg(value: Any, where: str, base_dir: Path | None, warnings: list[str]) -> list[Manifest]:
    """Objects given inline (a mapping or a list of mappings) or as file/dir paths."""
    items = value if isinstance(value, list) else [value]
    out: list[Manifest] = []
    for i, item in enumerate(items):
        src = f"{where}[{i}]" if isinstance(value, list) else where
        if isinstance(item, str):
            out.extend(_load_paths([item], src, base_dir))
        elif isinstance(item, Mapping):
            if item.get("kind") == "List" or "items" in item and "kind" not in item:
                raise ScenarioError(f"{src}: give the objects of a List one by one")
            out.append(Manifest(src, item))
        else:
            raise ScenarioError(f"{src}: expected an object or a manifest path, got {type(item).__name__}")
    if not out:
        raise ScenarioError(f"{where}: no objects")
    return check_objects(out, warnings)


def _load_paths(paths: list[str], where: str, base_dir: Path | None) -> list[Manifest]:
    resolved = [
        (base_dir / p) if base_dir is not None and not Path(p).is_absolute() else Path(p) for p in paths
    ]
    try:
        return load_paths(resolved)
    except InputError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


# --------------------------------------------------------------------------------------------
# Events


def _name_arg(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or value.count("/") > 1:
        raise ScenarioError(f"{where}: expected a name or namespace/name, got {value!r}")
    return value.strip()


def _names_arg(value: Any, where: str) -> list[str]:
    if isinstance(value, list):
        if not value:
            raise ScenarioError(f"{where}: empty list of node names")
        return [_name_arg(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return _names_arg(value.get("name", value.get("names")), f"{where}.name")
    return [_name_arg(value, where)]


def _mapping_arg(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScenarioError(
            f"{where}: expected a mapping, got {type(value).__name__ if value is not None else 'null'}"
        )
    return value


def _only_keys(value: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for k in value:
        if k not in allowed:
            hint = difflib.get_close_matches(str(k), sorted(allowed), n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else f" (known: {', '.join(sorted(allowed))})"
            raise ScenarioError(f"{where}: unknown key {k!r}{more}")


def _namespaced(name: str) -> str:
    return name if "/" in name else f"default/{name}"


def _string_map(value: Any, where: str, allow_null: bool) -> dict[str, Any]:
    m = _mapping_arg(value, where)
    out: dict[str, Any] = {}
    for k, v in m.items():
        if v is None:
            if not allow_null:
                raise ScenarioError(f"{where}[{k}]: null not allowed here")
            out[str(k)] = None
        elif isinstance(v, (str, int, float)) and not isinstance(v, bool):
            out[str(k)] = str(v)
        else:
            raise ScenarioError(f"{where}[{k}]: expected a string or number, got {v!r}")
    return out


def _resource_map(value: Any, where: str, allow_null: bool) -> dict[str, Any]:
    from tidesched.model.quantity import QuantityError, parse_quantity

    out = _string_map(value, where, allow_null)
    for k, v in out.items():
        if v is None:
            continue
        try:
            q = parse_quantity(v)
        except QuantityError as exc:
            raise ScenarioError(f"{where}[{k}]: {exc}") from None
        if q < 0:
            raise ScenarioError(f"{where}[{k}]: must not be negative, got {v!r}")
    return out


def _card_quota(value: Any, where: str) -> dict[str, int] | None:
    if value is None:
        return None
    m = _mapping_arg(value, where)
    out: dict[str, int] = {}
    for k, v in m.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v):
            raise ScenarioError(f"{where}[{k}]: expected a non-negative whole number of cards, got {v!r}")
        out[str(k)] = int(v)
    return out


def _config_arg(raw: Any, where: str, base_dir: Path | None) -> dict[str, Any]:
    """``setConfig``: the config text (or mapping) inline, ``{config: ...}`` or ``{configFile: path}``."""
    from tidesched.scheduler import config_from_file, config_from_text

    if isinstance(raw, Mapping) and set(map(str, raw)) <= {"config", "configFile"} and len(raw) == 1:
        if "configFile" in raw:
            p = Path(str(raw["configFile"]))
            if base_dir is not None and not p.is_absolute():
                p = base_dir / p
            if not p.is_file():
                raise ScenarioError(f"{where}.configFile: {p}: no such file")
            try:
                return {"config": config_from_file(p), "source": str(p)}
            except ConfigError as exc:
                raise ScenarioError(f"{where}.configFile: {exc}") from None
        raw = raw["config"]
    if isinstance(raw, Mapping):
        raw = yaml.safe_dump(dict(raw), sort_keys=False)
    if not isinstance(raw, str) or not raw.strip():
        raise ScenarioError(f"{where}: expected the scheduler config (text or mapping) or {{configFile: path}}")
    try:
        return {"config": config_from_text(raw, where), "source": where}
    except ConfigError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


def _bool_arg(value: Any, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ScenarioError(f"{where}: expected true or false, got {value!r}")


def make_event(
    at: float | str,
    action: str,
    raw: Any,
    source: str,
    base_dir: Path | None = None,
    warnings: list[str] | None = None,
) -> TimedEvent:
    """Validate one event and normalise its arguments (see :class:`TimedEvent`)."""
    warns = warnings if warnings is not None else []
    t = parse_duration(at, f"{source}.at")
    where = f"{source}.{action}"
    args: dict[str, Any]
    if action in ("submit", "addNode"):
        objs = _objects_arg(raw, where, base_dir, warns)
        if action == "addNode":
            for m in objs:
                if object_kind(m.obj) != "Node":
                    raise ScenarioError(f"{m.source}: addNode takes Node objects, got {object_kind(m.obj)}")
        args = {"objects": objs}
    elif action == "delete":
        m = _mapping_arg(raw, where)
        _only_keys(m, {"kind", "name"}, where)
        kind = m.get("kind")
        if kind not in WORLD_KINDS:
            raise ScenarioError(f"{where}.kind: expected one of {', '.join(WORLD_KINDS)}, got {kind!r}")
        name = _name_arg(m.get("name"), f"{where}.name")
        if kind in ("Pod", "PodGroup", "Job", "Deployment", "ReplicaSet", "PodDisruptionBudget"):
            name = _namespaced(name)
        elif "/" in name:
            raise ScenarioError(f"{where}.name: {kind} is not namespaced, got {name!r}")
        args = {"kind": kind, "name": name}
    elif action == "scale":
        m = _mapping_arg(raw, where)
        _only_keys(m, {"deployment", "replicaset", "replicas"}, where)
        targets = [k for k in ("deployment", "replicaset") if k in m]
        if len(targets) != 1:
            raise ScenarioError(f"{where}: name exactly one of deployment or replicaset")
        replicas = m.get("replicas")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise ScenarioError(f"{where}.replicas: expected a non-negative integer, got {replicas!r}")
        kind = "Deployment" if targets[0] == "deployment" else "ReplicaSet"
        args = {
            "kind": kind,
            "name": _namespaced(_name_arg(m[targets[0]], f"{where}.{targets[0]}")),
            "replicas": replicas,
        }
    elif action in ("removeNode", "cordon", "uncordon"):
        args = {"names": _names_arg(raw, where)}
    elif action == "setNode":
        m = _mapping_arg(raw, where)
        _only_keys(m, {"name", "labels", "allocatable", "ready", "unschedulable"}, where)
        if len(m) < 2:
            raise ScenarioError(
                f"{where}: nothing to change (give labels, allocatable, ready or unschedulable)"
            )
        args = {
            "name": _name_arg(m.get("name"), f"{where}.name"),
            "labels": _string_map(m["labels"], f"{where}.labels", True) if "labels" in m else {},
            "allocatable": _resource_map(m["allocatable"], f"{where}.allocatable", True)
            if "allocatable" in m
            else {},
            "ready": _bool_arg(m.get("ready"), f"{where}.ready"),
            "unschedulable": _bool_arg(m.get("unschedulable"), f"{where}.unschedulable"),
        }
    elif action == "setQuota":
        m = _mapping_arg(raw, where)
        _only_keys(m, {"queue", "cardQuota", "capability", "state"}, where)
        if len(m) < 2:
            raise ScenarioError(f"{where}: nothing to change (give cardQuota, capability or state)")
        state = m.get("state")
        if state is not None and state not in ("Open", "Closed", "Closing"):
            raise ScenarioError(f"{where}.state: expected Open, Closed or Closing, got {state!r}")
        args = {"queue": _name_arg(m.get("queue"), f"{where}.queue"), "state": state}
        if "cardQuota" in m:
            args["cardQuota"] = _card_quota(m["cardQuota"], f"{where}.cardQuota")
        if "capability" in m:
            cap = m["capability"]
            args["capability"] = None if cap is None else _resource_map(cap, f"{where}.capability", False)
    elif action == "failPod":
        if isinstance(raw, Mapping):
            _only_keys(raw, {"name", "deployment", "job", "exitCode"}, where)
            targets = [k for k in ("name", "deployment", "job") if k in raw]
            if len(targets) != 1:
                raise ScenarioError(f"{where}: name exactly one of name, deployment or job")
            target, code = targets[0], raw.get("exitCode", 1)
            name = raw[target]
        else:
            target, name, code = "name", raw, 1
        if isinstance(code, bool) or not isinstance(code, int) or code == 0:
            raise ScenarioError(f"{where}.exitCode: expected a non-zero integer, got {code!r}")
        args = {"exitCode": code}
        args["name" if target == "name" else target] = _namespaced(_name_arg(name, f"{where}.{target}"))
    elif action == "setConfig":
        args = _config_arg(raw, where, base_dir)
    else:
        hint = difflib.get_close_matches(action, ACTIONS, n=1)
        more = f"; did you mean {hint[0]!r}?" if hint else ""
        raise ScenarioError(f"{source}: unknown action {action!r} (known: {', '.join(ACTIONS)}){more}")
    return TimedEvent(at=t, action=action, args=args, source=source)


def _event_entry(raw: Any, source: str, base_dir: Path | None, warnings: list[str]) -> TimedEvent:
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{source}: expected a mapping such as {{at: 8h, scale: {{...}}}}, got {raw!r}")
    if "at" not in raw:
        raise ScenarioError(f"{source}: missing 'at' (when the event happens, e.g. at: 8h)")
    actions = [k for k in raw if k != "at"]
    if len(actions) != 1:
        if not actions:
            raise ScenarioError(f"{source}: no action (one of {', '.join(ACTIONS)})")
        raise ScenarioError(f"{source}: one action per event, got {', '.join(map(str, actions))}")
    action = str(actions[0])
    return make_event(raw["at"], action, raw[action], source, base_dir, warnings)


# --------------------------------------------------------------------------------------------
# Loading


def _trace_entry(raw: Any, where: str, base_dir: Path | None) -> tuple[list[Manifest], list[TimedEvent]]:
    """``trace: {dir, pods, compression, fill, limit, seed}``: a trace in the Alibaba GPU v2023
    layout, as ``tidesched simulate --trace`` reads it (``dir`` relative to the scenario file)."""
    from tidesched.sim.trace import TraceError, load_trace

    if isinstance(raw, str):
        raw = {"dir": raw}
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{where}: expected a mapping with dir (and pods, compression, fill, limit, seed)")
    unknown = sorted(set(map(str, raw)) - _TRACE_KEYS)
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_TRACE_KEYS))})")
    if not isinstance(raw.get("dir"), str):
        raise ScenarioError(f"{where}.dir: expected the trace directory's path")
    base = Path(raw["dir"])
    if not base.is_absolute() and base_dir is not None:
        base = base_dir / base
    if not (base / "csv").is_dir():
        raise ScenarioError(f"{where}.dir: {base} is not a trace directory (no csv/ in it)")
    source = base
    pods = raw.get("pods")
    if pods is not None:
        if not isinstance(pods, str):
            raise ScenarioError(f"{where}.pods: expected a file name")
        found = [q for q in (base / pods, base / "csv" / pods) if q.is_file()]
        if not found:
            raise ScenarioError(f"{where}.pods: {pods!r} not found in {base} or {base / 'csv'}")
        source = found[0]
    compression = raw.get("compression", 1.0)
    if isinstance(compression, bool) or not isinstance(compression, (int, float)) or not compression > 0:
        raise ScenarioError(f"{where}.compression: expected a positive number, got {compression!r}")
    fill = raw.get("fill", False)
    if not isinstance(fill, bool):
        raise ScenarioError(f"{where}.fill: expected true or false, got {fill!r}")
    limit, seed = raw.get("limit"), raw.get("seed", 0)
    for key, value in (("limit", limit), ("seed", seed)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ScenarioError(f"{where}.{key}: expected a non-negative integer, got {value!r}")
    try:
        objects, events = load_trace(source, time_compression=float(compression), fill=fill, limit=limit, seed=seed)
    except (TraceError, OSError) as exc:
        raise ScenarioError(f"{where}: {exc}") from None
    text = str(source)
    return [Manifest(f"{text}: {o['kind']} {o['metadata']['name']}", o) for o in objects], events


def _setting(doc: Mapping[str, Any], key: str, default: Any, source: str) -> Any:
    if key not in doc or doc[key] is None:
        return default
    return parse_duration(doc[key], f"{source}: {key}")


def scenario_from_mapping(
    doc: Mapping[str, Any], source: str, base_dir: Path | None = None, config_path: str | Path | None = None
) -> Scenario:
    """Build a scenario from its parsed YAML document."""
    from tidesched.scheduler import config_from_file, config_from_text

    for k in doc:
        if k not in _TOP_KEYS:
            hint = difflib.get_close_matches(str(k), sorted(_TOP_KEYS), n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else f" (known: {', '.join(sorted(_TOP_KEYS))})"
            raise ScenarioError(f"{source}: unknown key {k!r}{more}")
    warnings: list[str] = []
    name = doc.get("name") or (base_dir.name if base_dir is not None else "scenario")
    if not isinstance(name, str):
        raise ScenarioError(f"{source}: name: expected a string, got {name!r}")
    period = _setting(doc, "schedulePeriod", 1.0, source)
    if period <= 0:
        raise ScenarioError(f"{source}: schedulePeriod must be positive")
    duration = _setting(doc, "duration", None, source)
    record_every = doc.get("recordEvery", 60)
    if isinstance(record_every, bool) or not isinstance(record_every, int) or record_every < 0:
        raise ScenarioError(
            f"{source}: recordEvery: expected a non-negative integer (periods), got {record_every!r}"
        )
    jitter = doc.get("durationJitter", 0.0)
    if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or not 0 <= jitter < 1:
        raise ScenarioError(f"{source}: durationJitter: expected a fraction in [0, 1), got {jitter!r}")

    sched = doc.get("scheduler") or {}
    if not isinstance(sched, Mapping):
        raise ScenarioError(f"{source}: scheduler: expected a mapping with config/configFile/names")
    _only_keys(sched, _SCHEDULER_KEYS, f"{source}: scheduler")
    names = sched.get("names", [DEFAULT_SCHEDULER_NAME])
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise ScenarioError(f"{source}: scheduler.names: expected a list of scheduler names, got {names!r}")
    config: SchedulerConfig | None = None
    config_source = "<volcano default>"
    try:
        if config_path is not None:
            config = config_from_file(config_path)
            config_source = str(config_path)
        elif "configFile" in sched and "config" in sched:
            raise ScenarioError(f"{source}: scheduler: give config or configFile, not both")
        elif "configFile" in sched:
            p = Path(str(sched["configFile"]))
            if base_dir is not None and not p.is_absolute():
                p = base_dir / p
            if not p.is_file():
                raise ScenarioError(f"{source}: scheduler.configFile: {p}: no such file")
            config = config_from_file(p)
            config_source = str(p)
        elif "config" in sched:
            text = sched["config"]
            if isinstance(text, Mapping):
                text = yaml.safe_dump(dict(text), sort_keys=False)
            if not isinstance(text, str):
                raise ScenarioError(f"{source}: scheduler.config: expected the config text or mapping")
            config = config_from_text(text, f"{source}: scheduler.config")
            config_source = f"{source}: scheduler.config"
    except ConfigError as exc:
        raise ScenarioError(f"{source}: scheduler config: {exc}") from None

    objects: list[Manifest] = []
    manifests = doc.get("manifests") or []
    if isinstance(manifests, str):
        manifests = [manifests]
    if not isinstance(manifests, list) or not all(isinstance(p, str) for p in manifests):
        raise ScenarioError(f"{source}: manifests: expected a list of file or directory paths")
    for i, p in enumerate(manifests):
        objects.extend(check_objects(_load_paths([p], f"{source}: manifests[{i}]", base_dir), warnings))
    inline = doc.get("objects")
    if inline is not None:
        objects.extend(_objects_arg(inline, f"{source}: objects", base_dir, warnings))

    raw_events = doc.get("events") or []
    if not isinstance(raw_events, list):
        raise ScenarioError(f"{source}: events: expected a list")
    events = [
        _event_entry(raw, f"{source}: events[{i}]", base_dir, warnings) for i, raw in enumerate(raw_events)
    ]
    if doc.get("trace") is not None:
        # The trace's nodes, queues and submissions come first; the scenario's own objects and
        # events add to them (and may replace a trace object by name).
        trace_objects, trace_events = _trace_entry(doc["trace"], f"{source}: trace", base_dir)
        objects = trace_objects + objects
        events = trace_events + events
    max_gap = _setting(doc, "maxIdleGap", None, source)
    check_restart = doc.get("checkRestart", False)
    if not isinstance(check_restart, bool):
        raise ScenarioError(f"{source}: checkRestart: expected true or false, got {check_restart!r}")
    return Scenario(
        name=name,
        objects=objects,
        events=events,
        config=config,
        config_source=config_source,
        schedule_period=period,
        duration=duration,
        eviction_grace=_setting(doc, "evictionGracePeriod", 30.0, source),
        deletion_grace=_setting(doc, "deletionGracePeriod", 30.0, source),
        finished_ttl=_setting(doc, "finishedTTL", 0.0, source),
        record_every=record_every,
        max_idle_gap=max_gap if max_gap else None,
        duration_jitter=float(jitter),
        scheduler_names=tuple(names),
        description=str(doc.get("description") or ""),
        source=source,
        warnings=warnings,
        check_restart=check_restart,
    )


def scenario_from_manifests(
    manifests: list[Manifest], name: str, source: str, config_path: str | Path | None = None
) -> Scenario:
    """A scenario of objects only: everything starts at t=0, default settings."""
    from tidesched.scheduler import config_from_file

    warnings: list[str] = []
    objects = check_objects(manifests, warnings)
    config = None
    config_source = "<volcano default>"
    if config_path is not None:
        try:
            config = config_from_file(config_path)
        except ConfigError as exc:
            raise ScenarioError(f"{config_path}: {exc}") from None
        config_source = str(config_path)
    return Scenario(
        name=name,
        objects=objects,
        config=config,
        config_source=config_source,
        source=source,
        warnings=warnings,
    )


def _is_scenario_doc(doc: Any) -> bool:
    return isinstance(doc, Mapping) and (doc.get("kind") in (None, "Scenario")) and "apiVersion" not in doc


def load_scenario(path: str | Path, config_path: str | Path | None = None) -> Scenario:
    """Load a scenario file, a directory holding ``scenario.yaml``, or plain manifests (a file
    or a directory of them). ``config_path`` overrides the scenario's scheduler config."""
    p = Path(path)
    if p.is_dir():
        for fname in SCENARIO_FILE_NAMES:
            if (p / fname).is_file():
                return load_scenario(p / fname, config_path)
        return scenario_from_manifests(_load_paths([str(p)], str(p), None), p.name, str(p), config_path)
    if not p.is_file():
        raise ScenarioError(f"{p}: no such file or directory")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{p}: cannot read: {exc}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ScenarioError(f"{p}{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if len(docs) == 1 and _is_scenario_doc(docs[0]):
        doc = dict(docs[0])
        doc.pop("kind", None)
        return scenario_from_mapping(doc, str(p), p.parent, config_path)
    try:
        manifests = load_text(text, str(p))
    except InputError as exc:
        raise ScenarioError(str(exc)) from None
    return scenario_from_manifests(manifests, p.stem, str(p), config_path)
