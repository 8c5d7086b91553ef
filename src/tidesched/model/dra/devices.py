"""Every DRA device of the cluster in one order, where each is usable, and what selects it.

:class:`DeviceIndex` lays the devices of all ResourceSlices out in kube-scheduler's search
order (pools by driver then name, slices by name, devices as listed), so "the first free
matching device of a node" is the lowest index among those the node reaches. Pools are read
as the allocator gathers them: only the newest generation counts; a pool missing slices of
that generation is incomplete and one with a device name twice is invalid — neither gives
devices. Each device is reachable from one node row (``row``) or from a set of rows
(``shared``: ``allNodes``, a node selector).

Selectors are evaluated once per device and kept (:meth:`DeviceIndex.matching`): a device's
attributes are static while its slice is, so a request is a boolean vector over the devices,
and the usual question — how many free matching devices does each node have — is one
``bincount``. The index is built once per set of slices, classes and nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from tidesched.model.dra.nodes import NodeReach
from tidesched.model.dra.objects import Device, DeviceClass, ResourceSlice, SubRequest
from tidesched.model.quantity import parse_quantity
from tidesched.rules.dra_cel import CelError, DeviceCel

_CEL: DeviceCel | None = None


def device_cel() -> DeviceCel:
    global _CEL
    if _CEL is None:
        _CEL = DeviceCel(parse_quantity)
    return _CEL


@dataclass(frozen=True, slots=True)
class Pool:
    driver: str
    name: str
    complete: bool
    invalid: str  # why the pool cannot be used, "" when it can
    counters: Mapping[str, Mapping[str, Decimal]]


@dataclass(frozen=True, slots=True)
class Entry:
    """One device in search order."""

    driver: str
    pool: str
    slice: ResourceSlice
    device: Device
    reach: NodeReach  # the device's own node selection, else its slice's

    @property
    def id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device.name)

    @property
    def node_local(self) -> bool:
        return bool(self.reach.node_name) or self.device.binds_to_node


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """resourceclaim.ToleratesTaint: effect and key must match (empty: any), Exists ignores
    the value, Equal (the default) compares it."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")


def tainted(device: Device, tolerations: Sequence[Mapping[str, Any]]) -> bool:
    """A NoSchedule or NoExecute taint no toleration covers keeps the device from allocation."""
    for taint in device.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in tolerations):
            return True
    return False


