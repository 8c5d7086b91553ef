"""A real Kubernetes control plane (etcd + kube-apiserver) on loopback, for e2e tests and benchmarks.

The binaries come from ``KUBEBUILDER_ASSETS`` (envtest's convention) or ``../shared/envtest``
beside the repository. :func:`find_assets` says what is missing when neither has them, so tests
can skip with that message. Certificates, the service-account key pair and a static token file
are made at start in a temporary directory; both processes are stopped by their own pids.

:class:`Api` is a small JSON client over httpx for the tests' side of the conversation (creating
nodes and pods, playing the kubelet and the controllers). It is deliberately not the scheduler's
client: the scheduler under test runs as a subprocess with its own ServiceAccount token.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import fcntl
import ipaddress
import json
import os
import secrets
import shutil
import ssl
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import httpx
import yaml

REPO = Path(__file__).resolve().parents[2]
BINARIES = ("etcd", "kube-apiserver")


def find_assets(extra: tuple[str, ...] = ()) -> tuple[Path | None, str]:
    """(directory, "") when every binary is there, else (None, what is missing)."""
    wanted = BINARIES + extra
    env = os.environ.get("KUBEBUILDER_ASSETS")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "envtest")
    for d in candidates:
        if all(os.access(d / b, os.X_OK) for b in wanted):
            return d, ""
    where = " or ".join(str(c) for c in candidates)
    return None, f"no {', '.join(wanted)} in {where} (set KUBEBUILDER_ASSETS to envtest's binaries)"


def cache_dir() -> Path:
    """Where unpacked binaries are kept between runs (``$XDG_CACHE_HOME`` or ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    d = Path(base) / "tidesched-e2e"
    d.mkdir(parents=True, exist_ok=True)
    return d


@contextlib.contextmanager
def cache_lock(name: str) -> Iterator[None]:
    """An exclusive lock in :func:`cache_dir`: several test runs on one machine unpack the same
    binaries; one does it, the others wait and find them there."""
    with open(cache_dir() / f".{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def unpack_xz(src: Path, dest: Path) -> Path:
    """``dest``, decompressed from the xz file ``src`` unless already there and newer; executable."""
    import lzma

    with cache_lock(dest.name):
        if not (dest.is_file() and os.access(dest, os.X_OK) and dest.stat().st_mtime >= src.stat().st_mtime):
            part = dest.with_name(f"{dest.name}.part")
            with lzma.open(src) as zin, open(part, "wb") as out:
                shutil.copyfileobj(zin, out, 1 << 20)
            part.chmod(0o755)
            os.replace(part, dest)
    return dest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _write_certs(d: Path) -> None:
    """CA (its key kept: kube-controller-manager signs with it, :func:`issue_serving_cert` too),
    API server serving cert (127.0.0.1/localhost) and the service-account RSA key pair."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tidesched-e2e-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (d / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (d / "ca.key").write_bytes(_pem_key(ca_key))
    issue_serving_cert(d, d / "apiserver.crt", d / "apiserver.key", "kube-apiserver")
    (d / "sa.key").write_bytes(_pem_key(sa_key))
    (d / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def issue_serving_cert(ca_dir: Path, cert: Path, key: Path, name: str) -> None:
    """A serving certificate for 127.0.0.1 and localhost signed by the CA in ``ca_dir``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.timezone.utc)
    ca = x509.load_pem_x509_certificate((ca_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), None)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.subject)
        .public_key(srv_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    cert.write_bytes(srv.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(_pem_key(srv_key))


@dataclass
class _Proc:
    name: str
    cmd: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            # Own process group: a stop reaches anything the binary forks, and nothing else.
            self.popen = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        p = self.popen
        if p is None:
            return
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout)
        self.popen = None

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


class ApiError(Exception):
    def __init__(self, status: int, body: str, method: str, path: str) -> None:
        super().__init__(f"{method} {path}: {status} {body[:500]}")
        self.status = status
        self.body = body


# (apiVersion, kind) → (path prefix, plural, namespaced). Only what the tests create.
_KINDS: dict[tuple[str, str], tuple[str, str, bool]] = {
    ("v1", "Namespace"): ("/api/v1", "namespaces", False),
    ("v1", "Node"): ("/api/v1", "nodes", False),
    ("v1", "Pod"): ("/api/v1", "pods", True),
    ("v1", "ServiceAccount"): ("/api/v1", "serviceaccounts", True),
    ("v1", "ConfigMap"): ("/api/v1", "configmaps", True),
    ("v1", "Service"): ("/api/v1", "services", True),
    ("apps/v1", "Deployment"): ("/apis/apps/v1", "deployments", True),
    ("apps/v1", "ReplicaSet"): ("/apis/apps/v1", "replicasets", True),
    ("batch.volcano.sh/v1alpha1", "Job"): ("/apis/batch.volcano.sh/v1alpha1", "jobs", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): (
        "/apis/rbac.authorization.k8s.io/v1",
        "clusterrolebindings",
        False,
    ),
    ("rbac.authorization.k8s.io/v1", "Role"): ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): (
        "/apis/apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        False,
    ),
    ("scheduling.volcano.sh/v1beta1", "Queue"): ("/apis/scheduling.volcano.sh/v1beta1", "queues", False),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): ("/apis/scheduling.volcano.sh/v1beta1", "podgroups", True),
    ("scheduling.k8s.io/v1", "PriorityClass"): ("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
    ("policy/v1", "PodDisruptionBudget"): ("/apis/policy/v1", "poddisruptionbudgets", True),
    ("topology.volcano.sh/v1alpha1", "HyperNode"): ("/apis/topology.volcano.sh/v1alpha1", "hypernodes", False),
    ("coordination.k8s.io/v1", "Lease"): ("/apis/coordination.k8s.io/v1", "leases", True),
    ("v1", "Event"): ("/api/v1", "events", True),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): (
        "/apis/admissionregistration.k8s.io/v1",
        "mutatingwebhookconfigurations",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"): (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingwebhookconfigurations",
        False,
    ),
}


