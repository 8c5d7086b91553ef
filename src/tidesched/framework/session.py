"""One scheduling cycle: snapshot + config → decisions (SES-1..3, RUN-4).

The Session builds the per-session views (jobs, queues, the node table), lets the configured
plugins register their hooks, aggregates the hooks per tier exactly as Volcano does
(framework/session_plugins.go), provides the task-moving primitives Statements use, and on
close computes PodGroup phases, queue status and events. It never does I/O.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from tidesched.framework.config import SchedulerConfig
from tidesched.framework.plugin import (
    ABSTAIN,
    PERMIT,
    PLUGINS,
    REJECT,
    EventHandler,
    NodeFailure,
    Plugin,
    PredicateResult,
    RowFn,
    ValidateResult,
)
from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo
from tidesched.model.problems import Event
from tidesched.model.resource import Resource
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME, ClusterSnapshot
from tidesched.model.state import SessionState, build_state, class_priority
from tidesched.model.status import (
    ALLOCATED_STATUSES,
    PodGroupPhase,
    TaskStatus,
)

# Which config switch gates each hook (None: never gated). Volcano session_plugins.go.
HOOK_SWITCH: dict[str, str | None] = {
    "job_order": "job_order",
    "queue_order": "queue_order",
    "victim_queue_order": None,
    "task_order": "task_order",
    "job_ready": "job_ready",
    "job_pipelined": "job_pipelined",
    "job_starving": "job_starving",
    "job_valid": None,
    "job_enqueueable": "job_enqueued",
    "job_enqueued": "job_enqueued",
    "preemptable": "preemptable",
    "reclaimable": "reclaimable",
    "preemptive": "preemptive",
    "overused": "overused",
    "allocatable": "allocatable",
    "predicate": "predicate",
    "pre_predicate": "predicate",
    "node_order": "node_order",
    "best_node": "best_node",
    "simulate_init": "allocatable",
    "simulate_add_task": "allocatable",
    "simulate_remove_task": "allocatable",
    "simulate_allocatable": "allocatable",
    "simulate_predicate": "predicate",
}
# Simulate hooks run when the plugin enables either of these switches (Volcano).
_SIMULATE_HOOKS = frozenset({"simulate_init", "simulate_add_task", "simulate_remove_task", "simulate_allocatable"})

_SCHEDULED = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.FAILED, TaskStatus.SUCCEEDED})
_COMPLETED = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})
# Statuses read for every job at close, bound once (an enum member lookup costs more than the
# dict read it keys).
_PENDING, _PIPELINED, _ALLOCATED = TaskStatus.PENDING, TaskStatus.PIPELINED, TaskStatus.ALLOCATED
_RUNNING, _BOUND, _RELEASING = TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.RELEASING
_SUCCEEDED, _FAILED = TaskStatus.SUCCEEDED, TaskStatus.FAILED
_WAITING_PHASES = (PodGroupPhase.PENDING, PodGroupPhase.INQUEUE, PodGroupPhase.UNKNOWN)


@dataclass(slots=True)
class FitErrors:
    """Why a task found no node: per-reason node counts, plus a job-level message."""

    total_nodes: int
    reasons: dict[str, int] = field(default_factory=dict)
    message: str = ""
    unresolvable: np.ndarray | None = None  # mask of nodes failing for unresolvable reasons

    def error(self) -> str:
        if self.message:
            return self.message
        if not self.reasons:
            return f"0/{self.total_nodes} nodes are unavailable"
        hist = sorted(f"{n} {r}" for r, n in self.reasons.items())
        return f"0/{self.total_nodes} nodes are unavailable: {', '.join(hist)}."


@dataclass(slots=True)
class Decisions:
    """What a session decided; the world applies it."""

    bound: dict[str, str]
    pipelined: dict[str, str]
    evicted: list[str]
    podgroups: dict[str, str]
    podgroup_conditions: dict[str, list[dict[str, Any]]]
    queue_allocated: dict[str, dict[str, str]]
    events: list[Event]
    eviction_reasons: dict[str, str] = field(default_factory=dict)
    # Pods left pending for a reason other than "Unschedulable" (the PodScheduled=False
    # condition's reason, e.g. GangTimeout), by pod key.
    pod_condition_reasons: dict[str, str] = field(default_factory=dict)
    # The earliest session time (seconds since the epoch) at which a time-based rule (a gang
    # timeout) falls due, if any: a world that skips idle sessions must hold one then.
    wake_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "bound": dict(sorted(self.bound.items())),
            "pipelined": dict(sorted(self.pipelined.items())),
            "evicted": sorted(self.evicted),
            "podgroups": dict(sorted(self.podgroups.items())),
            "events": [e.to_dict() for e in self.events],
        }


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


class _Ordered:
    """Heap entry ordered by a session comparator (Volcano's PriorityQueue)."""

    __slots__ = ("item", "less")

    def __init__(self, item: Any, less: Callable[[Any, Any], bool]) -> None:
        self.item = item
        self.less = less

    def __lt__(self, other: "_Ordered") -> bool:
        return self.less(self.item, other.item)


class KeyedQueue:
    """PriorityQueue's interface and pop order for items ranked by a sort key computed when
    they are pushed (the key must not change while an item waits). Ties on the key pop in
    push order."""

    def __init__(self, key: Callable[[Any], Any], items: Iterable[Any] = ()) -> None:
        self.key = key
        self._seq = itertools.count()
        self.heap = [(key(i), next(self._seq), i) for i in items]
        heapq.heapify(self.heap)

    def push(self, item: Any) -> None:
        heapq.heappush(self.heap, (self.key(item), next(self._seq), item))

    def pop(self) -> Any:
        return heapq.heappop(self.heap)[2]

    def empty(self) -> bool:
        return not self.heap

    def __len__(self) -> int:
        return len(self.heap)


class PriorityQueue:
    def __init__(self, less: Callable[[Any, Any], bool], items: Iterable[Any] = ()) -> None:
        self.less = less
        self.heap = [_Ordered(i, less) for i in items]
        heapq.heapify(self.heap)

    def push(self, item: Any) -> None:
        heapq.heappush(self.heap, _Ordered(item, self.less))

    def pop(self) -> Any:
        return heapq.heappop(self.heap).item

    def empty(self) -> bool:
        return not self.heap

    def __len__(self) -> int:
        return len(self.heap)


def compare_task_names(l: TaskInfo, r: TaskInfo) -> int:
    """Volcano CompareTask, the task-order fallback: lower pod index first, else creation
    time, else UID."""
    li, ri = l.name_index, r.name_index
    if li is not None and ri is not None and li != ri:
        return -1 if li < ri else 1
    if l.creation != r.creation:
        return -1 if l.creation < r.creation else 1
    if l.uid != r.uid:
        return -1 if l.uid < r.uid else 1
    return 0


class Session:
    def __init__(
        self,
        snapshot: ClusterSnapshot,
        config: SchedulerConfig,
        *,
        scheduler_names: Sequence[str] = (DEFAULT_SCHEDULER_NAME,),
        uid: str = "session",
        now: float = 0.0,
        state: SessionState | None = None,
    ) -> None:
        """Open on ``state`` when a cache made it (its infos are this session's to change),
        else on infos built afresh from ``snapshot``."""
        self.uid = uid
        self.now = now
        self.config = config
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

        self._empty_registries()

        # Decisions.
        self.bound: dict[str, str] = {}
        self.evicted: dict[str, str] = {}
        self.bound_tasks: list[TaskInfo] = []
        self.on_dispatch: Callable[[str, str], None] | None = None  # (pod key, node): bind it now
        self.pod_condition_reasons: dict[str, str] = {}
        # PodGroups a plugin already gave their own Warning this session (GangTimeout): close
        # adds no generic "Unschedulable" event for them.
        self.podgroups_warned: set[str] = set()
        self.wake_at: float | None = None

        self.plugins: dict[str, Plugin] = {}
        for tier in self.tiers:
            for opt in tier.plugins:
                cls = PLUGINS[opt.name]
                plugin = cls(opt.args)
                self.plugins[opt.name] = plugin
        for plugin in self.plugins.values():
            plugin.before_session_open(self)
        for plugin in self.plugins.values():
            plugin.on_session_open(self)

    def _empty_registries(self) -> None:
        """The hook registries as a new session has them (and a released one: see release)."""
        # Hook registries: hook -> plugin name -> fn.
        self._fns: dict[str, dict[str, Callable[..., Any]]] = {h: {} for h in HOOK_SWITCH}
        self._chains: dict[str, list[list[tuple[str, Callable[..., Any]]]]] = {}
        # Comparator fns of a hook in tier order (the first non-zero answer wins, so tiers
        # need not be kept apart): heap comparisons call these hundreds of times per session.
        self._flat: dict[str, list[Callable[..., Any]]] = {}
        # Row-local forms of predicate/node_order fns (RowFn), and per hook the chain of them
        # in tier order, or None when some fn of the hook has none.
        self._row_fns: dict[str, dict[str, RowFn]] = {"predicate": {}, "node_order": {}}
        self._row_chains: dict[str, list[RowFn] | None] = {}
        # Sort-key forms of job_order fns (see add_order_key), and the combined key or None.
        self._order_keys: dict[str, Callable[[JobInfo], Any]] = {}
        self._job_key: Callable[[JobInfo], tuple[Any, ...]] | None | bool = False  # False: not built
        self.event_handlers: list[EventHandler] = []

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

    # -- registration -------------------------------------------------------------------

    def add_fn(self, hook: str, plugin_name: str, fn: Callable[..., Any]) -> None:
        self._fns[hook][plugin_name] = fn
        self._chains.pop(hook, None)
        self._flat.pop(hook, None)
        self._row_chains.pop(hook, None)
        self._job_key = False

    def add_order_key(self, plugin_name: str, key: Callable[[JobInfo], Any]) -> None:
        """Offer the plugin's ``job_order`` fn, registered beside it with ``add_fn``, as a sort
        key: ``key(l) < key(r)`` exactly when the fn ranks ``l`` first, equal keys when it ties.
        A job's key may change only while the job is out of the queue (its own turn), as the
        built-in orders' priority, gang readiness and DRF share do."""
        self._order_keys[plugin_name] = key
        self._job_key = False

    def job_sort_key(self) -> Callable[[JobInfo], tuple[Any, ...]] | None:
        """The key whose ascending order is ``job_order_less``'s (the plugins' keys in tier
        order, then creation and uid), or None when some enabled job_order fn offers no key."""
        if self._job_key is False:
            names = [name for tier in self._chain("job_order") for name, _fn in tier]
            if all(n in self._order_keys for n in names):
                keys = [self._order_keys[n] for n in names]

                def job_key(job: JobInfo) -> tuple[Any, ...]:
                    return (*[k(job) for k in keys], job.creation, job.uid)

                self._job_key = job_key
            else:
                self._job_key = None
        return self._job_key  # type: ignore[return-value]

    def job_queue(self, jobs: Iterable[JobInfo] = ()) -> "PriorityQueue | KeyedQueue":
        """A queue popping jobs in ``job_order_less`` order: on sort keys when every JobOrder
        plugin offers one (a tuple comparison in C per heap step), else on the comparators."""
        key = self.job_sort_key()
        return PriorityQueue(self.job_order_less, jobs) if key is None else KeyedQueue(key, jobs)

    def add_row_fn(self, hook: str, plugin_name: str, row_fn: RowFn) -> None:
        """Offer the row-local form of the plugin's ``hook`` fn (``predicate`` or
        ``node_order``), registered beside it with ``add_fn``."""
        self._row_fns[hook][plugin_name] = row_fn
        self._row_chains.pop(hook, None)

    def _row_chain(self, hook: str) -> list[RowFn] | None:
        if hook not in self._row_chains:
            fns = self._row_fns[hook]
            names = [name for tier in self._chain(hook) for name, _fn in tier]
            self._row_chains[hook] = [fns[n] for n in names] if all(n in fns for n in names) else None
        return self._row_chains[hook]

    def _row_vector(self, hook: str, task: TaskInfo) -> np.ndarray | None:
        """The hook's combined per-node values for the task from the node table's row cache
        (pass masks ANDed, scores summed in tier order, as the full path does), or None when
        some fn is not row-local for this task. The array is the cache: do not modify it."""
        chain = self._row_chain(hook)
        if chain is None:
            return None
        keys = []
        for rf in chain:
            k = rf.key(task)
            if k is None:
                return None
            keys.append(k)
        if not chain:
            return self._empty_hook_vector(hook)
        first, rest = chain[0], chain[1:]
        # Row fns return fresh arrays, so the first is the running value: ANDing into all-true
        # or adding to zeros first would change nothing (0.0 + x is x exactly).
        if hook == "predicate":

            def compute(rows: np.ndarray | None) -> np.ndarray:
                out = first.rows(task, rows)
                for rf in rest:
                    out &= rf.rows(task, rows)
                return out

        else:

            def compute(rows: np.ndarray | None) -> np.ndarray:
                out = first.rows(task, rows).astype(float, copy=False)
                for rf in rest:
                    out += rf.rows(task, rows)
                return out

        return self.table.row_cached(("session", hook, *keys), compute)

    def add_event_handler(self, handler: EventHandler) -> None:
        self.event_handlers.append(handler)

    def _chain(self, hook: str) -> list[list[tuple[str, Callable[..., Any]]]]:
        chain = self._chains.get(hook)
        if chain is None:
            switch = HOOK_SWITCH[hook]
            fns = self._fns[hook]
            chain = []
            for tier in self.tiers:
                entries = []
                for opt in tier.plugins:
                    fn = fns.get(opt.name)
                    if fn is None:
                        continue
                    if switch is not None and not self._switch_on(opt, hook, switch):
                        continue
                    entries.append((opt.name, fn))
                chain.append(entries)
            self._chains[hook] = chain
        return chain

    @staticmethod
    def _switch_on(opt: Any, hook: str, switch: str) -> bool:
        if hook in _SIMULATE_HOOKS:
            return bool(opt.enabled("allocatable") or opt.enabled("preemptable"))
        return bool(opt.enabled(switch))

    def has_hook(self, hook: str) -> bool:
        return any(self._chain(hook))

    # -- aggregation (Volcano session_plugins.go) ---------------------------------------

    def _compare(self, hook: str, l: Any, r: Any) -> int:
        fns = self._flat.get(hook)
        if fns is None:
            fns = self._flat[hook] = [fn for tier in self._chain(hook) for _name, fn in tier]
        for fn in fns:
            c = fn(l, r)
            if c:
                return c
        return 0

    def job_compare(self, l: JobInfo, r: JobInfo) -> int:
        """The JobOrder plugins' first non-zero answer, 0 when they all tie (Volcano
        JobOrderCompareFn: no creation-time or UID fallback)."""
        return self._compare("job_order", l, r)

    def job_order_less(self, l: JobInfo, r: JobInfo) -> bool:
        c = self.job_compare(l, r)
        if c:
            return c < 0
        if l.creation != r.creation:
            return l.creation < r.creation
        return l.uid < r.uid

    def sorted_jobs(self, jobs: Iterable[JobInfo]) -> list[JobInfo]:
        """``jobs`` in the order a PriorityQueue of ``job_order_less`` pops them, for callers
        whose jobs' order cannot move while they work through them. One sort of a list that
        arrives mostly in order costs a few comparisons per job; a heap costs two per level."""

        key = self.job_sort_key()
        if key is not None:
            return sorted(jobs, key=key)

        def cmp(l: JobInfo, r: JobInfo) -> int:  # job_order_less as a three-way comparison
            less = self.job_order_less
            return -1 if less(l, r) else (1 if less(r, l) else 0)

        return sorted(jobs, key=functools.cmp_to_key(cmp))

    def queue_order_less(self, l: QueueInfo, r: QueueInfo) -> bool:
        c = self._compare("queue_order", l, r)
        if c:
            return c < 0
        if l.creation != r.creation:
            return l.creation < r.creation
        return l.uid < r.uid

    def victim_queue_order_less(self, l: QueueInfo, r: QueueInfo, preemptor_queue: QueueInfo) -> bool:
        for tier in self._chain("victim_queue_order"):
            for _name, fn in tier:
                c = fn(l, r, preemptor_queue)
                if c:
                    return c < 0
        return not self.queue_order_less(l, r) if l.uid != r.uid else False

    def task_compare(self, l: TaskInfo, r: TaskInfo) -> int:
        return self._compare("task_order", l, r)

    def task_order_less(self, l: TaskInfo, r: TaskInfo) -> bool:
        c = self.task_compare(l, r)
        if c:
            return c < 0
        return compare_task_names(l, r) < 0

    def sort_tasks(self, tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
        return sorted(tasks, key=functools.cmp_to_key(self._task_cmp))

    def _task_cmp(self, l: TaskInfo, r: TaskInfo) -> int:
        if l is r:
            return 0
        return -1 if self.task_order_less(l, r) else (1 if self.task_order_less(r, l) else 0)

    def job_ready(self, job: JobInfo) -> bool:
        for tier in self._chain("job_ready"):
            for _name, fn in tier:
                if not fn(job):
                    return False
        return True

    def _votes(self, hook: str, obj: Any) -> bool:
        for tier in self._chain(hook):
            permitted = False
            for _name, fn in tier:
                vote = fn(obj)
                if vote == REJECT or vote is False:
                    return False
                if vote == PERMIT or vote is True:
                    permitted = True
            if permitted:
                return True
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._votes("job_pipelined", job)

    def job_enqueueable(self, job: JobInfo) -> bool:
        return self._votes("job_enqueueable", job)

    def job_enqueued(self, job: JobInfo) -> None:
        for tier in self._chain("job_enqueued"):
            for _name, fn in tier:
                fn(job)

    def job_starving(self, job: JobInfo) -> bool:
        for tier in self._chain("job_starving"):
            if not tier:
                continue
            return all(fn(job) for _name, fn in tier)
        return False

    def job_valid(self, job: JobInfo) -> ValidateResult | None:
        for tier in self._chain("job_valid"):
            for _name, fn in tier:
                vr = fn(job)
                if vr is not None and not vr.passed:
                    return vr
        return None

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        for tier in self._chain("allocatable"):
            for _name, fn in tier:
                if not fn(queue, task):
                    return False
        return True

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        for tier in self._chain("preemptive"):
            for _name, fn in tier:
                if not fn(queue, task):
                    return False
        return True

    def overused(self, queue: QueueInfo) -> bool:
        for tier in self._chain("overused"):
            for _name, fn in tier:
                if fn(queue):
                    return True
        return False

    def _victims(self, hook: str, actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        for tier in self._chain(hook):
            victims: list[TaskInfo] | None = None
            for _name, fn in tier:
                chosen, vote = fn(actor, candidates)
                if vote == ABSTAIN:
                    continue
                if not chosen:
                    # Volcano: an empty answer leaves this tier undecided.
                    victims = None
                    break
                if victims is None:
                    victims = list(chosen)
                else:
                    keep = {t.uid for t in chosen}
                    victims = [v for v in victims if v.uid in keep]
            if victims:
                return victims
        return []

    def preemptable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> list[TaskInfo]:
        return self._victims("preemptable", preemptor, preemptees)

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> list[TaskInfo]:
        return self._victims("reclaimable", reclaimer, reclaimees)

    def pre_predicate(self, task: TaskInfo) -> str | None:
        for tier in self._chain("pre_predicate"):
            for _name, fn in tier:
                err = fn(task)
                if err:
                    return str(err)
        return None

    def _empty_hook_vector(self, hook: str) -> np.ndarray:
        """No plugin fn for the hook: every node passes, every score is 0 (shared, read-only)."""
        return self.table.memo(("session-empty", hook), lambda: _read_only(
            np.ones(len(self.table), dtype=bool) if hook == "predicate" else np.zeros(len(self.table))
        ))

    def predicate_mask(self, task: TaskInfo) -> np.ndarray:
        """Which nodes pass every plugin predicate, without the reasons: from the row cache
        when every predicate is row-local for the task (do not modify the array)."""
        mask = self._row_vector("predicate", task)
        return self.predicate(task).passed if mask is None else mask

    def predicate(self, task: TaskInfo) -> PredicateResult:
        """All plugin predicates for every node; the first failing plugin names the reason
        of a node (Volcano: first predicate error wins)."""
        n = len(self.table)
        passed = np.ones(n, dtype=bool)
        failures: list[NodeFailure] = []
        for tier in self._chain("predicate"):
            for _name, fn in tier:
                res: PredicateResult = fn(task)
                for f in res.failures:
                    newly = f.nodes & passed
                    if newly.any():
                        failures.append(NodeFailure(f.reason, newly, f.unresolvable))
                passed &= res.passed
        return PredicateResult(passed, failures)

    # -- simulation for dry-run preemption (Volcano CycleState + Simulate* hooks) ----------

    def simulate_state(self, task: TaskInfo) -> dict[str, Any]:
        """A fresh cycle state for a dry run: each plugin clones what it needs into it
        (``simulate_init`` fns: ``fn(state, task)``)."""
        state: dict[str, Any] = {}
        for tier in self._chain("simulate_init"):
            for _name, fn in tier:
                fn(state, task)
        return state

    def simulate_remove_task(self, state: dict[str, Any], preemptor: TaskInfo, victim: TaskInfo, row: int) -> None:
        for tier in self._chain("simulate_remove_task"):
            for _name, fn in tier:
                fn(state, preemptor, victim, row)

    def simulate_add_task(self, state: dict[str, Any], preemptor: TaskInfo, victim: TaskInfo, row: int) -> None:
        for tier in self._chain("simulate_add_task"):
            for _name, fn in tier:
                fn(state, preemptor, victim, row)

    def simulate_allocatable(self, state: dict[str, Any], queue: QueueInfo, task: TaskInfo) -> bool:
        for tier in self._chain("simulate_allocatable"):
            for _name, fn in tier:
                if not fn(state, queue, task):
                    return False
        return True

    def simulate_predicate(self, state: dict[str, Any], task: TaskInfo, row: int) -> bool:
        for tier in self._chain("simulate_predicate"):
            for _name, fn in tier:
                if not fn(state, task, row):
                    return False
        return True

    def node_order_all(self, task: TaskInfo) -> np.ndarray | None:
        """Every node's NodeOrder score from the row cache when every scorer is row-local
        for the task, else None (then score candidates with ``node_order``)."""
        return self._row_vector("node_order", task)

    def node_order(self, task: TaskInfo, idx: np.ndarray) -> np.ndarray:
        scores = np.zeros(len(idx))
        for tier in self._chain("node_order"):
            for _name, fn in tier:
                scores += fn(task, idx)
        return scores

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
        job = self.jobs.get(task.job)
        if job is not None:
            job.update_task_status(task, TaskStatus.BINDING)
        self.bound[task.key] = task.node_name
        self.bound_tasks.append(task)
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
        for plugin in self.plugins.values():
            plugin.on_session_close(self)
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
            evicted=list(self.evicted),
            podgroups=phases,
            podgroup_conditions=conditions,
            queue_allocated=queue_allocated,
            events=self.events,
            eviction_reasons=dict(self.evicted),
            pod_condition_reasons=dict(self.pod_condition_reasons),
            wake_at=self.wake_at,
        )

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

    # -- running ------------------------------------------------------------------------

    def run(self, on_action: Callable[[str, float], None] | None = None) -> Decisions:
        """Run the configured actions in order, then close. ``on_action``, when given, is
        called after each action with its name and its duration in seconds (metrics)."""
        from tidesched.actions import ACTIONS

        for name in self.config.actions:
            t0 = time.perf_counter()
            ACTIONS[name](self)
            if on_action is not None:
                on_action(name, time.perf_counter() - t0)
        return self.close()


@functools.lru_cache(maxsize=1024)
def _natural_of(cpu: float, memory: float, scalars: tuple[tuple[str, float], ...], pods: int) -> dict[str, str]:
    return Resource(cpu, memory, dict(scalars), pods).to_natural()


def _natural(r: Resource) -> dict[str, str]:
    """``r.to_natural()``, remembered: queue totals repeat from session to session."""
    return dict(_natural_of(r.milli_cpu, r.memory, tuple(r.scalars.items()), r.max_task_num))


def allocated_tasks(job: JobInfo) -> list[TaskInfo]:
    return [t for t in job.tasks.values() if t.status in ALLOCATED_STATUSES]
