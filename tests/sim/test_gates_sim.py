"""Scheduling gates in the simulator: a gated pod is never bound while gated (the world refuses
such a bind, as the API server does); with SchedulingGatesQueueAdmission the session's ungate
decision lifts Volcano's gate and the pod is bound in a later session; a scenario event lifts
any other gate (``ungate``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from builders import CAPACITY_CONFIG
from tidesched.model.gates import QUEUE_ALLOCATION_GATE
from tidesched.sim import simulate
from tidesched.sim.scenario import load_scenario

def _pod(name: str, *gates: str, opted: bool = True) -> dict[str, Any]:
    # No PodGroup named: the simulated podgroup controller makes one per pod (and removes it
    # with the pod), as Volcano's does.
    ann = {"scheduling.volcano.sh/queue-name": "q", "sim.tidesched.io/duration": "1m"}
    if opted:
        ann[QUEUE_ALLOCATION_GATE] = "true"
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "annotations": ann},
        "spec": {"schedulerName": "volcano", "schedulingGates": [{"name": g} for g in gates],
                 "containers": [{"name": c, "resources": {"requests": {"cpu": "1"}}} for c in ["c"]]},
    }


def _run(tmp_path: Path, features: str | None, events: list | None = None) -> dict[str, Any]:
    sched: dict[str, Any] = {"config": CAPACITY_CONFIG}
    if features:
        sched["featureGates"] = features
    doc = {
        "name": "gates", "schedulePeriod": "1s", "duration": "10m", "scheduler": sched,
        "objects": [
            {"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}},
            {"kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": 1, "capability": {"cpu": "1"}}},
            _pod("a", QUEUE_ALLOCATION_GATE), _pod("b", QUEUE_ALLOCATION_GATE),
            _pod("x", "example.com/g", opted=False),
        ],
        "events": events or [],
    }
    p = tmp_path / "scenario.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return simulate(load_scenario(p))


def _ungated(r: dict[str, Any]) -> dict[str, float]:
    return {e["name"]: e["t"] for e in r["events"] if e["reason"] == "Ungated" and e["kind"] == "Pod"}


def _started(r: dict[str, Any]) -> dict[str, float | None]:
    return {j["name"].split("/")[-1]: j["started"] for j in r["jobs"]}


def test_queue_admission_lifts_one_gate_per_room_and_binds_after(tmp_path: Path) -> None:
    r = _run(tmp_path, "SchedulingGatesQueueAdmission=true", [{"at": "5m", "ungate": {"pod": "ns/x"}}])
    ungated, bound = _ungated(r), _started(r)
    assert r["invariants"]["violations"] == []
    # The queue has room for one 1-cpu pod: a is admitted first, b only once a has finished.
    assert ungated["a"] < bound["a"] < ungated["b"] < bound["b"]
    assert ungated["b"] >= bound["a"] + 60
    # x's gate is someone else's: bound only after the scenario lifts it, at 5 min (and once
    # the queue has room).
    assert ungated["x"] == 300.0 and bound["x"] >= 300.0


def test_without_the_feature_gated_pods_stay_pending(tmp_path: Path) -> None:
    r = _run(tmp_path, None)
    assert _ungated(r) == {} and set(_started(r).values()) == {None}
    assert r["summary"]["pods_bound"] == 0


def test_the_world_refuses_to_bind_a_gated_pod_as_the_api_server_does() -> None:
    from tidesched.sim.clock import Clock
    from tidesched.sim.world import World

    world = World(Clock())
    world.put("Node", {"kind": "Node", "metadata": {"name": "n1"},
                       "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}})
    key = world.create_pod(_pod("a", "example.com/g", QUEUE_ALLOCATION_GATE), 0.0)
    assert not world.bind_pod(key, "n1", 1.0)
    assert not world.remove_gates(key, ["example.com/none"])
    assert world.remove_gates(key, ["example.com/g"])
    assert [g["name"] for g in world.get("Pod", key)["spec"]["schedulingGates"]] == [QUEUE_ALLOCATION_GATE]
    assert world.remove_gates(key) and world.bind_pod(key, "n1", 2.0)


def test_bad_ungate_events_and_feature_gates_are_refused_with_their_place(tmp_path: Path) -> None:
    import pytest

    from tidesched.sim.events import make_event
    from tidesched.sim.vocabulary import ScenarioError

    assert make_event("1m", "ungate", {"pod": "ns/x"}, "s").args == {"pod": "ns/x", "gates": None}
    for raw, field in (({"pod": "ns/x", "gates": "g"}, "s.ungate.gates"), ({"gates": ["g"]}, "s.ungate.pod"),
                       ({"pod": "ns/x", "gate": ["g"]}, "s.ungate")):
        with pytest.raises(ScenarioError, match=field.replace(".", r"\.")):
            make_event("1m", "ungate", raw, "s")
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "x", "scheduler": {"featureGates": "SchedulingGatesQueueAdmission"}}))
    with pytest.raises(ScenarioError, match="scheduler.featureGates: missing bool value"):
        load_scenario(p)
