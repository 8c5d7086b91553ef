"""The simulation loop end to end (RUN-1, SIM-3, SIM-4): result schema, determinism, fast-forward,
the command, and invariants that fail loudly when the scheduler's decisions are deliberately
broken (by substituting the session's decisions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import BASIC_CONFIG
from typer.testing import CliRunner

from tidesched.cli import app
from tidesched.framework.decisions import Decisions
from tidesched.sim import bundled_example, result_json, run, runner as sim_runner, simulate
from tidesched.sim.events import Scenario
from tidesched.sim.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]

CARD_CONFIG = """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
    enableReclaimable: false
    enableJobStarving: false
  - name: conformance
    enableReclaimable: false
- plugins:
  - name: predicates
  - name: capacity-card
    arguments:
      cardUnlimitedCpuMemory: true
      podOwnerReferenceToServiceType: {ReplicaSet: inference, Job: training}
  - name: nodeorder
"""


def h200_node(name: str, gpus: int = 8) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H200"}},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
        },
    }


def queue(name: str, quota: dict[str, int] | None = None, **spec: Any) -> dict[str, Any]:
    q: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "capability": {"cpu": "1000", "memory": "4Ti"}, **spec},
    }
    if quota is not None:
        q["metadata"]["annotations"] = {"volcano.sh/card.quota": json.dumps(quota)}
    return q


def train_job(
    name: str,
    workers: int,
    gpus: int,
    duration: str = "2h",
    queue_name: str = "train",
    policy: str = "RestartJob",
) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "annotations": {"sim.tidesched.io/duration": duration, "volcano.sh/service.type": "training"},
        },
        "spec": {
            "minAvailable": workers,
            "queue": queue_name,
            "policies": [{"event": "PodEvicted", "action": policy}],
            "tasks": [
                {
                    "name": "worker",
                    "replicas": workers,
                    "template": {
                        "metadata": {"annotations": {"volcano.sh/card.name": "NVIDIA-H200"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "resources": {
                                        "requests": {
                                            "cpu": "4",
                                            "memory": "32Gi",
                                            "nvidia.com/gpu": str(gpus),
                                        }
                                    },
                                }
                            ]
                        },
                    },
                }
            ],
        },
    }


def web(replicas: int, queue_name: str = "online", gpus: int = 0) -> dict[str, Any]:
    req: dict[str, str] = {"cpu": "2", "memory": "4Gi"}
    if gpus:
        req["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "online",
            "annotations": {"volcano.sh/service.type": "inference"},
        },
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {
                    "annotations": {
                        "scheduling.volcano.sh/queue-name": queue_name,
                        "volcano.sh/card.name": "NVIDIA-H200",
                    }
                },
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [{"name": "c", "resources": {"requests": req}}],
                },
            },
        },
    }


def scenario_doc(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "small",
        "schedulePeriod": "1s",
        "duration": "6h",
        "scheduler": {"config": BASIC_CONFIG},
        "objects": [
            h200_node("n1"),
            h200_node("n2"),
            queue("train"),
            queue("online"),
            train_job("a", 2, 4, "2h"),
            web(2),
        ],
        "events": [
            {"at": "1h", "scale": {"deployment": "online/web", "replicas": 4}},
            {"at": "3h", "submit": train_job("b", 1, 8, "1h")},
            {"at": "4h", "scale": {"deployment": "online/web", "replicas": 1}},
        ],
    }
    doc.update(over)
    return doc


def load(tmp_path: Path, doc: dict[str, Any]) -> Scenario:
    p = tmp_path / "scenario.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_scenario(p)


# --------------------------------------------------------------------------------------------
# Result and loop


def test_result_schema(tmp_path: Path) -> None:
    r = simulate(load(tmp_path, scenario_doc()))
    assert set(r) == {
        "scenario",
        "seed",
        "schedule_period",
        "duration",
        "card_models",
        "queues",
        "steps",
        "jobs",
        "events",
        "gang_timeouts",
        "invariants",
        "summary",
    }
    assert (r["scenario"], r["seed"], r["schedule_period"], r["duration"]) == ("small", 0, 1.0, 21600.0)
    assert r["card_models"] == ["NVIDIA-H200"]
    assert r["queues"] == ["online", "train"]  # queues of the world (and any with pods)
    for s in r["steps"]:
        assert set(s) == {
            "t",
            "cards",
            "queues",
            "pending_pods",
            "running_pods",
            "evictions",
            "reclaims",
            "preemptions",
            "gpus",
        }
        assert set(s["cards"]["NVIDIA-H200"]) == {"capacity", "allocated"}
        assert {"capacity", "allocated", "demand", "unallocated"} <= set(s["gpus"]) <= {
            "capacity", "allocated", "demand", "unallocated", "fragmented"}
        assert s["gpus"]["capacity"] == s["cards"]["NVIDIA-H200"]["capacity"]
        assert s["gpus"]["allocated"] == s["cards"]["NVIDIA-H200"]["allocated"]
        for q in s["queues"].values():
            assert set(q) == {"allocated", "quota", "pending_pods", "running_pods"}
    assert [s["t"] for s in r["steps"]] == sorted(s["t"] for s in r["steps"])
    assert r["steps"][-1]["t"] == 21600.0
    jobs = {j["name"]: j for j in r["jobs"]}
    assert set(jobs) == {"ml/a", "ml/b", "online/web"}
    a = jobs["ml/a"]
    assert set(a) == {
        "name",
        "kind",
        "queue",
        "service_type",
        "submitted",
        "started",
        "finished",
        "wait",
        "evictions",
        "restarts",
        "phase",
    }
    assert (a["kind"], a["queue"], a["phase"], a["submitted"], a["started"], a["wait"]) == (
        "Job",
        "train",
        "Completed",
        0.0,
        1.0,
        1.0,
    )
    assert a["finished"] == 7201.0
    assert jobs["ml/b"]["submitted"] == 10800.0 and jobs["ml/b"]["phase"] == "Completed"
    assert jobs["online/web"]["kind"] == "Deployment" and jobs["online/web"]["phase"] == "Available"
    assert (
        r["invariants"]["violations"] == [] and r["invariants"]["checked_steps"] == r["summary"]["sessions"]
    )
    s = r["summary"]
    assert s["pods_bound"] == 2 + 2 + 2 + 1 and s["jobs_completed"] == 2 and s["pods_evicted"] == 0
    assert s["peak_card_utilisation"] == {"NVIDIA-H200": 0.5}
    # the card metric follows the pods: 8 of 16 while job a runs, 0 after, 8 while b runs
    at = {st["t"]: st["cards"]["NVIDIA-H200"]["allocated"] for st in r["steps"]}
    assert at[1.0] == 8 and at[7201.0] == 0 and at[10801.0] == 8
    ev = [e for e in r["events"] if e["reason"] == "ScalingReplicaSet"]
    assert [e["t"] for e in ev] == [3600.0, 14400.0]
    assert "session_seconds" not in json.dumps(r)


def test_two_runs_are_byte_identical(tmp_path: Path) -> None:
    sc = load(tmp_path, scenario_doc())
    first = result_json(simulate(sc))
    assert first == result_json(simulate(sc))  # the same Scenario object, reused
    assert first == result_json(simulate(load(tmp_path, scenario_doc())))
    assert json.loads(first) == simulate(sc)
    assert first != result_json(simulate(sc, seed=7))  # the seed names pods and UIDs


def test_fast_forward_skips_idle_time(tmp_path: Path) -> None:
    doc = scenario_doc(
        duration="30d", events=[], objects=[h200_node("n1"), queue("train"), train_job("long", 1, 8, "10d")]
    )
    sim = run(load(tmp_path, doc))
    assert sim.sessions < 10
    assert len(sim.result["steps"]) < 10
    assert sim.result["jobs"][0]["finished"] == 864001.0


def changes(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps at which the recorded picture changed (repeats of the last one dropped)."""
    out: list[dict[str, Any]] = []
    for step in steps:
        if not out or {k: v for k, v in step.items() if k != "t"} != {k: v for k, v in out[-1].items() if k != "t"}:
            out.append(step)
    return out


