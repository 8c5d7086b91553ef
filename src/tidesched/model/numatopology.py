"""Volcano's Numatopology objects (``nodeinfo.volcano.sh/v1alpha1``, cluster-scoped, one per
node and named after it, written by Volcano's resource exporter on each node): the node's CPU
manager and topology manager policies, each CPU's NUMA node, socket and core, the CPUs free
for exclusive use, and what the kubelet reserves. The numa-aware plugin reads them
(``ClusterSnapshot.numatopologies``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidesched.model.fields import mapping, parse_int, parse_str, str_map
from tidesched.model.problems import ObjectError
from tidesched.model.quantity import QuantityError, milli_value
from tidesched.rules.cpu_assignment import CpuInfo

KIND = "Numatopology"
API_VERSION = "nodeinfo.volcano.sh/v1alpha1"
CPU_MANAGER_POLICY, TOPOLOGY_MANAGER_POLICY = "CPUManagerPolicy", "TopologyManagerPolicy"


def parse_cpuset(text: Any, field_name: str) -> frozenset[int]:
    """A Linux CPU list (``"0-3,8,10-11"``; ``""``: none), as k8s' cpuset.Parse reads it."""
    if not isinstance(text, str):
        raise ObjectError(field_name, f"expected a CPU list such as 0-3,8, got {type(text).__name__}")
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise ObjectError(field_name, f"expected a CPU list such as 0-3,8, got {text!r}") from None
        if a < 0 or b < a:
            raise ObjectError(field_name, f"invalid range {part!r} in {text!r}")
        out.update(range(a, b + 1))
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class Numatopology:
    name: str  # the node's
    policies: dict[str, str]
    allocatable: dict[str, frozenset[int]]  # resource (cpu) -> IDs free for exclusive use
    capacity: dict[str, int]
    cpu_detail: dict[int, CpuInfo]
    reserved_cpu_milli: int | None  # spec.resReserved.cpu; None when absent

    @property
    def key(self) -> str:
        return self.name

    @property
    def cpu_manager_policy(self) -> str:
        return self.policies.get(CPU_MANAGER_POLICY, "")

    @property
    def topology_manager_policy(self) -> str:
        return self.policies.get(TOPOLOGY_MANAGER_POLICY, "")


def parse_numatopology(obj: Mapping[str, Any]) -> Numatopology:
    meta = mapping(obj, "metadata", "metadata")
    name = parse_str(meta.get("name"), "metadata.name")
    if not name:
        raise ObjectError("metadata.name", "missing")
    spec = mapping(obj, "spec", "spec")
    allocatable: dict[str, frozenset[int]] = {}
    capacity: dict[str, int] = {}
    for res, info in mapping(spec, "numares", "spec.numares").items():
        if not isinstance(info, Mapping):
            raise ObjectError(f"spec.numares[{res}]", "expected a mapping with allocatable and capacity")
        allocatable[str(res)] = parse_cpuset(info.get("allocatable", ""), f"spec.numares[{res}].allocatable")
        capacity[str(res)] = parse_int(info.get("capacity"), f"spec.numares[{res}].capacity")
    detail: dict[int, CpuInfo] = {}
    for cpu, info in mapping(spec, "cpuDetail", "spec.cpuDetail").items():
        where = f"spec.cpuDetail[{cpu}]"
        if not isinstance(info, Mapping):
            raise ObjectError(where, "expected a mapping with numa, socket and core")
        detail[parse_int(cpu, where)] = CpuInfo(
            parse_int(info.get("numa"), f"{where}.numa"),
            parse_int(info.get("socket"), f"{where}.socket"),
            parse_int(info.get("core"), f"{where}.core"),
        )
    reserved = str_map(spec, "resReserved", "spec.resReserved")
    reserved_cpu = None
    if "cpu" in reserved:
        try:
            reserved_cpu = milli_value(reserved["cpu"])
        except QuantityError as exc:
            raise ObjectError("spec.resReserved[cpu]", str(exc)) from None
    return Numatopology(
        name=name,
        policies=str_map(spec, "policies", "spec.policies"),
        allocatable=allocatable,
        capacity=capacity,
        cpu_detail=detail,
        reserved_cpu_milli=reserved_cpu,
    )
