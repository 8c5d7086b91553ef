"""DRA in the simulator (issue 35): pods whose claims cannot be allocated never start and the
events say why; with DRA GPUs published as ResourceSlices, the simulated resourceclaim
controller makes each pod's claim from its template, the scheduler allocates it at bind, and
the controller frees it when the pod is done — so jobs take turns on the GPUs and no device is
ever in two claims (the ``REL-2 claims`` invariant)."""

from __future__ import annotations

from pathlib import Path

from builders import BASIC_CONFIG
from sim.test_engine import h200_node, load, queue, train_job

from tidesched.sim import run

TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "ml"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
}
CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
}


def _slice(node: str, gpus: int) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {"driver": "gpu.example.com", "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "H200"}}} for i in range(gpus)]},
    }


def _claim_job(name: str, run_for: str = "10m") -> dict:
    job = train_job(name, 1, 0, run_for)
    template = job["spec"]["tasks"][0]["template"]["spec"]
    template["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    template["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return job


def test_job_with_claims_never_starts_without_devices_and_says_why(tmp_path: Path) -> None:
    doc = {
        "name": "dra-pending",
        "schedulePeriod": "1m",
        "duration": "30m",
        "scheduler": {"config": BASIC_CONFIG},
        "objects": [h200_node("n1"), queue("train"), TEMPLATE, _claim_job("claims"), train_job("plain", 1, 4, "10m")],
    }
    r = run(load(tmp_path, doc)).result
    jobs = {j["name"]: j for j in r["jobs"]}
    assert jobs["ml/plain"]["phase"] == "Completed"
    assert jobs["ml/claims"]["started"] is None
    reasons = [e["message"] for e in r["events"] if e["reason"] == "FailedScheduling" and e["name"].startswith("claims")]
    assert reasons and "device class gpu.example.com does not exist" in reasons[-1], reasons[-1:]
    assert r["invariants"]["violations"] == []


def test_jobs_take_turns_on_one_dra_gpu(tmp_path: Path) -> None:
    doc = {
        "name": "dra-turns",
        "schedulePeriod": "1m",
        "duration": "40m",
        "scheduler": {"config": BASIC_CONFIG},
        "objects": [h200_node("n1"), queue("train"), TEMPLATE, CLASS, _slice("n1", 1),
                    _claim_job("first"), _claim_job("second")],
    }
    r = run(load(tmp_path, doc)).result
    jobs = {j["name"]: j for j in r["jobs"]}
    assert jobs["ml/first"]["phase"] == "Completed" and jobs["ml/second"]["phase"] == "Completed", jobs
    # One GPU: the second starts only once the first is done and its claim was freed.
    assert jobs["ml/second"]["started"] >= jobs["ml/first"]["started"] + 600
    assert r["invariants"]["violations"] == []
