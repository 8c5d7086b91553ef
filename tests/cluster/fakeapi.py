"""An in-process *fake* Kubernetes API server for the fault-injection tests of the adapter.

It is not a kube-apiserver. It reproduces only the protocol behaviour the adapter depends on,
on 127.0.0.1 with an ephemeral port:

* list with ``limit``/``continue`` pages and a list ``resourceVersion``; items of built-in kinds
  come without ``kind``/``apiVersion`` as the real server sends them;
* watch from a ``resourceVersion`` as chunked JSON lines, ``BOOKMARK`` events when
  ``allowWatchBookmarks`` is set, ``ERROR`` 410 (Expired) when the version was compacted away,
  ``timeoutSeconds``;
* PodGroup without and Queue with a ``status`` subresource, as Volcano's CRDs (configurable);
* ``pods/binding`` (201; 409 when already bound or the UID precondition fails), ``pods/eviction``
  (policy/v1: 429 when a PodDisruptionBudget allows no disruption), graceful DELETE,
  ``status`` subresources with optimistic concurrency (409 on a stale ``resourceVersion``),
  merge / strategic-merge PATCH (conditions merged by ``type``), Events, Leases;
* fault injection: any status for the next N matching requests, dropped connections, expiring
  every open watch, compaction, and requests *held* in flight until the test lets each one
  through or drops it unprocessed (a client killed while its calls were in flight).

Single global lock; fine for tests and for a benchmark on one machine.
"""

from __future__ import annotations

import copy
import json
import re
import socket
import threading
import time
import uuid
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class _Res:
    plural: str
    kind: str
    group_version: str  # "v1" or "group/version"
    namespaced: bool
    builtin: bool = True


RESOURCES: dict[str, _Res] = {
    r.plural: r
    for r in (
        _Res("nodes", "Node", "v1", False),
        _Res("pods", "Pod", "v1", True),
        _Res("events", "Event", "v1", True),
        _Res("podgroups", "PodGroup", "scheduling.volcano.sh/v1beta1", True, builtin=False),
        _Res("queues", "Queue", "scheduling.volcano.sh/v1beta1", False, builtin=False),
        _Res("priorityclasses", "PriorityClass", "scheduling.k8s.io/v1", False),
        _Res("poddisruptionbudgets", "PodDisruptionBudget", "policy/v1", True),
        _Res("resourcequotas", "ResourceQuota", "v1", True),
        _Res("leases", "Lease", "coordination.k8s.io/v1", True),
        _Res("persistentvolumeclaims", "PersistentVolumeClaim", "v1", True),
        _Res("persistentvolumes", "PersistentVolume", "v1", False),
        _Res("storageclasses", "StorageClass", "storage.k8s.io/v1", False),
        _Res("csinodes", "CSINode", "storage.k8s.io/v1", False),
    )
}
KIND_TO_PLURAL = {r.kind: p for p, r in RESOURCES.items()}

