"""HTML report: self-contained, deterministic, robust to empty and degenerate results."""

from __future__ import annotations

import copy
import math
import re
from typing import Any

import pytest

from tidesched.sim import bundled_example, simulate
from tidesched.sim.report import render_html
from tidesched.sim.report_plots import MAX_POINTS

H200 = "NVIDIA-H200"
MIG = "NVIDIA-H200/mig-1g.18gb-mixed"
RTX = "NVIDIA-GeForce-RTX-4090"


def tidal_result(n_steps: int = 288, period: float = 300.0, violations: int = 0) -> dict[str, Any]:
    """A hand-built 'tidal day': inference scales up by day and reclaims cards from training."""
    models = [H200, MIG, RTX]
    caps = {H200: 16, MIG: 6, RTX: 8}
    steps = []
    for i in range(n_steps):
        t = i * period
        day = max(0.0, math.sin(2 * math.pi * (t / 86400.0) - math.pi / 2) + 0.3)  # 0 at night, peak at noon
        inf_h200 = min(12, round(10 * day))  # the queue quota is 12
        train_h200 = caps[H200] - inf_h200 if i % 50 else caps[H200] - inf_h200 - 4
        inf_mig = min(caps[MIG], round(6 * day))
        rtx = min(caps[RTX], 4 + (i % 7))
        reclaim = 1 if (i % 24 == 5 and day > 0.5) else 0
        steps.append({
            "t": t,
            "cards": {
                H200: {"capacity": caps[H200], "allocated": inf_h200 + max(train_h200, 0)},
                MIG: {"capacity": caps[MIG], "allocated": inf_mig},
                RTX: {"capacity": caps[RTX], "allocated": rtx},
            },
            "queues": {
                "queue-inference": {
                    "allocated": {"cpu": 8.0 * inf_h200 + 2 * inf_mig, "memory": 64.0 * inf_h200, H200: inf_h200,
                                  MIG: inf_mig},
                    "quota": {"cpu": 200.0, "memory": 2048.0, H200: 12, MIG: 6},
                    "pending_pods": 2 if reclaim else 0,
                    "running_pods": inf_h200 + inf_mig,
                },
                "queue-training": {
                    "allocated": {"cpu": 6.0 * max(train_h200, 0) + 4 * rtx, "memory": 32.0 * rtx,
                                  H200: max(train_h200, 0), RTX: rtx},
                    "quota": {"cpu": 100000.0, "memory": 1e6, H200: 16, RTX: 8},
                    "pending_pods": 3 + (i % 5),
                    "running_pods": max(train_h200, 0) + rtx,
                },
            },
            "pending_pods": 5 + (i % 5) + (2 if reclaim else 0),
            "running_pods": inf_h200 + inf_mig + max(train_h200, 0) + rtx,
            "evictions": 4 * reclaim,
            "reclaims": reclaim,
            "preemptions": 1 if i % 97 == 3 else 0,
        })
    jobs = []
    for k in range(60):
        svc = "inference" if k % 3 == 0 else "training"
        submitted = k * 1200.0
        wait = None if k in (17, 41) else float((k * 37) % 900 if svc == "training" else (k * 7) % 60)
        started = None if wait is None else submitted + wait
        jobs.append({
            "name": f"team-{k % 4}/{svc}-{k:03d}", "kind": "Deployment" if svc == "inference" else "Job",
            "queue": f"queue-{svc}", "service_type": svc, "submitted": submitted, "started": started,
            "finished": None if started is None else started + 3600.0, "wait": wait,
            "evictions": 1 if k % 11 == 0 else 0, "restarts": 1 if k % 22 == 0 else 0,
            "phase": "Pending" if started is None else "Completed",
        })
    events = [
        {"t": s["t"], "kind": "Pod", "namespace": "team-1", "name": f"train-{i}-worker-0", "type": "Normal",
         "reason": "Evict", "message": "Pod is evicted, because of reclaim by queue-inference"}
        for i, s in enumerate(steps) if s["reclaims"]
    ]
    events.append({"t": 10.0, "kind": "PodGroup", "namespace": "team-1", "name": "x", "type": "Normal",
                   "reason": "Scheduled", "message": "all pods bound"})
    return {
        "scenario": "tidal-day", "seed": 7, "schedule_period": period, "duration": n_steps * period,
        "card_models": models, "queues": ["queue-inference", "queue-training"],
        "steps": steps, "jobs": jobs, "events": events,
        "invariants": {"checked_steps": n_steps, "violations": [
            {"t": 600.0 * (v + 1), "rule": "TIDE-4", "message": f"training gang team-1/train-{v} below minAvailable"}
            for v in range(violations)
        ]},
        "summary": {"pods_bound": 412, "pods_evicted": sum(s["evictions"] for s in steps), "jobs_completed": 58,
                    "mean_wait": 212.5, "p95_wait": 830.0,
                    "peak_card_utilisation": {H200: 1.0, MIG: 1.0, RTX: 1.0}},
    }


