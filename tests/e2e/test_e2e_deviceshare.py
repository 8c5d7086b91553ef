"""deviceshare with vGPU on a real control plane (issue 26): nodes register their GPUs as Volcano's vGPU
device plugin does, fractional pods are packed onto devices, every bound pod carries the allocation
annotations the device plugin reads (written with its binding), and a restarted tidesched counts the
running pods on the very devices their annotations name."""

from __future__ import annotations

import re
import time
from typing import Any

from cluster import (
    VOLCANO_DEFAULT_CONF,
    bound,
    create_node,
    events,
    pods,
    replicaset_pods,
    wait_until,
)

CONF = VOLCANO_DEFAULT_CONF + """  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.ScheduleWeight: 10
"""
MIB = 16384
ALLOCATION = ("volcano.sh/vgpu-ids-new", "volcano.sh/devices-to-allocate", "volcano.sh/vgpu-node",
              "volcano.sh/bind-phase", "volcano.sh/vgpu-time", "volcano.sh/bind-time")


def vgpu_node(api: Any, name: str, gpus: int) -> None:
    """A node as Volcano's vGPU device plugin leaves it: vGPU resources in its allocatable and
    its devices registered in the node annotation."""
    create_node(api, name, cpu="32", memory="128Gi", labels={"nvidia.com/gpu.product": "Tesla-T4"}, extra={
        "volcano.sh/vgpu-number": str(gpus * 4), "volcano.sh/vgpu-cores": str(100 * gpus),
        "volcano.sh/vgpu-memory": str(gpus * MIB),
    })
    register = "".join(f"GPU-{name}-{j},4,{MIB},NVIDIA-Tesla-T4,true,hami-core:" for j in range(gpus))
    api.patch(f"/api/v1/nodes/{name}", {"metadata": {"annotations": {"volcano.sh/node-vgpu-register": register}}})


def vgpu_pods(api: Any, ns: str, rs: str, count: int, *, number: int = 1, memory: int, cores: int) -> list[str]:
    """Pods of a ReplicaSet asking for GPU shares (limits; the API server copies them to requests)."""

    def shares(pod: dict[str, Any]) -> None:
        pod["spec"]["containers"][0]["resources"]["limits"] = {
            "volcano.sh/vgpu-number": str(number), "volcano.sh/vgpu-memory": str(memory),
            "volcano.sh/vgpu-cores": str(cores),
        }

    return replicaset_pods(api, ns, rs, count, cpu="1", memory="1Gi", shape=shares)


def device_use(api: Any, ns: str) -> dict[tuple[str, str], list[int]]:
    """(node, device) → [MiB, cores %, pods], from the bound pods' allocation annotations."""
    out: dict[tuple[str, str], list[int]] = {}
    for p in pods(api, ns).values():
        node = p["spec"].get("nodeName")
        if not node:
            continue
        for entry in p["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"].split(":"):
            if entry:
                uuid, _type, mem, cores = entry.split(",")
                u = out.setdefault((node, uuid), [0, 0, 0])
                u[0] += int(mem)
                u[1] += int(cores)
                u[2] += 1
    return out


def devices_of(api: Any, ns: str, name: str) -> list[str]:
    ann = pods(api, ns)[name]["metadata"]["annotations"]
    return [e.split(",")[0] for e in ann["volcano.sh/vgpu-ids-new"].split(":") if e]


def test_fractional_pods_are_packed_on_devices_and_a_restart_keeps_the_accounting(e2e) -> None:
    api, ns = e2e.api, e2e.ns
    vgpu_node(api, "gpu-a", 2)
    vgpu_node(api, "gpu-b", 2)
    first = e2e.scheduler(CONF)
    started = time.time()

    small = vgpu_pods(api, ns, "small", 4, memory=4000, cores=30)
    wait_until(lambda: set(small) <= set(bound(api, ns)), 60, "the small pods to be bound")

    # Binpack on devices: three 30 % pods fill one device (90 %), the fourth takes an idle device
    # (the device score ties there; the node scores choose the node).
    placed = bound(api, ns)
    use = device_use(api, ns)
    assert sorted(u[1] for u in use.values()) == [30, 90], (placed, use)
    for name in small:
        p = pods(api, ns)[name]
        ann = p["metadata"]["annotations"]
        assert all(k in ann for k in ALLOCATION), ann
        node = p["spec"]["nodeName"]
        assert re.fullmatch(rf"GPU-{node}-[01],NVIDIA,4000,30:", ann["volcano.sh/vgpu-ids-new"])
        assert ann["volcano.sh/devices-to-allocate"] == ann["volcano.sh/vgpu-ids-new"]
        assert ann["volcano.sh/vgpu-node"] == node
        assert ann["volcano.sh/bind-phase"] == "allocating"
        for key in ("volcano.sh/vgpu-time", "volcano.sh/bind-time"):
            assert started - 5 <= int(ann[key]) <= time.time() + 1
    # The annotations came with the binding: one write per pod, no separate patch.
    binds = [a for a in e2e.cp.audit("binding") if a.namespace == ns and a.code == 201]
    assert sorted(a.name for a in binds) == sorted(small)
    fuller = next(k for k, u in use.items() if u[1] == 90)
    node, emptier = next(k for k, u in use.items() if u[1] == 30)

    # A restarted scheduler reads the devices back from the running pods' annotations: a 70 % pod
    # goes to the device holding 30 % (binpack scores it above the idle devices), never to the
    # one holding 90 %, which would look idle to a scheduler that lost the accounting.
    first.stop()
    e2e.scheduler(CONF)
    big = vgpu_pods(api, ns, "big", 1, memory=8000, cores=70)[0]
    wait_until(lambda: big in bound(api, ns), 60, "the 70 % pod to be bound after the restart")
    assert bound(api, ns)[big] == node
    assert devices_of(api, ns, big) == [emptier] and (node, emptier) != fuller
    after = device_use(api, ns)
    assert all(u[0] <= MIB and u[1] <= 100 and u[2] <= 4 for u in after.values()), after
    assert after[(node, emptier)][1] == 100

    # A pod asking for more devices than any node has waits, and says why.
    wide = vgpu_pods(api, ns, "wide", 1, number=3, memory=1000, cores=10)[0]

    def reason() -> str:
        msgs = [e["message"] for e in events(api, ns, wide, "FailedScheduling")]
        return next((m for m in msgs if "node has 2 GPUs, pod asks for 3" in m), "")

    assert wait_until(reason, 30, "a FailedScheduling event naming the device reason")
    assert wide not in bound(api, ns)
