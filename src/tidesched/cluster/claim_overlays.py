"""DRA claims assumed with the binds in flight, an overlay of :class:`~tidesched.cluster.store.ClusterStore`.

When a bind of a pod with ResourceClaims is submitted, its claims are shown allocated and
reserved for the pod at once (the status the claim writer is writing), as kube-scheduler's
assume cache does, so the next session does not give their devices to another pod; the
overlay goes when the watch shows the claim written (or gone), when the write fails, or after
its TTL once written.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

CLAIM = "ResourceClaim"


class ClaimOverlays:
    """Mixed into the store: needs its lock, objects, dirty keys and change notice."""

    _cond: threading.Condition
    objects: dict[str, dict[str, dict[str, Any]]]
    _dirty: dict[str, set[str]]
    # ResourceClaim key -> the status a bind in flight writes (allocation, reservedFor), the
    # pods it reserves for, and its expiry (None while in flight).
    claims_assumed: dict[str, tuple[dict[str, Any], frozenset[str], float | None]]

    def _changed(self) -> None:  # the store's
        raise NotImplementedError

    def _confirm_claim(self, key: str, claim: dict[str, Any] | None) -> None:
        _status, uids, _exp = self.claims_assumed[key]
        st = (claim or {}).get("status") or {}
        have = {r.get("uid") for r in st.get("reservedFor") or []}
        if claim is None or (st.get("allocation") is not None and uids <= have):
            del self.claims_assumed[key]  # written (confirmed) or gone: the API object is the truth

    def _claim_overlaid(self, key: str, claim: dict[str, Any]) -> dict[str, Any]:
        a = self.claims_assumed.get(key)
        return claim if a is None else {**claim, "status": a[0]}

    def assume_claims(self, pod_uid: str, pod_name: str, writes: Iterable[Any]) -> bool:
        """A bind in flight writes these claims (``ClaimWrite``s): sessions see each allocated
        and reserved for the pod until the watch shows it. False, assuming nothing, when a
        claim is gone or already holds another allocation."""
        with self._cond:
            staged = {}
            for w in writes:
                claim = self.objects.get(CLAIM, {}).get(w.claim)
                if claim is None:
                    return False
                prev = self.claims_assumed.get(w.claim)
                st = dict(prev[0] if prev is not None else claim.get("status") or {})
                have = st.get("allocation")
                if w.allocation is not None:
                    if have is not None and have.get("devices") != w.allocation.get("devices"):
                        return False
                    st.setdefault("allocation", w.allocation)
                elif have is None:
                    return False
                reserved = list(st.get("reservedFor") or [])
                if all(r.get("uid") != pod_uid for r in reserved):
                    reserved.append({"resource": "pods", "name": pod_name, "uid": pod_uid})
                st["reservedFor"] = reserved
                staged[w.claim] = (st, (prev[1] if prev is not None else frozenset()) | {pod_uid}, None)
            for key, value in staged.items():
                self.claims_assumed[key] = value
                self._dirty[CLAIM].add(key)
            self._changed()
            return True

    def finish_claims(self, keys: Iterable[str], ttl: float) -> None:
        """The claim writes went through: keep the overlays until the watch shows them, at most ``ttl``."""
        with self._cond:
            for key in keys:
                a = self.claims_assumed.get(key)
                if a is not None:
                    self.claims_assumed[key] = (a[0], a[1], time.monotonic() + ttl)
                    self._confirm_claim(key, self.objects.get(CLAIM, {}).get(key))

    def forget_claims(self, keys: Iterable[str]) -> None:
        """The claim writes failed: the API objects are the truth again."""
        with self._cond:
            for key in keys:
                if self.claims_assumed.pop(key, None) is not None and CLAIM in self._dirty:
                    self._dirty[CLAIM].add(key)
            self._changed()


    def _expire_claims(self, now: float) -> None:
        """Drop overlays written longer than their TTL ago (called under the store lock)."""
        stale = [k for k, a in self.claims_assumed.items() if a[2] is not None and a[2] < now]
        for k in stale:
            del self.claims_assumed[k]
        if stale and CLAIM in self._dirty:
            self._dirty[CLAIM].update(stale)
