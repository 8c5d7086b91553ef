"""The simulated world: the objects an API server would hold, as plain dicts (SIM-1, RUN-4).

The world holds Nodes, Pods, PodGroups, Queues, PriorityClasses, Volcano Jobs, Deployments and
ReplicaSets exactly as the API gives them. It hands the scheduling core a
:class:`~tidesched.model.snapshot.ClusterSnapshot` every ``schedulePeriod`` and applies the
core's :class:`~tidesched.framework.session.Decisions`:

* bind → ``spec.nodeName``, phase Running, ``status.startTime``, the ``PodScheduled``
  condition; when the pod carries a run time (``sim.tidesched.io/duration``) its completion is
  scheduled on the clock; its volume plan first (a PV's ``claimRef``, a claim's selected node),
  which the simulated PV controller completes (``controllers/volumes.py``);
* evict → ``metadata.deletionTimestamp``; the pod keeps its node resources (Releasing) for the
  eviction grace period, then it is gone and its controller hears of it (PodEvicted);
* PodGroup phase and conditions are written back (conditions only when their content
  changes, so an unchanged world stays unchanged and the clock can skip ahead).

There is no scheduling logic here. Objects are never modified in place: an update stores a
new dict (copy-on-write of the touched sections). Every change of a kind the scheduler reads
goes to the world's :class:`~tidesched.model.cache.ClusterCache` as it happens, which parses it
once per object version and keeps the session infos up to date; a session opens on
:meth:`World.open` (the same cache the Kubernetes mode runs on).

Listeners (controllers, metrics) are called on every change with
``(kind, key, old, new, cause)``; ``new`` is None when the object is gone and ``cause`` says
why a pod went (``evict``, ``kill``, ``delete``, ``scale``, ``node``, ``gc``).
"""

from __future__ import annotations

import functools
import random
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tidesched.framework.decisions import Decisions
from tidesched.model.gates import QUEUE_ALLOCATION_GATE, only_volcano_gate, raw_gate_names
from tidesched.model.cache import ClusterCache
from tidesched.model.objects import DEFAULT_NAMESPACE, GROUP_NAME_ANNOTATION
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME, ClusterSnapshot
from tidesched.model.state import SessionState
from tidesched.model.volumes import SELECTED_NODE, VolumePlan
from tidesched.sim.claim_writes import write_claims
from tidesched.sim.clock import Clock
from tidesched.sim.vocabulary import (
    DURATION_ANNOTATION,
    EXIT_CODE_ANNOTATION,
    NAMESPACED_KINDS,
    WORLD_KINDS,
    ScenarioError,
    parse_duration,
)

# Simulated t=0 is 2025-01-01T00:00:00Z: timestamps on objects are real RFC 3339 times.
EPOCH = 1735689600.0
NAMESPACED = NAMESPACED_KINDS
FINISHED_POD_PHASES = frozenset({"Succeeded", "Failed"})

Listener = Callable[[str, str, "dict[str, Any] | None", "dict[str, Any] | None", str], None]


@functools.lru_cache(maxsize=1024)
def iso(t: float) -> str:
    """RFC 3339 time of simulated second ``t`` (remembered: a step writes the same time on
    every pod it binds and every condition it changes)."""
    dt = datetime.fromtimestamp(EPOCH + t, tz=UTC)
    spec = "seconds" if float(t).is_integer() else "microseconds"
    return dt.isoformat(timespec=spec).replace("+00:00", "Z")


