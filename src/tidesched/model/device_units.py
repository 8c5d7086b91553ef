"""What one more unit of a request may take of each vGPU device, for all nodes at once: the device
view that FGD's fragmentation measure (``sim.fragmentation``) and placement policies built on it
read. A *unit* is one device's share of a request (compute in milli-GPU, memory in percent of
the device or MiB), checked as Volcano's walk checks one device (:mod:`tidesched.model.devices`),
without the pod's type or UUID filters.
"""

from __future__ import annotations

import numpy as np

from tidesched.model.devices import CORE, FULL, MEM, NOW, NUM, DeviceTable


def unit_fit(table: DeviceTable, core: int, percent: int | None, memory: int, which: str = NOW) -> np.ndarray:
    """Devices (rows × slots) that could take one more unit of a request now: ``core`` milli-GPU
    and ``percent`` % of the device's memory (or ``memory`` MiB), as Volcano's walk checks a
    device (no type or UUID filters). The device view of fragmentation (FGD) and the placement
    policies built on it read this."""
    use = table.state(which)
    ok = table.usable & (use[NUM] < table.split)
    need = (table.memory * percent) // 100 if percent is not None else memory
    ok &= table.memory - use[MEM] >= need
    ok &= use[CORE] + core <= FULL
    if core == FULL:
        ok &= use[NUM] == 0
    elif core == 0:
        ok &= use[CORE] < FULL
    return ok


def unit_caps(table: DeviceTable, which: str = NOW) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per device (rows × slots, int32), what one more unit may ask of it, -1 where it takes
    nothing: the most compute (milli-GPU; a 100 % request needs an unshared device, a 0 %
    request a device not full — both folded in), the most memory percent, the most MiB. A
    unit of (compute c, percent p or MiB m) fits a device exactly when ``max(c, 1) <= caps[0]``
    and ``p <= caps[1]`` (or ``m <= caps[2]``), as ``unit_fit`` checks it."""
    use = table.state(which)
    base = table.usable & (use[NUM] < table.split)
    free_core = FULL - use[CORE]
    core = np.where(use[NUM] == 0, free_core, np.minimum(free_core, FULL - 1))
    free_mem = table.memory - use[MEM]
    # memory * p // 100 <= free  ⟺  p <= ((free + 1) * 100 - 1) // memory
    safe = np.where(table.memory > 0, table.memory, 1)
    pct = np.where(table.memory > 0, ((free_mem + 1) * 100 - 1) // safe, 100)
    pct = np.where(free_mem >= 0, pct, -1)
    out = [np.where(base, a, -1).astype(np.int32) for a in (core, pct, free_mem)]
    return out[0], out[1], out[2]


def units_fit(caps: tuple[np.ndarray, np.ndarray, np.ndarray], core: np.ndarray, percent: np.ndarray,
              memory: np.ndarray) -> np.ndarray:
    """``unit_fit`` for many requests at once from ``unit_caps``: ``core``, ``percent`` (-1: ask
    ``memory`` MiB instead) and ``memory`` are int arrays of shape (requests, 1, 1); the answer is
    requests × rows × slots."""
    cap_core, cap_pct, cap_mem = caps
    ok = cap_core[None] >= np.maximum(core, 1)
    by_pct = percent >= 0
    ok &= np.where(by_pct, cap_pct[None] >= percent, cap_mem[None] >= memory)
    return ok