def test_skipping_idle_sessions_decides_exactly_what_a_session_every_period_decides() -> None:
    """Sessions are deterministic, so one skipped because nothing changed would have decided
    nothing: a run that holds a session at every period makes the same binds, evictions and
    reclaims at the same times and records the same steps, in many more sessions."""
    def tidal_day() -> Scenario:  # the bundled example: inference reclaims cards from training
        sc = load_scenario(bundled_example())
        sc.schedule_period = 300.0  # a session every 5 minutes keeps the reference run short
        return sc

    skipping = run(tidal_day())
    every = run(tidal_day(), skip_idle=False)
    assert every.sessions == 24 * 12 + 1 and skipping.sessions < every.sessions // 3
    a, b = skipping.result, every.result
    assert a["jobs"] == b["jobs"]
    assert changes(a["steps"]) == changes(b["steps"])  # heartbeat steps fall on other periods
    same = ("pods_bound", "pods_evicted", "reclaims", "preemptions", "jobs_completed", "jobs_never_started", "mean_wait")
    assert {k: a["summary"][k] for k in same} == {k: b["summary"][k] for k in same}
    assert a["summary"]["reclaims"] > 0  # the run has decisions to get wrong


def test_open_ended_scenario_stops_when_nothing_is_left(tmp_path: Path) -> None:
    doc = scenario_doc(duration=None)
    doc.pop("duration")
    r = simulate(load(tmp_path, doc))
    assert r["summary"]["stopped"] == "completed"
    assert r["duration"] < 6 * 3600


