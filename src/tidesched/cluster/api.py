"""The adapter's one door to the API server: a lean JSON-over-HTTPS client (K8S-1..3).

Credentials come from the official ``kubernetes`` client's loaders, so a kubeconfig (tokens,
client certificates, exec and auth-provider plugins, ``--context``) or the in-cluster service
account work exactly as they do for ``kubectl``-style tools. Requests do *not* go through the
generated client: its per-call validation, model handling and per-request credential reload cost
more than the request itself when thousands of bindings are sent. Instead one urllib3 pool of
keep-alive connections carries every call, bodies are raw JSON (encoded and decoded with orjson),
and objects stay the dicts the API server sent, which is what the scheduling core parses.

Client-side rate limiting is ours (:class:`TokenBucket`, ``--kube-api-qps``/``--kube-api-burst``);
like kube-scheduler, events and the leader-election lease get their own buckets so that neither
can starve binds nor be starved by them.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator
from urllib.parse import urlencode

import orjson
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from tidesched.cluster.curl import TLS, Call, Cancelled, CurlCalls, CurlLoop, Response, deliver

__all__ = ["ApiException", "Cancelled", "Connection", "Kube", "TokenBucket", "connect", "status_of", "is_transient"]

# How long a bearer token from the kubeconfig loader is reused before its refresh hook (exec
# plugin, token file, OIDC) is asked again; a 401 asks at once.
TOKEN_REFRESH_SECONDS = 60.0
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` stored; thread-safe.

    ``acquire`` reserves a token and sleeps until it is due (golang.org/x/time/rate's Wait), so
    waiting callers are served in the order they asked. ``qps <= 0`` disables limiting.
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.qps = float(qps)
        self.burst = max(1, int(burst))
        self.clock = clock  # injectable: tests check the schedule without waiting for it
        self.sleep = sleep
        self.acquired = 0
        self._tokens = float(self.burst)
        self._last = clock()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            self.sleep(wait)

    def reserve(self) -> float:
        """Take a token without waiting; the seconds until it is due (golang's Reserve)."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            now = self.clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            self.acquired += 1
            return -self._tokens / self.qps if self._tokens < 0 else 0.0


@dataclass
class Connection:
    """Where the API server is, how to authenticate, and the pooled connections to it."""

    host: str
    pool: urllib3.PoolManager  # watches, and calls when libcurl cannot serve the setup
    config: k8s_client.Configuration | None = None  # the loader's, for token refresh
    calls: CurlCalls | None = None  # request/response calls
    http2: bool = False  # the call loop's calls as HTTP/2 streams over one connection (CurlLoop)
    _token: str | None = None
    _loop: CurlLoop | None = None
    _executor: ThreadPoolExecutor | None = None
    _token_at: float = field(default=-1e18)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def authorization(self, force: bool = False) -> str | None:
        """The ``Authorization`` header value, refreshed through the loader's hook at most every
        :data:`TOKEN_REFRESH_SECONDS` (or now, after a 401)."""
        cfg = self.config
        if cfg is None:
            return None
        now = time.monotonic()
        with self._lock:
            if force or now - self._token_at > TOKEN_REFRESH_SECONDS:
                # get_api_key_with_prefix runs the refresh hook (exec plugins, rotated token files).
                self._token = cfg.get_api_key_with_prefix("authorization") or cfg.get_api_key_with_prefix(
                    "BearerToken"
                )
                self._token_at = now
            return self._token

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
            executor, self._executor = self._executor, None
        if loop is not None:
            loop.stop()
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        self.pool.clear()

    def call(self, method: str, url: str, data: bytes | None, headers: dict[str, str], timeout: float) -> Response:
        """One request, answered in this thread: libcurl when it serves the setup, else urllib3.
        Transport failures raise (pycurl.error / urllib3 errors)."""
        if self.calls is not None:
            return self.calls.request(method, url, data, headers, timeout)
        resp = self.pool.request(
            method, url, body=data, headers=headers,
            timeout=urllib3.Timeout(connect=10.0, read=timeout), preload_content=True,
        )
        raw = "".join(f"{k}: {v}\r\n" for k, v in resp.headers.items()).encode("latin-1", "replace")
        return Response(resp.status, resp.data, raw)

    def submit(self, call: Call, max_active: int = 64) -> None:
        """Send ``call`` without waiting for it: on the libcurl loop (keep-alive HTTP/1.1
        connections, or HTTP/2 with ``http2``), or, when libcurl cannot serve the setup, on a
        few threads through urllib3."""
        with self._lock:
            if self.calls is not None:
                if self._loop is None:
                    self._loop = CurlLoop(self.calls.tls, max_active=max_active, http2=self.http2)
                loop: CurlLoop | None = self._loop
            else:
                loop = None
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(max_active, thread_name_prefix="api-calls")
                executor = self._executor
        if loop is not None:
            loop.submit(call)
        else:
            executor.submit(self._call_now, call)

    def cancel(self, owner: object) -> list[Call]:
        """``owner``'s calls not yet sent on the loop, taken back unsent."""
        loop = self._loop
        return loop.cancel(owner) if loop is not None else []

    def _call_now(self, call: Call) -> None:
        wait = call.not_before - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if call.may_send is not None and not call.may_send():
            deliver(call, None, Cancelled("not allowed to send any more"))
            return
        headers = dict(h.split(": ", 1) for h in call.headers)
        try:
            resp = self.call(call.method, call.url, call.body, headers, call.timeout)
        except Exception as exc:  # noqa: BLE001 - transport failures go to the caller's handler
            deliver(call, None, exc)
            return
        deliver(call, resp, None)


def connect(
    kubeconfig: str | None = None,
    *,
    host: str | None = None,
    context: str | None = None,
    pool_size: int = 32,
    http2: bool = False,
) -> Connection:
    """A Connection from ``kubeconfig`` (path), else ``host`` alone (a plain URL: ``kubectl proxy``,
    tests), else the in-cluster service account. With both, the kubeconfig's credentials are used
    against ``host`` (``--master`` overrides the server URL, as client-go's BuildConfigFromFlags
    does). The kubeconfig file is never written back. ``http2``: the call loop multiplexes its
    calls over one HTTP/2 connection (CurlLoop)."""
    cfg: k8s_client.Configuration | None = None
    if kubeconfig:
        cfg = k8s_client.Configuration()
        k8s_config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=cfg, persist_config=False
        )
    elif host is None:
        cfg = k8s_client.Configuration()
        k8s_config.load_incluster_config(client_configuration=cfg)
    url = (host or (cfg.host if cfg else "")).rstrip("/")
    tls: dict[str, Any] = {}
    if cfg is not None and url.startswith("https"):
        tls = {
            "cert_reqs": "CERT_REQUIRED" if cfg.verify_ssl else "CERT_NONE",
            "ca_certs": cfg.ssl_ca_cert,
            "cert_file": cfg.cert_file,
            "key_file": cfg.key_file,
        }
        if cfg.tls_server_name:
            tls["server_hostname"] = cfg.tls_server_name
        if cfg.assert_hostname is not None:
            tls["assert_hostname"] = cfg.assert_hostname
    # One connection per concurrent caller (bind workers, status writer, events, watches).
    options: dict[str, Any] = {"num_pools": 2, "maxsize": pool_size, "block": False, "retries": False, **tls}
    if cfg is not None and cfg.proxy:
        pool: urllib3.PoolManager = urllib3.ProxyManager(cfg.proxy, proxy_headers=cfg.proxy_headers, **options)
    else:
        pool = urllib3.PoolManager(**options)
    calls = None
    # libcurl serves the common setups (plain URL, or TLS with CA / client certificate files);
    # a proxy or a TLS server-name override stays with urllib3, which knows both.
    if cfg is None or not (cfg.proxy or cfg.tls_server_name):
        calls = CurlCalls(
            TLS(cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file, bool(cfg.verify_ssl)) if tls and cfg else None
        )
    return Connection(url, pool, cfg, calls, http2=http2)


