"""tdm plugin: window parsing (Test_parseRevocableZone), argument checks, the evict period
across sessions, Preemptable, and the wake-ups at window boundaries. Placement and shuffle
cases ported from tdm_test.go are in tests/scenarios/tdm.yaml."""

from __future__ import annotations

from typing import Any

import pytest

from builders import decide, node, pod, podgroup, queue
from tidesched.framework.arguments import ConfigError
from tidesched.model.objects import parse_time
from tidesched.model.snapshot import build_snapshot
from tidesched.plugins.tdm import parse_window, window_bounds
from tidesched.scheduler import config_from_text, run_session

A_DAY = parse_time("2024-01-10T12:07:30Z", "t")


@pytest.mark.parametrize("raw, delta", [
    ("00:00-01:00", 3600), ("0:00-23:59", 23 * 3600 + 59 * 60), ("1:00-0:00", 23 * 3600),
    ("   1:00-0:00    ", 23 * 3600), ("23:59-23:59", 24 * 3600),
])
def test_window_lengths(raw: str, delta: int) -> None:
    start, end = window_bounds(raw, A_DAY)
    assert end - start == delta


@pytest.mark.parametrize("raw", ["00:00_01:00", "0:00", "1:0-0:0", "63:59-23:59", "1:00 - 2:00", "-"])
def test_malformed_windows(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_window(raw)


def _config(args: str, actions: str = "shuffle") -> str:
    return f'actions: "{actions}"\ntiers:\n- plugins:\n  - name: tdm\n    arguments: {args}\n'


@pytest.mark.parametrize("args, field", [
    ('{tdm.revocable-zone.rz1: "0:00"}', "tdm.revocable-zone.rz1"),
    ("{tdm.revocable-zone.rz1: 5}", "tdm.revocable-zone.rz1"),
    ('{tdm.revocable-zone.rz1: "0:00-1:00", tdm.evict.period: "soon"}', "tdm.evict.period"),
])
def test_bad_arguments_are_refused_with_line_and_field(args: str, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_text(_config(args), "tdm.conf")
    message = str(err.value)
    assert message.startswith("tdm.conf:5:") and field in message


def _revocable_cluster() -> list[dict[str, Any]]:
    objs = [queue("q"), node("r1", cpu="8", labels={"volcano.sh/revocable-zone": "rz1"}),
            podgroup("pg", 0, queue="q", phase="Running")]
    objs += [pod(f"p{i}", "pg", node="r1", phase="Running", annotations={"volcano.sh/preemptable": "true"})
             for i in range(3)]
    return objs


def test_shuffle_evicts_at_most_once_per_period_of_one_config() -> None:
    config = config_from_text(_config('{tdm.revocable-zone.rz1: "0:00-0:01", tdm.evict.period: 10m}'))
    snapshot = build_snapshot(_revocable_cluster())
    first = run_session(snapshot, config, now=A_DAY)
    assert first.evicted == ["ns/p0"]  # no budget: one pod per job and round
    again = run_session(snapshot, config, now=A_DAY + 599)
    assert again.evicted == [] and again.wake_at == A_DAY + 600
    assert run_session(snapshot, config, now=A_DAY + 600).evicted == ["ns/p0"]
    # Another loaded config (a restart, a reload) starts afresh.
    fresh = config_from_text(_config('{tdm.revocable-zone.rz1: "0:00-0:01", tdm.evict.period: 10m}'))
    assert run_session(snapshot, fresh, now=A_DAY + 1).evicted == ["ns/p0"]


def test_sessions_wake_at_the_next_window_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        config = config_from_text(_config('{tdm.revocable-zone.rz1: "13:00-14:00", tdm.evict.period: 1s}'))
        snapshot = build_snapshot(_revocable_cluster())
        out = run_session(snapshot, config, now=A_DAY)
        assert out.evicted == ["ns/p0"]  # 12:07:30 UTC: the zone is closed
        assert out.wake_at == parse_time("2024-01-10T13:00:00Z", "t")
        inside = run_session(snapshot, config, now=parse_time("2024-01-10T13:30:00Z", "t"))
        assert inside.evicted == [] and inside.wake_at == parse_time("2024-01-10T14:00:01Z", "t")
        # Volcano measures both ends from the current day: a window across midnight is closed
        # after midnight (22:00-2:00 at 01:00 is before today's 22:00).
        night = config_from_text(_config('{tdm.revocable-zone.rz1: "22:00-2:00", tdm.evict.period: 1s}'))
        assert run_session(snapshot, night, now=parse_time("2024-01-10T23:00:00Z", "t")).evicted == []
        assert run_session(snapshot, night, now=parse_time("2024-01-11T01:00:00Z", "t")).evicted == ["ns/p0"]
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


PREEMPT = """
actions: "preempt"
tiers:
- plugins:
  - {name: gang, enablePreemptable: false, enableJobStarving: false}
  - name: tdm
    arguments: {tdm.revocable-zone.rz1: "0:00-0:00"}
"""


def _preempt(preemptor_annotations: dict[str, str] | None = None, budget: dict[str, str] | None = None) -> dict[str, Any]:
    objs = [queue("q"), node("plain", cpu="2"), node("r1", cpu="2", labels={"volcano.sh/revocable-zone": "rz1"}),
            podgroup("victims", 0, queue="q", phase="Running"),
            podgroup("p", 1, queue="q")]
    objs[3]["metadata"]["annotations"] = budget or {}
    objs += [pod(f"v{i}", "victims", node="plain", phase="Running") for i in range(2)]
    objs += [pod(f"r{i}", "victims", node="r1", phase="Running") for i in range(2)]
    # A pod is preemptable unless it says otherwise; tdm lets only non-preemptable ones preempt.
    objs.append(pod("p-0", "p", cpu="2", annotations=preemptor_annotations or {"volcano.sh/preemptable": "false"}))
    return decide(objs, PREEMPT, now=A_DAY).to_json()


def test_preemptable_takes_victims_off_revocable_nodes_within_the_job_budget() -> None:
    # The preemptor needs both pods of the plain node; the job's default budget is one pod.
    assert _preempt()["evicted"] == []
    out = _preempt(budget={"volcano.sh/jdb-max-unavailable": "2"})
    assert sorted(out["evicted"]) == ["ns/v0", "ns/v1"] and out["pipelined"] == {"ns/p-0": "plain"}


def test_a_preemptable_or_revocable_preemptor_preempts_nothing() -> None:
    budget = {"volcano.sh/jdb-max-unavailable": "2"}
    assert _preempt({"volcano.sh/preemptable": "true"}, budget)["evicted"] == []
    assert _preempt({"volcano.sh/revocable-zone": "*", "volcano.sh/preemptable": "false"}, budget)["evicted"] == []
