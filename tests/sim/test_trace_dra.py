"""The openb trace on DRA GPUs (sim.trace_dra): devices in ResourceSlices, claims from a
template per shape, replayed with the claims allocated and the cards counted."""

from __future__ import annotations

import json
from pathlib import Path

from test_trace import pod_template, requests, submitted, write_trace
from tidesched.model.snapshot import build_snapshot
from tidesched.scheduler import config_from_text
from tidesched.sim import run
from tidesched.sim.trace import load_trace, trace_scenario

CARD_CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - {name: priority}
  - {name: gang}
- plugins:
  - {name: predicates}
  - name: capacity-card
    arguments: {cardUnlimitedCpuMemory: true}
  - {name: nodeorder}
"""


def test_gpu_nodes_publish_their_gpus_as_devices(tmp_path: Path) -> None:
    objects, _ = load_trace(write_trace(tmp_path), gpu_sharing="dra", shared_fraction=0.5, seed=1)
    nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    for node in nodes.values():
        assert not any(k.startswith("nvidia.com/") for k in node["status"]["allocatable"])
        assert not any(k.startswith("nvidia.com/") for k in node["metadata"]["labels"])
    slices = {o["spec"]["nodeName"]: o for o in objects if o["kind"] == "ResourceSlice"}
    assert sorted(slices) == ["n-t4-a", "n-t4-b", "n-v100"]
    v100 = slices["n-v100"]["spec"]["devices"]
    assert len(v100) == 8 and v100[3]["attributes"]["productName"] == {"string": "Tesla V100 32GB"}
    assert v100[3]["capacity"]["memory"]["value"] == "32768Mi"
    shared = [n for n, s in slices.items() if s["spec"]["devices"][0].get("allowMultipleAllocations")]
    assert shared == ["n-t4-b"]  # the seeded choice of nodes that share their GPUs (as the MPS form)
    assert slices["n-t4-b"]["spec"]["devices"][0]["capacity"]["cores"]["value"] == "100"
    snap = build_snapshot(objects, strict_kinds=False)
    assert not snap.problems


def test_pods_claim_their_gpus_from_a_template_of_their_shape(tmp_path: Path) -> None:
    objects, events = load_trace(write_trace(tmp_path), gpu_sharing="dra")
    templates = {o["metadata"]["name"]: o["spec"]["spec"]["devices"]["requests"][0]["exactly"]
                 for o in objects if o["kind"] == "ResourceClaimTemplate"}
    assert sorted(templates) == ["gpu-1", "gpu-1-t4-v100m32", "gpu-2", "gpu-8-v100m32", "gpu-share-46-t4"]
    assert templates["gpu-share-46-t4"]["capacity"] == {"requests": {"cores": "46"}}
    assert [s["cel"]["expression"] for s in templates["gpu-8-v100m32"]["selectors"]] == [
        "!device.allowMultipleAllocations", 'device.attributes["gpu.nvidia.com"].productName in ["Tesla V100 32GB"]']
    subs = submitted(events)
    share = pod_template(subs["p-be-share"])
    assert share["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-share-46-t4"}]
    assert share["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
    assert requests(subs["p-be-share"]) == {"cpu": "6000m", "memory": "12288Mi"}
    assert json.loads(subs["p-be-8"]["metadata"]["annotations"]["volcano.sh/card.request"]) == {"Tesla-V100-32GB": 8}
    assert "resourceClaims" not in pod_template(subs["p-cpu"])["spec"]


def test_small_trace_replays_with_claims_allocated_and_cards_counted(tmp_path: Path) -> None:
    sc, summary = trace_scenario(write_trace(tmp_path), gpu_sharing="dra", shared_fraction=0.5, seed=1)
    assert summary.shared_nodes == 1 and sc.config_source == "<volcano default>"
    sim = run(sc)
    assert not sim.failed, sim.result["invariants"]["violations"]
    assert sim.result["summary"]["pods_bound"] == 6
    cards = [st["cards"] for st in sim.result["steps"] if st.get("cards")]
    assert cards[0]["Tesla-V100-32GB"]["capacity"] == 8 and cards[0]["Tesla-T4"]["capacity"] == 8
    # The 8-GPU pod's claim holds the V100 node's devices; the 46 % share counts 0.46 of a T4
    # beside the LS pod's whole one.
    assert max(c["Tesla-V100-32GB"]["allocated"] for c in cards) == 8
    assert 1.46 in [c["Tesla-T4"]["allocated"] for c in cards]
    # FGD's fragmentation reads no DRA device: it is not reported rather than reported as 0.
    assert sim.result["summary"]["mean_fragmented_share"] is None
    assert sim.result["summary"]["mean_gpu_allocation"] > 0


def test_card_quota_holds_with_claims_under_capacity_card(tmp_path: Path) -> None:
    sc, _summary = trace_scenario(write_trace(tmp_path), gpu_sharing="dra", shared_fraction=0.5, seed=1,
                                  quota_fraction=0.25)
    sc.config = config_from_text(CARD_CONFIG, "<test>")
    sim = run(sc)
    assert not sim.failed, sim.result["invariants"]["violations"]  # REL-2 quota judged with DRA cards
    used = {q: [st["queues"][q]["allocated"] for st in sim.result["steps"] if st.get("queues")]
            for q in ("queue-inference", "queue-training")}
    # V100 quota 8 × 0.25 = 2 per queue: the 2-GPU inference pod is charged its two claimed V100s
    # (REL-2 quota checked them every step); the 8-GPU training job never fits its quota.
    assert max(a.get("Tesla-V100-32GB", 0) for a in used["queue-inference"]) == 2
    assert max(a.get("Tesla-V100-32GB", 0) for a in used["queue-training"]) == 0
    assert sim.result["summary"]["pods_bound"] == 5