def _svg_count(page: str) -> int:
    return page.count("<svg")


def test_realistic_report_has_all_sections_and_plots() -> None:
    page = render_html(tidal_result())
    assert page.startswith("<!DOCTYPE html>")
    assert "tidal-day" in page
    assert _svg_count(page) == 4  # cards, queues, timeline, waits
    for heading in ("Card utilisation per model", "Queue usage against quota", "Pending pods",
                    "Wait times", "Longest waits", "Evictions"):
        assert heading in page
    assert "invariants held" in page and "badge ok" in page
    assert "412" in page and "3.5 min" in page  # pods bound, mean wait 212.5 s
    assert H200 in page and RTX in page
    assert "queue-inference" in page and "queue-training" in page
    # never-started jobs are listed first in the longest-waits table
    assert "(not started)" in page


def test_self_contained_no_external_references() -> None:
    result = tidal_result()
    # even a message quoting a URL must not turn into a reference
    result["events"].append({"t": 1.0, "kind": "Pod", "namespace": "a", "name": "b", "type": "Warning",
                             "reason": "Evicted", "message": "see https://example.com/x"})
    page = render_html(result)
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", page)
    assert "<link" not in page.lower()


def test_deterministic_byte_identical() -> None:
    a = render_html(tidal_result())
    b = render_html(copy.deepcopy(tidal_result()))
    assert a == b
    assert "<dc:date>" not in a and "Date" not in a


def test_svg_ids_are_unique_across_figures() -> None:
    page = render_html(tidal_result())
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert ids and len(ids) == len(set(ids))
    # every internal reference points at an id that exists
    for ref in re.findall(r"url\(#([^)]+)\)", page) + re.findall(r'href="#([^"]+)"', page):
        assert ref in set(ids)


def test_violations_are_red_and_listed() -> None:
    page = render_html(tidal_result(violations=3))
    assert "badge bad" in page and "3 invariant violations" in page
    assert page.count("<li><b>TIDE-4</b>") == 3


def test_empty_result() -> None:
    page = render_html({})
    assert "unnamed scenario" in page
    assert "invariants not checked" in page
    assert "No time steps" in page
    assert "No jobs in this run." in page


def test_no_steps_no_cards_one_queue() -> None:
    result = {"scenario": "tiny", "seed": 0, "schedule_period": 1.0, "duration": 0.0, "card_models": [],
              "queues": ["default"], "steps": [], "jobs": [], "events": [],
              "invariants": {"checked_steps": 0, "violations": []},
              "summary": {"pods_bound": 0, "pods_evicted": 0, "jobs_completed": 0, "mean_wait": None,
                          "p95_wait": None, "peak_card_utilisation": {}}}
    page = render_html(result)
    assert "tiny" in page and "badge ok" in page and "<svg" not in page


def test_cpu_only_single_queue_single_step() -> None:
    result = {
        "scenario": "cpu-only", "card_models": [], "queues": ["default"],
        "steps": [{"t": 0.0, "cards": {}, "queues": {"default": {"allocated": {"cpu": 4.0}, "quota": {"cpu": 8.0},
                                                                "pending_pods": 1, "running_pods": 2}},
                   "pending_pods": 1, "running_pods": 2, "evictions": 0, "reclaims": 0, "preemptions": 0}],
        "jobs": [{"name": "a/b", "kind": "Pod", "queue": "default", "service_type": "unknown",
                  "submitted": 0.0, "started": 0.0, "finished": None, "wait": 0.0, "evictions": 0,
                  "restarts": 0, "phase": "Running"}],
    }
    page = render_html(result)
    assert "CPU-only" in page
    assert _svg_count(page) == 3  # queues, timeline, waits


def test_missing_optional_keys_and_odd_values() -> None:
    result = tidal_result(n_steps=20)
    for s in result["steps"]:
        del s["reclaims"]
        s["queues"]["queue-training"].pop("quota")
    result["steps"][3]["cards"][H200]["allocated"] = None
    del result["summary"]["peak_card_utilisation"]
    result["jobs"][0]["wait"] = "n/a"
    result["queues"] = []  # discovered from the steps instead
    result["scenario"] = "<b>$x_1$</b> & co"
    page = render_html(result)
    assert "&lt;b&gt;" in page and "<b>$x" not in page
    assert "queue-training" in page


def test_all_jobs_never_started() -> None:
    result = tidal_result(n_steps=10)
    for j in result["jobs"]:
        j["wait"] = j["started"] = None
    page = render_html(result)
    assert "No job started" in page


