"""Storage records (PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode), a pod's claim
volumes, and their catalog: read once from the objects, malformed fields named."""

from __future__ import annotations

import pytest

from tidesched.model.cache import ClusterCache
from tidesched.model.loader import Manifest
from tidesched.model.objects import ObjectError, parse_pod
from tidesched.model.snapshot import build_snapshot
from tidesched.model.volumes import (
    ClaimRef,
    CsiSource,
    PodVolume,
    csi_limit_key,
    parse_csi_node,
    parse_pv,
    parse_pvc,
    parse_storage_class,
)


def _pvc(**spec) -> dict:
    return {"kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "ns"}, "spec": spec}


def test_claim_fields() -> None:
    obj = _pvc(
        storageClassName="local",
        volumeName="pv-1",
        accessModes=["ReadWriteOnce", "ReadOnlyMany"],
        resources={"requests": {"storage": "5Gi"}},
        selector={"matchLabels": {"tier": "fast"}},
    )
    obj["metadata"].update(
        uid="u1",
        annotations={"pv.kubernetes.io/bind-completed": "yes", "volume.kubernetes.io/selected-node": "n1"},
        ownerReferences=[
            {"kind": "Pod", "name": "p", "uid": "other"},
            {"kind": "Pod", "name": "p", "uid": "pod-uid", "controller": True},
        ],
    )
    obj["status"] = {"phase": "Bound"}
    c = parse_pvc(obj)
    assert (c.key, c.uid, c.storage_class, c.volume_name, c.request) == (
        "ns/data",
        "u1",
        "local",
        "pv-1",
        5 * 2**30,
    )
    assert c.access_modes == {"ReadWriteOnce", "ReadOnlyMany"} and c.volume_mode == "Filesystem"
    assert c.selector is not None and c.selector.matches({"tier": "fast"}) and not c.selector.matches({})
    assert (c.phase, c.selected_node, c.bind_completed, c.fully_bound) == ("Bound", "n1", True, True)
    assert c.controller_uid == "pod-uid" and not c.deleting


def test_claim_defaults_and_beta_class_annotation() -> None:
    obj = _pvc(storageClassName="spec-class")
    obj["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "beta-class"}
    c = parse_pvc(obj)
    # GetPersistentVolumeClaimClass: the beta annotation wins
    assert c.storage_class == "beta-class"
    assert (c.request, c.phase, c.selected_node, c.selector, c.fully_bound) == (
        0,
        "Pending",
        None,
        None,
        False,
    )


def test_volume_fields() -> None:
    pv = parse_pv(
        {
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-1", "labels": {"topology.kubernetes.io/zone": "a"}},
            "spec": {
                "capacity": {"storage": "10G"},
                "storageClassName": "local",
                "accessModes": ["ReadWriteOnce"],
                "claimRef": {"namespace": "ns", "name": "data", "uid": "u1"},
                "csi": {"driver": "disk.example.com", "volumeHandle": "vol-1"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}
                                ]
                            }
                        ]
                    }
                },
            },
            "status": {"phase": "Bound"},
        }
    )
    assert (pv.capacity, pv.storage_class, pv.phase) == (10**10, "local", "Bound")
    assert pv.claim_ref == ClaimRef("ns", "data", "u1") and pv.csi == CsiSource("disk.example.com", "vol-1")
    assert pv.node_terms is not None and len(pv.node_terms) == 1 and "n1" in pv.affinity_key
    free = parse_pv({"kind": "PersistentVolume", "metadata": {"name": "pv-2"}, "spec": {}})
    assert free.node_terms is None and free.claim_ref is None and free.phase == "Pending"


def test_storage_class_fields() -> None:
    sc = parse_storage_class(
        {
            "kind": "StorageClass",
            "metadata": {"name": "fast"},
            "provisioner": "disk.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "parameters": {"csi.storage.k8s.io/csi-driver-name": "csi.x"},
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}],
        }
    )
    assert sc.delayed and sc.provisions and sc.csi_driver == "csi.x"
    assert sc.allowed_topologies == (
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
    )
    plain = parse_storage_class(
        {"kind": "StorageClass", "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner"}
    )
    # the API server's default binding mode; no-provisioner never provisions
    assert not plain.delayed and not plain.provisions and plain.csi_driver == "kubernetes.io/no-provisioner"


def test_csi_node_limits() -> None:
    n = parse_csi_node(
        {
            "kind": "CSINode",
            "metadata": {"name": "n1"},
            "spec": {
                "drivers": [
                    {"name": "a", "nodeID": "n1", "allocatable": {"count": 3}},
                    {"name": "b", "nodeID": "n1"},
                ]
            },
        }
    )
    assert n.drivers == {"a": 3, "b": None}


