"""The call loop's protocol against the real API server, which offers HTTP/2 over TLS (ALPN):
keep-alive HTTP/1.1 connections by default (cheaper for the API server with many bindings in
flight, curl.py), HTTP/2 streams over one connection with ``--api-http2`` (K8S-2)."""

from __future__ import annotations

import threading
from pathlib import Path

from controlplane import ControlPlane

from tidesched.cluster.api import Call, connect
from tidesched.cluster.commands import options_from_args, run_parser
from tidesched.cluster.curl import Response


def _versions(cp: ControlPlane, kubeconfig: Path, http2: bool, calls: int = 12) -> list[tuple[int, str]]:
    conn = connect(str(kubeconfig), http2=http2)
    got: list[tuple[int, str]] = []
    lock, done = threading.Lock(), threading.Event()

    def answered(r: Response | None, exc: BaseException | None) -> None:
        with lock:
            got.append((r.status, r.http_version) if r is not None else (0, repr(exc)))
            if len(got) == calls:
                done.set()

    try:
        headers = [f"Authorization: {conn.authorization()}", "Accept: application/json"]
        url = f"{cp.url}/api/v1/namespaces/default"
        for _ in range(calls):  # several in flight at once: HTTP/1.1 opens a connection for each
            conn.submit(Call("GET", url, None, headers, 10.0, answered), max_active=8)
        assert done.wait(30), f"only {len(got)} of {calls} calls answered"
    finally:
        conn.close()
    return got


def test_the_call_loop_speaks_http1_unless_told_http2(control_plane: ControlPlane, tmp_path: Path) -> None:
    kubeconfig = control_plane.kubeconfig(tmp_path / "admin.kubeconfig", control_plane.admin_token)
    default = options_from_args(run_parser().parse_args([f"--kubeconfig={kubeconfig}"]))
    assert default.api_http2 is False
    assert set(_versions(control_plane, kubeconfig, default.api_http2)) == {(200, "1.1")}
    told = options_from_args(run_parser().parse_args([f"--kubeconfig={kubeconfig}", "--api-http2"]))
    assert told.api_http2 is True
    assert set(_versions(control_plane, kubeconfig, told.api_http2)) == {(200, "2")}
