"""Volcano's own components beside the control plane: its CRDs, ``vc-controller-manager`` (the Job,
PodGroup, Queue, HyperNode and garbage-collection controllers real installs run), ``vc-scheduler``
(the peer and oracle) and, from v1.15, ``vc-webhook-manager`` (``webhooks.py``).

Two versions are here. **v1.15.1** (the default, Volcano's current release and tidesched's
reference) comes xz-compressed in ``../shared/volcano-1.15`` and is unpacked once into the user's
cache (``~/.cache/tidesched-e2e/volcano-1.15.1``: the binaries, ``e2e/<suite>.test``, ``crds/``,
``chart/`` and the configs). **v1.7.0** (``../shared/volcano``) stays for what still compares
against it (see docs/fidelity.md). ``VOLCANO_ASSETS`` names a ready directory of either layout
instead; ``VOLCANO_VERSION`` chooses the version the e2e fixtures run (``1.15.1`` or ``1.7.0``).

:func:`find_volcano` says what is missing when nothing is found, so tests can skip (or fail under
``CI``) with that message. The binaries run with the admin's kubeconfig: what they may do in a real
install is Volcano's Helm chart's business, not what these tests check (:func:`scheduler_identity`
gives vc-scheduler a ServiceAccount of its own where a test measures it as deployed).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from controlplane import REPO, Api, ApiError, ControlPlane, _Proc, cache_dir, cache_lock, free_port, unpack_xz

VOLCANO_BINARIES = ("vc-controller-manager", "vc-scheduler")
BATCH = "/apis/batch.volcano.sh/v1alpha1"
V115, V170 = "1.15.1", "1.7.0"
VERSIONS = (V115, V170)
SHARED = {V115: REPO.parent / "shared" / "volcano-1.15", V170: REPO.parent / "shared" / "volcano"}


def default_version() -> str:
    """The version the e2e fixtures run: ``VOLCANO_VERSION``, else v1.15.1."""
    v = os.environ.get("VOLCANO_VERSION", V115).removeprefix("v")
    if v not in VERSIONS:
        raise ValueError(f"VOLCANO_VERSION={v!r}: one of {', '.join(VERSIONS)}")
    return v


def version_of(volcano: Path) -> str:
    """v1.15.1 has a webhook manager and ``e2e/<suite>.test``; v1.7.0 neither."""
    return V115 if (volcano / "vc-webhook-manager").exists() else V170


def unpack_v115(shared: Path, dest: Path) -> Path:
    """``shared`` (xz-compressed binaries and suites, CRDs, chart, configs) as a ready directory
    ``dest``, as its ``unpack`` script makes it; files already there and newer are kept."""
    (dest / "e2e").mkdir(parents=True, exist_ok=True)
    for z in [*shared.glob("*.xz"), *(shared / "e2e").glob("*.xz")]:
        unpack_xz(z, dest / z.relative_to(shared).with_suffix(""))
    with cache_lock(dest.name):
        for sub in ("crds", "chart"):
            shutil.rmtree(dest / sub, ignore_errors=True)
            shutil.copytree(shared / sub, dest / sub)
            for p in (dest / sub).rglob("*"):  # the shared tree is read-only; the copy need not be
                p.chmod(0o755 if p.is_dir() else 0o644)
        for conf in shared.glob("*.conf"):
            shutil.copyfile(conf, dest / conf.name)
    return dest


def find_volcano(
    extra: tuple[str, ...] = (), binaries: tuple[str, ...] = VOLCANO_BINARIES, version: str | None = None
) -> tuple[Path | None, str]:
    """(directory, "") when Volcano's binaries and CRDs are there, else (None, what is missing).
    ``binaries`` narrows what is looked for (the benchmark needs only ``vc-scheduler``);
    ``version`` defaults to :func:`default_version`."""
    version = version or default_version()
    wanted = tuple(binaries) + extra
    env = os.environ.get("VOLCANO_ASSETS")
    candidates = [Path(env)] if env else []
    shared = SHARED[version]
    if version == V115 and (shared / "vc-scheduler.xz").is_file():
        candidates.append(unpack_v115(shared, cache_dir() / f"volcano-{V115}"))
    elif version == V170:
        candidates.append(shared)
    for d in candidates:
        if all(os.access(d / b, os.X_OK) for b in wanted) and (d / "crds").is_dir() and version_of(d) == version:
            return d, ""
    where = " or ".join(str(c) for c in [*candidates, shared])
    return None, (f"no Volcano v{version} {', '.join(wanted)} and crds/ in {where} "
                  "(set VOLCANO_ASSETS to Volcano's build)")


def _helm() -> Any:
    """deploy/render.py's Helm helpers (the pinned Helm build, fetched on first use)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("deploy_render", REPO / "deploy" / "render.py")
    assert spec and spec.loader
    render = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(render)
    render.ensure_helm()
    return render


