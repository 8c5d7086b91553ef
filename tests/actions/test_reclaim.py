"""reclaim action: unit tests on small sessions.

Scenario-level cases ported from Volcano live in tests/scenarios/reclaim.yaml.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from builders import node, pod, podgroup, queue
from tidesched.actions.reclaim import action as reclaim_mod
from tidesched.actions.reclaim.action import _reclaimees
from tidesched.scheduler import PLUGINS, config_from_text, open_session, schedule_manifests
from tidesched.framework.plugin import Plugin
from tidesched.model.loader import Manifest
from tidesched.model.snapshot import build_snapshot
from tidesched.model.status import TaskStatus

OFF = ("enableJobReady: false, enableTaskOrder: false, enablePreemptable: false, enabledOverused: false, "
       "enabledAllocatable: false, enablePredicate: false, enableNodeOrder: false, enableBestNode: false, "
       "enableJobEnqueued: false")

# Reclaimable from conformance and gang only: the tests choose victims through the
# preemptable flag, queue reclaimability and gang minimums.
RECLAIM_CONFIG = f"""
actions: "reclaim"
tiers:
- plugins:
  - {{name: conformance, enableReclaimable: true, enableJobOrder: false, enableJobPipelined: false, enableJobStarving: false, enableQueueOrder: false, enablePreemptive: false, {OFF}}}
  - {{name: gang, enableReclaimable: true, enableJobStarving: true, enableJobPipelined: true, enableJobOrder: false, enableQueueOrder: false, enablePreemptive: false, {OFF}}}
