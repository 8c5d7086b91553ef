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
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from tidesched.kube.api import Kube, error_message, is_transient, status_of
from tidesched.kube.status import EventRecorder
from tidesched.kube.store import POD, ClusterStore
from tidesched.kube.workers import WorkerPool

log = logging.getLogger("tidesched.kube.binder")


@dataclass(frozen=True)
class BindRequest:
    key: str  # namespace/name
    node: str
    uid: str


class Binder(WorkerPool[BindRequest]):
    what = "bind"

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
        super().__init__("binder", workers, log, may_send)
        self.kube = kube
        self.store = store
        self.recorder = recorder
        self.workers = workers
        self.retries = retries
        self.retry_delay = retry_delay
        self.assume_ttl = assume_ttl
        self.on_result = on_result  # ("bound" | "error", seconds) for metrics
        self.bound = 0
        self.failed = 0

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
            self._enqueue(BindRequest(key, node, uid))
            queued += 1
        return queued

    def _abandon(self, req: BindRequest) -> None:
        self.store.forget(req.key)  # resources freed in the cache; the pod is pending again

    def _handle(self, req: BindRequest) -> None:
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
            if self._drop_unsent(req):
                return
            try:
                self.kube.post(f"/api/v1/namespaces/{ns}/pods/{name}/binding", body)
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
            pod = self.kube.get(f"/api/v1/namespaces/{ns}/pods/{name}")
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
            self.recorder.record_scheduled(req.key, req.node)

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
