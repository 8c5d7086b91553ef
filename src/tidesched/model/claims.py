"""A pod's Dynamic Resource Allocation claims (``spec.resourceClaims``, ``resource.k8s.io``).

A pod names each claim it uses once in ``spec.resourceClaims``: either an existing
ResourceClaim (``resourceClaimName``) or a ResourceClaimTemplate (``resourceClaimTemplateName``)
from which the resourceclaim controller makes one claim per pod, recording its name in
``status.resourceClaimStatuses``. A pod with claims may start only once every claim is
allocated and reserved for it; binding it earlier leaves it unable to start on its node
(the kubelet cannot prepare an unallocated claim), so the scheduler must never do that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidesched.model.fields import mappings, parse_str
from tidesched.model.problems import ObjectError


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of ``spec.resourceClaims``: the name containers refer to, and where the
    claim comes from. ``claim_name`` is the ResourceClaim's name (given, or made from the
    template and read from the pod's status), "" while a template's claim is not made yet."""

    name: str
    claim_name: str
    template_name: str

    def describe(self) -> str:
        if self.template_name:
            made = f", claim {self.claim_name}" if self.claim_name else ", claim not made yet"
            return f"{self.name} (template {self.template_name}{made})"
        return f"{self.name} (claim {self.claim_name})"


def pod_claims(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[PodClaim, ...]:
    """The pod's claims in spec order; ObjectError for a malformed entry (the API server
    refuses an entry naming neither or both sources, and a name used twice)."""
    entries = mappings(spec, "resourceClaims", "spec.resourceClaims")
    if not entries:
        return ()
    made: dict[str, str] = {}
    for i, st in enumerate(mappings(status, "resourceClaimStatuses", "status.resourceClaimStatuses")):
        name = parse_str(st.get("name"), f"status.resourceClaimStatuses[{i}].name")
        made[name] = parse_str(st.get("resourceClaimName"), f"status.resourceClaimStatuses[{i}].resourceClaimName")
    claims: list[PodClaim] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        at = f"spec.resourceClaims[{i}]"
        name = parse_str(entry.get("name"), f"{at}.name")
        if not name:
            raise ObjectError(f"{at}.name", "missing or empty")
        if name in seen:
            raise ObjectError(f"{at}.name", f"claim name {name!r} used twice")
        seen.add(name)
        claim = parse_str(entry.get("resourceClaimName"), f"{at}.resourceClaimName")
        template = parse_str(entry.get("resourceClaimTemplateName"), f"{at}.resourceClaimTemplateName")
        if bool(claim) == bool(template):
            raise ObjectError(at, "must name exactly one of resourceClaimName and resourceClaimTemplateName")
        claims.append(PodClaim(name, claim or made.get(name, ""), template))
    return tuple(claims)