"""


def _session(objs: list[dict[str, Any]], config: str = RECLAIM_CONFIG):
    return open_session(build_snapshot(objs), config_from_text(config))


def _task(ssn, name: str):
    return next(t for t in ssn.tasks.values() if t.name == name)


def _run(objs: list[dict[str, Any]], config: str = RECLAIM_CONFIG) -> dict[str, Any]:
    manifests = [Manifest(f"objects[{i}]", o) for i, o in enumerate(objs)]
    _ssn, decisions = schedule_manifests(manifests, config_from_text(config))
    return decisions.to_json()


def _full_node_cluster(**q1: Any) -> list[dict[str, Any]]:
    return [queue("q1", **q1), queue("q2"), node("n1", cpu="2"),
            podgroup("victims", 0, queue="q1"), podgroup("reclaimer", 1, queue="q2"),
            pod("v-0", "victims", cpu="1", node="n1", phase="Running"),
            pod("v-1", "victims", cpu="1", node="n1", phase="Running"),
            pod("r-0", "reclaimer", cpu="1")]


def test_reclaims_from_another_queue() -> None:
    out = _run(_full_node_cluster())
    assert out["evicted"] == ["ns/v-1"]  # reverse task order within the victim job
    assert out["pipelined"] == {"ns/r-0": "n1"}


def test_reclaimees_are_running_preemptable_tasks_of_other_reclaimable_queues() -> None:
    objs = [queue("q1"), queue("q2"), queue("locked", reclaimable=False), node("n1", cpu="16"),
            podgroup("mine", 1, queue="q2"), podgroup("theirs", 0, queue="q1"), podgroup("locked", 0, queue="locked"),
            pod("mine-run", "mine", node="n1", phase="Running"),
            pod("mine-pending", "mine"),
            pod("theirs-run", "theirs", node="n1", phase="Running"),
            pod("theirs-bound", "theirs", node="n1", phase="Pending"),
            pod("theirs-pinned", "theirs", node="n1", phase="Running", annotations={"volcano.sh/preemptable": "false"}),
            pod("theirs-deleting", "theirs", node="n1", phase="Running", deleting=True),
            pod("locked-run", "locked", node="n1", phase="Running")]
    ssn = _session(objs)
    assert [t.name for t in _reclaimees(ssn, ssn.jobs["ns/mine"], 0)] == ["theirs-run"]


def test_non_reclaimable_queue_keeps_its_tasks() -> None:
    out = _run(_full_node_cluster(reclaimable=False))
    assert out["evicted"] == [] and out["pipelined"] == {}


def test_never_policy_skips_the_task_but_not_the_job() -> None:
    objs = _full_node_cluster()
    objs[-1]["spec"]["preemptionPolicy"] = "Never"
    out = _run(objs)
    assert out["evicted"] == []
    objs.append(pod("r-1", "reclaimer", cpu="1"))
    out = _run(objs)
    assert out["evicted"] == ["ns/v-1"] and out["pipelined"] == {"ns/r-1": "n1"}


class _Gate(Plugin):
    """Overused / Preemptive / PrePredicate answers driven by the plugin arguments."""

    name = "t-reclaim-gate"

    def on_session_open(self, ssn) -> None:
        args = self.arguments
        overused = set(args.get("overused") or [])
        closed = set(args.get("notPreemptive") or [])
        blocked = set(args.get("prePredicateFails") or [])
        ssn.add_fn("overused", self.name, lambda q: q.name in overused)
        ssn.add_fn("preemptive", self.name, lambda q, t: q.name not in closed)
        ssn.add_fn("pre_predicate", self.name, lambda t: "blocked" if t.name in blocked else None)


PLUGINS.setdefault(_Gate.name, _Gate)


@pytest.mark.parametrize("args", ["{overused: [q2]}", "{notPreemptive: [q2]}", "{prePredicateFails: [r-0]}"])
def test_reclaim_is_gated_per_queue_and_task(args: str) -> None:
    config = RECLAIM_CONFIG + "  - {name: t-reclaim-gate, arguments: " + args + "}\n"
    out = _run(_full_node_cluster(), config)
    assert out["evicted"] == [] and out["pipelined"] == {}
    # The gate plugin with nothing to block lets the reclaim through.
    out = _run(_full_node_cluster(), RECLAIM_CONFIG + "  - {name: t-reclaim-gate}\n")
    assert out["evicted"] == ["ns/v-1"]


def test_first_node_that_works_in_name_order() -> None:
    objs = [queue("q1"), queue("q2"), node("a", cpu="1"), node("b", cpu="2"), node("c", cpu="2"),
            podgroup("victims", 0, queue="q1"), podgroup("reclaimer", 1, queue="q2"),
            pod("on-a", "victims", cpu="1", node="a", phase="Running"),
            pod("on-b", "victims", cpu="2", node="b", phase="Running"),
            pod("on-c", "victims", cpu="2", node="c", phase="Running"),
            pod("r-0", "reclaimer", cpu="2")]
    out = _run(objs)
    # Node a cannot hold 2 cpu even when empty (ValidateVictims), so b is the first to work.
    assert out["evicted"] == ["ns/on-b"] and out["pipelined"] == {"ns/r-0": "b"}


def test_gang_job_that_cannot_be_pipelined_keeps_nothing() -> None:
    objs = [queue("q1"), queue("q2"), node("n1", cpu="2"),
            podgroup("victims", 1, queue="q1"), podgroup("gang", 2, queue="q2"),
            pod("v-0", "victims", cpu="1", node="n1", phase="Running"),
            pod("v-1", "victims", cpu="1", node="n1", phase="Running"),
            pod("g-0", "gang", cpu="1"), pod("g-1", "gang", cpu="1")]
    ssn = _session(objs)
    before = (ssn.table.used.copy(), ssn.table.releasing.copy(), ssn.table.pipelined.copy())
    reclaim_mod.execute(ssn)
    assert ssn.evicted == {}
    assert all(np.array_equal(a, b) for a, b in zip(before, (ssn.table.used, ssn.table.releasing, ssn.table.pipelined)))
    assert {t.status for t in ssn.tasks.values() if t.job == "ns/gang"} == {TaskStatus.PENDING}


def _busy_cluster() -> list[dict[str, Any]]:
    objs = [queue("q1"), queue("q2"), queue("q3")]
    for i in range(3):
        objs.append(node(f"n{i}", cpu="4"))
    objs += [podgroup("a", 0, queue="q1"), podgroup("b", 0, queue="q2"), podgroup("c", 2, queue="q3")]
    for i in range(3):
        objs.append(pod(f"a-{i}", "a", cpu="2", node=f"n{i}", phase="Running"))
        objs.append(pod(f"b-{i}", "b", cpu="2", node=f"n{i}", phase="Running"))
    objs += [pod(f"c-{i}", "c", cpu="3") for i in range(2)]
    return objs


def test_same_input_same_decisions() -> None:
    first = _run(_busy_cluster())
    assert len(first["evicted"]) == 4 and len(first["pipelined"]) == 2
    assert _run(_busy_cluster()) == first
    shuffled = _busy_cluster()
    random.Random(3).shuffle(shuffled)
    assert _run(shuffled) == first
