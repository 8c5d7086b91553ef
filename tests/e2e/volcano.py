"""Volcano's own components beside the control plane: its CRDs, ``vc-controller-manager`` (the Job,
PodGroup, Queue and garbage-collection controllers real installs run) and ``vc-scheduler`` (the peer
and oracle), as built from Volcano v1.7.0 in ``../shared/volcano``.

The directory comes from ``VOLCANO_ASSETS`` or ``../shared/volcano`` beside the repository;
:func:`find_volcano` says what is missing when neither has it, so tests can skip (or fail under
``CI``) with that message. Both binaries run with the admin's kubeconfig: what they may do in a real
install is Volcano's Helm chart's business, not what these tests check.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import yaml

from controlplane import REPO, Api, ApiError, ControlPlane, _Proc, free_port

VOLCANO_BINARIES = ("vc-controller-manager", "vc-scheduler")
BATCH = "/apis/batch.volcano.sh/v1alpha1"


def find_volcano(extra: tuple[str, ...] = ()) -> tuple[Path | None, str]:
    """(directory, "") when Volcano's binaries and CRDs are there, else (None, what is missing)."""
    env = os.environ.get("VOLCANO_ASSETS")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "volcano")
    wanted = VOLCANO_BINARIES + extra
    for d in candidates:
        if all(os.access(d / b, os.X_OK) for b in wanted) and (d / "crds").is_dir():
            return d, ""
    where = " or ".join(str(c) for c in candidates)
    return None, f"no Volcano {', '.join(wanted)} and crds/ in {where} (set VOLCANO_ASSETS to Volcano's build)"


def install_volcano_crds(api: Api, volcano: Path, timeout: float = 30.0) -> None:
    """Volcano's CRDs as its Helm chart installs them (replacing a PodGroup or Queue CRD already
    there, e.g. tidesched's own), served before this returns."""
    for path in sorted((volcano / "crds").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            try:
                api.create(doc)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                crd = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{doc['metadata']['name']}"
                current = api.get(crd)
                doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                api.put(crd, doc)
    wanted = {
        "/apis/batch.volcano.sh/v1alpha1": {"jobs"},
        "/apis/scheduling.volcano.sh/v1beta1": {"queues", "podgroups"},
        "/apis/bus.volcano.sh/v1alpha1": {"commands"},
    }
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
    cp: ControlPlane, volcano: Path, workdir: Path, conf: Path, *, args: tuple[str, ...] = (), log_name: str = "vc-scheduler.log"
) -> VolcanoProcess:
    """``vc-scheduler`` with the given configuration file (no leader election), healthy on return."""
    port = free_port()
    cmd = [
        str(volcano / "vc-scheduler"),
        f"--kubeconfig={_admin_kubeconfig(cp, workdir)}",
        f"--scheduler-conf={conf}",
        "--leader-elect=false",
        f"--listen-address=127.0.0.1:{free_port()}",
        "--enable-healthz",
        f"--healthz-address=127.0.0.1:{port}",
        *args,
    ]
    proc = VolcanoProcess("vc-scheduler", cmd, workdir / log_name, port)
    _start(proc)
    return proc.wait_healthy()


def _start(proc: _Proc) -> None:
    import subprocess

    with open(proc.log, "ab") as out:
        proc.popen = subprocess.Popen(proc.cmd, stdout=out, stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
