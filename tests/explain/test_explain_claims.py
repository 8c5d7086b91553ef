"""``tidesched explain`` for pods with DRA ResourceClaims (issue 35): which request of which claim
no node could satisfy and why, in node counts — per pod, and per gang once per request shape —
over a cluster whose nodes differ in what they have of the devices asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from tidesched.cli import app

runner = CliRunner()
DRIVER = "gpu.nvidia.com"
BIG = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0'


def node(name: str, cpu: str = "16") -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}}


def gpus(node_name: str, *memories: str, numa: tuple[int, ...] = ()) -> dict[str, Any]:
    devices = []
    for j, mem in enumerate(memories):
        d: dict[str, Any] = {"name": f"gpu-{j}", "attributes": {"productName": {"string": "NVIDIA H100"}},
                             "capacity": {"memory": {"value": mem}}}
        if numa:
            d["attributes"]["numa"] = {"int": numa[j]}
        devices.append(d)
    return {"kind": "ResourceSlice", "metadata": {"name": f"{node_name}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node_name, "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def held(name: str, node_name: str, *devices: str) -> dict[str, Any]:
    results = [{"request": "gpu", "driver": DRIVER, "pool": node_name, "device": d} for d in devices]
    return {"kind": "ResourceClaim", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": len(devices)}}]}},
            "status": {"allocation": {"devices": {"results": results}}}}


def claim_spec(count: int = 2, constraints: list[Any] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "count": count, "selectors": [{"cel": {"expression": BIG}}]}}]}
    if constraints:
        devices["constraints"] = constraints
    return {"devices": devices}


def gang(size: int, spec: dict[str, Any], cpu: str = "1") -> list[dict[str, Any]]:
    """A gang of pods whose claims kube-controller-manager made from the template two-big."""
    objs: list[dict[str, Any]] = [
        {"kind": "ResourceClaimTemplate", "metadata": {"name": "two-big", "namespace": "ml"}, "spec": {"spec": spec}},
        {"kind": "PodGroup", "metadata": {"name": "train", "namespace": "ml"}, "spec": {"minMember": size}, "status": {"phase": "Inqueue"}},
    ]
    for i in range(size):
        objs.append({"kind": "ResourceClaim", "metadata": {"name": f"train-{i}-gpu", "namespace": "ml", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": f"train-{i}", "uid": f"uid-train-{i}", "controller": True}]}, "spec": spec})
        objs.append({"kind": "Pod", "metadata": {"name": f"train-{i}", "namespace": "ml", "uid": f"uid-train-{i}",
                                                 "annotations": {"scheduling.k8s.io/group-name": "train"}},
                     "spec": {"schedulerName": "volcano", "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "two-big"}],
                              "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}, "claims": [{"name": "gpu"}]}}]},
                     "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"train-{i}-gpu"}]}})
    return objs


def populations() -> list[dict[str, Any]]:
    """12 nodes with small GPUs only, 3 with one big GPU, 2 whose two big GPUs are both held,
    1 with two big GPUs of which one is held, 1 CPU-only node."""
    objs: list[dict[str, Any]] = [
        {"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}},
        {"kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
        node("cpu-0"),
    ]
    for i in range(12):
        objs += [node(f"small-{i:02d}"), gpus(f"small-{i:02d}", "24Gi", "24Gi")]
    for i in range(3):
        objs += [node(f"one-big-{i}"), gpus(f"one-big-{i}", "80Gi", "24Gi")]
    for i in range(2):
        objs += [node(f"busy-{i}"), gpus(f"busy-{i}", "141Gi", "141Gi"), held(f"busy-{i}", f"busy-{i}", "gpu-0", "gpu-1")]
    objs += [node("half-busy"), gpus("half-busy", "141Gi", "141Gi"), held("half", "half-busy", "gpu-1")]
    return objs


def explain(tmp_path: Path, objs: list[dict[str, Any]], target: str) -> list[str]:
    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    res = runner.invoke(app, ["explain", target, str(path)], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    return res.stdout.splitlines()


WHY = (f"    selector {BIG}: no device of class gpu.nvidia.com on 1 node; no such device on 12 nodes; "
       "3 nodes have one but not 2; every such device is taken on 2 nodes; 1 node has one free but not 2")


def test_pod_explain_says_which_request_of_which_claim_and_why_per_node_population(tmp_path: Path) -> None:
    lines = explain(tmp_path, populations() + gang(2, claim_spec()), "ml/train-0")
    at = lines.index("Claims: no node can allocate them (19 nodes).")
    assert lines[at + 1:at + 3] == [
        "  claim ml/train-0-gpu (template two-big) request gpu: 2 devices of class gpu.nvidia.com",
        WHY,
    ]


def test_gang_explain_tells_each_request_shape_once_with_its_pods(tmp_path: Path) -> None:
    lines = explain(tmp_path, populations() + gang(3, claim_spec()), "ml/podgroup/train")
    at = lines.index("Claims of the pending pods (how many pods ask so):")
    assert lines[at + 1:at + 3] == [
        "  request gpu of claims from template two-big (3 pods): 2 devices of class gpu.nvidia.com",
        WHY,
    ]


def test_devices_enough_for_each_request_but_not_together(tmp_path: Path) -> None:
    # Two big GPUs on one NUMA node are asked for; n1 has two big ones on different NUMA nodes.
    objs = [
        {"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}},
        {"kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
        node("n1"), gpus("n1", "80Gi", "80Gi", numa=(0, 1)),
    ]
    spec = claim_spec(constraints=[{"matchAttribute": "gpu.nvidia.com/numa"}])
    lines = explain(tmp_path, objs + gang(1, spec), "ml/train-0")
    at = lines.index("Claims: no node can allocate them (1 node).")
    assert lines[at + 1] == ("  1 node has enough devices for each request but not for all of them together "
                             "(constraints, or requests that would share devices)")


def test_claims_that_fit_but_a_pod_that_does_not(tmp_path: Path) -> None:
    objs = populations() + gang(1, claim_spec(count=1), cpu="64")
    lines = explain(tmp_path, objs, "ml/train-0")
    assert "Claims: can be allocated on 4 of 19 nodes; on the others:" in lines
    assert any(line.startswith("Nodes: 0/19 nodes are unavailable:") and "Insufficient cpu" in line for line in lines)


def test_a_claim_not_made_yet(tmp_path: Path) -> None:
    objs = populations() + gang(1, claim_spec())
    pod = next(o for o in objs if o["kind"] == "Pod")
    del pod["status"]
    lines = explain(tmp_path, objs, "ml/train-0")
    assert "Claims: waiting for the ResourceClaim of gpu (template two-big, claim not made yet) to be created." in lines
