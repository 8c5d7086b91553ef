"""The DRA oracle in CI (``benchmarks/dra_differential.py``): a few random DRA worlds — GPUs as
ResourceSlices, claims from templates with selectors, counts, ``matchAttribute`` and
``firstAvailable``, shared claims — through kube-scheduler 1.36 and ``tidesched run``, each on a
control plane of its own with kube-controller-manager's resourceclaim controller. tidesched's
outcome must be valid (claims allocated and reserved, devices on the pod's node and selected,
constraints kept, no device twice) and maximal, and match kube-scheduler's or differ only in
placement choices; where only one device answer exists it must be kube-scheduler's. The full
run is 200 worlds with vc-scheduler v1.15.1 as a third column (see the module). About half a
minute on two cores."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from controlplane import find_assets
from resourceclaim_kcm import kcm_binary

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import dra_differential  # noqa: E402


def test_dra_worlds_against_kube_scheduler(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assets, missing = find_assets(("kube-scheduler",))
    if assets is None or kcm_binary(assets) is None:
        pytest.skip(missing or "no kube-controller-manager.xz")
    code = dra_differential.main(["--worlds", "4", "--seed", "3", "--no-volcano", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "0 unexplained" in out, out
    # The worlds bind pods (some of them with several devices and constraints): not a vacuous pass.
    lines = [line for line in out.splitlines() if line.startswith("world ")]
    assert len(lines) == 4 and sum(int(line.split("tidesched ")[1].split("/")[0]) for line in lines) > 0, out
    cells = [line.split("tidesched ")[1].split()[0] for line in lines]  # "5/6", "!" invalid, "+" not maximal
    assert not any(c.endswith(("!", "+")) for c in cells), out
