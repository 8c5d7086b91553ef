"""capacity-card plugin: queue quotas per accelerator card model, and the tidal-preemption policy.

Card names come from :mod:`tidesched.model.cards` only (CARD-1, DEC-10). Amounts are internal
units (cpu milli, memory bytes, cards milli); every message is in natural units (OBJ-1).

Arguments
    ``cardUnlimitedCpuMemory`` (bool, false): a pod or job that uses cards is not limited
    by, nor charged to, the queue's CPU/memory quota (CARD-6, DEC-5).
    ``nodeOrderWeight`` (number, 1.0): weight of the card-preference score.
    ``overCommitFactor`` (number, 1.2; values < 1 fall back to 1.2 as Volcano's overcommit):
    enqueue admits a job while, for each dimension it requests, cluster inqueue + request ≤
    cluster total × factor − used (DEC-9).
    ``podOwnerReferenceToServiceType`` (mapping owner kind → inference|training, TIDE-1).

Hooks
    QueueOrder — higher ``spec.priority`` first, then the lower quota share (TIDE-2).
    JobEnqueueable — queue Open; minReq + allocated + inqueue − elastic ≤ capability for every
        requested dimension: CPU/memory from ``spec.capability`` (unset = 0, CARD-2) and each
        card model from ``volcano.sh/card.quota``; a multi-model request is checked against the
        combined quota of its models (Hall's condition over all pending alternatives, so
        overlapping ``A|B`` reservations are never double-booked); ``card.request`` is used
        while the job has no pods, the pods' own requests afterwards (CARD-5, CARD-6, DEC-5);
        then the overCommitFactor bound (DEC-9). Refusals become a Warning on the PodGroup
        (and on the job's pending pods) with the DEC-11 text (CARD-8).
    JobEnqueued — reserve the admitted job's request as the queue's inqueue.
    Allocatable — queue Open; allocated + task request ≤ capability (CPU/memory unless
        exempt; cards: at least one acceptable model has quota left) (CARD-6).
    Predicate — a card pod may only go to nodes offering one of its acceptable models whose
        quota is not used up in its queue (DEC-2, DEC-3); an unknown or malformed card name, or
        alternatives with different resources, fail every node (DEC-4, DEC-11).
    NodeOrder — earlier-listed models of ``A|B|C`` score higher: weight × 100 × 0.5^index (CARD-4).
    EventHandler — allocate/pipeline/unevict charge the queue for the model the pod actually
        landed on; evict/unpipeline/unallocate give it back (CARD-7). Pipelined pods count,
        Releasing pods do not (DEC-1).
    Preemptive — the reclaimer's queue is Open and allocated + request fits its capability
        (CPU, memory, cards), else a Warning on the pod says why (TIDE-5).
    Reclaimable — inference may reclaim from training only; training never reclaims; inference
        is never a victim; unknown service type neither reclaims nor is reclaimed (TIDE-4,
        DEC-7). Victims must hold one of the reclaimer's acceptable card models; a PodGroup
        annotated ``volcano.sh/preemptable: "false"`` protects its pods (TIDE-3).

Service type (TIDE-1): PodGroup annotation ``volcano.sh/service.type``, else the pod's first
ownerReference kind through ``podOwnerReferenceToServiceType``, else unknown.

``quota_view()`` (the framework's ``QuotaView``: ``queue_usage``, ``job_service_type``,
``job_card_usage``) gives per queue and per card model (and cpu/memory) the quota, allocated,
inqueue and pending amounts to the CLI, the simulator and metrics (OBS-1, OBS-2).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tidesched.framework.arguments import ConfigError
from tidesched.framework.plugin import (
    ABSTAIN,
    PERMIT,
    REJECT,
    EventHandler,
    NodeFailure,
    Plugin,
    PredicateResult,
)
from tidesched.model.cards import (
    CARD_QUOTA_ANNOTATION,
    CARD_REQUEST_ANNOTATION,
    MILLI,
    CardCatalog,
    JobCardRequest,
    PodCardRequest,
    format_count,
    group_key,
    group_label,
    parse_card_quota,
    parse_card_request,
    pod_card_request,
)
from tidesched.model.objects import PREEMPTABLE_KEY, parse_bool
from tidesched.model.quantity import format_amount
from tidesched.model.resource import MIN_RESOURCE
from tidesched.model.status import ALLOCATED_STATUSES, PodGroupPhase, QueueState, TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo

SERVICE_TYPE_ANNOTATION = "volcano.sh/service.type"
INFERENCE = "inference"
TRAINING = "training"
UNKNOWN = "unknown"
SERVICE_TYPES = (INFERENCE, TRAINING)

DEFAULT_OVER_COMMIT_FACTOR = 1.2
DEFAULT_NODE_ORDER_WEIGHT = 1.0
NODE_ORDER_MAX_SCORE = 100.0
NODE_ORDER_DECAY = 0.5

# Tasks charged to their queue (DEC-1: pipelined yes, releasing no).
CHARGED_STATUSES = ALLOCATED_STATUSES | {TaskStatus.PIPELINED}
_GONE = frozenset({TaskStatus.RELEASING, TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.UNKNOWN})

REASON_NO_QUOTA_NODE = "node(s) offer a card model whose queue quota is used up"
# Enumerate Hall subsets exactly up to this many related models (2^12 subsets), else a
# conservative family of subsets.
_HALL_EXACT_LIMIT = 12


def _tol_exceeds(total: float, cap: float) -> bool:
    """``total > cap`` beyond Volcano's tolerance (LessEqual semantics)."""
    return total - cap >= MIN_RESOURCE


