"""The openb trace on per-device GPUs (sim.trace_vgpu)."""

from __future__ import annotations

import json
from pathlib import Path

from test_trace import pod_template, requests, submitted, write_trace
from tidesched.model.objects import parse_node
from tidesched.model.snapshot import build_snapshot
from tidesched.model.vgpu import RegisteredDevice
from tidesched.sim import run
from tidesched.sim.trace import load_trace, trace_scenario


def test_gpu_nodes_register_their_devices(tmp_path: Path) -> None:
    objects, _events = load_trace(write_trace(tmp_path))
    nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    v100 = nodes["n-v100"]
    alloc = v100["status"]["allocatable"]
    assert "nvidia.com/gpu" not in alloc and "nvidia.com/gpu.shared" not in alloc
    assert {k: alloc[k] for k in alloc if k.startswith("volcano.sh/")} == {
        "volcano.sh/vgpu-number": "80", "volcano.sh/vgpu-cores": "800", "volcano.sh/vgpu-memory": "262144",
        "volcano.sh/vgpu-memory-percentage": "800",
    }
    rec = parse_node(v100)
    assert rec.vgpu is not None and len(rec.vgpu.devices) == 8
    assert rec.vgpu.devices[3] == RegisteredDevice("GPU-n-v100-3", 10, 32768, "NVIDIA-Tesla-V100-32GB", True, "hami-core")
    assert "volcano.sh/node-vgpu-register" not in (nodes["n-cpu"]["metadata"].get("annotations") or {})
    snap = build_snapshot([o for o in objects if o["kind"] in ("Node", "Queue")])
    assert not snap.problems


def test_pods_ask_for_device_shares(tmp_path: Path) -> None:
    _objects, events = load_trace(write_trace(tmp_path))
    subs = submitted(events)
    share = subs["p-be-share"]  # gpu_milli 460 on a T4
    assert requests(share) == {"cpu": "6000m", "memory": "12288Mi", "volcano.sh/vgpu-number": "1",
                               "volcano.sh/vgpu-cores": "46", "volcano.sh/vgpu-memory-percentage": "46"}
    assert pod_template(share)["metadata"]["annotations"]["volcano.sh/card.name"] == "Tesla-T4"
    assert json.loads(share["metadata"]["annotations"]["volcano.sh/card.request"]) == {"Tesla-T4": 1}
    whole = subs["p-be-8"]
    assert requests(whole)["volcano.sh/vgpu-number"] == "8" and requests(whole)["volcano.sh/vgpu-cores"] == "100"
    assert json.loads(whole["metadata"]["annotations"]["volcano.sh/card.request"]) == {"Tesla-V100-32GB": 8}
    assert "volcano.sh/vgpu-number" not in requests(subs["p-cpu"])


def test_queues_name_the_vgpu_resources(tmp_path: Path) -> None:
    objects, _ = load_trace(write_trace(tmp_path))
    q = next(o for o in objects if o["kind"] == "Queue" and o["metadata"]["name"] == "queue-training")
    assert json.loads(q["metadata"]["annotations"]["volcano.sh/card.quota"]) == {"Tesla-T4": 8, "Tesla-V100-32GB": 8}
    cap = q["spec"]["capability"]
    assert cap["volcano.sh/vgpu-number"] == "160" and cap["volcano.sh/vgpu-cores"] == "1600"
    assert "nvidia.com/gpu" not in cap


def test_small_trace_replays_with_device_accounting(tmp_path: Path) -> None:
    sc, summary = trace_scenario(write_trace(tmp_path))
    assert summary.shared_nodes == 0 and "deviceshare" in sc.config_source
    sim = run(sc)
    assert not sim.failed, sim.result["invariants"]["violations"]
    s = sim.result["summary"]
    assert s["pods_bound"] == 6
    gpus = [st["gpus"] for st in sim.result["steps"] if st.get("gpus")]
    assert max(g["allocated"] for g in gpus) >= 8.46 - 1e-9  # the 8-GPU pod and the 46 % share overlap


def test_mps_form_is_kept(tmp_path: Path) -> None:
    sc, summary = trace_scenario(write_trace(tmp_path), gpu_sharing="mps", shared_fraction=0.5, seed=1)
    assert summary.shared_nodes == 1 and sc.config_source == "<volcano default>"
    assert not run(sc).failed
