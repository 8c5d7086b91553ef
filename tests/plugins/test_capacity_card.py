"""capacity-card plugin (CARD-1..9, DEC-1..11, TIDE-1..5): the seed configurations, hook
rules, accounting across sessions (HPA), the tidal policy, and invariants over random clusters.
Single-session outcomes are in tests/scenarios/capacity_card.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from builders import card_node, card_pod, card_queue, node, pod, podgroup, queue
from hypothesis import HealthCheck, given, settings, strategies as st

from tidesched.framework.arguments import ConfigError
from tidesched.framework.plugin import PERMIT, REJECT
from tidesched.framework.statement import Statement
from tidesched.model.snapshot import build_snapshot
from tidesched.model.status import TaskStatus
from tidesched.plugins.capacity_card import INFERENCE, TRAINING, UNKNOWN, CapacityCardPlugin
from tidesched.scheduler import config_from_file, config_from_text, open_session, run_actions

CONFIG_DIR = Path(__file__).parents[1] / "data" / "config"

H200 = "NVIDIA-H200"
G4090 = "NVIDIA-GeForce-RTX-4090"
G4090D = "NVIDIA-GeForce-RTX-4090-D"


def config(args: str = "cardUnlimitedCpuMemory: true", actions: str = "enqueue, allocate, backfill") -> str:
    return f"""
actions: "{actions}"
tiers:
- plugins:
  - name: priority
  - name: gang
    enableReclaimable: false
  - name: conformance
    enableReclaimable: false
- plugins:
  - name: predicates
  - name: capacity-card
    arguments: {{{args}}}
  - name: nodeorder