def quota_message(queue: str, dim: str, requested: str, total: str, capability: str) -> str:
    """DEC-11 text, natural units."""
    return (
        f"Queue <{queue}> has insufficient <{dim}> quota: requested {requested}, "
        f"total would be {total}, but capability is {capability}"
    )


def not_open_message(queue: str, state: str) -> str:
    return f"Queue <{queue}> is not open (state {state})"


@dataclass(slots=True)
class Usage:
    """What one task counts against its queue: CPU, memory and one card model."""

    cpu: float = 0.0
    memory: float = 0.0
    model: str = ""
    cards: float = 0.0


@dataclass(slots=True)
class JobRequest:
    """A job's minimum request as capacity-card sees it (CARD-5, DEC-5)."""

    cpu: float = 0.0  # after the cardUnlimitedCpuMemory exemption
    memory: float = 0.0
    full_cpu: float = 0.0  # before it (the overcommit bound is about the cluster, not quota)
    full_memory: float = 0.0
    cards: dict[tuple[str, ...], float] = field(default_factory=dict)
    labels: dict[tuple[str, ...], str] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (pod name or "", message)


@dataclass(slots=True)
class QueueCards:
    """Per-queue quota state for one session."""

    name: str
    state: str
    priority: int
    cap_cpu: float
    cap_memory: float
    quota: dict[str, float]
    alloc_cpu: float = 0.0
    alloc_memory: float = 0.0
    alloc_cards: dict[str, float] = field(default_factory=dict)
    inq_cpu: float = 0.0
    inq_memory: float = 0.0
    inq_cards: dict[tuple[str, ...], float] = field(default_factory=dict)
    inq_labels: dict[tuple[str, ...], str] = field(default_factory=dict)
    el_cpu: float = 0.0
    el_memory: float = 0.0
    el_cards: dict[str, float] = field(default_factory=dict)

    def add(self, u: Usage, sign: float = 1.0) -> None:
        self.alloc_cpu += sign * u.cpu
        self.alloc_memory += sign * u.memory
        if u.model:
            self.alloc_cards[u.model] = self.alloc_cards.get(u.model, 0.0) + sign * u.cards

    def share(self) -> float:
        """max over quota'd dimensions of allocated / capability (queue ordering tie-break)."""
        s = 0.0
        for alloc, cap in ((self.alloc_cpu, self.cap_cpu), (self.alloc_memory, self.cap_memory)):
            if cap > 0:
                s = max(s, alloc / cap)
        for m, cap in self.quota.items():
            if cap > 0:
                s = max(s, self.alloc_cards.get(m, 0.0) / cap)
        return s


def _service_type_map(arguments: "Arguments") -> dict[str, str]:
    raw = arguments.get_mapping("podOwnerReferenceToServiceType", {})
    out: dict[str, str] = {}
    for kind, value in raw.items():
        if (
            not isinstance(kind, str)
            or not isinstance(value, str)
            or value.strip().lower() not in SERVICE_TYPES
        ):
            raise ConfigError(
                f"{arguments.owner}: expected an owner kind mapped to inference or training, got {kind!r}: {value!r}",
                field=f"arguments['podOwnerReferenceToServiceType'][{kind!r}]",
            )
        out[kind] = value.strip().lower()
    return out


