"""A bounded pool of worker threads sending queued API calls (the evictor's): the queue, the
in-flight count that ``drain`` waits on (SIGTERM, :class:`InFlight`, which the binder's call
loop shares), dropping queued work when leadership is lost, and a worker loop that survives
any exception.

A subclass says how to send one request (``_handle``) and how to undo the cache mark it set
when the request is given up without being sent (``_abandon``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Callable, Generic, Protocol, TypeVar


class _Keyed(Protocol):
    key: str


R = TypeVar("R", bound=_Keyed)


class InFlight:
    """How many requests were handed out and not yet finished; ``wait_idle`` is what a SIGTERM
    drain waits on. Shared by the worker pools and the binder's call loop."""

    def __init__(self) -> None:
        self._count = 0
        self._cond = threading.Condition()

    def add(self) -> None:
        with self._cond:
            self._count += 1

    def done(self) -> None:
        with self._cond:
            self._count -= 1
            self._cond.notify_all()

    def count(self) -> int:
        with self._cond:
            return self._count

    def wait_idle(self, timeout: float) -> bool:
        """True once nothing is in flight; False if ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True


class WorkerPool(Generic[R]):
    #: what one request is, for log lines ("bind", "eviction")
    what = "request"

    def __init__(self, name: str, workers: int, log: logging.Logger,
                 may_send: Callable[[], bool] | None = None) -> None:
        # Asked right before every call (the runner: "do we still lead?"). A no drops the
        # request unsent: nothing leaves a scheduler that lost its lease.
        self.may_send = may_send
        self.dropped = 0
        self._log = log
        self._queue: queue.Queue[R | None] = queue.Queue()
        self._in_flight = InFlight()
        self._cancelled = False
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(workers)
        ]

    # -- to be provided by the subclass ------------------------------------------------------

    def _handle(self, req: R) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def _abandon(self, req: R) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    # -- the pool ----------------------------------------------------------------------------

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _enqueue(self, req: R) -> None:
        self._in_flight.add()
        self._queue.put(req)

    def pending(self) -> int:
        return self._in_flight.count()

    def drain(self, timeout: float) -> bool:
        """Wait for queued and in-flight requests to finish (SIGTERM)."""
        return self._in_flight.wait_idle(timeout)

    def cancel_queued(self) -> int:
        """Leadership lost: drop requests not yet sent and undo their cache marks."""
        dropped = 0
        while True:
            try:
                req = self._queue.get_nowait()
            except queue.Empty:
                break
            if req is not None:
                self._abandon(req)
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

    def _drop_unsent(self, req: R) -> bool:
        """Before each attempt: give the request up when stopping or no longer leading."""
        if self._cancelled or (self.may_send is not None and not self.may_send()):
            self._abandon(req)
            self.dropped += 1
            return True
        return False

    def _done(self) -> None:
        self._in_flight.done()

    def _run(self) -> None:
        while True:
            req = self._queue.get()
            try:
                if req is None:
                    return
                self._handle(req)
            except Exception as exc:  # noqa: BLE001 - a worker must survive anything
                self._log.exception("%s of %s crashed: %s", self.what, req.key if req else "?", exc)
                if req is not None:
                    self._abandon(req)
            finally:
                if req is not None:
                    self._done()
                self._queue.task_done()
