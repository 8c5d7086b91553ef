"""ResourceQuota objects (model/resource_quota.py): parsed by name with exact amounts, fed
through the cluster cache like the other snapshot-only kinds, bad ones reported not raised."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tidesched.model.cache import ClusterCache
from tidesched.model.objects import parse_podgroup
from tidesched.model.problems import ObjectError
from tidesched.model.resource_quota import add, exceeded, format_list, mask, parse_resource_quota
from tidesched.model.snapshot import build_snapshot


def _quota(name: str = "q", ns: str = "team", **status: dict) -> dict:
    return {"kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns}, "status": status}


def test_parse_keeps_every_name_exactly() -> None:
    rq = parse_resource_quota(_quota(hard={"requests.cpu": "1500m", "count/pods": 10, "memory": "2Gi"},
                                     used={"requests.cpu": "0.5"}))
    assert rq.key == "team/q"
    assert rq.hard == {"requests.cpu": Decimal("1.5"), "count/pods": Decimal(10), "memory": Decimal(2 * 2**30)}
    assert rq.used == {"requests.cpu": Decimal("0.5")}


def test_bad_quantity_names_the_field() -> None:
    with pytest.raises(ObjectError, match=r"status.hard\[cpu\]"):
        parse_resource_quota(_quota(hard={"cpu": "lots"}))


def test_podgroup_keeps_min_resources_by_name() -> None:
    pg = parse_podgroup({"kind": "PodGroup", "metadata": {"name": "pg", "namespace": "team"},
                         "spec": {"minResources": {"cpu": "2", "requests.cpu": "2", "count/pods": "1"}}})
    assert pg.min_resource_list == {"cpu": 2, "requests.cpu": 2, "count/pods": 1}
    assert pg.min_resources is not None and pg.min_resources.milli_cpu == 2000  # requests.cpu not counted twice


def test_quota_arithmetic() -> None:
    a = {"cpu": Decimal(2), "memory": Decimal(5)}
    assert add(a, {"cpu": Decimal(1), "pods": Decimal(1)}) == {"cpu": 3, "memory": 5, "pods": 1}
    assert mask(a, ["cpu", "gpu"]) == {"cpu": 2}
    assert exceeded({"cpu": Decimal(3), "memory": Decimal(5)}, {"cpu": Decimal(2), "memory": Decimal(5), "x": Decimal(0)}) == ["cpu"]
    assert format_list({"memory": Decimal(2 * 10**9), "cpu": Decimal("0.5")}) == "{cpu: 0.5, memory: 2G}"


def test_cache_feeds_quotas_and_reports_bad_ones() -> None:
    cache = ClusterCache()
    cache.update("ResourceQuota", "team/q", _quota(hard={"cpu": "2"}))
    cache.update("ResourceQuota", "team/bad", _quota("bad", hard={"cpu": []}))
    snap, _state = cache.open()
    assert [q.key for q in snap.resource_quotas] == ["team/q"]
    assert any(e.reason == "InvalidObject" and "team/bad" in e.message for e in snap.problems)
    cache.update("ResourceQuota", "team/q", _quota(hard={"cpu": "3"}))
    assert cache.snapshot().resource_quotas[0].hard == {"cpu": 3}
    cache.update("ResourceQuota", "team/q", None)
    cache.update("ResourceQuota", "team/bad", None)
    assert cache.snapshot().resource_quotas == [] and cache.problems() == []


def test_snapshot_reads_quotas_as_the_cache_does() -> None:
    objs = [_quota("a", hard={"cpu": "1"}), _quota("b", ns="other", hard={"memory": "1Gi"})]
    cache = ClusterCache()
    for o in objs:
        cache.update("ResourceQuota", f"{o['metadata']['namespace']}/{o['metadata']['name']}", o)
    by_key = lambda qs: sorted(qs, key=lambda q: q.key)  # noqa: E731
    assert by_key(build_snapshot(objs).resource_quotas) == by_key(cache.snapshot().resource_quotas)
