"""The Alibaba GPU trace (openb) on per-device GPUs: Volcano vGPU nodes and pods (issue 26).

Used by :mod:`tidesched.sim.trace` when ``gpu_sharing="vgpu"`` (the default):

* **Nodes.** Every GPU node registers its GPUs as Volcano's vGPU device plugin does
  (``volcano.sh/node-vgpu-register``: ``GPU-<node>-<j>``, split count ``split`` — Volcano's default
  ``deviceSplitCount`` is 10 —, the model's memory, type ``NVIDIA-<card name>``, healthy,
  ``hami-core``) and advertises ``volcano.sh/vgpu-number`` (GPUs × split), ``vgpu-cores`` (100 per
  GPU), ``vgpu-memory`` (MiB) and ``vgpu-memory-percentage`` (100 per GPU: the trace's pods ask
  for memory as a share of the device, see below), beside the card labels of CARD-1
  (``nvidia.com/gpu.product``, ``.count``, ``.memory``). No node advertises ``nvidia.com/gpu``.
* **Pods.** ``gpu_milli`` < 1000 on one GPU becomes a vGPU request on one device: compute
  ``volcano.sh/vgpu-cores`` = ``gpu_milli / 10`` % (rounded up to a whole percent: the trace's
  values are all multiples of 10) and memory ``volcano.sh/vgpu-memory-percentage`` the same
  percent of whichever device it gets (the trace gives no GPU memory; the FGD paper treats GPU
  share as one number, and a percentage fits the ``A|B`` model lists whose memories differ).
  Whole-GPU pods (``num_gpu`` ≥ 1 at 1000) take ``num_gpu`` whole devices: 100 % compute, the
  whole memory, a device no other pod shares.
* **Quota.** Card quota and the card request are in cards of the product (a pod's card
  equivalents, rounded up for ``volcano.sh/card.request``, which takes whole counts).
* **Config.** Without ``--config`` the trace runs Volcano's default configuration (as the MPS
  form does) plus ``deviceshare`` with ``VGPUEnable``, ``SchedulePolicy: binpack`` and
  ``ScheduleWeight: 1``.

``gpu_sharing="mps"`` keeps the older approximation (whole nodes of MPS replicas).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tidesched.framework.config import DEFAULT_CONFIG_TEXT
from tidesched.model.vgpu import (
    NODE_REGISTER,
    VGPU_CORES,
    VGPU_MEMORY,
    VGPU_MEMORY_PERCENTAGE,
    VGPU_NUMBER,
    RegisteredDevice,
    encode_node_register,
)

if TYPE_CHECKING:
    from tidesched.sim.trace import CardModel, TraceNode, TracePod

VGPU = "vgpu"
MPS = "mps"
SHARING_MODES = (VGPU, MPS)
DEFAULT_SPLIT = 10  # Volcano's default deviceSplitCount
VGPU_CAPABILITY = (VGPU_NUMBER, VGPU_CORES, VGPU_MEMORY, VGPU_MEMORY_PERCENTAGE)

# Volcano's default configuration (the one the trace replays with otherwise) plus deviceshare.
TRACE_VGPU_CONFIG = DEFAULT_CONFIG_TEXT + """\
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.ScheduleWeight: 1
"""


def device_uuid(node: str, j: int) -> str:
    return f"GPU-{node}-{j}"


def node_devices(n: "TraceNode", card: "CardModel", split: int) -> list[RegisteredDevice]:
    return [RegisteredDevice(device_uuid(n.name, j), split, card.memory_mib, f"NVIDIA-{card.name}", True, "hami-core")
            for j in range(n.gpus)]


def node_resources(n: "TraceNode", card: "CardModel", split: int) -> dict[str, str]:
    """The vGPU device plugin's allocatable for the node's GPUs."""
    return {
        VGPU_NUMBER: str(n.gpus * split),
        VGPU_CORES: str(100 * n.gpus),
        VGPU_MEMORY: str(n.gpus * card.memory_mib),
        VGPU_MEMORY_PERCENTAGE: str(100 * n.gpus),
    }


def node_annotations(n: "TraceNode", card: "CardModel", split: int) -> dict[str, str]:
    return {NODE_REGISTER: encode_node_register(node_devices(n, card, split))}


def pod_resources(p: "TracePod") -> dict[str, str]:
    """The pod's vGPU limits (and, as the API server defaults them, requests)."""
    if p.fractional:
        pct = max(1, math.ceil(p.gpu_milli / 10))
        return {VGPU_NUMBER: "1", VGPU_CORES: str(pct), VGPU_MEMORY_PERCENTAGE: str(pct)}
    return {VGPU_NUMBER: str(p.num_gpu), VGPU_CORES: "100", VGPU_MEMORY_PERCENTAGE: "100"}


def card_equivalents(p: "TracePod") -> float:
    """Cards a pod is charged (capacity-card's card equivalents)."""
    if p.fractional:
        return max(1, math.ceil(p.gpu_milli / 10)) / 100
    return float(p.num_gpu)


def capability_totals(nodes: list[tuple["TraceNode", "CardModel"]], split: int) -> dict[str, int]:
    """Cluster totals of the vGPU resources (a queue's capability must name them: the capacity
    and proportion plugins read a dimension missing from a set capability as zero)."""
    out = {VGPU_NUMBER: 0, VGPU_CORES: 0, VGPU_MEMORY: 0, VGPU_MEMORY_PERCENTAGE: 0}
    for n, card in nodes:
        for k, v in node_resources(n, card, split).items():
            out[k] += int(v)
    return out


def merge_node(manifest: dict[str, Any], resources: Mapping[str, str], annotations: Mapping[str, str]) -> dict[str, Any]:
    """A node manifest with the vGPU allocatable and registration added."""
    st = manifest["status"]
    for key in ("allocatable", "capacity"):
        st[key] = {**st[key], **resources}
    manifest["metadata"]["annotations"] = {**manifest["metadata"].get("annotations", {}), **annotations}
    return manifest
