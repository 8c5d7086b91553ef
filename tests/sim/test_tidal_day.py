"""The bundled example, `tidesched simulate` with no argument: a tidal day (issue 5). Its wall
time is measured by ``benchmarks/tidal_day.py``, not here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tidesched.sim import bundled_example, result_json, run

H200 = "NVIDIA-H200"
ONLINE = ("online-chat", "online-vision")
OFFLINE = ("offline-research", "offline-batch")


@pytest.fixture(scope="module")
def tidal() -> Any:
    return run(bundled_example())


def at(result: dict[str, Any], t: float) -> dict[str, Any]:
    """The step in force at time t (steps are change points)."""
    last = result["steps"][0]
    for s in result["steps"]:
        if s["t"] > t:
            break
        last = s
    return last


def used(step: dict[str, Any], queues: tuple[str, ...], model: str) -> float:
    return sum(step["queues"].get(q, {}).get("allocated", {}).get(model, 0.0) for q in queues)


def test_runs_the_whole_day_on_the_mixed_cluster(tidal: Any) -> None:
    r = tidal.result
    assert r["scenario"] == "tidal-day" and r["duration"] == 86400.0
    assert {
        H200,
        "NVIDIA-GeForce-RTX-4090",
        "NVIDIA-GeForce-RTX-4090-D",
        "NVIDIA-H200/mig-1g.18gb-mixed",
        "NVIDIA-H200/mig-3g.71gb-mixed",
    } <= set(r["card_models"])
    assert set(r["queues"]) >= set(ONLINE + OFFLINE)


def test_inference_reclaims_cards_from_training_by_day(tidal: Any) -> None:
    r = tidal.result
    assert r["summary"]["reclaims"] > 0
    evictions = [e for e in r["events"] if e["reason"] == "Evict" and e["message"].startswith("reclaim")]
    assert evictions
    jobs = {j["name"]: j for j in r["jobs"]}
    for e in evictions:
        victim_job = next(
            j
            for j in jobs.values()
            if j["kind"] == "Job" and e["name"].startswith(j["name"].split("/")[1] + "-")
        )
        assert victim_job["service_type"] == "training" and victim_job["queue"] in OFFLINE
        reclaimer = re.search(r"make room for (\S+)/(\S+) on node", e["message"])
        assert reclaimer is not None and reclaimer.group(1) in ("online", "vision")
        assert 7 * 3600 <= e["t"] <= 18 * 3600  # by day
    assert any(j["restarts"] > 0 for j in jobs.values() if j["service_type"] == "training")


def test_the_tide_turns(tidal: Any) -> None:
    r = tidal.result
    night, noon, late = at(r, 3 * 3600), at(r, 13 * 3600), at(r, 23.5 * 3600)
    assert used(noon, ONLINE, H200) > used(night, ONLINE, H200) + 16  # inference scales up by day
    assert used(noon, OFFLINE, H200) < used(night, OFFLINE, H200)  # training gives way
    assert used(late, OFFLINE, H200) > used(noon, OFFLINE, H200)  # and comes back at night
    mig = "NVIDIA-H200/mig-1g.18gb-mixed"
    assert night["cards"][mig]["capacity"] == 3 and noon["cards"][mig]["capacity"] == 17  # re-split by day
    assert used(noon, ONLINE, mig) > 3


def test_byte_identical_between_runs(tidal: Any) -> None:
    assert result_json(tidal.result) == result_json(run(bundled_example()).result)


def test_invariants_hold(tidal: Any) -> None:
    assert tidal.result["invariants"]["violations"] == []


def test_command_without_argument_runs_the_tidal_day(tmp_path: Path) -> None:
    from tidesched.cli import app

    res = CliRunner().invoke(app, ["simulate", "--out", str(tmp_path), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "scenario tidal-day" in res.output
    assert (tmp_path / "result.json").exists()
