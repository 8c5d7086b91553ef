"""GPU allocation, demand and FGD's fragmentation measure over the simulator's world."""

from __future__ import annotations

from builders import node, pod, podgroup, queue

from tidesched.sim.clock import Clock
from tidesched.sim.fragmentation import (
    GpuWorkload,
    fragmentation_summary,
    fragmented_gpus,
    gpu_figures,
    model_gpus,
)
from tidesched.sim.metrics import Accounting
from tidesched.sim.world import World

H200 = {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.memory": "143771"}


def world_with(*nodes: dict) -> tuple[World, tuple[Accounting, GpuWorkload]]:
    w = World(Clock())
    workload = (Accounting(w), GpuWorkload(w))
    for n in nodes:
        w.put("Node", n)
    w.put("Queue", queue("q"))
    w.put("PodGroup", podgroup("pg", 1, queue="q"))
    return w, workload


def figures(w: World, metrics: tuple[Accounting, GpuWorkload]) -> dict[str, float]:
    accounting, workload = metrics
    return {**gpu_figures(accounting, workload), "fragmented": fragmented_gpus(w.cache.node_table(), workload)}


def test_slot_sizes_in_gpu_equivalents() -> None:
    assert model_gpus("NVIDIA-H200") == 1.0
    assert model_gpus("Alibaba-G3/mps-32g*1/10") == 0.1
    assert model_gpus("NVIDIA-H200/mig-3g.71gb-mixed") == 3 / 7


def test_idle_gpus_on_a_node_without_cpu_left_are_fragments_for_gpu_tasks() -> None:
    a = node("a", cpu="4", memory="16Gi", nvidia_com__gpu="2", labels=H200)
    b = node("b", cpu="4", memory="16Gi", nvidia_com__gpu="2", labels=H200)
    w, workload = world_with(a, b)
    # a CPU hog fills node a's CPU: its two idle cards can serve no 1-card task
    w.put("Pod", pod("hog", "pg", cpu="4", memory="1Gi", node="a", phase="Running"))
    w.put("Pod", pod("g1", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu": "1"}))
    g = figures(w, workload)
    assert g["capacity"] == 4 and g["allocated"] == 0 and g["unallocated"] == 4
    assert g["demand"] == 1  # the pending 1-card pod
    # mix: hog (no GPU: every idle card is a fragment for it) and g1 (node a's two cards)
    assert g["fragmented"] == (4 + 2) / 2


def test_a_card_model_the_task_cannot_use_strands_that_node() -> None:
    a = node("a", cpu="8", memory="16Gi", nvidia_com__gpu="4", labels=H200)
    b = node("b", cpu="8", memory="16Gi", nvidia_com__gpu="4",
             labels={"nvidia.com/gpu.product": "NVIDIA-A10", "nvidia.com/gpu.memory": "24576"})
    w, workload = world_with(a, b)
    w.put("Pod", pod("g", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu": "2"},
                     annotations={"volcano.sh/card.name": "NVIDIA-H200"}))
    g = figures(w, workload)
    assert g["fragmented"] == 4  # the A10 node's four cards
    # bound and running on a: it holds two cards, and a still fits another such task
    w.put("Pod", pod("g", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu": "2"},
                     annotations={"volcano.sh/card.name": "NVIDIA-H200"}, node="a", phase="Running"))
    g = figures(w, workload)
    assert g["allocated"] == 2 and g["demand"] == 2 and g["fragmented"] == 4
    # too few cards left on a for a second 2-card task once a 1-card pod lands there
    w.put("Pod", pod("one", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu": "1"},
                     annotations={"volcano.sh/card.name": "NVIDIA-H200"}, node="a", phase="Running"))
    g = figures(w, workload)
    # mix: the 2-card task (weight 1): A10's 4 + a's 1; the 1-card task (weight 1): A10's 4
    assert g["unallocated"] == 5 and g["fragmented"] == (5 + 4) / 2


def test_mps_slices_count_as_their_share_of_a_card() -> None:
    shared = node("s", cpu="8", memory="16Gi", nvidia_com__gpu_shared="20",
                  labels={**H200, "nvidia.com/gpu.replicas": "10"})
    w, workload = world_with(shared)
    w.put("Pod", pod("p", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu.shared": "3"},
                     node="s", phase="Running"))
    w.put("Pod", pod("q", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu.shared": "5"}))
    g = figures(w, workload)
    assert g["capacity"] == 2 and g["allocated"] == 0.3 and g["demand"] == 0.8
    assert g["fragmented"] == 0  # both requests still fit the slices left


def test_finished_pods_leave_the_demand_but_stay_in_the_mix() -> None:
    a = node("a", cpu="8", memory="16Gi", nvidia_com__gpu="2", labels=H200)
    w, workload = world_with(a)
    w.put("Pod", pod("g", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu": "2"},
                     node="a", phase="Running"))
    assert figures(w, workload)["demand"] == 2
    w.put("Pod", pod("g", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu": "2"},
                     node="a", phase="Succeeded"))
    g = figures(w, workload)
    assert g["demand"] == 0 and g["allocated"] == 0 and g["fragmented"] == 0
    w.remove("Pod", "ns/g")
    assert figures(w, workload)["demand"] == 0
    assert sum(workload[1].mix.values()) == 1


def test_summary_weights_by_time() -> None:
    steps = [
        {"t": 0, "gpus": {"capacity": 10, "allocated": 0, "unallocated": 10, "fragmented": 5}},
        {"t": 10, "gpus": {"capacity": 10, "allocated": 10, "unallocated": 0}},
        {"t": 40, "gpus": {"capacity": 10, "allocated": 5, "unallocated": 5, "fragmented": 0}},
        {"t": 50, "gpus": {"capacity": 10, "allocated": 5, "unallocated": 5}},
    ]
    s = fragmentation_summary(steps)
    assert s["mean_gpu_allocation"] == (0 * 10 + 1 * 30 + 0.5 * 10) / 50
    assert s["mean_fragmented_share"] == (0.5 * 40 + 0 * 10) / 50
    assert fragmentation_summary([{"t": 0}, {"t": 5}]) == {"mean_gpu_allocation": None,
                                                           "mean_fragmented_share": None}


def test_a_pod_request_is_read_again_when_it_or_the_cards_change() -> None:
    """The demand follows a pod whose request changes under the same name, and a card model
    that appears later (the request is remembered per pod, the cards it was read against and
    what it was read from)."""
    a = node("a", cpu="8", memory="16Gi", nvidia_com__gpu="4", labels=H200)
    w, workload = world_with(a)
    w.put("Pod", pod("g", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu": "1"}))
    assert figures(w, workload)["demand"] == 1
    w.put("Pod", pod("g", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu": "3"}))
    assert figures(w, workload)["demand"] == 3
    w.put("Pod", pod("g", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu": "3"},
                     node="a", phase="Running"))
    assert figures(w, workload)["demand"] == 3
    w.remove("Pod", "ns/g")
    assert figures(w, workload)["demand"] == 0 and not workload[1]._requests
    # A shared-slice request counted before any shared node exists, and after one appears.
    w.put("Pod", pod("s", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu.shared": "5"}))
    before = figures(w, workload)["demand"]
    w.put("Node", node("m", cpu="8", memory="16Gi", nvidia_com__gpu_shared="20",
                       labels={**H200, "nvidia.com/gpu.replicas": "10"}))
    w.put("Pod", pod("s", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu.shared": "5"},
                     node="m", phase="Running"))
    fresh_world, fresh = world_with(a, node("m", cpu="8", memory="16Gi", nvidia_com__gpu_shared="20",
                                            labels={**H200, "nvidia.com/gpu.replicas": "10"}))
    fresh_world.put("Pod", pod("s", "pg", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu.shared": "5"},
                               node="m", phase="Running"))
    assert figures(w, workload)["demand"] == figures(fresh_world, fresh)["demand"]
    assert before is not None
