"""Quota/usage report (OBS-1, OBS-2) with the capacity-card plugin: per queue × card model,
cluster totals per card model, online (inference) vs offline (training) totals — and the same
numbers end to end through ``tidesched run``: /metrics, /api/v1/queues, Queue status."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from builders import card_node, card_pod, card_queue, node, podgroup
from kube_helpers import fake_api, http_get, make_runner, wait
from tidesched.kube import usage
from tidesched.model.snapshot import build_snapshot
from tidesched.scheduler import config_from_file, open_session

ROOT = Path(__file__).resolve().parents[2]
SEED000 = ROOT / "tests/data/config/seed000_tidal.conf"
RUNNING = {"phase": "Running"}


def _cluster() -> list[dict]:
    bad = podgroup("odd", 1, queue="offline", phase="Running")
    bad["metadata"]["annotations"] = {"volcano.sh/service.type": "batchy"}
    return [
        card_node("g1", "NVIDIA-H200", 8),
        card_node("g2", "NVIDIA-A100", 4),
        node("c1"),
        card_queue("online", '{"NVIDIA-H200": 4}', cpu="32"),
        card_queue("offline", '{"NVIDIA-H200": 8, "NVIDIA-A100": 4}', cpu="32"),
        card_pod("inf", "NVIDIA-H200", 2, queue_name="online", owner="ReplicaSet", node_name="g1", **RUNNING),
        card_pod("train", "NVIDIA-A100", 3, queue_name="offline", owner="Job", node_name="g2", **RUNNING),
        card_pod("wait", "NVIDIA-H200", 1, queue_name="offline", owner="Job"),
        bad,
        card_pod("odd-0", "NVIDIA-A100", 1, group="odd", node_name="g2", phase="Running"),
    ]


def test_report_per_card_model_and_service_type() -> None:
    ssn = open_session(build_snapshot(_cluster()), config_from_file(SEED000))
    decisions = ssn.close()
    events = len(decisions.events)
    rep = usage.report(ssn)
    assert len(decisions.events) == events  # the report only reads: no warnings added
    assert rep.source == "capacity-card"
    assert rep.queues["online"]["NVIDIA-H200"] == usage.Usage(4.0, 2.0, 0.0, 0.0)
    assert rep.queues["offline"]["NVIDIA-A100"] == usage.Usage(4.0, 4.0, 0.0, 0.0)
    assert rep.queues["offline"]["NVIDIA-H200"].pending == 1.0
    # Cluster totals per card model, beside the generic resource name.
    assert rep.cluster["NVIDIA-H200"] == 8.0 and rep.cluster["NVIDIA-A100"] == 4.0
    assert rep.cluster["nvidia.com/gpu"] == 12.0
    # Online vs offline by the plugin's own rule (owner kinds mapped by the config); a bad
    # annotation is "unknown".
    assert rep.services["inference"]["NVIDIA-H200"] == 2.0 and "NVIDIA-A100" not in rep.services["inference"]
    assert rep.services["training"]["NVIDIA-A100"] == 3.0
    assert rep.services["unknown"]["NVIDIA-A100"] == 1.0
    assert rep.card_allocated() == {
        "default": {},
        "offline": {"NVIDIA-A100": "4", "NVIDIA-H200": "0"},
        "online": {"NVIDIA-H200": "2"},
    }


def test_run_exports_card_quota_usage_and_writes_queue_status(tmp_path: Path) -> None:
    objs = [
        card_node("g1", "NVIDIA-H200", 8),
        card_node("g2", "NVIDIA-A100", 4),
        card_queue("online", '{"NVIDIA-H200": 4}', cpu="32"),
        card_queue("offline", '{"NVIDIA-A100": 2}', cpu="32"),
        card_pod("inf-0", "NVIDIA-H200", 1, queue_name="online", owner="ReplicaSet"),
        card_pod("inf-1", "NVIDIA-H200", 1, queue_name="online", owner="ReplicaSet"),
        card_pod("train-0", "NVIDIA-A100", 2, queue_name="offline", owner="Job"),
        card_pod("train-1", "NVIDIA-A100", 2, queue_name="offline", owner="Job"),
    ]
    with fake_api() as api:
        api.create_many(objs)
        r = make_runner(
            api, tmp_path, config=SEED000.read_text(), enable_metrics=True, listen_address="127.0.0.1:0"
        )
        t = threading.Thread(target=r.run, daemon=True)
        t.start()
        try:
            def bound(name: str) -> bool:
                return bool(api.get("Pod", f"ns/{name}")["spec"].get("nodeName"))

            # Both inference pods; one of the two training pods (which one: creation order, then UID).
            assert wait(
                lambda: bound("inf-0") and bound("inf-1") and (bound("train-0") or bound("train-1")), 10
            )
            assert not (bound("train-0") and bound("train-1"))  # the queue's A100 quota is 2
            # Queue status.allocated carries the per-card-model usage.
            def allocated(queue: str) -> dict:
                return (api.get("Queue", queue).get("status") or {}).get("allocated", {})

            assert wait(lambda: allocated("online").get("NVIDIA-H200") == "2", 10)
            assert wait(lambda: allocated("offline").get("NVIDIA-A100") == "2", 10)
            code, body = http_get(r.servers[0].port, "/metrics")
            assert code == 200
            for line in (
                'tidesched_queue_quota{queue="online",resource="NVIDIA-H200"} 4.0',
                'tidesched_queue_allocated{queue="online",resource="NVIDIA-H200"} 2.0',
                'tidesched_queue_quota{queue="offline",resource="NVIDIA-A100"} 2.0',
                'tidesched_queue_allocated{queue="offline",resource="NVIDIA-A100"} 2.0',
                'tidesched_queue_pending{queue="offline",resource="NVIDIA-A100"} 2.0',
                'tidesched_cluster_allocatable{resource="NVIDIA-H200"} 8.0',
                'tidesched_cluster_allocatable{resource="NVIDIA-A100"} 4.0',
                'tidesched_service_allocated{resource="NVIDIA-H200",service_type="inference"} 2.0',
                'tidesched_service_allocated{resource="NVIDIA-A100",service_type="training"} 2.0',
            ):
                assert line in body, line
            code, body = http_get(r.servers[0].port, "/api/v1/queues")
            q = json.loads(body)
            assert code == 200 and q["source"] == "capacity-card"
            assert q["queues"]["online"]["NVIDIA-H200"] == {
                "quota": 4.0,
                "used": 2.0,
                "inqueue": 0.0,
                "pending": 0.0,
            }
            assert q["cluster"]["NVIDIA-A100"] == 4.0
            assert q["services"]["training"]["NVIDIA-A100"] == 2.0
        finally:
            r.stop()
            t.join(10)
