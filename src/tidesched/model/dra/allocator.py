"""Allocating a pod's claims on one node, as kube-scheduler's structured allocator does
(k8s.io/dynamic-resource-allocation/structured, the "incubating" variant 1.36 runs).

An exhaustive search: claims in order, each claim's requests in order, each request's devices
one after another; for a device, the node's reachable devices in search order (pools by
driver and name, slices by name), skipping those in use, not selected, over their capacity
or counters, or breaking a constraint; every choice is undone when what follows cannot be
completed. A ``firstAvailable`` request takes the first alternative that completes. The
first full solution is the answer, so the devices chosen are kube-scheduler's. Devices of
one request are tried as combinations (in index order), never as permutations.

What it needs of the world is :class:`Use`: which devices are taken (by allocated claims and
by this session's allocations), the capacity consumed of shareable devices, and the shared
counters consumed.
"""

from __future__ import annotations

import functools
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np

from tidesched.model.dra.devices import DeviceIndex
from tidesched.model.dra.nodes import node_name_selector
from tidesched.model.dra.objects import ALL, ALLOCATION_RESULTS_MAX, Capacity, ClaimSpec, SubRequest
from tidesched.model.quantity import parse_quantity

# Devices tried per node and pod before giving up (kube-scheduler bounds a Filter call by time,
# DRASchedulerFilterTimeout, 10 s by default); a pod over it fails that node with a reason.
SEARCH_BUDGET = 200_000


class AllocationError(ValueError):
    """The claims cannot be allocated on any node as written (kube-scheduler: a Filter error)."""


@dataclass
class Use:
    """What is taken: exclusive devices, capacity consumed of shareable ones, counters."""

    in_use: np.ndarray  # bool per device
    consumed: dict[int, dict[str, Decimal]] = field(default_factory=dict)
    counters: dict[tuple[str, str, str], dict[str, Decimal]] = field(default_factory=dict)

    def copy(self) -> "Use":
        return Use(self.in_use.copy(), {k: dict(v) for k, v in self.consumed.items()},
                   {k: dict(v) for k, v in self.counters.items()})

    def take(self, index: DeviceIndex, i: int, consumed: Mapping[str, Decimal] | None, sign: int = 1) -> None:
        """Charge (sign 1) or free (sign -1) device ``i``: its exclusive use, or for a shareable
        device the capacity one share consumes; the counters the device consumes are charged
        while anything holds it."""
        entry = index.entries[i]
        if consumed is None:
            was = bool(self.in_use[i])
            self.in_use[i] = sign > 0
            now = sign > 0
        else:
            was = i in self.consumed
            acc = self.consumed.setdefault(i, {})
            for k, v in consumed.items():
                acc[k] = acc.get(k, Decimal(0)) + sign * v
            if sign < 0 and not any(acc.values()):
                del self.consumed[i]
            now = i in self.consumed
        if was != now:
            for cs, values in entry.device.consumes:
                acc = self.counters.setdefault((entry.driver, entry.pool, cs), {})
                for k, v in values.items():
                    acc[k] = acc.get(k, Decimal(0)) + (v if now else -v)


@dataclass(frozen=True)
class Chosen:
    index: int
    request: str
    admin: bool
    shared: bool  # a share of a device that allows multiple allocations (gets a shareID)
    consumed: Mapping[str, Decimal] | None  # for shareable devices
    tolerations: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class ClaimAllocation:
    """One claim's allocation: the devices and the ``status.allocation`` to write."""

    devices: tuple[Chosen, ...]
    result: Mapping[str, Any]


# -- consumable capacity (structured/internal/incubating/consumable_capacity.go) ------------


@functools.lru_cache(maxsize=1024)
def _parsed(raw: str | int | float) -> Decimal:
    return parse_quantity(raw)


def _q(raw: Any) -> Decimal:
    """A request policy's quantity (the same few texts, parsed once: the search reads them for
    every device it tries)."""
    return _parsed(raw) if isinstance(raw, (str, int, float)) else parse_quantity(raw)


