"""vGPU devices in the simulator: binds carry their device allocations, a restart (REL-3) accounts
the same devices, and the REL-2 device invariant fails loudly on a tampered decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tidesched.framework.decisions import Decisions
from tidesched.model.vgpu import ASSIGNED_IDS, decode_assignment
from tidesched.sim import run
from tidesched.sim import runner as sim_runner
from tidesched.sim.runner import Engine
from tidesched.sim.scenario import load_scenario
from vgpu_builders import vgpu_config, vgpu_limits, vgpu_node


def _node(name: str, gpus: int) -> dict[str, Any]:
    n = vgpu_node(name, gpus=gpus, memory=16384, split=10)
    return {"apiVersion": "v1", **n}


def deployment(name: str, replicas: int, **req: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "resources": {
                                  "requests": {"cpu": "1"}, "limits": vgpu_limits(**req)}}]}}},
    }


def doc(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": "vgpu",
        "schedulePeriod": "1s",
        "duration": "2h",
        "checkRestart": True,
        "scheduler": {"config": vgpu_config("binpack", 10)},
        "objects": [
            _node("n1", 2), _node("n2", 2),
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
             "spec": {"weight": 1}},
            deployment("small", 5, number=1, memory=4000, cores=30),
            deployment("whole", 1, number=2, cores=100),
        ],
        "events": [{"at": "1h", "scale": {"deployment": "ml/small", "replicas": 7}}],
    }
    d.update(over)
    return d


def load(tmp_path: Path, d: dict[str, Any]) -> Any:
    p = tmp_path / "scenario.yaml"
    p.write_text(yaml.safe_dump(d, sort_keys=False))
    return load_scenario(p)


def test_pods_are_bound_with_their_devices(tmp_path: Path) -> None:
    engine = Engine(load(tmp_path, doc()), 0)
    sim = engine.run(None)
    assert not sim.failed, sim.result["invariants"]["violations"]
    world = engine.world
    held: dict[tuple[str, str], list[int]] = {}
    placed = 0
    for key in sorted(world.objects["Pod"]):
        pod = world.get("Pod", key)
        node = pod["spec"].get("nodeName")
        if not node:
            continue
        placed += 1
        ann = pod["metadata"]["annotations"]
        assert ann["volcano.sh/vgpu-node"] == node and ann["volcano.sh/bind-phase"] == "allocating"
        for c in decode_assignment(ann[ASSIGNED_IDS]):
            for u in c:
                h = held.setdefault((node, u.uuid), [0, 0])
                h[0] += u.memory
                h[1] += u.cores
    # One pod of two whole devices and small pods (30 %, 4000 MiB) on 4 devices: three small pods
    # fill a device (90 %, 12000 MiB), so six of the seven fit; the seventh waits, saying why.
    assert placed == 7
    assert all(mem <= 16384 and cores <= 100 for mem, cores in held.values())
    whole = [k for k, (mem, cores) in held.items() if cores == 100]
    assert len(whole) == 2 and len({n for n, _u in whole}) == 1
    assert sorted(cores for (_n, _u), (_m, cores) in held.items() if cores != 100) == [90, 90]
    reasons = {e["message"] for e in sim.result["events"] if e["reason"] == "FailedScheduling"}
    # The small pods' node is out of vgpu-cores as a node resource; the other one's devices are whole-pod held.
    assert reasons == {"0/2 nodes are unavailable: 1 Insufficient volcano.sh/vgpu-cores, "
                       "1 no device with 30 % compute free; best has 0 %."}


def substitute(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    real = sim_runner._session

    def fake(snapshot: Any, config: Any, **kw: Any) -> Decisions:
        d = real(snapshot, config, **kw)
        change(d)
        return d

    monkeypatch.setattr(sim_runner, "_session", fake)


def test_double_booked_device_is_a_violation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def same_device(d: Decisions) -> None:
        # Every small pod bound this step is told it holds device 0 of its node.
        for key, ann in d.bind_annotations.items():
            if "small" in key:
                node = d.bound[key]
                ids = f"GPU-{node}-0,NVIDIA,4000,30:"
                ann["volcano.sh/vgpu-ids-new"] = ann["volcano.sh/devices-to-allocate"] = ids

    substitute(monkeypatch, same_device)
    sim = run(load(tmp_path, doc(checkRestart=False)))
    rules = {v["rule"] for v in sim.result["invariants"]["violations"]}
    assert sim.failed and rules == {"REL-2 device"}
    assert any("over-committed in compute: 150 %" in v["message"] for v in sim.result["invariants"]["violations"])


def test_bind_without_devices_is_a_violation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def drop(d: Decisions) -> None:
        d.bind_annotations.clear()

    substitute(monkeypatch, drop)
    sim = run(load(tmp_path, doc(checkRestart=False, duration="10m", events=[])))
    v = sim.result["invariants"]["violations"]
    assert sim.failed and all(x["rule"] == "REL-2 device" for x in v)
    assert "without a device allocation (volcano.sh/vgpu-ids-new)" in v[0]["message"]


def test_restart_check_compares_the_devices_of_each_bind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # REL-3: a scheduler rebuilt from the objects must write each bind the annotations the running
    # one wrote. The running scheduler's first session (the first of the pair of calls a step
    # makes) has its binds' vgpu-time changed; the restarted one's is left alone, so the two
    # differ in bind_annotations only.
    calls = [0]
    real = sim_runner._session

    def fake(snapshot: Any, config: Any, **kw: Any) -> Decisions:
        d = real(snapshot, config, **kw)
        calls[0] += 1
        if calls[0] == 1:
            for ann in d.bind_annotations.values():
                ann["volcano.sh/vgpu-time"] = "0"
        return d

    monkeypatch.setattr(sim_runner, "_session", fake)
    sim = run(load(tmp_path, doc(duration="1m", events=[])))
    v = sim.result["invariants"]["violations"]
    assert sim.failed and [x["rule"] for x in v] == ["REL-3 restart"]
    assert "decides other bind_annotations" in v[0]["message"]


def test_restart_check_holds_with_devices(tmp_path: Path) -> None:
    sim = run(load(tmp_path, doc(duration="30m", events=[])))
    assert not sim.failed, sim.result["invariants"]["violations"]
