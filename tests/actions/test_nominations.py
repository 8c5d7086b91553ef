"""A pod pipelined where preempt or reclaim evicted for it gets that node as its
``status.nominatedNodeName`` (Volcano v1.15.1 Statement.Pipeline's evictionOccurred, written by
RecordJobStatusEvent at session close), and the next session's allocate tries it first."""

from __future__ import annotations

from typing import Any

from builders import node, pod, podgroup, queue
from tidesched.model.loader import Manifest
from tidesched.scheduler import config_from_text, schedule_manifests

PRIO = [
    {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
    {"kind": "PriorityClass", "metadata": {"name": "low"}, "value": 10},
]

CONFIG = """
actions: "enqueue, allocate, preempt, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def _run(objs: list[dict[str, Any]], config: str = CONFIG):
    manifests = [Manifest(f"objects[{i}]", o) for i, o in enumerate(objs)]
    _ssn, decisions = schedule_manifests(manifests, config_from_text(config))
    return decisions


def _preempting(nominated: str = "") -> list[dict[str, Any]]:
    high = pod("high-0", "high", cpu="2")
    if nominated:
        high["status"]["nominatedNodeName"] = nominated
    return PRIO + [queue("q1"), node("n1", cpu="2"),
                   podgroup("low", 0, queue="q1", priorityClassName="low", phase="Running"),
                   podgroup("high", 1, queue="q1", priorityClassName="high", phase="Inqueue"),
                   pod("low-0", "low", cpu="2", node="n1", phase="Running"), high]


def test_preemptor_pipelined_after_evictions_is_nominated() -> None:
    d = _run(_preempting())
    assert d.evicted == ["ns/low-0"]
    assert d.pipelined == {"ns/high-0": "n1"}
    assert d.nominated == {"ns/high-0": "n1"}
    assert d.to_json()["nominated"] == {"ns/high-0": "n1"}


def test_a_discarded_gang_still_nominates_the_pods_it_pipelined_after_evictions() -> None:
    # high needs both its pods: high-0 evicts low-0 on n1, high-1 finds no victim on n2 (its
    # pod is as important), so the job's statement is discarded and low-0 stays. Volcano keeps
    # the discarded pipeline as the task's LastTransaction, and RecordJobStatusEvent still
    # writes high-0's nominatedNodeName (seen in vc-scheduler v1.15.1's log, differential
    # seed 3270).
    objs = PRIO + [queue("q1"), node("n1", cpu="2"), node("n2", cpu="2"),
                   podgroup("low", 0, queue="q1", priorityClassName="low", phase="Running"),
                   podgroup("peer", 0, queue="q1", priorityClassName="high", phase="Running"),
                   podgroup("high", 2, queue="q1", priorityClassName="high", phase="Inqueue"),
                   pod("low-0", "low", cpu="2", node="n1", phase="Running"),
                   pod("peer-0", "peer", cpu="2", node="n2", phase="Running", priority=1000),
                   pod("high-0", "high", cpu="2", priority=1000), pod("high-1", "high", cpu="2", priority=1000)]
    d = _run(objs)
    assert d.evicted == [] and d.pipelined == {}
    assert d.nominated == {"ns/high-0": "n1"}


def _reclaiming(nominated: str = "") -> list[dict[str, Any]]:
    r = pod("r-0", "reclaimer", cpu="1")
    if nominated:
        r["status"]["nominatedNodeName"] = nominated
    return [queue("q1"), queue("q2"), node("n1", cpu="2"),
            podgroup("victims", 0, queue="q1", phase="Running"),
            podgroup("reclaimer", 1, queue="q2", phase="Inqueue"),
            pod("v-0", "victims", cpu="1", node="n1", phase="Running"),
            pod("v-1", "victims", cpu="1", node="n1", phase="Running"), r]


def test_reclaimer_pipelined_after_evictions_is_nominated() -> None:
    d = _run(_reclaiming())
    assert d.evicted and d.pipelined == {"ns/r-0": "n1"}
    assert d.nominated == {"ns/r-0": "n1"}


def test_a_pod_already_nominated_there_is_not_written_again() -> None:
    d = _run(_reclaiming(nominated="n1"))
    assert d.evicted and d.pipelined == {"ns/r-0": "n1"} and d.nominated == {}


def test_pipelined_on_room_already_being_released_is_not_nominated() -> None:
    # allocate pipelines onto a deleting pod's resources: no eviction this session, so no
    # nomination (Volcano's allocate pipelines with evictionOccurred false).
    objs = [queue("q1"), node("n1", cpu="2"),
            podgroup("old", 0, queue="q1", phase="Running"),
            podgroup("new", 1, queue="q1", phase="Inqueue"),
            pod("old-0", "old", cpu="2", node="n1", phase="Running", deleting=True),
            pod("new-0", "new", cpu="2")]
    d = _run(objs)
    assert d.evicted == [] and d.pipelined == {"ns/new-0": "n1"}
    assert d.nominated == {}


def test_next_session_allocates_on_the_nominated_node_first() -> None:
    # n1 and n2 both fit; nodeorder prefers the emptier n2 (leastrequested), but the pod's
    # nomination to n1 is tried first and taken.
    objs = [queue("q1"), node("n1", cpu="4"), node("n2", cpu="8"),
            podgroup("busy", 0, queue="q1", phase="Running"),
            podgroup("p", 1, queue="q1", phase="Inqueue"),
            pod("busy-0", "busy", cpu="2", node="n1", phase="Running"),
            pod("p-0", "p", cpu="1")]
    assert _run(objs).bound == {"ns/p-0": "n2"}
    objs[-1]["status"]["nominatedNodeName"] = "n1"
    assert _run(objs).bound == {"ns/p-0": "n1"}


# -- preempt: a nominated pod preempts again only as Volcano's taskEligibleToPreempt allows ----


def _preempting_after_allocate(nominated: str = "") -> list[dict[str, Any]]:
    # A tainted empty n2 grows the queue's share so that allocate tries high-0 (and runs its
    # PrePredicate) before preempt; n2 itself stays closed to it.
    taint = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    return _preempting(nominated) + [node("n2", cpu="2", taints=taint)]


def test_a_pod_whose_nominated_node_passes_the_predicates_does_not_preempt() -> None:
    # Its room there is coming (or allocate could have placed it): no new victims.
    assert _run(_preempting_after_allocate()).evicted == ["ns/low-0"]
    d = _run(_preempting_after_allocate(nominated="n1"))
    assert d.evicted == [] and d.nominated == {}


def test_a_nominated_pod_allocate_did_not_try_preempts_again() -> None:
    # Its queue is full, so allocate never ran its PrePredicate: Volcano's predicates fail
    # there for want of PreFilter state (NodePorts' Filter), the nominated node counts as
    # failing, and with nothing terminating on it the pod preempts again (differential 3174).
    d = _run(_preempting(nominated="n1"))
    assert d.evicted == ["ns/low-0"] and d.pipelined == {"ns/high-0": "n1"}


def test_a_pod_nominated_to_a_node_not_in_the_session_does_not_preempt() -> None:
    d = _run(_preempting(nominated="gone"))
    assert d.evicted == [] and d.pipelined == {}


ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}}


def _anti_affinity(*, preempted: bool) -> list[dict[str, Any]]:
    # n1: a terminating low-priority pod, and a running db pod that anti-affinity keeps high-0
    # away from (a resolvable failure: evicting it resolves it); high-0 is nominated to n1.
    leaving = pod("leaving", "low", cpu="1", node="n1", phase="Running", deleting=True, priority=10)
    if preempted:
        leaving["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                            "reason": "PreemptionByScheduler"}]
    high = pod("high-0", "high", cpu="1", labels={"app": "db"}, spec={"affinity": ANTI}, priority=1000)
    high["status"]["nominatedNodeName"] = "n1"
    return PRIO + [queue("q1"), node("n1", cpu="2", labels={"kubernetes.io/hostname": "n1"}),
                   podgroup("low", 0, queue="q1", priorityClassName="low", phase="Running"),
                   podgroup("high", 1, queue="q1", priorityClassName="high", phase="Inqueue"),
                   leaving, pod("db-0", "low", cpu="1", node="n1", phase="Running", labels={"app": "db"}), high]


def test_a_lower_priority_pod_terminating_by_preemption_on_the_nominated_node_stops_preemption() -> None:
    assert _run(_anti_affinity(preempted=False)).evicted == ["ns/db-0"]
    assert _run(_anti_affinity(preempted=True)).evicted == []


def test_a_nominated_node_failing_for_good_leaves_the_pod_free_to_preempt() -> None:
    # high-0 must run in zone a, which n1 (its nominated node, with a pod terminating by
    # preemption) is not: unresolvable there, so it may preempt again, on n2.
    leaving = pod("leaving", "low", cpu="1", node="n1", phase="Running", deleting=True, priority=10)
    leaving["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    high = pod("high-0", "high", cpu="2", spec={"nodeSelector": {"zone": "a"}}, priority=1000)
    high["status"]["nominatedNodeName"] = "n1"
    objs = PRIO + [queue("q1"), node("n1", cpu="2"), node("n2", cpu="2", labels={"zone": "a"}),
                   podgroup("low", 0, queue="q1", priorityClassName="low", phase="Running"),
                   podgroup("high", 1, queue="q1", priorityClassName="high", phase="Inqueue"),
                   leaving, pod("low-0", "low", cpu="2", node="n2", phase="Running"), high]
    d = _run(objs)
    assert d.evicted == ["ns/low-0"] and d.pipelined == {"ns/high-0": "n2"}