def render_chart(chart: Path, template: str, *sets: str, release: str = "volcano",
                 namespace: str = "volcano-system") -> list[dict[str, Any]]:
    """``helm template`` of one template of Volcano's chart (``--set`` each of ``sets``); [] when
    the values leave it empty."""
    args = ["template", release, str(chart), "--namespace", namespace, "--show-only", template]
    for s in sets:
        args += ["--set", s]
    out = _helm().helm(*args)
    if out.returncode != 0 and "could not find template" in out.stderr:
        return []
    if out.returncode != 0:
        raise RuntimeError(f"helm template {template} of {chart}: {out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def install_volcano_crds(api: Api, volcano: Path, timeout: float = 30.0, *, replace: bool = True) -> None:
    """Volcano's CRDs as its Helm chart installs them, served before this returns. With
    ``replace`` a PodGroup or Queue CRD already there (e.g. tidesched's own) is replaced; without,
    it is kept: tidesched's are newer than v1.7.0's (queue ``parent``, ``priority``, ``deserved``,
    which v1.7.0's schema would prune), as in a cluster running a newer Volcano."""
    wanted: dict[str, set[str]] = {}  # group/version path -> plurals it must serve
    for path in sorted((volcano / "crds").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            spec = doc["spec"]
            for v in spec.get("versions") or []:
                if v.get("served", True):
                    wanted.setdefault(f"/apis/{spec['group']}/{v['name']}", set()).add(spec["names"]["plural"])
            try:
                api.create(doc)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                if not replace:
                    continue
                crd = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{doc['metadata']['name']}"
                current = api.get(crd)
                doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                api.put(crd, doc)
    deadline = time.monotonic() + timeout
    while True:
        missing = []
        for group, names in wanted.items():
            try:
                served = {r["name"] for r in api.get(group).get("resources", [])}
            except ApiError:
                served = set()
            if not names <= served:
                missing.append(group)
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"Volcano's CRDs not served after {timeout:.0f}s: {missing}")
        time.sleep(0.2)


class VolcanoProcess(_Proc):
    """One of Volcano's binaries, with its health endpoint."""

    def __init__(self, name: str, cmd: list[str], log: Path, healthz_port: int) -> None:
        super().__init__(name, cmd, log)
        self.healthz_port = healthz_port

    def restart(self) -> VolcanoProcess:
        """Stop and start again with the same command line (the log goes on), healthy on return."""
        self.stop()
        _start(self)
        return self.wait_healthy()

    def wait_healthy(self, timeout: float = 30.0) -> VolcanoProcess:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"{self.name} exited:\n{self.tail()}")
            try:
                r = httpx.get(f"http://127.0.0.1:{self.healthz_port}/healthz", timeout=1.0, trust_env=False)
                if r.status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not healthy after {timeout:.0f}s:\n{self.tail()}")


