"""The Alibaba GPU trace (openb) on DRA GPUs (issue 35): each GPU a device that NVIDIA's DRA
driver publishes in a ResourceSlice, each pod's GPUs asked for by a ResourceClaim made from a
ResourceClaimTemplate of its shape, so policies and quotas can be compared with claims.

Used by :mod:`tidesched.sim.trace` when ``gpu_sharing="dra"``:

* **Nodes.** A GPU node advertises no GPU resource and carries no card product label; its GPUs
  are devices ``gpu-<j>`` of driver ``gpu.nvidia.com`` in one ResourceSlice (pool = the node),
  with the attributes NVIDIA's driver writes — ``type: gpu``, ``productName`` (the card name,
  dashes made spaces: ``NVIDIA-A10`` → ``NVIDIA A10``, which capacity-card reads back as
  ``NVIDIA-A10``), ``index`` — and capacity ``memory`` (the model's memory). One DeviceClass,
  ``gpu.nvidia.com``, selects them.
* **Sharing.** As in the MPS form, a seeded choice of whole nodes holding about the fraction of
  GPU demand that comes from fractional pods *shares* its GPUs: their devices allow multiple
  allocations (consumable capacity) with a ``cores`` capacity of 100 (a request that names none
  takes all of it) and ``memory`` that a share does not consume (the trace gives no GPU memory).
  Whole-GPU claims select devices that are not shared, so gangs of 8 still find 8-GPU nodes.
* **Pods.** ``num_gpu`` whole GPUs: the template ``gpu-<n>`` (``count: n`` of devices that do
  not allow multiple allocations). ``gpu_milli`` < 1000 of one GPU: the template
  ``gpu-share-<pct>`` (one shared device, ``capacity.requests: {cores: pct}``, pct =
  ``gpu_milli / 10`` rounded up, as the vGPU form's compute share). The simulated resourceclaim
  controller makes each pod's claim from its template, binds write the allocation, and the
  claims are freed when the pods are gone (docs/dra.md).
* **Quota.** Card quota (``volcano.sh/card.quota``) in cards of the model, a share charged its
  part of the device (capacity-card, docs/dra.md); ``volcano.sh/card.request`` in cards rounded
  up. Without ``--config`` the trace runs Volcano's default configuration, as the MPS form does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidesched.sim.trace import CardModel, TraceNode, TracePod

DRA = "dra"
DRIVER = "gpu.nvidia.com"
DEVICE_CLASS = "gpu.nvidia.com"
_API = "resource.k8s.io/v1"
_SHARED = "device.allowMultipleAllocations"


def product_name(card: "CardModel") -> str:
    """The productName a driver would write for the card (capacity-card makes it the card name)."""
    return card.name.replace("-", " ")


def _device(j: int, card: "CardModel", shared: bool) -> dict[str, Any]:
    memory: dict[str, Any] = {"value": f"{card.memory_mib}Mi"}
    device: dict[str, Any] = {
        "name": f"gpu-{j}",
        "attributes": {"type": {"string": "gpu"}, "productName": {"string": product_name(card)}, "index": {"int": j}},
        "capacity": {"memory": memory},
    }
    if shared:
        device["allowMultipleAllocations"] = True
        memory["requestPolicy"] = {"default": "0"}
        device["capacity"]["cores"] = {"value": "100", "requestPolicy": {"default": "100"}}
    return device


def node_slice(n: "TraceNode", card: "CardModel", shared: bool) -> dict[str, Any]:
    """The ResourceSlice of one GPU node's devices."""
    return {
        "apiVersion": _API, "kind": "ResourceSlice", "metadata": {"name": f"{n.name}-{DRIVER}"},
        "spec": {"driver": DRIVER, "nodeName": n.name, "pool": {"name": n.name, "generation": 1, "resourceSliceCount": 1},
                 "devices": [_device(j, card, shared) for j in range(n.gpus)]},
    }


def device_class() -> dict[str, Any]:
    expression = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "gpu"'
    return {"apiVersion": _API, "kind": "DeviceClass", "metadata": {"name": DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def share_percent(p: "TracePod") -> int:
    return max(1, math.ceil(p.gpu_milli / 10))


def template_name(p: "TracePod") -> str:
    """``gpu-<n>`` or ``gpu-share-<pct>``, and the models the pod is held to (``gpu_spec``), if any."""
    base = f"gpu-share-{share_percent(p)}" if p.fractional else f"gpu-{p.num_gpu}"
    return "-".join((base, *(c.lower() for c in sorted(p.gpu_spec))))


def _template(name: str, exactly: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    return {"apiVersion": _API, "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": dict(exactly)}]}}}}


def templates(pods: Iterable["TracePod"], table: Mapping[str, "CardModel"], namespace: str) -> list[dict[str, Any]]:
    """One ResourceClaimTemplate per GPU shape of the pod list: the count or share, and the
    models its ``gpu_spec`` holds it to (a selector on productName; none: any model)."""
    out: dict[str, dict[str, Any]] = {}
    for p in pods:
        if p.num_gpu <= 0:
            continue
        name = template_name(p)
        if name in out:
            continue
        selectors = [_SHARED if p.fractional else f"!{_SHARED}"]
        if p.gpu_spec:
            products = ", ".join(f'"{product_name(table[c])}"' for c in sorted(p.gpu_spec))
            selectors.append(f'device.attributes["{DRIVER}"].productName in [{products}]')
        exactly: dict[str, Any] = {"deviceClassName": DEVICE_CLASS,
                                   "selectors": [{"cel": {"expression": e}} for e in selectors]}
        if p.fractional:
            exactly["capacity"] = {"requests": {"cores": str(share_percent(p))}}
        else:
            exactly["count"] = p.num_gpu
        out[name] = _template(name, exactly, namespace)
    return [out[k] for k in sorted(out)]


def card_equivalents(p: "TracePod") -> float:
    return share_percent(p) / 100 if p.fractional else float(p.num_gpu)


def pod_claims(template: str) -> dict[str, Any]:
    """What a pod template's spec gets: its claim from the template, used by its container."""
    return {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}
