"""Security basics (issue 13): the deployed scheduler runs unprivileged with a read-only root
filesystem and its token only where needed; the HTTP endpoints are read-only; the metrics and
health ports listen exactly where the flags say."""

from __future__ import annotations

import http.client
import socket
from pathlib import Path

import pytest
import yaml

from tidesched.cluster.commands import run_main
from tidesched.cluster.server import HttpServer, ListenError, parse_address, text

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _docs() -> list[dict]:
    # The manifests deploy/ holds are the Helm chart's rendering (deploy/render.py), so this
    # checks the chart's defaults too; the chart's templates themselves are not YAML.
    files = [*DEPLOY.glob("*.yaml"), *DEPLOY.glob("crds/*.yaml")]
    return [d for f in sorted(files) for d in yaml.safe_load_all(f.read_text()) if d]


def _workloads() -> list[dict]:
    kinds = {"Deployment", "StatefulSet", "DaemonSet", "Job", "Pod"}
    return [d for d in _docs() if d.get("kind") in kinds]


def test_every_deployed_container_is_unprivileged_with_a_read_only_root() -> None:
    workloads = _workloads()
    assert workloads, "deploy/ holds no workload"
    for w in workloads:
        pod = w["spec"]["template"]["spec"] if w["kind"] != "Pod" else w["spec"]
        pod_sc = pod.get("securityContext") or {}
        assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
        for c in pod.get("containers", []) + pod.get("initContainers", []):
            sc = c.get("securityContext") or {}
            where = f"{w['kind']} {w['metadata']['name']} container {c['name']}"
            assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, where
            assert sc.get("runAsUser", pod_sc.get("runAsUser", 1)) != 0, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert not sc.get("privileged"), where
            assert "ALL" in (sc.get("capabilities") or {}).get("drop", []), where
            assert not (sc.get("capabilities") or {}).get("add"), where


def test_the_service_account_token_is_mounted_only_where_the_api_is_called() -> None:
    accounts = {d["metadata"]["name"]: d for d in _docs() if d.get("kind") == "ServiceAccount"}
    for name, sa in accounts.items():
        assert sa.get("automountServiceAccountToken") is False, f"ServiceAccount {name} mounts its token everywhere"
    for w in _workloads():
        pod = w["spec"]["template"]["spec"]
        # The scheduler itself lists, watches and binds: it opts in, and uses its own account.
        assert pod["serviceAccountName"] in accounts
        assert pod.get("automountServiceAccountToken") is True
    # The image runs as a non-root user too (a pod without the securityContext stays non-root).
    assert any(line.strip() == "USER 65534" for line in (DEPLOY / "Dockerfile").read_text().splitlines())


@pytest.fixture()
def server():
    s = HttpServer("127.0.0.1:0", {"/healthz": lambda: text(200, "ok\n")})
    s.start()
    yield s
    s.stop()


def _request(port: int, method: str, path: str = "/healthz", body: bytes | None = None) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request(method, path, body=body)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def test_endpoints_answer_get_and_head_and_refuse_every_other_method(server: HttpServer) -> None:
    assert _request(server.port, "GET")[0] == 200
    status, headers, body = _request(server.port, "HEAD")
    assert status == 200 and body == b"" and headers["Content-Length"] == "3"
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PURGE"):
        status, headers, body = _request(server.port, method, body=b"{}" if method in ("POST", "PUT", "PATCH") else None)
        assert status == 405, method
        assert headers["Allow"] == "GET, HEAD"
        assert b"read-only" in body
    # The server still answers after the refusals.
    assert _request(server.port, "GET")[0] == 200


def _other_local_address() -> str | None:
    """A local IPv4 address that is not loopback, if the machine has one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent for a UDP connect
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


def test_a_loopback_listen_address_binds_loopback_only(server: HttpServer) -> None:
    assert server.bound_address == ("127.0.0.1", server.port)
    # 127.0.0.2 is loopback too, but another address: not listened on.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.2", server.port), timeout=2).close()
    other = _other_local_address()
    if other is not None:
        with pytest.raises(OSError):
            socket.create_connection((other, server.port), timeout=2).close()


def test_an_empty_host_listens_on_every_interface_as_the_flags_say() -> None:
    s = HttpServer(":0", {})
    try:
        assert s.bound_address[0] == "0.0.0.0"
    finally:
        s.close()
    assert parse_address(":8080") == ("0.0.0.0", 8080)
    assert parse_address("[::1]:8080") == ("::1", 8080)


def test_ipv6_loopback_binds_ipv6_loopback() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        s = HttpServer("[::1]:0", {"/healthz": lambda: text(200, "ok\n")})
    except ListenError as exc:
        pytest.skip(f"IPv6 loopback unavailable: {exc}")
    try:
        assert s.bound_address == ("::1", s.port)
    finally:
        s.close()


@pytest.mark.parametrize("address", ["8080", "host:port", ":99999", "256.1.1.1:0", ":-1"])
def test_a_bad_listen_address_is_a_clear_error(address: str) -> None:
    with pytest.raises(ListenError, match="listen"):
        HttpServer(address, {})


def test_run_with_an_unusable_listen_address_exits_2_with_a_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import signal

    from builders import BASIC_CONFIG
    from cluster_helpers import fake_api

    conf = tmp_path / "scheduler.conf"
    conf.write_text(BASIC_CONFIG)
    saved = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        with fake_api() as api:
            code = run_main(["--master", api.url, f"--scheduler-conf={conf}", "--enable-metrics=true", "--listen-address=127.0.0.1:99999"])
    finally:
        signal.signal(signal.SIGTERM, saved[0])
        signal.signal(signal.SIGINT, saved[1])
    assert code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "127.0.0.1:99999" in err and "Traceback" not in err
