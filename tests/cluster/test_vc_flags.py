"""vc-scheduler v1.15.1's flags on ``tidesched run``: the Volcano chart's argument list is taken
as it is; flags with no effect here are logged; values tidesched cannot honour refuse the start
with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidesched.cluster import vc_flags
from tidesched.cluster.commands import run_main, run_parser

# What Volcano v1.15.1's Helm chart (templates/scheduler.yaml) passes, with its values' defaults.
CHART_ARGS = [
    "--logtostderr",
    "--scheduler-conf=/volcano.scheduler/volcano-scheduler.conf",
    "--scheduler-name=volcano",
    "--enable-healthz=true",
    "--enable-metrics=true",
    "--enable-pprof=true",
    "--leader-elect=false",
    "--leader-elect-resource-namespace=volcano-system",
    "--kube-api-qps=2000",
    "--kube-api-burst=2000",
    "--schedule-period=1s",
    "--node-worker-threads=20",
    "--percentage-nodes-to-find=100",
    "--plugins-dir=/plugins",
    "--feature-gates=SchedulingGatesQueueAdmission=false",
    "--scheduler-sharding-mode=none",
    "-v=3",
    "2>&1",
]


def test_the_charts_arguments_are_taken_with_notes_and_no_error() -> None:
    notes, errors = vc_flags.check(run_parser().parse_args(CHART_ARGS))
    assert errors == []
    assert any(n.startswith("--enable-pprof=True taken, no effect") for n in notes), notes
    assert any("--percentage-nodes-to-find=100" in n and "every feasible node" in n for n in notes), notes
    assert any("--plugins-dir=/plugins taken: it holds no plugin" in n for n in notes), notes


def test_defaults_say_nothing() -> None:
    assert vc_flags.check(run_parser().parse_args([])) == ([], [])


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        ("--node-selector=volcano.sh/role:train", "--node-selector=volcano.sh/role:train is not supported"),
        ("--default-queue=batch", "--default-queue=batch is not supported"),
        ("--priority-class=false", "--priority-class=false is not supported"),
        ("--scheduler-sharding-mode=hard", "--scheduler-sharding-mode=hard is not supported"),
    ],
)
def test_values_tidesched_cannot_honour_refuse_the_start(flag: str, words: str, capsys) -> None:
    assert run_main(["--master", "http://127.0.0.1:9", flag]) == 2
    assert words in capsys.readouterr().err


def test_a_plugins_dir_with_go_plugins_refuses_the_start(tmp_path: Path, capsys) -> None:
    (tmp_path / "magic.so").write_bytes(b"\x7fELF")
    assert run_main(["--master", "http://127.0.0.1:9", f"--plugins-dir={tmp_path}"]) == 2
    assert "magic.so" in capsys.readouterr().err