class DeviceIndex:
    def __init__(self, slices: Sequence[ResourceSlice], classes: Mapping[str, DeviceClass],
                 node_names: Sequence[str], node_labels: Sequence[Mapping[str, str]]) -> None:
        self.classes = classes
        self.pools: dict[tuple[str, str], Pool] = {}
        by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
        for s in slices:
            by_pool.setdefault((s.driver, s.pool), []).append(s)
        entries: list[Entry] = []
        for key in sorted(by_pool):
            group = by_pool[key]
            gen = max(s.generation for s in group)
            current = sorted((s for s in group if s.generation == gen), key=lambda s: s.name)
            complete = len(current) == current[0].slice_count
            names: set[str] = set()
            invalid = ""
            counters: dict[str, Mapping[str, Decimal]] = {}
            for s in current:
                for cs, values in s.counters.items():
                    if cs in counters:
                        invalid = f"duplicate counter set name {cs}"
                    counters[cs] = values
                for d in s.devices:
                    if d.name in names:
                        invalid = f"duplicate device name {d.name}"
                    names.add(d.name)
            self.pools[key] = Pool(key[0], key[1], complete, invalid, counters)
            if not complete or invalid:
                continue
            for s in current:
                for d in s.devices:
                    reach = d.reach if s.per_device and d.reach is not None else s.reach
                    entries.append(Entry(key[0], key[1], s, d, reach))
        self.entries = entries
        self.ids = {e.id: i for i, e in enumerate(entries)}
        n, rows = len(entries), {name: i for i, name in enumerate(node_names)}
        self.n_nodes = len(node_names)
        # Node-local devices: their row; others: -1 and a mask of the rows that reach them.
        self.row = np.full(n, -1, dtype=np.int64)
        self.shared: dict[int, np.ndarray] = {}
        masks: dict[NodeReach, np.ndarray] = {}
        for i, e in enumerate(entries):
            if e.reach.node_name:
                self.row[i] = rows.get(e.reach.node_name, -2)  # -2: a node not in the table
            elif not e.reach.none:
                mask = masks.get(e.reach)
                if mask is None:
                    mask = masks[e.reach] = np.array(
                        [e.reach.matches(name, labels) for name, labels in zip(node_names, node_labels)], dtype=bool)
                self.shared[i] = mask
            else:
                self.row[i] = -2
        self.local = self.row >= 0
        self.multi = np.array([e.device.allow_multiple for e in entries], dtype=bool)
        self.counted = np.array([bool(e.device.consumes) for e in entries], dtype=bool)
        # Capacity with a request policy can refuse a request (consumable capacity): such devices
        # need the search; plain capacity (a GPU's memory) never does.
        self.policed = np.array([any(c.policy for c in e.device.capacity.values()) for e in entries], dtype=bool)
        self.unusable = np.array([bool(e.device.binding_conditions) for e in entries], dtype=bool)
        self._data: list[dict[str, Any] | None] = [None] * n
        self._matching: dict[object, tuple[np.ndarray, str]] = {}
        # What readers work out from the devices once per index (capacity-card's card models).
        self.derived: dict[object, Any] = {}
        # Rows an incomplete or invalid pool reaches: allocationMode All fails there, as
        # kube-scheduler will not allocate "all" devices without seeing all of them.
        self.bad_rows = np.zeros(self.n_nodes, dtype=bool)
        for key, pool in self.pools.items():
            if pool.complete and not pool.invalid:
                continue
            for s in by_pool[key]:
                if s.reach.node_name in rows:
                    self.bad_rows[rows[s.reach.node_name]] = True
                elif s.reach.all_nodes or s.reach.selector is not None or s.per_device:
                    self.bad_rows |= True if s.reach.all_nodes or s.per_device else np.array(
                        [s.reach.matches(nm, lb) for nm, lb in zip(node_names, node_labels)], dtype=bool)

    def __len__(self) -> int:
        return len(self.entries)

    # -- reach ----------------------------------------------------------------------------

    def reachable(self, row: int) -> np.ndarray:
        """Indices of the devices node ``row`` reaches, in search order."""
        mask = self.row == row
        for i, m in self.shared.items():
            if m[row]:
                mask[i] = True
        return np.flatnonzero(mask)

    def per_node(self, selected: np.ndarray) -> np.ndarray:
        """How many of the selected devices each node reaches (a count per row)."""
        counts = np.bincount(self.row[selected & self.local], minlength=self.n_nodes)[: self.n_nodes]
        if self.shared:
            counts = counts.astype(np.int64, copy=True)
            for i, m in self.shared.items():
                if selected[i]:
                    counts += m
        return counts

    # -- selectors --------------------------------------------------------------------------

    def data(self, i: int) -> dict[str, Any]:
        d = self._data[i]
        if d is None:
            e = self.entries[i]
            attrs = {k: v for k, v in e.device.attributes.items() if not (isinstance(v, tuple) and v[0] == "list")}
            caps = {k: str(c.value) for k, c in e.device.capacity.items()}
            d = self._data[i] = device_cel().device_data(e.driver, attrs, caps, e.device.allow_multiple)
        return d

    def matching(self, sub: SubRequest) -> tuple[np.ndarray, str]:
        """Which devices the request's class and own selectors select (and no untolerated taint
        keeps from it), and the first evaluation error, "" when none. A device whose selector
        fails to evaluate does not match. The vector is shared: do not modify it."""
        key = (sub.class_name, sub.selectors, _freeze(sub.tolerations))
        hit = self._matching.get(key)
        if hit is not None:
            return hit
        cls = self.classes.get(sub.class_name)
        n = len(self.entries)
        out = np.zeros(n, dtype=bool)
        error = ""
        if cls is not None:
            cel = device_cel()
            try:
                programs = [cel.compile(e) for e in cls.selectors], [cel.compile(e) for e in sub.selectors]
            except CelError as exc:
                hit = self._matching[key] = (out, f"CEL compile error: {exc}")
                return hit
            for i, e in enumerate(self.entries):
                if self.unusable[i]:
                    continue
                data = self.data(i)
                ok = True
                for which, group in enumerate(programs):
                    for sel in group:
                        try:
                            if not sel.matches(data):
                                ok = False
                                break
                        except CelError as exc:
                            ok = False
                            if not error:
                                owner = f"class {cls.name}" if which == 0 else f"request {sub.name}"
                                error = f"{owner}: selector {sel.expression!r} on device {'/'.join(e.id)}: {exc}"
                            break
                    if not ok:
                        break
                if ok and sub.tolerations is not None and tainted(e.device, sub.tolerations):
                    ok = False
                out[i] = ok
        out.flags.writeable = False
        hit = self._matching[key] = (out, error)
        return hit


def _freeze(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return tuple(_freeze(v) for v in obj)
    return obj
