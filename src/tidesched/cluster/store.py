"""Informers: list+watch of the objects the scheduler reads, kept as raw dicts (K8S-1).

One :class:`Informer` thread per resource type lists (in pages) and then watches from the
list's ``resourceVersion`` with bookmarks, exactly as client-go's reflector does:

* a watch that ends normally (server ``timeoutSeconds``) is reopened from the last version seen;
* ``410 Gone`` / ``Expired`` — on the watch or on a list continuation — means the version was
  compacted away: relist from scratch and replace the cache atomically;
* transport errors and 5xx reconnect with capped, jittered exponential backoff.

The :class:`ClusterStore` holds the objects plus the adapter's own *overlays*: pods assumed
bound (a bind is in flight or done but not yet seen on the watch) and pods being evicted. The
snapshot handed to the scheduling core sees them as Bound / Releasing, so the next session does
not place a pod twice or count a node's resources as free twice; the watch confirms (the
overlay is dropped when the API object shows it) and failures forget them. Storage objects a
bind is writing (a PV given its claim, a claim given its node) are overlaid the same way
(:meth:`ClusterStore.assume_object`), as kube-scheduler's assume cache does.

``synced()`` is true only once every informer has completed its first full list: the runner
never schedules from a partial node list (seed ``002``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from tidesched.cluster.api import ApiException, Kube, json_lines, status_of
from tidesched.cluster.claim_overlays import CLAIM, ClaimOverlays
from tidesched.model.gates import only_volcano_gate, raw_gate_names

log = logging.getLogger("tidesched.cluster.store")

NODE, POD, PODGROUP, QUEUE, PRIORITY_CLASS, PDB, QUOTA, NUMATOPO, HYPERNODE = (
    "Node",
    "Pod",
    "PodGroup",
    "Queue",
    "PriorityClass",
    "PodDisruptionBudget",
    "ResourceQuota",
    "Numatopology",
    "HyperNode",
)
PVC, PV, STORAGE_CLASS, CSI_NODE = "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode"
VOLCANO_GROUP, VOLCANO_VERSION = "scheduling.volcano.sh", "v1beta1"
TOPOLOGY_GROUP_VERSION = "topology.volcano.sh/v1alpha1"  # HyperNodes (Volcano's CRD; optional)


@dataclass(frozen=True)
class ResourceType:
    kind: str
    api_version: str
    namespaced: bool
    path: str  # the collection across all namespaces
    # A CRD a cluster may not have: while the API answers 404 the kind counts as listed and
    # empty (the scheduler does not wait for it), and the informer looks again now and then.
    optional: bool = False


DRA_API = "resource.k8s.io/v1"


RESOURCE_TYPES: dict[str, ResourceType] = {
    r.kind: r
    for r in (
        ResourceType(NODE, "v1", False, "/api/v1/nodes"),
        ResourceType(POD, "v1", True, "/api/v1/pods"),
        ResourceType(
            PODGROUP,
            f"{VOLCANO_GROUP}/{VOLCANO_VERSION}",
            True,
            f"/apis/{VOLCANO_GROUP}/{VOLCANO_VERSION}/podgroups",
        ),
        ResourceType(QUEUE, f"{VOLCANO_GROUP}/{VOLCANO_VERSION}", False, f"/apis/{VOLCANO_GROUP}/{VOLCANO_VERSION}/queues"),
        ResourceType(PRIORITY_CLASS, "scheduling.k8s.io/v1", False, "/apis/scheduling.k8s.io/v1/priorityclasses"),
        ResourceType(PDB, "policy/v1", True, "/apis/policy/v1/poddisruptionbudgets"),
        ResourceType(QUOTA, "v1", True, "/api/v1/resourcequotas"),  # the resourcequota plugin
        # the numa-aware plugin; Volcano's chart installs the CRD, a cluster without it has none
        ResourceType(NUMATOPO, "nodeinfo.volcano.sh/v1alpha1", False, "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies", optional=True),
        # Storage, for the predicates' volume checks and the volume binding before a pod's bind
        ResourceType(PVC, "v1", True, "/api/v1/persistentvolumeclaims"),
        ResourceType(PV, "v1", False, "/api/v1/persistentvolumes"),
        ResourceType(STORAGE_CLASS, "storage.k8s.io/v1", False, "/apis/storage.k8s.io/v1/storageclasses"),
        ResourceType(CSI_NODE, "storage.k8s.io/v1", False, "/apis/storage.k8s.io/v1/csinodes"),
        ResourceType(HYPERNODE, TOPOLOGY_GROUP_VERSION, False, f"/apis/{TOPOLOGY_GROUP_VERSION}/hypernodes", optional=True),
        # Dynamic Resource Allocation (docs/dra.md)
        ResourceType("DeviceClass", DRA_API, False, f"/apis/{DRA_API}/deviceclasses", True),
        ResourceType("ResourceSlice", DRA_API, False, f"/apis/{DRA_API}/resourceslices", True),
        ResourceType("ResourceClaim", DRA_API, True, f"/apis/{DRA_API}/resourceclaims", True),
        ResourceType("ResourceClaimTemplate", DRA_API, True, f"/apis/{DRA_API}/resourceclaimtemplates", True),
    )
}


def object_key(obj: dict[str, Any], namespaced: bool) -> str:
    md = obj.get("metadata") or {}
    return f"{md.get('namespace') or 'default'}/{md.get('name')}" if namespaced else str(md.get("name"))


def _rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


@dataclass
class _Assumed:
    node: str
    uid: str
    expires: float | None = None  # set once the bind call returned; None while in flight
    annotations: Mapping[str, str] | None = None  # written with the binding (vGPU devices)


@dataclass
class ClusterStore(ClaimOverlays):
    """Current objects by kind and key (``ns/name`` or ``name``), plus overlays."""

    kinds: tuple[str, ...] = tuple(RESOURCE_TYPES)
    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    assumed: dict[str, _Assumed] = field(default_factory=dict)
    releasing: dict[str, float] = field(default_factory=dict)  # pod key -> overlay expiry
    released_at: dict[str, float] = field(default_factory=dict)  # pod key -> wall time of the eviction
    # PodGroup key -> expiry: a session moved it out of Pending and its status write has not
    # come back on the watch yet (see assume_enqueued). Not an overlay: sessions still read the
    # API's phase; only has_work() looks at it.
    enqueued: dict[str, float] = field(default_factory=dict)
    version: int = 0  # bumped on every change; lets waiters notice progress
    # Whose pods count as work (``--scheduler-name``); None: every pod.
    scheduler_names: frozenset[str] | None = None
    # ResourceClaim key -> the status a bind in flight writes (allocation, reservedFor), the
    # pods it reserves for, and its expiry (None while in flight): sessions see the claim
    # allocated from the moment its pod is assumed bound, as kube-scheduler's assume cache.
    claims_assumed: dict[str, tuple[dict[str, Any], frozenset[str], float | None]] = field(default_factory=dict)
    # (kind, key) -> the object as a bind in flight is writing it (a PV with its claimRef, a claim
    # with its selected node), shown instead of the API's until the watch brings another version.
    assumed_objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.objects = {k: {} for k in self.kinds}
        self._synced: set[str] = set()
        self._cond = threading.Condition()
        # Kept up to date on every event so the runner can tell in O(1) whether a session could
        # decide anything: pods of ours waiting for a node, PodGroups waiting for enqueue.
        self._pending_pods: set[str] = set()
        self._pending_groups: set[str] = set()
        # Keys changed (objects or overlays) since the scheduling loop last took them.
        self._dirty: dict[str, set[str]] = {k: set() for k in self.kinds}
        # Objects of the first list, page by page, for the loop to parse while the rest is
        # still being listed (see take_listed).
        self._listed: list[tuple[str, str, dict[str, Any]]] = []

    # -- informer side --------------------------------------------------------------------

    def replace(self, kind: str, items: dict[str, dict[str, Any]]) -> None:
        with self._cond:
            self._dirty[kind].update(self.objects[kind].keys(), items.keys())
            self.objects[kind] = items
            if kind in (POD, PODGROUP):
                pending = self._pending_pods if kind == POD else self._pending_groups
                pending.clear()
                for key, obj in items.items():
                    self._track(kind, key, obj)
            if kind == PODGROUP:
                for key in [k for k in self.enqueued if k not in self._pending_groups]:
                    del self.enqueued[key]
            if kind == POD:
                for key in list(self.assumed):
                    self._confirm(key, items.get(key))
                for key in list(self.releasing):
                    self._confirm_release(key, items.get(key))
            for k, key in [ak for ak in self.assumed_objects if ak[0] == kind]:
                self._confirm_object(k, key, items.get(key))
            self._synced.add(kind)
            self._changed()

    def listed_page(self, kind: str, page: list[tuple[str, dict[str, Any]]]) -> None:
        """One page of a kind's first list, before ``replace`` makes the list whole. Kept only
        until the kind has synced: later relists are not waited for."""
        with self._cond:
            if kind in self._synced:
                return
            self._listed.extend((kind, key, obj) for key, obj in page)
            self._changed()

    def take_listed(self) -> list[tuple[str, str, dict[str, Any]]]:
        """The first-list objects that arrived since the last call. The scheduling loop parses
        them while it waits for the sync, so the cache's fill after the sync finds them parsed
        (the same objects, by identity) and the first session starts sooner."""
        with self._cond:
            out, self._listed = self._listed, []
            return out

    def apply(self, kind: str, etype: str, key: str, obj: dict[str, Any]) -> None:
        with self._cond:
            self._dirty[kind].add(key)
            if etype == "DELETED":
                self.objects[kind].pop(key, None)
                current = None
            else:
                self.objects[kind][key] = obj
                current = obj
            if kind in (POD, PODGROUP):
                self._track(kind, key, current)
            if kind == POD:
                if key in self.assumed:
                    self._confirm(key, current)
                if key in self.releasing:
                    self._confirm_release(key, current)
            if kind == CLAIM and key in self.claims_assumed:
                self._confirm_claim(key, current)
            if (kind, key) in self.assumed_objects:
                self._confirm_object(kind, key, current)
            self._changed()

    def _track(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        if kind == POD:
            waiting = obj is not None and _waiting_pod(obj, self.scheduler_names)
            (self._pending_pods.add if waiting else self._pending_pods.discard)(key)
        else:
            phase = ((obj or {}).get("status") or {}).get("phase") or "Pending"
            waiting = obj is not None and phase == "Pending"
            (self._pending_groups.add if waiting else self._pending_groups.discard)(key)
            if not waiting:
                self.enqueued.pop(key, None)  # the write came back (or the group is gone)

    def has_work(self) -> bool:
        """Could a session place anything? A pod of ours with no node that is not assumed (a bind
        in flight), or a PodGroup still Pending (Volcano's job controller creates its pods only
        once it is Inqueue) that no session has moved on yet (its status write in flight)."""
        with self._cond:
            if self._pending_groups:
                now, enqueued = time.monotonic(), self.enqueued
                if any(enqueued.get(k, 0.0) < now for k in self._pending_groups):
                    return True
            return any(k not in self.assumed for k in self._pending_pods)

    def pending_pods(self) -> list[str]:
        """Keys of the pods of ours waiting for a node with no bind in flight, in key order."""
        with self._cond:
            return sorted(k for k in self._pending_pods if k not in self.assumed)

    def _confirm(self, key: str, pod: dict[str, Any] | None) -> None:
        a = self.assumed[key]
        if (
            pod is None
            or (pod.get("metadata") or {}).get("uid", a.uid) != a.uid
            or (pod.get("spec") or {}).get("nodeName")
        ):
            del self.assumed[key]  # bound (confirmed), deleted or replaced: the API object is the truth

    def _confirm_release(self, key: str, pod: dict[str, Any] | None) -> None:
        if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            del self.releasing[key]
            self.released_at.pop(key, None)

    def _confirm_object(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        """Another version of an assumed object came from the API (ours, or someone else's that
        our write will conflict with): the API object is the truth again."""
        assumed = self.assumed_objects[(kind, key)]
        if obj is None or _version(obj) != _version(assumed):
            del self.assumed_objects[(kind, key)]

    def _changed(self) -> None:
        self.version += 1
        self._cond.notify_all()

    def listed(self, kind: str) -> bool:
        """Whether ``kind``'s first list is complete."""
        with self._cond:
            return kind in self._synced

    def synced(self) -> bool:
        with self._cond:
            return self._synced.issuperset(self.kinds)

    def wait_synced(self, timeout: float, stop: threading.Event | None = None) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._synced.issuperset(self.kinds):
                left = deadline - time.monotonic()
                if left <= 0 or (stop is not None and stop.is_set()):
                    return False
                self._cond.wait(min(left, 0.1))
            return True

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` (evaluated under the store lock) holds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
            return True

    # -- reading --------------------------------------------------------------------------

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        with self._cond:
            return self.objects[kind].get(key)

    def items(self, kind: str) -> list[dict[str, Any]]:
        with self._cond:
            return list(self.objects[kind].values())

    def snapshot_objects(self) -> list[dict[str, Any]]:
        """Every object for ``build_snapshot``, with overlays applied to copies of the pods
        concerned. Objects are never mutated in place (updates replace them), so handing out
        references is safe."""
        with self._cond:
            out: list[dict[str, Any]] = []
            for kind in self.kinds:
                if kind == CLAIM:
                    out.extend(self._claim_overlaid(k, c) for k, c in self.objects[kind].items())
                elif kind != POD:
                    assumed = self.assumed_objects
                    out.extend(assumed.get((kind, key), obj) for key, obj in self.objects[kind].items())
            out.extend(self._overlaid(key, pod) for key, pod in self.objects.get(POD, {}).items())
            return out

    def take_changes(self) -> list[tuple[str, str, dict[str, Any] | None]]:
        """What changed since the last call, as (kind, key, object with overlays, or None when
        gone), for the scheduling loop's incremental cache. Every key starts out changed."""
        with self._cond:
            out: list[tuple[str, str, dict[str, Any] | None]] = []
            for kind, keys in self._dirty.items():
                objects = self.objects[kind]
                for key in keys:
                    obj = objects.get(key)
                    if obj is not None and kind == POD:
                        obj = self._overlaid(key, obj)
                    elif obj is not None and kind == CLAIM:
                        obj = self._claim_overlaid(key, obj)
                    elif obj is not None:
                        obj = self.assumed_objects.get((kind, key), obj)
                    out.append((kind, key, obj))
                keys.clear()
            return out

    def _overlaid(self, key: str, pod: dict[str, Any]) -> dict[str, Any]:
        """The pod as the scheduler must see it: on its node while a bind is in flight or
        unconfirmed, terminating from the moment we evicted it."""
        a = self.assumed.get(key)
        if a is not None:
            out = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": a.node}}
            if a.annotations:
                md = dict(pod.get("metadata") or {})
                md["annotations"] = {**(md.get("annotations") or {}), **a.annotations}
                out["metadata"] = md
            return out
        if key in self.releasing:
            md = dict(pod.get("metadata") or {})
            md["deletionTimestamp"] = _rfc3339(self.released_at.get(key, 0.0))
            return {**pod, "metadata": md}
        return pod

    # -- overlays -------------------------------------------------------------------------

    def assume(self, key: str, node: str, uid: str, annotations: Mapping[str, str] | None = None) -> bool:
        """Mark a pod bound to ``node`` in the cache, with the ``annotations`` its binding
        carries; False when it already is (in flight)."""
        with self._cond:
            if key in self.assumed:
                return False
            self.assumed[key] = _Assumed(node, uid, annotations=annotations)
            self._dirty[POD].add(key)
            self._changed()
            return True

    def finish_binding(self, key: str, ttl: float) -> None:
        """The bind call succeeded: keep the assumption until the watch shows it, at most ``ttl``."""
        with self._cond:
            a = self.assumed.get(key)
            if a is not None:
                pod = self.objects[POD].get(key)
                if pod is not None and (pod.get("spec") or {}).get("nodeName"):
                    del self.assumed[key]
                    self._dirty[POD].add(key)
                else:
                    a.expires = time.monotonic() + ttl
            self._changed()

    def forget(self, key: str) -> None:
        """The bind failed: release the pod's resources in the cache."""
        with self._cond:
            self.assumed.pop(key, None)
            self._dirty[POD].add(key)
            self._changed()

    def is_assumed(self, key: str) -> bool:
        with self._cond:
            return key in self.assumed

    def assume_object(self, kind: str, key: str, obj: dict[str, Any]) -> None:
        """Show ``obj`` (a changed copy of the object held, with its resourceVersion) until the
        watch brings another version or :meth:`forget_object`."""
        with self._cond:
            self.assumed_objects[(kind, key)] = obj
            self._dirty[kind].add(key)
            self._changed()

    def forget_object(self, kind: str, key: str) -> None:
        with self._cond:
            if self.assumed_objects.pop((kind, key), None) is not None:
                self._dirty[kind].add(key)
                self._changed()

    def mark_releasing(self, key: str, ttl: float) -> bool:
        with self._cond:
            if key in self.releasing:
                return False
            self.releasing[key] = time.monotonic() + ttl
            self.released_at[key] = time.time()
            self._dirty[POD].add(key)
            self._changed()
            return True

    def unmark_releasing(self, key: str) -> None:
        with self._cond:
            self.releasing.pop(key, None)
            self.released_at.pop(key, None)
            self._dirty[POD].add(key)
            self._changed()

    def assume_enqueued(self, keys: Iterable[str], hold: float) -> None:
        """A session moved these PodGroups out of Pending: until the watch shows its status write
        (at most ``hold`` seconds, shortened by :meth:`enqueue_written`), they are no reason for
        another session. A gang whose pods are all binding would otherwise get a session every
        period while the status writer works through a mass submission."""
        expiry = time.monotonic() + hold
        with self._cond:
            for key in keys:
                if key in self._pending_groups:
                    self.enqueued[key] = expiry

    def enqueue_written(self, key: str, ok: bool, ttl: float) -> None:
        """The status write for an assumed enqueue finished: wait ``ttl`` more for the watch to
        show it; a failed write is work again at once (the next session writes it again)."""
        with self._cond:
            if key not in self.enqueued:
                return
            if ok:
                self.enqueued[key] = min(self.enqueued[key], time.monotonic() + ttl)
            else:
                del self.enqueued[key]
                self._changed()

    def expire(self) -> list[str]:
        """Drop overlays whose confirmation never came (client-go's assumed-pod TTL)."""
        now = time.monotonic()
        with self._cond:
            late = [k for k, t in self.enqueued.items() if t < now]
            for k in late:
                del self.enqueued[k]
            gone = [k for k, a in self.assumed.items() if a.expires is not None and a.expires < now]
            for k in gone:
                del self.assumed[k]
            rel = [k for k, t in self.releasing.items() if t < now]
            for k in rel:
                del self.releasing[k]
                self.released_at.pop(k, None)
            self._expire_claims(now)
            self._dirty[POD].update(gone, rel)
            if gone or rel:
                self._changed()
            return gone


def _version(obj: dict[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")


def _waiting_pod(pod: dict[str, Any], names: frozenset[str] | None) -> bool:
    spec = pod.get("spec") or {}
    if spec.get("nodeName") or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if names is not None and (spec.get("schedulerName") or "default-scheduler") not in names:
        return False
    gates = raw_gate_names(spec)
    if gates and not only_volcano_gate(gates):
        return False  # no session can place it, or lift its gates: their removal is a change
    return ((pod.get("status") or {}).get("phase") or "Pending") == "Pending"


def _trim(obj: dict[str, Any], rtype: ResourceType) -> None:
    """An object as the cache keeps it. List items of built-in kinds come without kind and
    apiVersion; the core needs kind. ``metadata.managedFields`` goes, as kube-scheduler's
    informers drop it: nothing here reads it, it is half of a pod's JSON containers (which the
    garbage collector walks again and again), and a PUT without it keeps the server's copy."""
    obj["kind"] = rtype.kind
    obj.setdefault("apiVersion", rtype.api_version)
    md = obj.get("metadata")
    if isinstance(md, dict):
        md.pop("managedFields", None)


class _Gone(Exception):
    """The resourceVersion (or continue token) is too old: relist."""


class Informer:
    """List+watch of one resource type into a :class:`ClusterStore`, on its own thread."""

    def __init__(
        self,
        kube: Kube,
        rtype: ResourceType,
        store: ClusterStore,
        *,
        page_size: int = 500,
        watch_timeout: int = 300,
        backoff_base: float = 0.2,
        backoff_max: float = 30.0,
        on_event: Callable[[str, str], None] | None = None,
    ) -> None:
        self.kube = kube
        self.rtype = rtype
        self.store = store
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.on_event = on_event  # (kind, what): "relist" | "error" | "watch", for metrics
        self.resource_version: str | None = None
        self.relists = 0
        self.errors = 0
        self._stop = threading.Event()
        self._resp: Any = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{rtype.kind}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown()  # urllib3 >= 2.3: unblocks a read in progress
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _notify(self, what: str) -> None:
        if self.on_event is not None:
            self.on_event(self.rtype.kind, what)

    def _run(self) -> None:
        backoff = self.backoff_base
        while not self._stop.is_set():
            try:
                if self.resource_version is None:
                    self._list()
                self._watch()
                backoff = self.backoff_base
            except _Gone:
                log.info("%s: resourceVersion %s expired, relisting", self.rtype.kind, self.resource_version)
                self.resource_version = None
                self.relists += 1
                self._notify("relist")
            except Exception as exc:  # noqa: BLE001 - every failure reconnects; none may kill the thread
                if self._stop.is_set():
                    return
                if status_of(exc) == 404 and self.rtype.optional:
                    self._absent()
                    continue
                self.errors += 1
                self._notify("error")
                if status_of(exc) == 410:
                    self.resource_version = None
                    continue
                log.warning("%s: list/watch failed (%s); retrying in %.1fs", self.rtype.kind, exc, backoff)
                self._stop.wait(backoff * random.uniform(0.8, 1.2))
                backoff = min(backoff * 2, self.backoff_max)

    ABSENT_RECHECK = 60.0  # seconds between looks for an optional kind's missing CRD

    def _absent(self) -> None:
        """An optional kind the API server does not serve: none of it, until it appears."""
        if not self.store.listed(self.rtype.kind) or self.store.items(self.rtype.kind):
            log.info("%s: not served by the API server (CRD not installed?): none read; looking again every %.0fs",
                     self.rtype.kind, self.ABSENT_RECHECK)
            self.store.replace(self.rtype.kind, {})
        self.resource_version = None
        self._stop.wait(self.ABSENT_RECHECK)

    def _list(self) -> None:
        items: dict[str, dict[str, Any]] = {}
        token: str | None = None
        while True:
            try:
                body = self.kube.get(self.rtype.path, limit=self.page_size, **({"continue": token} if token else {}))
            except ApiException as exc:
                if exc.status == 410:
                    raise _Gone from exc
                raise
            page: list[tuple[str, dict[str, Any]]] = []
            for obj in body.get("items") or []:
                _trim(obj, self.rtype)
                key = object_key(obj, self.rtype.namespaced)
                items[key] = obj
                page.append((key, obj))
            self.store.listed_page(self.rtype.kind, page)
            meta = body.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                break
        # Replace only after the last page: never a partial list in the cache.
        self.store.replace(self.rtype.kind, items)
        self.resource_version = str(meta.get("resourceVersion") or "")
        log.debug("%s: listed %d at resourceVersion %s", self.rtype.kind, len(items), self.resource_version)

    def _watch(self) -> None:
        timeout = int(self.watch_timeout * random.uniform(1.0, 2.0))  # spread reconnects like client-go
        resp = self.kube.stream(
            self.rtype.path,
            {
                "watch": True,
                "resourceVersion": self.resource_version,
                "allowWatchBookmarks": True,
                "timeoutSeconds": timeout,
            },
            read_timeout=timeout + 30.0,  # a silent dead connection ends, and we reconnect
        )
        self._resp = resp
        self._notify("watch")
        try:
            for event in json_lines(resp):
                if self._stop.is_set():
                    return
                etype = event.get("type")
                obj = event.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone
                    raise ApiException(status=obj.get("code") or 500, reason=str(obj.get("message")))
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if etype == "BOOKMARK":
                    if rv:
                        self.resource_version = rv
                    continue
                if etype not in ("ADDED", "MODIFIED", "DELETED"):
                    continue
                _trim(obj, self.rtype)
                self.store.apply(self.rtype.kind, etype, object_key(obj, self.rtype.namespaced), obj)
                if rv:
                    self.resource_version = rv
        finally:
            self._resp = None
            resp.close()  # never hand a half-read stream back to the pool
            resp.release_conn()


def start_informers(kube: Kube, store: ClusterStore, **options: Any) -> list[Informer]:
    informers = [Informer(kube, RESOURCE_TYPES[kind], store, **options) for kind in store.kinds]
    for inf in informers:
        inf.start()
    return informers


def list_once(kube: Kube, kinds: tuple[str, ...] = tuple(RESOURCE_TYPES)) -> list[dict[str, Any]]:
    """One consistent-enough read of the cluster (``quota``/``explain --kubeconfig``): list every
    kind, no watch."""
    store = ClusterStore(kinds=kinds)
    for kind in kinds:
        try:
            Informer(kube, RESOURCE_TYPES[kind], store)._list()
        except ApiException as exc:
            if not (exc.status == 404 and RESOURCE_TYPES[kind].optional):
                raise  # an optional kind whose CRD is not installed: none of it
    return store.snapshot_objects()
