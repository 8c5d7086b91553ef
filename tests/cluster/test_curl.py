"""CurlLoop: many calls in flight on one thread, answered through callbacks (K8S-2)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from builders import node
from cluster_helpers import fake_api, kube_for
from tidesched.cluster import curl
from tidesched.cluster.api import Cancelled


def _collect(n: int) -> tuple[list[tuple[Any, BaseException | None]], threading.Event, Any]:
    got: list[tuple[Any, BaseException | None]] = []
    done = threading.Event()
    lock = threading.Lock()

    def answer(result: Any, exc: BaseException | None) -> None:
        with lock:
            got.append((result, exc))
            if len(got) == n:
                done.set()

    return got, done, answer


def test_many_calls_in_flight_are_all_answered() -> None:
    with fake_api() as api:
        api.create_many([node(f"n{i}") for i in range(30)])
        kube = kube_for(api)
        got, done, answer = _collect(30)
        for i in range(30):
            kube.send("GET", f"/api/v1/nodes/n{i}", None, answer, max_active=8)
        assert done.wait(10)
        assert sorted(r["metadata"]["name"] for r, exc in got if exc is None) == sorted(f"n{i}" for i in range(30))
        got2, done2, answer2 = _collect(1)
        kube.send("GET", "/api/v1/nodes/missing", None, answer2)
        assert done2.wait(10) and got2[0][0] is None and getattr(got2[0][1], "status", None) == 404


def test_a_call_not_allowed_any_more_is_cancelled_unsent() -> None:
    with fake_api() as api:
        api.create(node("n1"))
        kube = kube_for(api)
        got, done, answer = _collect(1)
        kube.send("GET", "/api/v1/nodes/n1", None, answer, may_send=lambda: False)
        assert done.wait(10) and isinstance(got[0][1], Cancelled)
        assert api.count("GET", r"^/api/v1/nodes/n1$") == 0


def test_a_failing_call_gets_its_error_and_the_loop_serves_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_api() as api:
        api.create(node("n1"))
        kube = kube_for(api)
        real = curl._set_request
        failures = [1]

        def flaky(*args: Any) -> None:
            if failures:
                failures.pop()
                raise RuntimeError("surprise from libcurl")
            real(*args)

        monkeypatch.setattr(curl, "_set_request", flaky)
        got, done, answer = _collect(2)
        kube.send("GET", "/api/v1/nodes/n1", None, answer)
        kube.send("GET", "/api/v1/nodes/n1", None, answer)
        assert done.wait(10)
        # The call the failure hit gets the error (a caller retries it); the other is served.
        assert sorted(type(exc).__name__ for _, exc in got) == ["NoneType", "RuntimeError"]
        got2, done2, answer2 = _collect(1)
        kube.send("GET", "/api/v1/nodes/n1", None, answer2)
        assert done2.wait(10) and got2[0][1] is None


def test_the_loop_restarts_after_a_failure_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_api() as api:
        api.create(node("n1"))
        kube = kube_for(api)
        real = curl.CurlLoop._wait
        failures = [1]

        def flaky(self: curl.CurlLoop, *args: Any) -> None:
            if failures:
                failures.pop()
                raise RuntimeError("surprise in the loop")
            real(self, *args)

        monkeypatch.setattr(curl.CurlLoop, "_wait", flaky)
        got, done, answer = _collect(3)
        for _ in range(3):
            kube.send("GET", "/api/v1/nodes/n1", None, answer)
        assert done.wait(10)  # every call answered: served, or given up when the loop failed
        assert all(exc is None or isinstance(exc, Cancelled) for _, exc in got)
        got2, done2, answer2 = _collect(1)
        kube.send("GET", "/api/v1/nodes/n1", None, answer2)
        assert done2.wait(10) and got2[0][1] is None  # a fresh loop serves later calls
