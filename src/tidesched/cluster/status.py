"""Writing what a session concluded back to the cluster, off the session path (K8S-2).

* :class:`EventRecorder` — Events on Pods, PodGroups and Queues. Aggregated like client-go's
  event correlator: one Event object per (object, type, reason); a repeat within ``interval``
  is only counted, and after it the Event is PATCHed with the new count, message and
  ``lastTimestamp``. A pod pending for an hour therefore has one FailedScheduling event with a
  count, not one event per session. ``Scheduled`` events are collected for ``batch_interval``:
  when more than ``similar_limit`` pods of one owner (ReplicaSet, Volcano Job, …) were bound in
  that window, one event on the owner names them instead of one per pod (pods without an owner:
  per namespace, on the last pod, "(combined from similar events)") — client-go's rule for
  similar events (more than 10 within its window are combined), so that a mass submission does
  not double the API server's write load.
* :class:`StatusWriter` — PodGroup status (phase, conditions, running/succeeded/failed) and Queue
  ``status.allocated`` through the ``status`` subresource (a whole-object PUT for PodGroups when
  the CRD has none, as Volcano's does not) with optimistic concurrency: a 409 Conflict re-reads
  the object and retries; the ``PodScheduled=False`` condition (reason
  ``Unschedulable``, or the session's own such as ``GangTimeout``, and the session's message, the same text ``explain`` prints) on pods left
  pending. Only changes are written. The writer always works on the latest session's decisions
  (older ones still queued are dropped), so a slow API server cannot build a backlog.
  Bindings go first: while binds are in flight, writes that only report (a PodGroup whose pods
  all exist, a pod's condition) wait, up to ``yield_to_binds`` seconds from when they first
  waited, or until a newer session's decisions replace them. A PodGroup with fewer pods than its
  minMember is written at once: its controller (Volcano's Job controller) creates the pods only
  once the group is Inqueue. On a 2-core control plane the PodGroup PUTs took a sixth of the API
  server's time in a burst of 5,000 binds.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections import Counter, OrderedDict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Iterable, Mapping

from tidesched.framework.decisions import Decisions
from tidesched.cluster.api import ApiException, Kube, error_message
from tidesched.cluster.store import (
    HYPERNODE,
    PDB,
    POD,
    PODGROUP,
    QUEUE,
    TOPOLOGY_GROUP_VERSION,
    VOLCANO_GROUP,
    VOLCANO_VERSION,
    ClusterStore,
)
from tidesched.model.objects import GROUP_NAME_ANNOTATION, parse_time, pod_task_status
from tidesched.model.problems import Event
from tidesched.model.quantity import QuantityError, parse_quantity
from tidesched.model.status import TaskStatus

log = logging.getLogger("tidesched.cluster.status")

COMPONENT = "tidesched"
MAX_MESSAGE = 1024  # the API server's limit on an event note
_API_VERSIONS = {
    "Pod": "v1",
    "Node": "v1",
    "PodGroup": f"{VOLCANO_GROUP}/{VOLCANO_VERSION}",
    "Queue": f"{VOLCANO_GROUP}/{VOLCANO_VERSION}",
    "PodDisruptionBudget": "policy/v1",
    "HyperNode": TOPOLOGY_GROUP_VERSION,
}
_STORE_KEYS = {"Pod": POD, "PodGroup": PODGROUP, "Queue": QUEUE, "Node": "Node", "PodDisruptionBudget": PDB, "HyperNode": HYPERNODE}
_NAMESPACED = frozenset({"Pod", "PodGroup", "PodDisruptionBudget"})


def rfc3339(ts: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if ts is None else ts))


# ------------------------------------------------------------------------------------------
# Events


@dataclass
class _Series:
    event_name: str | None  # None until the first POST succeeded
    namespace: str
    count: int
    unsent: int
    last_write: float
    message: str


class EventRecorder:
    """Asynchronous, aggregated Event writer. ``record`` never blocks; when the queue is full
    the event is dropped and counted, as client-go's broadcaster does."""

    def __init__(
        self,
        kube: Kube,
        store: ClusterStore,
        *,
        interval: float = 600.0,
        instance: str = "",
        queue_size: int = 4096,
        cache_size: int = 4096,
        batch_interval: float = 1.0,
        similar_limit: int = 10,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.store = store
        self.interval = interval
        self.batch_interval = batch_interval
        self.similar_limit = similar_limit
        self._scheduled: list[tuple[str, str]] = []  # (pod key, node) bound since the last batch
        self._batch_due = 0.0
        self.clock = clock  # for the aggregation interval; tests pass a manual one
        self.instance = instance or f"{COMPONENT}-{uuid.uuid4().hex[:8]}"
        self.cache_size = cache_size
        self.dropped = 0
        self.written = 0
        self._series: OrderedDict[tuple[str, str, str, str, str], _Series] = OrderedDict()
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[tuple[str, str, str, str, str], dict[str, Any]] | None] = queue.Queue(
            queue_size
        )
        self._thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            pass
        self._thread.join(timeout)

    def flush(self, timeout: float = 5.0) -> bool:
        """Write the pending batch of Scheduled events and wait until every queued event is
        written (tests, shutdown)."""
        self._flush_scheduled()
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._queue.unfinished_tasks

    def record_all(self, events: Iterable[Event]) -> None:
        for e in events:
            self.record(e.kind, e.namespace, e.name, e.type, e.reason, e.message)

    def record(self, kind: str, namespace: str, name: str, type_: str, reason: str, message: str) -> None:
        store_kind = _STORE_KEYS.get(kind)
        if store_kind is None:
            return  # malformed-object warnings with no known kind: logged by the runner only
        key = f"{namespace}/{name}" if kind in _NAMESPACED else name
        obj = self.store.get(store_kind, key)
        if obj is None:
            return  # e.g. a PodGroup synthesised for a bare pod: the pod carries its own events
        md = obj.get("metadata") or {}
        involved = {"apiVersion": _API_VERSIONS[kind], "kind": kind, "name": name, "uid": md.get("uid", "")}
        if kind in _NAMESPACED:
            involved["namespace"] = namespace
        self._enqueue(
            (kind, namespace, name, type_, reason), involved, type_, reason, message,
            namespace if kind in _NAMESPACED else "default",
        )

    def _enqueue(
        self,
        agg: tuple[str, str, str, str, str],
        involved: dict[str, Any],
        type_: str,
        reason: str,
        message: str,
        event_namespace: str,
    ) -> None:
        now = self.clock()
        message = message[:MAX_MESSAGE]
        with self._lock:
            s = self._series.get(agg)
            if s is not None:
                self._series.move_to_end(agg)
                s.unsent += 1
                s.message = message
                if now - s.last_write < self.interval:
                    return  # aggregated: counted, written later with the new count
                s.last_write = now
            else:
                s = _Series(None, event_namespace, 0, 1, now, message)
                self._series[agg] = s
                while len(self._series) > self.cache_size:
                    self._series.popitem(last=False)
        try:
            self._queue.put_nowait((agg, {"involved": involved, "type": type_, "reason": reason}))
        except queue.Full:
            self.dropped += 1

    def record_scheduled(self, key: str, node: str) -> None:
        """A pod was bound; its ``Scheduled`` event goes out with the next batch."""
        with self._lock:
            self._scheduled.append((key, node))

    def _flush_scheduled(self) -> None:
        with self._lock:
            batch, self._scheduled = self._scheduled, []
        # Pods without a controller are grouped per namespace, as client-go's aggregator groups
        # similar events (same kind, namespace, type and reason).
        groups: dict[tuple[str, str, str, str, str], list[tuple[str, str]]] = {}
        for key, node in batch:
            ns = key.split("/", 1)[0]
            owner = _controller(self.store.get(POD, key)) or ("v1", "Pod", "", "")
            groups.setdefault((ns, *owner), []).append((key, node))
        single: list[tuple[str, str]] = []
        for (ns, api_version, kind, name, uid), pods in sorted(groups.items()):
            if len(pods) <= self.similar_limit:
                single.extend(pods)
                continue
            pods.sort()
            nodes = len({n for _, n in pods})
            shown = ", ".join(f"{k.split('/', 1)[1]} → {n}" for k, n in pods[:5])
            message = f"Successfully assigned {len(pods)} pods to {nodes} nodes: {shown}{', …' if len(pods) > 5 else ''}"
            if name:
                involved = {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "namespace": ns}
                self._enqueue((f"owner:{kind}", ns, name, "Normal", "Scheduled"), involved, "Normal", "Scheduled", message, ns)
            else:
                # No owner to carry it: on the last pod, marked as client-go marks combined events.
                ns, last = pods[-1][0].split("/", 1)
                self.record("Pod", ns, last, "Normal", "Scheduled", f"(combined from similar events): {message}")
        for key, node in single:
            ns, name = key.split("/", 1)
            self.record("Pod", ns, name, "Normal", "Scheduled", f"Successfully assigned {key} to {node}")

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=self.batch_interval)
            except queue.Empty:
                item = ()
            if self._scheduled and time.monotonic() >= self._batch_due:
                self._batch_due = time.monotonic() + self.batch_interval
                try:
                    self._flush_scheduled()
                except Exception as exc:  # noqa: BLE001 - an event is never worth a crash
                    log.warning("batching Scheduled events failed: %s", exc)
            if item == ():
                continue
            try:
                if item is None:
                    return
                self._write(*item)
            except Exception as exc:  # noqa: BLE001 - an event is never worth a crash
                log.warning("writing event failed: %s", error_message(exc))
            finally:
                self._queue.task_done()

    def _write(self, agg: tuple[str, str, str, str, str], info: dict[str, Any]) -> None:
        with self._lock:
            s = self._series.get(agg)
            if s is None or s.unsent == 0:
                return
            count, unsent, message, event_name = s.count, s.unsent, s.message, s.event_name
        now = rfc3339()
        if event_name is not None:
            patch = {"count": count + unsent, "message": message, "lastTimestamp": now}
            try:
                self.kube.patch(f"/api/v1/namespaces/{s.namespace}/events/{event_name}", patch)
                self._sent(agg, event_name, count + unsent, unsent)
                return
            except ApiException as exc:
                if exc.status != 404:  # expired (events have a TTL): start a new series
                    raise
        name = f"{agg[2]}.{uuid.uuid4().hex[:16]}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": s.namespace},
            "involvedObject": info["involved"],
            "type": info["type"],
            "reason": info["reason"],
            "message": message,
            "count": unsent,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
        }
        self.kube.post(f"/api/v1/namespaces/{s.namespace}/events", body)
        self._sent(agg, name, unsent, unsent)

    def _sent(self, agg: tuple[str, str, str, str, str], name: str, count: int, unsent: int) -> None:
        self.written += 1
        with self._lock:
            s = self._series.get(agg)
            if s is not None:
                s.event_name, s.count = name, count
                s.unsent -= unsent


