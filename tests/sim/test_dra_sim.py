"""DRA in the simulator (issue 35, first step): a job whose pods ask for GPUs through
ResourceClaims never starts while tidesched cannot allocate claims — its pods are never placed
and the events say why — and the jobs beside it run as before."""

from __future__ import annotations

from pathlib import Path

from builders import BASIC_CONFIG
from sim.test_engine import h200_node, load, queue, train_job

from tidesched.sim import run


def _claim_job() -> dict:
    job = train_job("claims", 1, 0, "10m")
    template = job["spec"]["tasks"][0]["template"]["spec"]
    template["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    template["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return job


def test_job_with_claims_never_starts_and_says_why(tmp_path: Path) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
    }
    doc = {
        "name": "dra-pending",
        "schedulePeriod": "1m",
        "duration": "30m",
        "scheduler": {"config": BASIC_CONFIG},
        "objects": [h200_node("n1"), queue("train"), template, _claim_job(), train_job("plain", 1, 4, "10m")],
    }
    r = run(load(tmp_path, doc)).result
    jobs = {j["name"]: j for j in r["jobs"]}
    assert jobs["ml/plain"]["phase"] == "Completed"
    assert jobs["ml/claims"]["started"] is None
    reasons = [e["message"] for e in r["events"] if e["reason"] == "FailedScheduling" and e["name"].startswith("claims")]
    assert reasons and "ResourceClaims (gpu (template one-gpu, claim not made yet))" in reasons[0], reasons[:1]
    assert r["invariants"]["violations"] == []
