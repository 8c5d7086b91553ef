"""The real kube-controller-manager (``../shared/envtest/kube-controller-manager.xz``) running only
its resourceclaim controller, for the DRA tests and ``benchmarks/dra_differential.py``: it makes
the claims of pods that name a ResourceClaimTemplate, takes pods that are done or gone out of
``reservedFor`` and deallocates claims nobody reserves, as in a real cluster. Unpacked once into
``~/.cache/tidesched-e2e``; stopped by its own process group."""

from __future__ import annotations

import lzma
import shutil
import time
from pathlib import Path

from controlplane import ControlPlane, _Proc


def kcm_binary(assets: Path) -> Path | None:
    packed = assets / "kube-controller-manager.xz"
    if not packed.exists():
        return None
    binary = Path.home() / ".cache" / "tidesched-e2e" / "kube-controller-manager"
    if not binary.exists() or binary.stat().st_mtime < packed.stat().st_mtime:
        binary.parent.mkdir(parents=True, exist_ok=True)
        tmp = binary.with_suffix(f".part{time.monotonic_ns()}")
        with lzma.open(packed) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        tmp.chmod(0o755)
        tmp.rename(binary)
    return binary


def start_resourceclaim_controller(cp: ControlPlane, binary: Path) -> _Proc:
    kubeconfig = cp.kubeconfig(cp.workdir / "kcm.kubeconfig", cp.admin_token, user="e2e-admin")
    proc = _Proc("kube-controller-manager", [
        str(binary), f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}", "--leader-elect=false", "--secure-port=0",
        "--controllers=resourceclaim-controller",
    ], cp.workdir / "kube-controller-manager.log")
    proc.start()
    time.sleep(1.0)
    if not proc.alive():
        raise RuntimeError(f"kube-controller-manager exited:\n{proc.tail()}")
    return proc
