"""The real ``kube-controller-manager`` (v1.36, ``../shared/envtest/kube-controller-manager.xz``)
beside the test control plane: the namespace, ServiceAccount, garbage-collector, ReplicaSet,
Deployment, StatefulSet, Job, DaemonSet, PodGC, node-lifecycle, persistent-volume, ResourceClaim and
every other controller a cluster runs, as a single replica with the admin's credentials.

The binary is ``kube-controller-manager`` in ``KUBEBUILDER_ASSETS``, else the xz file in
``../shared/envtest`` unpacked once into the user's cache (:func:`controlplane.unpack_xz`).

What it implies for tests: a ReplicaSet's, Deployment's or Job's pods are made by their controller
(no test makes them), an object whose owner is gone is deleted, a namespace deleted is emptied and
goes, and a Node whose kubelet stops renewing its Lease is marked unreachable after the node monitor
grace period (50 s): the kubelet stand-in renews every node's Lease (``kubelet.Kubelet``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from controlplane import REPO, ApiError, ControlPlane, _Proc, cache_dir, unpack_xz

BINARY = "kube-controller-manager"


def find_kcm() -> tuple[Path | None, str]:
    """(binary, "") or (None, what is missing)."""
    env = os.environ.get("KUBEBUILDER_ASSETS")
    if env and os.access(Path(env) / BINARY, os.X_OK):
        return Path(env) / BINARY, ""
    shared = REPO.parent / "shared" / "envtest"
    for d in ([Path(env)] if env else []) + [shared]:
        xz = d / f"{BINARY}.xz"
        if xz.is_file():
            return unpack_xz(xz, cache_dir() / BINARY), ""
    return None, f"no {BINARY} (or {BINARY}.xz) in {env or shared} (set KUBEBUILDER_ASSETS)"


class KubeControllerManager(_Proc):
    """One kube-controller-manager for a control plane; :meth:`start` returns once its controllers
    act (the ``default`` ServiceAccount of the ``default`` namespace exists)."""

    def __init__(self, cp: ControlPlane, binary: Path, workdir: Path, *, args: tuple[str, ...] = ()) -> None:
        kubeconfig = workdir / "kube-controller-manager.kubeconfig"
        cp.kubeconfig(kubeconfig, cp.admin_token, user="kube-controller-manager")
        d = cp.workdir
        cmd = [
            str(binary),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--controllers=*",
            "--secure-port=0",
            f"--service-account-private-key-file={d / 'sa.key'}",
            f"--root-ca-file={d / 'ca.crt'}",
            f"--cluster-signing-cert-file={d / 'ca.crt'}",
            f"--cluster-signing-key-file={d / 'ca.key'}",
            "-v=2",
            *args,
        ]
        super().__init__(BINARY, cmd, workdir / "kube-controller-manager.log")
        self.cp = cp

    def start(self, timeout: float = 60.0) -> KubeControllerManager:  # type: ignore[override]
        env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        import subprocess

        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"{BINARY} exited:\n{self.tail()}")
            try:
                self.cp.admin.get("/api/v1/namespaces/default/serviceaccounts/default")
                return self
            except ApiError as exc:
                if exc.status != 404:
                    raise
            time.sleep(0.2)
        raise RuntimeError(f"{BINARY} made no ServiceAccount after {timeout:.0f}s:\n{self.tail()}")

    def restart(self) -> KubeControllerManager:
        self.stop()
        return self.start()


def start_kcm(cp: ControlPlane, workdir: Path, *, args: tuple[str, ...] = ()) -> KubeControllerManager:
    binary, missing = find_kcm()
    if binary is None:
        raise FileNotFoundError(missing)
    return KubeControllerManager(cp, binary, workdir, args=args).start()