def _consumed_value(requested: Decimal | None, cap: Capacity) -> Decimal:
    policy = cap.policy
    if requested is None:
        if policy is not None and policy.get("default") is not None:
            return _q(policy["default"])
        return cap.value
    if policy is None:
        return requested
    rng = policy.get("validRange")
    if isinstance(rng, Mapping) and rng.get("min") is not None:
        lo = _q(rng["min"])
        if requested < lo:
            return lo
        if rng.get("step") is None:
            return requested
        step = _q(rng["step"])
        n = math.ceil(math.ceil(requested) - lo) / step if step else 0
        return lo + step * math.ceil(n)
    valid = policy.get("validValues")
    if valid:
        for v in (_q(x) for x in valid):
            if requested <= v:
                return v
    return requested


def _violates(value: Decimal, cap: Capacity) -> bool:
    policy = cap.policy
    if policy is None:
        return False
    if policy.get("default") is not None and value == _q(policy["default"]):
        return False
    rng = policy.get("validRange")
    if isinstance(rng, Mapping):
        if rng.get("max") is not None and value > _q(rng["max"]):
            return True
        if rng.get("step") is not None:
            step, lo = _q(rng["step"]), _q(rng.get("min") or 0)
            if step and (math.ceil(value) - lo) % step:
                return True
        return False
    valid = policy.get("validValues")
    if valid:
        return all(value != _q(v) for v in valid)
    return False


def capacity_fits(sub: SubRequest, capacity: Mapping[str, Capacity], taken: Mapping[str, Decimal],
                  allocating: Mapping[str, Decimal]) -> dict[str, Decimal] | None:
    """What the request consumes of each capacity of the device, or None when it does not fit
    (a capacity the device lacks, a value the request policy forbids, over the device's value)."""
    if any(name not in capacity for name in sub.capacity):
        return None
    out = {}
    for name, cap in capacity.items():
        value = _consumed_value(sub.capacity.get(name), cap)
        if _violates(value, cap):
            return None
        if taken.get(name, Decimal(0)) + allocating.get(name, Decimal(0)) + value > cap.value:
            return None
        out[name] = value
    return out


# -- the search -----------------------------------------------------------------------------


@dataclass
class _Slot:
    """One request alternative to satisfy."""

    claim: int
    sub: SubRequest
    base: str  # the request's name (constraints name requests)
    need: int
    devices: np.ndarray  # candidate device indices for this node, in search order


