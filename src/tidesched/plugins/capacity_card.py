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
    ``draCardModelAttributes`` (list, ``[gpu.nvidia.com/productName]``) and
    ``draCardProfileAttributes`` (list, ``[gpu.nvidia.com/profile]``): the DRA device
    attributes that name a device's card model and its MIG profile (below).

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
    Reclaimable (and UnifiedEvictable for gangreclaim) — inference may reclaim from training only; training never reclaims; inference
        is never a victim; unknown service type neither reclaims nor is reclaimed (TIDE-4,
        DEC-7). Victims must hold one of the reclaimer's acceptable card models; a PodGroup
        annotated ``volcano.sh/preemptable: "false"`` protects its pods (TIDE-3).

vGPU (the deviceshare plugin, issue 26): a node that registers vGPU devices offers one card of
its product (``nvidia.com/gpu.product``) per device; a vGPU pod is charged its *card
equivalents*, per device its compute share (``volcano.sh/vgpu-cores`` / 100; a device taken
without a compute share, which may use all of it, counts as a whole card), for the model of the
node it lands on, like any card pod (``model.vgpu.pod_card_scalars``; docs/gpu-sharing.md).

DRA (docs/dra.md): a device a ResourceSlice publishes is a card of the model its product
attribute names (``NVIDIA H200`` → ``NVIDIA-H200``, the device plugin's name for it; with a MIG
profile, ``<model>/mig-<profile>-mixed``). A pod whose claims ask for such devices is charged
for the models its requests select before the claims are allocated, for the devices they hold
afterwards, a claim shared by pods of a queue once (``card_claims.py``). Claimed cards are
reclaimed like counted ones: the session's claim ledger is made ``evictable``, so a node whose
matching devices are all taken is a candidate for the tidal reclaim, and the reclaimer is
pipelined onto the devices its victims' claims free.

Service type (TIDE-1): PodGroup annotation ``volcano.sh/service.type``, else the pod's first
ownerReference kind through ``podOwnerReferenceToServiceType``, else unknown.

``quota_view()`` (the framework's ``QuotaView``: ``queue_usage``, ``job_service_type``,
``job_card_usage``) gives per queue and per card model (and cpu/memory) the quota, allocated,
inqueue and pending amounts to the CLI, the simulator and metrics (OBS-1, OBS-2).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from tidesched.framework.arguments import ConfigError
from tidesched.framework.plugin import (
    ABSTAIN,
    PERMIT,
    REJECT,
    GANG_RECLAIM,
    EventHandler,
    EvictionContext,
    NodeFailure,
    Plugin,
    PredicateResult,
)
from tidesched.model.cards import (
    MILLI,
    CardCatalog,
    JobCardRequest,
    PodCardRequest,
)
from tidesched.model.dra.cards import DRA_CARD_RESOURCE
from tidesched.model.objects import PREEMPTABLE_KEY, parse_bool
from tidesched.model.status import QueueState, TaskStatus
from tidesched.model.vgpu import VGPU_CARD_RESOURCE, node_card_scalars, pod_card_scalars
from tidesched.plugins.card_claims import ClaimCards, card_naming, slice_problems
from tidesched.plugins.card_ledger import (
    CardLedger,
    QueueCards,
    Usage,
    not_open_message,
    quota_message,
    tol_exceeds,
)

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


REASON_NO_QUOTA_NODE = "node(s) offer a card model whose queue quota is used up"


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


class CapacityCardPlugin(CardLedger, Plugin):
    """The hooks; the books they read and charge are :class:`~tidesched.plugins.card_ledger.CardLedger`."""

    name = "capacity-card"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.card_unlimited_cpu_memory = arguments.get_bool("cardUnlimitedCpuMemory", False)
        self.node_order_weight = arguments.get_float("nodeOrderWeight", DEFAULT_NODE_ORDER_WEIGHT)
        self.over_commit_factor = arguments.get_float("overCommitFactor", DEFAULT_OVER_COMMIT_FACTOR)
        self.owner_service_types = _service_type_map(arguments)
        self.dra_naming = card_naming(arguments)
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
        # still a known model), placed on the session's (Ready) node rows; and the models of
        # the DRA devices the session's nodes reach (docs/dra.md).
        self.claim_cards = ClaimCards.open(ssn, self.dra_naming)
        if ssn.table.dra is not None:
            ssn.table.dra.evictable = True  # claimed cards are reclaimed like counted cards
        self.catalog = CardCatalog.build(
            ((n.name, n.meta.labels, node_card_scalars(n)) for n in ssn.snapshot.nodes),
            self.claim_cards.node_slots(ssn.table.names) if self.claim_cards is not None else None,
        )
        for name, messages in slice_problems(self.claim_cards).items():
            for msg in messages:
                self._event("ResourceSlice", "", name, "Warning", "InvalidCardAttribute", msg)
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
        ssn.add_fn("unified_evictable", self.name, self.unified_evictable)
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
        dra_used = self.claim_cards.in_use() if self.claim_cards is not None else {}
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
                    elif r == DRA_CARD_RESOURCE:
                        self.model_used[slot.model] += float(dra_used[slot.model][i]) * MILLI
                    elif r == VGPU_CARD_RESOURCE:
                        # vGPU devices have no column: the card equivalents of the pods on them.
                        self.model_used[slot.model] += sum(
                            pod_card_scalars(t.pod).get(r, 0.0)
                            for t in table.tasks[i].values()
                            if t.pod.vgpu is not None and t.status != TaskStatus.PIPELINED
                        )
        self._all_pass = PredicateResult(np.ones(n, dtype=bool), [])
        self.cluster_cpu = float(table.allocatable[:, 0].sum()) if n else 0.0
        self.cluster_memory = float(table.allocatable[:, 1].sum()) if n else 0.0
        self.cluster_used_cpu = float(table.used[:, 0].sum()) if n else 0.0
        self.cluster_used_memory = float(table.used[:, 1].sum()) if n else 0.0
        self.cluster_inq_cpu = 0.0
        self.cluster_inq_memory = 0.0
        self.cluster_inq_cards: dict[tuple[str, ...], float] = {}

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
            if need > 0 and tol_exceeds(total, cap):
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
        allowed = self._models_with_room(q, req, self._new_cards(q, task, req)) if q is not None and req.count > 0 else req.models
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

    def unified_evictable(
        self, ctx: "EvictionContext", candidates: list["TaskInfo"]
    ) -> tuple[list["TaskInfo"], int]:
        """gangreclaim: the tidal policy, a victim that some pending pod of the reclaiming job
        may reclaim; gangpreempt: every candidate (the plugin has no Preemptable rule)."""
        if ctx.kind != GANG_RECLAIM:
            return candidates, PERMIT
        reclaimers = ctx.job.tasks_with_status(TaskStatus.PENDING)
        return [c for c in candidates if any(self.may_reclaim(r, c) for r in reclaimers)], PERMIT

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
        held = self.task_card_usage(victim).items()
        if req.count > 0:
            return any(model in req.models for model, _cards in held)
        if held:
            return False
        return (reclaimer.resreq.milli_cpu > 0 and victim.resreq.milli_cpu > 0) or (
            reclaimer.resreq.memory > 0 and victim.resreq.memory > 0
        )

    # ------------------------------------------------------------------ status (the ledger's view)

    def quota_view(self) -> "CapacityCardPlugin":
        return self

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


