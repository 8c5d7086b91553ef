"""The cards of DRA devices for the simulator's metrics and its ``REL-2 quota`` invariant: how
many cards of each model a node's ResourceSlices publish, and which a pod's allocated claims
hold, named as capacity-card names them (:mod:`tidesched.model.dra.cards`; a share of a device
through consumable capacity counts its part of the device). Read from the world's objects
alone, so the metrics judge what the scheduler wrote, not what it meant to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tidesched.model.cards import MILLI
from tidesched.model.dra.cards import CardNaming, device_model, device_share
from tidesched.model.dra.objects import Device

if TYPE_CHECKING:
    from tidesched.model.objects import Pod
    from tidesched.sim.world import World


class DraCards:
    """Device models and node capacities, kept per ResourceSlice as slices change."""

    def __init__(self, world: "World", naming: CardNaming = CardNaming()) -> None:
        self.world = world
        self.naming = naming
        self._devices: dict[tuple[str, str, str], tuple[str, Device]] = {}  # id -> (model, device)
        self._nodes: dict[str, dict[str, float]] = {}  # node -> model -> milli-cards
        self._slices: dict[str, list[tuple[tuple[str, str, str], str, str]]] = {}  # name -> (id, model, node)

    def changed(self, kind: str, key: str, old: Any, new: Any) -> tuple[list[str], list[str]]:
        """A ResourceSlice or ResourceClaim changed: the nodes whose cards and the pods whose
        claims' cards may differ now."""
        if kind == "ResourceSlice":
            return sorted(self.slice_changed(key)), []
        ns = key.partition("/")[0]
        pods = {f"{ns}/{ref.get('name')}" for obj in (old, new) if isinstance(obj, Mapping)
                for ref in ((obj.get("status") or {}).get("reservedFor") or []) if isinstance(ref, Mapping)}
        return [], sorted(pods)

    def slice_changed(self, name: str) -> set[str]:
        """Take in the slice as the world holds it now; the nodes whose cards changed. (Every
        slice counts: a pool's older generation lives only while its driver replaces it.)"""
        touched = set()
        for ident, model, node in self._slices.pop(name, ()):
            self._devices.pop(ident, None)
            if node:
                self._nodes[node][model] -= MILLI
                touched.add(node)
        s = self.world.cache.dra.slices.get(name)
        if s is None:
            return touched
        entries = []
        for d in s.devices:
            model, _problem = device_model(s.driver, d, self.naming)
            if not model:
                continue
            ident = (s.driver, s.pool, d.name)
            node = d.reach.node_name if d.reach is not None else s.reach.node_name
            self._devices[ident] = (model, d)
            entries.append((ident, model, node))
            if node:
                per = self._nodes.setdefault(node, {})
                per[model] = per.get(model, 0.0) + MILLI
                touched.add(node)
        self._slices[name] = entries
        return touched

    def node_cards(self, node: str) -> dict[str, float]:
        """Milli-cards by model that slices publish for the node (devices local to it)."""
        return {m: v for m, v in self._nodes.get(node, {}).items() if v}

    def pod_cards(self, pod: "Pod") -> list[tuple[str, float]]:
        """Milli-cards by model that the pod's allocated claims hold (each claim once)."""
        if not pod.claims:
            return []
        claims = self.world.cache.dra.claims
        out: dict[str, float] = {}
        seen: set[str] = set()
        for pc in pod.claims:
            key = f"{pod.meta.namespace}/{pc.claim_name}"
            claim = claims.get(key) if pc.claim_name else None
            if claim is None or claim.allocation is None or key in seen:
                continue
            seen.add(key)
            for d in claim.allocation.devices:
                found = self._devices.get(d.id)
                if found is None or d.admin_access:
                    continue
                model, device = found
                share = device_share(device, d.consumed if d.share_id else None)
                out[model] = out.get(model, 0.0) + round(share * MILLI, 3)
        return sorted(out.items())
