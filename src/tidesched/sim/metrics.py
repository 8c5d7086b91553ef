"""Per-step metrics of a simulation (SIM-3): card allocation per model, queue usage against
quota, pending and running pods per queue, the event log and the workload records.

Everything is kept *incrementally*: the accounting listens to world changes and adjusts its
totals by each pod's contribution, so recording a step costs O(queues × card models), not
O(pods). Amounts are integers in internal units (millicores, bytes, milli-cards) until they are
shown, so sums never drift and a run prints the same numbers every time.

Two views of card usage, on purpose:

* ``cards[model].allocated`` — cards *held on nodes*: pods bound or running, including pods
  being deleted (their devices are busy until they are gone). ``capacity`` is the cards of
  Ready nodes (cordoned nodes included: their running pods still hold cards).
* ``queues[q].allocated`` — the *quota view* (DEC-1): pods bound or running and not being
  deleted, charged for the model of the node they are on; ``quota`` is the queue's
  ``volcano.sh/card.quota`` plus CPU/memory from ``spec.capability`` when set.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidesched.model import cards as _cards_module  # card naming (issue 4); the invariants ask for it
from tidesched.model.objects import GROUP_NAME_ANNOTATION, QUEUE_NAME_ANNOTATION, Node, Pod
from tidesched.model.quantity import QuantityError, milli_value, value
from tidesched.model.vgpu import node_card_scalars, pod_card_scalars
from tidesched.sim.dra_cards import DraCards
from tidesched.sim.world import (
    World,
    annotations,
    controller_owner,
    is_deleting,
    meta,
    pod_node,
    pod_phase,
    spec,
    split_key,
    status,
)

SERVICE_TYPE_ANNOTATION = "volcano.sh/service.type"
CARD_QUOTA_ANNOTATION = "volcano.sh/card.quota"
SERVICE_TYPES = ("inference", "training")
GIB = float(1 << 30)

# --------------------------------------------------------------------------------------------
# Card models of a node


def node_card_models(node: Node) -> dict[str, str]:
    """resource name → card model for one node, named by :mod:`tidesched.model.cards` (the
    same names the capacity-card plugin uses)."""
    found = _cards_module.discover_node_cards(node.name, node.meta.labels, node_card_scalars(node))
    return {res: slot.model for slot in found.slots for res in slot.resources}


def parse_card_quota(raw: str) -> dict[str, float]:
    """``volcano.sh/card.quota`` → {model: cards} (bad entries dropped, as the plugin does)."""
    milli, _problems = _cards_module.parse_card_quota(raw)
    return {m: v / 1000.0 for m, v in milli.items()}


def capacity_card_args(config: Any) -> Mapping[str, Any] | None:
    """Arguments of the ``capacity-card`` plugin in a scheduler config, None when absent."""
    if config is None:
        return None
    for tier in getattr(config, "tiers", []):
        for opt in tier.plugins:
            if opt.name == "capacity-card":
                return dict(opt.arguments or {})
    return None


def service_type(pg_annotations: Mapping[str, str], owner_kind: str, mapping: Mapping[str, str]) -> str:
    """TIDE-1: the PodGroup's ``volcano.sh/service.type``, else the pod's owner kind mapped by
    ``podOwnerReferenceToServiceType``, else unknown."""
    st = pg_annotations.get(SERVICE_TYPE_ANNOTATION)
    if st:
        return st if st in SERVICE_TYPES else "unknown"
    mapped = mapping.get(owner_kind, "") if owner_kind else ""
    return mapped if mapped in SERVICE_TYPES else "unknown"


def natural(amount: float, res: str) -> float:
    """Internal units → natural: cores, GiB, cards."""
    if res == "cpu":
        v = amount / 1000.0
    elif res == "memory":
        v = amount / GIB
    else:
        v = amount / 1000.0
    v = round(v, 6)
    return 0.0 if v == 0 else v


def _count(v: float) -> int | float:
    n = round(v / 1000.0, 6)
    return int(n) if float(n).is_integer() else n


# --------------------------------------------------------------------------------------------
# Accounting


@dataclass(frozen=True, slots=True)
class _Contribution:
    queue: str
    pending: bool
    running: bool
    alloc: tuple[tuple[str, float], ...]  # quota view: cpu, memory, card models
    cards: tuple[tuple[str, float], ...]  # held on the node
    uses_cards: bool = False  # names a card model or holds cards (capacity-card's CPU/memory exemption)


class Accounting:
    """Running totals of what every pod contributes, updated on world changes."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.node_models: dict[str, dict[str, str]] = {}
        self.node_capacity: dict[str, dict[str, float]] = {}
        self.capacity: Counter[str] = Counter()
        self.cards: Counter[str] = Counter()
        self.q_alloc: dict[str, Counter[str]] = {}
        self.q_alloc_no_cards: dict[str, Counter[str]] = {}  # cpu/memory of pods that use no cards
        self.q_pending: Counter[str] = Counter()
        self.q_running: Counter[str] = Counter()
        self.pending = 0
        self.running = 0
        self.contrib: dict[str, _Contribution] = {}
        self.models_seen: set[str] = set()
        self._quota_cache: dict[str, tuple[Mapping[str, Any], dict[str, float]]] = {}
        # PodGroups the scheduler still has to enqueue or to see running (phase Pending/Inqueue).
        self.waiting_podgroups: set[str] = set()
        # Bumped whenever something ``step`` reads may have changed; ``step`` reuses its last
        # cards and queues while it stands still (a session that only moved PodGroup phases).
        self._version = 0
        self._last_step: tuple[int, dict[str, Any], dict[str, Any]] | None = None
        # The last entry made per card model and per queue, with what it was made from: an
        # entry whose inputs did not change is reused (one bind changes one model and one
        # queue, and a long trace records tens of thousands of steps).
        self._card_entries: dict[str, tuple[float, float, dict[str, Any]]] = {}
        self._queue_entries: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self.dra = DraCards(world)  # cards of DRA devices and of the claims that hold them
        world.listeners.append(self.on_change)

    def has_work(self) -> bool:
        """Could a session decide anything? Only with a pending pod of ours to place (allocate,
        backfill, preempt and reclaim all start from one) or a PodGroup still Pending or Inqueue
        (enqueue; a phase the next session moves on)."""
        return self.pending > 0 or bool(self.waiting_podgroups)

    # -- changes ------------------------------------------------------------------------

    def on_change(self, kind: str, key: str, old: Any, new: Any, cause: str) -> None:
        if kind == "Pod":
            self._update_pod(key)
        elif kind == "Node":
            self._version += 1
            self._update_node(key)
            for pk in sorted(self.world.pods_by_node.get(key, ())):
                self._update_pod(pk)
        elif kind == "Queue":
            self._version += 1  # names and quotas of the queues
        elif kind == "PodGroup":
            if new is not None and str(status(new).get("phase") or "Pending") in ("Pending", "Inqueue"):
                self.waiting_podgroups.add(key)
            else:
                self.waiting_podgroups.discard(key)
            for pk in sorted(self.world.pods_by_group.get(key, ())):
                self._update_pod(pk)
        elif kind in ("ResourceSlice", "ResourceClaim"):  # DRA cards of nodes, of pods' claims
            nodes, pods = self.dra.changed(kind, key, old, new)
            self._version += bool(nodes)
            for name in nodes:
                self._update_node(name)
            for pk in pods:
                self._update_pod(pk)

    def _update_node(self, name: str) -> None:
        for m, v in self.node_capacity.pop(name, {}).items():
            self.capacity[m] -= v
        self.node_models.pop(name, None)
        node = self.world.record("Node", name)
        if node is None:
            return
        models = node_card_models(node)
        self.node_models[name] = models
        if not node.ready:
            return
        cap: dict[str, float] = {}
        scalars = node_card_scalars(node)
        for res, model in models.items():
            cap[model] = cap.get(model, 0.0) + scalars.get(res, 0.0)
        for model, v in self.dra.node_cards(name).items():
            cap[model] = cap.get(model, 0.0) + v
        self.node_capacity[name] = cap
        for m, v in cap.items():
            self.capacity[m] += v
            self.models_seen.add(m)

    def queue_of(self, pod: Mapping[str, Any], ns: str) -> str:
        group = annotations(pod).get(GROUP_NAME_ANNOTATION)
        if group:
            pg = self.world.get("PodGroup", f"{ns}/{group}")
            if pg is not None:
                return str(spec(pg).get("queue") or "default")
        return str(annotations(pod).get(QUEUE_NAME_ANNOTATION) or "default")

    def _compute(self, key: str) -> _Contribution | None:
        pod = self.world.get("Pod", key)
        if pod is None:
            return None
        rec: Pod | None = self.world.record("Pod", key)
        if rec is None:
            return None
        ours = rec.scheduler_name in self.world.scheduler_names
        node = pod_node(pod)
        phase = pod_phase(pod)
        deleting = is_deleting(pod)
        on_node = bool(node) and phase in ("Pending", "Running")
        cards: tuple[tuple[str, float], ...] = ()
        if on_node:
            models = self.node_models.get(node, {})
            cards = tuple((models[r], v) for r, v in sorted(pod_card_scalars(rec).items()) if r in models and v)
            cards += tuple(self.dra.pod_cards(rec))
        if not ours:
            return _Contribution("", False, False, (), cards)
        pending = not node and phase == "Pending" and not deleting
        running = on_node and not deleting
        alloc: tuple[tuple[str, float], ...] = ()
        if running:
            alloc = (("cpu", rec.resreq.milli_cpu), ("memory", rec.resreq.memory), *cards)
        uses_cards = bool(cards) or "volcano.sh/card.name" in annotations(pod)
        return _Contribution(self.queue_of(pod, split_key(key)[0]), pending, running, alloc, cards, uses_cards)

    def _apply(self, c: _Contribution, sign: int) -> None:
        for m, v in c.cards:
            self.cards[m] += sign * v
            self.models_seen.add(m)
        if not c.queue:
            return
        if c.pending:
            self.q_pending[c.queue] += sign
            self.pending += sign
        if c.running:
            self.q_running[c.queue] += sign
            self.running += sign
        if c.alloc:
            q = self.q_alloc.setdefault(c.queue, Counter())
            for r, v in c.alloc:
                q[r] += sign * v
            if not c.uses_cards:
                plain = self.q_alloc_no_cards.setdefault(c.queue, Counter())
                for r, v in c.alloc[:2]:  # cpu, memory
                    plain[r] += sign * v

    def _update_pod(self, key: str) -> None:
        old = self.contrib.pop(key, None)
        new = self._compute(key)
        if new is not None and new == old:
            self.contrib[key] = old  # e.g. its PodGroup changed phase: the totals stay
            return
        self._version += 1
        if old is not None:
            self._apply(old, -1)
        if new is not None:
            self.contrib[key] = new
            self._apply(new, +1)

    # -- reading ------------------------------------------------------------------------

    def quota(self, queue: str) -> dict[str, float]:
        """Natural-unit quota of a queue: card.quota models, cpu/memory from capability."""
        obj = self.world.get("Queue", queue)
        if obj is None:
            return {}
        hit = self._quota_cache.get(queue)
        if hit is not None and hit[0] is obj:
            return hit[1]
        out: dict[str, float] = {}
        cap = spec(obj).get("capability")
        if isinstance(cap, Mapping):
            try:
                if "cpu" in cap:
                    out["cpu"] = round(milli_value(cap["cpu"]) / 1000.0, 6)
                if "memory" in cap:
                    out["memory"] = round(value(cap["memory"]) / GIB, 6)
            except QuantityError:
                pass
        raw = annotations(obj).get(CARD_QUOTA_ANNOTATION)
        if raw:
            for model, n in sorted(parse_card_quota(raw).items()):
                out[model] = round(n, 6)
        self._quota_cache[queue] = (obj, out)
        return out

    def card_quota(self, queue: str) -> dict[str, float]:
        return {k: v for k, v in self.quota(queue).items() if k not in ("cpu", "memory")}

    def queue_card_usage(self, queue: str) -> dict[str, float]:
        """Cards (natural units) charged to a queue in the quota view."""
        q = self.q_alloc.get(queue, Counter())
        return {m: round(v / 1000.0, 6) for m, v in q.items() if m not in ("cpu", "memory") and v}

    def queue_names(self) -> list[str]:
        names = set(self.world.objects["Queue"])
        names.update(q for q, c in self.q_alloc.items() if any(c.values()))
        names.update(q for q, n in self.q_pending.items() if n)
        names.update(q for q, n in self.q_running.items() if n)
        return sorted(names)

    def step(self, t: float) -> dict[str, Any]:
        """The metrics part of one result step (counts of evictions are added by the runner)."""
        last = self._last_step
        if last is not None and last[0] == self._version:
            cards, queues = last[1], last[2]  # shared with the previous step; never changed
        else:
            cards, queues = self._cards_and_queues()
            self._last_step = (self._version, cards, queues)
        return {
            "t": round(float(t), 6),
            "cards": cards,
            "queues": queues,
            "pending_pods": int(self.pending),
            "running_pods": int(self.running),
        }

    def _cards_and_queues(self) -> tuple[dict[str, Any], dict[str, Any]]:
        models = sorted(m for m in self.models_seen if self.capacity.get(m) or self.cards.get(m))
        cards: dict[str, Any] = {}
        card_entries = self._card_entries
        for m in models:
            cap, alloc = self.capacity.get(m, 0.0), self.cards.get(m, 0.0)
            hit = card_entries.get(m)
            if hit is None or hit[0] != cap or hit[1] != alloc:
                hit = (cap, alloc, {"capacity": _count(cap), "allocated": _count(alloc)})
                card_entries[m] = hit
            cards[m] = hit[2]
        queues: dict[str, Any] = {}
        for q in self.queue_names():
            quota = self.quota(q)
            used = self.q_alloc.get(q, Counter())
            pending, running = int(self.q_pending.get(q, 0)), int(self.q_running.get(q, 0))
            key = (quota, pending, running, *used.items())
            qhit = self._queue_entries.get(q)
            if qhit is not None and qhit[0][0] is quota and qhit[0][1:] == key[1:]:
                queues[q] = qhit[1]
                continue
            alloc = {
                "cpu": natural(used.get("cpu", 0.0), "cpu"),
                "memory": natural(used.get("memory", 0.0), "memory"),
            }
            for r in sorted(set(used) | set(quota)):
                if r not in ("cpu", "memory"):
                    alloc[r] = natural(used.get(r, 0.0), r)
            queues[q] = {
                "allocated": alloc,
                "quota": dict(sorted(quota.items())),
                "pending_pods": pending,
                "running_pods": running,
            }
            self._queue_entries[q] = (key, queues[q])
        return cards, queues


