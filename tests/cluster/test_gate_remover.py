"""``tidesched run --feature-gates=SchedulingGatesQueueAdmission=true`` against the fake API: an
admitted pod loses Volcano's queue-admission gate (one strategic-merge PATCH) and is then bound;
a pod held by another gate too is left alone (cluster/gate_remover.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from builders import CAPACITY_CONFIG, node, pod, podgroup, queue
from cluster_helpers import bound_nodes, fake_api, make_runner, wait
from tidesched.cluster.commands import options_from_args, run_parser
from tidesched.framework.features import QUEUE_ADMISSION, parse_feature_gates
from tidesched.model.gates import QUEUE_ALLOCATION_GATE

def _gated(name: str, *gates: str) -> dict:
    return pod(name, "pg", cpu="1", annotations={QUEUE_ALLOCATION_GATE: "true"},
               spec={"schedulingGates": [{"name": g} for g in gates]})


def _gates(api, name: str) -> list[str]:
    return [g["name"] for g in api.get("Pod", f"ns/{name}")["spec"].get("schedulingGates") or []]


def test_an_admitted_pod_is_ungated_then_bound_and_other_gates_stay(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many([
            node("n1", cpu="4"), queue("default"), queue("q", capability={"cpu": "4"}),
            podgroup("pg", 1, queue="q", phase="Pending", min_resources={"cpu": "1"}),
            _gated("admitted", QUEUE_ALLOCATION_GATE),
            _gated("held", QUEUE_ALLOCATION_GATE, "example.com/other"),
        ])
        r = make_runner(api, tmp_path, config=CAPACITY_CONFIG,
                        feature_gates=parse_feature_gates(f"{QUEUE_ADMISSION}=true"))
        t = threading.Thread(target=r.run, daemon=True)
        t.start()
        try:
            assert wait(lambda: _gates(api, "admitted") == [], 10)
            assert wait(lambda: bound_nodes(api)["ns/admitted"] == "n1", 10)
            assert wait(lambda: r.sessions >= 4, 10)
        finally:
            r.stop()
            t.join(10)
        assert _gates(api, "held") == [QUEUE_ALLOCATION_GATE, "example.com/other"]
        assert bound_nodes(api)["ns/held"] == ""
        assert api.count("PATCH", r"/pods/admitted$") == 1  # once, not once per session
        assert api.count("PATCH", r"/pods/held$") == 0


def test_without_the_feature_no_gate_is_touched(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many([node("n1"), queue("default"), podgroup("pg", 1), _gated("p", QUEUE_ALLOCATION_GATE)])
        r = make_runner(api, tmp_path, config=CAPACITY_CONFIG)
        t = threading.Thread(target=r.run, daemon=True)
        t.start()
        try:
            assert wait(lambda: r.sessions >= 3, 10)
        finally:
            r.stop()
            t.join(10)
        assert _gates(api, "p") == [QUEUE_ALLOCATION_GATE] and api.count("PATCH", r"/pods/p$") == 0


def test_the_flags_as_vc_scheduler_spells_them() -> None:
    args = run_parser().parse_args(["--feature-gates=SchedulingGatesQueueAdmission=true,CSIStorage=false",
                                    "--gate-removal-worker-num=10"])
    opts = options_from_args(args)
    assert opts.feature_gates.enabled(QUEUE_ADMISSION) and opts.gate_removal_workers == 10
    assert not run_parser().parse_args([]).feature_gates.enabled(QUEUE_ADMISSION)  # off by default
