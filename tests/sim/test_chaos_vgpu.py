"""Chaos days with vGPU nodes (issue 26): GPU shares placed, reclaimed and re-registered under
faults, with the REL-2 device rule checked at every step."""

from __future__ import annotations

from collections import Counter

from tidesched.model.vgpu import ASSIGNED_IDS, decode_assignment
from tidesched.sim.chaos import generate, to_scenario
from tidesched.sim.device_invariants import deviceshare_vgpu
from tidesched.sim.runner import Engine


def test_a_vgpu_chaos_day_keeps_every_invariant() -> None:
    gen = generate(5)
    assert any(o["metadata"]["name"].startswith("l40s-vgpu") for o in gen.doc["objects"])
    assert Counter(gen.kinds)["device-unhealthy"] >= 1
    sc = to_scenario(gen.doc)
    assert sc.config is not None and deviceshare_vgpu(sc.config)
    engine = Engine(sc, 0)
    held: Counter[str] = Counter()
    real = engine.world.bind_pod

    def bind(key: str, node: str, now: float, annotations: dict | None = None) -> bool:
        ok = real(key, node, now, annotations)
        if ok and annotations and ASSIGNED_IDS in annotations:
            for c in decode_assignment(annotations[ASSIGNED_IDS]):
                held.update(u.uuid for u in c)
        return ok

    engine.world.bind_pod = bind  # type: ignore[method-assign]
    r = engine.run(None).result
    assert r["invariants"]["violations"] == []
    assert sum(held.values()) >= 20 and len(held) >= 3  # shares on several devices
    reasons = [e["message"] for e in r["events"] if e["reason"] == "FailedScheduling"]
    assert any("compute free; best has" in m for m in reasons)