"""


def session(objs: list[dict[str, Any]], cfg: str | None = None):
    ssn = open_session(build_snapshot(objs), config_from_text(cfg or config()))
    return ssn, ssn.plugins["capacity-card"]


def events(
    decisions: Any, kind: str | None = None, name: str | None = None, reason: str | None = None
) -> list[Any]:
    return [
        e
        for e in decisions.events
        if (kind is None or e.kind == kind)
        and (name is None or e.name == name)
        and (reason is None or e.reason == reason)
    ]


# ------------------------------------------------------------------------------------------ configs


def test_seed_000_config_loads_and_runs_as_written() -> None:
    cfg = config_from_file(CONFIG_DIR / "seed000_tidal.conf")
    assert cfg.actions == ["enqueue", "allocate", "backfill", "reclaim"]
    objs = [
        card_node("n1", G4090),
        card_queue("queue-inference", f'{{"{G4090}":8}}', priority=80000, reclaimable=False),
        card_pod("inf", G4090, 2, queue_name="queue-inference", owner="ReplicaSet"),
    ]
    ssn = open_session(build_snapshot(objs), cfg)
    plugin = ssn.plugins["capacity-card"]
    assert isinstance(plugin, CapacityCardPlugin)
    assert plugin.over_commit_factor == 2.0
    assert plugin.card_unlimited_cpu_memory is True
    assert plugin.owner_service_types == {"ReplicaSet": INFERENCE, "Deployment": INFERENCE, "Job": TRAINING}
    assert run_actions(ssn).bound == {"ns/inf": "n1"}


def test_seed_002_config_loads_and_runs_as_written() -> None:
    cfg = config_from_file(CONFIG_DIR / "seed002_capacity_card.conf")
    objs = [
        card_node("n1", H200),
        card_queue("cr-queue1", f'{{"{H200}":3}}', cpu="4"),
        *[card_pod(f"p{i}", H200, 1, queue_name="cr-queue1") for i in range(4)],
    ]
    ssn = open_session(build_snapshot(objs), cfg)
    plugin = ssn.plugins["capacity-card"]
    assert plugin.card_unlimited_cpu_memory is True and plugin.over_commit_factor == 1.2
    decisions = run_actions(ssn)
    assert sorted(decisions.bound) == ["ns/p0", "ns/p1", "ns/p2"]
    assert plugin.queue_usage()["cr-queue1"][H200] == {
        "quota": 3.0,
        "allocated": 3.0,
        "inqueue": 0.0,
        "pending": 1.0,
    }


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ("cardUnlimitedCpuMemory: 'yes'", "cardUnlimitedCpuMemory"),
        ("overCommitFactor: 'two'", "overCommitFactor"),
        ("nodeOrderWeight: [1]", "nodeOrderWeight"),
        ("podOwnerReferenceToServiceType: {ReplicaSet: online}", "podOwnerReferenceToServiceType"),
        ("podOwnerReferenceToServiceType: [ReplicaSet]", "podOwnerReferenceToServiceType"),
    ],
)
def test_bad_arguments_are_config_errors(args: str, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        session([card_node("n1", H200)], config(args))


def test_out_of_range_arguments_fall_back_with_a_warning() -> None:
    ssn, plugin = session([card_node("n1", H200)], config("overCommitFactor: 0.5, nodeOrderWeight: -1"))
    assert plugin.over_commit_factor == 1.2 and plugin.node_order_weight == 1.0
    msgs = [e.message for e in ssn.events if e.reason == "InvalidArgument"]
    assert any("overCommitFactor 0.5" in m for m in msgs) and any("nodeOrderWeight -1" in m for m in msgs)


# ------------------------------------------------------------------------------------------ discovery in a session


def test_node_problems_become_warnings_on_the_node() -> None:
    bare = node("bare", **{"nvidia.com__gpu": "8"})
    ssn, plugin = session([bare, card_node("ok", H200)])
    evs = [e for e in ssn.events if e.reason == "InvalidCardLabels"]
    assert [(e.kind, e.name) for e in evs] == [("Node", "bare")]
    assert plugin.catalog.models == [H200]


def test_unlabelled_card_node_never_hands_out_cards() -> None:
    # DEC-3/DEC-4: a node whose GPUs have no model cannot charge them to any quota.
    objs = [
        node("a-bare", cpu="64", memory="64Gi", **{"nvidia.com__gpu": "8"}),
        card_queue("q1", f'{{"{H200}":8}}'),
        podgroup("j", queue="q1"),
        card_pod("p", None, 1, group="j"),
    ]
    decisions = run_actions(session(objs)[0])
    assert decisions.bound == {}
    assert (
        events(decisions, "Pod", "p", "FailedScheduling")[0].message
        == 'no card model offers resource "nvidia.com/gpu"'
    )


def test_not_ready_node_keeps_its_model_known() -> None:
    down = card_node("down", H200)
    down["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    objs = [
        down,
        card_queue("q1", f'{{"{H200}":8}}'),
        podgroup("j", queue="q1"),
        card_pod("p", H200, 1, group="j"),
    ]
    decisions = run_actions(session(objs)[0])
    fs = events(decisions, "Pod", "p", "FailedScheduling")
    assert fs and "unknown card model" not in fs[0].message  # Pending for lack of nodes, not a naming error


# ------------------------------------------------------------------------------------------ accounting (CARD-7, DEC-1)


def test_statement_operations_charge_the_landed_model_and_discard_reverts() -> None:
    objs = [
        card_node("a-4090d", G4090D),
        card_node("b-4090", G4090),
        card_queue("q1", f'{{"{G4090}":2,"{G4090D}":2}}'),
        podgroup("j", queue="q1", min_member=1),
        card_pod("p", f"{G4090}|{G4090D}", 2, group="j"),
        podgroup("r", queue="q1", phase="Running"),
        card_pod("r0", G4090, 1, group="r", node_name="b-4090", phase="Running"),
    ]
    ssn, plugin = session(objs)
    q = plugin.queues["q1"]
    assert q.alloc_cards == {G4090: 1000.0}
    task = next(t for t in ssn.tasks.values() if t.name == "p")
    stmt = Statement(ssn)
    stmt.allocate(task, "a-4090d")
    assert q.alloc_cards == {G4090: 1000.0, G4090D: 2000.0}
    stmt.discard()
    assert q.alloc_cards == {G4090: 1000.0, G4090D: 0.0}
    stmt = Statement(ssn)
    stmt.pipeline(task, "b-4090")  # DEC-1: pipelined pods are charged
    assert q.alloc_cards[G4090] == 3000.0
    running = next(t for t in ssn.tasks.values() if t.name == "r0")
    stmt.evict(running, "test")  # evicted (releasing) pods are not
    assert q.alloc_cards[G4090] == 2000.0
    stmt.discard()
    assert q.alloc_cards[G4090] == 1000.0 and running.status == TaskStatus.RUNNING


def test_releasing_pods_do_not_count_pipelined_do() -> None:
    objs = [
        card_node("n1", H200),
        card_queue("q1", f'{{"{H200}":8}}'),
        podgroup("old", queue="q1", phase="Running"),
        card_pod("old0", H200, 6, group="old", node_name="n1", phase="Running", deleting=True),
        podgroup("cur", queue="q1", phase="Running"),
        card_pod("cur0", H200, 2, group="cur", node_name="n1", phase="Running"),
    ]
    _ssn, plugin = session(objs)
    assert plugin.queues["q1"].alloc_cards == {H200: 2000.0}


def _hpa_world(replicas_running: int, pending: int, deleting: int = 0) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [card_node("n1", H200), card_queue("online", f'{{"{H200}":3}}')]
    for i in range(replicas_running):
        objs.append(
            card_pod(
                f"web-{i}",
                H200,
                1,
                queue_name="online",
                node_name="n1",
                phase="Running",
                owner="ReplicaSet",
                deleting=i < deleting,
            )
        )
    for i in range(replicas_running, replicas_running + pending):
        objs.append(card_pod(f"web-{i}", H200, 1, queue_name="online", owner="ReplicaSet"))
    return objs


def test_hpa_scale_out_beyond_quota_leaves_new_pods_pending_and_scale_in_returns_quota() -> None:
    # Session 1: 3 replicas run (quota 3), the HPA adds 2: both stay Pending with the quota event.
    decisions = run_actions(session(_hpa_world(3, 2))[0])
    assert decisions.bound == {}
    for name in ("web-3", "web-4"):
        (ev,) = events(decisions, "Pod", name, "InsufficientQuota")
        assert (
            ev.message
            == "Queue <online> has insufficient <NVIDIA-H200> quota: requested 1, total would be 4, but capability is 3"
        )
        assert events(decisions, "PodGroup", f"podgroup-ns-{name}", "InsufficientQuota")
    # Session 2: the HPA scales in by one (that pod is gone): one pending pod fits again.
    world = [o for o in _hpa_world(3, 2) if o["metadata"]["name"] != "web-0"]
    decisions = run_actions(session(world)[0])
    assert decisions.bound == {"ns/web-3": "n1"}
    assert events(decisions, "Pod", "web-4", "InsufficientQuota")


def test_scale_in_returns_quota_at_once_while_the_pod_terminates() -> None:
    # DEC-1: a terminating replica no longer counts, even before it is gone.
    ssn, plugin = session(_hpa_world(3, 1, deleting=1))
    decisions = run_actions(ssn)
    assert decisions.bound == {"ns/web-3": "n1"}
    assert plugin.queue_usage()["online"][H200]["allocated"] == 3.0


# ------------------------------------------------------------------------------------------ enqueue (CARD-5, CARD-6)


def test_hall_condition_for_overlapping_alternatives() -> None:
    # Quota A=2, B=2. An admitted job reserves 2 of "A|B"; a job asking A:2 still fits (the
    # first one can use B); then "A|B":1 would need 5 of 4.
    objs = [
        card_node("a", G4090),
        card_node("b", G4090D),
        card_queue("q1", f'{{"{G4090}":2,"{G4090D}":2}}'),
        podgroup(
            "first",
            queue="q1",
            phase="Inqueue",
            min_resources={"cpu": "1"},
        )
        | {
            "metadata": {
                "name": "first",
                "namespace": "ns",
                "annotations": {"volcano.sh/card.request": f'{{"{G4090}|{G4090D}":2}}'},
            }
        },
        podgroup("second", queue="q1", phase="Pending", min_resources={"cpu": "1"})
        | {
            "metadata": {
                "name": "second",
                "namespace": "ns",
                "annotations": {"volcano.sh/card.request": f'{{"{G4090}":2}}'},
                "creationTimestamp": "2026-01-01T00:00:01Z",
            }
        },
        podgroup("third", queue="q1", phase="Pending", min_resources={"cpu": "1"})
        | {
            "metadata": {
                "name": "third",
                "namespace": "ns",
                "annotations": {"volcano.sh/card.request": f'{{"{G4090D}|{G4090}":1}}'},
                "creationTimestamp": "2026-01-01T00:00:02Z",
            }
        },
    ]
    decisions = run_actions(session(objs)[0])
    assert decisions.podgroups["ns/second"] == "Inqueue"
    assert decisions.podgroups["ns/third"] == "Pending"
    (ev,) = events(decisions, "PodGroup", "third", "InsufficientQuota")
    assert ev.message == (
        f"Queue <q1> has insufficient <{G4090D}|{G4090}> quota: requested 1, total would be 5, "
        "but capability is 4"
    )


def test_enqueue_reserves_inqueue_for_later_jobs_and_counts_elastic() -> None:
    ssn, plugin = session(
        [
            card_node("n1", H200),
            card_queue("q1", f'{{"{H200}":4}}'),
            _pg_with_request("a", '{"NVIDIA-H200":3}', "2026-01-01T00:00:01Z"),
            _pg_with_request("b", '{"NVIDIA-H200":2}', "2026-01-01T00:00:02Z"),
        ]
    )
    ja, jb = ssn.jobs["ns/a"], ssn.jobs["ns/b"]
    assert plugin.job_enqueueable(ja) == PERMIT
    plugin.job_enqueued(ja)
    assert plugin.queues["q1"].inq_cards == {(H200,): 3000.0}
    assert plugin.job_enqueueable(jb) == REJECT


def _pg_with_request(
    name: str, request: str, created: str, min_resources: dict | None = None
) -> dict[str, Any]:
    pg = podgroup(
        name,
        queue="q1",
        phase="Pending",
        min_resources=min_resources if min_resources is not None else {"cpu": "1"},
    )
    pg["metadata"]["annotations"] = {"volcano.sh/card.request": request}
    pg["metadata"]["creationTimestamp"] = created
    return pg


def test_card_request_checked_even_without_min_resources_hook_level() -> None:
    # DEC-5 at the plugin: the hook refuses a job whose card.request exceeds quota although
    # the PodGroup has no minResources.
    ssn, plugin = session(
        [
            card_node("n1", H200),
            card_queue("q1", f'{{"{H200}":1}}'),
            _pg_with_request("big", '{"NVIDIA-H200":2}', "2026-01-01T00:00:01Z", min_resources={}),
        ]
    )
    job = ssn.jobs["ns/big"]
    job.min_resources = None
    assert plugin.job_enqueueable(job) == REJECT


def test_card_request_checked_even_without_min_resources_end_to_end() -> None:
    pg = podgroup("big", queue="q1", phase="Pending")
    pg["metadata"]["annotations"] = {"volcano.sh/card.request": '{"NVIDIA-H200":2}'}
    decisions = run_actions(session([card_node("n1", H200), card_queue("q1", f'{{"{H200}":1}}'), pg])[0])
    assert decisions.podgroups["ns/big"] == "Pending"


def test_card_unlimited_exempts_jobs_with_cards_from_cpu_quota() -> None:
    pg = _pg_with_request(
        "gpu-job", '{"NVIDIA-H200":1}', "2026-01-01T00:00:01Z", min_resources={"cpu": "100"}
    )
    cpu_pg = podgroup("cpu-job", queue="q1", phase="Pending", min_resources={"cpu": "100"})
    objs = [card_node("n1", H200), card_queue("q1", f'{{"{H200}":8}}', cpu="4"), pg, cpu_pg]
    decisions = run_actions(session(objs, config("cardUnlimitedCpuMemory: true, overCommitFactor: 10"))[0])
    assert decisions.podgroups["ns/gpu-job"] == "Inqueue"
    assert decisions.podgroups["ns/cpu-job"] == "Pending"
    decisions = run_actions(session(objs, config("cardUnlimitedCpuMemory: false, overCommitFactor: 10"))[0])
    assert decisions.podgroups["ns/gpu-job"] == "Pending"


# ------------------------------------------------------------------------------------------ node order (CARD-4)


def test_node_order_prefers_earlier_listed_models() -> None:
    objs = [
        card_node("a", G4090D),
        card_node("b", G4090),
        card_node("c", H200),
        card_queue("q1", None),
        podgroup("j", queue="q1"),
        card_pod("p", f"{G4090}|{G4090D}", 1, group="j"),
        card_pod("single", G4090, 1, group="j"),
    ]
    ssn, plugin = session(objs, config("nodeOrderWeight: 2"))
    p = next(t for t in ssn.tasks.values() if t.name == "p")
    assert list(plugin.node_order(p, np.array([0, 1, 2]))) == [100.0, 200.0, 0.0]
    single = next(t for t in ssn.tasks.values() if t.name == "single")
    assert list(plugin.node_order(single, np.array([0, 1, 2]))) == [0.0, 0.0, 0.0]


# ------------------------------------------------------------------------------------------ tidal policy


def _tidal_session() -> tuple[Any, CapacityCardPlugin]:
    objs = [
        card_node("n1", G4090),
        card_queue("online", f'{{"{G4090}":8}}', priority=80000, reclaimable=False),
        card_queue("offline", f'{{"{G4090}":8}}', priority=20000, reclaimable=True),
    ]
    for name, stype, owner, q in [
        ("inf-ann", "inference", None, "online"),
        ("inf-own", None, "Deployment", "online"),
        ("train-ann", "training", None, "offline"),
        ("train-own", None, "Job", "offline"),
        ("mystery", None, "StatefulSet", "offline"),
        ("bad", "batch", None, "offline"),
    ]:
        pg = podgroup(name, queue=q, phase="Running")
        if stype:
            pg["metadata"]["annotations"] = {"volcano.sh/service.type": stype}
        objs += [
            pg,
            card_pod(f"{name}-0", G4090, 1, group=name, node_name="n1", phase="Running", owner=owner),
        ]
    pending_pg = podgroup("inf-new", queue="online", phase="Inqueue")
    pending_pg["metadata"]["annotations"] = {"volcano.sh/service.type": "inference"}
    objs += [pending_pg, card_pod("inf-new-0", G4090, 1, group="inf-new")]
    return session(
        objs,
        config(
            "cardUnlimitedCpuMemory: true, podOwnerReferenceToServiceType: {ReplicaSet: inference, Deployment: inference, Job: training}",
            actions="enqueue, allocate, backfill, reclaim",
        ),
    )


def test_service_type_from_annotation_then_owner_mapping_then_unknown() -> None:
    ssn, plugin = _tidal_session()
    types = {t.name: plugin.task_service_type(t) for t in ssn.tasks.values()}
    assert types == {
        "inf-ann-0": INFERENCE,
        "inf-own-0": INFERENCE,
        "train-ann-0": TRAINING,
        "train-own-0": TRAINING,
        "mystery-0": UNKNOWN,
        "bad-0": UNKNOWN,
        "inf-new-0": INFERENCE,
    }
    assert plugin.job_service_type(ssn.jobs["ns/train-own"]) == TRAINING
    assert plugin.job_service_type(ssn.jobs["ns/bad"]) == UNKNOWN
    assert any(e.reason == "InvalidServiceType" and e.name == "bad" for e in ssn.events)


def test_reclaim_policy_matrix() -> None:
    ssn, plugin = _tidal_session()
    t = {task.name: task for task in ssn.tasks.values()}
    candidates = [
        t[n] for n in ("inf-ann-0", "inf-own-0", "train-ann-0", "train-own-0", "mystery-0", "bad-0")
    ]
    victims, vote = plugin.reclaimable(t["inf-new-0"], candidates)
    assert vote == PERMIT and [v.name for v in victims] == ["train-ann-0", "train-own-0"]
    for reclaimer in ("train-ann-0", "train-own-0", "mystery-0", "bad-0"):
        assert plugin.reclaimable(t[reclaimer], candidates) == ([], PERMIT)
    assert plugin.may_reclaim(t["inf-ann-0"], t["train-own-0"])
    assert not plugin.may_reclaim(t["inf-ann-0"], t["inf-own-0"])


def test_victim_must_hold_a_model_the_reclaimer_accepts() -> None:
    objs = [
        card_node("n1", G4090),
        card_node("n2", H200),
        card_queue("online", f'{{"{H200}":8}}', priority=80000),
        card_queue("offline", f'{{"{G4090}":8,"{H200}":8}}'),
    ]
    tr = podgroup("tr", queue="offline", phase="Running")
    tr["metadata"]["annotations"] = {"volcano.sh/service.type": "training"}
    inf = podgroup("inf", queue="online", phase="Inqueue")
    inf["metadata"]["annotations"] = {"volcano.sh/service.type": "inference"}
    objs += [
        tr,
        card_pod("tr-4090", G4090, 8, group="tr", node_name="n1", phase="Running"),
        card_pod("tr-h200", H200, 8, group="tr", node_name="n2", phase="Running"),
        inf,
        card_pod("inf-0", H200, 1, group="inf"),
    ]
    ssn, plugin = session(objs)
    t = {task.name: task for task in ssn.tasks.values()}
    assert plugin.may_reclaim(t["inf-0"], t["tr-h200"])
    assert not plugin.may_reclaim(t["inf-0"], t["tr-4090"])
    assert plugin.task_card_usage(t["tr-h200"]).model == H200
    assert plugin.task_card_usage(t["tr-h200"]).cards == 8000.0


def test_podgroup_preemptable_false_protects_and_whole_job_helpers() -> None:
    objs = [
        card_node("n1", G4090),
        card_node("n2", H200),
        card_queue("online", f'{{"{G4090}":8}}', priority=80000),
        card_queue("offline", None),
    ]
    for name, protected in (("tr", False), ("tr-keep", True)):
        pg = podgroup(name, queue="offline", phase="Running", min_member=2)
        pg["metadata"]["annotations"] = {"volcano.sh/service.type": "training"}
        if protected:
            pg["metadata"]["annotations"]["volcano.sh/preemptable"] = "false"
        objs += [
            pg,
            card_pod(f"{name}-0", G4090, 2, group=name, node_name="n1", phase="Running"),
            card_pod(f"{name}-1", H200, 3, group=name, node_name="n2", phase="Running"),
        ]
    inf = podgroup("inf", queue="online", phase="Inqueue")
    inf["metadata"]["annotations"] = {"volcano.sh/service.type": "inference"}
    objs += [inf, card_pod("inf-0", G4090, 1, group="inf")]
    ssn, plugin = session(objs)
    t = {task.name: task for task in ssn.tasks.values()}
    assert plugin.may_reclaim(t["inf-0"], t["tr-0"])
    assert not plugin.may_reclaim(t["inf-0"], t["tr-keep-0"])  # TIDE-3 on the PodGroup
    assert plugin.job_card_usage(ssn.jobs["ns/tr"]) == {G4090: 2000.0, H200: 3000.0}


def test_preemptive_checks_state_and_quota_and_says_why() -> None:
    objs = [
        card_node("n1", H200),
        card_queue("q1", f'{{"{H200}":1}}'),
        podgroup("j", queue="q1"),
        card_pod("p", H200, 2, group="j"),
    ]
    ssn, plugin = session(objs)
    task = next(iter(ssn.tasks.values()))
    qi = ssn.queues["q1"]
    assert plugin.preemptive(qi, task) is False
    plugin.on_session_close(ssn)
    (ev,) = [e for e in ssn.events if e.reason == "NotPreemptive"]
    assert (
        ev.message
        == "Queue <q1> has insufficient <NVIDIA-H200> quota: requested 2, total would be 2, but capability is 1"
    )


# ------------------------------------------------------------------------------------------ queue order and status


def test_queue_order_priority_then_share() -> None:
    objs = [
        card_node("n1", H200),
        card_queue("hi", f'{{"{H200}":8}}', priority=80000),
        card_queue("busy", f'{{"{H200}":4}}'),
        card_queue("idle", f'{{"{H200}":4}}'),
        podgroup("r", queue="busy", phase="Running"),
        card_pod("r0", H200, 2, group="r", node_name="n1", phase="Running"),
    ]
    ssn, plugin = session(objs)
    qs = ssn.queues
    assert plugin._queue_order(qs["hi"], qs["idle"]) == -1
    assert plugin._queue_order(qs["idle"], qs["busy"]) == -1
    assert plugin._queue_order(qs["busy"], qs["idle"]) == 1


def test_queue_usage_reports_natural_units() -> None:
    objs = [
        card_node("n1", H200, **{"nvidia.com/mig-1g.18gb": "3"}),
        card_queue("q1", f'{{"{H200}":3,"{H200}/mig-1g.18gb-mixed":2}}', cpu="4"),
        podgroup("r", queue="q1", phase="Running"),
        card_pod(
            "r0",
            f"{H200}/mig-1g.18gb-mixed",
            1,
            group="r",
            node_name="n1",
            phase="Running",
            resource="nvidia.com/mig-1g.18gb",
        ),
        podgroup("cpu", queue="q1", phase="Running"),
        pod("cpu0", group="cpu", cpu="2", memory="1Gi", node="n1", phase="Running"),
    ]
    ssn, plugin = session(objs)
    usage = plugin.queue_usage()["q1"]
    assert usage["cpu"] == {"quota": 4.0, "allocated": 2.0, "inqueue": 0.0, "pending": 0.0}
    assert usage["memory"]["allocated"] == float(1024**3)
    assert usage[f"{H200}/mig-1g.18gb-mixed"]["allocated"] == 1.0
    assert usage[H200] == {"quota": 3.0, "allocated": 0.0, "inqueue": 0.0, "pending": 0.0}
    run_actions(ssn)
    assert plugin.queue_usage()["q1"][f"{H200}/mig-1g.18gb-mixed"]["allocated"] == 1.0


def test_same_input_same_output() -> None:
    objs = [
        card_node("a", G4090),
        card_node("b", G4090D),
        card_queue("q1", f'{{"{G4090}":3,"{G4090D}":3}}'),
        *[
            card_pod(f"p{i}", f"{G4090}|{G4090D}" if i % 2 else None, 1 + i % 3, queue_name="q1")
            for i in range(8)
        ],
    ]
    a = run_actions(session(objs)[0]).to_json()
    b = run_actions(session(objs)[0]).to_json()
    assert a == b


# ------------------------------------------------------------------------------------------ invariant (REL-2, CARD-6)

MODELS = {"A": "Model-A", "B": "Model-B"}


@st.composite
def worlds(
    draw: st.DrawFn,
) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, dict[str, int]], dict[str, str]]:
    nodes: dict[str, str] = {}
    objs: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 3))):
        model = MODELS[draw(st.sampled_from("AB"))]
        name = f"n{i}"
        nodes[name] = model
        objs.append(card_node(name, model, draw(st.sampled_from([2, 4, 8]))))
    quotas: dict[str, dict[str, int]] = {}
    for qn in ("q0", "q1")[: draw(st.integers(1, 2))]:
        quotas[qn] = {m: draw(st.integers(0, 6)) for m in MODELS.values()}
        objs.append(card_queue(qn, "{" + ",".join(f'"{m}":{c}' for m, c in quotas[qn].items()) + "}"))
    pod_queue: dict[str, str] = {}
    for i in range(draw(st.integers(0, 8))):
        qn = draw(st.sampled_from(sorted(quotas)))
        name_choice = draw(st.sampled_from(["A", "B", "A|B", "B|A", None]))
        model = None if name_choice is None else "|".join(MODELS[c] for c in name_choice.split("|"))
        gpus = draw(st.integers(1, 3))
        placed = draw(st.booleans()) and model is not None and "|" not in model
        pname = f"p{i}"
        pod_queue[pname] = qn
        if placed:
            target = [n for n, m in nodes.items() if m == model]
            if not target:
                continue
            objs.append(podgroup(f"g{i}", queue=qn, phase="Running"))
            objs.append(card_pod(pname, model, gpus, group=f"g{i}", node_name=target[0], phase="Running"))
        elif draw(st.booleans()):
            objs.append(card_pod(pname, model, gpus, queue_name=qn))
        else:
            objs.append(podgroup(f"g{i}", queue=qn, phase="Inqueue"))
            objs.append(card_pod(pname, model, gpus, group=f"g{i}"))
    return objs, nodes, quotas, pod_queue


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_no_queue_exceeds_a_card_quota_through_the_sessions_own_decisions(world) -> None:
    objs, nodes, quotas, pod_queue = world
    ssn, _plugin = session(objs)
    decisions = run_actions(ssn)
    initial: dict[tuple[str, str], float] = {}
    final: dict[tuple[str, str], float] = {}
    used_on_node: dict[str, float] = {}
    for o in objs:
        if o["kind"] != "Pod":
            continue
        name = o["metadata"]["name"]
        key = f"ns/{name}"
        gpus = float(o["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
        q = pod_queue[name]
        node_name = o["spec"].get("nodeName")
        if node_name:
            initial[(q, nodes[node_name])] = initial.get((q, nodes[node_name]), 0) + gpus
        where = node_name or decisions.bound.get(key) or decisions.pipelined.get(key)
        if where and key not in decisions.evicted:
            final[(q, nodes[where])] = final.get((q, nodes[where]), 0) + gpus
            used_on_node[where] = used_on_node.get(where, 0) + gpus
            # DEC-2: a named pod only ever lands on one of its models.
            names = o["metadata"]["annotations"].get("volcano.sh/card.name")
            if names and not node_name:
                assert nodes[where] in names.split("|")
    for (q, model), amount in final.items():
        assert amount <= max(quotas[q][model], initial.get((q, model), 0)), (q, model, amount)
    for n, amount in used_on_node.items():
        cards = float(
            next(o for o in objs if o["kind"] == "Node" and o["metadata"]["name"] == n)["status"][
                "allocatable"
            ]["nvidia.com/gpu"]
        )
        initial_on_node = sum(
            float(o["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
            for o in objs
            if o["kind"] == "Pod" and o["spec"].get("nodeName") == n
        )
        assert amount <= max(cards, initial_on_node)


# ------------------------------------------------------------------------------------------ scale


def test_a_large_card_cluster_places_every_pod() -> None:
    objs: list[dict[str, Any]] = [card_node(f"n{i:04d}", H200 if i % 2 else G4090) for i in range(1000)]
    objs.append(card_queue("q1", f'{{"{H200}":2000,"{G4090}":2000}}'))
    objs += [
        card_pod(f"p{i:03d}", f"{H200}|{G4090}" if i % 3 else H200, 1 + i % 4, queue_name="q1")
        for i in range(500)
    ]
    snapshot = build_snapshot(objs)
    cfg = config_from_text(config())
    decisions = run_actions(open_session(snapshot, cfg))
    assert len(decisions.bound) == 500


weird = st.one_of(
    st.sampled_from(
        [
            "",
            "{",
            "[]",
            "null",
            '{"NVIDIA-H200":-1}',
            '{"NVIDIA-H200":2}',
            '{"A|B":1}',
            "NVIDIA-H200",
            "NVIDIA-H200|Model-X",
            "||",
            "Model-X",
            '{"NVIDIA-H200|NVIDIA-GeForce-RTX-4090":1}',
            "0",
            "abc",
            "inference",
            "training",
        ]
    ),
    st.text(max_size=12),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(quota=weird, name=weird, request=weird, stype=weird, count=weird, replicas=weird, memory=weird)
def test_malformed_input_never_crashes_a_session(
    quota, name, request, stype, count, replicas, memory
) -> None:
    """CARD-9, REL-1: whatever the labels and annotations say, the session completes."""
    n = card_node("n1", H200, **{"nvidia.com/gpu.shared": "4", "nvidia.com/mig-1g.18gb": "2"})
    n["metadata"]["labels"].update(
        {"nvidia.com/gpu.count": count, "nvidia.com/gpu.replicas": replicas, "nvidia.com/gpu.memory": memory}
    )
    q = card_queue("q1", quota)
    pg = podgroup("j", queue="q1", phase="Pending", min_resources={"cpu": "1"})
    pg["metadata"]["annotations"] = {"volcano.sh/card.request": request, "volcano.sh/service.type": stype}
    objs = [
        n,
        card_node("n2", G4090),
        q,
        pg,
        card_pod("p", name, 1, queue_name="q1"),
        card_pod("r", name, 1, group="j", node_name="n1", phase="Running"),
    ]
    cfg = config(
        "cardUnlimitedCpuMemory: true, podOwnerReferenceToServiceType: {ReplicaSet: inference}",
        actions="enqueue, allocate, backfill, reclaim",
    )
    ssn, plugin = session(objs, cfg)
    run_actions(ssn)
    assert set(plugin.queue_usage()) == {"default", "q1"}


def test_memory_reason_in_natural_units() -> None:
    objs = [
        card_node("n1", H200),
        card_queue("q1", None, cpu="8"),
        podgroup("j", queue="q1"),
        pod("big", group="j", cpu="1", memory="20Gi"),
    ]
    decisions = run_actions(session(objs)[0])
    (ev,) = events(decisions, "Pod", "big", "InsufficientQuota")
    assert (
        ev.message
        == "Queue <q1> has insufficient <memory> quota: requested 20Gi, total would be 20Gi, but capability is 16Gi"
    )
