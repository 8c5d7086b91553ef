"""A scenario in memory: :class:`Scenario` (objects at t=0, settings) and its
:class:`TimedEvent` list, with :func:`make_event`, which checks one event (and the objects it
carries) as the scenario file's reader does. Code that builds scenarios itself (the trace
loader, the what-if, chaos) uses these directly; ``scenario.py`` reads the file format."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tidesched.framework.arguments import ConfigError
from tidesched.framework.config import SchedulerConfig
from tidesched.framework.features import FeatureGates
from tidesched.model.loader import InputError, Manifest, load_paths
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME, IGNORED_KINDS
from tidesched.sim.vocabulary import (
    DURATION_ANNOTATION,
    EXIT_CODE_ANNOTATION,
    VOLCANO_JOB_API,
    NAMESPACED_KINDS,
    WORLD_KINDS,
    ScenarioError,
    parse_duration,
)

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
    "ungate",
)


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
    * ungate: ``{"pod": "ns/name", "gates": [str, ...] | None}`` (None: every gate) — a gate's
      owner lifts it
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
    ignored_provisioners: tuple[str, ...] = ()  # vc-scheduler's --ignored-provisioners
    description: str = ""
    source: str = "<scenario>"
    warnings: list[str] = field(default_factory=list)
    # REL-3: every session is also decided by a scheduler rebuilt from the objects (a restart);
    # the two must decide the same (doubles session time; chaos runs turn it on).
    check_restart: bool = False
    feature_gates: FeatureGates = field(default_factory=FeatureGates)  # scheduler.featureGates

    def add_event(self, at: float | str, action: str, args: Any, source: str | None = None) -> TimedEvent:
        """Validate and append one event (``args`` as in the YAML form)."""
        src = source or f"{self.source}: events[{len(self.events)}]"
        ev = make_event(at, action, args, src)
        self.events.append(ev)
        return ev

    def sorted_events(self) -> list[TimedEvent]:
        # Stable: events at the same time keep their file order.
        return sorted(self.events, key=lambda e: e.at)


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
    from tidesched.sim.controllers.vcjob import parse_job

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


def objects_arg(value: Any, where: str, base_dir: Path | None, warnings: list[str]) -> list[Manifest]:
    """Objects given inline (a mapping or a list of mappings) or as file/dir paths."""
    items = value if isinstance(value, list) else [value]
    out: list[Manifest] = []
    for i, item in enumerate(items):
        src = f"{where}[{i}]" if isinstance(value, list) else where
        if isinstance(item, str):
            out.extend(load_manifest_paths([item], src, base_dir))
        elif isinstance(item, Mapping):
            if item.get("kind") == "List" or "items" in item and "kind" not in item:
                raise ScenarioError(f"{src}: give the objects of a List one by one")
            out.append(Manifest(src, item))
        else:
            raise ScenarioError(f"{src}: expected an object or a manifest path, got {type(item).__name__}")
    if not out:
        raise ScenarioError(f"{where}: no objects")
    return check_objects(out, warnings)


def load_manifest_paths(paths: list[str], where: str, base_dir: Path | None) -> list[Manifest]:
    resolved = [
        (base_dir / p) if base_dir is not None and not Path(p).is_absolute() else Path(p) for p in paths
    ]
    try:
        return load_paths(resolved)
    except InputError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


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


def only_keys(value: Mapping[str, Any], allowed: set[str], where: str) -> None:
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
        objs = objects_arg(raw, where, base_dir, warns)
        if action == "addNode":
            for m in objs:
                if object_kind(m.obj) != "Node":
                    raise ScenarioError(f"{m.source}: addNode takes Node objects, got {object_kind(m.obj)}")
        args = {"objects": objs}
    elif action == "delete":
        m = _mapping_arg(raw, where)
        only_keys(m, {"kind", "name"}, where)
        kind = m.get("kind")
        if kind not in WORLD_KINDS:
            raise ScenarioError(f"{where}.kind: expected one of {', '.join(WORLD_KINDS)}, got {kind!r}")
        name = _name_arg(m.get("name"), f"{where}.name")
        if kind in NAMESPACED_KINDS:
            name = _namespaced(name)
        elif "/" in name:
            raise ScenarioError(f"{where}.name: {kind} is not namespaced, got {name!r}")
        args = {"kind": kind, "name": name}
    elif action == "scale":
        m = _mapping_arg(raw, where)
        only_keys(m, {"deployment", "replicaset", "replicas"}, where)
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
        only_keys(m, {"name", "labels", "allocatable", "ready", "unschedulable"}, where)
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
        only_keys(m, {"queue", "cardQuota", "capability", "state"}, where)
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
            only_keys(raw, {"name", "deployment", "job", "exitCode"}, where)
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
    elif action == "ungate":
        m = _mapping_arg(raw, where)
        only_keys(m, {"pod", "gates"}, where)
        gates = m.get("gates")
        if gates is not None and (not isinstance(gates, list) or not all(isinstance(g, str) and g for g in gates)):
            raise ScenarioError(f"{where}.gates: expected a list of gate names, got {gates!r}")
        args = {"pod": _namespaced(_name_arg(m.get("pod"), f"{where}.pod")), "gates": gates}
    else:
        hint = difflib.get_close_matches(action, ACTIONS, n=1)
        more = f"; did you mean {hint[0]!r}?" if hint else ""
        raise ScenarioError(f"{source}: unknown action {action!r} (known: {', '.join(ACTIONS)}){more}")
    return TimedEvent(at=t, action=action, args=args, source=source)


def event_entry(raw: Any, source: str, base_dir: Path | None, warnings: list[str]) -> TimedEvent:
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