def resource_path(api_version: str, kind: str, namespace: str = "", name: str = "") -> str:
    prefix, plural, namespaced = _KINDS[(api_version, kind)]
    path = f"{prefix}/namespaces/{namespace}/{plural}" if namespaced and namespace else f"{prefix}/{plural}"
    return f"{path}/{name}" if name else path


class Api:
    """JSON over HTTPS to the API server with one bearer token (no proxy, the test CA)."""

    def __init__(self, url: str, ca: Path, token: str, timeout: float = 30.0) -> None:
        self.url = url
        self.client = httpx.Client(
            base_url=url,
            verify=ssl.create_default_context(cafile=str(ca)),
            trust_env=False,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
        )

    def close(self) -> None:
        self.client.close()

    def request(self, method: str, path: str, body: Any = None, **params: Any) -> dict[str, Any]:
        headers = {}
        content = None
        if body is not None:
            content = json.dumps(body)
            headers["Content-Type"] = (
                "application/merge-patch+json" if method == "PATCH" else "application/json"
            )
        resp = self.client.request(method, path, content=content, headers=headers, params=params or None)
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, resp.text, method, path)
        return resp.json() if resp.content else {}

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return self.request("GET", path, **params)

    def post(self, path: str, body: Any, **params: Any) -> dict[str, Any]:
        return self.request("POST", path, body, **params)

    def patch(self, path: str, body: Any, **params: Any) -> dict[str, Any]:
        return self.request("PATCH", path, body, **params)

    def put(self, path: str, body: Any) -> dict[str, Any]:
        return self.request("PUT", path, body)

    def delete(self, path: str, **params: Any) -> dict[str, Any]:
        try:
            return self.request("DELETE", path, **params)
        except ApiError as exc:
            if exc.status == 404:
                return {}
            raise

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        md = obj.get("metadata") or {}
        return self.post(resource_path(obj["apiVersion"], obj["kind"], md.get("namespace", "")), obj)

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create, or replace the existing object (kubectl apply's outcome for whole objects)."""
        try:
            return self.create(obj)
        except ApiError as exc:
            if exc.status != 409:
                raise
        md = obj["metadata"]
        path = resource_path(obj["apiVersion"], obj["kind"], md.get("namespace", ""), md["name"])
        current = self.get(path)
        return self.put(path, {**obj, "metadata": {**md, "resourceVersion": current["metadata"]["resourceVersion"]}})

    def apply_file(self, path: Path, namespace: str | None = None) -> list[dict[str, Any]]:
        out = []
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                if namespace and _KINDS[(doc["apiVersion"], doc["kind"])][2]:
                    doc.setdefault("metadata", {})["namespace"] = namespace
                out.append(self.apply(doc))
        return out

    def items(self, path: str, **params: Any) -> list[dict[str, Any]]:
        return list(self.get(path, **params).get("items") or [])

    def watch_lines(self, path: str, resource_version: str, timeout: int = 300) -> Iterator[dict[str, Any]]:
        params = {"watch": "true", "resourceVersion": resource_version, "timeoutSeconds": str(timeout),
                  "allowWatchBookmarks": "true"}
        with self.client.stream("GET", path, params=params, timeout=httpx.Timeout(30.0, read=timeout + 30)) as r:
            if r.status_code >= 400:
                raise ApiError(r.status_code, r.read().decode(), "WATCH", path)
            for line in r.iter_lines():
                if line:
                    yield json.loads(line)


# The API server's audit log records the scheduler's writes that tests count: bindings and
# evictions (who sent them, for which pod, with which answer). Nothing else is logged.
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: [pods/binding, pods/eviction]
- level: None
"""


@dataclass(frozen=True)
class AuditRecord:
    verb: str
    subresource: str
    namespace: str
    name: str
    user: str
    code: int


@dataclass
class ControlPlane:
    """etcd + kube-apiserver on free loopback ports; ``start()`` returns when /readyz answers."""

    assets: Path
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tidesched-e2e-")))
    load_test: bool = False  # raise the in-flight request limits for benchmarks

    def __post_init__(self) -> None:
        self.admin_token = secrets.token_hex(16)
        self.kube_scheduler_token = secrets.token_hex(16)
        self.ca = self.workdir / "ca.crt"
        self._admin: Api | None = None
        self._pick_ports()

    def _pick_ports(self) -> None:
        """Free loopback ports and the processes that listen on them. A port found free may be
        taken (by an outgoing connection's ephemeral port) before the server binds it: start()
        then picks new ones."""
        self.etcd_port = free_port()
        self.peer_port = free_port()
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.etcd = _Proc(
            "etcd",
            [
                str(self.assets / "etcd"),
                "--data-dir", str(self.workdir / "etcd"),
                "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                "--listen-peer-urls", f"http://127.0.0.1:{self.peer_port}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_port}",
                "--initial-cluster", f"default=http://127.0.0.1:{self.peer_port}",
                "--unsafe-no-fsync",  # test data: durability across power loss is not the point
            ],
            self.workdir / "etcd.log",
        )
        self.apiserver = _Proc("kube-apiserver", self._apiserver_cmd(), self.workdir / "kube-apiserver.log")

    def _apiserver_cmd(self) -> list[str]:
        d = self.workdir
        cmd = [
            str(self.assets / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={d / 'apiserver.crt'}",
            f"--tls-private-key-file={d / 'apiserver.key'}",
            f"--client-ca-file={d / 'ca.crt'}",
            f"--token-auth-file={d / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            f"--audit-policy-file={d / 'audit-policy.yaml'}",
            f"--audit-log-path={d / 'audit.log'}",
            "--audit-log-mode=blocking",
        ]
        if self.load_test:
            cmd += ["--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"]
        return cmd

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> ControlPlane:
        self.workdir.mkdir(parents=True, exist_ok=True)
        _write_certs(self.workdir)
        (self.workdir / "audit-policy.yaml").write_text(AUDIT_POLICY)
        (self.workdir / "tokens.csv").write_text(
            f'{self.admin_token},e2e-admin,e2e-admin,"system:masters"\n'
            # kube-scheduler's own identity, as kubeadm's scheduler.conf gives it: authorized by
            # the API server's bootstrap RBAC roles for it, not exempt from them as the admin is.
            f"{self.kube_scheduler_token},system:kube-scheduler,system:kube-scheduler\n"
        )
        for attempt in range(3):
            try:
                self.etcd.start()
                self._wait(lambda: self._etcd_healthy(), timeout, "etcd")
                self.start_apiserver(timeout)
                return self
            except RuntimeError as exc:
                self.stop()
                if "address already in use" not in str(exc) or attempt == 2:
                    raise
                shutil.rmtree(self.workdir / "etcd", ignore_errors=True)
                self._pick_ports()  # a port was taken meanwhile: new ones, a fresh start
            except BaseException:
                self.stop()
                raise
        return self

    def start_apiserver(self, timeout: float = 60.0) -> None:
        self.apiserver.start()
        self._wait(self._ready, timeout, "kube-apiserver")

    def restart_apiserver(self, timeout: float = 60.0) -> None:
        self.apiserver.stop()
        self.start_apiserver(timeout)

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        self.apiserver.stop()
        self.etcd.stop()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _wait(self, ok: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in (self.etcd, self.apiserver):
                if p.popen is not None and not p.alive():
                    raise RuntimeError(f"{p.name} exited ({p.popen.returncode}):\n{p.tail()}")
            if ok():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{what} not ready after {timeout:.0f}s:\n{self.apiserver.tail()}")

    def _etcd_healthy(self) -> bool:
        try:
            r = httpx.get(f"http://127.0.0.1:{self.etcd_port}/health", timeout=1.0, trust_env=False)
            return r.status_code == 200
        except httpx.HTTPError:
            return False

    def _ready(self) -> bool:
        try:
            r = httpx.get(
                f"{self.url}/readyz",
                verify=ssl.create_default_context(cafile=str(self.ca)),
                trust_env=False,
                timeout=2.0,
                headers={"Authorization": f"Bearer {self.admin_token}"},
            )
            return r.status_code == 200
        except httpx.HTTPError:
            return False

    # -- clients ------------------------------------------------------------------------------

    @property
    def admin(self) -> Api:
        if self._admin is None:
            self._admin = Api(self.url, self.ca, self.admin_token)
        return self._admin

    def client(self, token: str) -> Api:
        return Api(self.url, self.ca, token)

    def kubeconfig(self, path: Path, token: str, user: str = "tidesched") -> Path:
        """A kubeconfig file as an operator would hand the scheduler: server, CA and a token."""
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "e2e", "cluster": {"server": self.url, "certificate-authority": str(self.ca)}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
            "current-context": "e2e",
        }
        path.write_text(yaml.safe_dump(cfg))
        return path

    def service_account_token(self, namespace: str, name: str, seconds: int = 3600) -> str:
        """A token of the ServiceAccount from the TokenRequest API, as a pod would get mounted."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}}
        out = self.admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", body)
        return str(out["status"]["token"])

    def audit(self, subresource: str | None = None) -> list[AuditRecord]:
        """The bindings and evictions the API server answered, oldest first."""
        out = []
        try:
            lines = (self.workdir / "audit.log").read_text().splitlines()
        except OSError:
            return out
        for line in lines:
            ev = json.loads(line)
            ref = ev.get("objectRef") or {}
            if subresource is not None and ref.get("subresource") != subresource:
                continue
            out.append(
                AuditRecord(
                    ev.get("verb", ""),
                    ref.get("subresource", ""),
                    ref.get("namespace", ""),
                    ref.get("name", ""),
                    (ev.get("user") or {}).get("username", ""),
                    int((ev.get("responseStatus") or {}).get("code") or 0),
                )
            )
        return out

    # -- etcd ---------------------------------------------------------------------------------

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (what the API server does every few
        minutes); watches from older resourceVersions then get 410 Gone. Returns the revision."""
        base = f"http://127.0.0.1:{self.etcd_port}/v3"
        key = base64.b64encode(b"/").decode()
        r = httpx.post(f"{base}/kv/range", json={"key": key, "limit": 1}, trust_env=False, timeout=5.0)
        r.raise_for_status()
        rev = int(r.json()["header"]["revision"])
        httpx.post(f"{base}/kv/compaction", json={"revision": rev, "physical": True}, trust_env=False, timeout=30.0).raise_for_status()
        return rev
