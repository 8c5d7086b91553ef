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


def test_a_pod_already_nominated_there_is_not_written_again() -> None:
    d = _run(_preempting(nominated="n1"))
    assert d.pipelined == {"ns/high-0": "n1"} and d.nominated == {}


def test_reclaimer_pipelined_after_evictions_is_nominated() -> None:
    objs = [queue("q1"), queue("q2"), node("n1", cpu="2"),
            podgroup("victims", 0, queue="q1", phase="Running"),
            podgroup("reclaimer", 1, queue="q2", phase="Inqueue"),
            pod("v-0", "victims", cpu="1", node="n1", phase="Running"),
            pod("v-1", "victims", cpu="1", node="n1", phase="Running"),
            pod("r-0", "reclaimer", cpu="1")]
    d = _run(objs)
    assert d.evicted and d.pipelined == {"ns/r-0": "n1"}
    assert d.nominated == {"ns/r-0": "n1"}


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