# --------------------------------------------------------------------------------------------
# Events


class EventLog:
    """Events with their time. A repeat of the same reason and message on the same object is
    not recorded again (Kubernetes would bump a count); the list keeps the first ``cap``
    events plus up to ``cap`` eviction/preemption/reclaim and simulator warnings after that,
    and counts everything by reason."""

    def __init__(self, cap: int = 2000) -> None:
        self.cap = cap
        self.kept: list[dict[str, Any]] = []
        self.important_kept = 0
        self.total = 0
        self.dropped = 0
        self.by_reason: Counter[str] = Counter()
        self._last: dict[tuple[str, str, str], dict[str, str]] = {}

    def add(
        self, t: float, kind: str, namespace: str, name: str, type_: str, reason: str, message: str
    ) -> None:
        last = self._last.setdefault((kind, namespace, name), {})
        if last.get(reason) == message:
            return
        last[reason] = message
        self.total += 1
        self.by_reason[reason] += 1
        ev = {
            "t": round(float(t), 6),
            "kind": kind,
            "namespace": namespace,
            "name": name,
            "type": type_,
            "reason": reason,
            "message": message,
        }
        text = f"{reason} {message}".lower()
        important = any(w in text for w in ("evict", "preempt", "reclaim")) or (
            type_ == "Warning" and kind in ("Job", "Scenario", "Simulator")
        )
        if len(self.kept) < self.cap:
            self.kept.append(ev)
        elif important and self.important_kept < self.cap:
            self.kept.append(ev)
            self.important_kept += 1
        else:
            self.dropped += 1

    def forget(self, kind: str, namespace: str, name: str) -> None:
        """The object is gone: a new object of the same name starts with a clean slate."""
        self._last.pop((kind, namespace, name), None)

    def on_change(self, kind: str, key: str, old: Any, new: Any, cause: str) -> None:
        if new is None and kind in ("Pod", "PodGroup", "Job"):
            ns, name = split_key(key)
            self.forget(kind, ns, name)


