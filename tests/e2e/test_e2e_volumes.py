"""Volumes on a real control plane with the real kube-controller-manager's PV controllers (issue
32): tidesched run binds a WaitForFirstConsumer claim's local PV to it (``spec.claimRef``) before
the pod's Binding, and the PV controller completes the binding; a claim of a no-provisioner class
with no PV left keeps its pod pending with kube-scheduler's reason; an Immediate claim the PV
controller bound takes its pod to the PV's node; a claim of a class that provisions is given the
chosen node (``volume.kubernetes.io/selected-node``) and the pod binds once the volume made there
is bound. The scheduler runs as Volcano's own e2e runs vc-scheduler (its CI config, and
``--ignored-provisioners kubernetes.io/no-provisioner`` as for its schedulingbase suite, which
holds its volume binding tests), under the RBAC of deploy/.

kube-controller-manager (``../shared/envtest/kube-controller-manager.xz``) runs here, for this
module only, with just its volume controllers (PV binder, ephemeral volumes, PV/PVC protection)."""

from __future__ import annotations

import lzma
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from cluster import (
    GROUP_NAME,
    VOLCANO_115_CI_CONF,
    bound,
    create_node,
    create_podgroup,
    events,
    pod_body,
    wait_until,
)
from controlplane import ControlPlane, _Proc

SC, PV = "/apis/storage.k8s.io/v1/storageclasses", "/api/v1/persistentvolumes"
VOLUME_CONTROLLERS = (
    "persistentvolume-binder-controller",
    "ephemeral-volume-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
)


def _kcm_binary(cp: ControlPlane) -> Path:
    packed = cp.assets / "kube-controller-manager.xz"
    plain = cp.assets / "kube-controller-manager"
    if plain.exists():
        return plain
    if not packed.exists():
        missing = f"kube-controller-manager(.xz) not found in {cp.assets}"
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tidesched-e2e"
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / "kube-controller-manager"
    if not target.exists() or target.stat().st_mtime < packed.stat().st_mtime:
        tmp = target.with_suffix(".tmp")
        with lzma.open(packed) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        tmp.chmod(0o755)
        tmp.replace(target)
    return target


