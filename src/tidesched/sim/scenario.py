"""Scenario files: cluster manifests plus timed events (SIM-1). The format is documented in
``docs/simulator.md``; in short::

    name: tidal-day
    schedulePeriod: 1s          # a session every period (SES-1)
    duration: 24h               # simulated time; omitted: run until nothing is left to do
    scheduler:
      configFile: scheduler.conf   # Volcano scheduler config, relative to this file
      ignoredProvisioners: [kubernetes.io/no-provisioner]   # vc-scheduler's --ignored-provisioners
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tidesched.framework.arguments import ConfigError
from tidesched.framework.config import SchedulerConfig
from tidesched.framework.features import parse_feature_gates
from tidesched.model.loader import InputError, Manifest, load_text
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME
from tidesched.sim.events import (
    Scenario,
    TimedEvent,
    check_objects,
    event_entry,
    load_manifest_paths,
    objects_arg,
    only_keys,
)
from tidesched.sim.trace import TraceError, load_trace
from tidesched.sim.trace_vgpu import TRACE_VGPU_CONFIG
from tidesched.sim.vocabulary import ScenarioError, parse_duration


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
_TRACE_KEYS = {"dir", "pods", "compression", "fill", "limit", "seed", "gpuSharing"}
_SCHEDULER_KEYS = {"config", "configFile", "names", "featureGates", "ignoredProvisioners"}


# --------------------------------------------------------------------------------------------
# Loading


def _trace_entry(raw: Any, where: str, base_dir: Path | None) -> tuple[list[Manifest], list[TimedEvent]]:
    """``trace: {dir, pods, compression, fill, limit, seed}``: a trace in the Alibaba GPU v2023
    layout, as ``tidesched simulate --trace`` reads it (``dir`` relative to the scenario file)."""
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
    sharing = raw.get("gpuSharing", "vgpu")
    try:
        objects, events = load_trace(source, time_compression=float(compression), fill=fill, limit=limit, seed=seed,
                                     gpu_sharing=sharing)
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
    only_keys(sched, _SCHEDULER_KEYS, f"{source}: scheduler")
    names = sched.get("names", [DEFAULT_SCHEDULER_NAME])
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise ScenarioError(f"{source}: scheduler.names: expected a list of scheduler names, got {names!r}")
    try:
        features = parse_feature_gates(sched.get("featureGates"))
    except ValueError as exc:
        raise ScenarioError(f"{source}: scheduler.featureGates: {exc}") from None
    ignored = sched.get("ignoredProvisioners", [])
    if not isinstance(ignored, list) or not all(isinstance(p, str) and p for p in ignored):
        raise ScenarioError(f"{source}: scheduler.ignoredProvisioners: expected a list of provisioner names, got {ignored!r}")
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
        objects.extend(check_objects(load_manifest_paths([p], f"{source}: manifests[{i}]", base_dir), warnings))
    inline = doc.get("objects")
    if inline is not None:
        objects.extend(objects_arg(inline, f"{source}: objects", base_dir, warnings))

    raw_events = doc.get("events") or []
    if not isinstance(raw_events, list):
        raise ScenarioError(f"{source}: events: expected a list")
    events = [
        event_entry(raw, f"{source}: events[{i}]", base_dir, warnings) for i, raw in enumerate(raw_events)
    ]
    if doc.get("trace") is not None:
        # The trace's nodes, queues and submissions come first; the scenario's own objects and
        # events add to them (and may replace a trace object by name).
        trace_objects, trace_events = _trace_entry(doc["trace"], f"{source}: trace", base_dir)
        objects = trace_objects + objects
        events = trace_events + events
        raw_trace = doc["trace"]
        if config is None and (not isinstance(raw_trace, Mapping) or raw_trace.get("gpuSharing", "vgpu") == "vgpu"):
            # A trace on per-device GPUs needs deviceshare (sim.trace_vgpu), as --trace gives it.
            config = config_from_text(TRACE_VGPU_CONFIG, "<trace: deviceshare>")
            config_source = "tidesched.sim.trace_vgpu (Volcano's default config + deviceshare vGPU)"
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
        ignored_provisioners=tuple(ignored),
        description=str(doc.get("description") or ""),
        source=source,
        warnings=warnings,
        check_restart=check_restart,
        feature_gates=features,
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
        return scenario_from_manifests(load_manifest_paths([str(p)], str(p), None), p.name, str(p), config_path)
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
