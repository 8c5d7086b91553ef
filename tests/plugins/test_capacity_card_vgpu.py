"""capacity-card with vGPU pods (issue 26, CARD-1..7): a node's vGPU devices are cards of its product,
and a vGPU pod is charged its card equivalents — per device its compute share, a whole card for a
device it takes without a compute share — for the model of the node it lands on."""

from __future__ import annotations

from typing import Any

from builders import card_queue, podgroup
from tidesched.model.cards import CardCatalog, pod_card_request
from tidesched.model.loader import Manifest
from tidesched.model.objects import parse_node, parse_pod
from tidesched.model.vgpu import node_card_scalars, pod_card_scalars
from tidesched.scheduler import config_from_text, schedule_manifests
from vgpu_builders import vgpu_node, vgpu_pod

CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: capacity-card
    arguments: {cardUnlimitedCpuMemory: true}
  - name: deviceshare
    arguments: {deviceshare.VGPUEnable: true, deviceshare.SchedulePolicy: binpack, deviceshare.ScheduleWeight: 1}
"""


def run(objs: list[dict[str, Any]]) -> tuple[Any, Any]:
    return schedule_manifests([Manifest(f"o{i}", o) for i, o in enumerate(objs)], config_from_text(CONFIG))


def pod(name: str, **kw: Any) -> list[dict[str, Any]]:
    ann = {"scheduling.volcano.sh/queue-name": "q", **kw.pop("annotations", {})}
    return [podgroup(f"pg-{name}", queue="q"), vgpu_pod(name, group=f"pg-{name}", annotations=ann, **kw)]


def test_vgpu_node_offers_its_devices_as_cards_of_its_product() -> None:
    node = parse_node(vgpu_node("n1", gpus=4, product="Tesla-T4"))
    catalog = CardCatalog.build([(node.name, node.meta.labels, node_card_scalars(node))])
    (slot,) = catalog.nodes["n1"].slots
    assert (slot.model, slot.count) == ("Tesla-T4", 4000.0)
    p = parse_pod(vgpu_pod("p", number=2, cores=30, memory=1000))
    req = pod_card_request(p.meta.annotations, pod_card_scalars(p), catalog)
    assert (req.models, req.count) == (("Tesla-T4",), 600.0)  # 2 devices × 30 %
    whole = parse_pod(vgpu_pod("w", number=1, memory=1000))
    assert pod_card_request(whole.meta.annotations, pod_card_scalars(whole), catalog).count == 1000.0


def test_quota_in_card_equivalents() -> None:
    # Quota of one T4: two 40 % pods fit (0.8), a third would make 1.2.
    objs = [vgpu_node("n1", gpus=2, product="Tesla-T4"), card_queue("q", '{"Tesla-T4": 1}', cpu="64")]
    for name in ("a", "b", "c"):
        objs += pod(name, cores=40, memory=1000)
    ssn, d = run(objs)
    assert sorted(d.bound) == ["ns/a", "ns/b"]
    msgs = [e.message for e in d.events if e.kind == "Pod" and e.name == "c"]
    assert any("Queue <q> has insufficient <Tesla-T4> quota: requested 0.4, total would be 1.2, but capability is 1" in m
               for m in msgs), msgs
    usage = ssn.plugins["capacity-card"].queues["q"].alloc_cards
    assert usage == {"Tesla-T4": 800.0}


def test_pod_without_compute_share_is_charged_a_whole_card() -> None:
    objs = [vgpu_node("n1", gpus=2, product="Tesla-T4"), card_queue("q", '{"Tesla-T4": 1}', cpu="64")]
    objs += pod("a", memory=1000) + pod("b", memory=1000)
    _ssn, d = run(objs)
    assert sorted(d.bound) == ["ns/a"]


def test_charged_for_the_model_it_lands_on() -> None:
    objs = [vgpu_node("n1", gpus=1, product="Tesla-T4"), vgpu_node("n2", gpus=1, product="Tesla-V100"),
            card_queue("q", '{"Tesla-T4": 0, "Tesla-V100": 1}', cpu="64")]
    objs += pod("a", cores=50, memory=1000, annotations={"volcano.sh/card.name": "Tesla-T4|Tesla-V100"})
    ssn, d = run(objs)
    assert d.bound == {"ns/a": "n2"}
    assert ssn.plugins["capacity-card"].queues["q"].alloc_cards == {"Tesla-V100": 500.0}
