"""The vGPU part of a chaos day (issue 26): on about 70 % of seeds, one to three L40S nodes that
register four vGPU devices each (split count 4 on the first, 10 on the others), inference
Deployments of GPU shares (10–50 % compute, MiB or percentage memory) scaled with the tide,
training gangs of shares or whole devices, L40S quota on the leaves, and device faults (a device
re-registered unhealthy and healthy again, a vGPU node lost and back).

Drawn from a random stream of its own (``vgpu-<seed>``), so the rest of a seed's scenario is the
same with or without it; :mod:`tidesched.sim.chaos` calls :func:`add_vgpu` last.
"""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING, Any

from tidesched.model.vgpu import RegisteredDevice, encode_node_register

if TYPE_CHECKING:
    from tidesched.sim.chaos import _Builder

# NVIDIA L40S cards shared per device.
_VGPU_PRODUCT = "NVIDIA-L40S"
_VGPU_MEMORY = 46068  # MiB per device
_VGPU_CARDS = 4


def vgpu_node(name: str, unhealthy: int | None = None) -> dict[str, Any]:
    """A vGPU node as the device plugin leaves it: its devices registered (``unhealthy``: the
    index of one registered unhealthy) and the vGPU resources in its allocatable."""
    split = 4 if name.endswith("1") else 10
    devs = [RegisteredDevice(f"GPU-{name}-{j}", split, _VGPU_MEMORY, f"NVIDIA-{_VGPU_PRODUCT}", j != unhealthy,
                             "hami-core") for j in range(_VGPU_CARDS)]
    alloc = {"cpu": "128", "memory": "1024Gi", "pods": "110", "volcano.sh/vgpu-number": str(split * _VGPU_CARDS),
             "volcano.sh/vgpu-cores": str(100 * _VGPU_CARDS), "volcano.sh/vgpu-memory": str(_VGPU_MEMORY * _VGPU_CARDS),
             "volcano.sh/vgpu-memory-percentage": str(100 * _VGPU_CARDS)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": _VGPU_PRODUCT,
                                              "nvidia.com/gpu.count": str(_VGPU_CARDS)},
                     "annotations": {"volcano.sh/node-vgpu-register": encode_node_register(devs)}},
        "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def add_vgpu(b: "_Builder") -> None:
    """GPU sharing per device on some seeds: vGPU nodes, fractional inference Deployments and
    training gangs of shares or whole devices, quota for them, and device faults."""
    rng = random.Random(f"vgpu-{b.seed}")
    if rng.random() < 0.3:
        return
    names = [f"l40s-vgpu-{i + 1}" for i in range(rng.randint(1, 3))]
    nodes = [vgpu_node(n) for n in names]
    b.objects[:0] = nodes  # nodes first, as the other nodes
    cards = _VGPU_CARDS * len(names)
    quotas: dict[str, int] = {}
    for obj in b.objects:
        if obj["kind"] == "Queue" and obj["metadata"]["name"] in b.quota:
            q = quotas[obj["metadata"]["name"]] = rng.randint(max(1, cards // 3), cards + 2)
            ann = obj["metadata"]["annotations"]
            ann["volcano.sh/card.quota"] = json.dumps({**json.loads(ann["volcano.sh/card.quota"]), _VGPU_PRODUCT: q},
                                                      sort_keys=True, separators=(",", ":"))
    # Quota changes keep a share of the vGPU card too (a fault may still cut it).
    for t, seq, kind, ev in b.events:
        if kind in ("quota-raised", "quota-lowered"):
            q = ev["setQuota"]["queue"]
            ev["setQuota"]["cardQuota"] = {**ev["setQuota"]["cardQuota"],
                                           _VGPU_PRODUCT: rng.randint(0, quotas.get(q, cards) + 2)}

    def limits(number: int, cores: int, memory: int | None, percent: int | None) -> dict[str, str]:
        out = {"volcano.sh/vgpu-number": str(number), "volcano.sh/vgpu-cores": str(cores)}
        if memory is not None:
            out["volcano.sh/vgpu-memory"] = str(memory)
        if percent is not None:
            out["volcano.sh/vgpu-memory-percentage"] = str(percent)
        return out

    def container(cpu: int, lim: dict[str, str]) -> dict[str, Any]:
        req = {"cpu": str(cpu), "memory": "16Gi"}
        return {"name": "main", "image": "busybox", "resources": {"requests": {**req, **lim}, "limits": {**req, **lim}}}

    for i in range(rng.randint(1, 3)):
        name = f"vgpu-serve-{i + 1}"
        key = f"online/{name}"
        cores = rng.choice((10, 20, 25, 30, 50))
        mem = rng.choice((None, 4096, 12000))
        lim = limits(1, cores, mem, None if mem is not None else cores)
        ann = {"volcano.sh/preemptable": "false", "volcano.sh/service.type": "inference"}
        b.objects.append({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "online", "annotations": ann},
            "spec": {"replicas": rng.randint(1, 3), "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}, "annotations": {
                         "volcano.sh/card.name": _VGPU_PRODUCT,
                         "scheduling.volcano.sh/queue-name": rng.choice(b.leaves["online"])}},
                         "spec": {"schedulerName": "volcano", "priorityClassName": "pc-high",
                                  "containers": [container(rng.choice((2, 4)), lim)]}}},
        })
        b.deployments.append(key)
        replicas = 1
        peak = rng.randint(3, 4 * cards)
        for hour in range(1, int(b.end // 3600)):
            target = peak if 9 <= hour % 24 <= 17 else max(1, peak // 3)
            if target != replicas and rng.random() < 0.5:
                t = hour * 3600 + rng.randint(0, 3000)
                kind = "scale-up" if target > replicas else "scale-down"
                b.event(t, kind, "scale", {"deployment": key, "replicas": target})
                if target > replicas:
                    b.scale_ups.append(float(t))
                replicas = target
    for i in range(rng.randint(2, 5)):
        name = f"vgpu-train-{i + 1}"
        replicas = rng.randint(1, 3)
        if rng.random() < 0.5:
            lim = limits(rng.choice((1, 1, 2)), 100, None, None)  # whole devices
        else:
            lim = limits(1, rng.choice((30, 40, 60)), rng.choice((8000, 20000)), None)
        job = {
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": "train", "annotations": {
                "volcano.sh/preemptable": "true", "volcano.sh/service.type": "training",
                "sim.tidesched.io/duration": f"{rng.randint(2, 10)}h"}},
            "spec": {"minAvailable": replicas, "schedulerName": "volcano", "queue": rng.choice(b.leaves["offline"]),
                     "priorityClassName": "pc-low", "maxRetry": 4,
                     "policies": [{"event": "PodEvicted", "action": "RestartJob"},
                                  {"event": "TaskCompleted", "action": "CompleteJob"}],
                     "tasks": [{"name": "worker", "replicas": replicas, "template": {
                         "metadata": {"annotations": {"volcano.sh/card.name": _VGPU_PRODUCT}},
                         "spec": {"restartPolicy": "Never", "containers": [container(8, lim)]}}}]},
        }
        at = 0.0 if rng.random() < 0.5 else rng.uniform(0, b.end * 0.6)
        if at == 0.0:
            b.objects.append(job)
        else:
            b.event(at, "job-submitted", "submit", job)
        b.jobs.append((f"train/{name}", at))
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(names)
        t = rng.uniform(60, b.end - 60)
        b.event(t, "device-unhealthy", "submit", vgpu_node(name, unhealthy=rng.randrange(_VGPU_CARDS)))
        b.event(t + rng.uniform(600, 4 * 3600), "device-healthy", "submit", vgpu_node(name))
    if rng.random() < 0.5:
        name = rng.choice(names)
        t = rng.uniform(60, b.end - 60)
        b.event(t, "node-lost", "removeNode", name)
        b.event(t + rng.uniform(60, 3 * 3600), "node-returned", "addNode", vgpu_node(name))
