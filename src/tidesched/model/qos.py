"""A pod's QoS class as Kubernetes computes it (``GetPodQOS``, from the containers' cpu and
memory requests and limits), read from the pod's raw spec: the numa-aware plugin considers
Guaranteed pods only, and the rescheduling plugin evicts BestEffort before Burstable before
Guaranteed pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from tidesched.model.quantity import QuantityError, parse_quantity

BEST_EFFORT, BURSTABLE, GUARANTEED = "BestEffort", "Burstable", "Guaranteed"
RANK = {BEST_EFFORT: 0, BURSTABLE: 1, GUARANTEED: 2}
_COMPUTE = ("cpu", "memory")


def _amounts(raw: Any) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    if isinstance(raw, Mapping):
        for name in _COMPUTE:
            if name in raw:
                try:
                    out[name] = parse_quantity(raw[name])
                except QuantityError:
                    continue  # the pod's parser reports malformed quantities
    return out


def container_requests(container: Mapping[str, Any]) -> tuple[dict[str, Decimal], dict[str, Decimal]]:
    """The container's cpu and memory (requests, limits), a missing request defaulted to the
    limit as the API server does (manifests read offline are not defaulted)."""
    res = container.get("resources")
    res = res if isinstance(res, Mapping) else {}
    limits = _amounts(res.get("limits"))
    requests = {**limits, **_amounts(res.get("requests"))}
    return requests, limits


def pod_qos(spec: Mapping[str, Any]) -> str:
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    containers = [c for key in ("containers", "initContainers") for c in (spec.get(key) or []) if isinstance(c, Mapping)]
    for c in containers:
        req, lim = container_requests(c)
        for name, q in req.items():
            if q > 0:
                requests[name] = requests.get(name, Decimal(0)) + q
        found = set()
        for name, q in lim.items():
            if q != 0:
                found.add(name)
                limits[name] = limits.get(name, Decimal(0)) + q
        if not found.issuperset(_COMPUTE):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and all(limits.get(n) == q for n, q in requests.items()) and len(requests) == len(limits):
        return GUARANTEED
    return BURSTABLE
