"""Quota/usage report (OBS-1, OBS-2) with the capacity-card plugin: per queue × card model,
cluster totals per card model, online (inference) vs offline (training) totals — and the same
numbers end to end through ``tidesched run``: /metrics, /api/v1/queues, Queue status."""

from __future__ import annotations

from pathlib import Path

from builders import card_node, card_pod, card_queue, node, podgroup
from tidesched.explain import quota
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
    rep = quota.report(ssn)
    assert len(decisions.events) == events  # the report only reads: no warnings added
    assert rep.source == "capacity-card"
    assert rep.queues["online"]["NVIDIA-H200"] == quota.Usage(4.0, 2.0, 0.0, 0.0)
    assert rep.queues["offline"]["NVIDIA-A100"] == quota.Usage(4.0, 4.0, 0.0, 0.0)
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


