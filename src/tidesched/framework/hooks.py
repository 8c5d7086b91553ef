"""How a session combines its plugins' hooks, tier by tier (SES-2, CONF-2), as Volcano's
``framework/session_plugins.go`` does: registration (``add_fn``, sort keys, row-local forms),
and per extension point the rule that turns the plugins' answers into one — order fns: the
first non-zero answer; JobReady/Allocatable/Preemptive: AND; Overused: OR;
JobPipelined/JobEnqueueable: votes per tier; JobStarving: the first tier with a fn decides;
Preemptable/Reclaimable/UnifiedEvictable: per-tier intersection, the first non-empty tier
decides; VictimTasks: per-tier union, the first non-empty tier decides; Predicate: AND, the
first failing plugin names a node's reason; NodeOrder: the sum of the scores.

:class:`SessionHooks` is the half of :class:`~tidesched.framework.session.Session` that holds
the hook registries; the session holds the state they read.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

from tidesched.framework.plugin import (
    ABSTAIN,
    PERMIT,
    REJECT,
    EventHandler,
    EvictionContext,
    NodeFailure,
    PredicateResult,
    RowFn,
    ValidateResult,
)
from tidesched.framework.queues import KeyedQueue, PriorityQueue
from tidesched.framework.reasons import claims_reason
from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo
from tidesched.model.sub_jobs import SubJobInfo

if TYPE_CHECKING:
    from tidesched.framework.config import Tier
    from tidesched.model.node_table import NodeTable

# Which config switch gates each hook (None: never gated). Volcano session_plugins.go.
HOOK_SWITCH: dict[str, str | None] = {
    "job_order": "job_order",
    "queue_order": "queue_order",
    "victim_queue_order": None,
    "task_order": "task_order",
    "job_ready": "job_ready",
    "job_pipelined": "job_pipelined",
    "job_starving": "job_starving",
    # A sub-group's readiness and order (Volcano SubJobReadyFn, SubJobPipelinedFn, SubJobOrderFn).
    "sub_job_ready": "sub_job_ready",
    "sub_job_pipelined": "sub_job_pipelined",
    "sub_job_order": "sub_job_order",
    "job_valid": None,
    "job_enqueueable": "job_enqueued",
    "job_enqueued": "job_enqueued",
    "preemptable": "preemptable",
    "reclaimable": "reclaimable",
    # Volcano's VictimTasksFns: fn(running tasks) -> the tasks the plugin wants evicted (the
    # shuffle action evicts them; rescheduling, tdm and pdb register one).
    "victim_tasks": "victim",
    # Volcano's UnifiedEvictableFn: fn(EvictionContext, candidates) -> (allowed, vote), the
    # victim filter of gangpreempt and gangreclaim; like Volcano's, gated by no switch.
    "unified_evictable": None,
    "preemptive": "preemptive",
    "overused": "overused",
    "allocatable": "allocatable",
    "predicate": "predicate",
    "pre_predicate": "predicate",
    # Whether a plugin's predicate would fail for want of the PrePredicate state (cycle state)
    # of the task in this session: see SessionHooks.predicate_state_missing.
    "predicate_state_missing": "predicate",
    "node_order": "node_order",
    "best_node": "best_node",
    "simulate_init": "allocatable",
    "simulate_add_task": "allocatable",
    "simulate_remove_task": "allocatable",
    "simulate_allocatable": "allocatable",
    "simulate_predicate": "predicate",
    # Network topology (framework.topology): gradients of HyperNodes to try, and their scores.
    "hypernode_gradient": None,
    "hypernode_order": None,
}
# Simulate hooks run when the plugin enables either of these switches (Volcano).
_SIMULATE_HOOKS = frozenset({"simulate_init", "simulate_add_task", "simulate_remove_task", "simulate_allocatable"})


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


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


class SessionHooks:
    """The hook registries of a session and the per-tier combination of its plugins' fns."""

    tiers: "list[Tier]"
    table: "NodeTable"

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

    def _less(self, hook: str, l: Any, r: Any, fallback: Callable[[Any], tuple[Any, ...]]) -> bool:
        """The ``hook`` plugins' first non-zero answer, else the ``fallback`` keys' order."""
        c = self._compare(hook, l, r)
        if c:
            return c < 0
        return fallback(l) < fallback(r)

    def queue_order_less(self, l: QueueInfo, r: QueueInfo) -> bool:
        return self._less("queue_order", l, r, lambda q: (q.creation, q.uid))

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

    def _all(self, hook: str, obj: Any) -> bool:
        """Every enabled fn of ``hook`` says yes (none: yes)."""
        for tier in self._chain(hook):
            for _name, fn in tier:
                if not fn(obj):
                    return False
        return True

    def job_ready(self, job: JobInfo) -> bool:
        return self._all("job_ready", job)

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

    # -- sub-groups (model.sub_jobs; Volcano SubJobReady, SubJobPipelined, SubJobOrderFn) --

    def sub_job_ready(self, job: JobInfo, sub: SubJobInfo) -> bool:
        """Whether the sub-group has what it needs: for a job without sub-groups, whether the
        job is ready; else every enabled fn agrees (none: it is)."""
        if job.sub_jobs is None:
            return self.job_ready(job)
        return self._all("sub_job_ready", sub)

    def sub_job_pipelined(self, job: JobInfo, sub: SubJobInfo) -> bool:
        if job.sub_jobs is None:
            return self.job_pipelined(job)
        return self._votes("sub_job_pipelined", sub)

    def sub_job_order_less(self, l: SubJobInfo, r: SubJobInfo) -> bool:
        """The SubJobOrder plugins' first non-zero answer, else the lower match index, else
        the id."""
        return self._less("sub_job_order", l, r, lambda s: (s.match_index, s.uid))

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

    def _victims(self, hook: str, actor: Any, candidates: list[TaskInfo]) -> list[TaskInfo]:
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
                    # An empty intersection stays empty for the rest of the tier. Deliberately
                    # not as master, which lets the next plugin's answer refill it whole
                    # (docs/fidelity.md, "Deliberately not as master").
                    keep = {t.uid for t in chosen}
                    victims = [v for v in victims if v.uid in keep]
            if victims:
                return victims  # each tier starts afresh (master 7976b63e2; v1.7.0 did not)
        return []

    def preemptable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> list[TaskInfo]:
        return self._victims("preemptable", preemptor, preemptees)

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> list[TaskInfo]:
        return self._victims("reclaimable", reclaimer, reclaimees)

    def unified_evictable(self, ctx: EvictionContext, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """The candidates every plugin of the deciding tier allows a gang eviction to take
        (Volcano UnifiedEvictable: tiers as Preemptable; no fn at all allows none)."""
        return self._victims("unified_evictable", ctx, candidates)

    def victim_tasks(self, tasks: list[TaskInfo]) -> list[tuple[TaskInfo, tuple[str, ...]]]:
        """The tasks the eviction plugins want evicted (Volcano VictimTasks), each with the
        plugins that chose it: within a tier the union of every fn's answer, and the first
        tier whose union is not empty decides. A fn may name tasks beyond ``tasks`` (tdm picks
        its own on revocable nodes). In key order."""
        for tier in self._chain("victim_tasks"):
            chosen: dict[str, tuple[TaskInfo, list[str]]] = {}
            for name, fn in tier:
                for t in fn(tasks) or ():
                    chosen.setdefault(t.uid, (t, []))[1].append(name)
            if chosen:
                return [(t, tuple(names)) for t, names in sorted(chosen.values(), key=lambda c: c[0].key)]
        return []

    def predicate_state_missing(self, task: TaskInfo) -> bool:
        """Whether Volcano's PredicateFn would fail for the task because no PrePredicate ran
        for it yet in this session: some Filter plugins (NodePorts, InterPodAffinity,
        PodTopologySpread) read what their PreFilter wrote into the task's cycle state and
        answer an Error without it. Only preempt's nominated-node check (taskEligibleToPreempt)
        calls the predicates before PrePredicate."""
        return any(fn(task) for tier in self._chain("predicate_state_missing") for _name, fn in tier)

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
        if task.pod.claims:
            base = self._plugin_predicate(task).passed if mask is None else mask
            return base & self._claims_check(task).passed
        return self.predicate(task).passed if mask is None else mask

    def _claims_check(self, task: TaskInfo) -> PredicateResult:
        """Where the pod's DRA claims can be allocated (model.dra.ledger), whatever the config:
        a pod bound without its claims could not start, and its devices would stay free for
        another pod; now, or once releasing pods are gone (a pipeline). The failures are
        unresolvable (evicting pods allocates no claim) unless a plugin made claimed devices
        evictable (the ledger's ``evictable``)."""
        n = len(self.table)
        ledger = self.table.dra
        if ledger is None:
            reason = claims_reason(task.pod.claims)
            return PredicateResult(np.zeros(n, dtype=bool), [NodeFailure(reason, np.ones(n, dtype=bool), True)])
        check = ledger.check(task)
        return PredicateResult(check.passed, [NodeFailure(r, m, u) for r, m, u in check.failures])

    def claims_now(self, task: TaskInfo) -> np.ndarray:
        """Nodes where the pod's DRA claims can be allocated now, not only once releasing pods
        are gone: where it may be allocated rather than pipelined (all nodes without claims)."""
        ledger = self.table.dra
        if not task.pod.claims:
            return np.ones(len(self.table), dtype=bool)
        if ledger is None:
            return np.zeros(len(self.table), dtype=bool)
        return ledger.check(task).now

    def predicate(self, task: TaskInfo) -> PredicateResult:
        """All plugin predicates for every node, and for a pod with DRA claims where they can
        be allocated; the first failing plugin names the reason of a node (Volcano: first
        predicate error wins)."""
        res = self._plugin_predicate(task)
        if not task.pod.claims:
            return res
        claims = self._claims_check(task)
        failures = list(res.failures)
        for f in claims.failures:
            newly = f.nodes & res.passed
            if newly.any():
                failures.append(NodeFailure(f.reason, newly, f.unresolvable))
        return PredicateResult(res.passed & claims.passed, failures)

    def _plugin_predicate(self, task: TaskInfo) -> PredicateResult:
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

    # -- network topology (Volcano HyperNodeGradientFor{Job,SubJob}Fn, HyperNodeOrderMapFn) --

    def hypernode_gradient(self, job: JobInfo, hypernode: str, purpose: str, sub: SubJobInfo | None = None) -> list[list[str]]:
        """The HyperNodes to try for ``job`` (for its sub-group ``sub``, within the HyperNode
        chosen for the job) within ``hypernode``, in groups, lowest tier first: the first
        plugin's answer; only ``hypernode`` itself without one."""
        for tier in self._chain("hypernode_gradient"):
            for _name, fn in tier:
                return fn(job, hypernode, purpose, sub)  # type: ignore[no-any-return]
        return [[hypernode]]

    def hypernode_order(self, job: JobInfo, sub: SubJobInfo, candidates: list[str], tie_bonus: bool = True) -> dict[str, float]:
        """Each candidate HyperNode's score for the sub-group (a gang without sub-groups: the
        gang): the plugins' scores summed. Without ``tie_bonus`` each is scored as if it were
        the only candidate."""
        scores = dict.fromkeys(candidates, 0.0)
        for tier in self._chain("hypernode_order"):
            for _name, fn in tier:
                for name, score in fn(job, sub, candidates, tie_bonus).items():
                    scores[name] += score
        return scores

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
