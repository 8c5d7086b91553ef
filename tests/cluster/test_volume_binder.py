"""A pod's volumes bound before its Binding (volume_binder.py, kube-scheduler's VolumeBinding
PreBind): the PV given its claim, or the claim its node, and the Binding only once the PV
controller (played by the test) bound the claim; a PV controller giving up, or the wait running
out, leaves the pod pending with an event. A PV being given to one pod is not offered to the next."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from builders import node, pod, podgroup, queue
from cluster_helpers import bound_nodes, fake_api, make_runner, wait

CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
    arguments: {volumebinding.bindTimeoutSeconds: %d}
  - name: nodeorder
"""


def _class(name: str, provisioner: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def _claim(name: str, cls: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {
            "storageClassName": cls,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
        "status": {"phase": "Pending"},
    }


def _local_pv(name: str, host: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": "local",
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "local": {"path": "/mnt"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}
                            ]
                        }
                    ]
                }
            },
        },
        "status": {"phase": "Available"},
    }


def _pod_with(name: str, claim: str) -> dict[str, Any]:
    p = pod(name, name)
    p["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return p


def _start(
    api, tmp_path: Path, timeout: int = 600, ignored: tuple[str, ...] = ("kubernetes.io/no-provisioner",)
):
    r = make_runner(api, tmp_path, CONFIG % timeout, ignored_provisioners=ignored)
    t = threading.Thread(target=r.run, daemon=True)
    t.start()
    return r, t


def _bind_claim(api, claim: str, pv: str) -> None:
    """What the PV controller does once a claim's PV names it."""

    def bind(obj: dict[str, Any]) -> None:
        obj["spec"]["volumeName"] = pv
        obj["metadata"].setdefault("annotations", {})["pv.kubernetes.io/bind-completed"] = "yes"
        obj["status"] = {"phase": "Bound"}

    api.update("PersistentVolumeClaim", f"ns/{claim}", bind)


def _events(api, reason: str) -> list[dict[str, Any]]:
    return [e for e in api.list("Event") if e["reason"] == reason]


def test_static_pv_is_bound_to_its_claim_before_the_pod(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many(
            [
                node("n1", labels={"kubernetes.io/hostname": "n1"}),
                node("n2", labels={"kubernetes.io/hostname": "n2"}),
                queue("default"),
                _class("local", "kubernetes.io/no-provisioner"),
                _local_pv("pv-1", "n2"),
                _claim("data", "local"),
                _claim("other", "local"),
                podgroup("first", 1),
                _pod_with("first", "data"),
            ]
        )
        r, t = _start(api, tmp_path)
        try:
            assert wait(
                lambda: (
                    (api.get("PersistentVolume", "pv-1")["spec"].get("claimRef") or {}).get("name") == "data"
                ),
                10,
            )
            pv = api.get("PersistentVolume", "pv-1")
            assert pv["spec"]["claimRef"]["uid"] == "uid-data"
            assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
            # Waiting for the PV controller: no Binding yet. A second pod wanting a PV meanwhile
            # is not offered pv-1 (the store shows it taken), so it tries nothing.
            api.create_many([podgroup("second", 1), _pod_with("second", "other")])
            assert not wait(lambda: api.count("POST", r"/binding$"), 1.0)
            _bind_claim(api, "data", "pv-1")
            assert wait(lambda: bound_nodes(api).get("ns/first") == "n2", 10)
            assert api.count("PUT", r"/persistentvolumes/pv-1$") == 1
            assert bound_nodes(api)["ns/second"] == ""
            assert not any("Binding rejected" in e["message"] for e in _events(api, "FailedScheduling"))
        finally:
            r.stop()
            t.join(10)


def test_claim_to_provision_gets_the_node_and_a_failed_provisioning_frees_the_pod(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many(
            [
                node("n1"),
                queue("default"),
                _class("fast", "disk.example.com"),
                _claim("data", "fast"),
                podgroup("p", 1),
                _pod_with("p", "data"),
            ]
        )
        r, t = _start(api, tmp_path, ignored=("disk.example.com",))
        try:

            def selected() -> str | None:
                return (api.get("PersistentVolumeClaim", "ns/data")["metadata"].get("annotations") or {}).get(
                    "volume.kubernetes.io/selected-node"
                )

            assert wait(lambda: selected() == "n1", 10)
            assert api.count("POST", r"/binding$") == 0
            # The provisioner cannot make the volume there: the PV controller drops the node.
            api.update(
                "PersistentVolumeClaim",
                "ns/data",
                lambda o: o["metadata"]["annotations"].pop("volume.kubernetes.io/selected-node"),
            )
            assert wait(
                lambda: any(
                    'selectedNode annotation reset for PVC "data"' in e["message"]
                    for e in _events(api, "FailedScheduling")
                ),
                10,
            )
            assert bound_nodes(api)["ns/p"] == ""
        finally:
            r.stop()
            t.join(10)


def test_the_wait_for_the_pv_controller_times_out(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many(
            [
                node("n1", labels={"kubernetes.io/hostname": "n1"}),
                queue("default"),
                _class("local", "kubernetes.io/no-provisioner"),
                _local_pv("pv-1", "n1"),
                _claim("data", "local"),
                podgroup("p", 1),
                _pod_with("p", "data"),
            ]
        )
        r, t = _start(api, tmp_path, timeout=1)
        try:
            assert wait(
                lambda: any(
                    "binding volumes: timed out" in e["message"] for e in _events(api, "FailedScheduling")
                ),
                15,
            )
            assert api.count("POST", r"/binding$") == 0
        finally:
            r.stop()
            t.join(10)