# --------------------------------------------------------------------------------------------
# Workloads (the result's "jobs")


@dataclass(slots=True)
class Workload:
    name: str
    kind: str  # Job | Deployment | Pod
    queue: str
    service_type: str
    submitted: float
    started: float | None = None
    finished: float | None = None
    evictions: int = 0
    restarts: int = 0
    phase: str = "Pending"

    def to_dict(self) -> dict[str, Any]:
        wait = None if self.started is None else round(self.started - self.submitted, 6)
        return {
            "name": self.name,
            "kind": self.kind,
            "queue": self.queue,
            "service_type": self.service_type,
            "submitted": round(self.submitted, 6),
            "started": None if self.started is None else round(self.started, 6),
            "finished": None if self.finished is None else round(self.finished, 6),
            "wait": wait,
            "evictions": self.evictions,
            "restarts": self.restarts,
            "phase": self.phase,
        }


_JOB_FINISHED = frozenset({"Completed", "Aborted", "Terminated", "Failed"})


class WorkloadTracker:
    """Submission, start, finish, evictions and restarts of every Volcano Job, Deployment and
    bare pod. A Job has started when it first reaches phase Running (minAvailable pods
    running); a Deployment when its first pod runs; a bare pod when it is bound."""

    def __init__(self, world: World, service_mapping: Mapping[str, str]) -> None:
        self.world = world
        self.mapping = dict(service_mapping)
        self.items: dict[tuple[str, str], Workload] = {}
        self.pod_waits: list[float] = []
        world.listeners.append(self.on_change)

    @property
    def now(self) -> float:
        return self.world.clock.now

    def on_change(self, kind: str, key: str, old: Any, new: Any, cause: str) -> None:
        if kind == "Job":
            self._job(key, old, new)
        elif kind == "Deployment":
            self._deployment(key, new)
        elif kind == "Pod":
            self._pod(key, old, new, cause)

    def _job(self, key: str, old: Any, new: Any) -> None:
        w = self.items.get(("Job", key))
        if new is None:
            if w is not None and w.finished is None:
                w.finished, w.phase = self.now, "Deleted"
            return
        if w is None:
            s = spec(new)
            w = Workload(
                key,
                "Job",
                str(s.get("queue") or "default"),
                service_type(annotations(new), "Job", self.mapping),
                self.now,
            )
            self.items[("Job", key)] = w
        st = status(new)
        phase = str((st.get("state") or {}).get("phase") or "Pending")
        w.phase = phase
        w.restarts = int(st.get("retryCount") or 0)
        if phase == "Running" and w.started is None:
            w.started = self.now
        if phase in _JOB_FINISHED and w.finished is None:
            w.finished = self.now
        elif phase not in _JOB_FINISHED:
            w.finished = None

    def _deployment(self, key: str, new: Any) -> None:
        w = self.items.get(("Deployment", key))
        if new is None:
            if w is not None and w.finished is None:
                w.finished, w.phase = self.now, "Deleted"
            return
        if w is None:
            tmpl = spec(new).get("template")
            tann = annotations(tmpl) if isinstance(tmpl, Mapping) else {}
            ann = dict(tann)
            ann.update(annotations(new))  # the Deployment's own reach the PodGroup through the ReplicaSet
            w = Workload(
                key,
                "Deployment",
                str(tann.get(QUEUE_NAME_ANNOTATION) or "default"),
                service_type(ann, "ReplicaSet", self.mapping),
                self.now,
            )
            self.items[("Deployment", key)] = w

    def workload_of(self, pod: Mapping[str, Any], key: str) -> Workload | None:
        ns = split_key(key)[0]
        owner = controller_owner(pod)
        if owner is None:
            return self.items.get(("Pod", key))
        if owner[0] == "Job":
            return self.items.get(("Job", f"{ns}/{owner[1]}"))
        if owner[0] == "ReplicaSet":
            rs = self.world.get("ReplicaSet", f"{ns}/{owner[1]}")
            dep = controller_owner(rs) if rs is not None else None
            if dep is not None and dep[0] == "Deployment":
                return self.items.get(("Deployment", f"{ns}/{dep[1]}"))
        return None

    def _pod(self, key: str, old: Any, new: Any, cause: str) -> None:
        pod = new if new is not None else old
        owner = controller_owner(pod)
        newly_running = (
            new is not None
            and pod_phase(new) == "Running"
            and pod_node(new)
            and (old is None or not pod_node(old))
        )
        if newly_running:
            created = meta(new).get("creationTimestamp")
            from tidesched.sim.world import sim_time

            c = sim_time(created)
            if c is not None:
                self.pod_waits.append(max(0.0, self.now - c))
        if owner is None:
            w = self.items.get(("Pod", key))
            if w is None and new is not None:
                group = annotations(new).get(GROUP_NAME_ANNOTATION)
                if not group:
                    return  # the podgroup controller names it next; tracked from then on
                ns = split_key(key)[0]
                pg = self.world.get("PodGroup", f"{ns}/{group}")
                queue = (
                    str(spec(pg).get("queue") or "default")
                    if pg is not None
                    else str(annotations(new).get(QUEUE_NAME_ANNOTATION) or "default")
                )
                st = service_type(annotations(pg) if pg is not None else {}, "", self.mapping)
                from tidesched.sim.world import sim_time

                created = sim_time(meta(new).get("creationTimestamp"))
                w = Workload(key, "Pod", queue, st, self.now if created is None else created)
                self.items[("Pod", key)] = w
            if w is None:
                return
            if new is None:
                if w.finished is None:
                    w.finished = self.now
                    w.phase = "Evicted" if cause == "evict" else "Deleted"
                return
            phase = pod_phase(new)
            w.phase = "Terminating" if is_deleting(new) else phase
            if newly_running and w.started is None:
                w.started = self.now
            if phase in ("Succeeded", "Failed") and w.finished is None:
                w.finished = self.now
            return
        if newly_running:
            w = self.workload_of(new, key)
            if w is not None and w.kind == "Deployment" and w.started is None:
                w.started = self.now

    def evicted(self, pod_key: str) -> None:
        pod = self.world.get("Pod", pod_key)
        if pod is None:
            return
        w = self.workload_of(pod, pod_key)
        if w is not None:
            w.evictions += 1

    def finalize(self) -> list[dict[str, Any]]:
        """Workload records, sorted by kind and name; Deployment phases from the world."""
        out = []
        for (kind, key), w in sorted(self.items.items(), key=lambda kv: (kv[1].name, kv[0][0])):
            if kind == "Deployment" and w.finished is None:
                dep = self.world.get("Deployment", key)
                want = spec(dep).get("replicas", 1) if dep is not None else 0
                running = 0
                for rs_key in self.world.owned("ReplicaSet", "Deployment", key):
                    for pk in self.world.owned_pods("ReplicaSet", rs_key):
                        p = self.world.get("Pod", pk)
                        if p is not None and pod_phase(p) == "Running" and not is_deleting(p):
                            running += 1
                w.phase = "Available" if running >= (want if isinstance(want, int) else 1) else "Progressing"
            out.append(w.to_dict())
        return out


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (deterministic, no interpolation)."""
    if not values:
        return None
    vs = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(vs)))
    return round(vs[rank - 1], 6)


def mean(values: list[float]) -> float | None:
    if not values:
        return None
    return round(math.fsum(values) / len(values), 6)
