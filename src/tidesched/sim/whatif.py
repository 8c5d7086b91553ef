"""What-if simulation of a live cluster (issue 14): "what happens if I submit this?".

The cluster's objects — read once from the API server (``kube.commands.read_cluster``, the same
read-only lists as ``tidesched quota``) or from a ``kubectl get ... -o yaml`` dump — become the
world of a simulation at t=0, the given manifests are added at t=0, and the simulator runs forward
with the cluster's own scheduler config (the ConfigMap the deployed scheduler reads). The result is
the simulator's (``result.json``, ``report.html``) plus a ``whatif`` section: the binds (where),
the evictions (why) and the waits of the new workloads.

How the cluster's objects are taken:

* time is rebased: the moment of the read is t=0; creation and start times keep their distance
  to it (so the new workloads are the youngest and queue behind what already waits);
* a running pod ends after its expected run time (``sim.tidesched.io/duration``, the simulator's
  run-time annotation, counted from its start; at least one period is left), else after
  ``default_runtime`` from now; pods of services (owned by a ReplicaSet, StatefulSet or
  DaemonSet) run on unless annotated. A pod being deleted ends when its grace period does;
* pending pods and the new pods without the annotation run ``default_runtime`` once started;
* finished pods are left out; controllers' objects (Volcano Jobs, Deployments, ReplicaSets) are
  left out too: their pods are taken as they are, so an evicted pod read from the cluster is not
  recreated (the new manifests' Jobs and Deployments are simulated with their controllers).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tidesched.framework.arguments import ConfigError
from tidesched.framework.config import SchedulerConfig
from tidesched.framework.decisions import Decisions
from tidesched.model.loader import InputError, Manifest, load_paths
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME
from tidesched.scheduler import CONFIG_KEY, CONFIG_MAPS, config_from_file, config_from_text
from tidesched.plugins.capacity_card import SERVICE_TYPE_ANNOTATION
from tidesched.sim.metrics import capacity_card_args
from tidesched.sim.runner import Engine, Progress, SimulationRun
from tidesched.model.durations import format_compact
from tidesched.sim.vocabulary import DURATION_ANNOTATION, ScenarioError, parse_duration
from tidesched.sim.events import Scenario, check_objects, object_kind, object_name
from tidesched.sim.world import Applied, iso

# Kinds read from the cluster that the simulation takes as they are.
CLUSTER_KINDS = (
    "Node", "Queue", "PriorityClass", "PodGroup", "Pod", "PodDisruptionBudget", "ResourceQuota", "Numatopology",
    "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode",
)
SERVICE_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "DaemonSet", "Deployment"})
MAX_LISTED = 2000  # binds/evictions listed in the result (all are counted)


class WhatIfError(ValueError):
    """Input the what-if simulation cannot use; the message names the object or file."""


def parse_time(value: Any) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp (None when absent or unreadable)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def config_map_text(objects: Iterable[Mapping[str, Any]], ref: str, key: str = CONFIG_KEY) -> str | None:
    """The scheduler config held by ConfigMap ``ns/name`` among ``objects`` (None if absent).
    Its ``key`` entry, or its only entry."""
    ns, _, name = ref.partition("/")
    for obj in objects:
        if obj.get("kind") != "ConfigMap":
            continue
        md = obj.get("metadata") or {}
        if md.get("name") == name and (md.get("namespace") or "default") == ns:
            return config_from_config_map(obj, ref, key)
    return None


def config_from_config_map(cm: Mapping[str, Any], ref: str, key: str = CONFIG_KEY) -> str:
    data = cm.get("data") or {}
    if not isinstance(data, Mapping):
        raise WhatIfError(f"ConfigMap {ref}: data is not a mapping")
    if key in data:
        return str(data[key])
    if len(data) == 1:
        return str(next(iter(data.values())))
    raise WhatIfError(f"ConfigMap {ref}: no key {key!r} (it has {', '.join(sorted(data)) or 'none'})")


def parse_cluster_config(text: str, source: str) -> SchedulerConfig:
    try:
        return config_from_text(text, source)
    except ConfigError as exc:
        raise WhatIfError(str(exc)) from None


# --------------------------------------------------------------------------------------------
# The cluster's objects as a scenario


def _detach(obj: dict[str, Any], service_types: Mapping[str, str]) -> str:
    """Drop the owner references of a pod or PodGroup read from the cluster (its owner is not in
    the simulation, whose controllers would otherwise delete what it owns) and return the owner's
    kind. The service type the scheduler derived from that kind (``podOwnerReferenceToServiceType``)
    is kept as the PodGroup annotation that takes precedence over it."""
    md = obj.setdefault("metadata", {})
    refs = md.pop("ownerReferences", None) or []
    first = refs[0] if isinstance(refs, list) and refs and isinstance(refs[0], Mapping) else {}
    kind = str(first.get("kind") or "")
    stype = service_types.get(kind)
    ann = dict(md.get("annotations") or {})
    if stype and SERVICE_TYPE_ANNOTATION not in ann:
        ann[SERVICE_TYPE_ANNOTATION] = stype
        md["annotations"] = ann
    return kind


def _rebase(value: Any, now: float) -> Any:
    t = parse_time(value)
    return value if t is None else iso(t - now)


def _with_runtime(obj: dict[str, Any], seconds: float | None) -> None:
    """Set the run-time annotation (None: leave the object as it is)."""
    if seconds is None:
        return
    md = obj.setdefault("metadata", {})
    ann = dict(md.get("annotations") or {})
    ann[DURATION_ANNOTATION] = f"{round(max(0.0, seconds), 3)}s"
    md["annotations"] = ann


def _expected(obj: Mapping[str, Any], where: str) -> float | None:
    ann = (obj.get("metadata") or {}).get("annotations") or {}
    raw = ann.get(DURATION_ANNOTATION)
    if raw is None:
        return None
    try:
        return parse_duration(raw, f"{where}: metadata.annotations[{DURATION_ANNOTATION}]")
    except ScenarioError as exc:
        raise WhatIfError(str(exc)) from None


def cluster_objects(
    objects: Iterable[Mapping[str, Any]],
    *,
    now: float,
    default_runtime: float,
    period: float,
    warnings: list[str],
    service_types: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The cluster's objects, ready for the world at t=0 (see the module's notes)."""
    service_types = service_types or {}
    out: list[dict[str, Any]] = []
    left_out: dict[str, int] = {}
    for raw in objects:
        kind = object_kind(raw)
        if kind not in CLUSTER_KINDS:
            if kind not in ("ConfigMap", ""):
                left_out[kind] = left_out.get(kind, 0) + 1
            continue
        obj = copy.deepcopy(dict(raw))
        md = obj.setdefault("metadata", {})
        where = f"{kind} {object_name(obj)}"
        if "creationTimestamp" in md:
            md["creationTimestamp"] = _rebase(md["creationTimestamp"], now)
        owner = _detach(obj, service_types) if kind in ("Pod", "PodGroup") else ""
        if kind == "Pod":
            st = dict(obj.get("status") or {})
            phase = st.get("phase") or "Pending"
            if phase in ("Succeeded", "Failed"):
                continue
            spec = obj.get("spec") or {}
            deleting = parse_time(md.pop("deletionTimestamp", None))
            md.pop("deletionGracePeriodSeconds", None)
            start = parse_time(st.get("startTime")) or parse_time(raw.get("metadata", {}).get("creationTimestamp"))
            if "startTime" in st:
                st["startTime"] = _rebase(st["startTime"], now)
            obj["status"] = st
            expected = _expected(obj, where)
            service = owner in SERVICE_OWNERS
            if deleting is not None and spec.get("nodeName"):
                _with_runtime(obj, max(period, deleting - now))  # holds its node until then
            elif spec.get("nodeName"):
                if expected is not None:
                    elapsed = now - start if start is not None else 0.0
                    _with_runtime(obj, max(period, expected - elapsed))
                elif not service:
                    _with_runtime(obj, default_runtime)
            elif deleting is not None:
                continue  # an unbound pod being deleted is as good as gone
            elif expected is None and not service:
                _with_runtime(obj, default_runtime)
        out.append(obj)
    for kind, n in sorted(left_out.items()):
        warnings.append(f"{n} {kind} object(s) of the cluster are not simulated (pods they own are taken as they are)")
    return out


