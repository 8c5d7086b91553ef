"""Leader election on a ``coordination.k8s.io/v1`` Lease, client-go's algorithm (K8S-3).

* A candidate reads the Lease; it takes it when there is none, when it is released (empty
  holder), or when the holder has not renewed for ``lease_duration`` *as observed by our own
  clock* (we never compare our clock with the holder's timestamps). Writes carry the
  ``resourceVersion`` read, so of two candidates only one wins (409 for the other).
* The leader renews every ``retry_period``; when it cannot renew within ``renew_deadline`` it has
  lost: ``on_stopped`` is called at once and it never schedules again in this process (the
  runner then exits, as kube-scheduler and vc-scheduler do, and the restart starts clean).
* ``release()`` (SIGTERM) clears the holder so a standby takes over without waiting out the lease.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Callable

from tidesched.cluster.api import ApiException, Kube, error_message

log = logging.getLogger("tidesched.cluster.leader")


def micro_time(ts: float | None = None) -> str:
    dt = datetime.fromtimestamp(time.time() if ts is None else ts, timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        *,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_started: Callable[[], None] | None = None,
        on_stopped: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease-duration > renew-deadline > retry-period > 0")
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started = on_started
        self.on_stopped = on_stopped
        # Our own clock for lease expiry and the renew deadline (never the holder's timestamps);
        # tests pass a manual clock so that no thread stall can expire a lease by accident.
        self.clock = clock
        self.attempts = 0  # acquire/renew attempts made, successful or not
        self.leading = threading.Event()
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._observed: tuple[Any, float] | None = None  # (holder, renewTime) seen, our monotonic time
        self._lease: dict[str, Any] | None = None
        self._thread = threading.Thread(target=self._run, name="leader-elector", daemon=True)

    def is_leader(self) -> bool:
        return self.leading.is_set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.retry_period + 5)

    # -- the loop -------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set() and not self.leading.is_set():
            if self._try_acquire_or_renew():
                self.leading.set()
                log.info("%s became leader of lease %s/%s", self.identity, self.namespace, self.name)
                if self.on_started:
                    self.on_started()
                break
            self._stop.wait(self.retry_period)
        last_renew = self.clock()
        while not self._stop.is_set() and self.leading.is_set():
            self._stop.wait(self.retry_period)
            if self._stop.is_set():
                return
            if self._try_acquire_or_renew():
                last_renew = self.clock()
            elif self.clock() - last_renew >= self.renew_deadline or self._held_by_other():
                self._lose()
                return

    def _lose(self) -> None:
        log.error("%s lost lease %s/%s", self.identity, self.namespace, self.name)
        self.leading.clear()
        self.lost.set()
        if self.on_stopped:
            self.on_stopped()

    def _held_by_other(self) -> bool:
        spec = (self._lease or {}).get("spec") or {}
        return bool(spec.get("holderIdentity")) and spec.get("holderIdentity") != self.identity

    def _path(self, name: str = "") -> str:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"
        return f"{path}/{name}" if name else path

    def _get(self) -> dict[str, Any] | None:
        try:
            return self.kube.get(self._path(self.name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _try_acquire_or_renew(self) -> bool:
        try:
            return self._acquire_or_renew()
        finally:
            self.attempts += 1

    def _acquire_or_renew(self) -> bool:
        now = time.time()
        try:
            lease = self._get()
            if lease is None:
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(None, now),
                }
                self._lease = self.kube.post(self._path(), body)
                return True
            self._lease = lease
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            observed = (holder, spec.get("renewTime"))
            if self._observed is None or self._observed[0] != observed:
                self._observed = (observed, self.clock())
            if holder and holder != self.identity:
                duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
                if self.clock() - self._observed[1] < duration:
                    return False  # someone else holds a live lease
            body = {**lease, "spec": self._spec(spec, now)}
            self._lease = self.kube.put(self._path(self.name), body)
            return True
        except Exception as exc:  # noqa: BLE001 - a failed attempt is just a failed attempt
            log.info("lease %s/%s: %s", self.namespace, self.name, error_message(exc))
            return False

    def _spec(self, old: dict[str, Any] | None, now: float) -> dict[str, Any]:
        ours = old is not None and old.get("holderIdentity") == self.identity
        transitions = int((old or {}).get("leaseTransitions") or 0)
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": (old or {}).get("acquireTime") if ours else micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": transitions if ours or old is None else transitions + 1,
        }

    def release(self) -> bool:
        """Give the lease up (SIGTERM). Only when we hold it; the renew loop is stopped first so
        its last renewal cannot race the release."""
        was_leading = self.leading.is_set()
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(self.retry_period + self.kube.request_timeout)
        self.leading.clear()
        if not was_leading:
            return False
        for _ in range(3):
            try:
                lease = self._get()
                spec = (lease or {}).get("spec") or {}
                if lease is None or spec.get("holderIdentity") != self.identity:
                    return False
                spec = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": micro_time()}
                self.kube.put(self._path(self.name), {**lease, "spec": spec})
                log.info("%s released lease %s/%s", self.identity, self.namespace, self.name)
                return True
            except ApiException as exc:
                if exc.status != 409:
                    log.warning("releasing lease failed: %s", error_message(exc))
                    return False
            except Exception as exc:  # noqa: BLE001
                log.warning("releasing lease failed: %s", error_message(exc))
                return False
        return False
