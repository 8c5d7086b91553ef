"""The simulation loop (RUN-1, SIM-1..4): ``simulate(scenario) -> result``.

One loop over simulated time:

1. clock events due by the next session time fire in order (scenario events, pod completions,
   ends of grace periods, controller timers); after each, the controllers settle;
2. at every multiple of ``schedulePeriod`` a session runs on the world's incremental cache with
   the scenario's scheduler config — the very same ``run_session`` the ``schedule`` command uses;
3. the world applies the decisions, the controllers react, the invariants are checked and a
   step is recorded (when something changed, or every ``recordEvery`` periods);
4. **fast-forward**: when a session changed nothing and nothing else changed the world, the
   next session would see the same snapshot and decide the same, so the clock jumps to the
   period of the next event (at most ``maxIdleGap`` ahead when that is set). When there is
   nothing to schedule at all — no pending pod of ours, no PodGroup Pending or Inqueue — no
   session runs (it could only restate PodGroup phases) and the clock jumps likewise.

The result (see ``docs/simulator.md``) holds no wall-clock values: the same scenario and seed
give byte-identical JSON. Wall time per session is returned beside it in
:class:`SimulationRun` for people and benchmarks.

Why one module of about 700 lines: it is one loop (``Engine``: events, sessions, applying
decisions, recording steps, fast-forward) whose steps share the loop's state; its helpers
(metrics, invariants, world, controllers) are modules of their own already.
"""

from __future__ import annotations

import copy
import gc
import json
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tidesched.framework.decisions import Decisions
from tidesched.framework.reasons import PREEMPT, RECLAIM, evicted_by
from tidesched.model.snapshot import VOLUME_KINDS, build_snapshot
from tidesched.model.state import build_state
from tidesched.scheduler import config_from_file, run_session
from tidesched.sim.clock import Clock
from tidesched.sim.controllers import Controllers
from tidesched.sim.controllers.common import Timer
from tidesched.sim.fragmentation import GpuWorkload, fragmentation_summary, fragmented_gpus, gpu_figures
from tidesched.sim.invariants import RULE_RESTART, RULE_SESSION, InvariantChecker
from tidesched.sim.metrics import Accounting, EventLog, WorkloadTracker, capacity_card_args, mean, percentile
from tidesched.sim.events import Scenario, TimedEvent, object_kind
from tidesched.sim.scenario import load_scenario
from tidesched.sim.topology_metrics import TopologyMetrics
from tidesched.sim.vocabulary import NAMESPACED_KINDS
from tidesched.sim.world import (
    EPOCH,
    Applied,
    PodFinish,
    PodGone,
    World,
    as_map,
    iso,
    meta,
    object_key,
    pod_active,
    pod_node,
    spec,
    split_key,
    status,
    with_meta_map,
    with_section,
)

Progress = Callable[[float, "float | None"], None]
MAX_SIM_TIME = 366 * 86400.0  # an open-ended scenario stops here at the latest
# Steps that carry the fragmentation measure: about this many, spread over the run (more than
# the report's points per series; each costs one pass over the workload mix and the nodes).
FRAGMENTATION_SAMPLES = 800
# Cyclic GC during a run. Chosen when every session left a cycle (the session and its
# plugins' closures) holding a copy of the node table: the command line's thresholds (50,000
# young objects) let a dozen of them pile up, and each young sweep then took ~100 ms (GC 0.9 s
# against 2.5 s over the first 1,500 pods). Sessions are now released (Session.release), so
# that reason is gone, but they still win: the full default trace replay, both settings at the
# same time on one core each, twice with the cores swapped, took 45.9 and 43.7 s with these
# against 48.7 and 44.4 s with the command line's, identical results. Restored when the run ends.
SIM_GC_THRESHOLDS = (3000, 10, 100)


@dataclass
class SimulationRun:
    """A result plus the wall-clock figures that must stay out of it."""

    result: dict[str, Any]
    wall_seconds: float = 0.0
    session_seconds: list[float] = field(default_factory=list)

    @property
    def sessions(self) -> int:
        return len(self.session_seconds)

    @property
    def failed(self) -> bool:
        return bool(self.result["invariants"]["violations"])


