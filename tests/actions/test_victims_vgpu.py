"""Reclaim and preempt with vGPU pods (issue 26): victims are chosen until the preemptor's *devices*
fit, not only the node's room; a victim's devices stay held while it terminates, so the reclaimer
is pipelined, never bound onto a busy device."""

from __future__ import annotations

from typing import Any

from builders import card_queue, podgroup
from test_gang_safe_reclaim import tidal_config
from tidesched.model.snapshot import build_snapshot
from tidesched.model.vgpu import ASSIGNED_IDS, ASSIGNED_NODE
from tidesched.scheduler import config_from_text, open_session, run_actions
from vgpu_builders import vgpu_node, vgpu_pod

T4 = "Tesla-T4"
DEVICESHARE = ("  - name: deviceshare\n    arguments: {deviceshare.VGPUEnable: true, "
               "deviceshare.SchedulePolicy: binpack, deviceshare.ScheduleWeight: 1}\n")


def config(gang_safe: bool = True) -> str:
    return tidal_config(gang_safe=gang_safe, extra_plugin=DEVICESHARE)


def queues() -> list[dict[str, Any]]:
    return [
        card_queue("q-inference", f'{{"{T4}":8}}', cpu=None, priority=80000, reclaimable=False),
        card_queue("q-training", f'{{"{T4}":8}}', cpu=None, priority=20000, reclaimable=True),
    ]


def training(name: str, node: str, device: str, cores: int) -> list[dict[str, Any]]:
    pg = podgroup(name, 1, queue="q-training", phase="Running")
    pg["metadata"]["annotations"] = {"volcano.sh/service.type": "training", "volcano.sh/preemptable": "true"}
    p = vgpu_pod(f"{name}-0", group=name, memory=1000, cores=cores, node=node, phase="Running",
                 annotations={"volcano.sh/card.name": T4, "volcano.sh/preemptable": "true",
                              ASSIGNED_IDS: f"{device},NVIDIA,1000,{cores}:", ASSIGNED_NODE: node})
    p["status"]["startTime"] = "2026-01-01T00:00:00Z"
    return [pg, p]


def inference(name: str, cores: int) -> list[dict[str, Any]]:
    pg = podgroup(name, 1, queue="q-inference", phase="Inqueue")
    pg["metadata"]["annotations"] = {"volcano.sh/service.type": "inference"}
    return [pg, vgpu_pod(f"{name}-0", group=name, memory=1000, cores=cores, annotations={"volcano.sh/card.name": T4})]


def run(objs: list[dict[str, Any]], gang_safe: bool = True) -> Any:
    return run_actions(open_session(build_snapshot(objs), config_from_text(config(gang_safe))))


def test_room_on_the_node_is_not_room_on_a_device() -> None:
    # Two devices at 60 % each: the node has 80 % compute left, no device has 50 %. Reclaim must
    # evict one training pod (its device then fits), and pipeline the inference pod.
    for gang_safe in (True, False):
        objs = [vgpu_node("n1", gpus=2, product=T4), *queues(), *training("a", "n1", "GPU-n1-0", 60),
                *training("b", "n1", "GPU-n1-1", 60), *inference("chat", 50)]
        out = run(objs, gang_safe)
        assert len(out.evicted) == 1, (gang_safe, out.evicted)
        assert out.pipelined == {"ns/chat-0": "n1"} and out.bound == {}


def test_no_eviction_when_devices_already_fit() -> None:
    objs = [vgpu_node("n1", gpus=2, product=T4), *queues(), *training("a", "n1", "GPU-n1-0", 60),
            *inference("chat", 40)]
    out = run(objs)
    assert out.evicted == [] and out.bound == {"ns/chat-0": "n1"}


PREEMPT = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: deviceshare
    arguments: {deviceshare.VGPUEnable: true, deviceshare.SchedulePolicy: binpack, deviceshare.ScheduleWeight: 1}
"""


def test_preempt_frees_a_device_not_only_room() -> None:
    low = podgroup("low", 1, phase="Running")
    low["spec"]["priorityClassName"] = "low"
    high = podgroup("high", 1)
    high["spec"]["priorityClassName"] = "high"
    objs: list[dict[str, Any]] = [
        {"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}},
        {"kind": "PriorityClass", "metadata": {"name": "low"}, "value": 10},
        {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
        vgpu_node("n1", gpus=2), low, high,
    ]
    for j in range(2):
        p = vgpu_pod(f"low-{j}", group="low", memory=1000, cores=60, node="n1", phase="Running",
                     annotations={ASSIGNED_IDS: f"GPU-n1-{j},NVIDIA,1000,60:", ASSIGNED_NODE: "n1"})
        p["spec"]["priorityClassName"] = "low"
        objs.append(p)
    hp = vgpu_pod("high-0", group="high", memory=1000, cores=50)
    hp["spec"]["priorityClassName"] = "high"
    objs.append(hp)
    out = run_actions(open_session(build_snapshot(objs), config_from_text(PREEMPT)))
    assert len(out.evicted) == 1 and out.pipelined == {"ns/high-0": "n1"}