def status_of(exc: BaseException) -> int:
    """HTTP status of a failed call; 0 for transport errors (refused, dropped, timed out)."""
    if isinstance(exc, ApiException):
        return int(exc.status or 0)
    return 0


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: transport errors, 429 and 5xx (client-go's IsServerTimeout/IsTooManyRequests…)."""
    code = status_of(exc)
    return code == 0 or code == 429 or code >= 500


def error_message(exc: BaseException) -> str:
    """The API server's Status message when there is one, else the exception text."""
    if isinstance(exc, ApiException) and exc.body:
        try:
            body = orjson.loads(exc.body)
            if isinstance(body, dict) and body.get("message"):
                return f"{body['message']} ({exc.status})"
        except orjson.JSONDecodeError:
            pass
        return f"{exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


def _api_error(status: int, headers: Any, data: bytes) -> ApiException:
    exc = ApiException(status=status, reason=_REASONS.get(status, ""))
    exc.body = data.decode("utf-8", "replace")
    exc.headers = {str(k).lower(): v for k, v in dict(headers).items()}
    return exc


_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict",
            410: "Gone", 422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
            503: "Service Unavailable", 504: "Gateway Timeout"}


@dataclass
class Kube:
    """Calls on one Connection under one rate limiter. Paths are the API's (``/api/v1/...``)."""

    conn: Connection
    limiter: TokenBucket | None = None
    request_timeout: float = 30.0

    def with_limiter(self, limiter: TokenBucket | None) -> Kube:
        """The same connection pool under another rate limiter."""
        return Kube(self.conn, limiter, self.request_timeout)

    def _url(self, path: str, params: dict[str, Any] | None) -> str:
        if params:
            query = {k: ("true" if v is True else "false" if v is False else v) for k, v in params.items() if v is not None}
            return f"{self.conn.host}{path}?{urlencode(query)}"
        return f"{self.conn.host}{path}"

    def _headers(self, content_type: str | None, force_auth: bool = False) -> dict[str, str]:
        headers = {"Accept": JSON}
        if content_type:
            headers["Content-Type"] = content_type
        auth = self.conn.authorization(force_auth)
        if auth:
            headers["Authorization"] = auth
        return headers

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        content_type: str = JSON,
    ) -> dict[str, Any]:
        """One call; the JSON answer as a dict. Non-2xx raises ApiException (status, headers,
        body); transport problems raise urllib3 errors. A 401 refreshes the credentials and
        tries once more (an exec plugin's token expired)."""
        if self.limiter is not None:
            self.limiter.acquire()
        data = None if body is None else orjson.dumps(body)
        url = self._url(path, params)
        for attempt in (0, 1):
            headers = self._headers(content_type if data is not None else None, force_auth=attempt == 1)
            r = self.conn.call(method, url, data, headers, self.request_timeout)
            if r.status < 300:
                return orjson.loads(r.body) if r.body else {}
            if r.status != 401 or self.conn.config is None or attempt == 1:
                raise _api_error(r.status, r.headers, r.body)
        raise AssertionError("unreachable")

    def send(
        self,
        method: str,
        path: str,
        body: Any,
        done: Callable[[dict[str, Any] | None, BaseException | None], None],
        *,
        delay: float = 0.0,
        may_send: Callable[[], bool] | None = None,
        owner: object = None,
        max_active: int = 64,
    ) -> None:
        """``request`` without waiting: returns at once; ``done(answer, error)`` is called later
        on the connection's call loop, with the JSON answer or the error ``request`` would have
        raised (Cancelled when ``may_send`` said no right before sending). The rate limiter's
        token is reserved now and the call goes out when it is due, after ``delay`` at least."""
        if self.limiter is not None:
            delay += self.limiter.reserve()
        data = None if body is None else orjson.dumps(body)
        url = self._url(path, None)
        not_before = time.monotonic() + delay if delay > 0 else 0.0

        def attempt(n: int) -> None:
            headers = self._headers(JSON if data is not None else None, force_auth=n == 1)
            self.conn.submit(
                Call(method, url, data, [f"{k}: {v}" for k, v in headers.items()], self.request_timeout,
                     lambda r, exc: answered(n, r, exc), not_before, may_send, owner),
                max_active,
            )

        def answered(n: int, r: Response | None, exc: BaseException | None) -> None:
            if r is None:
                done(None, exc)
            elif r.status < 300:
                try:
                    answer = orjson.loads(r.body) if r.body else {}
                except orjson.JSONDecodeError as bad:
                    done(None, bad)
                    return
                done(answer, None)
            elif r.status == 401 and self.conn.config is not None and n == 0:
                attempt(1)  # an exec plugin's token expired: refresh and try once more
            else:
                done(None, _api_error(r.status, r.headers, r.body))

        attempt(0)

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return self.request("GET", path, params=params or None)

    def post(self, path: str, body: Any) -> dict[str, Any]:
        return self.request("POST", path, body)

    def put(self, path: str, body: Any) -> dict[str, Any]:
        return self.request("PUT", path, body)

    def patch(self, path: str, body: Any, *, strategic: bool = False) -> dict[str, Any]:
        return self.request("PATCH", path, body, content_type=STRATEGIC_MERGE_PATCH if strategic else MERGE_PATCH)

    def delete(self, path: str, body: Any = None, **params: Any) -> dict[str, Any]:
        return self.request("DELETE", path, body, params=params or None)

    def stream(self, path: str, params: dict[str, Any], *, read_timeout: float) -> urllib3.BaseHTTPResponse:
        """Open a watch: the raw response, to be read with :func:`json_lines`. Non-2xx raises."""
        if self.limiter is not None:
            self.limiter.acquire()
        resp = self.conn.pool.request(
            "GET",
            self._url(path, params),
            headers=self._headers(None),
            timeout=urllib3.Timeout(connect=10.0, read=read_timeout),
            preload_content=False,
        )
        if resp.status >= 300:
            try:
                raise _api_error(resp.status, resp.headers, resp.read())
            finally:
                resp.release_conn()
        return resp


def json_lines(resp: urllib3.BaseHTTPResponse, chunk: int = 1 << 16) -> Iterator[dict[str, Any]]:
    """The objects of a watch stream, one JSON document per line, decoded as they arrive."""
    buf = b""
    for data in resp.stream(chunk, decode_content=True):
        buf += data
        if b"\n" not in data:
            continue
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.strip():
                yield orjson.loads(line)
    if buf.strip():
        yield orjson.loads(buf)