def test_record_every_adds_heartbeat_steps(tmp_path: Path) -> None:
    doc = scenario_doc(
        recordEvery=5,
        duration="2m",
        events=[],
        objects=[h200_node("n1"), queue("train"), train_job("a", 1, 16, "1h")],
    )  # never fits
    sim = run(load(tmp_path, doc))
    # a pending gang that never fits: sessions settle and the clock jumps to the end
    assert sim.sessions < 5 and sim.result["steps"][-1]["t"] == 120.0


def test_seed_manifests_run_as_a_scenario() -> None:
    r = simulate(load_scenario(REPO / "examples" / "basic"))
    assert r["summary"]["pods_bound"] > 0 and r["invariants"]["violations"] == []


# --------------------------------------------------------------------------------------------
# Invariants fail loudly


def substitute(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    """Run the real session, then let ``change(decisions, snapshot, now)`` tamper with it.
    (A session runs only when there is something to schedule: the tests create work, e.g. by
    scaling a Deployment up, at the time they tamper.)"""
    real = sim_runner._session

    def fake(snapshot: Any, config: Any, **kw: Any) -> Decisions:
        d = real(snapshot, config, **kw)
        change(d, snapshot, kw["now"] - sim_runner.EPOCH)
        return d

    monkeypatch.setattr(sim_runner, "_session", fake)


def test_node_overcommit_by_a_decision_is_a_violation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def overbind(d: Decisions, snapshot: Any, t: float) -> None:
        # job b's 8-GPU pod goes onto n1, whose 8 GPUs job a holds until 5h
        for p in snapshot.pods:
            if p.meta.name.startswith("b-") and not p.node_name:
                d.bound[p.key] = "n1"

    doc = scenario_doc(
        objects=[h200_node("n1"), queue("train"), queue("online"), train_job("a", 2, 4, "5h")],
        events=[{"at": "3h", "submit": train_job("b", 1, 8, "1h")}],
    )
    sc = load(tmp_path, doc)
    substitute(monkeypatch, overbind)
    sim = run(sc)
    v = sim.result["invariants"]["violations"]
    assert sim.failed and len(v) >= 1
    assert (
        v[0]["rule"] == "REL-2 node" and v[0]["t"] == 10801.0
    )  # its pods exist once the PodGroup is Inqueue
    assert "n1 over-committed in nvidia.com/gpu: pods request 16, allocatable 8" in v[0]["message"]
    assert "ml/b-worker-0" in v[0]["message"]
    assert any(e["reason"] == "InvariantViolated" for e in sim.result["events"])


def test_partial_gang_eviction_is_a_violation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def evict_one(d: Decisions, snapshot: Any, t: float) -> None:
        if t == 600:
            d.evicted.append("ml/a-worker-1")
            d.eviction_reasons["ml/a-worker-1"] = "preempt: evicted to make room for x/y on node n2"

    sc = load(
        tmp_path, scenario_doc(events=[{"at": "10m", "scale": {"deployment": "online/web", "replicas": 3}}])
    )
    substitute(monkeypatch, evict_one)
    r = run(sc).result
    (v,) = r["invariants"]["violations"]
    assert v["rule"] == "TIDE-6 gang" and v["t"] == 600.0
    assert (
        "training job ml/a left with 1 of minMember 2 pods running after evicting ml/a-worker-1"
        in v["message"]
    )
    assert r["summary"]["preemptions"] == 1
    assert r["jobs"][0]["evictions"] == 1


def test_a_crashing_session_is_reported_and_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(d: Decisions, snapshot: Any, t: float) -> None:
        if t >= 3600:
            raise RuntimeError("bug in an action")

    substitute(monkeypatch, boom)
    r = simulate(load(tmp_path, scenario_doc()))
    (v,) = r["invariants"]["violations"]
    assert v["rule"] == "REL-1 session" and "bug in an action" in v["message"] and v["t"] == 3600.0
    assert r["summary"]["stopped"] == "session crashed"


def card_scenario(tmp_path: Path, events: list[dict[str, Any]]) -> Scenario:
    objs = [
        h200_node("n1"),
        h200_node("n2"),
        queue("online", {"NVIDIA-H200": 8}, priority=80000, reclaimable=False),
        queue("train", {"NVIDIA-H200": 16}, priority=20000, reclaimable=True),
        train_job("a", 2, 4, "5h"),
        train_job("c", 1, 4, "5h"),
        web(1, gpus=2),
    ]
    return load(tmp_path, scenario_doc(scheduler={"config": CARD_CONFIG}, objects=objs, events=events))


def test_card_quota_overcommit_by_a_decision_is_a_violation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def overbind(d: Decisions, snapshot: Any, t: float) -> None:
        if t == 3600:
            for p in snapshot.pods:
                if p.meta.namespace == "online" and not p.node_name:
                    node = "n1" if p.meta.name not in d.bound else d.bound[p.key]
                    d.bound[p.key] = node

    # the quota allows 8 online cards (4 pods); scale to 6 pods = 12 cards and force the binds
    sc = card_scenario(
        tmp_path,
        [
            {"at": "1h", "scale": {"deployment": "online/web", "replicas": 6}},
            {"at": "1h", "delete": {"kind": "Job", "name": "ml/a"}},
            {"at": "1h", "delete": {"kind": "Job", "name": "ml/c"}},
        ],
    )
    substitute(monkeypatch, overbind)
    r = simulate(sc)
    rules = {v["rule"] for v in r["invariants"]["violations"]}
    assert "REL-2 quota" in rules
    msg = next(v["message"] for v in r["invariants"]["violations"] if v["rule"] == "REL-2 quota")
    assert "queue online holds" in msg and "NVIDIA-H200 cards, quota 8" in msg


def test_reclaim_policy_violations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def bad_reclaims(d: Decisions, snapshot: Any, t: float) -> None:
        if t == 600:
            # training reclaiming from training, and a reclaim that evicts inference
            d.evicted += ["ml/c-worker-0", "ml/a-worker-0", "ml/a-worker-1"]
            d.eviction_reasons["ml/c-worker-0"] = "reclaim: evicted to make room for ml/a-worker-0 on node n1"
            d.eviction_reasons["ml/a-worker-0"] = "reclaim: evicted to make room for ml/c-worker-0 on node n1"
            d.eviction_reasons["ml/a-worker-1"] = "reclaim: evicted to make room for ml/c-worker-0 on node n2"
            web_pod = next(p.key for p in snapshot.pods if p.meta.namespace == "online")
            d.evicted.append(web_pod)
            d.eviction_reasons[web_pod] = "reclaim: evicted to make room for ml/c-worker-0 on node n1"

    sc = card_scenario(tmp_path, [{"at": "10m", "scale": {"deployment": "online/web", "replicas": 2}}])
    substitute(monkeypatch, bad_reclaims)
    r = simulate(sc)
    msgs = [v["message"] for v in r["invariants"]["violations"] if v["rule"] == "TIDE-4 reclaim"]
    assert any("reclaimed for training pod" in m for m in msgs)
    assert any("reclaim evicted inference pod online/" in m for m in msgs)
    assert r["summary"]["reclaims"] == 4


# --------------------------------------------------------------------------------------------
# The command


def test_cli_writes_result_and_report(tmp_path: Path) -> None:
    p = tmp_path / "scenario.yaml"
    p.write_text(yaml.safe_dump(scenario_doc(), sort_keys=False))
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["simulate", str(p), "--out", str(out), "--seed", "3"])
    assert res.exit_code == 0, res.output
    text = (out / "result.json").read_text()
    assert json.loads(text)["seed"] == 3
    assert text == result_json(simulate(load_scenario(p), seed=3))
    assert "invariants:" in res.output and "all held" in res.output
    try:
        import tidesched.sim.report  # noqa: F401
    except ImportError:
        return
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_cli_exits_1_on_a_violation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def evict_one(d: Decisions, snapshot: Any, t: float) -> None:
        if t == 600:
            d.evicted.append("ml/a-worker-1")

    p = tmp_path / "scenario.yaml"
    p.write_text(
        yaml.safe_dump(
            scenario_doc(events=[{"at": "10m", "scale": {"deployment": "online/web", "replicas": 3}}]),
            sort_keys=False,
        )
    )
    substitute(monkeypatch, evict_one)
    res = CliRunner().invoke(app, ["simulate", str(p), "--out", str(tmp_path / "o")])
    assert res.exit_code == 1
    assert "TIDE-6 gang" in res.output and "VIOLATED" in res.output