def test_large_run_is_downsampled() -> None:
    n = 12_000
    result = tidal_result(n_steps=n, period=10.0)
    page = render_html(result)
    assert f"from {n:,} steps" in page
    # each plotted polyline carries at most ~MAX_POINTS vertices
    for path in re.findall(r'<path d="([^"]+)"', page):
        assert path.count("L") <= 2 * MAX_POINTS + 10
    assert len(page) < 6_000_000


def test_a_forked_worker_draws_the_same_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """Large results draw the card figure in a forked worker meanwhile; the page is the same as
    drawn in one process, and a worker that fails is replaced by drawing in this one."""
    from tidesched.sim import report

    if not report._can_draw_in_parallel():
        pytest.skip("this platform cannot fork or has one core")  # the serial page is tested everywhere
    result = tidal_result(n_steps=3_000, period=10.0)
    assert report.PARALLEL_MIN_STEPS <= 3_000  # so the default takes the parallel way
    serial = render_html(result, parallel=False)
    assert render_html(result) == serial

    def failing(i: int) -> str:  # what the forked worker runs (it inherits the patch)
        raise RuntimeError("worker lost")

    monkeypatch.setattr(report, "_draw_forked", failing)
    assert render_html(result, parallel=True) == serial


def test_engine_result_of_the_bundled_example_renders() -> None:
    """End to end with the real engine."""
    result = simulate(bundled_example())
    page = render_html(result)
    assert _svg_count(page) == 5  # cards, GPUs (allocation, demand, fragmentation), queues, timeline, waits
    assert "GPU allocation rate against arrived GPU demand" in page
    assert "stranded by fragmentation" in page
    assert result["scenario"] in page
    assert page == render_html(simulate(bundled_example()))  # same scenario, same seed: same bytes


def test_path_columns_read_as_the_per_step_getter() -> None:
    """``Series.path`` (one pass per key level, numpy conversion) gives exactly the numbers the
    per-step getter with ``number`` gives, for odd values too (strings, None, inf, NaN, lists,
    nested non-dict mappings, missing levels)."""
    from collections import OrderedDict

    import numpy as np

    from tidesched.sim.report_plots import Series, number

    odd = [3, 2.5, "4", "x", None, math.inf, -math.inf, math.nan, True, [1], {"a": 1}, " 7 ", 10**400]
    steps: list[dict[str, Any]] = []
    for i, v in enumerate(odd * 3):
        cards: Any = {"A": {"capacity": v, "allocated": i}}
        if i % 5 == 1:
            cards = OrderedDict(cards)  # a mapping, not a dict
        elif i % 7 == 2:
            cards = "broken"
        elif i % 11 == 3:
            cards = {"A": None}
        steps.append({"t": float(i), "cards": cards, "pending_pods": v})
    series = Series(steps)

    def dig(s: Any, keys: tuple[str, ...]) -> Any:
        for k in keys:
            s = s.get(k) if isinstance(s, dict) or hasattr(s, "keys") else None
        return s

    for keys in (("cards", "A", "capacity"), ("cards", "A", "allocated"), ("pending_pods",), ("cards", "B", "x")):
        for missing in (math.nan, 0.0):
            want = np.array([number(dig(s, keys), missing) for s in series.steps], dtype=float)
            got = series.path(*keys, missing=missing)
            assert np.array_equal(got, want, equal_nan=True), keys
    # Plain numbers take numpy's path and agree too.
    clean = Series([{"t": float(i), "v": i if i % 3 else None} for i in range(50)])
    assert np.array_equal(clean.path("v"), np.array([i if i % 3 else math.nan for i in range(50)]), equal_nan=True)


def test_queue_card_lines_ordered_by_peak_then_first_quota() -> None:
    from tidesched.sim.report_plots import Series, queue_card_resources

    steps = [
        {"t": 0.0, "queues": {"q": {"allocated": {"cpu": 9, "B": 0}, "quota": {"Z": 0, "Y": 2}}}},
        {"t": 1.0, "queues": {"q": {"allocated": {"B": 3, "A": 3, "C": "junk"}, "quota": {"Z": 1, "X": 5}}}},
        {"t": 2.0, "queues": {"q": {"allocated": {"C": 7}, "quota": {"W": 1}}}},
    ]
    assert queue_card_resources(Series(steps), "q") == (["C", "A", "B"], 4)  # Y, Z, X, W not shown
    quota_only = [{"t": 0.0, "queues": {"q": {"quota": {"Z": 0, "Y": 2}}}},
                  {"t": 1.0, "queues": {"q": {"quota": {"Z": 1, "X": 5, "W": 1, "V": 1}}}}]
    assert queue_card_resources(Series(quota_only), "q") == (["Y", "Z", "X", "W"], 1)
