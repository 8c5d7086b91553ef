"""Builders for vGPU objects (Volcano deviceshare): nodes that register devices, vGPU pods."""

from __future__ import annotations

from typing import Any

from builders import node, pod
from tidesched.model.vgpu import RegisteredDevice, encode_node_register

VGPU_CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: {policy}
      deviceshare.ScheduleWeight: {weight}
"""


def vgpu_config(policy: str = "binpack", weight: int = 10, extra: str = "") -> str:
    return VGPU_CONFIG.format(policy=policy, weight=weight) + extra


def devices(n: int, memory: int = 16384, split: int = 10, gpu_type: str = "NVIDIA-Tesla-T4",
            prefix: str = "GPU", healthy: bool = True, mode: str = "hami-core") -> list[RegisteredDevice]:
    return [RegisteredDevice(f"{prefix}-{i}", split, memory, gpu_type, healthy, mode) for i in range(n)]


def vgpu_node(name: str, gpus: int = 2, memory: int = 16384, split: int = 10, *, devs: list | None = None,
              product: str | None = None, cpu: str = "32", mem: str = "128Gi", **kw: Any) -> dict[str, Any]:
    devs = devs if devs is not None else devices(gpus, memory, split, prefix=f"GPU-{name}")
    n = node(name, cpu=cpu, memory=mem, **kw)
    alloc = n["status"]["allocatable"]
    alloc["volcano.sh/vgpu-number"] = str(sum(d.split for d in devs))
    alloc["volcano.sh/vgpu-memory"] = str(sum(d.memory for d in devs))
    alloc["volcano.sh/vgpu-cores"] = str(100 * len(devs))
    n["metadata"]["annotations"] = {"volcano.sh/node-vgpu-register": encode_node_register(devs)}
    if product:
        n["metadata"]["labels"].update({"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(len(devs)),
                                        "nvidia.com/gpu.memory": str(devs[0].memory if devs else 0)})
    return n


def vgpu_limits(number: int | None = 1, memory: int | None = None, cores: int | None = None,
                percent: int | None = None) -> dict[str, str]:
    out: dict[str, str] = {}
    if number is not None:
        out["volcano.sh/vgpu-number"] = str(number)
    if memory is not None:
        out["volcano.sh/vgpu-memory"] = str(memory)
    if cores is not None:
        out["volcano.sh/vgpu-cores"] = str(cores)
    if percent is not None:
        out["volcano.sh/vgpu-memory-percentage"] = str(percent)
    return out


def vgpu_pod(name: str, group: str | None = None, number: int | None = 1, memory: int | None = None,
             cores: int | None = None, percent: int | None = None, **kw: Any) -> dict[str, Any]:
    p = pod(name, group=group, **kw)
    res = p["spec"]["containers"][0]["resources"]
    res["limits"] = vgpu_limits(number, memory, cores, percent)
    return p