_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<res>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 300 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def _merge_patch(target: Any, patch: Any, strategic: bool) -> Any:
    """RFC 7386 merge patch; with ``strategic`` a ``conditions`` list merges by ``type``
    (what the adapter sends to ``pods/status``) and ``schedulingGates`` by ``name``, an entry with
    ``$patch: delete`` deleting its namesake (what the gate remover sends)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif strategic and k == "conditions" and isinstance(v, list) and isinstance(out.get(k), list):
            merged = [dict(c) for c in out[k]]
            for cond in v:
                for i, old in enumerate(merged):
                    if old.get("type") == cond.get("type"):
                        merged[i] = {**old, **cond}
                        break
                else:
                    merged.append(dict(cond))
            out[k] = merged
        elif strategic and k == "schedulingGates" and isinstance(v, list):
            gates = [dict(g) for g in out.get(k) or []]
            for gate in v:
                gates = [g for g in gates if g.get("name") != gate.get("name")]
                if gate.get("$patch") != "delete":
                    gates.append(dict(gate))
            out[k] = gates
        else:
            out[k] = _merge_patch(out.get(k), v, strategic)
    return out


@dataclass
class _Fault:
    method: str
    pattern: re.Pattern[str]
    status: int  # 0 = drop the connection without an answer
    times: int
    after: bool = False  # drop after the request was processed (reply lost)


@dataclass
class _Held:
    method: str
    path: str
    decision: str | None = None  # "execute" | "drop", set by release_held()


@dataclass
class FakeApiState:
    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=lambda: {p: {} for p in RESOURCES})
    rv: int = 0
    history: list[tuple[int, str, str, dict[str, Any]]] = field(default_factory=list)
    history_rvs: list[int] = field(default_factory=list)
    compacted_rv: int = 0
    watch_epoch: int = 0  # bumped by expire_watches(): open watches get ERROR 410


class FakeApiServer:
    """Start with :meth:`start`, which returns the base URL; stop with :meth:`stop`."""

    def __init__(
        self,
        *,
        bookmark_interval: float = 1.0,
        max_watch_seconds: float = 30.0,
        record_requests: bool = True,
        status_subresources: tuple[str, ...] = ("queues",),
    ) -> None:
        self.state = FakeApiState()
        # Custom resources with a status subresource. Volcano's own CRDs give Queue one and
        # PodGroup none (its scheduler updates PodGroups with a whole-object PUT).
        self.status_subresources = set(status_subresources)
        self.cond = threading.Condition()
        self.bookmark_interval = bookmark_interval
        self.max_watch_seconds = max_watch_seconds
        self.record_requests = record_requests
        self.requests: list[tuple[str, str, int]] = []
        self.binds: Counter[str] = Counter()  # successful bindings per pod key
        self.evict_429: Counter[str] = Counter()  # pod key -> answers 429 this many times first
        self.faults: list[_Fault] = []
        self.holds: list[tuple[str, re.Pattern[str]]] = []
        self.held: list[_Held] = []  # requests waiting at the server, in arrival order
        self.closing = False
        self.open_watches = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> str:
        server = self

        class Handler(_Handler):
            api = server

        httpd = _QuietServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False  # idle keep-alive connections must not block stop()
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(0.05,), name="fake-apiserver", daemon=True
        )
        self._thread.start()
        return self.url

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def stop(self) -> None:
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        for s in list(self._conns):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # -- object store ---------------------------------------------------------------------

    @staticmethod
    def key_of(res: _Res, obj: dict[str, Any]) -> str:
        md = obj.get("metadata") or {}
        return f"{md.get('namespace') or 'default'}/{md['name']}" if res.namespaced else md["name"]

    def _record(self, plural: str, etype: str, obj: dict[str, Any]) -> None:
        st = self.state
        st.history.append((st.rv, plural, etype, obj))
        st.history_rvs.append(st.rv)
        self.cond.notify_all()

    def _put(self, plural: str, obj: dict[str, Any], etype: str) -> dict[str, Any]:
        """Store ``obj`` with a new resourceVersion (caller holds the lock)."""
        res = RESOURCES[plural]
        st = self.state
        st.rv += 1
        obj = copy.deepcopy(obj)
        obj["kind"], obj["apiVersion"] = res.kind, res.group_version
        md = obj.setdefault("metadata", {})
        if res.namespaced:
            md.setdefault("namespace", "default")
        md.setdefault("uid", str(uuid.uuid4()))
        md.setdefault("creationTimestamp", now_rfc3339())
        md["resourceVersion"] = str(st.rv)
        st.objects[plural][self.key_of(res, obj)] = obj
        self._record(plural, etype, obj)
        return obj

    def _remove(self, plural: str, key: str) -> dict[str, Any] | None:
        st = self.state
        obj = st.objects[plural].pop(key, None)
        if obj is not None:
            st.rv += 1
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = str(st.rv)
            self._record(plural, "DELETED", obj)
        return obj

    # Test-side helpers (thread-safe).

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        with self.cond:
            plural = KIND_TO_PLURAL[obj["kind"]]
            key = self.key_of(RESOURCES[plural], obj)
            etype = "MODIFIED" if key in self.state.objects[plural] else "ADDED"
            return self._put(plural, obj, etype)

    def create_many(self, objs: list[dict[str, Any]]) -> None:
        with self.cond:
            for obj in objs:
                plural = KIND_TO_PLURAL[obj["kind"]]
                self._put(plural, obj, "ADDED")

    def delete(self, kind: str, key: str) -> None:
        with self.cond:
            self._remove(KIND_TO_PLURAL[kind], key)

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        with self.cond:
            obj = self.state.objects[KIND_TO_PLURAL[kind]].get(key)
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, kind: str) -> list[dict[str, Any]]:
        with self.cond:
            return [copy.deepcopy(o) for o in self.state.objects[KIND_TO_PLURAL[kind]].values()]

    def update(self, kind: str, key: str, mutate: Any) -> dict[str, Any]:
        """Apply ``mutate(obj)`` to a copy of the stored object and store it (MODIFIED)."""
        with self.cond:
            plural = KIND_TO_PLURAL[kind]
            obj = copy.deepcopy(self.state.objects[plural][key])
            mutate(obj)
            return self._put(plural, obj, "MODIFIED")

    def finish_deletions(self) -> int:
        """What kubelets do: remove pods that carry a deletionTimestamp."""
        with self.cond:
            keys = [
                k for k, o in self.state.objects["pods"].items() if o["metadata"].get("deletionTimestamp")
            ]
            for k in keys:
                self._remove("pods", k)
            return len(keys)

    def compact(self) -> None:
        """Forget history up to now: watches from an older resourceVersion get 410."""
        with self.cond:
            self.state.compacted_rv = self.state.rv
            self.state.history.clear()
            self.state.history_rvs.clear()

    def expire_watches(self) -> None:
        """Compact, and end every open watch with ERROR 410 (as after an etcd compaction)."""
        with self.cond:
            self.state.compacted_rv = self.state.rv + 1
            self.state.history.clear()
            self.state.history_rvs.clear()
            self.state.watch_epoch += 1
            self.cond.notify_all()

    def fail(self, method: str, path_regex: str, status: int, times: int = 1, *, after: bool = False) -> None:
        """Answer the next ``times`` requests matching with ``status`` (0: drop the connection;
        with ``after`` the request is carried out and then the connection dropped)."""
        with self.cond:
            self.faults.append(_Fault(method.upper(), re.compile(path_regex), status, times, after))

    def hold(self, method: str, path_regex: str) -> None:
        """Keep every matching request waiting at the server, unprocessed, until
        :meth:`release_held` (until :meth:`unhold` for requests arriving later)."""
        with self.cond:
            self.holds.append((method.upper(), re.compile(path_regex)))

    def unhold(self) -> None:
        """Requests arriving from now on are served normally (held ones stay held)."""
        with self.cond:
            self.holds.clear()

    def held_paths(self) -> list[str]:
        with self.cond:
            return [h.path for h in self.held if h.decision is None]

    def release_held(self, path_regex: str = "", *, execute: bool) -> int:
        """Let held requests matching through (``execute``: carried out, as a request that
        reached the server; its reply goes to whoever still listens) or drop them unprocessed
        (the request never arrived). Returns how many."""
        pat = re.compile(path_regex)
        n = 0
        with self.cond:
            for h in self.held:
                if h.decision is None and pat.search(h.path):
                    h.decision = "execute" if execute else "drop"
                    n += 1
            self.cond.notify_all()
        return n

    def drop_watches(self) -> None:
        """Cut every open watch connection without a proper end."""
        for s in list(self._conns):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def count(self, method: str, path_regex: str, status: int | None = None) -> int:
        pat = re.compile(path_regex)
        with self.cond:
            return sum(
                1
                for m, p, s in self.requests
                if m == method and pat.search(p) and (status is None or s == status)
            )

    def wait_for(self, predicate: Any, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.05))
            return True

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        for f in self.faults:
            if f.times > 0 and f.method == method and f.pattern.search(path):
                f.times -= 1
                return f
        return None


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], OSError):  # clients hanging up are normal here
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    api: FakeApiServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else delayed ACKs cost 40 ms per request

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def setup(self) -> None:
        super().setup()
        self.api._conns.add(self.connection)

    def finish(self) -> None:
        self.api._conns.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    # -- plumbing -------------------------------------------------------------------------

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw) if raw else None

    def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        # Recorded before the reply goes out: whatever a client has seen is already counted.
        self._log(code)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _log(self, code: int) -> None:
        if self.api.record_requests:
            with self.api.cond:
                self.api.requests.append((self.command, urlsplit(self.path).path, code))

    def _drop(self) -> None:
        self._log(0)
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _dispatch(self) -> None:
        api = self.api
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self._body() if self.command in ("POST", "PUT", "PATCH", "DELETE") else None
        if not self._wait_if_held(url.path):
            return self._drop()
        with api.cond:
            fault = api._take_fault(self.command, url.path)
        if fault is not None and not fault.after:
            if fault.status == 0:
                return self._drop()
            return self._send(fault.status, _status(fault.status, "InternalError", "injected fault"))
        m = _PATH.match(url.path)
        if not m or m["res"] not in RESOURCES:
            return self._send(404, _status(404, "NotFound", f"no route {url.path}"))
        res = RESOURCES[m["res"]]
        ns, name, sub = m["ns"], m["name"], m["sub"]
        if fault is not None:  # carry the request out, then lose the reply
            self._handle(res, ns, name, sub, query, body, reply=False)
            return self._drop()
        self._handle(res, ns, name, sub, query, body, reply=True)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _dispatch  # noqa: N815

    def _wait_if_held(self, path: str) -> bool:
        """False when a held request is to be dropped unprocessed."""
        api = self.api
        with api.cond:
            if not any(m == self.command and p.search(path) for m, p in api.holds):
                return True
            h = _Held(self.command, path)
            api.held.append(h)
            api.cond.notify_all()
            while h.decision is None and not api.closing:
                api.cond.wait(0.1)
            api.held.remove(h)
            return h.decision == "execute"

    # -- semantics ------------------------------------------------------------------------

    def _handle(
        self,
        res: _Res,
        ns: str | None,
        name: str | None,
        sub: str | None,
        query: dict[str, str],
        body: Any,
        reply: bool,
    ) -> None:
        api = self.api
        send = self._send if reply else (lambda *a, **k: None)
        key = (f"{ns}/{name}" if res.namespaced else name) if name else None
        if self.command == "GET" and name is None:
            if query.get("watch") in ("true", "1"):
                return self._watch(res, ns, query)
            return self._list(res, ns, query)
        with api.cond:
            store = api.state.objects[res.plural]
            if self.command == "GET":
                obj = store.get(key)  # type: ignore[arg-type]
                return (
                    send(200, obj)
                    if obj
                    else send(404, _status(404, "NotFound", f"{res.plural} {key} not found"))
                )
            if self.command == "POST" and name is None:
                body.setdefault("metadata", {})
                if res.namespaced:
                    body["metadata"]["namespace"] = ns
                k = api.key_of(res, body)
                if k in store:
                    return send(409, _status(409, "AlreadyExists", f"{res.plural} {k} already exists"))
                return send(201, api._put(res.plural, body, "ADDED"))
            obj = store.get(key)  # type: ignore[arg-type]
            if obj is None:
                return send(404, _status(404, "NotFound", f"{res.plural} {key} not found"))
            if res.plural == "pods" and sub == "binding" and self.command == "POST":
                return send(*self._bind(obj, body))
            if res.plural == "pods" and sub == "eviction" and self.command == "POST":
                return send(*self._evict(key, obj, body))  # type: ignore[arg-type]
            if self.command == "DELETE":
                return send(*self._delete(res, key, obj, query, body))  # type: ignore[arg-type]
            if sub == "status" and not res.builtin and res.plural not in api.status_subresources:
                return send(404, _status(404, "NotFound", "the server could not find the requested resource"))
            if self.command == "PUT":
                want = (body.get("metadata") or {}).get("resourceVersion")
                if want and want != obj["metadata"]["resourceVersion"]:
                    return send(
                        409,
                        _status(
                            409,
                            "Conflict",
                            f"Operation cannot be fulfilled on {res.plural} "
                            f'"{name}": the object has been modified; please apply your '
                            "changes to the latest version and try again",
                        ),
                    )
                new = copy.deepcopy(obj)
                if sub == "status":
                    new["status"] = body.get("status")
                else:
                    new = {**body, "metadata": {**obj["metadata"], **(body.get("metadata") or {})}}
                    if res.plural in api.status_subresources and "status" in obj:  # PUT ignores status
                        new["status"] = obj["status"]
                return send(200, api._put(res.plural, new, "MODIFIED"))
            if self.command == "PATCH":
                ctype = self.headers.get("Content-Type", "")
                strategic = "strategic" in ctype
                patch = body if sub != "status" else {"status": (body or {}).get("status")}
                new = _merge_patch(obj, patch, strategic)
                return send(200, api._put(res.plural, new, "MODIFIED"))
        return send(405, _status(405, "MethodNotAllowed", self.command))

    def _bind(self, pod: dict[str, Any], body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        md = pod["metadata"]
        key = f"{md['namespace']}/{md['name']}"
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != md.get("uid"):
            return 409, _status(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {md.get('uid')}",
            )
        if pod["spec"].get("nodeName"):
            return 409, _status(
                409, "Conflict", f'pod {md["name"]} is already assigned to node "{pod["spec"]["nodeName"]}"'
            )
        if md.get("deletionTimestamp"):
            return 409, _status(
                409, "Conflict", f"pod {md['name']} is being deleted, cannot be assigned to a host"
            )
        new = copy.deepcopy(pod)
        new["spec"]["nodeName"] = body["target"]["name"]
        extra = (body.get("metadata") or {}).get("annotations") or {}
        if extra:  # kube-apiserver copies a Binding's annotations onto the pod
            new["metadata"]["annotations"] = {**(new["metadata"].get("annotations") or {}), **extra}
        status = new.setdefault("status", {})
        conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": now_rfc3339()})
        status["conditions"] = conds
        self.api._put("pods", new, "MODIFIED")
        self.api.binds[key] += 1
        return 201, _status(201, "", "")

    def _evict(self, key: str, pod: dict[str, Any], body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        api = self.api
        if api.evict_429[key] > 0:
            api.evict_429[key] -= 1
            return 429, _status(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                causes=[{"reason": "DisruptionBudget"}],
            )
        ns = pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels") or {}
        for pdb in api.state.objects["poddisruptionbudgets"].values():
            if pdb["metadata"].get("namespace") != ns:
                continue
            sel = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            if all(labels.get(k) == v for k, v in sel.items()):
                allowed = int((pdb.get("status") or {}).get("disruptionsAllowed") or 0)
                if allowed < 1:
                    return 429, _status(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the "
                        f"pod's disruption budget {pdb['metadata']['name']}.",
                        causes=[{"reason": "DisruptionBudget"}],
                    )
                new = copy.deepcopy(pdb)
                new.setdefault("status", {})["disruptionsAllowed"] = allowed - 1
                api._put("poddisruptionbudgets", new, "MODIFIED")
        code, answer = self._delete(RESOURCES["pods"], key, pod, {}, (body or {}).get("deleteOptions"))
        return (code, answer) if code >= 300 else (201, _status(201, "", ""))

    def _delete(
        self, res: _Res, key: str, obj: dict[str, Any], query: dict[str, str], options: Any
    ) -> tuple[int, dict[str, Any]]:
        api = self.api
        options = options or {}
        uid = (options.get("preconditions") or {}).get("uid")
        if uid and uid != obj["metadata"].get("uid"):
            return 409, _status(409, "Conflict", "Precondition failed: UID mismatch")
        grace = options.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        if res.plural == "pods" and obj["spec"].get("nodeName") and (grace is None or int(grace) > 0):
            if not obj["metadata"].get("deletionTimestamp"):
                new = copy.deepcopy(obj)
                new["metadata"]["deletionTimestamp"] = now_rfc3339()
                new["metadata"]["deletionGracePeriodSeconds"] = int(grace) if grace is not None else 30
                obj = api._put("pods", new, "MODIFIED")
            return 200, obj
        api._remove(res.plural, key)
        return 200, obj

    def _list(self, res: _Res, ns: str | None, query: dict[str, str]) -> None:
        api = self.api
        limit = int(query.get("limit") or 0)
        token = query.get("continue")
        with api.cond:
            if token:
                list_rv, start = (int(x) for x in token.split(":"))
                if list_rv < api.state.compacted_rv:
                    return self._send(
                        410, _status(410, "Expired", "The provided continue parameter is too old")
                    )
            else:
                list_rv, start = api.state.rv, 0
            keys = sorted(k for k in api.state.objects[res.plural] if ns is None or k.startswith(ns + "/"))
            end = len(keys) if not limit else min(len(keys), start + limit)
            items = []
            for k in keys[start:end]:
                obj = api.state.objects[res.plural][k]
                if res.builtin:  # the real server omits kind/apiVersion on built-in list items
                    obj = {k2: v for k2, v in obj.items() if k2 not in ("kind", "apiVersion")}
                items.append(obj)
            meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
            if end < len(keys):
                meta["continue"] = f"{list_rv}:{end}"
            body = {
                "kind": res.kind + "List",
                "apiVersion": res.group_version,
                "metadata": meta,
                "items": items,
            }
            data = json.dumps(body).encode()
        self._log(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()

    def _watch(self, res: _Res, ns: str | None, query: dict[str, str]) -> None:
        api = self.api
        self._log(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        timeout = min(float(query.get("timeoutSeconds") or api.max_watch_seconds), api.max_watch_seconds)
        deadline = time.monotonic() + timeout
        pos = int(query.get("resourceVersion") or 0)
        st = api.state
        try:
            with api.cond:
                api.open_watches += 1
                epoch = st.watch_epoch
                if pos and pos < st.compacted_rv:
                    self._chunk(
                        {
                            "type": "ERROR",
                            "object": _status(
                                410, "Expired", f"too old resource version: {pos} ({st.compacted_rv})"
                            ),
                        }
                    )
                    self.wfile.write(b"0\r\n\r\n")
                    return
                if not pos:  # "any version": synthetic ADDED for the current state
                    for k in sorted(st.objects[res.plural]):
                        if ns is None or k.startswith(ns + "/"):
                            self._chunk({"type": "ADDED", "object": st.objects[res.plural][k]})
                    pos = st.rv
            last_bookmark = time.monotonic()
            while True:
                with api.cond:
                    if api.closing:
                        return
                    if st.watch_epoch != epoch:
                        self._chunk(
                            {"type": "ERROR", "object": _status(410, "Expired", "too old resource version")}
                        )
                        self.wfile.write(b"0\r\n\r\n")
                        return
                    i = bisect_right(st.history_rvs, pos)
                    events = [h for h in st.history[i:] if h[1] == res.plural]
                    current = st.rv
                    if not events and i >= len(st.history_rvs):
                        left = min(deadline - time.monotonic(), api.bookmark_interval)
                        if left > 0:
                            api.cond.wait(left)
                for _rv, _plural, etype, obj in events:
                    if ns is None or obj["metadata"].get("namespace") == ns:
                        self._chunk({"type": etype, "object": obj})
                pos = max(pos, current)
                if bookmarks and time.monotonic() - last_bookmark >= api.bookmark_interval:
                    self._chunk(
                        {
                            "type": "BOOKMARK",
                            "object": {
                                "kind": res.kind,
                                "apiVersion": res.group_version,
                                "metadata": {
                                    "resourceVersion": str(pos),
                                    "annotations": {"k8s.io/initial-events-end": "true"},
                                },
                            },
                        }
                    )
                    last_bookmark = time.monotonic()
                if time.monotonic() >= deadline:
                    self.wfile.write(b"0\r\n\r\n")
                    return
        except OSError:
            self.close_connection = True
        finally:
            with api.cond:
                api.open_watches -= 1
