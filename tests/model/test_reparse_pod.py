"""reparse_pod / reparse_podgroup: a copy-on-write bind or end of a pod, or a PodGroup status
write, gives the very record a full parse gives, and anything else is left to the full parse."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tidesched.model.cache import ClusterCache
from tidesched.model.objects import GROUP_NAME_ANNOTATION, parse_pod, parse_podgroup, reparse_pod, reparse_podgroup


def base(deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "p", "namespace": "a", "uid": "u1", "labels": {"app": "x"},
        "annotations": {GROUP_NAME_ANNOTATION: "g"}, "creationTimestamp": "2025-01-01T00:00:00Z",
    }
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T01:00:00Z"
    return {
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "priorityClassName": "high",
        },
        "status": {"phase": "Pending"},
    }


def bound(pod: dict[str, Any], node: str = "n1") -> dict[str, Any]:
    new = dict(pod)
    new["spec"] = dict(pod["spec"], nodeName=node)
    new["status"] = dict(pod["status"], phase="Running", startTime="2025-01-01T00:05:00Z")
    return new


def ended(pod: dict[str, Any], phase: str = "Succeeded") -> dict[str, Any]:
    new = dict(pod)
    new["status"] = dict(pod["status"], phase=phase)
    return new


@pytest.mark.parametrize("deleting", [False, True])
def test_a_bind_and_an_end_reparse_to_what_a_full_parse_gives(deleting: bool) -> None:
    pod = base(deleting)
    first = parse_pod(pod)
    b = bound(pod)
    got = reparse_pod(pod, first, b)
    assert got is not None and got == parse_pod(b)
    assert got.node_name == "n1" and got.phase == "Running" and got.start_time > 0
    e = ended(b, "Failed")
    again = reparse_pod(b, got, e)
    assert again is not None and again == parse_pod(e)


def test_a_graceful_delete_reparses_to_what_a_full_parse_gives() -> None:
    b = bound(base())
    rec = parse_pod(b)
    deleting = dict(b, metadata=dict(b["metadata"], deletionTimestamp="2025-01-01T02:00:00Z",
                                      deletionGracePeriodSeconds=30))
    got = reparse_pod(b, rec, deleting)
    full = parse_pod(deleting)
    assert got is not None and got == full and got.meta == full.meta
    assert got.meta.deletion > 0 and got.status == full.status and got.meta.key == "a/p"
    bad = dict(b, metadata=dict(b["metadata"], deletionTimestamp="soon"))
    assert reparse_pod(b, rec, bad) is None


def test_other_changes_are_left_to_the_full_parse() -> None:
    pod = base()
    rec = parse_pod(pod)
    new_meta = dict(pod, metadata=dict(pod["metadata"], labels={"app": "y"}))
    assert reparse_pod(pod, rec, new_meta) is None
    new_spec = dict(pod, spec=dict(pod["spec"], containers=[{"name": "c", "resources": {"requests": {"cpu": "4"}}}]))
    assert reparse_pod(pod, rec, new_spec) is None
    more = dict(pod, spec=dict(pod["spec"], nodeSelector={"zone": "a"}))
    assert reparse_pod(pod, rec, more) is None
    fewer = dict(pod, spec={k: v for k, v in pod["spec"].items() if k != "tolerations"})
    assert reparse_pod(pod, rec, fewer) is None
    deep = copy.deepcopy(bound(pod))  # an equal object from elsewhere (an API watch): no shared parts
    assert reparse_pod(pod, rec, deep) is None
    bad = dict(pod, status={"phase": "Running", "startTime": "yesterday"})
    assert reparse_pod(pod, rec, bad) is None
    assert reparse_pod(pod, rec, dict(pod, status=["not", "a", "mapping"])) is None


def test_the_cache_takes_the_short_way_and_still_reports_a_malformed_change() -> None:
    cache = ClusterCache(("volcano",))
    pod = base()
    cache.update("Pod", "a/p", pod)
    b = bound(pod)
    cache.update("Pod", "a/p", b)
    assert cache.records["Pod"]["a/p"] == parse_pod(b)
    bad = dict(b, status=dict(b["status"], startTime="yesterday"))
    cache.update("Pod", "a/p", bad)
    assert "a/p" not in cache.records["Pod"]
    assert any("startTime" in e.message for e in cache.problems())


def group() -> dict[str, Any]:
    return {
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "a", "uid": "gu", "annotations": {"volcano.sh/preemptable": "true"}},
        "spec": {"minMember": 2, "queue": "q", "minResources": {"cpu": "4", "nvidia.com/gpu": "2"}},
        "status": {"phase": "Pending"},
    }


def test_a_podgroup_status_write_reparses_to_what_a_full_parse_gives() -> None:
    pg = group()
    rec = parse_podgroup(pg)
    cond = {"type": "Scheduled", "status": "True", "transitionID": "s1", "reason": "tasks in gang are ready"}
    new = dict(pg, status=dict(pg["status"], phase="Running", conditions=[cond, "not a mapping"]))
    got = reparse_podgroup(pg, rec, new)
    assert got is not None and got == parse_podgroup(new)
    assert got.phase == "Running" and got.conditions == (cond,) and got.min_resources is rec.min_resources
    # Anything else, or a malformed status, goes the long way (which reports the problem).
    assert reparse_podgroup(pg, rec, dict(pg, spec=dict(pg["spec"], minMember=3))) is None
    assert reparse_podgroup(pg, rec, dict(pg, metadata=dict(pg["metadata"], labels={"a": "b"}))) is None
    assert reparse_podgroup(pg, rec, dict(pg, status={"phase": "Sleeping"})) is None
    assert reparse_podgroup(pg, rec, dict(pg, status={"phase": "Running", "conditions": "x"})) is None
    cache = ClusterCache(("volcano",))
    cache.update("PodGroup", "a/g", pg)
    cache.update("PodGroup", "a/g", dict(pg, status={"phase": "Sleeping"}))
    assert "a/g" not in cache.records["PodGroup"]
    assert any("unknown phase" in e.message for e in cache.problems())
