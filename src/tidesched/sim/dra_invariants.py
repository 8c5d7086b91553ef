"""``REL-2 claims``: the DRA rules checked after every step of a simulation that holds claims.

* No device is in two claims: every device an allocated claim holds exclusively (not shared
  with ``allowMultipleAllocations``, not admin access) is held by that claim alone.
* Every pod bound in the step with ResourceClaims has each claim allocated, reserved for it,
  and on a node the allocation's node selector allows: never bound without its devices.
"""

from __future__ import annotations

from collections.abc import Iterable

from tidesched.sim.world import World

RULE_CLAIMS = "REL-2 claims"


def check_claims(world: World, bound: Iterable[tuple[str, str]]) -> list[str]:
    dra = world.cache.dra
    out = []
    for device, holders in sorted(dra.held_devices().items()):
        if len(holders) > 1:
            out.append(f"device {'/'.join(device)} is allocated to {len(holders)} claims: {', '.join(holders)}")
    for pod_key, node_name in bound:
        pod = world.record("Pod", pod_key)
        if pod is None or not pod.claims:
            continue
        node = world.record("Node", node_name)
        labels = node.meta.labels if node is not None else {}
        for pc in pod.claims:
            key = f"{pod.meta.namespace}/{pc.claim_name}"
            claim = dra.claims.get(key) if pc.claim_name else None
            if claim is None or claim.allocation is None:
                out.append(f"pod {pod_key} bound to {node_name} with claim {pc.describe()} not allocated")
            elif not claim.reserved_for_pod(pod.meta.uid):
                out.append(f"pod {pod_key} bound to {node_name} but claim {key} is not reserved for it")
            elif claim.allocation.node_selector is not None and not claim.allocation.node_selector.matches(node_name, labels):
                out.append(f"pod {pod_key} bound to {node_name}, where claim {key}'s devices are not")
    return out
