"""The capacity-card plugin's quota ledger (CARD-2, CARD-5..8, DEC-1, DEC-3, DEC-5, DEC-9): what
each queue may use per card model and CPU/memory, what it holds (allocated, pipelined), what
admitted jobs reserve (inqueue) and what is elastic; what a task or a job requests; whether a
request fits (Hall's condition over ``A|B`` alternatives, the overcommit bound) and the text
that says why not (DEC-11); and the per-queue usage the quota view reports.

:class:`CardLedger` is the half of :class:`~tidesched.plugins.capacity_card.CapacityCardPlugin`
that keeps these books; the plugin's hooks (enqueue, allocate, predicate, node order, reclaim)
read and charge them.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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
from tidesched.model.quantity import format_amount
from tidesched.model.resource import MIN_RESOURCE
from tidesched.model.status import ALLOCATED_STATUSES, PodGroupPhase, TaskStatus
from tidesched.model.vgpu import pod_card_scalars
from tidesched.plugins.card_claims import ClaimCards, Held

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo


# Tasks charged to their queue (DEC-1: pipelined yes, releasing no).
CHARGED_STATUSES = ALLOCATED_STATUSES | {TaskStatus.PIPELINED}


_GONE = frozenset({TaskStatus.RELEASING, TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.UNKNOWN})


# Enumerate Hall subsets exactly up to this many related models (2^12 subsets), else a
# conservative family of subsets.
_HALL_EXACT_LIMIT = 12


def tol_exceeds(total: float, cap: float) -> bool:
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
    """What one task counts against its queue: CPU, memory and one card model; for a pod whose
    cards come through ResourceClaims, the cards each claim holds (``claims``: charged once per
    queue however many of its pods use a claim; ``model`` and ``cards`` then sum them up)."""

    cpu: float = 0.0
    memory: float = 0.0
    model: str = ""
    cards: float = 0.0
    claims: tuple[Held, ...] = ()

    def items(self) -> list[tuple[str, float]]:
        """(model, cards) of what the task holds."""
        if self.claims:
            out: dict[str, float] = {}
            for h in self.claims:
                out[h.model] = out.get(h.model, 0.0) + h.cards
            return list(out.items())
        return [(self.model, self.cards)] if self.model else []


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
    claim_refs: Counter[str] = field(default_factory=Counter)  # charged pods per DRA claim

    def add(self, u: Usage, sign: float = 1.0) -> None:
        self.alloc_cpu += sign * u.cpu
        self.alloc_memory += sign * u.memory
        if u.claims:
            # A claim's cards count once, while any pod of the queue that uses it is charged.
            for key in dict.fromkeys(h.claim for h in u.claims):
                before = self.claim_refs[key]
                self.claim_refs[key] = before + int(sign)
                if (sign > 0 and before == 0) or (sign < 0 and before == 1):
                    for h in u.claims:
                        if h.claim == key:
                            self.alloc_cards[h.model] = self.alloc_cards.get(h.model, 0.0) + sign * h.cards
                if self.claim_refs[key] <= 0:
                    del self.claim_refs[key]
        elif u.model:
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


def _put(dims: dict[str, dict[str, float]], dim: str, what: str, value: float) -> None:
    d = dims.setdefault(dim, {"quota": 0.0, "allocated": 0.0, "inqueue": 0.0, "pending": 0.0})
    d[what] += value


class CardLedger:
    """The books of one session (filled at session open, charged by the event handlers)."""

    ssn: "Session"
    catalog: CardCatalog
    card_unlimited_cpu_memory: bool
    over_commit_factor: float
    queues: dict[str, QueueCards]
    claim_cards: ClaimCards | None  # the session's DRA devices and claims in card models

    def _event(self, kind: str, namespace: str, name: str, type_: str, reason: str, message: str) -> None:
        """Record an event once per session (the plugin's)."""
        raise NotImplementedError
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

    def card_request(self, task: "TaskInfo") -> PodCardRequest:
        """The task's card request (cached for the session)."""
        req = self._requests.get(task.uid)
        if req is None:
            req = pod_card_request(task.pod.meta.annotations, pod_card_scalars(task.pod), self.catalog)
            if task.pod.claims and self.claim_cards is not None:
                req = self.claim_cards.merge(task, req)
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
                for r, v in sorted(pod_card_scalars(task.pod).items())
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
                v for r, v in pod_card_scalars(task.pod).items() if v > 0 and self.catalog.is_card_resource(r)
            )
        return 0.0

    def task_usage(self, task: "TaskInfo") -> Usage:
        """What the task counts (or would count) against its queue where it is placed now."""
        req = self.card_request(task)
        u = Usage()
        if not self._exempt(req):
            u.cpu = task.resreq.milli_cpu
            u.memory = task.resreq.memory
        held = self.claim_cards.held(task) if task.pod.claims and self.claim_cards is not None else ()
        if held:
            u.claims = held
            u.model, u.cards = u.items()[0]
            return u
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
                    for model, cards in charged[1].items():
                        key: tuple[str, ...] = (model,)
                        jr.cards[key] = jr.cards.get(key, 0.0) + cards
                        jr.labels.setdefault(key, model)
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
        """Cards a job's charged tasks hold, by model (a claim its pods share, once)."""
        out: dict[str, float] = {}
        claims: set[str] = set()
        for t in job.tasks.values():
            c = self._charges.get(t.uid)
            if c is None:
                continue
            if c[1].claims:
                for h in c[1].claims:
                    if h.claim not in claims:
                        out[h.model] = out.get(h.model, 0.0) + h.cards
                claims.update(h.claim for h in c[1].claims)
            elif c[1].model:
                out[c[1].model] = out.get(c[1].model, 0.0) + c[1].cards
        return out

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
            if tol_exceeds(used + demand, cap):
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
            if tol_exceeds(inq + req, room):
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
                if need > 0 and tol_exceeds(alloc + need, cap):
                    return "InsufficientQuota", quota_message(
                        q.name, dim, self._fmt(dim, need), self._fmt(dim, alloc + need), self._fmt(dim, cap)
                    )
        count = self._new_cards(q, task, req)
        if count > 0 and not self._models_with_room(q, req, count):
            candidates = [m for m in req.models if req.named or q.quota.get(m, 0.0) > 0]
            if not candidates:
                dim = req.label
                return "InsufficientQuota", quota_message(
                    q.name, dim, format_count(count), format_count(count), "0"
                )
            msgs = [
                quota_message(
                    q.name,
                    m,
                    format_count(count),
                    format_count(q.alloc_cards.get(m, 0.0) + count),
                    format_count(q.quota.get(m, 0.0)),
                )
                for m in candidates
            ]
            return "InsufficientQuota", "; ".join(msgs)
        return "", ""

    def _new_cards(self, q: QueueCards, task: "TaskInfo", req: PodCardRequest) -> float:
        """The cards placing the task adds to its queue: its request, less the cards of claims
        the queue is charged for already (a claim its other pods use)."""
        if not task.pod.claims or self.claim_cards is None or not q.claim_refs:
            return req.count
        shared = sum(h.cards for h in self.claim_cards.held(task) if q.claim_refs[h.claim] > 0)
        return max(0.0, req.count - shared)

    def _models_with_room(self, q: QueueCards, req: PodCardRequest, count: float | None = None) -> tuple[str, ...]:
        need = req.count if count is None else count
        return tuple(
            m
            for m in req.models
            if not tol_exceeds(q.alloc_cards.get(m, 0.0) + need, q.quota.get(m, 0.0))
        )

    def task_card_usage(self, task: "TaskInfo") -> Usage:
        """What evicting ``task`` gives back to its queue (its charge), or what placing it
        where it is would cost. Cards by model, in milli-units."""
        c = self._charges.get(task.uid)
        return c[1] if c is not None else self.task_usage(task)

    def job_card_usage(self, job: "JobInfo") -> dict[str, float]:
        """Cards (milli-units, by model) that evicting every pod of ``job`` would give back."""
        return self._job_cards(job)

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
