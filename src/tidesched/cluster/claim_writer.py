"""The DRA claim writes of a bind, before its Binding, as kube-scheduler's PreBind (bindClaim).

For each claim of the pod, in order: a claim the session allocated gets the
``resource.kubernetes.io/delete-protection`` finalizer (a plain update, as kube-scheduler
adds it), then a status update with ``status.allocation`` (and ``allocationTimestamp``) and the
pod appended to ``status.reservedFor``; a claim allocated before only gets the pod in
``reservedFor``. A 409 (someone changed the claim meanwhile) re-reads it and tries again; a
claim deleted meanwhile, or allocated to other devices, fails the bind, which then does not
happen (the pod is pending again for the next session). All calls go through the connection's
call loop, like the Binding itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from tidesched.cluster.api import Kube, status_of
from tidesched.cluster.store import CLAIM, DRA_API, ClusterStore
from tidesched.model.dra.objects import FINALIZER

RETRIES = 5


class ClaimConflict(Exception):
    """A claim cannot take this bind's writes (deleted, or allocated to other devices)."""


class ClaimWriter:
    def __init__(self, kube: Kube, store: ClusterStore, *, owner: object = None, max_active: int = 16,
                 may_send: Callable[[], bool] | None = None) -> None:
        self.kube = kube
        self.store = store
        self.owner = owner
        self.max_active = max_active
        self.may_send = may_send

    def write(self, pod_name: str, pod_uid: str, writes: Sequence[Any], done: Callable[[BaseException | None], None]) -> None:
        """Write every claim of ``writes`` (``ClaimWrite``) in turn, then ``done(None)``; the first
        failure ends with ``done(error)``."""
        _Chain(self, pod_name, pod_uid, list(writes), done).step(0)

    def call(self, method: str, path: str, body: Any, answered: Callable[[Any, BaseException | None], None]) -> None:
        self.kube.send(method, path, body, answered, may_send=self.may_send, owner=self.owner, max_active=self.max_active)


def _path(key: str, status: bool = False) -> str:
    ns, name = key.split("/", 1)
    return f"/apis/{DRA_API}/namespaces/{ns}/resourceclaims/{name}" + ("/status" if status else "")


class _Chain:
    def __init__(self, writer: ClaimWriter, pod_name: str, pod_uid: str, writes: list[Any],
                 done: Callable[[BaseException | None], None]) -> None:
        self.w, self.pod_name, self.pod_uid, self.writes, self.done = writer, pod_name, pod_uid, writes, done

    def step(self, i: int, attempt: int = 0) -> None:
        if i == len(self.writes):
            self.done(None)
            return
        key = self.writes[i].claim
        claim = self.w.store.get(CLAIM, key) if attempt == 0 else None
        if claim is not None:
            self.with_claim(i, claim, attempt)
        else:
            self.w.call("GET", _path(key), None, lambda obj, exc: self.fetched(i, obj, exc, attempt))

    def fetched(self, i: int, claim: Any, exc: BaseException | None, attempt: int) -> None:
        if exc is not None:
            self.done(exc)
        else:
            self.with_claim(i, claim, attempt)

    def with_claim(self, i: int, claim: dict[str, Any], attempt: int) -> None:
        w = self.writes[i]
        md = claim.get("metadata") or {}
        if md.get("deletionTimestamp"):
            self.done(ClaimConflict(f"claim {w.claim} got deleted in the meantime"))
            return
        st = dict(claim.get("status") or {})
        have = st.get("allocation")
        if w.allocation is not None:
            if have is not None and have.get("devices") != w.allocation.get("devices"):
                self.done(ClaimConflict(f"claim {w.claim} got allocated elsewhere in the meantime"))
                return
            if FINALIZER not in (md.get("finalizers") or []):
                body = {**claim, "metadata": {**md, "finalizers": [*(md.get("finalizers") or []), FINALIZER]}}
                self.w.call("PUT", _path(w.claim), body, lambda obj, exc: self.updated(i, obj, exc, attempt, again=True))
                return
        elif have is None:
            self.done(ClaimConflict(f"claim {w.claim} is not allocated any more"))
            return
        reserved = list(st.get("reservedFor") or [])
        if any(r.get("uid") == self.pod_uid for r in reserved):
            self.step(i + 1)
            return
        if have is None:
            st["allocation"] = {**w.allocation, "allocationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        st["reservedFor"] = [*reserved, {"resource": "pods", "name": self.pod_name, "uid": self.pod_uid}]
        self.w.call("PUT", _path(w.claim, status=True), {**claim, "status": st},
                    lambda obj, exc: self.updated(i, obj, exc, attempt, again=False))

    def updated(self, i: int, claim: Any, exc: BaseException | None, attempt: int, *, again: bool) -> None:
        if exc is not None:
            if status_of(exc) == 409 and attempt < RETRIES:
                self.step(i, attempt + 1)  # changed meanwhile: read it again and redo
            else:
                self.done(exc)
        elif again:
            self.with_claim(i, claim, attempt)  # the finalizer is on: now the status
        else:
            self.step(i + 1)
