"""Kubernetes ResourceQuota objects and resource lists kept by name, as the resourcequota
plugin reads them (Volcano v1.15.1 plugins/resourcequota, quota arithmetic of
``k8s.io/apiserver/pkg/quota/v1``).

A quota is compared by resource *name*: ``cpu`` in a PodGroup's ``spec.minResources`` meets a
quota's ``cpu``, and ``requests.cpu`` meets ``requests.cpu`` (Volcano's controllers write both
forms into the PodGroups they make). So, unlike :class:`~tidesched.model.resource.Resource`,
a :data:`ResourceList` keeps every name as written, with its exact amount.

Only the quota's ``status`` is read (``hard`` and ``used``, which kube-controller-manager's
quota controller keeps), as Volcano's scheduler cache does; a quota the controller has not
filled in yet limits nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tidesched.model.fields import mapping, parse_str
from tidesched.model.problems import ObjectError
from tidesched.model.quantity import QuantityError, format_memory, parse_quantity

ResourceList = dict[str, Decimal]
KIND = "ResourceQuota"


def resource_list(raw: Any, field_name: str) -> ResourceList:
    """A ResourceList (``{"cpu": "2", "requests.memory": "4Gi", ...}``) with exact amounts,
    every name kept; an ObjectError naming the entry when a quantity is malformed."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ObjectError(field_name, f"expected a resource list, got {type(raw).__name__}")
    out: ResourceList = {}
    for name, value in raw.items():
        try:
            out[str(name)] = parse_quantity(value)
        except QuantityError as exc:
            raise ObjectError(f"{field_name}[{name}]", str(exc)) from None
    return out


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    namespace: str
    name: str
    hard: ResourceList  # status.hard
    used: ResourceList  # status.used

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_resource_quota(obj: Mapping[str, Any]) -> ResourceQuota:
    meta = mapping(obj, "metadata", "metadata")
    name = parse_str(meta.get("name"), "metadata.name")
    if not name:
        raise ObjectError("metadata.name", "missing")
    status = mapping(obj, "status", "status")
    return ResourceQuota(
        namespace=parse_str(meta.get("namespace"), "metadata.namespace") or "default",
        name=name,
        hard=resource_list(status.get("hard"), "status.hard"),
        used=resource_list(status.get("used"), "status.used"),
    )


# -- quota arithmetic (k8s.io/apiserver/pkg/quota/v1) ------------------------------------------


def add(a: Mapping[str, Decimal], b: Mapping[str, Decimal]) -> ResourceList:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, Decimal(0)) + amount
    return out


def mask(a: Mapping[str, Decimal], names: Iterable[str]) -> ResourceList:
    return {name: a[name] for name in names if name in a}


def exceeded(usage: Mapping[str, Decimal], hard: Mapping[str, Decimal]) -> list[str]:
    """The names whose usage is above the hard limit (quota LessThanOrEqual's second answer),
    sorted; empty when the usage fits."""
    return sorted(name for name, limit in hard.items() if name in usage and usage[name] > limit)


def format_list(rl: Mapping[str, Decimal]) -> str:
    """A ResourceList for people: ``cpu 2, memory 2G``-like, names sorted."""
    parts = []
    for name in sorted(rl):
        amount = rl[name]
        if name.rpartition(".")[2] == "memory" or name.endswith("storage"):
            text = format_memory(float(amount))
        else:
            text = format(amount.normalize(), "f") if amount == amount.to_integral() else str(amount)
        parts.append(f"{name}: {text}")
    return "{" + ", ".join(parts) + "}"
