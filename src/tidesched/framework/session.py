"""One scheduling cycle: snapshot + config → decisions (SES-1..3, RUN-4).

The Session builds the per-session views (jobs, queues, the node table), lets the configured
plugins register their hooks (combined per tier in :mod:`~tidesched.framework.hooks`, Volcano's
``session_plugins.go``), provides the task-moving primitives Statements use, and on close
computes PodGroup phases, queue status and events. It never does I/O, and it knows no action:
``scheduler.run_actions`` runs the configured ones over it and closes it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from typing import Any, Callable, Sequence

import numpy as np

from tidesched.framework.config import SchedulerConfig
from tidesched.framework.decisions import Decisions, FitErrors
from tidesched.framework.features import FeatureGates
from tidesched.framework.hooks import SessionHooks
from tidesched.framework.plugin import Plugin, PredicateResult
from tidesched.model.dra.ledger import ClaimWrite
from tidesched.framework.topology import SessionTopology
from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo
from tidesched.model.problems import Event
from tidesched.model.resource import Resource
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME, ClusterSnapshot
from tidesched.model.state import SessionState, build_state, class_priority
from tidesched.model.volumes import VolumePlan
from tidesched.model.status import (
    ALLOCATED_STATUSES,
    PodGroupPhase,
    TaskStatus,
)

_SCHEDULED = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.FAILED, TaskStatus.SUCCEEDED})
_COMPLETED = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})
# Statuses read for every job at close, bound once (an enum member lookup costs more than the
# dict read it keys).
_PENDING, _PIPELINED, _ALLOCATED = TaskStatus.PENDING, TaskStatus.PIPELINED, TaskStatus.ALLOCATED
_RUNNING, _BOUND, _RELEASING = TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.RELEASING
_SUCCEEDED, _FAILED = TaskStatus.SUCCEEDED, TaskStatus.FAILED
_REPORTED = (_PENDING, _PIPELINED, _ALLOCATED)  # the tasks RecordJobStatusEvent reports on
_WAITING_PHASES = (PodGroupPhase.PENDING, PodGroupPhase.INQUEUE, PodGroupPhase.UNKNOWN)


class Session(SessionHooks):
    def __init__(
        self,
        snapshot: ClusterSnapshot,
        config: SchedulerConfig,
        *,
        plugins: Mapping[str, type[Plugin]],
        scheduler_names: Sequence[str] = (DEFAULT_SCHEDULER_NAME,),
        uid: str = "session",
        now: float = 0.0,
        state: SessionState | None = None,
        features: FeatureGates | None = None,
    ) -> None:
        """Open on ``state`` when a cache made it (its infos are this session's to change),
        else on infos built afresh from ``snapshot``. ``plugins``: the plugin classes by
        config name (``scheduler.PLUGINS``); ``features``: the feature gates (``--feature-gates``)."""
        self.uid = uid
        self.now = now
        self.config = config
        self.features = features if features is not None else FeatureGates()
        self.tiers = config.tiers
        if state is None:
            state = build_state(snapshot, scheduler_names)
        self.snapshot = snapshot
        self.events: list[Event] = list(state.events)
        self.priority_classes = state.priority_classes
        self.default_priority = state.default_priority
        self.queues: dict[str, QueueInfo] = state.queues
        self.jobs: dict[str, JobInfo] = state.jobs
        self.tasks: dict[str, TaskInfo] = state.tasks
        self.table = state.table
        # Row caches carry over from the cluster cache's table under the same config.
        self.table.carry_caches(config)
        self.node_index = self.table.index
        self.total_resource = self.table.totals()
        self.topology = SessionTopology(state.hypernodes, self.table, self.jobs, state.domains)
        self.events.extend(self.topology.events)

        self._empty_registries()

        # Decisions.
        self.bound: dict[str, str] = {}
        self.evicted: dict[str, str] = {}
        self.bound_tasks: list[TaskInfo] = []
        self.on_dispatch: Callable[[str, str], None] | None = None  # (pod key, node): bind it now
        # A plugin's annotations for a task's binding (deviceshare: its vGPU devices), made at
        # dispatch, before on_dispatch, so that a world binding at once writes them with it.
        self.annotate_bind: Callable[[TaskInfo], dict[str, str] | None] | None = None
        self.bind_annotations: dict[str, dict[str, str]] = {}
        self.claim_writes: dict[str, list[ClaimWrite]] = {}
        # What a task's binding writes first (the predicates' VolumeBinding PreBind: PVs bound to
        # claims, claims given the node to provision on), made at dispatch as annotate_bind is.
        self.plan_volumes: Callable[[TaskInfo], VolumePlan | None] | None = None
        self.volume_bindings: dict[str, VolumePlan] = {}
        self.pod_condition_reasons: dict[str, str] = {}
        # Volcano's task transaction context, for the pods' nominatedNodeName at close
        # (nominations()): the tasks last pipelined where preempt or reclaim evicted for them
        # (EvictionOccurred), and what a discarded statement left its tasks (LastTransaction:
        # status, node, EvictionOccurred), forgotten when a statement holding them commits.
        self.eviction_occurred: set[str] = set()
        self.last_tx: dict[str, tuple[TaskStatus, str, bool]] = {}
        self.ungated: dict[str, None] = {}  # pods whose queue-admission gate goes, in order (framework.gates)
        # PodGroups a plugin already gave their own Warning this session (GangTimeout): close
        # adds no generic "Unschedulable" event for them.
        self.podgroups_warned: set[str] = set()
        self.wake_at: float | None = None

        self.plugins: dict[str, Plugin] = {}
        for tier in self.tiers:
            for opt in tier.plugins:
                cls = plugins[opt.name]
                plugin = cls(opt.args)
                self.plugins[opt.name] = plugin
        # Seconds each plugin spent opening (both its open hooks) and closing this session, as
        # Volcano times OnSessionOpen/OnSessionClose for its plugin latency metric: per plugin
        # and session, never per hook call, so the timing costs nothing measurable.
        self.plugin_open_seconds: dict[str, float] = {}
        self.plugin_close_seconds: dict[str, float] = {}
        for name, plugin in self.plugins.items():
            t0 = time.perf_counter()
            plugin.before_session_open(self)
            self.plugin_open_seconds[name] = time.perf_counter() - t0
        for name, plugin in self.plugins.items():
            t0 = time.perf_counter()
            plugin.on_session_open(self)
            self.plugin_open_seconds[name] += time.perf_counter() - t0

    # -- helpers ------------------------------------------------------------------------

    def _priority_of_class(self, name: str) -> int:
        return class_priority(name, self.priority_classes, self.default_priority)

    def event(self, kind: str, namespace: str, name: str, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(kind, namespace, name, type_, reason, message))

    def wake(self, at: float) -> None:
        """A time-based rule falls due at ``at`` (see ``Decisions.wake_at``)."""
        if at > self.now and (self.wake_at is None or at < self.wake_at):
            self.wake_at = at

    def job_of(self, task: TaskInfo) -> JobInfo | None:
        return self.jobs.get(task.job)

    def node_tasks(self, node_name: str) -> list[TaskInfo]:
        i = self.table.index.get(node_name)
        return [] if i is None else list(self.table.tasks[i].values())

    # -- task moves (the one place node, job and task state change) ---------------------

    def move_task(self, task: TaskInfo, status: TaskStatus, node_name: str) -> None:
        table = self.table
        old_i = table.index.get(task.node_name) if task.node_name else None
        if old_i is not None and task.uid in table.tasks[old_i]:
            table.remove_task(old_i, task)
        job = self.jobs.get(task.job)
        if job is not None:
            job.update_task_status(task, status)
        else:
            task.status = status
        task.node_name = node_name
        if node_name and status != TaskStatus.PENDING:
            i = table.index.get(node_name)
            if i is not None:
                table.add_task(i, task)

    def unplace_task(self, task: TaskInfo) -> None:
        """Take a placed task back to Pending. The deallocate handlers run while the task
        still names its node, as in Volcano's unallocate/unpipeline; then the name goes."""
        self.move_task(task, TaskStatus.PENDING, task.node_name)
        self.fire_deallocate(task)
        task.node_name = ""

    def fire_allocate(self, task: TaskInfo) -> None:
        for h in self.event_handlers:
            if h.allocate is not None:
                h.allocate(task)

    def fire_deallocate(self, task: TaskInfo) -> None:
        for h in self.event_handlers:
            if h.deallocate is not None:
                h.deallocate(task)

    def dispatch(self, task: TaskInfo) -> None:
        """Hand an Allocated task to the binder (Volcano Session.dispatch). A dispatch is final
        (no later action of the session undoes it), so ``on_dispatch``, when a world sets it,
        may start binding at once, as Volcano's cache binds while the session goes on."""
        if task.pod.claims:
            writes = self.table.dra.writes(task) if self.table.dra is not None else None
            if writes is None:  # never bind a pod without its claims (the ledger failed it)
                self.event("Pod", task.namespace, task.name, "Warning", "FailedScheduling",
                           f"claims of {task.key} could not be allocated on {task.node_name}; not bound")
                return
            self.claim_writes[task.key] = writes
        job = self.jobs.get(task.job)
        if job is not None:
            job.update_task_status(task, TaskStatus.BINDING)
        self.bound[task.key] = task.node_name
        self.bound_tasks.append(task)
        if self.annotate_bind is not None:
            annotations = self.annotate_bind(task)
            if annotations:
                self.bind_annotations[task.key] = annotations
        if self.plan_volumes is not None:
            plan = self.plan_volumes(task)
            if plan is not None:
                self.volume_bindings[task.key] = plan
        if self.on_dispatch is not None:
            self.on_dispatch(task.key, task.node_name)

    def record_eviction(self, task: TaskInfo, reason: str) -> None:
        self.evicted[task.key] = reason
        self.event("Pod", task.namespace, task.name, "Normal", "Evict", reason)

    def allocate_and_dispatch(self, task: TaskInfo, node_name: str) -> None:
        """Volcano Session.Allocate (used by backfill): allocate, and dispatch every
        Allocated task of the job once the job is ready."""
        self.move_task(task, TaskStatus.ALLOCATED, node_name)
        self.fire_allocate(task)
        job = self.jobs.get(task.job)
        if job is not None and self.job_ready(job):
            for t in job.tasks_with_status(TaskStatus.ALLOCATED):
                self.dispatch(t)

    # -- fit errors ---------------------------------------------------------------------

    def fit_errors(self, task: TaskInfo, pred: PredicateResult, fit: np.ndarray | None) -> FitErrors:
        """Per-reason node histogram for a task that found no node. As in Volcano's
        allocate predicate, the resource check comes first: a node short of resources is
        reported as "Insufficient <resource>", other nodes by the first failing plugin."""
        n = len(self.table)
        fe = FitErrors(total_nodes=n)
        unresolvable = np.zeros(n, dtype=bool)
        checked = np.ones(n, dtype=bool)
        if fit is not None:
            lacking = ~fit
            if lacking.any():
                assert task.check_cols is not None
                fut = self.table.future_idle
                for j, name in enumerate(self.table.dims):
                    need = task.check_cols[j]
                    if need == -np.inf:
                        continue
                    c = int((lacking & ~(fut[:, j] + 0.1 > need)).sum())
                    if c:
                        fe.reasons[f"Insufficient {name}"] = c
            checked = fit
        for f in pred.failures:
            nodes = f.nodes & checked
            c = int(nodes.sum())
            if c:
                fe.reasons[f.reason] = fe.reasons.get(f.reason, 0) + c
                if f.unresolvable:
                    unresolvable |= nodes
        fe.unresolvable = unresolvable
        return fe

    # -- close --------------------------------------------------------------------------

    def pod_group_phase(self, job: JobInfo, unschedulable: bool) -> str:
        c = job.status_count
        running = c[_RUNNING]
        if running and unschedulable:
            return PodGroupPhase.UNKNOWN
        completed = c[_SUCCEEDED] + c[_FAILED]
        scheduled = running + c[_BOUND] + completed  # _SCHEDULED
        # Releasing tasks still on a node keep counting as scheduled.
        scheduled += sum(
            1 for t in job.tasks.values() if t.status == _RELEASING and t.node_name
        ) if c[_RELEASING] else 0
        if scheduled >= job.min_available:
            if scheduled == completed:
                return PodGroupPhase.COMPLETED
            return PodGroupPhase.RUNNING
        if job.phase != PodGroupPhase.INQUEUE:
            return PodGroupPhase.PENDING
        return job.phase

    def close(self) -> Decisions:
        for name, plugin in self.plugins.items():
            t0 = time.perf_counter()
            plugin.on_session_close(self)
            self.plugin_close_seconds[name] = time.perf_counter() - t0
        phases: dict[str, str] = {}
        conditions: dict[str, list[dict[str, Any]]] = {}
        uid = self.uid
        for key, job in self.jobs.items():
            unschedulable = False
            for c in job.conditions:
                if c.get("type") == "Unschedulable" and c.get("status") == "True" and c.get("transitionID") == uid:
                    unschedulable = True
                    break
            phase = self.pod_group_phase(job, unschedulable)
            job.phase = phase
            phases[key] = phase
            if job.conditions:
                conditions[key] = job.conditions
            self._record_job_status_events(job)
        # Only jobs counting a Pipelined task hold one; pod key order as the task map's.
        staged = [
            t
            for job in self.jobs.values()
            if job.status_count[_PIPELINED]
            for t in job.tasks.values()
            if t.status == TaskStatus.PIPELINED and t.pod.status == TaskStatus.PENDING and t.uid in self.tasks
        ]
        pipelined = {t.key: t.node_name for t in sorted(staged, key=lambda t: t.key)}
        queue_allocated = {name: _natural(r) for name, r in self.queue_allocated().items()}
        return Decisions(
            bound=dict(self.bound),
            pipelined=pipelined,
            nominated=self.nominations(),
            evicted=list(self.evicted),
            podgroups=phases,
            podgroup_conditions=conditions,
            queue_allocated=queue_allocated,
            events=self.events,
            eviction_reasons=dict(self.evicted),
            pod_condition_reasons=dict(self.pod_condition_reasons),
            wake_at=self.wake_at,
            bind_annotations=dict(self.bind_annotations),
            claim_writes=dict(self.claim_writes),
            ungated=list(self.ungated),
            volume_bindings=dict(self.volume_bindings),
        )

    def nominations(self) -> dict[str, str]:
        """Pod key -> the node to write as its nominatedNodeName: Volcano's
        RecordJobStatusEvent (via TaskSchedulingReason) nominates a Pending, Pipelined or
        Allocated task whose last transaction (the discarded one, else the current) pipelined
        it where evictions made room for it; it never clears one. A discarded statement's
        pipelines count too: the victims stay, the nomination is written."""
        out = {}
        for uid in self.eviction_occurred | self.last_tx.keys():
            task = self.tasks.get(uid)
            if task is None or task.pod.status != TaskStatus.PENDING or task.status not in _REPORTED:
                continue
            status, node, evicted = self.last_tx.get(uid) or (task.status, task.node_name, uid in self.eviction_occurred)
            if status == TaskStatus.PIPELINED and evicted and node and task.pod.nominated_node != node:
                out[task.key] = node
        return dict(sorted(out.items()))

    def queue_allocated(self) -> dict[str, Resource]:
        """Queue ``status.allocated``: resources of allocated tasks, rolled up to every
        ancestor when the queues form a tree under ``root`` (Volcano updateQueueStatus)."""
        allocated = {name: Resource() for name in self.queues}
        for job in self.jobs.values():
            if job.queue in allocated:
                allocated[job.queue].add(job.allocated)
        if "root" in self.queues:
            leaf_totals = {name: r.clone() for name, r in allocated.items()}
            for name, res in leaf_totals.items():
                seen = {name}
                parent = self.queues[name].parent or ("root" if name != "root" else "")
                while parent and parent in allocated and parent not in seen:
                    allocated[parent].add(res)
                    seen.add(parent)
                    parent = self.queues[parent].parent or ("root" if parent != "root" else "")
        return allocated

    def job_fit_error(self, job: JobInfo) -> str:
        hist: dict[str, int] = {}
        for status, n in job.status_count.items():
            if n:
                hist[status.label()] = hist.get(status.label(), 0) + n
        hist["minAvailable"] = job.min_available
        msg = "pod group is not ready, " + ", ".join(sorted(f"{n} {k}" for k, n in hist.items()))
        pending_reasons: dict[str, int] = {}
        for t in job.tasks.values():
            if t.status == TaskStatus.PENDING:
                pending_reasons["Unschedulable"] = pending_reasons.get("Unschedulable", 0) + 1
        if pending_reasons:
            msg += "; Pending: " + ", ".join(sorted(f"{n} {k}" for k, n in pending_reasons.items()))
        return msg

    def _record_job_status_events(self, job: JobInfo) -> None:
        if job.phase in _WAITING_PHASES:
            pending = job.status_count[_PENDING]
            if pending == 0 and job.tasks and job.ready_task_num() >= job.min_available:
                return  # everything placed this session; the phase moves on next session
            if not job.tasks and not job.job_fit_error:
                return
            msg = f"{pending}/{len(job.tasks)} tasks in gang unschedulable: {self.job_fit_error(job)}"
            if job.job_fit_error:
                msg = job.job_fit_error
            if job.uid not in self.podgroups_warned:
                self.event("PodGroup", job.namespace, job.name, "Warning", "Unschedulable", msg)
        c = job.status_count
        if not (c[_PENDING] or c[_PIPELINED] or c[_ALLOCATED]):
            return  # no task the loop below reports on (most jobs: all placed)
        base = job.job_fit_error or "all nodes are unavailable"
        for t in sorted(job.tasks.values(), key=lambda t: t.key):
            if t.status == TaskStatus.PENDING:
                if t.sch_gated:
                    continue  # the API server's PodScheduled=False (SchedulingGated) says it (Volcano)
                fe = job.fit_errors.get(t.uid)
                msg = fe.error() if isinstance(fe, FitErrors) else (str(fe) if fe else base)
                self.event("Pod", t.namespace, t.name, "Warning", "FailedScheduling", msg)
            elif t.status == TaskStatus.PIPELINED and t.pod.status == TaskStatus.PENDING:
                self.event(
                    "Pod", t.namespace, t.name, "Normal", "Pipelined",
                    f"Pod {t.key} can possibly be assigned to {t.node_name}, once resource is released and minAvailable is satisfied",
                )
            elif t.status == TaskStatus.ALLOCATED:
                self.event(
                    "Pod", t.namespace, t.name, "Normal", "Schedulable",
                    f"Pod {t.key} can possibly be assigned to {t.node_name}, once minAvailable is satisfied",
                )

    def release(self) -> None:
        """Drop the plugins and the hook registries once the decisions are out. The plugins and
        their registered fns refer to the session and the session to them, so without this a
        finished session (its node-table copy, its queues and everything the plugins made)
        waits for the cyclic collector: a replay's thousands of short sessions made the
        collector's young-generation passes cost more than a tenth of the run."""
        self.plugins = {}
        self._empty_registries()
        self.on_dispatch = None
        self.annotate_bind = None
        self.plan_volumes = None


@functools.lru_cache(maxsize=1024)
def _natural_of(cpu: float, memory: float, scalars: tuple[tuple[str, float], ...], pods: int) -> dict[str, str]:
    return Resource(cpu, memory, dict(scalars), pods).to_natural()


def _natural(r: Resource) -> dict[str, str]:
    """``r.to_natural()``, remembered: queue totals repeat from session to session."""
    return dict(_natural_of(r.milli_cpu, r.memory, tuple(r.scalars.items()), r.max_task_num))


def allocated_tasks(job: JobInfo) -> list[TaskInfo]:
    return [t for t in job.tasks.values() if t.status in ALLOCATED_STATUSES]