def added_objects(manifests: Sequence[Manifest], default_runtime: float, warnings: list[str]) -> list[Manifest]:
    """The manifests to add, checked as scenario objects, with ``default_runtime`` on pods (and
    Volcano Job task templates) that have no run time of their own; Deployments run on."""
    out: list[Manifest] = []
    for m in check_objects(manifests, warnings):
        obj = copy.deepcopy(dict(m.obj))
        kind = object_kind(obj)
        if kind == "Pod" and _expected(obj, f"{m.source}: Pod {object_name(obj)}") is None:
            _with_runtime(obj, default_runtime)
        elif kind == "Job":
            job_ann = (obj.get("metadata") or {}).get("annotations") or {}
            for task in (obj.get("spec") or {}).get("tasks") or []:
                tmpl = task.get("template") if isinstance(task, dict) else None
                if isinstance(tmpl, dict) and DURATION_ANNOTATION not in job_ann:
                    tann = (tmpl.get("metadata") or {}).get("annotations") or {}
                    if DURATION_ANNOTATION not in tann:
                        _with_runtime(tmpl, default_runtime)
        out.append(Manifest(m.source, obj))
    return out


# --------------------------------------------------------------------------------------------
# The run


@dataclass
class WhatIf:
    """A what-if run's inputs."""

    objects: list[Mapping[str, Any]]  # the cluster's, as read (any kinds; ConfigMaps ignored)
    added: list[Manifest]
    config: SchedulerConfig
    config_source: str
    now: float  # epoch seconds of the read: t=0
    source: str  # "cluster <server>" or the dump's path
    horizon: float | None = None  # --for; None: until nothing changes any more
    default_runtime: float = 3600.0
    period: float = 1.0
    scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME,)
    warnings: list[str] = field(default_factory=list)


