"""The DRA part of a chaos day (issue 35): on about half the seeds, one to three nodes whose
GPUs a DRA driver publishes as ResourceSlices (each GPU a device with its model, NUMA node and
memory), a DeviceClass, ResourceClaimTemplates (one GPU; one of 141Gi by a capacity selector;
two GPUs on one NUMA node), training gangs whose pods name them (the simulated resourceclaim
controller makes and frees the claims), a DRA node lost and back, and a driver republishing
a node's slice under a new pool generation. The ``REL-2 claims`` invariant (no device in two
claims, no pod bound without its claims) is checked after every step.

Drawn from a random stream of its own (``dra-<seed>``), so the rest of a seed's scenario is the
same with or without it; :mod:`tidesched.sim.chaos` calls :func:`add_dra` after the vGPU part.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidesched.sim.chaos import _Builder

DRIVER = "gpu.nvidia.com"
_GPUS = 8


def dra_node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "dra.tidesched.io/gpus": "true"}},
        "status": {"allocatable": {"cpu": "128", "memory": "1024Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def dra_slice(node: str, generation: int, memory: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{j}", "attributes": {"productName": {"string": "NVIDIA H200"}, "numa": {"int": j // 4}},
                              "capacity": {"memory": {"value": memory[j]}}} for j in range(_GPUS)]},
    }


def _template(name: str, devices: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": "train"},
            "spec": {"spec": {"devices": devices}}}


def add_dra(b: "_Builder") -> None:
    """DRA GPUs and the gangs that claim them on some seeds, with node and slice faults."""
    rng = random.Random(f"dra-{b.seed}")
    if rng.random() < 0.5:
        return
    names = [f"h200-dra-{i + 1}" for i in range(rng.randint(1, 3))]
    memory = {n: [rng.choice(("80Gi", "141Gi")) for _ in range(_GPUS)] for n in names}
    b.objects[:0] = [dra_node(n) for n in names]
    b.objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
                      "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    b.objects += [dra_slice(n, 1, memory[n]) for n in names]
    big = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("141Gi")) >= 0'
    b.objects += [
        _template("dra-one-gpu", {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}),
        _template("dra-big-gpu", {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER,
                                                                           "selectors": [{"cel": {"expression": big}}]}}]}),
        _template("dra-numa-pair", {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": 2}}],
                                    "constraints": [{"matchAttribute": f"{DRIVER}/numa"}]}),
    ]
    for i in range(rng.randint(3, 8)):
        name = f"dra-train-{i + 1}"
        replicas = rng.randint(1, 4)
        template = rng.choice(("dra-one-gpu", "dra-one-gpu", "dra-big-gpu", "dra-numa-pair"))
        job = {
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": "train", "annotations": {
                "volcano.sh/preemptable": "true", "volcano.sh/service.type": "training",
                "sim.tidesched.io/duration": f"{rng.randint(1, 8)}h"}},
            "spec": {"minAvailable": replicas, "schedulerName": "volcano", "queue": rng.choice(b.leaves["offline"]),
                     "priorityClassName": "pc-low", "maxRetry": 4,
                     "policies": [{"event": "PodEvicted", "action": "RestartJob"},
                                  {"event": "TaskCompleted", "action": "CompleteJob"}],
                     "tasks": [{"name": "worker", "replicas": replicas, "template": {"spec": {
                         "restartPolicy": "Never",
                         "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                         "containers": [{"name": "main", "image": "busybox", "resources": {
                             "requests": {"cpu": "8", "memory": "64Gi"}, "claims": [{"name": "gpu"}]}}]}}}]},
        }
        at = 0.0 if rng.random() < 0.4 else rng.uniform(0, b.end * 0.7)
        if at == 0.0:
            b.objects.append(job)
        else:
            b.event(at, "job-submitted", "submit", job)
        b.jobs.append((f"train/{name}", at))
    if rng.random() < 0.5:
        name = rng.choice(names)
        t = rng.uniform(60, b.end - 60)
        b.event(t, "node-lost", "removeNode", name)
        b.event(t + rng.uniform(60, 3 * 3600), "node-returned", "addNode", dra_node(name))
    if rng.random() < 0.5:  # the driver republishes a node's devices under a new generation
        name = rng.choice(names)
        b.event(rng.uniform(60, b.end - 60), "slice-republished", "submit", dra_slice(name, 2, memory[name]))