@pytest.fixture(scope="module")
def pv_controller(control_plane: ControlPlane) -> Iterator[_Proc]:
    workdir = control_plane.workdir
    kubeconfig = control_plane.kubeconfig(workdir / "kcm.kubeconfig", control_plane.admin_token, user="kcm")
    proc = _Proc(
        "kube-controller-manager",
        [
            str(_kcm_binary(control_plane)),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--secure-port=0",
            f"--controllers={','.join(VOLUME_CONTROLLERS)}",
            "-v=2",
        ],
        workdir / "kube-controller-manager.log",
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def _class(name: str, provisioner: str, mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }


def _local_pv(name: str, cls: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": cls,
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "local": {"path": "/mnt/disk"},
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


def _claim(ns: str, name: str, cls: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "storageClassName": cls,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def _pod(api, ns: str, name: str, claim: str) -> None:
    create_podgroup(api, ns, name, min_member=1)
    body = pod_body(ns, name, annotations={GROUP_NAME: name})
    body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    api.post(f"/api/v1/namespaces/{ns}/pods", body)


@pytest.fixture
def storage(e2e, pv_controller) -> Iterator[list[str]]:
    """Paths of the cluster-scoped objects a test makes (PVs, classes), deleted after it (best
    effort: a PV still protected goes once the PV controller lets it)."""
    made: list[str] = []
    yield made
    for path in reversed(made):
        try:
            e2e.api.delete(path)
        except Exception:  # noqa: BLE001 - already gone, or held by a finalizer: names are unique anyway
            pass


def _create(api, storage: list[str], collection: str, obj: dict[str, Any]) -> None:
    api.post(collection, obj)
    storage.append(f"{collection}/{obj['metadata']['name']}")


def _claim_of(api, ns: str, name: str) -> dict[str, Any]:
    return api.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}")


def test_wait_for_first_consumer_local_pv_and_a_no_provisioner_class(e2e, storage) -> None:
    api = e2e.api
    ns = e2e.namespace("wffc")
    local = f"local-{ns}"
    create_node(api, "node-a")
    create_node(api, "node-b")
    _create(api, storage, SC, _class(local, "kubernetes.io/no-provisioner", "WaitForFirstConsumer"))
    _create(api, storage, PV, _local_pv(f"pv-{ns}", local, "node-b"))
    for claim in ("data", "more"):
        api.post(f"/api/v1/namespaces/{ns}/persistentvolumeclaims", _claim(ns, claim, local))
    _pod(api, ns, "db", "data")
    e2e.scheduler(VOLCANO_115_CI_CONF, args=["--ignored-provisioners", "kubernetes.io/no-provisioner"])

    wait_until(lambda: bound(api, ns).get("db") == "node-b", 30, "db bound to node-b, where its PV is")
    claim = _claim_of(api, ns, "data")
    # Bound by the PV controller from the claimRef tidesched wrote, before the pod's Binding.
    assert claim["spec"]["volumeName"] == f"pv-{ns}" and claim["status"]["phase"] == "Bound"
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    pv = api.get(f"/api/v1/persistentvolumes/pv-{ns}")
    assert pv["spec"]["claimRef"]["name"] == "data" and pv["status"]["phase"] == "Bound"

    # The class provisions nothing and its one PV is taken: the next pod waits, saying why.
    _pod(api, ns, "db2", "more")
    failed = wait_until(lambda: events(api, ns, "db2", "FailedScheduling"), 30, "FailedScheduling on db2")
    assert "2 node(s) didn't find available persistent volumes to bind" in failed[-1]["message"], failed[-1]
    assert "db2" not in bound(api, ns) and _claim_of(api, ns, "more")["status"]["phase"] == "Pending"


def test_immediate_claim_and_one_provisioned_on_the_chosen_node(e2e, storage) -> None:
    api = e2e.api
    ns = e2e.namespace("imm")
    immediate, fast = f"immediate-{ns}", f"fast-{ns}"
    create_node(api, "node-a")
    create_node(api, "node-b")
    _create(api, storage, SC, _class(immediate, "kubernetes.io/no-provisioner", "Immediate"))
    _create(api, storage, SC, _class(fast, "disk.example.com", "WaitForFirstConsumer"))
    _create(api, storage, PV, _local_pv(f"pv-{ns}", immediate, "node-a"))
    api.post(f"/api/v1/namespaces/{ns}/persistentvolumeclaims", _claim(ns, "config", immediate))
    api.post(f"/api/v1/namespaces/{ns}/persistentvolumeclaims", _claim(ns, "scratch", fast))
    _pod(api, ns, "reader", "config")
    _pod(api, ns, "builder", "scratch")
    e2e.scheduler(
        VOLCANO_115_CI_CONF, args=["--ignored-provisioners", "kubernetes.io/no-provisioner,disk.example.com"]
    )

    # Immediate: the PV controller binds the claim by itself; the pod follows the PV to node-a.
    wait_until(lambda: bound(api, ns).get("reader") == "node-a", 30, "reader bound to node-a")
    assert _claim_of(api, ns, "config")["spec"]["volumeName"] == f"pv-{ns}"

    # To provision: tidesched gives the claim its node; the pod waits for the volume.
    node = wait_until(
        lambda: (_claim_of(api, ns, "scratch")["metadata"].get("annotations") or {}).get(
            "volume.kubernetes.io/selected-node"
        ),
        30,
        "the claim to provision given a node",
    )
    assert "builder" not in bound(api, ns)
    # The external provisioner (played here) makes the volume there, naming the claim.
    claim = _claim_of(api, ns, "scratch")
    pv = _local_pv(f"pvc-{claim['metadata']['uid']}", fast, node)
    pv["metadata"]["annotations"] = {"pv.kubernetes.io/provisioned-by": "disk.example.com"}
    pv["spec"]["claimRef"] = {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": ns,
        "name": "scratch",
        "uid": claim["metadata"]["uid"],
    }
    _create(api, storage, PV, pv)
    wait_until(lambda: bound(api, ns).get("builder") == node, 30, "builder bound where its volume was made")
    assert _claim_of(api, ns, "scratch")["status"]["phase"] == "Bound"
