"""Evicting the session's victims, off the session path (K8S-2).

Two modes, as configured (``--eviction-mode``):

* ``evict`` (default): the Eviction API, ``policy/v1`` ``pods/eviction``. The API server honours
  PodDisruptionBudgets and answers 429 while a budget allows no disruption; we retry with
  backoff (``Retry-After`` honoured, capped) a bounded number of times, then give up with a
  Warning event — the next session re-derives whether the eviction is still wanted.
* ``delete``: DELETE the pod with ``--eviction-grace-period`` (default: the pod's own), as
  Volcano's default evictor does; budgets are not consulted.

Before either, the victim is marked as kube-scheduler and vc-scheduler v1.15.1 mark theirs: a
``DisruptionTarget`` condition, True, reason ``PreemptionByScheduler`` ("<its scheduler>:
preempting to accommodate a higher priority pod"), which a Job's ``podFailurePolicy`` can match
and preempt reads (a pod a scheduler is already preempting frees its node soon). In ``delete``
mode also ``Ready`` False, reason ``Evict`` ("Pod is evicted, because of <reason>"), as
vc-scheduler writes it before its DELETE; not in ``evict`` mode, where a budget may keep the pod
running and serving. A mark that cannot be written (other than the pod being gone, or a
transient error, retried) is logged and the eviction goes on.

Both carry the pod UID as a precondition so a pod recreated under the same name is never hit.
While a call is in flight the pod is marked Releasing in the cache, so the next session neither
evicts it again nor counts its resources as free (they are FutureIdle until the pod is gone).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from tidesched.cluster.api import Kube, error_message, is_transient, status_of
from tidesched.cluster.status import EventRecorder, rfc3339
from tidesched.cluster.store import POD, ClusterStore
from tidesched.cluster.workers import WorkerPool

log = logging.getLogger("tidesched.cluster.evictor")

EVICT, DELETE = "evict", "delete"


@dataclass(frozen=True)
class EvictRequest:
    key: str
    uid: str
    reason: str


class Evictor(WorkerPool[EvictRequest]):
    what = "eviction"

    def __init__(
        self,
        kube: Kube,
        store: ClusterStore,
        recorder: EventRecorder | None = None,
        *,
        mode: str = EVICT,
        grace_period: int | None = None,
        workers: int = 4,
        retries: int = 5,
        retry_delay: float = 1.0,
        max_retry_after: float = 10.0,
        releasing_ttl: float = 60.0,
        on_result: Callable[[str], None] | None = None,
        may_send: Callable[[], bool] | None = None,
    ) -> None:
        if mode not in (EVICT, DELETE):
            raise ValueError(f"eviction mode must be {EVICT!r} or {DELETE!r}, not {mode!r}")
        super().__init__("evictor", workers, log, may_send)
        self.kube = kube
        self.store = store
        self.recorder = recorder
        self.mode = mode
        self.grace_period = grace_period
        self.retries = retries
        self.retry_delay = retry_delay
        self.max_retry_after = max_retry_after
        self.releasing_ttl = releasing_ttl
        self.on_result = on_result  # "evicted" | "blocked" | "error"
        self.evicted = 0
        self.failed = 0

    def submit(self, victims: Sequence[str], reasons: Mapping[str, str]) -> int:
        queued = 0
        for key in sorted(set(victims)):
            pod = self.store.get(POD, key)
            if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
                continue
            if not self.store.mark_releasing(key, self.releasing_ttl):
                continue  # already being evicted
            uid = str((pod.get("metadata") or {}).get("uid") or "")
            self._enqueue(EvictRequest(key, uid, reasons.get(key, "")))
            queued += 1
        return queued

    def _abandon(self, req: EvictRequest) -> None:
        self.store.unmark_releasing(req.key)

    def _call(self, req: EvictRequest) -> None:
        ns, name = req.key.split("/", 1)
        options: dict[str, object] = {}
        if req.uid:
            options["preconditions"] = {"uid": req.uid}
        if self.grace_period is not None:
            options["gracePeriodSeconds"] = self.grace_period
        if self.mode == EVICT:
            body = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": ns},
                "deleteOptions": options,
            }
            self.kube.post(f"/api/v1/namespaces/{ns}/pods/{name}/eviction", body)
        else:
            self.kube.delete(
                f"/api/v1/namespaces/{ns}/pods/{name}",
                {"apiVersion": "v1", "kind": "DeleteOptions", **options},
            )

    def _mark(self, req: EvictRequest) -> None:
        """The victim's conditions (module docstring). Raises what the caller retries or ends
        on (404: gone; transient errors); any other refusal is logged and let go."""
        pod = self.store.get(POD, req.key) or {}
        scheduler = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
        now = rfc3339()
        conditions = [{
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": f"{scheduler}: preempting to accommodate a higher priority pod",
            "lastTransitionTime": now,
        }]
        if self.mode == DELETE:
            conditions.insert(0, {
                "type": "Ready",
                "status": "False",
                "reason": "Evict",
                "message": f"Pod is evicted, because of {req.reason}",
                "lastTransitionTime": now,
            })
        patch: dict[str, object] = {"status": {"conditions": conditions}}
        if req.uid:
            patch["metadata"] = {"uid": req.uid}  # a precondition: never a recreated pod's
        ns, name = req.key.split("/", 1)
        try:
            # Strategic merge: the conditions join the pod's others by type.
            self.kube.patch(f"/api/v1/namespaces/{ns}/pods/{name}/status", patch, strategic=True)
        except Exception as exc:  # noqa: BLE001 - classified here
            if status_of(exc) == 404 or is_transient(exc):
                raise
            log.warning("marking %s as a disruption target failed, evicting it anyway: %s", req.key, error_message(exc))

    def _handle(self, req: EvictRequest) -> None:
        last: BaseException | None = None
        marked = False
        for attempt in range(self.retries + 1):
            if self._drop_unsent(req):
                return
            try:
                if not marked:
                    self._mark(req)
                    marked = True
                self._call(req)
                self.evicted += 1
                self._result("evicted")
                return  # the watch shows deletionTimestamp / DELETED and clears the mark
            except Exception as exc:  # noqa: BLE001 - classified below
                last = exc
                code = status_of(exc)
                if code == 404:
                    self.store.unmark_releasing(req.key)
                    self._result("evicted")
                    return  # already gone: the goal is reached
                if not is_transient(exc) or attempt == self.retries:
                    break
                time.sleep(self._delay(exc, attempt))
        self.store.unmark_releasing(req.key)
        self.failed += 1
        blocked = status_of(last) if last else 0
        msg = error_message(last) if last else "unknown error"
        log.warning("evicting %s failed: %s", req.key, msg)
        self._result("blocked" if blocked == 429 else "error")
        if self.recorder is not None:
            ns, name = req.key.split("/", 1)
            reason = "EvictionBlocked" if blocked == 429 else "FailedEviction"
            self.recorder.record("Pod", ns, name, "Warning", reason, f"Could not evict {req.key}: {msg}")

    def _delay(self, exc: BaseException, attempt: int) -> float:
        delay = self.retry_delay * (2**attempt)
        headers = getattr(exc, "headers", None)
        if headers is not None:
            try:
                delay = max(delay, float(headers.get("retry-after")))
            except (TypeError, ValueError):
                pass
        return min(delay, self.max_retry_after)

    def _result(self, what: str) -> None:
        if self.on_result:
            self.on_result(what)