class _Search:
    def __init__(self, index: DeviceIndex, use: Use, specs: Sequence[ClaimSpec], row: int,
                 budget: int) -> None:
        self.index, self.use, self.specs, self.row = index, use, specs, row
        self.reach = index.reachable(row)
        self.budget = budget
        self.allocating: dict[int, set[int]] = {}  # device -> claims taking it exclusively
        self.allocating_cap: dict[int, dict[str, Decimal]] = {}
        self.counters: dict[tuple[str, str, str], dict[str, Decimal]] = {}
        self.chosen: list[list[Chosen]] = [[] for _ in specs]
        self.constraint_state: list[list[list[Any]]] = [[[] for _ in s.constraints] for s in specs]
        self.timed_out = False

    def candidates(self, sub: SubRequest) -> np.ndarray:
        match, _err = self.index.matching(sub)
        return self.reach[match[self.reach]]

    # Requests are walked as (claim, request, alternative); devices with _pick.
    def run(self) -> bool:
        return self._request(0, 0)

    def _request(self, c: int, r: int) -> bool:
        if c == len(self.specs):
            return True
        spec = self.specs[c]
        if r == len(spec.requests):
            return self._request(c + 1, 0)
        req = spec.requests[r]
        for sub in req.alternatives:
            cands = self.candidates(sub)
            if sub.mode == ALL:
                if not len(cands) or self.index.bad_rows[self.row]:
                    continue
                need = len(cands)
            else:
                need = sub.count
            if len(self.chosen[c]) + need > ALLOCATION_RESULTS_MAX:
                continue
            slot = _Slot(c, sub, req.name, need, cands)
            if self._pick(slot, 0, 0, r):
                return True
            if self.timed_out:
                return False
        return False

    def _pick(self, slot: _Slot, k: int, start: int, r: int) -> bool:
        """The ``k``-th device of the slot, from candidate ``start`` on (combinations only)."""
        if k == slot.need:
            return self._request(slot.claim, r + 1)
        self.budget -= 1
        if self.budget < 0:
            self.timed_out = True
            return False
        cands = slot.devices
        if slot.sub.mode == ALL:  # every candidate, in order: one must not fail
            undo = self._try(slot, int(cands[k]))
            if undo is None:
                return False
            if self._pick(slot, k + 1, 0, r):
                return True
            undo()
            return False
        for pos in range(start, len(cands) - (slot.need - k - 1)):
            undo = self._try(slot, int(cands[pos]))
            if undo is None:
                continue
            if self._pick(slot, k + 1, pos + 1, r):
                return True
            undo()
            if self.timed_out:
                return False
        return False

    def _try(self, slot: _Slot, i: int) -> Any:
        index, use, sub = self.index, self.use, slot.sub
        entry = index.entries[i]
        device = entry.device
        admin = bool(sub.admin_access)
        multi = device.allow_multiple
        claims_on = self.allocating.get(i, set())
        if admin:
            if not multi and slot.claim in claims_on:
                return None
        elif use.in_use[i] or claims_on:
            return None
        consumed = None
        if device.capacity or sub.capacity:
            consumed = capacity_fits(sub, device.capacity, use.consumed.get(i, {}) if multi else {},
                                     self.allocating_cap.get(i, {}) if multi else {})
            if consumed is None:
                return None
        if multi and not admin and (i in use.consumed or i in self.allocating_cap):
            counted = False  # counters were taken by the device's first share
        else:
            counted = bool(device.consumes)
        if counted and not self._counters_fit(entry, 1):
            return None
        # Constraints of the claim.
        added = []
        for ci, con in enumerate(self.specs[slot.claim].constraints):
            if con.requests and slot.base not in con.requests and slot.sub.name not in con.requests:
                continue
            value = lookup_attribute(device.attributes, entry.driver, con.attribute)
            held = self.constraint_state[slot.claim][ci]
            if value is None or (con.distinct and value in held) or (not con.distinct and held and held[0] != value):
                for cj in added:
                    self.constraint_state[slot.claim][cj].pop()
                if counted:
                    self._counters_fit(entry, -1)
                return None
            held.append(value)
            added.append(ci)
        if not multi:
            self.allocating.setdefault(i, set()).add(slot.claim)
        shared = multi and consumed is not None
        if shared:
            acc = self.allocating_cap.setdefault(i, {})
            for k, v in consumed.items():
                acc[k] = acc.get(k, Decimal(0)) + v
        self.chosen[slot.claim].append(Chosen(i, sub.name, admin, shared, consumed if multi else None, sub.tolerations))

        def undo() -> None:
            self.chosen[slot.claim].pop()
            for cj in added:
                self.constraint_state[slot.claim][cj].pop()
            if not multi:
                self.allocating[i].discard(slot.claim)
            elif consumed is not None:
                acc = self.allocating_cap[i]
                for k, v in consumed.items():
                    acc[k] -= v
                if not any(acc.values()):
                    del self.allocating_cap[i]
            if counted:
                self._counters_fit(entry, -1)

        return undo

    def _counters_fit(self, entry: Any, sign: int) -> bool:
        pool = self.index.pools[(entry.driver, entry.pool)]
        for cs, values in entry.device.consumes:
            key = (entry.driver, entry.pool, cs)
            acc = self.counters.setdefault(key, {})
            for k, v in values.items():
                acc[k] = acc.get(k, Decimal(0)) + sign * v
        if sign < 0:
            return True
        for cs, values in entry.device.consumes:
            key = (entry.driver, entry.pool, cs)
            total = pool.counters.get(cs, {})
            taken = self.use.counters.get(key, {})
            for k in values:
                if taken.get(k, Decimal(0)) + self.counters[key][k] > total.get(k, Decimal(0)):
                    self._counters_fit(entry, -1)
                    return False
        return True


def lookup_attribute(attributes: Mapping[str, Any], driver: str, name: str) -> Any:
    """A constraint's attribute of a device: the fully qualified name, or the bare name when
    its domain is the device's driver (lookupAttribute)."""
    if name in attributes:
        value = attributes[name]
    else:
        domain, _, ident = name.partition("/")
        if domain != driver or ident not in attributes:
            return None
        value = attributes[ident]
    if isinstance(value, tuple) and value and value[0] == "list":
        return None
    return value


