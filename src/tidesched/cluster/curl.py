"""Request/response calls through libcurl (pycurl), one reusable easy handle per thread.

Why: with thousands of bindings per second on two cores, the client's own CPU per call matters.
Measured against a real kube-apiserver (16 threads, small POSTs): about 100 µs of client CPU per
call here against about 300 µs through urllib3/http.client, whose per-response header parsing in
Python dominates. libcurl keeps the connection alive per handle and releases the GIL while it
waits, so bind workers overlap cleanly with the session thread. Watches stay on urllib3
(``api.Kube.stream``): they are few, long, and read line by line.

The hot path, bindings, goes through :class:`CurlLoop` instead: one thread drives a libcurl
multi handle with many calls in flight, over keep-alive HTTP/1.1 connections (one per call in
flight, up to ``max_active``) or, with ``http2``, multiplexed as HTTP/2 streams over one
connection when the server speaks it (TLS with ALPN, as client-go does). Measured against a real
kube-apiserver here (2,000 bindings, 16 in flight): client CPU 0.25 ms per call with 16
threads, 0.09 ms with the loop over HTTP/2. With 64 in flight (``--bind-workers``) the loop over
HTTP/1.1 costs the API server and etcd less again than over HTTP/2: on 10,000 bindings 8.1-8.8
and 1.9-2.0 CPU s against 9.0-10.1 and 2.4-2.7, and pods bound 11 % faster (median of ten pairs)
on the same two cores (benchmarks/results/2026-11-28-kube-http1-vs-http2.md).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import select
import threading
import time
from dataclasses import dataclass, field
from io import BytesIO
from typing import Callable

import pycurl

log = logging.getLogger("tidesched.cluster.curl")


@dataclass(frozen=True)
class TLS:
    ca_file: str | None
    cert_file: str | None
    key_file: str | None
    verify: bool


@dataclass
class Response:
    status: int
    body: bytes
    raw_headers: bytes
    http_version: str = ""  # "1.1" or "2" on the call loop (what the connection speaks)

    @property
    def headers(self) -> dict[str, str]:
        """Header names in lower case. Parsed only when asked for (errors: ``Retry-After``), so
        a successful call runs no Python per header line."""
        got: dict[str, str] = {}
        for line in self.raw_headers.decode("latin-1").splitlines():
            name, sep, value = line.partition(":")
            if sep:
                got[name.strip().lower()] = value.strip()
        return got


_HTTP_VERSIONS = {
    pycurl.CURL_HTTP_VERSION_1_0: "1.0",
    pycurl.CURL_HTTP_VERSION_1_1: "1.1",
    pycurl.CURL_HTTP_VERSION_2_0: "2",
}


def _configure(c: pycurl.Curl, tls: TLS | None) -> None:
    """Options every handle of ours carries, whatever the call."""
    c.setopt(pycurl.NOSIGNAL, 1)  # timeouts without SIGALRM: we run in threads
    c.setopt(pycurl.TCP_NODELAY, 1)
    c.setopt(pycurl.PROXY, "")  # the API server is reached directly, as client-go does by default
    if tls is not None:
        if tls.ca_file:
            c.setopt(pycurl.CAINFO, tls.ca_file)
        if tls.cert_file:
            c.setopt(pycurl.SSLCERT, tls.cert_file)
        if tls.key_file:
            c.setopt(pycurl.SSLKEY, tls.key_file)
        if not tls.verify:
            c.setopt(pycurl.SSL_VERIFYPEER, 0)
            c.setopt(pycurl.SSL_VERIFYHOST, 0)


def _set_request(c: pycurl.Curl, method: str, url: str, body: bytes | None, headers: list[str], timeout: float) -> None:
    c.setopt(pycurl.URL, url)
    # "Expect:" keeps libcurl from waiting for 100-continue before larger bodies.
    c.setopt(pycurl.HTTPHEADER, [*headers, "Expect:"])
    c.setopt(pycurl.CONNECTTIMEOUT_MS, 10_000)
    c.setopt(pycurl.TIMEOUT_MS, int(timeout * 1000))
    if body is not None:
        c.setopt(pycurl.POSTFIELDS, body)
    elif method == "GET":
        c.setopt(pycurl.HTTPGET, 1)
    else:
        c.setopt(pycurl.POSTFIELDS, b"")
    c.setopt(pycurl.CUSTOMREQUEST, method)


class Cancelled(Exception):
    """The call was given up before it was sent (its ``may_send`` said no, or the loop stopped)."""


@dataclass(eq=False)
class Call:
    """One request for :class:`CurlLoop`. ``done(response, error)`` runs on the loop's thread
    with exactly one of the two set; it must be quick and must not block."""

    method: str
    url: str
    body: bytes | None
    headers: list[str]
    timeout: float
    done: Callable[[Response | None, BaseException | None], None]
    not_before: float = 0.0  # time.monotonic() before which it is not sent (rate limit, backoff)
    may_send: Callable[[], bool] | None = None  # asked right before sending
    owner: object = None  # lets an owner cancel its unsent calls
    out: BytesIO = field(default_factory=BytesIO)


class CurlLoop:
    """Calls from any thread, sent and answered on one thread (see the module docstring).

    ``submit`` queues a call and wakes the loop through a pipe; the loop adds due calls to the
    multi handle up to ``max_active`` in flight, waits on libcurl's sockets and the pipe, and
    hands each answer to its call's ``done``. The thread starts with the first call.
    """

    def __init__(
        self, tls: TLS | None, *, max_active: int = 64, name: str = "api-calls", http2: bool = False
    ) -> None:
        self.tls = tls
        self.max_active = max(1, max_active)
        self.http2 = http2
        self.name = name
        self._lock = threading.Lock()
        self._waiting: list[tuple[float, int, Call]] = []  # heap by not_before, then arrival
        self._seq = itertools.count()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._sleeping = False  # the loop waits in select: a new call must wake it

    # -- any thread -------------------------------------------------------------------------

    def submit(self, call: Call) -> None:
        with self._lock:
            if self._stopping:
                stopped = True
            else:
                stopped = False
                heapq.heappush(self._waiting, (call.not_before, next(self._seq), call))
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                    self._thread.start()
        if stopped:
            call.done(None, Cancelled("the call loop is stopped"))
            return
        if self._sleeping:  # a busy loop takes new calls on its next turn: no syscall per call
            self._sleeping = False
            self._wake()

    def cancel(self, owner: object) -> list[Call]:
        """Take back ``owner``'s calls not yet sent; their ``done`` is not called."""
        with self._lock:
            mine = [c for _, _, c in self._waiting if c.owner is owner]
            if mine:
                self._waiting = [e for e in self._waiting if e[2].owner is not owner]
                heapq.heapify(self._waiting)
        return mine

    def stop(self, timeout: float = 2.0) -> None:
        """Give up unsent calls (``done`` with Cancelled), finish nothing more, end the thread."""
        with self._lock:
            self._stopping = True
            left, self._waiting = self._waiting, []
            thread = self._thread
        for _, _, call in left:
            deliver(call, None, Cancelled("the call loop is stopped"))
        self._wake()
        if thread is not None:
            thread.join(timeout)

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass  # the pipe is full: the loop is awake already

    # -- the loop thread --------------------------------------------------------------------

    def _new_handle(self) -> pycurl.Curl:
        c = pycurl.Curl()
        _configure(c, self.tls)
        # With http2: HTTP/2 over TLS when the server offers it (ALPN), else HTTP/1.1.
        version = pycurl.CURL_HTTP_VERSION_2TLS if self.http2 else pycurl.CURL_HTTP_VERSION_1_1
        c.setopt(pycurl.HTTP_VERSION, version)
        return c

    def _run(self) -> None:
        multi = pycurl.CurlMulti()
        multi.setopt(pycurl.M_PIPELINING, pycurl.PIPE_MULTIPLEX)
        multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, self.max_active)  # the HTTP/1.1 case
        free: list[pycurl.Curl] = []
        active: dict[pycurl.Curl, Call] = {}
        try:
            while True:
                due = self._take_due(self.max_active - len(active))
                if due is None:
                    break  # stopping
                for call in due:
                    if call.may_send is not None and not call.may_send():
                        deliver(call, None, Cancelled("not allowed to send any more"))
                        continue
                    c = free.pop() if free else self._new_handle()
                    try:
                        _set_request(c, call.method, call.url, call.body, call.headers, call.timeout)
                        # HTTP/2 over TLS: a new call waits for the handshake to tell whether the
                        # connection multiplexes rather than opening its own. Over HTTP/1.1
                        # waiting would hold every call behind the first.
                        c.setopt(pycurl.PIPEWAIT, 1 if self.http2 and call.url.startswith("https:") else 0)
                        # No header callback: it would take the GIL once per header line while
                        # the session thread holds it. Calls on the loop get status and body.
                        c.setopt(pycurl.WRITEDATA, call.out)
                        multi.add_handle(c)
                    except Exception as exc:  # noqa: BLE001 - this call fails, the loop goes on
                        c.close()
                        deliver(call, None, exc)
                        continue
                    active[c] = call
                while multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
                    pass
                while True:
                    queued, ok, failed = multi.info_read()
                    for c in ok:
                        multi.remove_handle(c)
                        call = active.pop(c)
                        status = int(c.getinfo(pycurl.RESPONSE_CODE))
                        version = _HTTP_VERSIONS.get(c.getinfo(pycurl.INFO_HTTP_VERSION), "")
                        free.append(c)
                        deliver(call, Response(status, call.out.getvalue(), b"", version), None)
                    for c, code, message in failed:
                        multi.remove_handle(c)
                        call = active.pop(c)
                        c.close()  # it may hold a broken connection: the next call gets a fresh one
                        deliver(call, None, pycurl.error(code, message))
                    if not queued:
                        break
                self._wait(multi, bool(active), len(active) < self.max_active)
        except Exception as exc:  # noqa: BLE001 - the loop must outlive any surprise from libcurl
            log.exception("the API call loop failed; its calls in flight are given up: %s", exc)
        finally:
            for c, call in active.items():
                try:
                    multi.remove_handle(c)
                except pycurl.error:
                    pass
                deliver(call, None, Cancelled("the call loop is stopped"))
            multi.close()
            self._restart()

    def _restart(self) -> None:
        """After a failure (not a stop): a fresh loop thread takes the calls still waiting."""
        if self._stopping:
            return
        time.sleep(0.1)  # a loop that fails at once must not spin
        with self._lock:
            if self._stopping:
                return
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def _take_due(self, room: int) -> list[Call] | None:
        now = time.monotonic()
        out: list[Call] = []
        with self._lock:
            if self._stopping:
                return None
            while self._waiting and len(out) < room and self._waiting[0][0] <= now:
                out.append(heapq.heappop(self._waiting)[2])
        return out

    def _wait(self, multi: pycurl.CurlMulti, busy: bool, room: bool) -> None:
        """Until a socket is ready, libcurl's own timeout, the next delayed call (when there is
        room for it), or a wake-up."""
        with self._lock:
            next_due = self._waiting[0][0] if self._waiting and room else None
        timeout = 1.0
        if busy:
            # libcurl often asks to be called again "now" (0 ms); a millisecond's select keeps
            # that from becoming a busy loop, and any socket event still ends it at once.
            ms = multi.timeout()
            timeout = 0.05 if ms < 0 else min(max(ms, 1) / 1000.0, 0.05)
        if next_due is not None:
            timeout = min(timeout, max(0.0, next_due - time.monotonic()))
        if timeout > 0:
            r, w, x = multi.fdset()
            self._sleeping = True
            # A call submitted between the check above and here has set nothing yet: look again.
            with self._lock:
                if self._waiting and room and self._waiting[0][0] <= time.monotonic():
                    timeout = 0.0
            try:
                if timeout > 0:
                    select.select([*r, self._wake_r], w, x, timeout)
            except (OSError, ValueError):
                time.sleep(min(timeout, 0.001))
            self._sleeping = False
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass


def deliver(call: Call, response: Response | None, error: BaseException | None) -> None:
    try:
        call.done(response, error)
    except Exception:  # noqa: BLE001 - a callback's bug must not end the loop
        log.exception("a call's completion handler failed (%s %s)", call.method, call.url)


class CurlCalls:
    """``request()`` is safe from any thread; each thread keeps its own handle and connection."""

    def __init__(self, tls: TLS | None) -> None:
        self.tls = tls
        self._local = threading.local()

    def _handle(self) -> pycurl.Curl:
        c = getattr(self._local, "curl", None)
        if c is None:
            c = pycurl.Curl()
            _configure(c, self.tls)
            c.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
            self._local.curl = c
        return c

    def request(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str], timeout: float
    ) -> Response:
        """Send one request; raises pycurl.error on transport failures (refused, reset, timed out)."""
        c = self._handle()
        out = BytesIO()
        head = BytesIO()  # every response's header lines (after a redirect or 100: the last counts)
        _set_request(c, method, url, body, [f"{k}: {v}" for k, v in headers.items()], timeout)
        c.setopt(pycurl.WRITEDATA, out)
        c.setopt(pycurl.HEADERFUNCTION, head.write)
        try:
            c.perform()
        except pycurl.error:
            # A failed handle may hold a broken connection: start the next call afresh.
            c.close()
            self._local.curl = None
            raise
        return Response(int(c.getinfo(pycurl.RESPONSE_CODE)), out.getvalue(), head.getvalue())
