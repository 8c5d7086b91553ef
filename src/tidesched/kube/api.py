"""The adapter's one door to the API server: the official ``kubernetes`` client, raw JSON.

Every call goes through :meth:`Kube.call` (or :meth:`Kube.stream` for watches) with
``_preload_content=False``: the adapter keeps objects as the dicts the API server sent, because
the scheduling core parses raw objects itself (``model.snapshot.build_snapshot``) and
deserialising 10,000 pods into client model classes per relist would only cost time.

Client-side rate limiting is ours (:class:`TokenBucket`, ``--kube-api-qps``/``--kube-api-burst``)
because the Python client has none; like kube-scheduler, events and the leader-election lease
get their own buckets so that neither can starve binds nor be starved by them.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

__all__ = ["ApiException", "Kube", "TokenBucket", "api_client_for", "status_of", "is_transient"]


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
        if self.qps <= 0:
            return
        with self._lock:
            now = self.clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            self.acquired += 1
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            self.sleep(wait)


def api_client_for(
    kubeconfig: str | None = None,
    *,
    host: str | None = None,
    context: str | None = None,
    pool_size: int = 32,
) -> k8s_client.ApiClient:
    """An ApiClient from ``kubeconfig`` (path), else ``host`` alone (a plain URL: tests, a local
    proxy), else the in-cluster service account. With both, the kubeconfig's credentials are
    used against ``host`` (``--master`` overrides the server URL, as client-go's
    BuildConfigFromFlags does). The kubeconfig file is never written back."""
    cfg = k8s_client.Configuration()
    if kubeconfig:
        k8s_config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=cfg, persist_config=False
        )
    elif host is None:
        k8s_config.load_incluster_config(client_configuration=cfg)
    if host is not None:
        url = host.rstrip("/")
        cfg.host = url
        refresh = cfg.refresh_api_key_hook
        if refresh is not None:
            # The kubeconfig loader re-applies the whole cluster entry (server URL included)
            # before every request when the user has a token; keep our URL after it.
            def _refresh(c: k8s_client.Configuration) -> None:
                refresh(c)
                c.host = url

            cfg.refresh_api_key_hook = _refresh
    # One connection per worker thread, or workers queue for sockets.
    cfg.connection_pool_maxsize = pool_size
    return k8s_client.ApiClient(cfg)


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
            body = json.loads(exc.body)
            if isinstance(body, dict) and body.get("message"):
                return f"{body['message']} ({exc.status})"
        except ValueError:
            pass
        return f"{exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


@dataclass
class Kube:
    """Typed API groups of one ApiClient plus the rate limiter applied to every call."""

    api_client: k8s_client.ApiClient
    limiter: TokenBucket | None = None
    request_timeout: float = 30.0

    def __post_init__(self) -> None:
        self.core = k8s_client.CoreV1Api(self.api_client)
        self.custom = k8s_client.CustomObjectsApi(self.api_client)
        self.scheduling = k8s_client.SchedulingV1Api(self.api_client)
        self.policy = k8s_client.PolicyV1Api(self.api_client)
        self.coordination = k8s_client.CoordinationV1Api(self.api_client)

    def with_limiter(self, limiter: TokenBucket | None) -> Kube:
        """The same connection pool under another rate limiter."""
        return Kube(self.api_client, limiter, self.request_timeout)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Call a typed client method and return the JSON body as a dict. Non-2xx raises
        ApiException (status, headers, body); transport problems raise urllib3 errors."""
        if self.limiter is not None:
            self.limiter.acquire()
        kwargs.setdefault("_request_timeout", self.request_timeout)
        resp = fn(*args, _preload_content=False, **kwargs)
        try:
            data = resp.data
        finally:
            resp.release_conn()
        return json.loads(data) if data else {}

    def stream(self, fn: Callable[..., Any], *args: Any, read_timeout: float, **kwargs: Any) -> Any:
        """Open a watch: the raw urllib3 response, to be read line by line."""
        if self.limiter is not None:
            self.limiter.acquire()
        return fn(*args, _preload_content=False, _request_timeout=(10.0, read_timeout), **kwargs)
