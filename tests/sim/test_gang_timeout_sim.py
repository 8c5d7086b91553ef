"""Gang timeout in the simulator (EXT-1): simulated time is the session's time, a due timeout
holds a session even when the simulator would skip idle ones, and the result and report show
the timed-out gang."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from builders import BASIC_CONFIG
from sim.test_engine import h200_node, load, queue, train_job

from tidesched.sim import run, summary_lines
from tidesched.sim.report import render_html


def _doc(timeout: str | None) -> dict[str, Any]:
    never_fits = train_job("big", 2, 8, "1h")  # 16 cards on one 8-card node
    if timeout is not None:
        never_fits["metadata"]["annotations"]["scheduling.tidesched.io/gang-timeout-seconds"] = timeout
    return {
        "name": "gang-timeout",
        "schedulePeriod": "1m",
        "duration": "1h",
        "scheduler": {"config": BASIC_CONFIG},
        "objects": [h200_node("n1"), queue("train"), never_fits],
        # A job that fits arrives later and runs beside the stuck one.
        "events": [{"at": "20m", "submit": train_job("small", 1, 4, "10m")}],
    }


def test_timed_out_gang_is_reported_at_its_due_session(tmp_path: Path) -> None:
    sim = run(load(tmp_path, _doc("610")))
    r = sim.result
    # Created at t=0, due at 610 s: the first session at or after it is the one at 660 s.
    assert [(g["podgroup"], g["t"]) for g in r["gang_timeouts"]] == [("ml/big", 660.0)]
    assert "waited 10m10s since 2025-01-01T00:00:00Z for minMember 2, 0 of 2 tasks scheduled" in r["gang_timeouts"][0]["message"]
    assert r["summary"]["gangs_timed_out"] == 1
    assert r["invariants"]["violations"] == []
    jobs = {j["name"]: j for j in r["jobs"]}
    assert jobs["ml/big"]["started"] is None and jobs["ml/small"]["phase"] == "Completed"
    assert "gangs timed out: 1 (ml/big)" in summary_lines(sim)
    html = render_html(r)
    assert "Gang timeouts" in html and "ml/big" in html


def test_due_timeout_holds_a_session_when_idle_sessions_are_skipped(tmp_path: Path) -> None:
    """Nothing changes between t=0 and the small job's arrival at 20 min, so the skipping run
    would sleep through the 610 s deadline without a wake-up; it must report the timeout at
    the same time as a run holding a session every period."""
    doc = _doc("610")
    skipping = run(load(tmp_path, copy.deepcopy(doc)))
    every = run(load(tmp_path, doc), skip_idle=False)
    assert skipping.sessions < every.sessions
    assert skipping.result["gang_timeouts"] == every.result["gang_timeouts"]
    assert skipping.result["jobs"] == every.result["jobs"]
    timeouts = [e for e in skipping.result["events"] if e["reason"] == "GangTimeout"]
    assert timeouts and timeouts[0]["t"] == 660.0


def test_without_timeout_nothing_is_timed_out(tmp_path: Path) -> None:
    r = run(load(tmp_path, _doc(None))).result
    assert r["gang_timeouts"] == [] and r["summary"]["gangs_timed_out"] == 0
