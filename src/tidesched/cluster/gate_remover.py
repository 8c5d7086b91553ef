"""Removing Volcano's queue-admission gate from the pods a session admitted
(``Decisions.ungated``; feature ``SchedulingGatesQueueAdmission``), off the session path.

As vc-scheduler v1.15.1's gate manager (``pkg/scheduler/gate``): a pool of workers
(``--gate-removal-worker-num``, 5) sends one strategic-merge PATCH per pod that deletes the gate
by name from ``spec.schedulingGates`` (``$patch: delete``), which leaves any other gate alone and
is a no-op when the gate is gone already. A pod is sent only while its only gate is Volcano's
(the store's copy is looked at when the session's decision arrives). Best effort: a failed
removal is logged, and the next session, seeing the pod still gated and still admitted, asks
again. The informer then shows the pod ungated, and a later session places it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Callable

from tidesched.cluster.api import Kube, error_message, is_transient, status_of
from tidesched.cluster.store import POD, ClusterStore
from tidesched.cluster.workers import WorkerPool
from tidesched.model.gates import QUEUE_ALLOCATION_GATE, only_volcano_gate, raw_gate_names

log = logging.getLogger("tidesched.cluster.gate_remover")

PATCH = {"spec": {"schedulingGates": [{"name": QUEUE_ALLOCATION_GATE, "$patch": "delete"}]}}


@dataclass(frozen=True)
class GateRemoval:
    key: str


class GateRemover(WorkerPool[GateRemoval]):
    what = "scheduling gate removal"

    def __init__(
        self,
        kube: Kube,
        store: ClusterStore,
        *,
        workers: int = 5,
        retries: int = 2,
        retry_delay: float = 0.5,
        repeat_after: float = 5.0,
        may_send: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__("gate-remover", max(1, workers), log, may_send)
        self.kube = kube
        self.store = store
        self.retries = retries
        self.retry_delay = retry_delay
        # A pod whose removal was just sent is not sent again until the watch had time to show
        # it ungated (the next session may still see the old copy).
        self.repeat_after = repeat_after
        self._recent: dict[str, float] = {}  # key -> when it may be sent again
        self._lock = threading.Lock()  # _recent: the loop submits, the workers finish
        self.removed = 0
        self.failed = 0

    def submit(self, keys: Iterable[str]) -> int:
        queued = 0
        now = time.monotonic()
        for key in keys:
            with self._lock:
                if self._recent.get(key, 0.0) > now:
                    continue  # in flight, or just sent
                pod = self.store.get(POD, key)
                if pod is None or not only_volcano_gate(raw_gate_names(pod.get("spec"))):
                    continue  # gone, lifted already, or another gate came first
                self._recent[key] = now + 3600.0  # until the call ends
            self._enqueue(GateRemoval(key))
            queued += 1
        with self._lock:
            for key in [k for k, t in self._recent.items() if t <= now]:
                del self._recent[key]
        return queued

    def _forget(self, key: str, again_after: float | None = None) -> None:
        with self._lock:
            if again_after is None:
                self._recent.pop(key, None)
            else:
                self._recent[key] = time.monotonic() + again_after

    def _abandon(self, req: GateRemoval) -> None:
        self._forget(req.key)

    def _handle(self, req: GateRemoval) -> None:
        ns, name = req.key.split("/", 1)
        for attempt in range(self.retries + 1):
            if self._drop_unsent(req):
                return
            try:
                self.kube.patch(f"/api/v1/namespaces/{ns}/pods/{name}", PATCH, strategic=True)
                self.removed += 1
                self._forget(req.key, self.repeat_after)
                log.info("removed %s from pod %s: its queue admitted it", QUEUE_ALLOCATION_GATE, req.key)
                return
            except Exception as exc:  # noqa: BLE001 - classified below
                if status_of(exc) == 404:
                    self._forget(req.key)
                    return  # the pod is gone
                if not is_transient(exc) or attempt == self.retries:
                    self.failed += 1
                    self._forget(req.key)
                    log.warning("removing %s from pod %s failed (the next session asks again): %s",
                                QUEUE_ALLOCATION_GATE, req.key, error_message(exc))
                    return
                time.sleep(self.retry_delay * (2 ** attempt))
