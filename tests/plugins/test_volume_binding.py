"""VolumeBinding's Filter over all nodes at once against kube-scheduler's FindPodVolumes written
node by node (FindMatchingVolume's loop): random clusters of local and zonal PVs, claims of several
sizes, classes that provision or not; the same nodes pass and the same PVs are chosen. And the
session's assumptions: a PV reserved for one pod is not another's until the reservation goes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tidesched.model.infos import TaskInfo
from tidesched.model.node_table import NodeTable
from tidesched.model.objects import parse_node, parse_pod
from tidesched.model.volumes import (
    VolumeCatalog,
    parse_pv,
    parse_pvc,
    parse_storage_class,
)
from tidesched.plugins.volume_binding import REASON_BIND_CONFLICT, PodClaims, VolumeBinder
from tidesched.rules.node_index import NodeLabelIndex

ZONES = ("za", "zb", "zc")


def _nodes(n: int) -> list:
    return [
        parse_node(
            {
                "kind": "Node",
                "metadata": {
                    "name": f"n{i:02d}",
                    "labels": {"kubernetes.io/hostname": f"n{i:02d}", "zone": ZONES[i % 3]},
                },
                "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"}},
            }
        )
        for i in range(n)
    ]


def _world(rng: random.Random, n_nodes: int):
    nodes = _nodes(n_nodes)
    classes = [
        parse_storage_class(
            {
                "metadata": {"name": "local"},
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
            }
        ),
        parse_storage_class(
            {
                "metadata": {"name": "zonal"},
                "provisioner": "disk.example.com",
                "volumeBindingMode": "WaitForFirstConsumer",
                "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["za", "zb"]}]}],
            }
        ),
    ]
    pvs = []
    for i in range(rng.randint(0, 3 * n_nodes)):
        cls = rng.choice(["local", "zonal"])
        if cls == "local":
            key, value = "kubernetes.io/hostname", f"n{rng.randrange(n_nodes):02d}"
        else:
            key, value = "zone", rng.choice(ZONES)
        spec = {
            "storageClassName": cls,
            "capacity": {"storage": f"{rng.choice([1, 2, 5, 10])}Gi"},
            "accessModes": rng.choice([["ReadWriteOnce"], ["ReadWriteOnce", "ReadWriteMany"]]),
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
                    ]
                }
            },
        }
        phase = rng.choice(["Available"] * 5 + ["Released"])
        pvs.append(parse_pv({"metadata": {"name": f"pv{i:03d}"}, "spec": spec, "status": {"phase": phase}}))
    claims = []
    for j in range(rng.randint(1, 3)):
        claims.append(
            parse_pvc(
                {
                    "metadata": {"name": f"c{j}", "namespace": "ns"},
                    "spec": {
                        "storageClassName": rng.choice(["local", "zonal"]),
                        "accessModes": rng.choice([["ReadWriteOnce"], ["ReadWriteMany"]]),
                        "resources": {"requests": {"storage": f"{rng.choice([1, 2, 5])}Gi"}},
                    },
                }
            )
        )
    return nodes, classes, pvs, claims


def _reference(nodes, catalog: VolumeCatalog, claims) -> tuple[np.ndarray, list[dict[str, str]]]:
    """FindPodVolumes per node as kube-scheduler loops it: pass mask and chosen PV per claim."""
    passed, chosen_per_node = [], []
    for node in nodes:
        labels = node.meta.labels
        chosen: dict[str, str] = {}
        ok = True
        for pvc in sorted(claims, key=lambda c: c.request):
            best = None
            for pv in catalog.pvs_of_class(pvc.storage_class):
                if pv.name in chosen.values() or pv.claim_ref is not None:
                    continue
                if (
                    pv.capacity < pvc.request
                    or pv.phase != "Available"
                    or not pvc.access_modes <= pv.access_modes
                ):
                    continue
                expr = pv.node_terms[0]["matchExpressions"][0]
                if labels.get(expr["key"]) not in expr["values"]:
                    continue
                if best is None or pv.capacity < best.capacity:
                    best = pv
            if best is not None:
                chosen[pvc.name] = best.name
                continue
            cls = catalog.classes[pvc.storage_class]
            if not cls.provisions or labels.get("zone") not in ("za", "zb"):
                ok = False
        passed.append(ok)
        chosen_per_node.append(chosen)
    return np.array(passed), chosen_per_node


@pytest.mark.parametrize("seed", range(40))
def test_filter_matches_kube_schedulers_node_by_node_loop(seed: int) -> None:
    rng = random.Random(seed)
    nodes, classes, pvs, claims = _world(rng, rng.randint(1, 9))
    catalog = VolumeCatalog(claims, pvs, classes)
    table = NodeTable(nodes, {})
    binder = VolumeBinder(catalog, NodeLabelIndex(table.names, [n.meta.labels for n in nodes]), table)
    evaluation = binder._evaluate(PodClaims(delayed=list(claims)))
    failing = np.zeros(len(nodes), dtype=bool)
    for reason, mask in evaluation.failures:
        assert reason == REASON_BIND_CONFLICT
        failing |= mask
    want_pass, want_chosen = _reference(nodes, catalog, claims)
    assert (~failing).tolist() == want_pass.tolist()
    for row, want in enumerate(want_chosen):
        got = {
            pvc.name: binder._pv_list[int(best[row])].name
            for pvc, best in evaluation.matched
            if best[row] >= 0
        }
        assert got == want, f"node {nodes[row].name}"


def _task(name: str, claim: str) -> TaskInfo:
    pod = parse_pod(
        {
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {
                "containers": [{}],
                "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}],
            },
        }
    )
    return TaskInfo(pod, "ns/pg", 0)


def test_a_reserved_pv_is_nobody_elses_until_unreserved() -> None:
    nodes = _nodes(1)
    local = parse_storage_class(
        {
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )
    pv = parse_pv(
        {
            "metadata": {"name": "pv-1"},
            "spec": {"storageClassName": "local", "capacity": {"storage": "1Gi"}},
            "status": {"phase": "Available"},
        }
    )
    claims = [
        parse_pvc({"metadata": {"name": c, "namespace": "ns"}, "spec": {"storageClassName": "local"}})
        for c in "ab"
    ]
    table = NodeTable(nodes, {})
    binder = VolumeBinder(VolumeCatalog(claims, [pv], [local]), NodeLabelIndex(table.names, [{}]), table)
    first, second = _task("p-a", "a"), _task("p-b", "b")
    for task in (first, second):
        task.node_name = "n00"
    assert binder.filter(binder.claims(second)) == []
    binder.reserve(first)
    plan = binder.plan(first)
    assert plan is not None and plan.static == (("pv-1", "ns/a", "ns/a"),) and plan.node == "n00"
    [(reason, mask)] = binder.filter(binder.claims(second))
    assert reason == REASON_BIND_CONFLICT and mask.tolist() == [True]
    # A second pod of the same claim finds the PV the claim was given.
    same = _task("p-a2", "a")
    assert binder.filter(binder.claims(same)) == []
    binder.unreserve(first)
    assert binder.plan(first) is None and binder.filter(binder.claims(second)) == []
