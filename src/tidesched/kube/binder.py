"""Binding pods to nodes through the ``pods/binding`` subresource, off the session path (K8S-2).

``submit`` runs on the scheduling loop and only *assumes* each pod on its node in the
:class:`ClusterStore` (so the next session sees it Bound and the node's resources used) and
queues the call. A bounded pool of workers sends the bindings under the shared QPS limiter.

* 201 → the assumption stays until the watch shows ``spec.nodeName`` (or a TTL passes);
* 409 → the pod is already bound: re-read it; bound to our node (a retry after a lost reply)
  counts as success, otherwise the assumption is forgotten;
* 429 / 5xx / transport errors → retried a few times with backoff;
* anything else, or retries exhausted → forgotten (its resources freed in the cache), a
  ``FailedScheduling`` Warning event, and the pod is simply pending for the next session.

A restart loses nothing: assumptions live only in memory and the cluster's pods are the truth;
the API server refuses a second binding of a bound pod, so no pod is ever bound twice (REL-3).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from tidesched.kube.api import Kube, error_message, is_transient, status_of
from tidesched.kube.status import EventRecorder
from tidesched.kube.store import POD, ClusterStore

log = logging.getLogger("tidesched.kube.binder")


@dataclass(frozen=True)
class BindRequest:
    key: str  # namespace/name
    node: str
    uid: str


class Binder:
    def __init__(
        self,
        kube: Kube,
        store: ClusterStore,
        recorder: EventRecorder | None = None,
        *,
        workers: int = 16,
        retries: int = 3,
        retry_delay: float = 0.2,
        assume_ttl: float = 30.0,
        on_result: Callable[[str, float], None] | None = None,
        may_send: Callable[[], bool] | None = None,
    ) -> None:
        self.kube = kube
        self.store = store
        self.recorder = recorder
        self.workers = workers
        self.retries = retries
        self.retry_delay = retry_delay
        self.assume_ttl = assume_ttl
        self.on_result = on_result  # ("bound" | "error", seconds) for metrics
        # Asked right before every call (the runner: "do we still lead?"). A no drops the bind
        # unsent and forgets its assumption: nothing leaves a scheduler that lost its lease.
        self.may_send = may_send
        self.dropped = 0
        self.bound = 0
        self.failed = 0
        self._queue: queue.Queue[BindRequest | None] = queue.Queue()
        self._in_flight = 0
        self._lock = threading.Condition()
        self._cancelled = False
        self._threads = [
            threading.Thread(target=self._run, name=f"binder-{i}", daemon=True) for i in range(workers)
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def submit(self, binds: Mapping[str, str]) -> int:
        """Assume and queue the session's binds; returns how many were queued. Pods already in
        flight, already bound or gone are skipped."""
        queued = 0
        for key, node in sorted(binds.items()):
            pod = self.store.get(POD, key)
            if pod is None or (pod.get("spec") or {}).get("nodeName"):
                continue
            uid = str((pod.get("metadata") or {}).get("uid") or "")
            if not self.store.assume(key, node, uid):
                continue
            with self._lock:
                self._in_flight += 1
            self._queue.put(BindRequest(key, node, uid))
            queued += 1
        return queued

    def pending(self) -> int:
        with self._lock:
            return self._in_flight

    def drain(self, timeout: float) -> bool:
        """Wait for queued and in-flight binds to finish (SIGTERM)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
        return True

    def cancel_queued(self) -> int:
        """Leadership lost: drop binds not yet sent and forget their assumptions."""
        dropped = 0
        while True:
            try:
                req = self._queue.get_nowait()
            except queue.Empty:
                break
            if req is not None:
                self.store.forget(req.key)
                dropped += 1
                self._done()
            self._queue.task_done()
        return dropped

    def stop(self, timeout: float = 2.0) -> None:
        self._cancelled = True
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout)

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._lock.notify_all()

    def _run(self) -> None:
        while True:
            req = self._queue.get()
            try:
                if req is None:
                    return
                self._bind(req)
            except Exception as exc:  # noqa: BLE001 - a worker must survive anything
                log.exception("bind of %s crashed: %s", req.key if req else "?", exc)
                if req is not None:
                    self.store.forget(req.key)
            finally:
                if req is not None:
                    self._done()
                self._queue.task_done()

    def _bind(self, req: BindRequest) -> None:
        ns, name = req.key.split("/", 1)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            # The UID makes the API server refuse to bind a pod recreated under the same name.
            "metadata": {"name": name, "namespace": ns, **({"uid": req.uid} if req.uid else {})},
            "target": {"apiVersion": "v1", "kind": "Node", "name": req.node},
        }
        t0 = time.monotonic()
        last: BaseException | None = None
        for attempt in range(self.retries + 1):
            if self._cancelled or (self.may_send is not None and not self.may_send()):
                self.store.forget(req.key)
                self.dropped += 1
                return
            try:
                self.kube.call(self.kube.core.create_namespaced_pod_binding, name, ns, body)
                self._succeeded(req, t0)
                return
            except Exception as exc:  # noqa: BLE001 - classified below
                last = exc
                code = status_of(exc)
                if code == 409 and self._bound_to_us(req, ns, name):
                    self._succeeded(req, t0)  # our earlier attempt went through; its reply was lost
                    return
                if not is_transient(exc) or attempt == self.retries:
                    break
                time.sleep(self.retry_delay * (2**attempt))
        self._failed(req, last, t0)

    def _bound_to_us(self, req: BindRequest, ns: str, name: str) -> bool:
        try:
            pod = self.kube.call(self.kube.core.read_namespaced_pod, name, ns)
        except Exception:  # noqa: BLE001 - unknown: treat as failure, the watch will tell
            return False
        return (pod.get("spec") or {}).get("nodeName") == req.node and (
            not req.uid or (pod.get("metadata") or {}).get("uid") == req.uid
        )

    def _succeeded(self, req: BindRequest, t0: float) -> None:
        self.store.finish_binding(req.key, self.assume_ttl)
        self.bound += 1
        if self.on_result:
            self.on_result("bound", time.monotonic() - t0)
        if self.recorder is not None:
            ns, name = req.key.split("/", 1)
            self.recorder.record(
                "Pod", ns, name, "Normal", "Scheduled", f"Successfully assigned {req.key} to {req.node}"
            )

    def _failed(self, req: BindRequest, exc: BaseException | None, t0: float) -> None:
        self.store.forget(req.key)
        self.failed += 1
        msg = error_message(exc) if exc else "unknown error"
        log.warning("binding %s to %s failed: %s", req.key, req.node, msg)
        if self.on_result:
            self.on_result("error", time.monotonic() - t0)
        if self.recorder is not None:
            ns, name = req.key.split("/", 1)
            self.recorder.record(
                "Pod",
                ns,
                name,
                "Warning",
                "FailedScheduling",
                f"Binding rejected: binding {req.key} to node {req.node}: {msg}",
            )