def test_limit_key_is_shortened_past_63_characters() -> None:
    assert csi_limit_key("ebs.csi.aws.com") == "attachable-volumes-csi-ebs.csi.aws.com"
    long = csi_limit_key("x" * 50)
    assert (
        len(long) < 63 + 16
        and long.startswith("attachable-volumes-csi-" + "x" * 23)
        and long != csi_limit_key("x" * 51)
    )


def test_pod_claim_volumes_and_ephemeral_claim_name() -> None:
    pod = parse_pod(
        {
            "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "ns"},
            "spec": {
                "containers": [{}],
                "volumes": [
                    {"name": "cfg", "configMap": {"name": "c"}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                ],
            },
        }
    )
    assert pod.volumes == (
        PodVolume("data", "data-web-0", False),
        PodVolume("scratch", "web-0-scratch", True),
    )
    assert parse_pod({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{}]}}).volumes == ()


@pytest.mark.parametrize(
    ("parse", "obj", "field"),
    [
        (parse_pvc, _pvc(resources={"requests": {"storage": "lots"}}), "spec.resources.requests.storage"),
        (parse_pvc, _pvc(accessModes="ReadWriteOnce"), "spec.accessModes"),
        (
            parse_pvc,
            _pvc(selector={"matchExpressions": [{"key": "a", "operator": "Near"}]}),
            "spec.selector.matchExpressions[0].operator",
        ),
        (parse_pv, {"metadata": {"name": "v"}, "spec": {"claimRef": "ns/data"}}, "spec.claimRef"),
        (
            parse_pv,
            {"metadata": {"name": "v"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": "x"}}}},
            "spec.nodeAffinity.required.nodeSelectorTerms",
        ),
        (parse_storage_class, {"metadata": {"name": "s"}, "volumeBindingMode": "Later"}, "volumeBindingMode"),
        (
            parse_csi_node,
            {"metadata": {"name": "n"}, "spec": {"drivers": [{"name": "a", "allocatable": {"count": "3"}}]}},
            "spec.drivers[0].allocatable.count",
        ),
        (
            parse_pod,
            {"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {}}]}},
            "spec.volumes[0].persistentVolumeClaim.claimName",
        ),
        (
            parse_pod,
            {"metadata": {"name": "p"}, "spec": {"volumes": [{"ephemeral": {}}]}},
            "spec.volumes[0].name",
        ),
    ],
)
def test_malformed_fields_are_named(parse, obj, field: str) -> None:
    with pytest.raises(ObjectError) as err:
        parse(obj)
    assert err.value.field == field


def test_manifests_with_storage_objects_are_read_and_a_bad_one_is_a_warning() -> None:
    objs = [
        _pvc(storageClassName="local"),
        {"kind": "PersistentVolume", "metadata": {"name": "pv-1"}, "spec": {"storageClassName": "local"}},
        {"kind": "PersistentVolume", "metadata": {"name": "pv-bad"}, "spec": {"capacity": {"storage": "x"}}},
        {"kind": "StorageClass", "metadata": {"name": "local"}},
        {"kind": "CSINode", "metadata": {"name": "n1"}},
    ]
    snap = build_snapshot([Manifest(f"f{i}.yaml", o) for i, o in enumerate(objs)])
    catalog = snap.volumes()
    assert list(catalog.pvcs) == ["ns/data"] and list(catalog.pvs) == ["pv-1"]
    assert list(catalog.classes) == ["local"] and list(catalog.csi_nodes) == ["n1"]
    assert [p.name for p in catalog.pvs_of_class("local")] == ["pv-1"]
    assert any(
        "PersistentVolume pv-bad" in p.message and "spec.capacity.storage" in p.message for p in snap.problems
    )
    assert "rancher.io/local-path" in catalog.ignored_provisioners  # Volcano's default ignored provisioners


def test_cache_keeps_one_catalog_until_a_storage_object_changes() -> None:
    cache = ClusterCache()
    cache.update(
        "PersistentVolume", "pv-1", {"kind": "PersistentVolume", "metadata": {"name": "pv-1"}, "spec": {}}
    )
    first = cache.open()[0].volumes()
    assert cache.open()[0].volumes() is first  # nothing changed: the same catalog
    cache.update(
        "Pod",
        "ns/p",
        {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [{}]}},
    )
    assert cache.open()[0].volumes() is first  # a pod is not a storage object
    cache.update("PersistentVolumeClaim", "ns/data", _pvc())
    second = cache.open()[0].volumes()
    assert second is not first and list(second.pvcs) == ["ns/data"] and list(second.pvs) == ["pv-1"]
    cache.update("PersistentVolume", "pv-1", None)
    assert list(cache.open()[0].volumes().pvs) == []
