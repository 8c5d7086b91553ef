"""``tidesched experiment`` end to end on a small made-up trace: the files a run writes, the
summary's shape, bad input, and the same runs on a local Dask cluster (``--cluster``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tidesched.cli import app
from tidesched.cli.experiment import parse_seeds

runner = CliRunner()


def make_trace(root: Path) -> Path:
    d = root / "trace" / "csv"
    d.mkdir(parents=True)
    with (d / "openb_node_list_gpu_node.csv").open("w") as fh:
        fh.write("sn,cpu_milli,memory_mib,gpu,model\n")
        for i in range(6):
            fh.write(f"node-{i:02d},32000,262144,{4 if i % 2 else 2},{'T4' if i < 3 else 'P100'}\n")
    with (d / "openb_pod_list_small.csv").open("w") as fh:
        fh.write("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n")
        shapes = [(4000, 1, 500, ""), (2000, 1, 250, ""), (8000, 1, 1000, ""), (6000, 2, 1000, ""), (1000, 0, 0, ""),
                  (3000, 1, 700, "T4")]
        for i in range(24):
            c, n, m, spec = shapes[i % len(shapes)]
            fh.write(f"pod-{i:03d},{c},4096,{n},{m},{spec},LS,Running,0,10,1\n")
    return root / "trace"


def test_seed_ranges() -> None:
    assert parse_seeds("42") == [42]
    assert parse_seeds("42-45,50") == [42, 43, 44, 45, 50]
    with pytest.raises(ValueError):
        parse_seeds("45-42")


def test_experiment_writes_results_summary_and_report(tmp_path: Path) -> None:
    trace = make_trace(tmp_path)
    out = tmp_path / "out"
    res = runner.invoke(app, ["experiment", "--trace", str(trace), "--pods", "openb_pod_list_small",
                              "--policy", "fgd,random", "--seeds", "1-2", "--out", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    result = json.loads((out / "openb_pod_list_small" / "fgd" / "1" / "result.json").read_text())
    assert set(result["allocation_by_arrival"]) == {str(a) for a in range(131)}
    assert result["total_gpus"] == 18 and result["pods"] >= 24
    assert sum(result["failed_pods"].values()) == result["final"]["pods_failed"] > 0  # 130 % cannot all fit
    assert 0 < result["final"]["allocation"] <= 100
    assert result["allocation_by_arrival"]["130"] == result["final"]["allocation"]
    assert result["cpu_seconds"] > 0
    rows = list(csv.reader((out / "summary.csv").open()))
    assert rows[0][:6] == ["workload", "policy", "tune", "seed", "total_gpus", "0"] and rows[0][-1] == "130"
    assert sorted((r[1], r[3]) for r in rows[1:]) == [("fgd", "1"), ("fgd", "2"), ("random", "1"), ("random", "2")]
    assert "<svg" in (out / "report.html").read_text()


def test_experiment_refuses_bad_input(tmp_path: Path) -> None:
    trace = make_trace(tmp_path)
    res = runner.invoke(app, ["experiment", "--trace", str(trace), "--pods", "openb_pod_list_small", "--policy", "tetris"])
    assert res.exit_code == 2 and "unknown policy 'tetris'" in res.output
    res = runner.invoke(app, ["experiment", "--trace", str(trace), "--pods", "nope"])
    assert res.exit_code == 2 and "pod list not found" in res.output
    conf = tmp_path / "plain.yaml"
    # any config places pods (one session per pod) if it has an allocate action; this has none
    conf.write_text('actions: "enqueue"\ntiers:\n- plugins:\n  - name: binpack\n')
    res = runner.invoke(app, ["experiment", "--trace", str(trace), "--pods", "openb_pod_list_small", "--config", str(conf),
                              "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "neither a GPU placement plugin" in res.output


def test_experiment_on_a_dask_cluster_gives_the_local_results(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    trace = make_trace(tmp_path)
    args = ["experiment", "--trace", str(trace), "--pods", "openb_pod_list_small", "--policy", "bestfit,fgd",
            "--seeds", "3-4", "--no-progress"]
    local = runner.invoke(app, args + ["--out", str(tmp_path / "local"), "--parallel", "2"])
    assert local.exit_code == 0, local.output
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None) as lc:
        assert lc.scheduler_address.startswith("tcp://")
        res = runner.invoke(app, args + ["--out", str(tmp_path / "dask"), "--cluster", lc.scheduler_address])
    assert res.exit_code == 0, res.output
    for policy in ("bestfit", "fgd"):
        for seed in ("3", "4"):
            a = json.loads((tmp_path / "local" / "openb_pod_list_small" / policy / seed / "result.json").read_text())
            b = json.loads((tmp_path / "dask" / "openb_pod_list_small" / policy / seed / "result.json").read_text())
            for key in ("allocation_by_arrival", "fragmentation_by_arrival", "failed_pods", "final"):
                assert a[key] == b[key]