def _controller(pod: dict[str, Any] | None) -> tuple[str, str, str, str] | None:
    """(apiVersion, kind, name, uid) of the pod's controlling owner, if it has one."""
    for ref in ((pod or {}).get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") and ref.get("kind") and ref.get("name"):
            return (str(ref.get("apiVersion") or ""), str(ref["kind"]), str(ref["name"]), str(ref.get("uid") or ""))
    return None


# ------------------------------------------------------------------------------------------
# Status


def _canon_conditions(conds: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """Conditions compared as Volcano's isPodGroupConditionsUpdated does: transition id and time
    do not count as a change."""
    return sorted(
        (str(c.get("type")), str(c.get("status")), str(c.get("reason") or ""), str(c.get("message") or ""))
        for c in conds
    )


def merge_conditions(old: list[dict[str, Any]], new: list[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    """New conditions replace old ones of the same type; ``lastTransitionTime`` is kept when the
    status did not change (Kubernetes convention)."""
    out = [dict(c) for c in old]
    for cond in new:
        c = {k: v for k, v in cond.items() if v is not None}
        for i, prev in enumerate(out):
            if prev.get("type") == c.get("type"):
                same = prev.get("status") == c.get("status")
                c.setdefault("lastTransitionTime", prev.get("lastTransitionTime") if same else now)
                out[i] = c
                break
        else:
            c.setdefault("lastTransitionTime", now)
            out.append(c)
    return out


def _canon_resources(rl: Mapping[str, Any] | None) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for k, v in (rl or {}).items():
        try:
            out[k] = parse_quantity(v)
        except (QuantityError, TypeError):
            out[k] = Decimal(-1)
    return out


class _Superseded(Exception):
    """A newer session's decisions arrived while a write waited for the binds."""


def _min_member(podgroup: dict[str, Any] | None) -> int:
    try:
        return int(((podgroup or {}).get("spec") or {}).get("minMember") or 0)
    except (TypeError, ValueError):
        return 0


def podgroup_counts(pods: Iterable[dict[str, Any]]) -> dict[str, Counter[str]]:
    """running/succeeded/failed per PodGroup key, by the core's own pod-state rule, and ``pods``:
    every pod of the group, whatever its state."""
    counts: dict[str, Counter[str]] = {}
    for pod in pods:
        md = pod.get("metadata") or {}
        group = (md.get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
        if not group:
            continue
        try:
            deleting = parse_time(md.get("deletionTimestamp"), "deletionTimestamp") > 0
        except ValueError:
            deleting = False
        st = pod_task_status(
            str((pod.get("status") or {}).get("phase") or "Pending"),
            str((pod.get("spec") or {}).get("nodeName") or ""),
            deleting,
        )
        c = counts.setdefault(f"{md.get('namespace') or 'default'}/{group}", Counter())
        c["pods"] += 1
        if st == TaskStatus.RUNNING:
            c["running"] += 1
        elif st == TaskStatus.SUCCEEDED:
            c["succeeded"] += 1
        elif st == TaskStatus.FAILED:
            c["failed"] += 1
    return counts


@dataclass
class StatusBatch:
    decisions: Decisions
    card_allocated: dict[str, dict[str, str]]  # queue -> card model -> count (capacity-card)


class StatusWriter:
    """Writes PodGroup/Queue status and pod conditions for the latest session on its own thread."""

    def __init__(
        self,
        kube: Kube,
        store: ClusterStore,
        *,
        conflict_retries: int = 5,
        enqueue_ttl: float = 10.0,
        binds_in_flight: Callable[[], int] | None = None,
        yield_to_binds: float = 5.0,
    ) -> None:
        self.kube = kube
        self.store = store
        self.conflict_retries = conflict_retries
        self.binds_in_flight = binds_in_flight
        self.yield_to_binds = yield_to_binds
        self._yielding = False  # writes now are the ones that wait for binds
        self._yield_since: float | None = None  # when this batch's (or a superseded one's) writes first waited
        # After a PodGroup's write out of Pending, how long the watch has to show it before the
        # group counts as work again (ClusterStore.enqueue_written).
        self.enqueue_ttl = enqueue_ttl
        self.writes = 0
        self.conflicts = 0
        self.errors = 0
        self.no_status_subresource: set[str] = set()
        self._latest: StatusBatch | None = None
        self._busy = False
        self._cond = threading.Condition()
        self._stop = False
        # key -> (resourceVersion we replaced, status we wrote): the watch may lag our write.
        self._written: dict[str, tuple[str, Any]] = {}
        self._thread = threading.Thread(target=self._run, name="status-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout)

    def submit(self, batch: StatusBatch) -> None:
        with self._cond:
            self._latest = batch  # an older unwritten batch is superseded
            self._cond.notify_all()

    def flush(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._latest is not None or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._latest is None and not self._stop:
                    self._cond.wait()
                if self._stop or self._latest is None:
                    return
                batch, self._latest = self._latest, None
                self._busy = True
            try:
                self.write(batch)
            except _Superseded:
                pass  # the newer batch carries these objects' latest status
            except Exception as exc:  # noqa: BLE001 - the next session retries
                self.errors += 1
                log.warning("status write failed: %s", error_message(exc))
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    # -- one batch ------------------------------------------------------------------------

    def write(self, batch: StatusBatch) -> None:
        d = batch.decisions
        if len(self._written) > 100_000:  # keys of long-gone objects; cheap to rebuild
            self._written.clear()
        counts = podgroup_counts(self.store.items(POD))
        now = rfc3339()
        urgent = {
            k for k in d.podgroups if counts.get(k, Counter())["pods"] < _min_member(self.store.get(PODGROUP, k))
        }
        for name, allocated in sorted(d.queue_allocated.items()):
            desired = dict(allocated)
            desired.update(batch.card_allocated.get(name, {}))
            self._guarded(self._write_queue, name, desired)
        for later in (False, True):
            self._yielding = later
            try:
                for key, phase in sorted(d.podgroups.items()):
                    if (key in urgent) == later:
                        continue
                    ok = self._guarded(
                        self._write_podgroup,
                        key,
                        phase,
                        d.podgroup_conditions.get(key, []),
                        counts.get(key, Counter()),
                        now,
                    )
                    # A group a later session put back to Pending is work again at once, like a failed write.
                    self.store.enqueue_written(key, ok and phase != "Pending", self.enqueue_ttl)
            finally:
                self._yielding = False
        self._yielding = True
        try:
            for e in d.events:
                if e.kind == "Pod" and e.reason == "FailedScheduling":
                    key = f"{e.namespace}/{e.name}"
                    reason = d.pod_condition_reasons.get(key, "Unschedulable")
                    self._guarded(self._write_pod_condition, key, e.message, now, reason)
            for key, node in sorted(d.nominated.items()):
                self._guarded(self._write_nominated_node, key, node)
        finally:
            self._yielding = False
        self._yield_since = None

    def _wait_for_binds(self) -> None:
        """Before a write that only reports: let the binds in flight go first (see the module)."""
        if not self._yielding or self.binds_in_flight is None:
            return
        if self._yield_since is None:
            self._yield_since = time.monotonic()
        while self.binds_in_flight() and time.monotonic() - self._yield_since < self.yield_to_binds:
            with self._cond:
                if self._latest is not None or self._stop:
                    raise _Superseded
                self._cond.wait(0.05)

    def _guarded(self, fn: Any, *args: Any) -> bool:
        """False when the write failed (logged and counted)."""
        try:
            return fn(*args) is not False
        except _Superseded:
            raise
        except Exception as exc:  # noqa: BLE001 - one object's failure must not stop the others
            self.errors += 1
            log.warning("status write for %s failed: %s", args[0], error_message(exc))
            return False

    def _skip(self, key: str, obj: dict[str, Any], status: dict[str, Any], same: Any) -> bool:
        """We already wrote an equivalent status over exactly this version of the object, and
        the watch has not brought our write back yet."""
        written = self._written.get(key)
        return (
            written is not None
            and written[0] == obj["metadata"].get("resourceVersion")
            and same(written[1], status)
        )

    def _update_status(
        self,
        key: str,
        obj: dict[str, Any],
        build: Any,
        same: Any,
        path: str,
        plural: str,
    ) -> bool:
        """Optimistic-concurrency loop: build the new status on the freshest object we have;
        on 409 re-read and try again. The ``status`` subresource is used when the CRD has one;
        Volcano's PodGroup CRD has none, so there the whole object is PUT (with the same
        resourceVersion check), as vc-scheduler does."""
        for attempt in range(self.conflict_retries):
            status = build(obj)
            if same(obj.get("status") or {}, status):
                return True
            if attempt == 0 and self._skip(key, obj, status, same):
                return True
            body = {**obj, "status": status}
            self._wait_for_binds()
            try:
                self.kube.put(path if plural in self.no_status_subresource else f"{path}/status", body)
            except ApiException as exc:
                if exc.status == 409:
                    self.conflicts += 1
                    obj = self.kube.get(path)
                    continue
                if exc.status == 404 and plural not in self.no_status_subresource:
                    obj = self.kube.get(path)  # 404 again if the object itself is gone
                    log.info("%s have no status subresource: updating whole objects", plural)
                    self.no_status_subresource.add(plural)
                    continue
                raise
            self.writes += 1
            self._written[key] = (obj["metadata"].get("resourceVersion"), status)
            return True
        log.warning("status of %s: gave up after %d conflicts", key, self.conflict_retries)
        return False

    def _write_podgroup(
        self, key: str, phase: str, conditions: list[dict[str, Any]], counts: Counter[str], now: str
    ) -> bool:
        obj = self.store.get(PODGROUP, key)
        if obj is None:
            return True  # synthesised for a bare pod; no API object to write
        ns, name = key.split("/", 1)

        def build(o: dict[str, Any]) -> dict[str, Any]:
            st = dict(o.get("status") or {})
            st["phase"] = phase
            st["conditions"] = merge_conditions(list(st.get("conditions") or []), conditions, now)
            for f in ("running", "succeeded", "failed"):
                if counts[f] or f in st:
                    st[f] = counts[f]
            return st

        def same(old: dict[str, Any], new: dict[str, Any]) -> bool:
            return (
                old.get("phase") == new.get("phase")
                and _canon_conditions(old.get("conditions") or []) == _canon_conditions(new["conditions"])
                and all(
                    int(old.get(f) or 0) == int(new.get(f) or 0) for f in ("running", "succeeded", "failed")
                )
            )

        return self._update_status(
            key, obj, build, same, f"/apis/{VOLCANO_GROUP}/{VOLCANO_VERSION}/namespaces/{ns}/podgroups/{name}", "podgroups"
        )

    def _write_queue(self, name: str, allocated: dict[str, str]) -> None:
        obj = self.store.get(QUEUE, name)
        if obj is None:
            return  # the implicit default queue of a cluster without the Queue object

        def build(o: dict[str, Any]) -> dict[str, Any]:
            return {**(o.get("status") or {}), "allocated": allocated}

        def same(old: dict[str, Any], new: dict[str, Any]) -> bool:
            return _canon_resources(old.get("allocated")) == _canon_resources(new["allocated"])

        self._update_status(
            name, obj, build, same, f"/apis/{VOLCANO_GROUP}/{VOLCANO_VERSION}/queues/{name}", "queues"
        )

    def _write_nominated_node(self, key: str, node: str) -> None:
        """``status.nominatedNodeName`` of a pod pipelined where victims were evicted for it:
        allocate tries that node first next session (vc-scheduler writes it the same way)."""
        pod = self.store.get(POD, key)
        if pod is None or (pod.get("spec") or {}).get("nodeName") or self.store.is_assumed(key):
            return
        if (pod.get("status") or {}).get("nominatedNodeName") == node:
            return
        if self._written.get(key) == (pod["metadata"].get("resourceVersion"), ("nominated", node)):
            return
        ns, name = key.split("/", 1)
        self._wait_for_binds()
        self.kube.patch(f"/api/v1/namespaces/{ns}/pods/{name}/status", {"status": {"nominatedNodeName": node}},
                        strategic=True)
        self.writes += 1
        self._written[key] = (pod["metadata"].get("resourceVersion"), ("nominated", node))

    def _write_pod_condition(self, key: str, message: str, now: str, reason: str = "Unschedulable") -> None:
        pod = self.store.get(POD, key)
        if pod is None or (pod.get("spec") or {}).get("nodeName") or self.store.is_assumed(key):
            return
        for c in (pod.get("status") or {}).get("conditions") or []:
            if (
                c.get("type") == "PodScheduled"
                and c.get("status") == "False"
                and c.get("reason") == reason
                and c.get("message") == message
            ):
                return
        if self._written.get(key) == (pod["metadata"].get("resourceVersion"), (reason, message)):
            return
        ns, name = key.split("/", 1)
        patch = {
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": reason,
                        "message": message,
                        "lastTransitionTime": now,
                    }
                ]
            }
        }
        self._wait_for_binds()
        # Strategic merge: the condition joins the pod's others by type instead of replacing them.
        self.kube.patch(f"/api/v1/namespaces/{ns}/pods/{name}/status", patch, strategic=True)
        self.writes += 1
        self._written[key] = (pod["metadata"].get("resourceVersion"), (reason, message))
