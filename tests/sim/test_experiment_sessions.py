"""The experiment with a config that has no GPU placement plugin (sim/experiment/sessions.py):
one scheduling session per arriving pod, its bind decision applied to the experiment's GpuNodes
with the devices it chose; the run's result in the fast path's shape; the CLI's --config."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tidesched.cli import app
from tidesched.framework.arguments import ConfigError
from tidesched.model.gpu_nodes import GpuRequest
from tidesched.scheduler import config_from_text
from tidesched.sim.experiment.policies import bundled, check_placeable
from tidesched.sim.experiment.run import run_one
from tidesched.sim.experiment.sessions import place_by_sessions
from tidesched.sim.experiment.workload import gpu_nodes
from tidesched.sim.trace import TraceNode

sys.path.insert(0, str(Path(__file__).parent))
from test_experiment_cli import make_trace  # noqa: E402

BINPACK = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: predicates
  - name: binpack
"""
SPREAD = BINPACK.replace("name: binpack", "name: nodeorder")
DEVICESHARE = BINPACK + """  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.ScheduleWeight: 1
"""
WORLD = (TraceNode("node-a", 32000, 131072, 2, "T4"), TraceNode("node-b", 32000, 131072, 2, "T4"),
         TraceNode("node-c", 32000, 131072, 2, "P100"))
ONE = GpuRequest(4000, 8192, 1, 1000)


def place(config: str, requests: list[GpuRequest], world: tuple[TraceNode, ...] = WORLD):
    nodes = gpu_nodes(world)
    placement, misfits = place_by_sessions(world, nodes, requests, config_from_text(config))
    return nodes, placement, misfits


def test_binpack_fills_a_node_before_the_next_and_leaves_one_whole_where_spreading_does_not() -> None:
    nodes, p, misfits = place(BINPACK, [ONE, ONE, ONE])
    # empty nodes tie (the first by name); then the fullest node that fits: a, a, then b
    assert [nodes.names[i] for i in p.node] == ["node-a", "node-a", "node-b"]
    # the devices are the session's: without deviceshare's policy its walk takes the highest
    # idle device first (GpuNodes alone would take the lowest)
    assert nodes.dev_free.tolist() == [[0, 0], [1000, 0], [1000, 1000]] and misfits == 0
    assert p.allocated.tolist() == [1000, 2000, 3000] and p.arrived.tolist() == [1000, 2000, 3000]
    spread_nodes, q, _ = place(SPREAD, [ONE, ONE, ONE])
    assert [spread_nodes.names[i] for i in q.node] == ["node-a", "node-b", "node-c"]
    assert not (spread_nodes.dev_free == 1000).all(axis=1).any()  # no node left whole


def test_gpu_models_are_kept_and_what_fits_nowhere_fails_by_kind() -> None:
    p100 = GpuRequest(4000, 8192, 1, 1000, ("P100",))
    eight = GpuRequest(4000, 8192, 8, 1000)
    nodes, p, _ = place(BINPACK, [p100, eight, p100, p100])
    assert [nodes.names[i] if i >= 0 else "" for i in p.node] == ["node-c", "", "node-c", ""]
    assert p.failed == {"EightGpu": 1, "OneGpu": 1}
    assert p.allocated[-1] == 2000


def test_deviceshare_chooses_the_device_and_the_experiment_records_that_device() -> None:
    half = GpuRequest(2000, 4096, 1, 500)
    nodes, p, misfits = place(DEVICESHARE, [half, half, half])
    assert [nodes.names[i] for i in p.node] == ["node-a"] * 3
    # binpack's device walk: the device already used first, so two halves make one whole device
    assert sorted(nodes.dev_free[0].tolist()) == [0, 500] and misfits == 0
    assert nodes.allocated_milli == 1500 == p.allocated[-1]