def _env() -> dict[str, str]:
    return {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def _admin_kubeconfig(cp: ControlPlane, workdir: Path) -> Path:
    path = workdir / "volcano-admin.kubeconfig"
    if not path.exists():
        cp.kubeconfig(path, cp.admin_token, user="volcano")
    return path


def start_controller_manager(
    cp: ControlPlane, volcano: Path, workdir: Path, *, args: tuple[str, ...] = (), log_name: str = "vc-controller-manager.log"
) -> VolcanoProcess:
    """``vc-controller-manager`` as a single replica (no leader election), healthy on return."""
    port = free_port()
    cmd = [
        str(volcano / "vc-controller-manager"),
        f"--kubeconfig={_admin_kubeconfig(cp, workdir)}",
        "--leader-elect=false",
        "--enable-healthz",
        f"--healthz-address=127.0.0.1:{port}",
        "--kube-api-qps=500",
        "--kube-api-burst=1000",
        "-v=3",
        *args,
    ]
    proc = VolcanoProcess("vc-controller-manager", cmd, workdir / log_name, port)
    _start(proc)
    return proc.wait_healthy()


def start_vc_scheduler(
    cp: ControlPlane,
    volcano: Path,
    workdir: Path,
    conf: Path,
    *,
    args: tuple[str, ...] = (),
    log_name: str = "vc-scheduler.log",
    kubeconfig: Path | None = None,
    healthy_timeout: float = 30.0,
) -> VolcanoProcess:
    """``vc-scheduler`` with the given configuration file (no leader election), healthy on return.
    ``kubeconfig`` chooses its identity (default: the admin's; :func:`scheduler_identity` gives it a
    ServiceAccount of its own, as a real install does)."""
    port = free_port()
    cmd = [
        str(volcano / "vc-scheduler"),
        f"--kubeconfig={kubeconfig or _admin_kubeconfig(cp, workdir)}",
        f"--scheduler-conf={conf}",
        "--leader-elect=false",
        f"--listen-address=127.0.0.1:{free_port()}",
        "--enable-healthz",
        f"--healthz-address=127.0.0.1:{port}",
        *args,
    ]
    proc = VolcanoProcess("vc-scheduler", cmd, workdir / log_name, port)
    _start(proc)
    return proc.wait_healthy(healthy_timeout)


# What vc-scheduler v1.7.0 reads and writes. Its cache waits for every informer to sync before the
# first session, so one refused list stalls it for good. Checked by running it under this role
# (benchmarks/kube.py: bare PodGroups of 1 and gangs of 8 bound, a gang too big to place) with no
# refused request in its log; not pared to the minimum (volumes, evictions kept for other inputs).
SCHEDULER_RULES: list[dict[str, list[str]]] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete", "update", "patch"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update", "patch"]},
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["nodes", "namespaces", "resourcequotas", "persistentvolumes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list", "watch", "update"]},
    # Read by the kube-scheduler plugins it embeds (spreading pods of one owner); its cache waits for them.
    {"apiGroups": [""], "resources": ["services", "replicationcontrollers"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["apps"], "resources": ["replicasets", "statefulsets"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "update", "patch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses", "csinodes", "csidrivers", "csistoragecapacities"],
     "verbs": ["get", "list", "watch"]},
    # create: at start it creates the default Queue when there is none (and exits when refused).
    {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups", "queues"], "verbs": ["get", "list", "watch", "update"]},
    {"apiGroups": ["scheduling.volcano.sh"], "resources": ["queues"], "verbs": ["create"]},
    {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups/status", "queues/status"], "verbs": ["update", "patch"]},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["nodeinfo.volcano.sh"], "resources": ["numatopologies"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list", "watch"]},
]


def chart_scheduler_rules(volcano: Path) -> list[dict[str, Any]]:
    """The rules of the ClusterRole Volcano's chart gives vc-scheduler (v1.15.1)."""
    docs = render_chart(volcano / "chart", "templates/scheduler.yaml")
    return next(d["rules"] for d in docs if d["kind"] == "ClusterRole")


def scheduler_identity(cp: ControlPlane, workdir: Path, namespace: str = "volcano-system", name: str = "vc-scheduler",
                       rules: list[dict[str, Any]] | None = None) -> Path:
    """A kubeconfig for vc-scheduler as its own ServiceAccount under a ClusterRole of ``rules``
    (default :data:`SCHEDULER_RULES`, v1.7.0's; v1.15.1's come from its chart,
    :func:`chart_scheduler_rules`): authorized and flow-controlled like any deployed scheduler, not
    exempt from both as the admin (system:masters) is."""
    api = cp.admin
    for obj in (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
         "rules": rules if rules is not None else SCHEDULER_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ):
        if obj["kind"] == "Namespace":
            try:
                api.create(obj)
            except ApiError as exc:
                if exc.status != 409:
                    raise
        else:
            api.apply(obj)
    return cp.kubeconfig(workdir / f"{name}.kubeconfig", cp.service_account_token(namespace, name), user=name)


def _start(proc: _Proc) -> None:
    import subprocess

    with open(proc.log, "ab") as out:
        proc.popen = subprocess.Popen(proc.cmd, stdout=out, stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
