"""Shared helpers for the Kubernetes-mode tests: a fake API server per test, clients for it."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from builders import BASIC_CONFIG
from tidesched.cluster.api import Kube, TokenBucket, connect
from fakeapi import FakeApiServer
from tidesched.cluster.runner import RunOptions, Runner
from tidesched.cluster.store import ClusterStore, Informer, start_informers

# Short timings everywhere: the whole directory must stay well under a minute.
FAST_INFORMER = {"backoff_base": 0.05, "backoff_max": 0.2}
FAST_COMPONENTS: dict[str, dict[str, Any]] = {
    "binder": {"retry_delay": 0.02},
    "evictor": {"retry_delay": 0.02, "max_retry_after": 0.05},
}


class ManualClock:
    """A monotonic clock that moves only when the test says so (leader election): lease expiry
    and renew deadlines then happen exactly when the test advances time, never because a thread
    was starved for a moment on a loaded machine."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


@contextmanager
def fake_api(**kwargs: Any) -> Iterator[FakeApiServer]:
    api = FakeApiServer(
        bookmark_interval=kwargs.pop("bookmark_interval", 0.1),
        max_watch_seconds=kwargs.pop("max_watch_seconds", 5.0),
        **kwargs,
    )
    api.start()
    try:
        yield api
    finally:
        api.stop()


def kube_for(api: FakeApiServer, qps: float = 0.0, burst: int = 1) -> Kube:
    return Kube(
        connect(host=api.url, pool_size=16),
        TokenBucket(qps, burst) if qps else None,
        request_timeout=5.0,
    )


@contextmanager
def informers(
    api: FakeApiServer, store: ClusterStore | None = None, **opts: Any
) -> Iterator[tuple[ClusterStore, list[Informer]]]:
    store = store or ClusterStore()
    infs = start_informers(
        kube_for(api), store, watch_timeout=opts.pop("watch_timeout", 5), **{**FAST_INFORMER, **opts}
    )
    try:
        yield store, infs
    finally:
        for i in infs:
            i.stop()


def wait(pred: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return bool(pred())


def make_runner(api: FakeApiServer, tmp_path: Path, config: str = BASIC_CONFIG, **opts: Any) -> Runner:
    conf = tmp_path / "scheduler.conf"
    if not conf.exists():
        conf.write_text(config)
    options = RunOptions(
        host=api.url,
        scheduler_conf=str(conf),
        schedule_period=opts.pop("schedule_period", 0.1),
        watch_timeout=5,
        drain_timeout=opts.pop("drain_timeout", 3.0),
        informer_options=dict(FAST_INFORMER),
        component_options={**FAST_COMPONENTS, **opts.pop("component_options", {})},
        **opts,
    )
    return Runner(options)


def bound_nodes(api: FakeApiServer) -> dict[str, str]:
    return {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["spec"].get("nodeName", "")
        for p in api.list("Pod")
    }


def http_get(port: int, path: str) -> tuple[int, str]:
    """GET on 127.0.0.1: (status, body), error statuses included."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