def sim_time(value: Any) -> float | None:
    """Simulated seconds of an RFC 3339 timestamp (None when absent or unreadable)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() - EPOCH
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------
# Small accessors on raw objects


def as_map(value: Any) -> dict[str, Any]:
    """A copy of ``value`` when it is a mapping, else an empty dict: a malformed section (already
    reported as a Warning by the cache) never stops the controllers."""
    return dict(value) if isinstance(value, Mapping) else {}


# ``type(x) is dict`` first: the common case without the ABC check (these run on every change).


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    m = obj.get("metadata")
    return m if type(m) is dict or isinstance(m, Mapping) else {}


def annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    a = meta(obj).get("annotations")
    return a if type(a) is dict or isinstance(a, Mapping) else {}


def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    a = meta(obj).get("labels")
    return a if type(a) is dict or isinstance(a, Mapping) else {}


def spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    s = obj.get("spec")
    return s if type(s) is dict or isinstance(s, Mapping) else {}


def status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    s = obj.get("status")
    return s if type(s) is dict or isinstance(s, Mapping) else {}


def pod_node(pod: Mapping[str, Any]) -> str:
    return str(spec(pod).get("nodeName") or "")


def pod_phase(pod: Mapping[str, Any]) -> str:
    return str(status(pod).get("phase") or "Pending")


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def pod_active(pod: Mapping[str, Any]) -> bool:
    """Neither finished nor being deleted (what a ReplicaSet or Job counts as alive)."""
    return not is_deleting(pod) and pod_phase(pod) not in FINISHED_POD_PHASES


def controller_owner(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of the controlling owner reference, else of the first one, else None."""
    owners = meta(obj).get("ownerReferences")
    if not isinstance(owners, list) or not owners:
        return None
    chosen = next((o for o in owners if isinstance(o, Mapping) and o.get("controller")), owners[0])
    if not isinstance(chosen, Mapping) or not chosen.get("kind") or not chosen.get("name"):
        return None
    return str(chosen["kind"]), str(chosen["name"])


def with_section(obj: Mapping[str, Any], section: str, **changes: Any) -> dict[str, Any]:
    """A copy of ``obj`` with ``obj[section]`` copied and updated (copy-on-write)."""
    new = dict(obj)
    sub = as_map(new.get(section))
    for k, v in changes.items():
        if v is None:
            sub.pop(k, None)
        else:
            sub[k] = v
    new[section] = sub
    return new


def with_meta_map(obj: Mapping[str, Any], which: str, changes: Mapping[str, str | None]) -> dict[str, Any]:
    """A copy of ``obj`` with metadata.<which> (labels/annotations) updated; None removes."""
    m = dict(meta(obj))
    sub = as_map(m.get(which))
    for k, v in changes.items():
        if v is None:
            sub.pop(k, None)
        else:
            sub[k] = v
    m[which] = sub
    new = dict(obj)
    new["metadata"] = m
    return new


def object_key(kind: str, obj: Mapping[str, Any]) -> str:
    m = meta(obj)
    name = str(m.get("name") or "")
    if kind in NAMESPACED:
        return f"{m.get('namespace') or DEFAULT_NAMESPACE}/{name}"
    return name


def split_key(key: str) -> tuple[str, str]:
    ns, _, name = key.rpartition("/")
    return ns, name


# --------------------------------------------------------------------------------------------
# Clock events the world schedules for itself


@dataclass(frozen=True, slots=True)
class PodFinish:
    """A running pod reaches the end of its run time."""

    key: str
    uid: str
    phase: str  # Succeeded | Failed
    exit_code: int


@dataclass(frozen=True, slots=True)
class PodGone:
    """A terminating pod's grace period is over: the pod object disappears."""

    key: str
    uid: str
    cause: str


@dataclass(slots=True)
class Applied:
    """What applying one session's decisions did to the world."""

    bound: list[tuple[str, str]] = field(default_factory=list)  # (pod key, node)
    evicted: list[tuple[str, str]] = field(default_factory=list)  # (pod key, reason)
    stale: list[str] = field(default_factory=list)  # decisions about pods that changed meanwhile
    ungated: list[str] = field(default_factory=list)  # pods whose queue-admission gate was lifted
    podgroups_changed: int = 0


_OWNED_KINDS = frozenset({"ReplicaSet", "PodGroup"})