def allocate(index: DeviceIndex, use: Use, specs: Sequence[ClaimSpec], classes: Mapping[str, Any],
             row: int, node_name: str, budget: int = SEARCH_BUDGET,
             build: bool = True) -> list[ClaimAllocation] | None | str | bool:
    """The allocations of ``specs`` on node ``row``, kube-scheduler's first solution (True
    instead, without ``build``: only whether there is one); None when there is none; a message
    when the search ran out of budget."""
    search = _Search(index, use, specs, row, budget)
    if not search.run():
        return "timed out trying to allocate devices" if search.timed_out else None
    if not build:
        return True
    return [_result(index, spec, chosen, classes, node_name) for spec, chosen in zip(specs, search.chosen)]


def _result(index: DeviceIndex, spec: ClaimSpec, chosen: list[Chosen], classes: Mapping[str, Any],
            node_name: str) -> ClaimAllocation:
    results = []
    for ch in chosen:
        e = index.entries[ch.index]
        r: dict[str, Any] = {"request": ch.request, "driver": e.driver, "pool": e.pool, "device": e.device.name}
        if ch.admin:
            r["adminAccess"] = True
        if ch.tolerations:
            r["tolerations"] = [dict(t) for t in ch.tolerations]
        if ch.shared:  # drawn when the result is written, not for every device a search tries
            r["shareID"] = str(uuid.uuid4())
        if ch.consumed:
            r["consumedCapacity"] = {k: _quantity_text(v) for k, v in ch.consumed.items()}
        results.append(r)
    # Configs: each used class's configs once (naming every request that used it), then the
    # claim's own for the requests chosen (allocator: "Populate configs").
    config: list[dict[str, Any]] = []
    by_class: dict[str, tuple[int, int]] = {}
    picked = {ch.request.split("/", 1)[0]: ch.request for ch in chosen}
    for req in spec.requests:
        name = picked.get(req.name)
        if name is None:
            continue
        sub = next(s for s in req.alternatives if s.name == name)
        cls = classes.get(sub.class_name)
        if cls is None:
            continue
        if sub.class_name in by_class:
            a, b = by_class[sub.class_name]
            for j in range(a, b):
                config[j]["requests"].append(name)
            continue
        start = len(config)
        for c in cls.config:
            config.append({"source": "FromClass", "requests": [name], **{k: v for k, v in c.items() if k != "requests"}})
        by_class[sub.class_name] = (start, len(config))
    for c in spec.config:
        wanted = c.get("requests") or []
        body = {k: v for k, v in c.items() if k != "requests"}
        if not wanted:
            config.append({"source": "FromClaim", **body})
            continue
        for req in spec.requests:
            name = picked.get(req.name, "")
            if req.name in wanted or (req.first_available and name in wanted):
                config.append({"source": "FromClaim", "requests": list(wanted), **body})
    allocation: dict[str, Any] = {"devices": {"results": results}}
    if config:
        allocation["devices"]["config"] = config
    selector = _node_selector(index, chosen, node_name)
    if selector is not None:
        allocation["nodeSelector"] = selector
    return ClaimAllocation(tuple(chosen), allocation)


def _node_selector(index: DeviceIndex, chosen: list[Chosen], node_name: str) -> dict[str, Any] | None:
    exprs: list[Any] = []
    fields: list[Any] = []
    for ch in chosen:
        e = index.entries[ch.index]
        if e.reach.node_name or e.device.binds_to_node:
            return node_name_selector(node_name)
        sel = e.reach.selector
        if sel is not None and len(sel.raw.get("nodeSelectorTerms") or ()) == 1:
            term = sel.raw["nodeSelectorTerms"][0]
            for src, dst in ((term.get("matchExpressions") or (), exprs), (term.get("matchFields") or (), fields)):
                for req in src:
                    if req not in dst:
                        dst.append(req)
    if not exprs and not fields:
        return None
    term: dict[str, Any] = {}
    if fields:
        term["matchFields"] = fields
    if exprs:
        term["matchExpressions"] = exprs
    return {"nodeSelectorTerms": [term]}


def _quantity_text(v: Decimal) -> str:
    return str(int(v)) if v == v.to_integral_value() else str(v.normalize())