def _diff(a: Any, b: Any) -> str:
    """The first difference of two decision parts, for a message."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return f"{k}: {a.get(k)!r}, restarted {b.get(k)!r}"
    if isinstance(a, list) and isinstance(b, list):
        only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        return f"only {only_a[:5]}, restarted only {only_b[:5]}"
    return f"{a!r}, restarted {b!r}"


def _session(snapshot: Any, config: Any, *, scheduler_names: Any, uid: str, now: float, state: Any = None,
             features: Any = None) -> Decisions:
    """The scheduling core; a module attribute so tests can substitute decisions."""
    return run_session(snapshot, config, scheduler_names=scheduler_names, uid=uid, now=now, state=state,
                       features=features)


class Engine:
    def __init__(self, scenario: Scenario, seed: int = 0, *, skip_idle: bool = True) -> None:
        self.sc = scenario
        self.seed = seed
        # False: a session at every period, idle or not (the reference that skipping must match).
        self.skip_idle = skip_idle
        self.config = scenario.config if scenario.config is not None else config_from_file(None)
        self.clock = Clock()
        self.log = EventLog()
        self.world = World(
            self.clock,
            seed=seed,
            scheduler_names=scenario.scheduler_names,
            eviction_grace=scenario.eviction_grace,
            deletion_grace=scenario.deletion_grace,
            duration_jitter=scenario.duration_jitter,
            ignored_provisioners=scenario.ignored_provisioners,
        )
        self.controllers = Controllers(self.world, self.emit, scenario.finished_ttl)
        self.accounting = Accounting(self.world)
        self.gpu_workload = GpuWorkload(self.world)
        args = capacity_card_args(self.config) or {}
        mapping = args.get("podOwnerReferenceToServiceType") or {}
        self.tracker = WorkloadTracker(self.world, mapping if isinstance(mapping, dict) else {})
        self.world.listeners.append(self.log.on_change)
        self.invariants = InvariantChecker(self.world, self.accounting, self.config)
        self.topology = TopologyMetrics(self.world)  # HyperNode figures (sim.topology_metrics)
        self.steps: list[dict[str, Any]] = []
        self.session_seconds: list[float] = []
        self.totals = {
            "pods_bound": 0,
            "pods_evicted": 0,
            "reclaims": 0,
            "preemptions": 0,
            "stale_decisions": 0,
        }
        self._last_sig: dict[str, Any] = {}
        self._last_frag_t = -math.inf
        # PodGroups whose gang timed out (EXT-1): key -> when first reported, and why.
        self.gang_timeouts: dict[str, dict[str, Any]] = {}
        self._last_record_k = -1
        self._stopped = ""

    # -- events -------------------------------------------------------------------------

    def emit(self, kind: str, namespace: str, name: str, type_: str, reason: str, message: str) -> None:
        self.log.add(self.clock.now, kind, namespace, name, type_, reason, message)

    def _warn(self, ev: TimedEvent, message: str) -> None:
        self.emit("Scenario", "", ev.action, "Warning", "ScenarioEventIgnored", f"{ev.source}: {message}")

    def dispatch(self, ev: Any, at: float) -> None:
        if isinstance(ev, TimedEvent):
            self.fire(ev, at)
        elif isinstance(ev, PodFinish):
            self.world.finish_pod(ev.key, ev.phase, ev.exit_code, ev.uid)
        elif isinstance(ev, PodGone):
            self.world.pod_gone(ev)
        elif isinstance(ev, Timer):
            self.controllers.on_timer(ev, at)

    def submit(self, objects: list[Any], now: float, source: str) -> None:
        world = self.world
        for m in objects:
            obj = copy.deepcopy(dict(m.obj))
            kind = object_kind(obj)
            md = dict(obj.get("metadata") or {})
            if kind in NAMESPACED_KINDS:
                md.setdefault("namespace", "default")
            md.setdefault("uid", world.new_uid())
            if now > 0 or not md.get("creationTimestamp"):
                md["creationTimestamp"] = iso(now)
            obj["metadata"] = md
            key = object_key(kind, obj)
            existing = world.get(kind, key)
            if kind == "Pod":
                if existing is not None:
                    self.emit(
                        "Pod",
                        *split_key(key),
                        "Warning",
                        "AlreadyExists",
                        f"{m.source}: Pod {key} exists; ignored",
                    )
                    continue
                st = as_map(obj.get("status"))  # a malformed status is reported by the cache
                if spec(obj).get("nodeName") and st.get("phase", "Pending") in ("Pending", "Running"):
                    st["phase"] = "Running"
                    st.setdefault("startTime", iso(now))
                obj["status"] = st
                world.put("Pod", obj)
                if spec(obj).get("nodeName") and st["phase"] == "Running":
                    world.schedule_finish(key, obj)
            elif kind == "Job" and existing is not None:
                self.emit(
                    "Job",
                    *split_key(key),
                    "Warning",
                    "AlreadyExists",
                    f"{m.source}: Job {key} exists; ignored",
                )
            elif existing is not None and kind in ("Deployment", "ReplicaSet", "PodGroup"):
                # Re-applying keeps identity and status (kubectl apply).
                md["uid"] = meta(existing).get("uid")
                md["creationTimestamp"] = meta(existing).get("creationTimestamp")
                obj["status"] = dict(status(existing)) or obj.get("status", {})
                world.put(kind, obj)
            else:
                world.put(kind, obj)

    def fire(self, ev: TimedEvent, now: float) -> None:
        """Apply one scenario event to the world."""
        world, a = self.world, ev.args
        act = ev.action
        if act in ("submit", "addNode"):
            self.submit(list(a["objects"]), now, ev.source)
            names = ", ".join(
                f"{object_kind(m.obj)} {object_key(object_kind(m.obj), m.obj)}" for m in a["objects"][:5]
            )
            more = f" and {len(a['objects']) - 5} more" if len(a["objects"]) > 5 else ""
            self.emit(
                "Scenario", "", act, "Normal", "Submitted" if act == "submit" else "NodeAdded", names + more
            )
        elif act == "delete":
            kind, key = a["kind"], a["name"]
            if world.get(kind, key) is None:
                self._warn(ev, f"delete: {kind} {key} does not exist")
            elif kind == "Pod":
                world.delete_pod(key, now, "delete")
            elif kind == "Node":
                world.remove_node(key)
            else:
                world.remove(kind, key, "delete")
            self.emit(
                kind,
                *(split_key(key) if "/" in key else ("", key)),
                "Normal",
                "Deleted",
                f"{kind} {key} deleted by the scenario",
            )
        elif act == "scale":
            kind, key, n = a["kind"], a["name"], a["replicas"]
            obj = world.get(kind, key)
            if obj is None:
                self._warn(ev, f"scale: {kind} {key} does not exist")
                return
            before = spec(obj).get("replicas", 1)
            world.put(kind, with_section(obj, "spec", replicas=n))
            verb = "up" if isinstance(before, int) and n > before else "down"
            self.emit(
                kind,
                *split_key(key),
                "Normal",
                "ScalingReplicaSet",
                f"Scaled {verb} {key} from {before} to {n}",
            )
        elif act in ("removeNode", "cordon", "uncordon"):
            for name in a["names"]:
                if act == "removeNode":
                    ok = world.remove_node(name)
                else:
                    ok = world.set_node(name, unschedulable=(act == "cordon"))
                if not ok:
                    self._warn(ev, f"{act}: node {name} does not exist")
                else:
                    self.emit(
                        "Node",
                        "",
                        name,
                        "Normal",
                        {"removeNode": "Removed", "cordon": "Cordoned", "uncordon": "Uncordoned"}[act],
                        f"node {name} {act}",
                    )
        elif act == "setNode":
            ok = world.set_node(
                a["name"],
                labels_change=a["labels"],
                allocatable=a["allocatable"],
                ready=a["ready"],
                unschedulable=a["unschedulable"],
            )
            if not ok:
                self._warn(ev, f"setNode: node {a['name']} does not exist")
            else:
                parts = [f"{k}={v}" for k, v in sorted(a["allocatable"].items())]
                parts += [f"label {k}={v}" for k, v in sorted(a["labels"].items())]
                if a["ready"] is not None:
                    parts.append(f"ready={a['ready']}")
                self.emit("Node", "", a["name"], "Normal", "NodeChanged", "; ".join(parts) or "changed")
        elif act == "setQuota":
            self._set_quota(ev, now)
        elif act == "failPod":
            self._fail_pod(ev)
        elif act == "ungate":
            if self.world.remove_gates(a["pod"], a["gates"]):
                self.emit("Pod", *split_key(a["pod"]), "Normal", "Ungated",
                          f"scheduling gates {', '.join(a['gates']) if a['gates'] else '(all)'} lifted by the scenario")
            else:
                self._warn(ev, f"ungate: pod {a['pod']} does not exist or has none of these gates")
        elif act == "setConfig":
            self.config = a["config"]
            self.invariants.configure(self.config)
            self.emit("Scenario", "", act, "Normal", "ConfigReloaded", f"scheduler config reloaded from {a['source']}")

    def _fail_pod(self, ev: TimedEvent) -> None:
        """``failPod``: a named pod, or the first running pod (name order) of a Deployment or Job."""
        world, a = self.world, ev.args
        if "name" in a:
            if not world.finish_pod(a["name"], "Failed", int(a["exitCode"])):
                self._warn(ev, f"failPod: pod {a['name']} does not exist or has already ended")
            return
        kind = "Deployment" if "deployment" in a else "Job"
        owner = a["deployment"] if kind == "Deployment" else a["job"]
        if kind == "Deployment":
            pods = [pk for rs in world.owned("ReplicaSet", "Deployment", owner) for pk in world.owned_pods("ReplicaSet", rs)]
        else:
            pods = world.owned_pods("Job", owner)
        for pk in sorted(pods):
            pod = world.get("Pod", pk)
            if pod is not None and pod_node(pod) and pod_active(pod) and world.finish_pod(pk, "Failed", int(a["exitCode"])):
                self.emit("Pod", *split_key(pk), "Warning", "PodFailed", f"pod {pk} of {kind} {owner} failed (scenario)")
                return
        self._warn(ev, f"failPod: {kind} {owner} has no running pod")

    def _set_quota(self, ev: TimedEvent, now: float) -> None:
        a = ev.args
        q = self.world.get("Queue", a["queue"])
        if q is None:
            self._warn(ev, f"setQuota: queue {a['queue']} does not exist")
            return
        new: dict[str, Any] = dict(q)
        parts = []
        if "cardQuota" in a:
            cq = a["cardQuota"]
            value = None if cq is None else json.dumps(cq, sort_keys=True, separators=(",", ":"))
            new = with_meta_map(new, "annotations", {"volcano.sh/card.quota": value})
            parts.append(f"card.quota={value}")
        if "capability" in a:
            new = with_section(new, "spec", capability=a["capability"])
            parts.append(f"capability={a['capability']}")
        if a.get("state"):
            new = with_section(new, "status", state=a["state"])
            parts.append(f"state={a['state']}")
        self.world.put("Queue", new)
        self.emit("Queue", "", a["queue"], "Normal", "QuotaChanged", "; ".join(parts))

    def _report(self, violations: list[Any]) -> None:
        for v in violations:
            self.emit("Simulator", "", "invariants", "Warning", "InvariantViolated", f"{v.rule}: {v.message}")

    # -- steps --------------------------------------------------------------------------

    def record_step(self, k: int, t: float, applied: Applied | None, force: bool = False) -> None:
        self.topology.sample(t)
        step = self.accounting.step(t)
        ev = applied.evicted if applied is not None else []
        step["evictions"] = len(ev)
        step["reclaims"] = sum(1 for _, r in ev if evicted_by(r, RECLAIM))
        step["preemptions"] = sum(1 for _, r in ev if evicted_by(r, PREEMPT))
        sig = {key: v for key, v in step.items() if key != "t"}  # compared as values, deeply
        every = self.sc.record_every
        due = every > 0 and k - self._last_record_k >= every
        if self.steps and self.steps[-1]["t"] == step["t"]:
            self._add_gpus(step, force)
            self.steps[-1] = step  # the same instant: keep the latest picture
        elif force or not self.steps or sig != self._last_sig or due:
            self._add_gpus(step, force)
            self.steps.append(step)
            self._last_record_k = k
        self._last_sig = sig

    def _add_gpus(self, step: dict[str, Any], force: bool) -> None:
        """GPU capacity, allocation and demand on every recorded step of a cluster with GPUs;
        the fragmentation measure (a pass over the nodes) on at most about
        FRAGMENTATION_SAMPLES of them, spread over the run (the report shows fewer points)."""
        figures = gpu_figures(self.accounting, self.gpu_workload)
        if not figures["capacity"]:
            return
        t = step["t"]
        if force or t - self._last_frag_t >= max(self.sc.schedule_period, t / FRAGMENTATION_SAMPLES):
            fragmented = fragmented_gpus(self.world.cache.node_table(), self.gpu_workload)
            if fragmented is not None:
                figures["fragmented"] = round(fragmented, 4)
            self._last_frag_t = t
        step["gpus"] = figures

    def run_session(self, n: int, t: float) -> tuple[Decisions | None, float]:
        t0 = time.perf_counter()
        try:
            snapshot, state = self.world.open()
            d = _session(
                snapshot,
                self.config,
                scheduler_names=self.sc.scheduler_names,
                uid=f"session-{n}",
                now=EPOCH + t,
                state=state,
                features=self.sc.feature_gates,
            )
        except Exception as exc:  # noqa: BLE001 - a crash of the core is a finding, reported loudly
            tb = traceback.format_exc(limit=6)
            self.invariants.record(t, RULE_SESSION, f"the scheduling session crashed: {exc!r}\n{tb}")
            return None, time.perf_counter() - t0
        secs = time.perf_counter() - t0
        if self.sc.check_restart:
            self._check_restart(n, t, d)
        return d, secs

    def _check_restart(self, n: int, t: float, d: Decisions) -> None:
        """REL-3: a scheduler restarted now — state rebuilt from the objects alone — decides
        exactly what the running one (on its incremental cache) decided."""
        world = self.world
        objects = [obj for kind in ("Node", "Queue", "PriorityClass", "PodGroup", "Pod", "PodDisruptionBudget",
                                    "ResourceQuota", "Numatopology", *VOLUME_KINDS, "DeviceClass",
                                    "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
                   for _key, obj in world.items(kind)]
        try:
            snapshot = build_snapshot(objects, scheduler_names=self.sc.scheduler_names,
                                      synthesize_podgroups=False, strict_kinds=False,
                                      ignored_provisioners=self.sc.ignored_provisioners)
            fresh = _session(snapshot, self.config, scheduler_names=self.sc.scheduler_names,
                             uid=f"session-{n}", now=EPOCH + t, state=build_state(snapshot, self.sc.scheduler_names),
                             features=self.sc.feature_gates)
        except Exception as exc:  # noqa: BLE001 - reported as the finding it is
            self.invariants.record(t, RULE_RESTART, f"a restarted scheduler crashed: {exc!r}")
            return
        ours, theirs = d.to_json(), fresh.to_json()
        # bind_annotations: the vGPU devices each bind is given (absent when no bind carries any);
        # claims: the DRA devices each bind writes to its claims.
        for part in ("bound", "evicted", "pipelined", "podgroups", "bind_annotations", "ungated", "claims"):
            if ours.get(part, {}) != theirs.get(part, {}):
                mine, other = ours.get(part, {}), theirs.get(part, {})
                self.invariants.record(
                    t, RULE_RESTART,
                    f"a scheduler restarted from the objects decides other {part}: running {_diff(mine, other)}",
                )
                return

    def apply(self, d: Decisions, t: float) -> Applied:
        for e in d.events:
            self.log.add(t, e.kind, e.namespace, e.name, e.type, e.reason, e.message)
            if e.kind == "PodGroup" and e.reason == "GangTimeout":
                self.gang_timeouts.setdefault(
                    f"{e.namespace}/{e.name}", {"podgroup": f"{e.namespace}/{e.name}", "t": t, "message": e.message}
                )
        # Evictions are counted against their workload while the pod still exists.
        for key in sorted(d.evicted):
            self.tracker.evicted(key)
        applied = self.world.apply(d, t)
        for key in applied.ungated:
            self.emit("Pod", *split_key(key), "Normal", "Ungated",
                      "its queue admitted it: Volcano's queue-admission gate was removed")
        self.totals["pods_bound"] += len(applied.bound)
        self.totals["pods_evicted"] += len(applied.evicted)
        self.totals["reclaims"] += sum(1 for _, r in applied.evicted if evicted_by(r, RECLAIM))
        self.totals["preemptions"] += sum(1 for _, r in applied.evicted if evicted_by(r, PREEMPT))
        if applied.stale:
            self.totals["stale_decisions"] += len(applied.stale)
            self.emit(
                "Simulator",
                "",
                "session",
                "Warning",
                "StaleDecision",
                "decisions about pods that changed meanwhile were not applied: "
                + ", ".join(applied.stale[:10]),
            )
        return applied

    def run(self, progress: Progress | None = None) -> SimulationRun:
        previous = gc.get_threshold()
        gc.set_threshold(*SIM_GC_THRESHOLDS)
        try:
            return self._run(progress)
        finally:
            gc.set_threshold(*previous)

    def _run(self, progress: Progress | None) -> SimulationRun:
        wall0 = time.perf_counter()
        sc, clock, world = self.sc, self.clock, self.world
        period = sc.schedule_period
        end = sc.duration
        for w in sc.warnings:
            self.emit("Scenario", "", sc.name, "Warning", "ScenarioWarning", w)
        for note in self.invariants.notes:
            self.emit("Simulator", "", "invariants", "Normal", "InvariantSkipped", note)
        self.submit(sc.objects, 0.0, sc.source)
        self.controllers.reconcile(0.0)
        for ev in sc.sorted_events():
            clock.schedule(ev.at, ev)
        limit = end if end is not None else MAX_SIM_TIME
        k = 0
        n = 0
        last_t = 0.0
        while True:
            t = k * period
            if t > limit + 1e-9:
                break
            while (te := clock.peek_time()) is not None and te <= t + 1e-9:
                at, ev = clock.pop()
                self.dispatch(ev, at)
                self.controllers.reconcile(at)
            clock.advance(t)
            last_t = t
            rev = world.revision
            # Malformed objects are reported when they arrive, whether or not a session runs
            # (the log keeps one event per object and message).
            for e in world.cache.problems():
                self.emit(e.kind, e.namespace, e.name, e.type, e.reason, e.message)
            d: Decisions | None = None
            if self.accounting.has_work() or not self.skip_idle:
                d, secs = self.run_session(n, t)
                n += 1
                self.session_seconds.append(secs)
                if d is None:
                    self._stopped = "session crashed"
                    self.record_step(k, t, None, force=True)
                    break
                applied = self.apply(d, t)
                self.controllers.reconcile(t)
                self._report(self.invariants.check(t, applied, d))
                self.record_step(k, t, applied)
            else:
                # Nothing to schedule: no session (it could only restate PodGroup phases), but
                # what the events changed is still recorded (and the world's rules checked).
                found = self.invariants.check_world(t)
                self.invariants.violations.extend(found)
                self._report(found)
                self.record_step(k, t, None)
            if progress is not None:
                progress(t, end)
            k_next = k + 1
            idle = d is None or (world.revision == rev and not d.bound and not d.evicted)
            if idle and not self.skip_idle and (clock.peek_time() is not None or end is not None):
                pass  # the reference run: the next period's session runs all the same
            elif idle:
                te = clock.peek_time()
                if d is not None and d.wake_at is not None:
                    # A time-based rule (a gang timeout) falls due then: hold a session.
                    wake = d.wake_at - EPOCH
                    te = wake if te is None else min(te, wake)
                gap = k + max(1, math.ceil(sc.max_idle_gap / period)) if sc.max_idle_gap else None
                if te is None:
                    if gap is None or end is None or d is None:
                        break  # nothing will ever change again
                    k_next = gap  # time-dependent plugins still get a session every maxIdleGap
                else:
                    k_target = max(k_next, math.ceil(te / period - 1e-9))
                    k_next = k_target if gap is None else min(k_target, gap)
            k = k_next
        if end is None and clock.peek_time() is not None and not self._stopped:
            self._stopped = f"stopped at the {MAX_SIM_TIME / 86400:.0f}-day limit with events left"
            self.emit("Simulator", "", "runner", "Warning", "TimeLimit", self._stopped)
        final_t = end if end is not None else last_t
        if not self._stopped:
            # Events after the last session up to the end still happen (no session follows).
            while (te := clock.peek_time()) is not None and te <= final_t + 1e-9:
                at, ev = clock.pop()
                self.dispatch(ev, at)
                self.controllers.reconcile(at)
            clock.advance(final_t)
        if not self.steps or self.steps[-1]["t"] < round(final_t, 6):
            self.record_step(int(round(final_t / period)), final_t, None, force=True)
        if progress is not None:
            progress(final_t, end)
        result = self.result(final_t, n)
        return SimulationRun(result, time.perf_counter() - wall0, self.session_seconds)

    # -- result -------------------------------------------------------------------------

    def result(self, duration: float, sessions: int) -> dict[str, Any]:
        jobs = self.tracker.finalize()
        waits = [j["wait"] for j in jobs if j["wait"] is not None]
        models = sorted({m for s in self.steps for m in s["cards"]} | self.accounting.models_seen)
        queues = sorted({q for s in self.steps for q in s["queues"]})
        peak: dict[str, float] = {}
        for s in self.steps:
            for m, c in s["cards"].items():
                if c["capacity"]:
                    peak[m] = max(peak.get(m, 0.0), round(c["allocated"] / c["capacity"], 6))
        phases: dict[str, int] = {}
        for j in jobs:
            phases[f"{j['kind']}:{j['phase']}"] = phases.get(f"{j['kind']}:{j['phase']}", 0) + 1
        completed = sum(
            1
            for j in jobs
            if (j["kind"] == "Job" and j["phase"] == "Completed")
            or (j["kind"] == "Pod" and j["phase"] == "Succeeded")
        )
        summary: dict[str, Any] = {
            **self.totals,
            "jobs_completed": completed,
            "jobs_failed": sum(1 for j in jobs if j["phase"] in ("Failed", "Aborted")),
            "jobs_never_started": sum(1 for j in jobs if j["started"] is None),
            "workload_phases": dict(sorted(phases.items())),
            "mean_wait": mean(waits),
            "p95_wait": percentile(waits, 95),
            "pod_mean_wait": mean(self.tracker.pod_waits),
            "pod_p95_wait": percentile(self.tracker.pod_waits, 95),
            "peak_card_utilisation": dict(sorted(peak.items())),
            **fragmentation_summary(self.steps),
            "sessions": sessions,
            "events_total": self.log.total,
            "events_dropped": self.log.dropped,
            "events_by_reason": dict(sorted(self.log.by_reason.items())),
            "gangs_timed_out": len(self.gang_timeouts),
            **({"topology": topo} if (topo := self.topology.summary()) else {}),
            "config": self._config_name(),
            "stopped": self.sc_stop_reason(),
        }
        events = sorted(self.log.kept, key=lambda e: e["t"])  # stable: same-time order kept
        return {
            "scenario": self.sc.name,
            "seed": self.seed,
            "schedule_period": float(self.sc.schedule_period),
            "duration": round(float(duration), 6),
            "card_models": models,
            "queues": queues,
            "steps": self.steps,
            "jobs": jobs,
            "events": events,
            "gang_timeouts": sorted(self.gang_timeouts.values(), key=lambda g: (g["t"], g["podgroup"])),
            "invariants": {
                "checked_steps": self.invariants.checked_steps,
                "violations": [v.to_dict() for v in self.invariants.violations],
                "notes": list(self.invariants.notes),
            },
            "summary": summary,
            **({"topology": detail} if (detail := self.topology.detail()) else {}),
        }

    def _config_name(self) -> str:
        # The file name only: the result must not depend on where the checkout lives.
        src = self.sc.config_source
        return src if src.startswith("<") else Path(src).name

    def sc_stop_reason(self) -> str:
        return self._stopped or "completed"


def run(
    scenario: Scenario | str | Path,
    *,
    seed: int = 0,
    progress: Progress | None = None,
    config_path: str | Path | None = None,
    skip_idle: bool = True,
) -> SimulationRun:
    """Run a scenario (an object, or a path loaded with :func:`load_scenario`). ``skip_idle=False``
    runs a session at every period even when nothing changed (slow; the reference for tests)."""
    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario, config_path)
    return Engine(sc, seed, skip_idle=skip_idle).run(progress)


def simulate(
    scenario: Scenario | str | Path, *, seed: int = 0, progress: Progress | None = None
) -> dict[str, Any]:
    """The result dict of a simulation (the content of ``result.json``)."""
    return run(scenario, seed=seed, progress=progress).result


def result_json(result: dict[str, Any]) -> str:
    """The canonical text of a result: sorted keys, two-space indent, UTF-8, trailing newline.
    orjson: a 149-day trace's result (about 100 MB) takes a quarter second instead of seven."""
    return orjson.dumps(result, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"


def summary_lines(run_: SimulationRun) -> list[str]:
    """A short text summary for people."""
    r = run_.result
    s = r["summary"]

    def w(v: float | None) -> str:
        if v is None:
            return "-"
        return f"{v:.0f}s" if v < 120 else (f"{v / 60:.1f}min" if v < 7200 else f"{v / 3600:.1f}h")

    days = r["duration"] / 86400
    simulated = f"{days:.1f} days" if days >= 2 else f"{r['duration'] / 3600:.2f} h"
    lines = [
        f"scenario {r['scenario']}: {simulated} simulated, {s['sessions']} sessions, "
        f"{len(r['steps'])} steps recorded, seed {r['seed']}",
        f"pods bound {s['pods_bound']}, evicted {s['pods_evicted']} (reclaim {s['reclaims']}, "
        f"preempt {s['preemptions']}); jobs completed {s['jobs_completed']}, failed {s['jobs_failed']}, "
        f"never started {s['jobs_never_started']}",
        f"wait: mean {w(s['mean_wait'])}, p95 {w(s['p95_wait'])} (pods: mean {w(s['pod_mean_wait'])}, "
        f"p95 {w(s['pod_p95_wait'])})",
    ]
    if s["peak_card_utilisation"]:
        lines.append(
            "peak card utilisation: "
            + ", ".join(f"{m} {v * 100:.0f}%" for m, v in s["peak_card_utilisation"].items())
        )
    if s.get("mean_gpu_allocation") is not None:
        frag = s.get("mean_fragmented_share")
        lines.append(
            f"GPUs: {s['mean_gpu_allocation'] * 100:.1f}% allocated on average"
            + (f", {frag * 100:.1f}% of the unallocated stranded by fragmentation (FGD)" if frag is not None else "")
        )
    if s.get("gangs_timed_out"):
        names = ", ".join(g["podgroup"] for g in r.get("gang_timeouts", [])[:5])
        more = " …" if s["gangs_timed_out"] > 5 else ""
        lines.append(f"gangs timed out: {s['gangs_timed_out']} ({names}{more})")
    viol = r["invariants"]["violations"]
    lines.append(
        f"invariants: {r['invariants']['checked_steps']} steps checked, "
        + ("all held" if not viol else f"{len(viol)} VIOLATED")
    )
    for v in viol[:20]:
        lines.append(f"  t={v['t']:g}s {v['rule']}: {v['message'].splitlines()[0]}")
    if len(viol) > 20:
        lines.append(f"  … and {len(viol) - 20} more (see result.json)")
    if run_.sessions:
        secs = run_.session_seconds
        lines.append(
            f"wall time {run_.wall_seconds:.2f}s; sessions mean {sum(secs) / len(secs) * 1000:.1f} ms, "
            f"max {max(secs) * 1000:.1f} ms"
        )
    return lines