class CapacityCardPlugin(Plugin):
    name = "capacity-card"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.card_unlimited_cpu_memory = arguments.get_bool("cardUnlimitedCpuMemory", False)
        self.node_order_weight = arguments.get_float("nodeOrderWeight", DEFAULT_NODE_ORDER_WEIGHT)
        self.over_commit_factor = arguments.get_float("overCommitFactor", DEFAULT_OVER_COMMIT_FACTOR)
        self.owner_service_types = _service_type_map(arguments)
        self._argument_warnings: list[str] = []
        if self.node_order_weight <= 0:
            self._argument_warnings.append(
                f"nodeOrderWeight {self.node_order_weight:g} must be positive; using {DEFAULT_NODE_ORDER_WEIGHT:g}"
            )
            self.node_order_weight = DEFAULT_NODE_ORDER_WEIGHT
        if self.over_commit_factor < 1.0:
            self._argument_warnings.append(
                f"overCommitFactor {self.over_commit_factor:g} is below 1; using {DEFAULT_OVER_COMMIT_FACTOR:g}"
            )
            self.over_commit_factor = DEFAULT_OVER_COMMIT_FACTOR
        self.queues: dict[str, QueueCards] = {}
        self._final_usage: dict[str, dict[str, dict[str, float]]] | None = None

    # ------------------------------------------------------------------ session open

    def on_session_open(self, ssn: "Session") -> None:
        self.ssn = ssn
        self._final_usage = None
        self._emitted: set[tuple[str, str, str, str, str]] = set()
        self._requests: dict[str, PodCardRequest] = {}
        self._job_card_requests: dict[str, JobCardRequest] = {}
        self._charges: dict[str, tuple[str, Usage]] = {}  # task uid -> (queue, usage)
        self._pod_reasons: dict[str, tuple[str, str]] = {}  # task uid -> (reason, message)
        self._job_reasons: dict[str, tuple[str, str]] = {}  # job uid -> (reason, message)
        self._job_types: dict[str, str] = {}
        self._pred_cache: dict[tuple[Any, ...], PredicateResult] = {}
        self._score_cache: dict[tuple[str, ...], np.ndarray] = {}
        for msg in self._argument_warnings:
            self._event("Scheduler", "", self.name, "Warning", "InvalidArgument", msg)

        # Card models: named from every node the snapshot has (a model on NotReady nodes is
        # still a known model), placed on the session's (Ready) node rows.
        self.catalog = CardCatalog.build(
            (n.name, n.meta.labels, n.allocatable.scalars) for n in ssn.snapshot.nodes
        )
        for node, msg in self.catalog.problems:
            if node:
                self._event("Node", "", node, "Warning", "InvalidCardLabels", msg)
            else:
                self._event("Scheduler", "", self.name, "Warning", "InconsistentCardModels", msg)
        self._build_node_arrays()
        self._build_queues()
        self._build_usage()

        ssn.add_fn("queue_order", self.name, self._queue_order)
        ssn.add_fn("job_enqueueable", self.name, self.job_enqueueable)
        ssn.add_fn("job_enqueued", self.name, self.job_enqueued)
        ssn.add_fn("allocatable", self.name, self.allocatable)
        ssn.add_fn("predicate", self.name, self.predicate)
        ssn.add_fn("node_order", self.name, self.node_order)
        ssn.add_fn("preemptive", self.name, self.preemptive)
        ssn.add_fn("reclaimable", self.name, self.reclaimable)
        ssn.add_event_handler(EventHandler(allocate=self._on_allocate, deallocate=self._on_deallocate))

    def _build_node_arrays(self) -> None:
        table = self.ssn.table
        models = self.catalog.models
        self.model_code = {m: i for i, m in enumerate(models)}
        n = len(table)
        self.offers = np.zeros((n, len(models)), dtype=bool)
        # Per resource name: the model each node row offers through it (-1: none).
        self.node_model_by_resource: dict[str, np.ndarray] = {}
        self.model_total: dict[str, float] = {m: 0.0 for m in models}
        self.model_used: dict[str, float] = {m: 0.0 for m in models}
        for i, node in enumerate(table.nodes):
            nc = self.catalog.nodes.get(node.name)
            if nc is None:
                continue
            for slot in nc.slots:
                code = self.model_code[slot.model]
                self.offers[i, code] = True
                self.model_total[slot.model] += slot.count
                for r in slot.resources:
                    arr = self.node_model_by_resource.get(r)
                    if arr is None:
                        arr = self.node_model_by_resource[r] = np.full(n, -1, dtype=np.int64)
                    arr[i] = code
                    j = table.dim_index.get(r)
                    if j is not None:
                        self.model_used[slot.model] += float(table.used[i, j])
        self._all_pass = PredicateResult(np.ones(n, dtype=bool), [])
        self.cluster_cpu = float(table.allocatable[:, 0].sum()) if n else 0.0
        self.cluster_memory = float(table.allocatable[:, 1].sum()) if n else 0.0
        self.cluster_used_cpu = float(table.used[:, 0].sum()) if n else 0.0
        self.cluster_used_memory = float(table.used[:, 1].sum()) if n else 0.0
        self.cluster_inq_cpu = 0.0
        self.cluster_inq_memory = 0.0
        self.cluster_inq_cards: dict[tuple[str, ...], float] = {}

    def _build_queues(self) -> None:
        self.queues = {}
        for name, qi in self.ssn.queues.items():
            q = qi.queue
            quota, problems = parse_card_quota(q.meta.annotations.get(CARD_QUOTA_ANNOTATION))
            for msg in problems:
                self._event("Queue", "", name, "Warning", "InvalidCardQuota", f"Queue <{name}>: {msg}")
            # CARD-2: CPU and memory from spec.capability, unset = 0; generic card
            # resource names in capability are ignored (DEC-5).
            self.queues[name] = QueueCards(
                name=name,
                state=qi.state,
                priority=qi.priority,
                cap_cpu=q.capability.milli_cpu,
                cap_memory=q.capability.memory,
                quota=quota,
            )

    def _build_usage(self) -> None:
        ssn = self.ssn
        for task in ssn.tasks.values():
            if task.status in CHARGED_STATUSES:
                job = ssn.jobs.get(task.job)
                if job is not None:
                    self._charge(task, job.queue)
        for job in ssn.jobs.values():
            q = self.queues.get(job.queue)
            if q is None:
                continue
            jr = self.job_request(job)
            alloc = self._job_allocated(job)
            # Volcano: elastic = the part of allocated above the job's minimum.
            q.el_cpu += max(0.0, alloc.cpu - jr.cpu)
            q.el_memory += max(0.0, alloc.memory - jr.memory)
            for m, v in self._job_cards(job).items():
                extra = v - jr.cards.get((m,), 0.0)
                if extra > 0:
                    q.el_cards[m] = q.el_cards.get(m, 0.0) + extra
            if self._holds_reservation(job):
                self._reserve(q, jr, job)

    # ------------------------------------------------------------------ requests and usage

    def card_request(self, task: "TaskInfo") -> PodCardRequest:
        """The task's card request (cached for the session)."""
        req = self._requests.get(task.uid)
        if req is None:
            req = pod_card_request(task.pod.meta.annotations, task.resreq.scalars, self.catalog)
            self._requests[task.uid] = req
            for msg in req.warnings:
                self._event("Pod", task.namespace, task.name, "Warning", "UnknownCardModel", msg)
        return req

    def _exempt(self, req: PodCardRequest) -> bool:
        return self.card_unlimited_cpu_memory and req.uses_cards

    def _placed_model(self, task: "TaskInfo", req: PodCardRequest) -> str:
        """The model a placed task holds: the one its node offers through the task's card
        resource; if the node is gone or offers none, the first acceptable model, so that a
        card pod is never left uncharged (DEC-4)."""
        resources = req.resources
        if not resources and req.error:
            resources = tuple(
                r
                for r, v in sorted(task.resreq.scalars.items())
                if v > 0 and self.catalog.is_card_resource(r)
            )
        nc = self.catalog.nodes.get(task.node_name)
        if nc is not None:
            for r in resources:
                m = nc.model_for_resource(r)
                if m:
                    return m
        return req.models[0] if req.models else ""

    def _card_amount(self, task: "TaskInfo", req: PodCardRequest) -> float:
        if req.count > 0:
            return req.count
        if req.error:
            return sum(
                v for r, v in task.resreq.scalars.items() if v > 0 and self.catalog.is_card_resource(r)
            )
        return 0.0

    def task_usage(self, task: "TaskInfo") -> Usage:
        """What the task counts (or would count) against its queue where it is placed now."""
        req = self.card_request(task)
        u = Usage()
        if not self._exempt(req):
            u.cpu = task.resreq.milli_cpu
            u.memory = task.resreq.memory
        amount = self._card_amount(task, req)
        if amount > 0:
            u.model = self._placed_model(task, req)
            u.cards = amount if u.model else 0.0
        return u

    def _charge(self, task: "TaskInfo", queue: str) -> None:
        q = self.queues.get(queue)
        if q is None:
            return
        old = self._charges.pop(task.uid, None)
        if old is not None:
            self.queues[old[0]].add(old[1], -1.0)
        u = self.task_usage(task)
        q.add(u)
        self._charges[task.uid] = (queue, u)

    def _uncharge(self, task: "TaskInfo") -> None:
        old = self._charges.pop(task.uid, None)
        if old is not None:
            self.queues[old[0]].add(old[1], -1.0)

    def _on_allocate(self, task: "TaskInfo") -> None:
        job = self.ssn.jobs.get(task.job)
        if job is None:
            return
        self._charge(task, job.queue)
        self._pod_reasons.pop(task.uid, None)

    def _on_deallocate(self, task: "TaskInfo") -> None:
        self._uncharge(task)

    def _job_allocated(self, job: "JobInfo") -> Usage:
        u = Usage()
        for t in job.tasks.values():
            c = self._charges.get(t.uid)
            if c is not None:
                u.cpu += c[1].cpu
                u.memory += c[1].memory
        return u

    def job_card_request(self, job: "JobInfo") -> JobCardRequest:
        jcr = self._job_card_requests.get(job.uid)
        if jcr is None:
            raw = job.pod_group.meta.annotations.get(CARD_REQUEST_ANNOTATION)
            jcr = parse_card_request(raw, self.catalog)
            self._job_card_requests[job.uid] = jcr
            for msg in jcr.problems:
                self._event("PodGroup", job.namespace, job.name, "Warning", "InvalidCardRequest", msg)
        return jcr

    def job_request(self, job: "JobInfo") -> JobRequest:
        """minReq of CARD-6: CPU/memory from ``minResources``; cards from the pods once the
        job has pods (HPA scale-out/in), else from ``volcano.sh/card.request`` (CARD-5).

        Like ``minResources``, the pods' cards are those of the job's first minMember pods
        (placed ones first, then by priority): the pods of a Deployment share one PodGroup of
        minMember 1 (Volcano's PodGroup controller makes one per owner), and its replicas
        beyond the first are checked against the quota one by one at allocation, not reserved
        whole at admission."""
        jr = JobRequest()
        if job.min_resources is not None:
            jr.full_cpu = job.min_resources.milli_cpu
            jr.full_memory = job.min_resources.memory
        if job.tasks:
            if CARD_REQUEST_ANNOTATION in job.pod_group.meta.annotations:
                self.job_card_request(job)  # unused once pods exist, but a malformed one is still reported
            live = [t for t in job.tasks.values() if t.status not in _GONE]
            live.sort(key=lambda t: (t.uid not in self._charges, -t.priority, t.key))
            counted = live[: job.min_available] if job.min_available > 0 else live
            for t in sorted(counted, key=lambda t: t.key):
                req = self.card_request(t)
                charged = self._charges.get(t.uid)
                if charged is not None and charged[1].model:
                    key: tuple[str, ...] = (charged[1].model,)
                    jr.cards[key] = jr.cards.get(key, 0.0) + charged[1].cards
                    jr.labels.setdefault(key, charged[1].model)
                elif req.error:
                    jr.errors.append((t.name, req.error))
                elif req.count > 0:
                    jr.cards[req.key] = jr.cards.get(req.key, 0.0) + req.count
                    jr.labels.setdefault(req.key, req.label)
        else:
            jcr = self.job_card_request(job)
            if jcr.error:
                jr.errors.append(("", jcr.error))
            for d in jcr.demands:
                jr.cards[d.key] = jr.cards.get(d.key, 0.0) + d.count
                jr.labels.setdefault(d.key, d.label)
        # A job names cards through its pods or card.request, or, before its pods exist and
        # without card.request, through the generic card resources of minResources (Volcano's
        # job controller writes nvidia.com/gpu there): those count for no model (DEC-5), but a
        # card job is still exempt from the CPU/memory quota under cardUnlimitedCpuMemory.
        uses_cards = bool(jr.cards) or bool(jr.errors) or (
            not job.tasks and job.min_resources is not None
            and any(v > 0 and self.catalog.is_card_resource(n) for n, v in job.min_resources.scalars.items())
        )
        if not (self.card_unlimited_cpu_memory and uses_cards):
            jr.cpu, jr.memory = jr.full_cpu, jr.full_memory
        return jr

    def _reservation(
        self, jr: JobRequest, job: "JobInfo"
    ) -> tuple[float, float, float, float, dict[tuple[str, ...], float]]:
        """max(0, request − allocated) per dimension (Volcano proportion's rule: what the job
        holds already is in ``allocated``, so it is not reserved twice). Returns (cpu, memory,
        full cpu, full memory, cards by group)."""
        alloc = self._job_allocated(job)
        held = self._job_cards(job)
        # The cluster bound (DEC-9) is physical: count what the pods hold, exempt or not.
        held_cpu = held_mem = 0.0
        for t in job.tasks.values():
            if t.uid in self._charges:
                held_cpu += t.resreq.milli_cpu
                held_mem += t.resreq.memory
        cards: dict[tuple[str, ...], float] = {}
        for key, v in jr.cards.items():
            if len(key) == 1:
                v -= held.get(key[0], 0.0)
            if v >= MIN_RESOURCE:
                cards[key] = v
        return (
            max(0.0, jr.cpu - alloc.cpu),
            max(0.0, jr.memory - alloc.memory),
            max(0.0, jr.full_cpu - held_cpu),
            max(0.0, jr.full_memory - held_mem),
            cards,
        )

    def _reserve(self, q: QueueCards, jr: JobRequest, job: "JobInfo") -> None:
        cpu, mem, full_cpu, full_mem, cards = self._reservation(jr, job)
        q.inq_cpu += cpu
        q.inq_memory += mem
        self.cluster_inq_cpu += full_cpu
        self.cluster_inq_memory += full_mem
        for key, v in cards.items():
            q.inq_cards[key] = q.inq_cards.get(key, 0.0) + v
            q.inq_labels.setdefault(key, jr.labels.get(key, group_label(key)))
            self.cluster_inq_cards[key] = self.cluster_inq_cards.get(key, 0.0) + v

    def _holds_reservation(self, job: "JobInfo") -> bool:
        if job.phase == PodGroupPhase.INQUEUE:
            return True
        return job.phase == PodGroupPhase.RUNNING and job.ready_task_num() >= job.min_available

    def _job_cards(self, job: "JobInfo") -> dict[str, float]:
        """Cards a job's charged tasks hold, by model."""
        out: dict[str, float] = {}
        for t in job.tasks.values():
            c = self._charges.get(t.uid)
            if c is not None and c[1].model:
                out[c[1].model] = out.get(c[1].model, 0.0) + c[1].cards
        return out

    # ------------------------------------------------------------------ events

    def _event(self, kind: str, namespace: str, name: str, type_: str, reason: str, message: str) -> None:
        key = (kind, namespace, name, reason, message)
        if key in self._emitted:
            return
        self._emitted.add(key)
        self.ssn.event(kind, namespace, name, type_, reason, message)

    def _job_refused(self, job: "JobInfo", reason: str, message: str) -> int:
        self._job_reasons[job.uid] = (reason, message)
        return REJECT

    def _task_refused(self, task: "TaskInfo", reason: str, message: str) -> bool:
        self._pod_reasons[task.uid] = (reason, message)
        return False

    # ------------------------------------------------------------------ quota arithmetic

    def _fmt(self, dim: str, value: float) -> str:
        if dim in ("cpu", "memory"):
            return format_amount(dim, value)
        return format_count(value)

    def _card_shortfall(
        self, q: QueueCards, new: dict[tuple[str, ...], float], labels: dict[tuple[str, ...], str]
    ) -> str:
        """Hall's condition for card reservations with alternatives: for every set S of models
        containing a newly requested group, Σ demands whose alternatives lie within S ≤
        Σ_{m∈S} (quota − allocated + elastic). Returns the DEC-11 message of the first
        violated S (smallest first), or ""."""
        demands = dict(q.inq_cards)
        for k, v in new.items():
            demands[k] = demands.get(k, 0.0) + v
        related: set[str] = set()
        for k in new:
            related.update(k)
        changed = True
        while changed:
            changed = False
            for k in demands:
                if related.intersection(k) and not related.issuperset(k):
                    related.update(k)
                    changed = True
        new_keys = [set(k) for k in new]
        rel = sorted(related)
        if len(rel) <= _HALL_EXACT_LIMIT:
            candidates: Iterable[tuple[str, ...]] = (
                s for size in range(1, len(rel) + 1) for s in itertools.combinations(rel, size)
            )
        else:
            fam: list[tuple[str, ...]] = []
            for k in new:
                fam.append(k)
                for h in demands:
                    if set(h) & set(k):
                        fam.append(group_key(set(k) | set(h)))
            fam.append(tuple(rel))
            candidates = fam
        seen: set[tuple[str, ...]] = set()
        for s in candidates:
            if s in seen:
                continue
            seen.add(s)
            sset = set(s)
            if not any(k <= sset for k in new_keys):
                continue
            demand = sum(v for k, v in demands.items() if sset.issuperset(k))
            requested = sum(v for k, v in new.items() if sset.issuperset(k))
            used = sum(q.alloc_cards.get(m, 0.0) - q.el_cards.get(m, 0.0) for m in s)
            cap = sum(q.quota.get(m, 0.0) for m in s)
            if _tol_exceeds(used + demand, cap):
                dim = labels.get(s) or group_label(s)
                return quota_message(
                    q.name, dim, format_count(requested), format_count(used + demand), format_count(cap)
                )
        return ""

    def _overcommit_shortfall(self, jr: JobRequest, cards: dict[tuple[str, ...], float]) -> str:
        f = self.over_commit_factor
        checks: list[tuple[str, float, float, float, float]] = []
        if jr.full_cpu > 0:
            checks.append(("cpu", jr.full_cpu, self.cluster_inq_cpu, self.cluster_cpu, self.cluster_used_cpu))
        if jr.full_memory > 0:
            checks.append(
                (
                    "memory",
                    jr.full_memory,
                    self.cluster_inq_memory,
                    self.cluster_memory,
                    self.cluster_used_memory,
                )
            )
        for key, v in sorted(cards.items()):
            inq = sum(x for k, x in self.cluster_inq_cards.items() if set(key).issuperset(k))
            total = sum(self.model_total.get(m, 0.0) for m in key)
            used = sum(self.model_used.get(m, 0.0) for m in key)
            checks.append((jr.labels.get(key, group_label(key)), v, inq, total, used))
        for dim, req, inq, total, used in checks:
            room = total * f - used
            if _tol_exceeds(inq + req, room):
                amounts = [self._fmt(dim, x) for x in (req, inq, total, used, max(room, 0.0))]
                return (
                    f"Cluster has insufficient <{dim}> to enqueue: requested {amounts[0]}, inqueue {amounts[1]}, "
                    f"but total {amounts[2]} × overCommitFactor {f:g} − used {amounts[3]} leaves {amounts[4]}"
                )
        return ""

    def _task_quota_problem(self, q: QueueCards, task: "TaskInfo") -> tuple[str, str]:
        """(reason, message) when allocated + the task's request exceeds the queue's
        capability in some dimension, else ("", "")."""
        req = self.card_request(task)
        if req.error:
            return (
                "UnknownCardModel" if req.error.startswith("unknown card model") else "InvalidCardRequest"
            ), req.error
        if not self._exempt(req):
            for dim, need, alloc, cap in (
                ("cpu", task.resreq.milli_cpu, q.alloc_cpu, q.cap_cpu),
                ("memory", task.resreq.memory, q.alloc_memory, q.cap_memory),
            ):
                if need > 0 and _tol_exceeds(alloc + need, cap):
                    return "InsufficientQuota", quota_message(
                        q.name, dim, self._fmt(dim, need), self._fmt(dim, alloc + need), self._fmt(dim, cap)
                    )
        if req.count > 0 and not self._models_with_room(q, req):
            candidates = [m for m in req.models if req.named or q.quota.get(m, 0.0) > 0]
            if not candidates:
                dim = req.label
                return "InsufficientQuota", quota_message(
                    q.name, dim, format_count(req.count), format_count(req.count), "0"
                )
            msgs = [
                quota_message(
                    q.name,
                    m,
                    format_count(req.count),
                    format_count(q.alloc_cards.get(m, 0.0) + req.count),
                    format_count(q.quota.get(m, 0.0)),
                )
                for m in candidates
            ]
            return "InsufficientQuota", "; ".join(msgs)
        return "", ""

    def _models_with_room(self, q: QueueCards, req: PodCardRequest) -> tuple[str, ...]:
        return tuple(
            m
            for m in req.models
            if not _tol_exceeds(q.alloc_cards.get(m, 0.0) + req.count, q.quota.get(m, 0.0))
        )

    # ------------------------------------------------------------------ hooks

    def _queue_order(self, l: "QueueInfo", r: "QueueInfo") -> int:
        if l.priority != r.priority:
            return -1 if l.priority > r.priority else 1
        ls = self.queues[l.name].share() if l.name in self.queues else 0.0
        rs = self.queues[r.name].share() if r.name in self.queues else 0.0
        if ls == rs:
            return 0
        return -1 if ls < rs else 1

    def job_enqueueable(self, job: "JobInfo") -> int:
        q = self.queues.get(job.queue)
        if q is None:
            return ABSTAIN
        if q.state != QueueState.OPEN:
            return self._job_refused(job, "QueueNotOpen", not_open_message(q.name, q.state))
        jr = self.job_request(job)
        if jr.errors:
            pod, msg = jr.errors[0]
            reason = "UnknownCardModel" if msg.startswith("unknown card model") else "InvalidCardRequest"
            return self._job_refused(job, reason, f"pod {pod}: {msg}" if pod else msg)
        for dim, need, alloc, inq, el, cap in (
            ("cpu", jr.cpu, q.alloc_cpu, q.inq_cpu, q.el_cpu, q.cap_cpu),
            ("memory", jr.memory, q.alloc_memory, q.inq_memory, q.el_memory, q.cap_memory),
        ):
            total = need + alloc + inq - el
            if need > 0 and _tol_exceeds(total, cap):
                return self._job_refused(
                    job,
                    "InsufficientQuota",
                    quota_message(
                        q.name, dim, self._fmt(dim, need), self._fmt(dim, total), self._fmt(dim, cap)
                    ),
                )
        # Cards the job's placed pods hold are in ``allocated`` already: only the rest is new.
        unplaced = self._reservation(jr, job)[4]
        if unplaced:
            msg = self._card_shortfall(q, unplaced, jr.labels)
            if msg:
                return self._job_refused(job, "InsufficientQuota", msg)
        msg = self._overcommit_shortfall(jr, unplaced)
        if msg:
            return self._job_refused(job, "OverCommitExceeded", msg)
        self._job_reasons.pop(job.uid, None)
        return PERMIT

    def job_enqueued(self, job: "JobInfo") -> None:
        q = self.queues.get(job.queue)
        if q is None:
            return
        self._reserve(q, self.job_request(job), job)
        self._job_reasons.pop(job.uid, None)

    def allocatable(self, queue: "QueueInfo", task: "TaskInfo") -> bool:
        q = self.queues.get(queue.name)
        if q is None:
            return True
        if q.state != QueueState.OPEN:
            return self._task_refused(task, "QueueNotOpen", not_open_message(q.name, q.state))
        reason, msg = self._task_quota_problem(q, task)
        if reason:
            return self._task_refused(task, reason, msg)
        return True

    def predicate(self, task: "TaskInfo") -> PredicateResult:
        req = self.card_request(task)
        if not req.uses_cards:
            return self._all_pass
        n = len(self.ssn.table)
        if req.error:
            key: tuple[Any, ...] = ("error", req.error)
            res = self._pred_cache.get(key)
            if res is None:
                res = PredicateResult(
                    np.zeros(n, dtype=bool), [NodeFailure(req.error, np.ones(n, dtype=bool), True)]
                )
                self._pred_cache[key] = res
            self._pod_reasons.setdefault(task.uid, ("InvalidCardRequest", req.error))
            return res
        job = self.ssn.jobs.get(task.job)
        q = self.queues.get(job.queue) if job is not None else None
        allowed = self._models_with_room(q, req) if q is not None and req.count > 0 else req.models
        key = (req.models, allowed)
        res = self._pred_cache.get(key)
        if res is None:
            offered = self._offer_mask(req.models)
            ok = self._offer_mask(allowed)
            failures = []
            out_of_quota = offered & ~ok
            if out_of_quota.any():
                failures.append(NodeFailure(REASON_NO_QUOTA_NODE, out_of_quota, False))
            if (~offered).any():
                failures.append(NodeFailure(f"node(s) didn't offer card model {req.label}", ~offered, True))
            res = PredicateResult(ok, failures)
            self._pred_cache[key] = res
        return res

    def _offer_mask(self, models: Iterable[str]) -> np.ndarray:
        codes = [self.model_code[m] for m in models if m in self.model_code]
        if not codes:
            return np.zeros(len(self.ssn.table), dtype=bool)
        return self.offers[:, codes].any(axis=1)

    def node_order(self, task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
        req = self.card_request(task)
        if not req.named or len(req.models) < 2 or req.error or not req.resources:
            return np.zeros(len(idx))
        by_code = self._score_cache.get(req.models)
        if by_code is None:
            by_code = np.zeros(len(self.model_code) + 1)  # the last slot scores nodes without a model
            for i, m in enumerate(req.models):
                code = self.model_code.get(m)
                if code is not None:
                    by_code[code] = self.node_order_weight * NODE_ORDER_MAX_SCORE * NODE_ORDER_DECAY**i
            self._score_cache[req.models] = by_code
        codes = self.node_model_by_resource.get(req.resources[0])
        if codes is None:
            return np.zeros(len(idx))
        return by_code[codes[idx]]

    def preemptive(self, queue: "QueueInfo", task: "TaskInfo") -> bool:
        q = self.queues.get(queue.name)
        if q is None:
            return True
        if q.state != QueueState.OPEN:
            return self._task_refused(task, "NotPreemptive", not_open_message(q.name, q.state))
        reason, msg = self._task_quota_problem(q, task)
        if reason:
            return self._task_refused(task, "NotPreemptive", msg)
        return True

    def reclaimable(
        self, reclaimer: "TaskInfo", candidates: list["TaskInfo"]
    ) -> tuple[list["TaskInfo"], int]:
        victims = [c for c in candidates if self.may_reclaim(reclaimer, c)]
        return victims, PERMIT

    # ------------------------------------------------------------------ tidal policy (TIDE-1, TIDE-4)

    def _normalise_type(self, value: str | None) -> str | None:
        if value is None:
            return None
        v = value.strip().lower()
        return v if v in SERVICE_TYPES else UNKNOWN

    def job_service_type(self, job: "JobInfo") -> str:
        """inference | training | unknown for a job (TIDE-1)."""
        st = self._job_types.get(job.uid)
        if st is None:
            ann = job.pod_group.meta.annotations.get(SERVICE_TYPE_ANNOTATION)
            st = self._normalise_type(ann)
            if st == UNKNOWN:
                self._event(
                    "PodGroup",
                    job.namespace,
                    job.name,
                    "Warning",
                    "InvalidServiceType",
                    f"annotation {SERVICE_TYPE_ANNOTATION}={ann!r} is not inference or training; the job neither reclaims nor is reclaimed",
                )
            if st is None:
                owner = job.pod_group.meta.owner_kind
                st = self.owner_service_types.get(owner) if owner and owner != "Pod" else None
            if st is None:
                for t in sorted(job.tasks.values(), key=lambda t: t.key):
                    st = self.owner_service_types.get(t.pod.meta.owner_kind)
                    break
            st = st or UNKNOWN
            self._job_types[job.uid] = st
        return st

    def task_service_type(self, task: "TaskInfo") -> str:
        """The PodGroup annotation, else the pod's first ownerReference kind mapped by
        ``podOwnerReferenceToServiceType``, else unknown (TIDE-1, as seed 000)."""
        job = self.ssn.jobs.get(task.job)
        if job is not None:
            ann = self._normalise_type(job.pod_group.meta.annotations.get(SERVICE_TYPE_ANNOTATION))
            if ann is not None:
                return self.job_service_type(job)
        return self.owner_service_types.get(task.pod.meta.owner_kind, UNKNOWN)

    def task_card_usage(self, task: "TaskInfo") -> Usage:
        """What evicting ``task`` gives back to its queue (its charge), or what placing it
        where it is would cost. Cards by model, in milli-units."""
        c = self._charges.get(task.uid)
        return c[1] if c is not None else self.task_usage(task)

    def job_card_usage(self, job: "JobInfo") -> dict[str, float]:
        """Cards (milli-units, by model) that evicting every pod of ``job`` would give back."""
        return self._job_cards(job)

    def _job_protected(self, job: "JobInfo | None") -> bool:
        """TIDE-3: ``volcano.sh/preemptable: false`` on the PodGroup protects its pods even
        when the pods themselves carry no annotation (Deployment-level annotations reach the
        PodGroup, not the pods)."""
        if job is None:
            return False
        meta = job.pod_group.meta
        for source in (meta.annotations, meta.labels):
            if PREEMPTABLE_KEY in source:
                return parse_bool(source[PREEMPTABLE_KEY]) is False
        return False

    def may_reclaim(self, reclaimer: "TaskInfo", victim: "TaskInfo") -> bool:
        """TIDE-4/DEC-7 policy for one pair: inference may take from training only; the
        victim must hold one of the reclaimer's acceptable card models (a card-less reclaimer
        only takes card-less victims)."""
        if self.task_service_type(reclaimer) != INFERENCE:
            return False
        if self.task_service_type(victim) != TRAINING:
            return False
        if self._job_protected(self.ssn.jobs.get(victim.job)):
            return False
        req = self.card_request(reclaimer)
        if req.error:
            return False
        held = self.task_card_usage(victim)
        if req.count > 0:
            return held.model in req.models
        if held.model:
            return False
        return (reclaimer.resreq.milli_cpu > 0 and victim.resreq.milli_cpu > 0) or (
            reclaimer.resreq.memory > 0 and victim.resreq.memory > 0
        )

    # ------------------------------------------------------------------ status

    def quota_view(self) -> "CapacityCardPlugin":
        return self

    def queue_usage(self) -> dict[str, dict[str, dict[str, float]]]:
        """Per queue, per dimension (``cpu`` in cores, ``memory`` in bytes, each card model
        or ``A|B`` group in cards): quota, allocated, inqueue and pending, in natural units.
        After the session closes it reports the state at close."""
        if self._final_usage is not None:
            return self._final_usage
        return self._compute_usage()

    def _compute_usage(self) -> dict[str, dict[str, dict[str, float]]]:
        pending: dict[str, dict[str, float]] = {}
        ssn = self.ssn
        for task in ssn.tasks.values():
            if task.status != TaskStatus.PENDING:
                continue
            job = ssn.jobs.get(task.job)
            if job is None:
                continue
            p = pending.setdefault(job.queue, {})
            req = self.card_request(task)
            if not self._exempt(req):
                p["cpu"] = p.get("cpu", 0.0) + task.resreq.milli_cpu
                p["memory"] = p.get("memory", 0.0) + task.resreq.memory
            if req.count > 0:
                p[req.label] = p.get(req.label, 0.0) + req.count
        # inqueue as the next session will see it: admitted jobs' requests not yet placed.
        inqueue: dict[str, tuple[float, float, dict[str, float]]] = {}
        for job in ssn.jobs.values():
            if job.queue not in self.queues or not (
                job.enqueued_this_session or self._holds_reservation(job)
            ):
                continue
            jr = self.job_request(job)
            cpu, mem, _fc, _fm, cards = self._reservation(jr, job)
            c0, m0, k0 = inqueue.get(job.queue, (0.0, 0.0, {}))
            for key, v in cards.items():
                label = jr.labels.get(key, group_label(key))
                k0[label] = k0.get(label, 0.0) + v
            inqueue[job.queue] = (c0 + cpu, m0 + mem, k0)
        out: dict[str, dict[str, dict[str, float]]] = {}
        for name, q in sorted(self.queues.items()):
            dims: dict[str, dict[str, float]] = {}
            put = functools.partial(_put, dims)
            inq_cpu, inq_mem, inq_cards = inqueue.get(name, (0.0, 0.0, {}))
            put("cpu", "quota", q.cap_cpu / 1000.0)
            put("cpu", "allocated", q.alloc_cpu / 1000.0)
            put("cpu", "inqueue", inq_cpu / 1000.0)
            put("memory", "quota", q.cap_memory)
            put("memory", "allocated", q.alloc_memory)
            put("memory", "inqueue", inq_mem)
            for m, v in q.quota.items():
                put(m, "quota", v / MILLI)
            for m, v in q.alloc_cards.items():
                if abs(v) >= MIN_RESOURCE:
                    put(m, "allocated", v / MILLI)
            for label, v in inq_cards.items():
                put(label, "inqueue", v / MILLI)
            for dim, v in pending.get(name, {}).items():
                put(dim, "pending", v / 1000.0 if dim == "cpu" else (v if dim == "memory" else v / MILLI))
            out[name] = {d: dims[d] for d in sorted(dims, key=lambda d: (d not in ("cpu", "memory"), d))}
        return out

    # ------------------------------------------------------------------ close

    def on_session_close(self, ssn: "Session") -> None:
        from tidesched.framework.decisions import FitErrors

        # Reasons are written once, at close, and only for what is still blocked: a quota
        # refusal seen mid-session (e.g. before a preemption freed quota) is not news.
        for uid, (reason, msg) in sorted(self._pod_reasons.items()):
            task = ssn.tasks.get(uid)
            if task is None or task.status != TaskStatus.PENDING:
                continue
            self._event("Pod", task.namespace, task.name, "Warning", reason, msg)
            job = ssn.jobs.get(task.job)
            if job is not None and uid not in job.fit_errors:
                job.fit_errors[uid] = FitErrors(total_nodes=len(ssn.table), message=msg)
        for uid, (reason, msg) in sorted(self._job_reasons.items()):
            job = ssn.jobs.get(uid)
            if job is None or not job.is_pending():
                continue
            self._event("PodGroup", job.namespace, job.name, "Warning", reason, msg)
            # Bare pods (Deployments, HPA) are what people look at: say it on them too.
            for t in sorted(job.tasks.values(), key=lambda t: t.key):
                if t.status == TaskStatus.PENDING:
                    self._event("Pod", t.namespace, t.name, "Warning", reason, msg)
                    job.fit_errors.setdefault(t.uid, FitErrors(total_nodes=len(ssn.table), message=msg))
        self._final_usage = self._compute_usage()


def _put(dims: dict[str, dict[str, float]], dim: str, what: str, value: float) -> None:
    d = dims.setdefault(dim, {"quota": 0.0, "allocated": 0.0, "inqueue": 0.0, "pending": 0.0})
    d[what] += value
