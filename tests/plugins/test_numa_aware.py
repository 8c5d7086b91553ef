"""numa-aware plugin: which tasks it looks at (the fast path keeps the others), its score's
normalisation (Volcano NormalizeScore reversed) and the CPUs given back when a placement is
undone. The placements themselves are scenarios (tests/scenarios/numa_aware.yaml)."""

from __future__ import annotations

import yaml

from builders import node, pod, podgroup, queue
from tidesched.framework.statement import Statement
from tidesched.model.snapshot import build_snapshot
from tidesched.plugins.numa_aware import NumaAwarePlugin, normalize_reverse
from tidesched.scheduler import config_from_text, open_session

DETAIL = {str(c): {"numa": c // 4, "socket": c // 4, "core": c // 2} for c in range(8)}
CONFIG = yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [{"name": "predicates"}, {"name": "numa-aware"}]}]})


def _topo(name: str, policy: str = "single-numa-node", free: str = "0-7") -> dict:
    return {"kind": "Numatopology", "metadata": {"name": name}, "spec": {
        "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": policy},
        "numares": {"cpu": {"allocatable": free, "capacity": 8}}, "cpuDetail": DETAIL}}


def _guaranteed(name: str, cpu: str, policy: str | None = "single-numa-node") -> dict:
    p = pod(name, "pg", cpu=None, memory=None, annotations={"volcano.sh/numa-topology-policy": policy} if policy else None)
    p["spec"]["containers"][0]["resources"] = {"limits": {"cpu": cpu, "memory": "1Gi"}}
    return p


def _session(objs: list[dict]):
    base = [queue("q"), podgroup("pg", 1, queue="q")]
    return open_session(build_snapshot(base + objs), config_from_text(CONFIG))


def test_only_guaranteed_pods_leave_the_fast_path() -> None:
    ssn = _session([node("n1", cpu="16"), _topo("n1"), _guaranteed("g", "4"), pod("b", "pg", cpu="4")])
    plugin = ssn.plugins["numa-aware"]
    assert isinstance(plugin, NumaAwarePlugin)
    by_name = {t.name: t for t in ssn.tasks.values()}
    assert plugin._predicate_key(by_name["b"]) is not None  # Burstable: passes everywhere, row-local
    assert plugin._predicate_key(by_name["g"]) is None  # checked node by node
    assert ssn.predicate_mask(by_name["b"]).all()


def test_guaranteed_pod_without_policy_and_no_numa_nodes_stays_row_local() -> None:
    ssn = _session([node("n1", cpu="16"), _guaranteed("g", "4", policy=None)])
    g = next(iter(ssn.tasks.values()))
    assert ssn.plugins["numa-aware"]._predicate_key(g) is not None  # type: ignore[attr-defined]


def test_normalize_reverse() -> None:
    assert normalize_reverse([1, 2, 2]) == [50, 0, 0]
    assert normalize_reverse([1, 3]) == [67, 0]  # 100 - 100·1//3
    assert normalize_reverse([0, 0]) == [100, 100]


def test_discarded_placement_gives_its_cpus_back() -> None:
    ssn = _session([node("n1", cpu="16"), _topo("n1"), _guaranteed("g1", "4"), _guaranteed("g2", "4")])
    plugin = ssn.plugins["numa-aware"]
    assert isinstance(plugin, NumaAwarePlugin)
    g1, g2 = sorted(ssn.tasks.values(), key=lambda t: t.name)
    assert ssn.predicate(g1).passed.all()
    stmt = Statement(ssn)
    stmt.allocate(g1, "n1")
    assert plugin.free[0]["cpu"] == {4, 5, 6, 7}
    stmt.discard()
    assert plugin.free[0]["cpu"] == set(range(8))
    assert ssn.predicate(g2).passed.all()
