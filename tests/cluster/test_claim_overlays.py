"""The store's DRA claim overlays (cluster/claim_overlays.py): a bind in flight shows its claims
allocated and reserved for the pod at once, until the watch shows them written, the write
fails, or the TTL after the write ends; a claim allocated elsewhere meanwhile refuses it."""

from __future__ import annotations

import time

from tidesched.cluster.store import ClusterStore
from tidesched.model.dra.ledger import ClaimWrite

ALLOC = {"devices": {"results": [{"request": "gpu", "driver": "d", "pool": "n1", "device": "gpu-0"}]}}


def _store() -> ClusterStore:
    store = ClusterStore()
    claim = {"kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ns", "uid": "cu"}, "spec": {}, "status": {}}
    store.replace("ResourceClaim", {"ns/c": claim})
    return store


def _seen(store: ClusterStore) -> dict:
    return next(o for o in store.snapshot_objects() if o.get("kind") == "ResourceClaim")


def test_assumed_claim_is_allocated_until_the_watch_shows_it() -> None:
    store = _store()
    assert store.assume_claims("pu", "p", [ClaimWrite("ns/c", "cu", ALLOC)])
    seen = _seen(store)
    assert seen["status"]["allocation"] == ALLOC and seen["status"]["reservedFor"][0]["uid"] == "pu"
    changes = {(k, key): obj for k, key, obj in store.take_changes()}
    assert changes[("ResourceClaim", "ns/c")]["status"]["allocation"] == ALLOC
    store.finish_claims(["ns/c"], ttl=30.0)
    assert "ns/c" in store.claims_assumed  # written, not seen on the watch yet
    written = {"kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ns", "uid": "cu"},
               "status": {"allocation": ALLOC, "reservedFor": [{"resource": "pods", "name": "p", "uid": "pu"}]}}
    store.apply("ResourceClaim", "MODIFIED", "ns/c", written)
    assert "ns/c" not in store.claims_assumed


def test_failed_write_forgets_and_other_devices_refuse() -> None:
    store = _store()
    assert store.assume_claims("pu", "p", [ClaimWrite("ns/c", "cu", ALLOC)])
    store.forget_claims(["ns/c"])
    assert _seen(store)["status"] == {}
    other = {"devices": {"results": [{"request": "gpu", "driver": "d", "pool": "n1", "device": "gpu-1"}]}}
    assert store.assume_claims("pu", "p", [ClaimWrite("ns/c", "cu", ALLOC)])
    assert not store.assume_claims("qu", "q", [ClaimWrite("ns/c", "cu", other)])  # one claim, one allocation
    assert store.assume_claims("qu", "q", [ClaimWrite("ns/c", "cu", ALLOC)])  # shared: the same devices
    assert [r["uid"] for r in _seen(store)["status"]["reservedFor"]] == ["pu", "qu"]
    assert not store.assume_claims("pu", "p", [ClaimWrite("ns/gone", "x", ALLOC)])


def test_written_overlay_expires_after_its_ttl() -> None:
    store = _store()
    assert store.assume_claims("pu", "p", [ClaimWrite("ns/c", "cu", ALLOC)])
    store.finish_claims(["ns/c"], ttl=0.0)
    time.sleep(0.01)
    store.expire()
    assert "ns/c" not in store.claims_assumed and _seen(store)["status"] == {}
