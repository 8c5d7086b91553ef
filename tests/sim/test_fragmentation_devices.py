"""The device view of FGD's fragmentation measure (vGPU devices judged one by one)."""

from __future__ import annotations

from typing import Any

import numpy as np

from builders import podgroup, queue
from tidesched.model.device_units import unit_caps, unit_fit, units_fit
from tidesched.model.devices import CORE, MEM, NUM, DeviceTable
from tidesched.model.objects import parse_node
from tidesched.model.vgpu import ASSIGNED_IDS
from tidesched.sim.clock import Clock
from tidesched.sim.fragmentation import GpuWorkload, fragmented_gpus, gpu_figures
from tidesched.sim.metrics import Accounting
from tidesched.sim.world import World
from vgpu_builders import vgpu_node, vgpu_pod


def world_with(*nodes: dict) -> tuple[World, Accounting, GpuWorkload]:
    w = World(Clock())
    acc, workload = Accounting(w), GpuWorkload(w)
    for n in nodes:
        w.put("Node", n)
    w.put("Queue", queue("q"))
    w.put("PodGroup", podgroup("pg", 1, queue="q"))
    return w, acc, workload


def held(name: str, node: str, uuid: str, cores: int, **kw: Any) -> dict[str, Any]:
    return vgpu_pod(name, "pg", cores=cores, percent=cores, node=node, phase="Running",
                    annotations={ASSIGNED_IDS: f"{uuid},NVIDIA,{16384 * cores // 100},{cores}:",
                                 "volcano.sh/vgpu-node": node}, **kw)


def test_eight_gpus_thirty_percent_used_take_no_eighty_percent_pod() -> None:
    # The example: a node with 8 GPUs each 30 % used can take no pod that needs 80 % of one.
    n = vgpu_node("n", gpus=8, product="Tesla-T4", cpu="64", mem="512Gi")
    w, acc, workload = world_with(n)
    for j in range(8):
        w.put("Pod", held(f"r{j}", "n", f"GPU-n-{j}", 30))
    w.put("Pod", vgpu_pod("big", "pg", cores=80, percent=80))
    g = gpu_figures(acc, workload)
    assert g["capacity"] == 8 and g["allocated"] == 2.4 and g["unallocated"] == 5.6
    frag = fragmented_gpus(w.cache.node_table(), workload)
    # mix: eight 30 % pods (each fits: no device is a fragment) and one 80 % pod (fits nowhere:
    # all 5.6 free GPUs are fragments): 5.6 / 9
    assert abs(frag - 5.6 / 9) < 1e-9


def test_partly_used_devices_are_fragments_for_larger_shares() -> None:
    n = vgpu_node("n", gpus=2, product="Tesla-T4")
    w, acc, workload = world_with(n)
    w.put("Pod", held("a", "n", "GPU-n-0", 70))
    w.put("Pod", vgpu_pod("b", "pg", cores=50, percent=50))
    # Mix: a (70 %: device 1 takes it, device 0's 30 % free is a fragment) and b (50 %: same).
    assert abs(fragmented_gpus(w.cache.node_table(), workload) - 0.3) < 1e-9
    w.put("Pod", vgpu_pod("c", "pg", cores=20, percent=20))
    # c (20 %) can use both devices: (0.3 + 0.3 + 0) / 3
    assert abs(fragmented_gpus(w.cache.node_table(), workload) - 0.2) < 1e-9
    w.put("Pod", vgpu_pod("w", "pg", number=1, cores=100))
    # a whole-device pod strands device 0's 30 % too: (0.3 + 0.3 + 0 + 0.3) / 4
    assert abs(fragmented_gpus(w.cache.node_table(), workload) - 0.9 / 4) < 1e-9


def test_unit_caps_agree_with_unit_fit() -> None:
    n = parse_node(vgpu_node("n", gpus=3, memory=16384, split=2))
    t = DeviceTable([n], [n.vgpu])
    t.now[MEM, 0] = [16384, 8000, 0]
    t.now[CORE, 0] = [0, 500, 1000]
    t.now[NUM, 0] = [1, 2, 1]
    t.fut[:] = t.now
    shapes = [(0, None, 1), (100, 40, 0), (1000, 100, 0), (500, None, 8384), (0, 0, 0)]
    core = np.array([s[0] for s in shapes], dtype=np.int32)[:, None, None]
    pct = np.array([-1 if s[1] is None else s[1] for s in shapes], dtype=np.int32)[:, None, None]
    mib = np.array([s[2] for s in shapes], dtype=np.int32)[:, None, None]
    got = units_fit(unit_caps(t), core, pct, mib)
    for k, (c, p, m) in enumerate(shapes):
        assert (got[k] == unit_fit(t, c, p, m)).all(), shapes[k]
