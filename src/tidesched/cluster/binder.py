"""Binding pods to nodes through the ``pods/binding`` subresource, off the session path (K8S-2).

``submit`` runs on the scheduling loop and only *assumes* each pod on its node in the
:class:`ClusterStore` (so the next session sees it Bound and the node's resources used) and
hands the call to the connection's call loop (:class:`~tidesched.cluster.curl.CurlLoop`: one thread,
up to ``--bind-workers`` calls in flight, keep-alive HTTP/1.1 or ``--api-http2``) under the shared QPS
limiter. Answers are handled on that loop:

* 201 → the assumption stays until the watch shows ``spec.nodeName`` (or a TTL passes);
* 409 → the pod is already bound: re-read it; bound to our node (a retry after a lost reply)
  counts as success, otherwise the assumption is forgotten;
* 429 / 5xx / transport errors → retried a few times with backoff;
* anything else, or retries exhausted → forgotten (its resources freed in the cache), a
  ``FailedScheduling`` Warning event, and the pod is simply pending for the next session.

A pod with DRA ResourceClaims has its claims written before anything else (:mod:`~tidesched.cluster.claim_writer`:
the allocation and the pod in ``reservedFor``, as kube-scheduler's PreBind), and is bound only
once they are; the claims are assumed in the store with the pod, so the next session sees
their devices taken.
A pod whose decision carries a :class:`~tidesched.model.volumes.VolumePlan` has its volumes
bound first (:mod:`~tidesched.cluster.volume_binder`: PVs given their claims, claims their node
to provision on, then the wait for the PV controller); the Binding is sent when that is done,
and a failure there is handled as a failed bind.

A restart loses nothing: assumptions live only in memory and the cluster's pods are the truth;
the API server refuses a second binding of a bound pod, so no pod is ever bound twice (REL-3).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from tidesched.cluster.api import Cancelled, Kube, error_message, is_transient, status_of
from tidesched.cluster.claim_writer import ClaimWriter
from tidesched.cluster.status import EventRecorder
from tidesched.cluster.store import POD, ClusterStore
from tidesched.cluster.volume_binder import VolumePreBinder
from tidesched.cluster.workers import InFlight
from tidesched.model.volumes import VolumePlan

log = logging.getLogger("tidesched.cluster.binder")


@dataclass(frozen=True)
class BindRequest:
    key: str  # namespace/name
    node: str
    uid: str
    # Written on the pod with the binding (the API server copies a Binding's annotations onto
    # the pod as it sets the node): the vGPU devices deviceshare gave it.
    annotations: Mapping[str, str] | None = None
    # DRA claim writes (model.dra.ledger.ClaimWrite) to make before the Binding.
    claims: tuple[Any, ...] = ()


class Binder:
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
        on_result: Callable[[str, float, str], None] | None = None,
        may_send: Callable[[], bool] | None = None,
    ) -> None:
        self.kube = kube
        self.store = store
        self.recorder = recorder
        self.workers = workers  # calls in flight at once
        self.retries = retries
        self.retry_delay = retry_delay
        self.assume_ttl = assume_ttl
        self.on_result = on_result  # ("bound" | "error", seconds, pod key) for metrics
        # Asked right before every call (the runner: "do we still lead?"). A no drops the bind
        # unsent: nothing leaves a scheduler that lost its lease.
        self.may_send = may_send
        self.bound = 0
        self.failed = 0
        self.dropped = 0
        self._in_flight = InFlight()
        self._stopped = False
        self.claims = ClaimWriter(kube, store, owner=self, max_active=workers, may_send=self._allowed)
        self.volumes = VolumePreBinder(kube, store, may_send=self._allowed, owner=self, max_active=workers)

    def start(self) -> None:
        """Nothing to start: the connection's call loop starts with the first call."""

    def submit(
        self,
        binds: Mapping[str, str],
        annotations: Mapping[str, Mapping[str, str]] | None = None,
        volumes: Mapping[str, VolumePlan] | None = None,
        claims: Mapping[str, Any] | None = None,
    ) -> int:
        """Assume and send the session's binds (with the ``annotations`` a bind carries, the DRA
        ``claims`` it writes first and the ``volumes`` it binds then, by pod key); returns how
        many were sent. Pods already in
        flight, already bound or gone are skipped."""
        queued = 0
        for key, node in sorted(binds.items()):
            pod = self.store.get(POD, key)
            if pod is None or (pod.get("spec") or {}).get("nodeName"):
                continue
            uid = str((pod.get("metadata") or {}).get("uid") or "")
            extra = (annotations or {}).get(key) or None
            writes = tuple((claims or {}).get(key) or ())
            if (pod.get("spec") or {}).get("resourceClaims") and not writes:
                continue  # never bind a pod without its claims
            if not self.store.assume(key, node, uid, extra):
                continue
            if writes and not self.store.assume_claims(uid, key.split("/", 1)[1], writes):
                self.store.forget(key)  # a claim changed since the session read it: next session
                continue
            self._in_flight.add()
            req, t0 = BindRequest(key, node, uid, extra, writes), time.monotonic()
            self._pre_bind(req, t0, (volumes or {}).get(key))
            queued += 1
        return queued

    def _pre_bind(self, req: BindRequest, t0: float, plan: VolumePlan | None) -> None:
        """The pod's DRA claims written (as kube-scheduler's DynamicResources PreBind), then its
        volumes bound (VolumeBinding's), then its Binding sent; a failure gives the bind up."""

        def volumes_then_binding(exc: BaseException | None) -> None:
            if isinstance(exc, Cancelled):
                self._drop(req)
            elif exc is not None:
                self._failed(req, exc, t0)
            else:
                if req.claims:
                    self.store.finish_claims((w.claim for w in req.claims), self.assume_ttl)
                if plan is None:
                    self._send(req, 0, t0, 0.0)
                else:
                    self.volumes.start(req.key, req.uid, plan, lambda error: self._prebound(req, t0, error))

        if req.claims:
            self.claims.write(req.key.split("/", 1)[1], req.uid, req.claims, volumes_then_binding)
        else:
            volumes_then_binding(None)

    def _prebound(self, req: BindRequest, t0: float, error: str | None) -> None:
        """The pod's volumes are bound (error None): its Binding goes; else the bind is given up."""
        if error is None:
            self._send(req, 0, t0, 0.0)
        elif error == "cancelled":
            self._drop(req)
        else:
            self._failed(req, None, t0, error)

    # -- the calls and their answers (on the call loop) ------------------------------------

    def _allowed(self) -> bool:
        return not self._stopped and (self.may_send is None or self.may_send())

    def _send(self, req: BindRequest, attempt: int, t0: float, delay: float) -> None:
        ns, name = req.key.split("/", 1)
        metadata: dict[str, Any] = {"name": name, "namespace": ns, **({"uid": req.uid} if req.uid else {})}
        if req.annotations:
            metadata["annotations"] = dict(req.annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            # The UID makes the API server refuse to bind a pod recreated under the same name.
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": req.node},
        }
        self.kube.send(
            "POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding", body,
            lambda _, exc: self._answered(req, attempt, t0, exc),
            delay=delay, may_send=self._allowed, owner=self, max_active=self.workers,
        )

    def _answered(self, req: BindRequest, attempt: int, t0: float, exc: BaseException | None) -> None:
        if exc is None:
            self._succeeded(req, t0)
        elif isinstance(exc, Cancelled):
            self._drop(req)
        elif status_of(exc) == 409:
            # Already bound: by our own earlier attempt whose reply was lost, or by someone else.
            ns, name = req.key.split("/", 1)
            self.kube.send(
                "GET", f"/api/v1/namespaces/{ns}/pods/{name}", None,
                lambda pod, _: self._conflict(req, t0, exc, pod), owner=self, max_active=self.workers,
            )
        elif is_transient(exc) and attempt < self.retries:
            self._send(req, attempt + 1, t0, self.retry_delay * (2**attempt))
        else:
            self._failed(req, exc, t0)

    def _conflict(self, req: BindRequest, t0: float, exc: BaseException, pod: dict[str, Any] | None) -> None:
        ours = pod is not None and (pod.get("spec") or {}).get("nodeName") == req.node and (
            not req.uid or (pod.get("metadata") or {}).get("uid") == req.uid
        )
        if ours:
            self._succeeded(req, t0)  # our earlier attempt went through; its reply was lost
        else:
            self._failed(req, exc, t0)

    def _succeeded(self, req: BindRequest, t0: float) -> None:
        self.store.finish_binding(req.key, self.assume_ttl)
        self.bound += 1
        if self.on_result:
            self.on_result("bound", time.monotonic() - t0, req.key)
        if self.recorder is not None:
            self.recorder.record_scheduled(req.key, req.node)
        self._done()

    def _failed(
        self, req: BindRequest, exc: BaseException | None, t0: float, reason: str | None = None
    ) -> None:
        self.store.forget(req.key)
        self.store.forget_claims(w.claim for w in req.claims)
        self.failed += 1
        msg = reason or (error_message(exc) if exc else "unknown error")
        log.warning("binding %s to %s failed: %s", req.key, req.node, msg)
        if self.on_result:
            self.on_result("error", time.monotonic() - t0, req.key)
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
        self._done()

    def _drop(self, req: BindRequest) -> None:
        """Given up unsent: the pod is pending again in the cache."""
        self.store.forget(req.key)
        self.store.forget_claims(w.claim for w in req.claims)
        self.dropped += 1
        self._done()

    def _done(self) -> None:
        self._in_flight.done()

    # -- lifecycle ----------------------------------------------------------------------------

    def pending(self) -> int:
        return self._in_flight.count()

    def drain(self, timeout: float) -> bool:
        """Wait for every bind sent to be answered (SIGTERM)."""
        return self._in_flight.wait_idle(timeout)

    def cancel_queued(self) -> int:
        """Leadership lost: take back the binds not yet sent and forget their pods. (Those about
        to be sent are stopped by ``may_send``.)"""
        calls = self.kube.conn.cancel(self)
        for call in calls:
            call.done(None, Cancelled("leadership lost"))
        return len(calls)

    def stop(self, timeout: float = 2.0) -> None:
        """Send nothing more; binds not yet sent are dropped as they come due."""
        self._stopped = True
        self.cancel_queued()
        self.volumes.stop()