class _Engine(Engine):
    """The simulator's loop, noting every bind and eviction as it is applied."""

    def __init__(self, scenario: Scenario, cluster_pods: set[str], seed: int = 0) -> None:
        super().__init__(scenario, seed)
        self.cluster_pods = cluster_pods
        self.binds: list[dict[str, Any]] = []
        self.evictions: list[dict[str, Any]] = []

    def apply(self, d: Decisions, t: float) -> Applied:
        applied = super().apply(d, t)
        for key, node in applied.bound:
            self.binds.append({"t": round(t, 6), "pod": key, "node": node, "new": key not in self.cluster_pods})
        for key, reason in applied.evicted:
            self.evictions.append({"t": round(t, 6), "pod": key, "reason": reason, "new": key not in self.cluster_pods})
        return applied


def scenario_of(w: WhatIf) -> tuple[Scenario, set[str]]:
    warnings = list(w.warnings)
    args = capacity_card_args(w.config) or {}
    mapping = args.get("podOwnerReferenceToServiceType")
    cluster = cluster_objects(w.objects, now=w.now, default_runtime=w.default_runtime, period=w.period,
                              warnings=warnings, service_types=mapping if isinstance(mapping, Mapping) else {})
    manifests = [Manifest(f"{w.source}: {object_kind(o)} {object_name(o)}", o) for o in cluster]
    try:
        kept = check_objects(manifests, warnings)
        added = added_objects(w.added, w.default_runtime, warnings)
    except ScenarioError as exc:
        raise WhatIfError(str(exc)) from None
    cluster_pods = {_pod_key(m.obj) for m in kept if object_kind(m.obj) == "Pod"}
    sc = Scenario(
        name=f"what-if on {w.source}",
        objects=kept + added,
        config=w.config,
        config_source=f"<{w.config_source}>",
        schedule_period=w.period,
        duration=w.horizon,
        scheduler_names=w.scheduler_names,
        description="the cluster as read at t=0, the added manifests submitted at t=0",
        source=w.source,
        warnings=warnings,
    )
    return sc, cluster_pods


