"""Request/response calls through libcurl (pycurl), one reusable easy handle per thread.

Why: with thousands of bindings per second on two cores, the client's own CPU per call matters.
Measured against a real kube-apiserver (16 threads, small POSTs): about 100 µs of client CPU per
call here against about 300 µs through urllib3/http.client, whose per-response header parsing in
Python dominates. libcurl keeps the connection alive per handle and releases the GIL while it
waits, so bind workers overlap cleanly with the session thread. Watches stay on urllib3
(``api.Kube.stream``): they are few, long, and read line by line.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from io import BytesIO

import pycurl


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


class CurlCalls:
    """``request()`` is safe from any thread; each thread keeps its own handle and connection."""

    def __init__(self, tls: TLS | None) -> None:
        self.tls = tls
        self._local = threading.local()

    def _handle(self) -> pycurl.Curl:
        c = getattr(self._local, "curl", None)
        if c is None:
            c = pycurl.Curl()
            c.setopt(pycurl.NOSIGNAL, 1)  # timeouts without SIGALRM: we run in threads
            c.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
            c.setopt(pycurl.TCP_NODELAY, 1)
            c.setopt(pycurl.PROXY, "")  # the API server is reached directly, as client-go does by default
            if self.tls is not None:
                if self.tls.ca_file:
                    c.setopt(pycurl.CAINFO, self.tls.ca_file)
                if self.tls.cert_file:
                    c.setopt(pycurl.SSLCERT, self.tls.cert_file)
                if self.tls.key_file:
                    c.setopt(pycurl.SSLKEY, self.tls.key_file)
                if not self.tls.verify:
                    c.setopt(pycurl.SSL_VERIFYPEER, 0)
                    c.setopt(pycurl.SSL_VERIFYHOST, 0)
            self._local.curl = c
        return c

    def request(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str], timeout: float
    ) -> Response:
        """Send one request; raises pycurl.error on transport failures (refused, reset, timed out)."""
        c = self._handle()
        out = BytesIO()
        head = BytesIO()  # every response's header lines (after a redirect or 100: the last counts)
        c.setopt(pycurl.URL, url)
        # "Expect:" keeps libcurl from waiting for 100-continue before larger bodies.
        c.setopt(pycurl.HTTPHEADER, [*(f"{k}: {v}" for k, v in headers.items()), "Expect:"])
        c.setopt(pycurl.WRITEDATA, out)
        c.setopt(pycurl.HEADERFUNCTION, head.write)
        c.setopt(pycurl.CONNECTTIMEOUT_MS, 10_000)
        c.setopt(pycurl.TIMEOUT_MS, int(timeout * 1000))
        if body is not None:
            c.setopt(pycurl.POSTFIELDS, body)
        elif method == "GET":
            c.setopt(pycurl.HTTPGET, 1)
        else:
            c.setopt(pycurl.POSTFIELDS, b"")
        c.setopt(pycurl.CUSTOMREQUEST, method)
        try:
            c.perform()
        except pycurl.error:
            # A failed handle may hold a broken connection: start the next call afresh.
            c.close()
            self._local.curl = None
            raise
        return Response(int(c.getinfo(pycurl.RESPONSE_CODE)), out.getvalue(), head.getvalue())
