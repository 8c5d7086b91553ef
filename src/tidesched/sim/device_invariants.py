"""``REL-2 device``: no GPU device is over-committed by the scheduler's binds (issue 26).

Checked after every session that bound vGPU pods, when the scheduler config enables
``deviceshare`` with ``deviceshare.VGPUEnable``, from the world's objects alone (the node's
``volcano.sh/node-vgpu-register`` and each pod's ``volcano.sh/vgpu-ids-new``), not from the
scheduler's own arrays:

* every vGPU pod bound this step carries an allocation for the node it is bound to, on devices
  the node registered, with as many devices per container as it asked for, each with the
  memory (MiB, or its percentage of that device) and the compute it asked for;
* on a node that received one, the pods holding each device (every pod on the node that is not
  finished, being deleted included: its device is busy until it is gone) together take no more
  than the device's memory, 100 % of its compute and its split count of pods, and a pod asking
  for 100 % of a device's compute holds it alone.

Pods on the node without an allocation annotation (another scheduler's) are not counted: the
rule judges what the allocations say.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidesched.model.vgpu import FULL_CORES
from tidesched.sim.world import FINISHED_POD_PHASES, Applied, World, pod_phase

RULE_DEVICE = "REL-2 device"


def deviceshare_vgpu(config: Any) -> bool:
    """Does the scheduler config enable deviceshare with vGPU?"""
    for tier in getattr(config, "tiers", []) or []:
        for opt in tier.plugins:
            if opt.name == "deviceshare":
                args: Mapping[str, Any] = opt.arguments or {}
                return args.get("deviceshare.VGPUEnable") is True
    return False


def check_devices(world: World, applied: Applied) -> list[str]:
    """Messages of the ``REL-2 device`` violations after the step's binds."""
    out: list[str] = []
    new_by_node: dict[str, list[str]] = {}
    for pk, node in applied.bound:
        rec = world.record("Pod", pk)
        if rec is not None and rec.vgpu is not None:
            new_by_node.setdefault(node, []).append(pk)
    for node_name in sorted(new_by_node):
        node = world.record("Node", node_name)
        if node is None:
            continue
        reg = node.vgpu
        if reg is None:
            out.append(f"vGPU pods {', '.join(sorted(new_by_node[node_name]))} bound to node {node_name}, "
                       "which registers no vGPU devices")
            continue
        devices = {d.uuid: d for d in reg.devices}
        for pk in sorted(new_by_node[node_name]):
            out += _allocation_problems(world, pk, node_name, devices)
        used: dict[str, list[int]] = {}  # uuid -> [MiB, cores %, pods, pods asking 100 %]
        holders: dict[str, list[str]] = {}
        for pk in sorted(world.pods_by_node.get(node_name, ())):
            pod, rec = world.get("Pod", pk), world.record("Pod", pk)
            if pod is None or rec is None or rec.vgpu is None or pod_phase(pod) in FINISHED_POD_PHASES:
                continue
            a = rec.vgpu_assignment
            if a is None or a.node not in ("", node_name):
                continue
            for use in a.uses():
                if use.uuid not in devices:
                    continue
                u = used.setdefault(use.uuid, [0, 0, 0, 0])
                u[0] += use.memory
                u[1] += use.cores
                u[2] += 1
                u[3] += use.cores >= FULL_CORES
                holders.setdefault(use.uuid, []).append(pk)
        for uuid in sorted(used):
            d = devices[uuid]
            mem, cores, pods, full = used[uuid]
            who = ", ".join(holders[uuid][:6])
            if mem > d.memory:
                out.append(f"device {uuid} of node {node_name} over-committed in memory: {mem} MiB of {d.memory} ({who})")
            if cores > FULL_CORES:
                out.append(f"device {uuid} of node {node_name} over-committed in compute: {cores} % ({who})")
            if pods > d.split:
                out.append(f"device {uuid} of node {node_name} holds {pods} pods, split count {d.split} ({who})")
            if full and pods > 1:
                out.append(f"device {uuid} of node {node_name} is shared by a pod asking for 100 % compute ({who})")
    return out


def _allocation_problems(world: World, pk: str, node_name: str, devices: Mapping[str, Any]) -> list[str]:
    rec = world.record("Pod", pk)
    if rec is None or rec.vgpu is None:
        return []
    a = rec.vgpu_assignment
    if a is None:
        return [f"vGPU pod {pk} bound to node {node_name} without a device allocation (volcano.sh/vgpu-ids-new)"]
    if a.node != node_name:
        return [f"vGPU pod {pk} bound to node {node_name} with devices allocated on node {a.node!r}"]
    out: list[str] = []
    if len(a.containers) != len(rec.vgpu.containers):
        return [f"vGPU pod {pk}: allocation for {len(a.containers)} containers, {len(rec.vgpu.containers)} ask for devices"]
    for k, (want, got) in enumerate(zip(rec.vgpu.containers, a.containers)):
        if len(got) != want.number or len({u.uuid for u in got}) != len(got):
            out.append(f"vGPU pod {pk} container {k}: {len(got)} devices allocated, {want.number} asked for")
        for u in got:
            d = devices.get(u.uuid)
            if d is None:
                out.append(f"vGPU pod {pk} allocated device {u.uuid}, which node {node_name} does not register")
                continue
            if u.memory != want.memory_on(d.memory) or u.cores != want.cores:
                out.append(f"vGPU pod {pk} allocated {u.memory} MiB / {u.cores} % on {u.uuid}, asked for "
                           f"{want.memory_on(d.memory)} MiB / {want.cores} %")
    return out
