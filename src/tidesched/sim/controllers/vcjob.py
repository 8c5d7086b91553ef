"""The Volcano Job controller (``batch.volcano.sh/v1alpha1``, SIM-2, volcano-semantics §9/§10): on
submission a PodGroup named like the Job with *all* Job annotations and labels, ``minMember`` =
``minAvailable``, ``minTaskMember`` per task, ``minResources`` of the first ``minAvailable``
pods (tasks by priority), queue and priority class; pods ``<job>-<task>-<index>`` once the
PodGroup has left Pending; lifecycle policies and Volcano's job state machine (see the package
docstring); its network topology and partitions as vcjob_topology says. ``parse_job`` reads and checks a Job.

Why one module of about 700 lines: it is one controller, Volcano's job state machine (phases,
lifecycle policies, retries, pod creation and clean-up), whose transitions read each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidesched.model.objects import GROUP_NAME_ANNOTATION
from tidesched.sim.controllers.vcjob_topology import min_task_member, partition_labels, podgroup_topology
from tidesched.model.resource import Resource
from tidesched.sim.vocabulary import DURATION_ANNOTATION, EXIT_CODE_ANNOTATION
from tidesched.sim.world import (
    FINISHED_POD_PHASES,
    World,
    as_map,
    annotations,
    controller_owner,
    is_deleting,
    labels,
    meta,
    pod_phase,
    spec,
    split_key,
    status,
)
from tidesched.sim.controllers.common import (
    JOB_NAMESPACE_KEY,
    JOB_NAME_KEY,
    JOB_QUEUE_KEY,
    JOB_VERSION_KEY,
    MAX_SIM_REPLICAS,
    PODGROUP_API,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
    TEMPLATE_UID_KEY,
    VOLCANO_JOB_API,
    Emit,
    Timer,
    int_field,
    make_owner_ref,
    resource_list,
    template_request,
)


# Job annotations the vcjob controller copies onto its pods (volcano-semantics §10), plus the
# simulator's own run-time keys so a Job-level duration applies to every pod.
_JOB_TO_POD_ANNOTATIONS = (
    "volcano.sh/preemptable",
    "volcano.sh/cooldown-time",
    "volcano.sh/revocable-zone",
    "volcano.sh/jdb-min-available",
    "volcano.sh/jdb-max-unavailable",
    DURATION_ANNOTATION,
    EXIT_CODE_ANNOTATION,
)

# Volcano Job phases.
PENDING, RUNNING, RESTARTING = "Pending", "Running", "Restarting"
COMPLETING, COMPLETED = "Completing", "Completed"
ABORTING, ABORTED = "Aborting", "Aborted"
TERMINATING, TERMINATED, FAILED = "Terminating", "Terminated", "Failed"
JOB_FINISHED = frozenset({COMPLETED, ABORTED, TERMINATED, FAILED})
JOB_ACTIONS = frozenset(
    {
        "AbortJob",
        "RestartJob",
        "RestartTask",
        "RestartPod",
        "TerminateJob",
        "CompleteJob",
        "ResumeJob",
        "SyncJob",
    }
)
JOB_EVENTS = frozenset(
    {
        "*",
        "PodFailed",
        "PodEvicted",
        "PodPending",
        "PodRunning",
        "Unknown",
        "TaskCompleted",
        "TaskFailed",
        "OutOfSync",
        "CommandIssued",
        "JobUpdated",
    }
)
# Pod removals that are news for a Job (Volcano's deletePod ⇒ PodEvicted); the controller's
# own kills and clean-up are not.
_EVICTING_CAUSES = frozenset({"evict", "node", "delete"})


@dataclass(frozen=True, slots=True)
class TaskSpec:
    name: str
    replicas: int
    min_available: int | None
    template: Mapping[str, Any]
    policies: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class JobSpec:
    tasks: tuple[TaskSpec, ...]
    min_available: int
    min_success: int | None
    max_retry: int
    queue: str
    scheduler_name: str
    priority_class: str
    policies: tuple[Mapping[str, Any], ...]
    ttl: float | None

    @property
    def total_replicas(self) -> int:
        return sum(t.replicas for t in self.tasks)


def parse_job(obj: Mapping[str, Any]) -> JobSpec:
    """Read a Volcano Job spec; raises ValueError naming the field (the admission webhook's
    checks: tasks present and uniquely named, replicas ≥ 0, minAvailable ≤ replicas)."""
    s = spec(obj)
    raw_tasks = s.get("tasks")
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise ValueError("spec.tasks: a Job needs at least one task")
    tasks: list[TaskSpec] = []
    seen: set[str] = set()
    for i, t in enumerate(raw_tasks):
        if not isinstance(t, Mapping):
            raise ValueError(f"spec.tasks[{i}]: expected a mapping")
        name = t.get("name") or (f"task{i}" if len(raw_tasks) > 1 else "default")
        if not isinstance(name, str):
            raise ValueError(f"spec.tasks[{i}].name: expected a string")
        if name in seen:
            raise ValueError(f"spec.tasks[{i}].name: duplicate task name {name!r}")
        seen.add(name)
        try:
            replicas = int_field(t.get("replicas"), 1)
            task_min = t.get("minAvailable")
            task_min = None if task_min is None else int_field(task_min, 0)
        except ValueError as exc:
            raise ValueError(f"spec.tasks[{i}]: {exc}") from None
        if replicas < 0:
            raise ValueError(f"spec.tasks[{i}].replicas: must not be negative")
        if replicas > MAX_SIM_REPLICAS:
            raise ValueError(f"spec.tasks[{i}].replicas: {replicas} is more than the simulator runs ({MAX_SIM_REPLICAS})")
        if task_min is not None and not 0 <= task_min <= replicas:
            raise ValueError(f"spec.tasks[{i}].minAvailable: must be between 0 and replicas ({replicas})")
        tmpl = t.get("template") or {}
        if not isinstance(tmpl, Mapping):
            raise ValueError(f"spec.tasks[{i}].template: expected a pod template")
        pols = t.get("policies") or []
        if not isinstance(pols, list):
            raise ValueError(f"spec.tasks[{i}].policies: expected a list")
        _check_policies(pols, f"spec.tasks[{i}].policies")
        tasks.append(TaskSpec(name, replicas, task_min, tmpl, tuple(pols)))
    total = sum(t.replicas for t in tasks)
    try:
        min_available = int_field(s.get("minAvailable"), total)
        min_success = s.get("minSuccess")
        min_success = None if min_success is None else int_field(min_success, 0)
        max_retry = int_field(s.get("maxRetry"), 3)
    except ValueError as exc:
        raise ValueError(f"spec: {exc}") from None
    if not 0 <= min_available <= total:
        raise ValueError(
            f"spec.minAvailable: {min_available} must be between 0 and the total replicas ({total})"
        )
    if min_success is not None and not 1 <= min_success <= total:
        raise ValueError(f"spec.minSuccess: must be between 1 and the total replicas ({total})")
    pols = s.get("policies") or []
    if not isinstance(pols, list):
        raise ValueError("spec.policies: expected a list")
    _check_policies(pols, "spec.policies")
    ttl = s.get("ttlSecondsAfterFinished")
    return JobSpec(
        tasks=tuple(tasks),
        min_available=min_available,
        min_success=min_success,
        max_retry=max_retry,
        queue=str(s.get("queue") or "default"),
        scheduler_name=str(s.get("schedulerName") or "volcano"),
        priority_class=str(s.get("priorityClassName") or ""),
        policies=tuple(pols),
        ttl=float(ttl) if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) else None,
    )


def _check_policies(pols: list[Any], where: str) -> None:
    for j, p in enumerate(pols):
        if not isinstance(p, Mapping):
            raise ValueError(f"{where}[{j}]: expected a mapping")
        action = p.get("action")
        if action not in JOB_ACTIONS:
            raise ValueError(
                f"{where}[{j}].action: unknown action {action!r} (known: {', '.join(sorted(JOB_ACTIONS))})"
            )
        events = _policy_events(p)
        for e in events:
            if e not in JOB_EVENTS:
                raise ValueError(
                    f"{where}[{j}]: unknown event {e!r} (known: {', '.join(sorted(JOB_EVENTS))})"
                )
        if not events and p.get("exitCode") is None:
            raise ValueError(f"{where}[{j}]: a policy needs an event, events or exitCode")
        if events and p.get("exitCode") is not None:
            raise ValueError(f"{where}[{j}]: give events or exitCode, not both")
        if p.get("exitCode") == 0:
            raise ValueError(f"{where}[{j}].exitCode: 0 is not an error code")


def _policy_events(p: Mapping[str, Any]) -> list[str]:
    events: list[str] = []
    if p.get("event"):
        events.append(str(p["event"]))
    raw = p.get("events")
    if isinstance(raw, list):
        events.extend(str(e) for e in raw)
    return events


def match_policy(job: JobSpec, event: str, task: str, exit_code: int | None) -> str:
    """The action for ``event`` (Volcano applyPolicies): the task's policies, then the job's;
    a policy matches by event (or ``*``) or, for a failed pod, by exit code."""
    candidates: list[Mapping[str, Any]] = []
    for t in job.tasks:
        if t.name == task:
            candidates.extend(t.policies)
            break
    for group in (candidates, list(job.policies)):
        for p in group:
            events = _policy_events(p)
            if events and (event in events or "*" in events):
                return str(p["action"])
            code = p.get("exitCode")
            if code is not None and exit_code is not None and code == exit_code:
                return str(p["action"])
    return "SyncJob"


def _exit_code(pod: Mapping[str, Any]) -> int | None:
    for cs in status(pod).get("containerStatuses") or []:
        try:
            return int(cs["state"]["terminated"]["exitCode"])
        except (KeyError, TypeError, ValueError):
            continue
    return None


class VolcanoJobController:
    def __init__(self, world: World, emit: Emit, finished_ttl: float) -> None:
        self.world = world
        self.emit = emit
        self.finished_ttl = finished_ttl
        self.dirty: set[str] = set()
        # job -> [(event, task, exit code, job version of the pod, pod key)]
        self.events: dict[str, list[tuple[str, str, int | None, int, str]]] = {}
        self._specs: dict[str, tuple[Mapping[str, Any], JobSpec | None]] = {}

    # -- change routing ---------------------------------------------------------------------

    def on_pod(
        self, key: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, cause: str
    ) -> None:
        pod = new if new is not None else old
        assert pod is not None
        owner = controller_owner(pod)
        if owner is None or owner[0] != "Job":
            return
        ns = split_key(key)[0]
        job_key = f"{ns}/{owner[1]}"
        self.dirty.add(job_key)
        ann = annotations(pod)
        task = str(ann.get(TASK_SPEC_KEY) or "")
        try:
            version = int(str(ann.get(JOB_VERSION_KEY, "0")))
        except ValueError:
            version = 0
        if new is None:
            if cause in _EVICTING_CAUSES and pod_phase(pod) not in FINISHED_POD_PHASES:
                self.events.setdefault(job_key, []).append(("PodEvicted", task, None, version, key))
            return
        old_phase = pod_phase(old) if old is not None else "Pending"
        phase = pod_phase(new)
        if phase != old_phase:
            if phase == "Failed":
                self.events.setdefault(job_key, []).append(("PodFailed", task, _exit_code(new), version, key))
            elif phase == "Succeeded":
                self.events.setdefault(job_key, []).append(("PodSucceeded", task, None, version, key))

    def on_podgroup(self, key: str, old: Mapping[str, Any] | None, pg: Mapping[str, Any] | None) -> None:
        if pg is None:
            # Deleted under a live Job (not by clean-up): the next sync creates it again, as
            # Volcano's job controller does on its resync.
            owner = controller_owner(old) if old is not None else None
            if owner is not None and owner[0] == "Job":
                self.dirty.add(f"{split_key(key)[0]}/{owner[1]}")
            return
        owner = controller_owner(pg)
        if owner is not None and owner[0] == "Job":
            self.dirty.add(f"{split_key(key)[0]}/{owner[1]}")
            was = status(old).get("phase") if old is not None else None
            if status(pg).get("phase") == "Unknown" and was != "Unknown":  # the Unknown event, once
                self.events.setdefault(f"{split_key(key)[0]}/{owner[1]}", []).append(
                    ("Unknown", "", None, -1, "")
                )

    # -- reconcile --------------------------------------------------------------------------

    def spec_of(self, key: str, job: Mapping[str, Any]) -> JobSpec | None:
        hit = self._specs.get(key)
        if hit is not None and hit[0] is spec(job):
            return hit[1]
        try:
            js: JobSpec | None = parse_job(job)
        except ValueError as exc:
            ns, name = split_key(key)
            self.emit(
                "Job", ns, name, "Warning", "JobRejected", f"Job {key} is invalid and is not run: {exc}"
            )
            js = None
        self._specs[key] = (spec(job), js)
        return js

    def reconcile(self, key: str, now: float) -> None:
        world = self.world
        job = world.get("Job", key)
        if job is None:
            self._cleanup_deleted(key, now)
            return
        js = self.spec_of(key, job)
        st = dict(status(job))
        state = as_map(st.get("state"))
        phase = state.get("phase") or ""
        if js is None:
            if phase != FAILED:
                state["phase"] = FAILED
                st["state"] = state
                self._write_status(key, job, st)
            return
        ns, name = split_key(key)
        if not phase:
            self._create_podgroup(key, job, js, now)
            phase = PENDING
            st.update(retryCount=0, version=0, minAvailable=js.min_available)
            self.emit(
                "Job",
                ns,
                name,
                "Normal",
                "Created",
                f"Job {key} created; PodGroup {name} created (minMember {js.min_available})",
            )
        ctx = _JobCtx(key, job, js, st, phase)
        for event, task, exit_code, version, pod_key in self.events.pop(key, []):
            self._handle_event(ctx, event, task, exit_code, version, pod_key, now)
        self._sync(ctx, now)
        if ctx.phase != phase:
            self.emit(
                "Job",
                ns,
                name,
                "Warning" if ctx.phase in (FAILED, ABORTED) else "Normal",
                ctx.phase,
                f"Job {key}: {phase} → {ctx.phase}" + (f" ({ctx.why})" if ctx.why else ""),
            )
        state["phase"] = ctx.phase
        st["state"] = state
        self._write_status(key, job, st)

    def _write_status(self, key: str, job: Mapping[str, Any], st: dict[str, Any]) -> None:
        if st != status(job):
            new = dict(job)
            new["status"] = st
            self.world.put("Job", new, "controller")

    def _create_podgroup(self, key: str, job: Mapping[str, Any], js: JobSpec, now: float) -> None:
        ns, name = split_key(key)
        if self.world.get("PodGroup", key) is not None:
            return
        raw_tasks = {t.get("name"): t for t in spec(job).get("tasks") or [] if isinstance(t, Mapping)}
        mtm = {
            t.name: (t.min_available if t.min_available is not None
                     else min_task_member(raw_tasks.get(t.name) or {}, t.replicas) or t.replicas)
            for t in js.tasks
        }
        pg_spec: dict[str, Any] = {
            "minMember": js.min_available,
            "minTaskMember": mtm,
            "queue": js.queue,
            "minResources": resource_list(self._min_resources(js)),
        }
        if js.priority_class:
            pg_spec["priorityClassName"] = js.priority_class
        pg_spec.update(podgroup_topology(spec(job)))
        m = meta(job)
        pg = {
            "apiVersion": PODGROUP_API,
            "kind": "PodGroup",
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": self.world.new_uid(),
                "annotations": dict(annotations(job)),  # all Job annotations (volcano-semantics §10)
                "labels": dict(labels(job)),
                "ownerReferences": [make_owner_ref(VOLCANO_JOB_API, "Job", job)],
                "creationTimestamp": m.get("creationTimestamp"),
            },
            "spec": pg_spec,
            "status": {"phase": "Pending"},
        }
        self.world.put("PodGroup", pg)

    def _min_resources(self, js: JobSpec) -> Resource:
        """Requests of the first minAvailable pods, tasks by priority (Volcano
        calcPGMinResources)."""
        pcs = {k: v for k, v in self.world.objects["PriorityClass"].items()}

        def prio(t: TaskSpec) -> int:
            pc = str(spec(t.template).get("priorityClassName") or "")
            try:
                return int(pcs[pc].get("value", 0)) if pc in pcs else 0
            except (TypeError, ValueError):
                return 0

        total = Resource()
        count = 0
        for t in sorted(js.tasks, key=prio, reverse=True):
            req = template_request(spec(t.template))
            for _ in range(t.replicas):
                if count >= js.min_available:
                    return total
                total.add(req)
                count += 1
        return total

    def _pods(self, key: str) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for pk in self.world.owned_pods("Job", key):
            p = self.world.get("Pod", pk)
            if p is not None:
                out.append((pk, p))
        return out

    def _handle_event(
        self,
        ctx: _JobCtx,
        event: str,
        task: str,
        exit_code: int | None,
        version: int,
        pod_key: str,
        now: float,
    ) -> None:
        js = ctx.spec
        if event == "PodSucceeded":
            event = "TaskCompleted" if self._task_completed(ctx.key, js, task) else "OutOfSync"
        if event == "OutOfSync" or (version >= 0 and version < int(ctx.status.get("version", 0))):
            action = "SyncJob"  # stale events from pods of an earlier run only sync
        else:
            action = match_policy(js, event, task, exit_code)
        if action != "SyncJob":
            ns, name = split_key(ctx.key)
            self.emit(
                "Job",
                ns,
                name,
                "Normal",
                "ExecuteAction",
                f"Start to execute action {action} for event {event}" + (f" of task {task}" if task else ""),
            )
        self._act(ctx, action, task, pod_key, now, event)

    def _task_completed(self, key: str, js: JobSpec, task: str) -> bool:
        replicas = next((t.replicas for t in js.tasks if t.name == task), 0)
        if replicas <= 0:
            return False
        done = sum(
            1
            for _, p in self._pods(key)
            if annotations(p).get(TASK_SPEC_KEY) == task and pod_phase(p) == "Succeeded"
        )
        return done >= replicas

    def _act(self, ctx: _JobCtx, action: str, task: str, pod_key: str, now: float, event: str) -> None:
        phase = ctx.phase
        if phase in JOB_FINISHED:
            if action == "ResumeJob" and phase == ABORTED:
                ctx.bump_retry("job")
                ctx.move(RESTARTING, "resumed")
            return
        if phase not in (PENDING, RUNNING):
            return  # Restarting/Aborting/Completing/Terminating only sync
        if action == "AbortJob":
            ctx.move(ABORTING, event)
            self._kill(ctx, now, keep_finished=True)
        elif action == "RestartJob":
            ctx.bump_retry("job")
            ctx.move(RESTARTING, event)
            self._kill(ctx, now, keep_finished=False)
        elif action == "RestartTask":
            ctx.bump_retry("task")
            ctx.move(RESTARTING, event)
            self._kill(ctx, now, keep_finished=False, task=task)
        elif action == "RestartPod":
            ctx.bump_retry("pod")
            ctx.move(RESTARTING, event)
            if pod_key and self.world.get("Pod", pod_key) is not None:
                self.world.delete_pod(pod_key, now, "kill")
        elif action == "TerminateJob":
            ctx.move(TERMINATING, event)
            self._kill(ctx, now, keep_finished=True)
        elif action == "CompleteJob":
            ctx.move(COMPLETING, event)
            self._kill(ctx, now, keep_finished=True)

    def _kill(self, ctx: _JobCtx, now: float, *, keep_finished: bool, task: str | None = None) -> None:
        for pk, p in self._pods(ctx.key):
            if keep_finished and pod_phase(p) in FINISHED_POD_PHASES:
                continue
            if task is not None and annotations(p).get(TASK_SPEC_KEY) != task:
                continue
            self.world.delete_pod(pk, now, "kill")

    def _counts(self, key: str) -> dict[str, int]:
        c = {"pending": 0, "running": 0, "succeeded": 0, "failed": 0, "terminating": 0}
        for _, p in self._pods(key):
            if is_deleting(p):
                c["terminating"] += 1
                continue
            ph = pod_phase(p)
            if ph == "Running":
                c["running"] += 1
            elif ph == "Succeeded":
                c["succeeded"] += 1
            elif ph == "Failed":
                c["failed"] += 1
            else:
                c["pending"] += 1
        return c

    def _sync(self, ctx: _JobCtx, now: float) -> None:
        js, key = ctx.spec, ctx.key
        if ctx.phase in (PENDING, RUNNING):
            pg = self.world.get("PodGroup", key)
            pg_phase = str(status(pg).get("phase") or "") if pg is not None else ""
            if pg is None:
                self._create_podgroup(key, ctx.job, js, now)
            elif pg_phase not in ("", "Pending"):
                self._create_pods(ctx, now)
        c = self._counts(key)
        total = js.total_replicas
        if ctx.phase == PENDING:
            if c["running"] + c["succeeded"] + c["failed"] >= js.min_available and total > 0:
                ctx.move(RUNNING, "minAvailable pods running")
        if ctx.phase == RUNNING:
            if js.min_success is not None and c["succeeded"] >= js.min_success:
                ctx.move(COMPLETED, f"{c['succeeded']} pods succeeded")
            elif total and c["succeeded"] + c["failed"] == total:
                ctx.move(self._finished_phase(key, js, c), "all pods finished")
            elif c["pending"] > total - js.min_available:
                ctx.move(PENDING, "pods pending")
        elif ctx.phase == RESTARTING:
            if ctx.status.get("restartTarget", "job") == "job":
                self._kill(ctx, now, keep_finished=False)
            c = self._counts(key)
            if int(ctx.status.get("retryCount", 0)) >= js.max_retry:
                self._kill(ctx, now, keep_finished=False)
                ctx.move(FAILED, f"restarted {ctx.status.get('retryCount')} times (maxRetry {js.max_retry})")
            elif total - c["terminating"] >= js.min_available:
                ctx.move(PENDING, "restarted")
                self._sync(ctx, now)
                return
        elif ctx.phase in (ABORTING, COMPLETING, TERMINATING):
            self._kill(ctx, now, keep_finished=True)
            c = self._counts(key)
            if c["pending"] == 0 and c["running"] == 0 and c["terminating"] == 0:
                ctx.move({ABORTING: ABORTED, COMPLETING: COMPLETED, TERMINATING: TERMINATED}[ctx.phase], "")
        if ctx.phase in JOB_FINISHED:
            self._kill(ctx, now, keep_finished=True)
            c = self._counts(key)
            if c["terminating"] == 0 and c["pending"] == 0 and c["running"] == 0:
                ttl = js.ttl if js.ttl is not None else self.finished_ttl
                if ttl <= 0:
                    self.gc(key)
                elif not ctx.status.get("gcScheduled"):
                    ctx.status["gcScheduled"] = True
                    self.world.clock.after(ttl, Timer("job-gc", key))
        ctx.status.update(c)

    def _finished_phase(self, key: str, js: JobSpec, c: Mapping[str, int]) -> str:
        if js.min_available >= sum((t.min_available or 0) for t in js.tasks):
            for t in js.tasks:
                if t.min_available is None:
                    continue
                done = sum(
                    1
                    for _, p in self._pods(key)
                    if annotations(p).get(TASK_SPEC_KEY) == t.name and pod_phase(p) == "Succeeded"
                )
                if done < t.min_available:
                    return FAILED
        if js.min_success is not None and c["succeeded"] < js.min_success:
            return FAILED
        return COMPLETED if c["succeeded"] >= js.min_available else FAILED

    def _create_pods(self, ctx: _JobCtx, now: float) -> None:
        job, js, key = ctx.job, ctx.spec, ctx.key
        ns, job_name = split_key(key)
        version = int(ctx.status.get("version", 0))
        job_ann = annotations(job)
        job_labels = labels(job)
        for t in js.tasks:
            tmeta = meta(t.template)
            tspec = dict(spec(t.template))
            tspec.setdefault("schedulerName", js.scheduler_name)
            if js.priority_class:
                tspec.setdefault("priorityClassName", js.priority_class)
            for i in range(t.replicas):
                name = f"{job_name}-{t.name}-{i}"
                pk = f"{ns}/{name}"
                if self.world.get("Pod", pk) is not None:
                    continue
                ann = as_map(tmeta.get("annotations"))
                for k in _JOB_TO_POD_ANNOTATIONS:
                    if k in job_ann and k not in ann:
                        ann[k] = job_ann[k]
                ann.update(
                    {
                        GROUP_NAME_ANNOTATION: job_name,
                        JOB_NAME_KEY: job_name,
                        JOB_VERSION_KEY: str(version),
                        JOB_QUEUE_KEY: js.queue,
                        TASK_SPEC_KEY: t.name,
                        TASK_INDEX_KEY: str(i),
                        TEMPLATE_UID_KEY: f"{job_name}-{t.name}",
                    }
                )
                lab = as_map(tmeta.get("labels"))
                if "volcano.sh/preemptable" in job_labels:
                    lab.setdefault("volcano.sh/preemptable", job_labels["volcano.sh/preemptable"])
                lab.update(
                    {
                        JOB_NAME_KEY: job_name,
                        JOB_NAMESPACE_KEY: ns,
                        JOB_QUEUE_KEY: js.queue,
                        TASK_SPEC_KEY: t.name,
                        TASK_INDEX_KEY: str(i),
                        **partition_labels(spec(job), t.name, i),
                    }
                )
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "annotations": ann,
                        "labels": lab,
                        "ownerReferences": [make_owner_ref(VOLCANO_JOB_API, "Job", job)],
                    },
                    "spec": tspec,
                    "status": {"phase": "Pending"},
                }
                self.world.create_pod(pod, now)

    def _cleanup_deleted(self, key: str, now: float) -> None:
        """The Job object was deleted: its pods and PodGroup go (owner-reference GC)."""
        self.events.pop(key, None)
        for pk, _p in self._pods(key):
            self.world.delete_pod(pk, now, "kill")
        if not self._pods(key):
            pg = self.world.get("PodGroup", key)
            if pg is not None and (controller_owner(pg) or ("", ""))[0] == "Job":
                self.world.remove("PodGroup", key, "gc")

    def gc(self, key: str) -> None:
        """Clean-up of a finished Job (``ttlSecondsAfterFinished``): its leftover finished pods
        and its PodGroup are removed; the Job object stays as the record of the run."""
        for pk, _p in self._pods(key):
            self.world.remove("Pod", pk, "gc")
        if self.world.get("PodGroup", key) is not None:
            self.world.remove("PodGroup", key, "gc")


class _JobCtx:
    """One reconcile pass over a Job: its spec, its status being built, its phase."""

    __slots__ = ("key", "job", "spec", "status", "phase", "why")

    def __init__(self, key: str, job: Mapping[str, Any], js: JobSpec, st: dict[str, Any], phase: str) -> None:
        self.key, self.job, self.spec, self.status, self.phase = key, job, js, st, phase
        self.why = ""

    def move(self, phase: str, why: str) -> None:
        if phase != self.phase:
            self.phase = phase
            self.why = why

    def bump_retry(self, target: str = "job") -> None:
        self.status["retryCount"] = int(self.status.get("retryCount", 0)) + 1
        self.status["version"] = int(self.status.get("version", 0)) + 1
        self.status["restartTarget"] = target