class World:
    """Current objects, their parsed records, indexes and the operations controllers and the
    scheduler's decisions perform on them."""

    def __init__(
        self,
        clock: Clock,
        *,
        seed: int = 0,
        scheduler_names: Iterable[str] = (DEFAULT_SCHEDULER_NAME,),
        eviction_grace: float = 30.0,
        deletion_grace: float = 30.0,
        duration_jitter: float = 0.0,
        ignored_provisioners: Iterable[str] = (),
    ) -> None:
        self.clock = clock
        self.scheduler_names = frozenset(scheduler_names)
        self.eviction_grace = eviction_grace
        self.deletion_grace = deletion_grace
        self.duration_jitter = duration_jitter
        self.rng = random.Random(seed)
        self.objects: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in WORLD_KINDS}
        self.revision = 0
        self.listeners: list[Listener] = []
        # Parsed records and session infos of the kinds the scheduler reads. Bare pods get no
        # PodGroup made up: the simulated podgroup controller creates real ones.
        self.cache = ClusterCache(
            self.scheduler_names, synthesize_podgroups=False, ignored_provisioners=ignored_provisioners
        )
        self._sorted: dict[str, list[str] | None] = {k: None for k in WORLD_KINDS}
        self.pods_by_node: dict[str, set[str]] = defaultdict(set)
        self.pods_by_group: dict[str, set[str]] = defaultdict(set)  # "ns/pg" -> pod keys
        self.pods_by_owner: dict[tuple[str, str], set[str]] = defaultdict(set)  # (kind, "ns/name")
        # Other owned objects: (kind, owner kind, "ns/owner") -> keys (ReplicaSets of a
        # Deployment, PodGroups of an owner), so controllers never scan a whole kind.
        self._owned: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        self.deleting_since: dict[str, float] = {}
        # PodGroup key -> (the object, phase, conditions as the session wrote them) when applying
        # them changed nothing: the same again on the same object changes nothing either (every
        # running gang restates its phase and Scheduled condition each session).
        self._settled_groups: dict[str, tuple[Any, str, tuple[Any, ...]]] = {}
        # Moves whenever a Node comes or goes or pods_by_node gains a node name: what the
        # pod-node invariant compares, so it need not compare every node at every step.
        self.node_names_version = 0

    # -- identity -----------------------------------------------------------------------

    def new_uid(self) -> str:
        """A UUID drawn from the seeded generator: deterministic per seed."""
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def random_suffix(self, n: int = 5) -> str:
        """Kubernetes-style random name suffix (``generateName``), from the seeded generator."""
        alphabet = "bcdfghjklmnpqrstvwxz2456789"
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    # -- store --------------------------------------------------------------------------

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        return self.objects[kind].get(key)

    def keys(self, kind: str) -> list[str]:
        """Keys of ``kind`` in sorted order (cached until membership changes)."""
        cached = self._sorted[kind]
        if cached is None:
            cached = sorted(self.objects[kind])
            self._sorted[kind] = cached
        return cached

    def items(self, kind: str) -> list[tuple[str, dict[str, Any]]]:
        objs = self.objects[kind]
        return [(k, objs[k]) for k in self.keys(kind)]

    def put(self, kind: str, obj: dict[str, Any], cause: str = "") -> str:
        """Add or replace an object; listeners hear of it."""
        key = object_key(kind, obj)
        store = self.objects[kind]
        old = store.get(key)
        if old is obj:
            return key
        store[key] = obj
        if old is None:
            self._sorted[kind] = None
            if kind == "Node":
                self.node_names_version += 1
        self.revision += 1
        self.cache.update(kind, key, obj)
        if kind == "Pod":
            self._index_pod(key, old, obj)
        elif kind in _OWNED_KINDS:
            self._index_owned(kind, key, old, obj)
        for fn in self.listeners:
            fn(kind, key, old, obj, cause)
        return key

    def remove(self, kind: str, key: str, cause: str = "") -> dict[str, Any] | None:
        old = self.objects[kind].pop(key, None)
        if old is None:
            return None
        self._sorted[kind] = None
        self.revision += 1
        if kind == "Node":
            self.node_names_version += 1
        self.cache.update(kind, key, None)
        if kind == "Pod":
            self._index_pod(key, old, None)
            self.deleting_since.pop(key, None)
        elif kind in _OWNED_KINDS:
            self._index_owned(kind, key, old, None)
        for fn in self.listeners:
            fn(kind, key, old, None, cause)
        return old

    def _index_pod(self, key: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        for index, k in self._pod_index_entries(key, old):
            index[k].discard(key)
        for index, k in self._pod_index_entries(key, new):
            if index is self.pods_by_node and k not in index:
                self.node_names_version += 1
            index[k].add(key)

    def _pod_index_entries(self, key: str, pod: Mapping[str, Any] | None) -> list[tuple[Any, Any]]:
        """The (index, entry) pairs a pod is listed under: its node, its group, its owner."""
        if pod is None:
            return []
        ns = split_key(key)[0]
        out: list[tuple[Any, Any]] = []
        n = pod_node(pod)
        if n:
            out.append((self.pods_by_node, n))
        g = annotations(pod).get(GROUP_NAME_ANNOTATION)
        if g:
            out.append((self.pods_by_group, f"{ns}/{g}"))
        o = controller_owner(pod)
        if o:
            out.append((self.pods_by_owner, (o[0], f"{ns}/{o[1]}")))
        return out

    def _index_owned(
        self, kind: str, key: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> None:
        ns = split_key(key)[0]
        for obj, add in ((old, False), (new, True)):
            if obj is None:
                continue
            o = controller_owner(obj)
            if o:
                bucket = self._owned[(kind, o[0], f"{ns}/{o[1]}")]
                if add:
                    bucket.add(key)
                else:
                    bucket.discard(key)

    def owned_pods(self, owner_kind: str, owner_key: str) -> list[str]:
        return sorted(self.pods_by_owner.get((owner_kind, owner_key), ()))

    def owned(self, kind: str, owner_kind: str, owner_key: str) -> list[str]:
        """Keys of the ``kind`` objects whose controlling owner is ``owner_kind`` ``owner_key``."""
        return sorted(self._owned.get((kind, owner_kind, owner_key), ()))

    # -- parsed records -----------------------------------------------------------------

    def record(self, kind: str, key: str) -> Any:
        """The parsed record of an object of a kind the scheduler reads (None when it is
        missing or malformed)."""
        return self.cache.records[kind].get(key)

    def snapshot(self) -> ClusterSnapshot:
        """The records as a snapshot (objects in key order; malformed objects become Warning
        events, as ``build_snapshot`` does)."""
        return self.cache.snapshot()

    def open(self) -> tuple[ClusterSnapshot, SessionState]:
        """The snapshot and the session infos for one session (see ClusterCache.open)."""
        return self.cache.open()

    # -- pods ---------------------------------------------------------------------------

    def create_pod(self, pod: dict[str, Any], now: float) -> str:
        m = dict(meta(pod))
        m.setdefault("namespace", DEFAULT_NAMESPACE)
        m.setdefault("uid", self.new_uid())
        m["creationTimestamp"] = iso(now)
        pod = dict(pod)
        pod["metadata"] = m
        pod.setdefault("apiVersion", "v1")
        pod.setdefault("kind", "Pod")
        st = dict(status(pod))
        st.setdefault("phase", "Pending")
        pod["status"] = st
        return self.put("Pod", pod)

    def bind_pod(self, key: str, node: str, now: float, annotations: Mapping[str, str] | None = None) -> bool:
        """Bind a pending pod; ``annotations`` (the scheduler's, e.g. its vGPU devices) are
        written with the binding, as the API server copies a Binding's annotations."""
        pod = self.get("Pod", key)
        if pod is None or pod_node(pod) or is_deleting(pod) or pod_phase(pod) != "Pending":
            return False
        if node not in self.objects["Node"] or spec(pod).get("schedulingGates"):
            return False  # the API server refuses to bind a pod that still has a scheduling gate
        new = with_section(pod, "spec", nodeName=node)
        if annotations:
            new = with_meta_map(new, "annotations", annotations)
        # The API server marks a bound pod PodScheduled (cdp counts its cooldown from then).
        scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": iso(now)}
        new["status"] = dict(status(pod), phase="Running", startTime=iso(now), conditions=[scheduled])
        self.put("Pod", new)
        self.schedule_finish(key, new)
        return True

    def remove_gates(self, key: str, names: Iterable[str] | None = None) -> bool:
        """Lift the pod's scheduling gates of these names (all when None); False when it has
        none of them."""
        pod = self.get("Pod", key)
        gates = spec(pod).get("schedulingGates") if pod is not None else None
        if not isinstance(gates, list) or not gates:
            return False
        wanted = None if names is None else set(names)
        kept = [g for g in gates if wanted is not None and (not isinstance(g, Mapping) or g.get("name") not in wanted)]
        if len(kept) == len(gates):
            return False
        self.put("Pod", with_section(pod, "spec", schedulingGates=kept))
        return True

    def write_volume_plan(self, plan: VolumePlan) -> None:
        """What ``tidesched run`` writes before a pod's Binding: each chosen PV names its claim,
        each claim to provision names the node."""
        for pv_name, claim_key, claim_uid in plan.static:
            pv = self.get("PersistentVolume", pv_name)
            if pv is not None:
                ns, name = split_key(claim_key)
                ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": ns, "name": name,
                       "uid": claim_uid}
                self.put("PersistentVolume", with_section(pv, "spec", claimRef=ref))
        for claim_key in plan.provision:
            claim = self.get("PersistentVolumeClaim", claim_key)
            if claim is not None:
                self.put("PersistentVolumeClaim", with_meta_map(claim, "annotations", {SELECTED_NODE: plan.node}))

    def schedule_finish(self, key: str, pod: Mapping[str, Any]) -> None:
        """Queue the end of a running pod's run time (``sim.tidesched.io/duration``), if it has one."""
        ann = annotations(pod)
        raw = ann.get(DURATION_ANNOTATION)
        if raw is None:
            return
        try:
            run = parse_duration(raw, f"Pod {key}: {DURATION_ANNOTATION}")
        except ScenarioError:
            return  # checked on load for scenario objects; a bad value simply runs forever
        if self.duration_jitter:
            run *= 1.0 + self.rng.uniform(-self.duration_jitter, self.duration_jitter)
        code = 0
        try:
            code = int(str(ann.get(EXIT_CODE_ANNOTATION, "0")))
        except ValueError:
            code = 0
        self.clock.after(
            run, PodFinish(key, str(meta(pod).get("uid")), "Failed" if code else "Succeeded", code)
        )

    def finish_pod(self, key: str, phase: str, exit_code: int, uid: str | None = None) -> bool:
        """A running (or bound) pod ends with ``phase``; its node resources are free at once."""
        pod = self.get("Pod", key)
        if pod is None or (uid is not None and str(meta(pod).get("uid")) != uid):
            return False
        if is_deleting(pod) or pod_phase(pod) in FINISHED_POD_PHASES:
            return False
        new = dict(pod)
        new["status"] = dict(
            status(pod),
            phase=phase,
            containerStatuses=[{"name": "main", "state": {"terminated": {"exitCode": exit_code}}}],
        )
        self.put("Pod", new)
        return True

    def delete_pod(self, key: str, now: float, cause: str, grace: float | None = None) -> bool:
        """Delete a pod the Kubernetes way: a pod that holds no node resources goes at once;
        a running one is marked (deletionTimestamp) and goes after the grace period."""
        pod = self.get("Pod", key)
        if pod is None or is_deleting(pod):
            return False
        g = self.deletion_grace if grace is None else grace
        if not pod_node(pod) or pod_phase(pod) in FINISHED_POD_PHASES or g <= 0:
            self.remove("Pod", key, cause)
            return True
        new = with_section(pod, "metadata", deletionTimestamp=iso(now), deletionGracePeriodSeconds=int(g))
        self.deleting_since[key] = now
        self.put("Pod", new, cause)
        self.clock.after(g, PodGone(key, str(meta(pod).get("uid")), cause))
        return True

    def pod_gone(self, ev: PodGone) -> bool:
        pod = self.get("Pod", ev.key)
        if pod is None or str(meta(pod).get("uid")) != ev.uid:
            return False
        self.remove("Pod", ev.key, ev.cause)
        return True

    # -- nodes and queues ----------------------------------------------------------------

    def remove_node(self, name: str) -> bool:
        """The node disappears; its pods are gone at once (pod GC), their controllers react."""
        if name not in self.objects["Node"]:
            return False
        for key in sorted(self.pods_by_node.get(name, ())):
            self.remove("Pod", key, "node")
        self.remove("Node", name)
        return True

    def set_node(
        self,
        name: str,
        *,
        labels_change: Mapping[str, str | None] | None = None,
        allocatable: Mapping[str, str | None] | None = None,
        ready: bool | None = None,
        unschedulable: bool | None = None,
    ) -> bool:
        node = self.get("Node", name)
        if node is None:
            return False
        new: dict[str, Any] = dict(node)
        if labels_change:
            new = with_meta_map(new, "labels", labels_change)
        st = dict(status(new))
        if allocatable:
            alloc = as_map(st.get("allocatable") or st.get("capacity"))
            for k, v in allocatable.items():
                if v is None:
                    alloc.pop(k, None)
                else:
                    alloc[k] = v
            st["allocatable"] = alloc
        if ready is not None:
            conds = [
                c for c in (st.get("conditions") or []) if isinstance(c, Mapping) and c.get("type") != "Ready"
            ]
            conds.append({"type": "Ready", "status": "True" if ready else "False"})
            st["conditions"] = conds
        new["status"] = st
        if unschedulable is not None:
            new = with_section(new, "spec", unschedulable=True if unschedulable else None)
        self.put("Node", new)
        return True

    # -- applying a session's decisions ---------------------------------------------------

    def apply(self, d: Decisions, now: float) -> Applied:
        """Apply one session's decisions at time ``now``."""
        out = Applied()
        for key in sorted(d.evicted):
            if self.delete_pod(key, now, "evict", self.eviction_grace):
                out.evicted.append((key, d.eviction_reasons.get(key, "")))
            else:
                out.stale.append(key)
        for key, node in sorted(d.bound.items()):
            writes = d.claim_writes.get(key)
            if writes is not None and not write_claims(self, key, writes, iso(now)):
                out.stale.append(key)
                continue
            plan = d.volume_bindings.get(key)
            if plan is not None:
                self.write_volume_plan(plan)
            if self.bind_pod(key, node, now, d.bind_annotations.get(key)):
                out.bound.append((key, node))
            else:
                out.stale.append(key)
        for key, node in d.nominated.items():  # status.nominatedNodeName, as run's status writer
            pod = self.get("Pod", key)
            if pod is not None and not spec(pod).get("nodeName"):
                self.put("Pod", with_section(pod, "status", nominatedNodeName=node))
        for key in d.ungated:  # as run's gate remover: only while Volcano's gate is the last one
            pod = self.get("Pod", key)
            if pod is not None and only_volcano_gate(raw_gate_names(spec(pod))) and self.remove_gates(key, [QUEUE_ALLOCATION_GATE]):
                out.ungated.append(key)
        settled = self._settled_groups
        for key, phase in sorted(d.podgroups.items()):
            pg = self.get("PodGroup", key)
            if pg is None:
                settled.pop(key, None)
                continue
            conds = d.podgroup_conditions.get(key)
            said = _said(conds)
            last = settled.get(key)
            if last is not None and last[0] is pg and last[1] == phase and last[2] == said:
                continue
            st = status(pg)
            changes: dict[str, Any] = {}
            if st.get("phase") != phase:
                changes["phase"] = phase
            if conds:
                merged = _merge_conditions(st.get("conditions"), conds, now)
                if merged is not None:
                    changes["conditions"] = merged
            if changes:
                settled.pop(key, None)
                new = dict(pg)
                new["status"] = dict(st, **changes)
                self.put("PodGroup", new)
                out.podgroups_changed += 1
            else:
                settled[key] = (pg, phase, said)
        return out


def _said(conds: Any) -> tuple[Any, ...]:
    """What a session's conditions say (not their transition id, which is new each session),
    as the merge compares them."""
    return tuple(map(_cond_sig, conds)) if conds else ()


def _cond_sig(c: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (str(c.get("type")), str(c.get("status")), str(c.get("reason") or ""), str(c.get("message") or ""))


def _unchanged(existing: Any, new: list[dict[str, Any]]) -> bool:
    """Every new condition already there with the same content (the common case: a running
    gang's Scheduled condition restated each session), found without building the merge."""
    if not existing or not isinstance(existing, list):
        return False
    for c in new:
        t = str(c.get("type"))
        old = None
        for e in existing:
            if isinstance(e, Mapping) and str(e.get("type")) == t:
                old = e  # the last of a type wins, as in the merge's by-type map
        if old is None or _cond_sig(old) != _cond_sig(c):
            return False
    return True


def _merge_conditions(existing: Any, new: list[dict[str, Any]], now: float) -> list[dict[str, Any]] | None:
    """Existing conditions updated with the session's; None when nothing changed in content
    (the session's transition id alone is not a change)."""
    if _unchanged(existing, new):
        return None
    current = [c for c in (existing or []) if isinstance(c, Mapping)]
    by_type = {str(c.get("type")): c for c in current}
    changed = False
    for c in new:
        t = str(c.get("type"))
        old = by_type.get(t)
        if old is not None and _cond_sig(old) == _cond_sig(c):
            continue
        changed = True
        by_type[t] = {
            "type": t,
            "status": c.get("status"),
            "reason": c.get("reason") or "",
            "message": c.get("message") or "",
            "transitionID": c.get("transitionID") or "",
            "lastTransitionTime": iso(now),
        }
    if not changed:
        return None
    return [by_type[t] for t in sorted(by_type)]