def test_cli_bad_scenario_exits_2(tmp_path: Path) -> None:
    p = tmp_path / "scenario.yaml"
    p.write_text(yaml.safe_dump({"events": [{"at": "1h", "explode": {}}]}))
    res = CliRunner().invoke(app, ["simulate", str(p), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "events[0]: unknown action 'explode'" in res.output


def test_no_session_without_anything_to_schedule(tmp_path: Path) -> None:
    # everything placed at t=0; later events only end pods and change nodes: no session needed
    doc = scenario_doc(
        objects=[h200_node("n1"), queue("online"), web(2)],
        duration="1d",
        events=[
            {"at": "2h", "cordon": "n1"},
            {"at": "3h", "uncordon": "n1"},
            {"at": "5h", "scale": {"deployment": "online/web", "replicas": 1}},
        ],
    )
    sim = run(load(tmp_path, doc))
    assert sim.sessions == 2  # t=0 binds, t=1 sees the PodGroup Running; nothing after
    steps = sim.result["steps"]
    assert steps[-1]["running_pods"] == 1 and any(
        s["t"] == 18000.0 for s in steps
    )  # the scale-in is recorded


def test_identical_across_processes_and_hash_seeds(tmp_path: Path) -> None:
    import subprocess
    import sys

    p = tmp_path / "scenario.yaml"
    p.write_text(yaml.safe_dump(scenario_doc(), sort_keys=False))
    code = (
        "import sys, hashlib; from tidesched.sim import simulate, result_json; "
        "sys.stdout.write(hashlib.sha256(result_json(simulate(sys.argv[1])).encode()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code, str(p)],
            env={**__import__("os").environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(digests) == 1


def test_max_idle_gap_keeps_sessions_coming(tmp_path: Path) -> None:
    doc = scenario_doc(
        duration="2h",
        maxIdleGap="30m",
        events=[],
        objects=[h200_node("n1"), queue("train"), train_job("big", 1, 16, "1h")],
    )  # never fits
    sim = run(load(tmp_path, doc))
    assert 4 <= sim.sessions <= 7  # t=0, 1 s, then every 30 min


# --------------------------------------------------------------------------------------------
# PodDisruptionBudgets pass through to the scheduler


PDB_CONFIG = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: predicates
  - name: nodeorder
configurations:
- name: preempt
  arguments: {enableTopologyAwarePreemption: true, minCandidateNodesPercentage: 100}
"""


def _shop_pod(name: str, app: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "priorityClassName": "urgent" if app == "urgent" else "batch",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop", "labels": {"app": app}},
            "spec": spec}


@pytest.mark.parametrize(("with_pdb", "evicted"), [(True, "web-0"), (False, "db-0")])
def test_pdb_in_a_scenario_guides_preemption(tmp_path: Path, with_pdb: bool, evicted: str) -> None:
    small = {"cpu": "2", "memory": "8Gi", "pods": "10"}
    objects: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "urgent"}, "value": 1000},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch"}, "value": 1},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": small}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}, "status": {"allocatable": small}},
        _shop_pod("db-0", "db", "n1"),
        _shop_pod("web-0", "web", "n2"),
    ]
    if with_pdb:
        objects.append({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "shop"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}, "status": {"disruptionsAllowed": 0},
        })
    doc = scenario_doc(scheduler={"config": PDB_CONFIG}, duration="1m", objects=objects,
                       events=[{"at": "10s", "submit": _shop_pod("urgent", "urgent")}])
    sc = load(tmp_path, doc)
    assert sc.warnings == []  # the budget is kept, not dropped as an unsimulated kind
    r = simulate(sc)
    evictions = [e["name"] for e in r["events"] if e["reason"] == "Evict"]
    # Both plans are equal but for the budget; without it the node name picks n1.
    assert evictions == [evicted] and r["invariants"]["violations"] == []


# --------------------------------------------------------------------------------------------
# Invariants added with the chaos simulations (issue 13): each fails on a tampered decision


def test_a_bind_to_a_not_ready_node_is_a_violation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def bind_to_n2(d: Decisions, snapshot: Any, t: float) -> None:
        if t == 3600:
            for p in snapshot.pods:
                if p.meta.namespace == "online" and not p.node_name:
                    d.bound[p.key] = "n2"

    events = [
        {"at": "1h", "setNode": {"name": "n2", "ready": False}},
        {"at": "1h", "scale": {"deployment": "online/web", "replicas": 4}},
    ]
    sc = load(tmp_path, scenario_doc(events=events))
    substitute(monkeypatch, bind_to_n2)
    v = [x for x in run(sc).result["invariants"]["violations"] if x["rule"] == "REL-2 bind"]
    assert v and v[0]["t"] == 3600.0 and "bound to node n2, which is not Ready" in v[0]["message"]


def test_a_gang_started_partly_is_a_violation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def drop_one(d: Decisions, snapshot: Any, t: float) -> None:
        mine = sorted(k for k in d.bound if k.startswith("ml/b-"))
        if len(mine) == 2:
            del d.bound[mine[1]]

    sc = load(tmp_path, scenario_doc(events=[{"at": "3h", "submit": train_job("b", 2, 4, "1h")}]))
    substitute(monkeypatch, drop_one)
    v = [x for x in run(sc).result["invariants"]["violations"] if x["rule"] == "TIDE-6 gang bind"]
    assert v and "gang ml/b started partly: 1 of minMember 2 pods bound or done" in v[0]["message"]


def test_pipelining_beyond_the_card_quota_is_a_violation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def pipeline_rest(d: Decisions, snapshot: Any, t: float) -> None:
        if t == 3600:
            for p in snapshot.pods:
                if p.meta.namespace == "online" and not p.node_name and p.key not in d.bound:
                    d.pipelined[p.key] = "n2"

    sc = card_scenario(
        tmp_path,
        [
            {"at": "1h", "scale": {"deployment": "online/web", "replicas": 6}},
            {"at": "1h", "delete": {"kind": "Job", "name": "ml/a"}},
            {"at": "1h", "delete": {"kind": "Job", "name": "ml/c"}},
        ],
    )
    substitute(monkeypatch, pipeline_rest)
    v = [x for x in simulate(sc)["invariants"]["violations"] if x["rule"] == "REL-2 quota"]
    assert v and "queue online would hold 12 NVIDIA-H200 cards with its pipelined pods, quota 8" in v[0]["message"]


def test_a_restarted_scheduler_deciding_otherwise_is_a_violation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """checkRestart: the session is decided again on a state rebuilt from the objects; here the
    running scheduler's decision is tampered with (a bind dropped), the restarted one's is not."""
    real = sim_runner._session
    calls: dict[float, int] = {}

    def fake(snapshot: Any, config: Any, **kw: Any) -> Decisions:
        d = real(snapshot, config, **kw)
        t = kw["now"] - sim_runner.EPOCH
        calls[t] = calls.get(t, 0) + 1
        if t == 3600 and calls[t] == 1 and d.bound:
            del d.bound[sorted(d.bound)[0]]
        return d

    monkeypatch.setattr(sim_runner, "_session", fake)
    sc = load(tmp_path, scenario_doc(checkRestart=True))
    v = run(sc).result["invariants"]["violations"]
    assert [x["rule"] for x in v] == ["REL-3 restart"] and v[0]["t"] == 3600.0
    assert "a scheduler restarted from the objects decides other bound" in v[0]["message"]
    # Untampered, the restarted scheduler always agrees.
    monkeypatch.setattr(sim_runner, "_session", real)
    assert run(load(tmp_path, scenario_doc(checkRestart=True))).result["invariants"]["violations"] == []


def test_a_pod_on_a_missing_node_is_a_violation() -> None:
    from tidesched.scheduler import config_from_file
    from tidesched.sim.clock import Clock
    from tidesched.sim.invariants import InvariantChecker
    from tidesched.sim.metrics import Accounting
    from tidesched.sim.world import World

    world = World(Clock())
    checker = InvariantChecker(world, Accounting(world), config_from_file(None))
    world.put("Node", h200_node("n1"))
    world.put("Node", h200_node("ghost"))
    world.put("Pod", {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
                      "spec": {"nodeName": "ghost", "containers": []}, "status": {"phase": "Running"}})
    # A pod the input itself puts on a node that never existed is the input's doing.
    world.put("Pod", {"kind": "Pod", "metadata": {"name": "q", "namespace": "ns"},
                      "spec": {"nodeName": "never", "containers": []}, "status": {"phase": "Running"}})
    assert checker.check_world(1.0) == []
    world.remove("Node", "ghost")  # the node goes, its pod stays: the simulator lost track of it
    (v,) = checker.check_world(5.0)
    assert v.rule == "SIM pod-node" and "ns/p are bound to node ghost, which does not exist" in v.message


def test_step_entries_reused_only_when_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Accounting reuses a card model's or queue's step entry while its inputs stand still; a
    run whose every entry is made afresh records the very same steps."""
    from tidesched.sim import metrics

    class NeverHit(dict):  # type: ignore[type-arg]
        def get(self, key: object, default: object = None) -> object:
            return default

    fresh_init = metrics.Accounting.__init__

    def init(self: metrics.Accounting, *a: object, **k: object) -> None:
        fresh_init(self, *a, **k)
        self._card_entries = NeverHit()
        self._queue_entries = NeverHit()

    reused = simulate(bundled_example())
    monkeypatch.setattr(metrics.Accounting, "__init__", init)
    fresh = simulate(bundled_example())
    assert result_json(reused) == result_json(fresh)
    # Entries are shared between steps when nothing changed, and not otherwise.
    steps = reused["steps"]
    shared = sum(1 for a, b in zip(steps, steps[1:]) for q in a["queues"] if a["queues"][q] is b["queues"].get(q))
    changed = sum(1 for a, b in zip(steps, steps[1:]) for q in a["queues"] if a["queues"][q] != b["queues"].get(q))
    assert shared > 0 and changed > 0


def test_pod_node_rule_follows_every_change_between_checks() -> None:
    """The pod-node rule works its node names out again only when Nodes come or go or pods go
    to a new node name; after any sequence of such changes it reports what a full comparison
    of pods and Nodes reports."""
    import random

    from tidesched.scheduler import config_from_file
    from tidesched.sim.clock import Clock
    from tidesched.sim.invariants import InvariantChecker
    from tidesched.sim.metrics import Accounting
    from tidesched.sim.world import World

    rng = random.Random(7)
    world = World(Clock())
    checker = InvariantChecker(world, Accounting(world), config_from_file(None))
    seen: set[str] = set()
    names = [f"n{i}" for i in range(6)]
    for step in range(300):
        what = rng.random()
        name = rng.choice(names)
        if what < 0.3:
            world.put("Node", h200_node(name))
        elif what < 0.45:
            world.remove("Node", name)
        elif what < 0.8:
            world.put("Pod", {"kind": "Pod", "metadata": {"name": f"p{rng.randrange(12)}", "namespace": "ns"},
                              "spec": {"nodeName": name, "containers": []}, "status": {"phase": "Running"}})
        else:
            world.remove("Pod", f"ns/p{rng.randrange(12)}")
        if rng.random() < 0.5:
            continue
        seen.update(world.objects["Node"])
        want = sorted(n for n, pods in world.pods_by_node.items()
                      if pods and n not in world.objects["Node"] and n in seen)
        got = [v.message.split("bound to node ")[1].split(",")[0] for v in checker.check_world(float(step))]
        assert got == want, step