@pytest.mark.parametrize("config, misfits", [(BINPACK, 1), (DEVICESHARE, 0)])
def test_without_deviceshare_a_pod_fitting_the_node_totals_but_no_device_is_a_misfit(config: str, misfits: int) -> None:
    world = (TraceNode("node-a", 32000, 131072, 2, "T4"),)
    big, mid = GpuRequest(1000, 1024, 1, 700), GpuRequest(1000, 1024, 1, 500)
    nodes, p, got = place(config, [big, big, mid], world)
    # 600 milli-GPU free in all, 300 on each device: the node's totals fit 500, no device does
    assert p.node.tolist() == [0, 0, -1] and p.failed == {"ShareGpu": 1}
    assert got == misfits
    assert sorted(nodes.dev_free[0].tolist()) == [300, 300]


def test_a_run_with_any_config_has_the_fast_paths_keys(tmp_path: Path) -> None:
    trace = make_trace(tmp_path)
    conf = tmp_path / "binpack.yaml"
    conf.write_text(BINPACK)
    from tidesched.sim.experiment.policies import from_file

    slow = run_one(str(trace), "openb_pod_list_small", from_file(conf), 1, 1.3)
    fast = run_one(str(trace), "openb_pod_list_small", bundled("bestfit"), 1, 1.3)
    assert set(slow) == set(fast) and set(slow["final"]) == set(fast["final"])
    assert (slow["placed_by"], fast["placed_by"]) == ("sessions", "placement plugins")
    assert slow["pods"] == fast["pods"] and slow["final"]["arrived_milli_gpu"] == fast["final"]["arrived_milli_gpu"]
    assert slow["final"]["pods_placed"] > 0 and slow["final"]["pods_failed"] == sum(slow["failed_pods"].values())
    assert slow["allocation_by_arrival"]["130"] == slow["final"]["allocation"] > 0


def test_the_cli_runs_any_config_and_refuses_one_that_places_nothing(tmp_path: Path) -> None:
    trace = make_trace(tmp_path)
    conf = tmp_path / "binpack.yaml"
    conf.write_text(BINPACK)
    out = tmp_path / "out"
    runner = CliRunner()
    res = runner.invoke(app, ["experiment", "--trace", str(trace), "--pods", "openb_pod_list_small",
                              "--config", str(conf), "--seeds", "3", "--out", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    result = json.loads((out / "openb_pod_list_small" / "binpack" / "3" / "result.json").read_text())
    assert result["placed_by"] == "sessions" and result["config"] == str(conf)
    summary = (out / "summary.csv").read_text().splitlines()
    assert len(summary) == 2 and summary[1].startswith("openb_pod_list_small,binpack,1.3,3,18,")

    idle = tmp_path / "idle.yaml"
    idle.write_text(BINPACK.replace("enqueue, allocate", "enqueue, backfill"))
    res = runner.invoke(app, ["experiment", "--trace", str(trace), "--pods", "openb_pod_list_small",
                              "--config", str(idle), "--out", str(tmp_path / "out2"), "--no-progress"])
    assert res.exit_code == 2
    assert "neither a GPU placement plugin" in res.output and "nor an allocate action" in res.output
    assert not (tmp_path / "out2").exists()


def test_check_placeable_takes_gpu_plugins_or_allocate() -> None:
    check_placeable(config_from_text(BINPACK))
    check_placeable(config_from_text((bundled("fgd").text).replace("allocate", "backfill")))
    with pytest.raises(ConfigError, match="nor an allocate action"):
        check_placeable(config_from_text('actions: "enqueue"\ntiers:\n- plugins:\n  - name: binpack\n'))


def test_gpu_nodes_place_whole_devices_a_session_chose_and_refuse_busy_ones() -> None:
    nodes = gpu_nodes((TraceNode("n", 32000, 131072, 4, "T4"),))
    assert nodes.place(0, GpuRequest(1000, 1024, 2, 1000), devices=[3, 1]) == [1, 3]
    assert nodes.dev_free[0].tolist() == [1000, 0, 1000, 0]
    with pytest.raises(ValueError):
        nodes.place(0, GpuRequest(1000, 1024, 2, 1000), devices=[0, 1])  # 1 is taken
    with pytest.raises(ValueError):
        nodes.place(0, GpuRequest(1000, 1024, 1, 500), device=7)  # no such device
    assert nodes.dev_free[0].tolist() == [1000, 0, 1000, 0] and nodes.cpu_free[0] == 31000
