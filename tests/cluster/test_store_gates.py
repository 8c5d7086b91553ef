"""A pod held by gates no session can lift is no reason for a session; one held only by
Volcano's queue-admission gate is (a session may lift it)."""

from __future__ import annotations

from tidesched.cluster.store import POD, ClusterStore
from tidesched.model.gates import QUEUE_ALLOCATION_GATE


def _pod(name: str, *gates: str) -> dict:
    spec = {"schedulerName": "volcano", "schedulingGates": [{"name": g} for g in gates]}
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": spec,
            "status": {"phase": "Pending"}}


def test_outside_gates_are_not_work_volcanos_gate_is() -> None:
    store = ClusterStore(scheduler_names=frozenset({"volcano"}))
    store.apply(POD, "ADDED", "ns/a", _pod("a", "example.com/g"))
    store.apply(POD, "ADDED", "ns/b", _pod("b", QUEUE_ALLOCATION_GATE, "example.com/g"))
    assert not store.has_work()
    store.apply(POD, "MODIFIED", "ns/b", _pod("b", QUEUE_ALLOCATION_GATE))  # the other gate was lifted
    assert store.has_work() and store.pending_pods() == ["ns/b"]
    store.apply(POD, "MODIFIED", "ns/a", _pod("a"))  # gates: [] once lifted
    assert store.pending_pods() == ["ns/a", "ns/b"]
