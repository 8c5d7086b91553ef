"""Volumes in the simulator (issue 32): local PVs on some nodes, a StatefulSet-like set of pods
each with its own WaitForFirstConsumer claim, an Immediate claim, a claim the class provisions on
the chosen node, an ephemeral volume: every pod lands where its volume is, the simulated PV
controller binds what the scheduler chose, and no PV serves two claims — as the cluster would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builders import BASIC_CONFIG
from sim.test_engine import load

from tidesched.sim.runner import Engine

NS = "db"


def _node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def _class(name: str, provisioner: str, mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }


def _local_pv(name: str, node: str, size: str = "10Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": "local",
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "local": {"path": f"/mnt/{name}"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                }
            },
        },
    }


def _claim(name: str, cls: str, size: str = "5Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "storageClassName": cls,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        },
    }


def _pod(name: str, volume: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "annotations": {"sim.tidesched.io/duration": "1h"}},
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "volumes": [{"name": "data", **volume}],
        },
    }


def _claim_pod(name: str, claim: str) -> dict[str, Any]:
    return _pod(name, {"persistentVolumeClaim": {"claimName": claim}})


def test_pods_follow_their_volumes_and_the_pv_controller_binds_them(tmp_path: Path) -> None:
    objects = [
        _node("n1"),
        _node("n2"),
        _node("n3"),
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "default"},
            "spec": {"weight": 1},
        },
        _class("local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer"),
        _class("fast", "disk.example.com", "Immediate"),
        _class("node-disk", "disk.example.com", "WaitForFirstConsumer"),
        # one local PV on n1, two on n3 (one too small), none on n2
        _local_pv("pv-n1", "n1"),
        _local_pv("pv-n3-big", "n3", "20Gi"),
        _local_pv("pv-n3-small", "n3", "1Gi"),
        _claim("data-0", "local"),
        _claim("data-1", "local"),
        _claim("data-2", "local"),
        _claim("shared-config", "fast"),
        _claim("scratch-claim", "node-disk"),
        *[_claim_pod(f"db-{i}", f"data-{i}") for i in range(3)],
        _claim_pod("reader", "shared-config"),
        _claim_pod("builder", "scratch-claim"),
        _pod(
            "tmp",
            {
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "storageClassName": "node-disk",
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        }
                    }
                }
            },
        ),
    ]
    doc = {
        "name": "volumes",
        "schedulePeriod": "10s",
        "duration": "5m",
        "scheduler": {
            "config": BASIC_CONFIG,
            "ignoredProvisioners": ["kubernetes.io/no-provisioner", "disk.example.com"],
        },
        "objects": objects,
    }
    engine = Engine(load(tmp_path, doc), 0)
    r = engine.run(None).result
    world = engine.world
    assert r["invariants"]["violations"] == []
    node_of = {k: (p.get("spec") or {}).get("nodeName") for k, p in world.items("Pod")}
    # Two local PVs big enough for three claims: two pods run where they are, one waits.
    placed = {k: n for k, n in node_of.items() if k.startswith(f"{NS}/db-") and n}
    assert sorted(placed.values()) == ["n1", "n3"], node_of
    waiting = [k for k in (f"{NS}/db-{i}" for i in range(3)) if k not in placed]
    assert len(waiting) == 1
    said = [
        e["message"]
        for e in r["events"]
        if e["reason"] == "FailedScheduling" and e["name"] == waiting[0].split("/")[1]
    ]
    assert said and "didn't find available persistent volumes to bind" in said[-1], said[-1:]
    claims = dict(world.items("PersistentVolumeClaim"))
    volumes = dict(world.items("PersistentVolume"))
    for pod_key, node in placed.items():
        claim = claims[f"{NS}/data-{pod_key[-1]}"]
        pv = volumes[claim["spec"]["volumeName"]]
        assert claim["status"]["phase"] == "Bound" and pv["status"]["phase"] == "Bound"
        assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0][
            "values"
        ] == [node]
    assert volumes["pv-n3-small"]["status"]["phase"] == "Available"  # too small: never given
    # No PV serves two claims.
    refs = [
        (v["spec"].get("claimRef") or {}).get("name") for v in volumes.values() if v["spec"].get("claimRef")
    ]
    assert len(refs) == len(set(refs))
    # Immediate: bound (provisioned) before the pod is scheduled; the pod ran.
    assert claims[f"{NS}/shared-config"]["status"]["phase"] == "Bound" and node_of[f"{NS}/reader"]
    # WaitForFirstConsumer with a provisioner: provisioned on the node the pod went to.
    scratch = claims[f"{NS}/scratch-claim"]
    assert (
        scratch["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node_of[f"{NS}/builder"]
    )
    provisioned = volumes[scratch["spec"]["volumeName"]]
    terms = provisioned["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == [node_of[f"{NS}/builder"]]
    # The ephemeral volume's claim was made for the pod, owned by it, and bound on its node.
    eph = claims[f"{NS}/tmp-data"]
    assert eph["metadata"]["ownerReferences"][0]["name"] == "tmp" and eph["status"]["phase"] == "Bound"
    assert eph["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node_of[f"{NS}/tmp"]