def _pod_key(obj: Mapping[str, Any]) -> str:
    md = obj.get("metadata") or {}
    return f"{md.get('namespace') or 'default'}/{md.get('name')}"


def _added_names(added: Sequence[Manifest]) -> set[tuple[str, str]]:
    out = set()
    for m in added:
        kind = object_kind(m.obj)
        if kind in ("Job", "Deployment", "Pod"):
            md = m.obj.get("metadata") or {}
            out.add((kind, f"{md.get('namespace') or 'default'}/{md.get('name')}"))
    return out


def run_whatif(
    w: WhatIf, seed: int = 0, progress: Progress | None = None,
    prepared: tuple[Scenario, set[str]] | None = None,
) -> SimulationRun:
    """Simulate; the result carries a ``whatif`` section (see ``docs/operations.md``)."""
    sc, cluster_pods = prepared if prepared is not None else scenario_of(w)
    engine = _Engine(sc, cluster_pods, seed)
    sim = engine.run(progress)
    new = _added_names(w.added)
    workloads = [j for j in sim.result["jobs"] if (j["kind"], j["name"]) in new]
    waits = [j["wait"] for j in workloads if j["wait"] is not None]
    sim.result["whatif"] = {
        "source": w.source,
        "read_at": datetime.fromtimestamp(w.now, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "config": w.config_source,
        "default_runtime": w.default_runtime,
        "horizon": w.horizon,
        "added": sorted(f"{k} {n}" for k, n in new),
        "new_workloads": workloads,
        "never_started": sorted(j["name"] for j in workloads if j["started"] is None),
        "max_wait": max(waits) if waits else None,
        "binds": engine.binds[:MAX_LISTED],
        "binds_total": len(engine.binds),
        "evictions": engine.evictions[:MAX_LISTED],
        "evictions_total": len(engine.evictions),
    }
    return sim


def summary_lines(result: Mapping[str, Any]) -> list[str]:
    """What a person asks first: when do my jobs start, where, and who pays for it."""
    wi = result.get("whatif") or {}
    lines = [f"what-if on {wi.get('source')} (read {wi.get('read_at')}, config {wi.get('config')})"]

    def fmt(v: float | None) -> str:
        return "-" if v is None else format_compact(v)

    for j in wi.get("new_workloads", []):
        if j["started"] is None:
            lines.append(f"  {j['kind']} {j['name']} (queue {j['queue']}): does not start within the simulated time")
        else:
            lines.append(f"  {j['kind']} {j['name']} (queue {j['queue']}): starts after {fmt(j['wait'])}")
    new_binds = [b for b in wi.get("binds", []) if b["new"]]
    for b in new_binds[:20]:
        lines.append(f"  bind {b['pod']} -> {b['node']} at t={fmt(b['t'])}")
    if len(new_binds) > 20:
        lines.append(f"  … and {len(new_binds) - 20} more binds of new pods (result.json: whatif.binds)")
    ev = wi.get("evictions", [])
    lines.append(f"  evictions: {wi.get('evictions_total', 0)}")
    for e in ev[:20]:
        lines.append(f"  evict {e['pod']} at t={fmt(e['t'])}: {e['reason']}")
    if len(ev) > 20:
        lines.append(f"  … and {wi.get('evictions_total', 0) - 20} more (result.json: whatif.evictions)")
    return lines


# --------------------------------------------------------------------------------------------
# Inputs: a live cluster or a dump


def load_added(paths: Sequence[str | Path]) -> list[Manifest]:
    try:
        return load_paths(list(paths)) if paths else []
    except InputError as exc:
        raise WhatIfError(str(exc)) from None


def _config(
    config_path: str | Path | None,
    config_map: str | None,
    found: tuple[str, Mapping[str, Any]] | None,
    where: str,
    looked_at: Sequence[str],
) -> tuple[SchedulerConfig, str]:
    """--config FILE wins; else the ConfigMap found (the one named by --config-map, else the
    first of tidesched's and Volcano's that exists); else, with no --config-map, the default
    ``run`` uses (Volcano's built-in), saying so."""
    if config_path is not None:
        try:
            return config_from_file(config_path), Path(config_path).name
        except ConfigError as exc:
            raise WhatIfError(str(exc)) from None
    if found is None:
        if config_map is not None:
            raise WhatIfError(
                f"ConfigMap {config_map} not found in {where}: give the scheduler config with --config FILE, "
                "or name the ConfigMap the scheduler reads with --config-map NAMESPACE/NAME"
            )
        return config_from_file(None), (
            f"the default configuration (Volcano's built-in, as tidesched run uses): no ConfigMap "
            f"{' or '.join(looked_at)} in {where}"
        )
    ref, cm = found
    text = config_from_config_map(cm, ref)
    return parse_cluster_config(text, f"ConfigMap {ref}"), f"ConfigMap {ref}"


def from_dump(
    path: str | Path,
    added: Sequence[str | Path] = (),
    *,
    config_path: str | Path | None = None,
    config_map: str | None = None,
    now: float | None = None,
    **options: Any,
) -> WhatIf:
    """A what-if over a dump (``kubectl get nodes,pods,... -A -o yaml``, a v1 List, or any
    manifests). t=0 is ``now``, by default the dump file's modification time."""
    p = Path(path)
    try:
        objects = [dict(m.obj) for m in load_paths([p])]
    except InputError as exc:
        raise WhatIfError(str(exc)) from None
    refs = (config_map,) if config_map is not None else CONFIG_MAPS
    found = None
    for ref in refs:
        ns, _, name = ref.partition("/")
        for obj in objects:
            md = obj.get("metadata") or {}
            if obj.get("kind") == "ConfigMap" and md.get("name") == name and (md.get("namespace") or "default") == ns:
                found = (ref, obj)
        if found is not None:
            break
    config, source = _config(config_path, config_map, found, str(p), refs)
    return WhatIf(
        objects=objects, added=load_added(added), config=config, config_source=source,
        now=p.stat().st_mtime if now is None else now, source=str(p), **options,
    )


# Reads a live cluster once: (kubeconfig, config_maps=, context=) → (objects, the first of
# config_maps found as (ref, object) or None, the API server's URL). The command line passes
# the Kubernetes mode's reader; the simulator itself never talks to a cluster.
ReadCluster = Callable[..., tuple[list[dict[str, Any]], "tuple[str, dict[str, Any]] | None", str]]


def from_cluster(
    read_cluster: ReadCluster,
    kubeconfig: str | Path | None,
    added: Sequence[str | Path] = (),
    *,
    config_path: str | Path | None = None,
    config_map: str | None = None,
    context: str | None = None,
    **options: Any,
) -> WhatIf:
    """A what-if over the live cluster, read once (read-only) now by ``read_cluster``."""
    added_manifests = load_added(added)  # bad manifests fail before the cluster is read
    now = time.time()
    refs = (config_map,) if config_map is not None else CONFIG_MAPS
    objects, found, server = read_cluster(
        str(kubeconfig) if kubeconfig else None,
        config_maps=() if config_path is not None else refs,
        context=context,
    )
    config, source = _config(config_path, config_map, found, f"the cluster {server}", refs)
    return WhatIf(
        objects=objects, added=added_manifests, config=config, config_source=source, now=now,
        source=f"cluster {server}", **options,
    )
