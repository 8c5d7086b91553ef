"""The CPU manager's part in NUMA-aware placement, as Volcano v1.15.1's numa-aware plugin does
it (``plugins/numaaware/provider/cpumanager``, after the kubelet's static CPU manager): the
NUMA hints for a container's exclusive CPUs, and which CPUs it would get.

A container gets exclusive CPUs only for a whole number of requested cores. CPUs reserved on
the node (``resReserved.cpu``, rounded up) are taken out first, as the kubelet reserves them.
CPUs are taken topology-aware: whole sockets while the request needs one, then whole cores,
then single CPUs on the sockets already used.

Volcano's CPU orders are comparators chained with ``||`` (not orders: Go's sort decides among
them); here they are the lexicographic orders they spell out, the kubelet's. Its free sockets
and cores are, as in Volcano, the socket and core IDs that are also IDs of free CPUs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from tidesched.rules.numa_hints import Hint, bits, iterate_masks


@dataclass(frozen=True, slots=True)
class CpuInfo:
    numa: int
    socket: int
    core: int


CpuDetails = Mapping[int, CpuInfo]
_ZERO = CpuInfo(0, 0, 0)


class _Details:
    """k8s CPUDetails over a subset of CPUs."""

    def __init__(self, details: CpuDetails, cpus: Iterable[int]) -> None:
        self.all = details
        self.cpus = {c for c in cpus if c in details}

    def sockets(self) -> set[int]:
        return {self.all[c].socket for c in self.cpus}

    def cores(self) -> set[int]:
        return {self.all[c].core for c in self.cpus}

    def cores_in_socket(self, s: int) -> set[int]:
        return {self.all[c].core for c in self.cpus if self.all[c].socket == s}

    def cpus_in_cores(self, *cores: int) -> set[int]:
        return {c for c in self.cpus if self.all[c].core in cores}

    def cpus_in_socket(self, s: int) -> set[int]:
        return {c for c in self.cpus if self.all[c].socket == s}


@dataclass(frozen=True)
class Topology:
    details: CpuDetails

    @property
    def num_cpus(self) -> int:
        return len(self.details)

    @property
    def num_cores(self) -> int:
        # The resource exporter's core IDs are unique per socket only.
        return len({(i.socket, i.core) for i in self.details.values()})

    @property
    def num_sockets(self) -> int:
        return len({i.socket for i in self.details.values()})

    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0

    def numa_nodes(self) -> list[int]:
        return sorted({i.numa for i in self.details.values()})

    def cpus_in_numa(self, *nodes: int) -> set[int]:
        return {c for c, i in self.details.items() if i.numa in nodes}


class NotEnoughCpus(Exception):
    pass


def take_by_topology(topo: Topology, available: Iterable[int], count: int) -> set[int]:
    """Volcano takeByTopology: ``count`` CPUs out of ``available``, or NotEnoughCpus."""
    details = _Details(topo.details, available)
    result: set[int] = set()
    need = count

    def take(cpus: set[int]) -> None:
        nonlocal need, details
        result.update(cpus)
        details = _Details(topo.details, details.cpus - result)
        need -= len(cpus)

    if need < 1:
        return result
    if need > len(details.cpus):
        raise NotEnoughCpus("not enough cpus available to satisfy request")
    per_socket, per_core = topo.cpus_per_socket(), topo.cpus_per_core()
    if need >= per_socket:
        for s in sorted(details.sockets() & details.cpus):
            take(details.cpus_in_socket(s))
            if need < 1:
                return result
            if need < per_socket:
                break
    if need >= per_core:
        free = details.cpus
        sockets = sorted(details.sockets(), key=lambda s: (len(details.cores_in_socket(s) & free), s))
        for core in [c for s in sockets for c in sorted(details.cores_in_socket(s) & free)]:
            take(details.cpus_in_cores(core))
            if need < 1:
                return result
            if need < per_core:
                break
    for cpu in _free_cpus(topo, details, result):
        if need >= 1:
            take({cpu})
        if need < 1:
            return result
    raise NotEnoughCpus("failed to allocate cpus")


def _free_cpus(topo: Topology, details: _Details, result: set[int]) -> list[int]:
    """Free CPUs core by core: cores on sockets already used first, then on the sockets with
    fewest free CPUs, then with fewest free CPUs on the core, then by socket and core."""
    whole = _Details(topo.details, topo.details)

    def key(core: int) -> tuple[int, ...]:
        socket = topo.details[min(whole.cpus_in_cores(core))].socket
        return (
            -len(whole.cpus_in_socket(socket) & result),
            len(details.cpus_in_socket(socket)),
            len(details.cpus_in_cores(core)),
            socket,
            core,
        )

    out: list[int] = []
    for core in sorted(details.cores(), key=key):
        out.extend(sorted(details.cpus_in_cores(core)))
    return out


def exclusive_cpus(cores: Decimal | None) -> int:
    """The CPUs a container gets exclusively: its cpu request when a whole number of cores,
    else 0 (Volcano guaranteedCPUs)."""
    if cores is None or cores != cores.to_integral_value():
        return 0
    return int(cores)


def _reserved(topo: Topology, reserved_milli: int | None) -> set[int]:
    if not reserved_milli:
        return set()
    try:
        return take_by_topology(topo, topo.details, math.ceil(reserved_milli / 1000))
    except NotEnoughCpus:
        return set()  # Volcano ignores the error: nothing reserved


def cpu_hints(topo: Topology, available: set[int], request: int, reserved_milli: int | None) -> list[Hint]:
    """Volcano generateCPUTopologyHints: every NUMA combination whose free CPUs hold the
    request; preferred are those with as few nodes as any combination that could hold it."""
    free = available - _reserved(topo, reserved_milli)
    nodes = topo.numa_nodes()
    min_size = len(nodes)
    found: list[int] = []
    for mask in iterate_masks(nodes):
        in_mask = bits(mask)
        if len(topo.cpus_in_numa(*in_mask)) >= request and mask.bit_count() < min_size:
            min_size = mask.bit_count()
        # A free CPU the details do not describe counts on NUMA node 0 (Go's zero CPUInfo).
        if sum(1 for c in free if topo.details.get(c, _ZERO).numa in in_mask) >= request:
            found.append(mask)
    return [Hint(m, m.bit_count() == min_size) for m in found]


def allocate_cpus(topo: Topology, available: set[int], request: int, best: Hint, reserved_milli: int | None) -> set[int]:
    """Volcano cpuMng.Allocate: the request's CPUs, aligned to the best hint's nodes first;
    empty when they cannot be found."""
    free = available - _reserved(topo, reserved_milli)
    result: set[int] = set()
    try:
        if best.affinity is not None:
            aligned = set()
            for n in bits(best.affinity):
                aligned |= free & topo.cpus_in_numa(n)
            result |= take_by_topology(topo, aligned, min(request, len(aligned)))
        result |= take_by_topology(topo, free - result, request - len(result))
    except NotEnoughCpus:
        return set()
    return result
