"""Pod QoS classes (model/qos.py) as Kubernetes' GetPodQOS gives them."""

from __future__ import annotations

import pytest

from tidesched.model.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, pod_qos


def c(requests: dict | None = None, limits: dict | None = None) -> dict:
    res = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    return {"name": "c", "resources": res}


@pytest.mark.parametrize("spec, want", [
    ({"containers": [c()]}, BEST_EFFORT),
    ({"containers": [c({"nvidia.com/gpu": "1"})]}, BEST_EFFORT),  # only cpu and memory count
    ({"containers": [c({"cpu": "1"})]}, BURSTABLE),
    ({"containers": [c({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})]}, GUARANTEED),
    ({"containers": [c(None, {"cpu": "2", "memory": "1Gi"})]}, GUARANTEED),  # requests default to limits
    ({"containers": [c({"cpu": "1", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"})]}, BURSTABLE),
    ({"containers": [c(None, {"cpu": "1"})]}, BURSTABLE),  # no memory limit
    ({"containers": [c(None, {"cpu": "1", "memory": "1Gi"}), c({"cpu": "1"})]}, BURSTABLE),
    ({"containers": [c(None, {"cpu": "1", "memory": "1Gi"})], "initContainers": [c(None, {"cpu": "500m", "memory": "1Gi"})]}, GUARANTEED),
])
def test_pod_qos(spec: dict, want: str) -> None:
    assert pod_qos(spec) == want
