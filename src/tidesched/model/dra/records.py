"""The DRA records of a snapshot or of the cluster cache, by kind and key, with what is
derived from them once: the device index (per set of slices, classes and nodes) and which
devices allocated claims hold (per set of claims)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tidesched.model.dra.allocator import Use
from tidesched.model.dra.devices import DeviceIndex
from tidesched.model.dra.objects import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice

KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")


@dataclass
class DraObjects:
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)  # by namespace/name
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    static_rev: int = 0  # moves when classes or slices change
    claims_rev: int = 0
    _use: tuple[int, int, Use] | None = field(default=None, repr=False)

    def by_kind(self, kind: str) -> dict[str, Any]:
        return {"DeviceClass": self.classes, "ResourceSlice": self.slices,
                "ResourceClaim": self.claims, "ResourceClaimTemplate": self.templates}[kind]

    def put(self, kind: str, key: str, record: Any | None) -> None:
        records = self.by_kind(kind)
        if record is None:
            records.pop(key, None)
        else:
            records[key] = record
        if kind in ("DeviceClass", "ResourceSlice"):
            self.static_rev += 1
        elif kind == "ResourceClaim":
            self.claims_rev += 1

    def empty(self) -> bool:
        return not (self.classes or self.slices or self.claims or self.templates)

    def index(self, names: Sequence[str], labels: Sequence[Any], shared: dict[object, Any]) -> DeviceIndex:
        """The device index for these nodes, kept in the node set's ``shared`` memo."""
        key = ("dra-index", id(self), self.static_rev)
        hit = shared.get(key)
        if hit is None:
            for k in [k for k in shared if isinstance(k, tuple) and k[:2] == ("dra-index", id(self))]:
                del shared[k]
            slices = [self.slices[k] for k in sorted(self.slices)]
            hit = shared[key] = DeviceIndex(slices, self.classes, names, labels)
        return hit

    def use(self, index: DeviceIndex) -> Use:
        """What allocated claims hold (a fresh copy: callers change it). Devices named by
        admin-access results are not held (kube-scheduler lists them as not allocated)."""
        memo = self._use
        if memo is None or memo[0] != self.claims_rev or memo[1] != id(index):
            use = Use(np.zeros(len(index), dtype=bool))
            for key in sorted(self.claims):
                alloc = self.claims[key].allocation
                if alloc is None:
                    continue
                for d in alloc.devices:
                    i = index.ids.get(d.id)
                    if i is None or d.admin_access:
                        continue
                    use.take(index, i, d.consumed if d.share_id else None)
            memo = self._use = (self.claims_rev, id(index), use)
        return memo[2].copy()

    def held_devices(self) -> dict[tuple[str, str, str], list[str]]:
        """Exclusively allocated devices and the claims that hold each (the invariant: one
        claim per device)."""
        out: dict[tuple[str, str, str], list[str]] = {}
        for key in sorted(self.claims):
            alloc = self.claims[key].allocation
            if alloc is None:
                continue
            for d in alloc.devices:
                if not d.admin_access and not d.share_id:
                    out.setdefault(d.id, []).append(key)
        return out
