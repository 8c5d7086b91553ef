"""preempt action and the shared victim helpers: unit tests on small sessions.

Scenario-level cases ported from Volcano live in tests/scenarios/preempt.yaml.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from builders import node, pod, podgroup, queue
from tidesched.actions import pdb as pdb_mod, preempt as preempt_mod
from tidesched.actions.preempt import PreemptOptions, _between_jobs_filter, _within_job_filter, plan_key, select_victims_on_node
from tidesched.actions.victims import TentativeEvictions, candidate_nodes, validate_victims
from tidesched.framework.victim_order import order_victims
from tidesched.framework.arguments import ConfigError
from tidesched.scheduler import PLUGINS, config_from_text, open_session, schedule_manifests
from tidesched.framework.plugin import NodeFailure, Plugin, PredicateResult
from tidesched.framework.decisions import FitErrors
from tidesched.model.loader import Manifest
from tidesched.model.snapshot import build_snapshot
from tidesched.model.status import TaskStatus

OFF = ("enableJobReady: false, enableQueueOrder: false, enableReclaimable: false, enablePreemptive: false, "
       "enabledOverused: false, enabledAllocatable: false, enablePredicate: false, enableNodeOrder: false, "
       "enableBestNode: false, enableJobEnqueued: false")

PREEMPT_CONFIG = f"""
actions: "preempt"
tiers:
- plugins:
  - {{name: conformance, enablePreemptable: true, enableJobOrder: false, enableTaskOrder: false, enableJobPipelined: false, enableJobStarving: false, {OFF}}}
  - {{name: gang, enablePreemptable: true, enableJobPipelined: true, enableJobStarving: true, enableJobOrder: false, enableTaskOrder: false, {OFF}}}
  - {{name: priority, enablePreemptable: true, enableJobStarving: true, enableJobOrder: true, enableTaskOrder: true, enableJobPipelined: false, {OFF}}}
"""

PRIO = [
    {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
    {"kind": "PriorityClass", "metadata": {"name": "low"}, "value": 10},
]


def _session(objs: list[dict[str, Any]], config: str = PREEMPT_CONFIG):
    return open_session(build_snapshot(objs), config_from_text(config))


def _task(ssn, name: str):
    return next(t for t in ssn.tasks.values() if t.name == name)


def _run(objs: list[dict[str, Any]], config: str = PREEMPT_CONFIG) -> dict[str, Any]:
    manifests = [Manifest(f"objects[{i}]", o) for i, o in enumerate(objs)]
    _ssn, decisions = schedule_manifests(manifests, config_from_text(config))
    return decisions.to_json()


def _state(ssn) -> tuple:
    """Everything a dry run must leave untouched."""
    t = ssn.table
    return (t.used.copy(), t.releasing.copy(), t.pipelined.copy(), t.pod_count.copy(),
            sorted((x.uid, x.status, x.node_name) for x in ssn.tasks.values()),
            {k: j.ready_task_num() for k, j in ssn.jobs.items()})


def _same_state(a: tuple, b: tuple) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a[:4], b[:4])) and a[4:] == b[4:]


# -- victim order ----------------------------------------------------------------------------


def _ordering_cluster():
    return PRIO + [
        queue("q1"), queue("q2"), node("n1", cpu="16"),
        podgroup("a", 0, queue="q1", priorityClassName="low"),
        podgroup("b", 0, queue="q1", priorityClassName="high"),
        podgroup("c", 0, queue="q2", priorityClassName="low"),
        podgroup("p", 1, queue="q1", priorityClassName="high"),
        pod("a-hi", "a", node="n1", phase="Running", priority=50),
        pod("a-lo", "a", node="n1", phase="Running", priority=5),
        pod("b-0", "b", node="n1", phase="Running", priority=1),
        pod("c-0", "c", node="n1", phase="Running", priority=1),
        pod("p-0", "p", priority=100),
    ]


def test_victims_of_one_job_go_lowest_task_priority_first() -> None:
    ssn = _session(_ordering_cluster())
    vs = [_task(ssn, n) for n in ("a-hi", "a-lo")]
    assert [t.name for t in order_victims(ssn, vs, _task(ssn, "p-0"))] == ["a-lo", "a-hi"]


def test_victims_of_one_queue_go_in_reverse_job_order() -> None:
    ssn = _session(_ordering_cluster())
    vs = [_task(ssn, n) for n in ("b-0", "a-hi", "a-lo")]
    # JobOrder puts the high-priority job b first, so its tasks are evicted last.
    assert [t.name for t in order_victims(ssn, vs, _task(ssn, "p-0"))] == ["a-lo", "a-hi", "b-0"]


def test_victims_of_other_queues_go_in_reverse_queue_order() -> None:
    ssn = _session(_ordering_cluster())
    vs = [_task(ssn, n) for n in ("a-lo", "c-0")]
    # No queue order plugin: q1 before q2 by name, so q2's task is evicted first.
    assert [t.name for t in order_victims(ssn, vs, _task(ssn, "p-0"))] == ["c-0", "a-lo"]


def test_victim_queue_order_plugin_decides_between_queues() -> None:
    class PreferQ1Victims(Plugin):
        name = "t-victim-queue-order"

        def on_session_open(self, ssn) -> None:
            ssn.add_fn("victim_queue_order", self.name,
                       lambda l, r, _p: 0 if l.name == r.name else (-1 if l.name == "q1" else 1))

    PLUGINS.setdefault(PreferQ1Victims.name, PreferQ1Victims)
    config = PREEMPT_CONFIG + "  - {name: t-victim-queue-order}\n"
    ssn = _session(_ordering_cluster(), config)
    vs = [_task(ssn, n) for n in ("c-0", "a-lo")]
    assert [t.name for t in order_victims(ssn, vs, _task(ssn, "p-0"))] == ["a-lo", "c-0"]


@settings(max_examples=25, deadline=None)
@given(st.randoms(use_true_random=False))
def test_victim_order_does_not_depend_on_input_order(rnd: random.Random) -> None:
    ssn = _session(_ordering_cluster())
    vs = [t for t in ssn.tasks.values() if t.node_name]
    expected = [t.name for t in order_victims(ssn, vs, _task(ssn, "p-0"))]
    shuffled = list(vs)
    rnd.shuffle(shuffled)
    assert [t.name for t in order_victims(ssn, shuffled, _task(ssn, "p-0"))] == expected


# -- ValidateVictims and candidate nodes -------------------------------------------------------


def test_validate_victims_adds_victims_to_future_idle() -> None:
    objs = [queue("q1"), node("n1", cpu="4"), podgroup("a", 0, queue="q1"), podgroup("p", 1, queue="q1"),
            pod("v1", "a", cpu="1", node="n1", phase="Running"), pod("v2", "a", cpu="2", node="n1", phase="Running"),
            pod("big", "p", cpu="4"), pod("small", "p", cpu="1")]
    ssn = _session(objs)
    v1, v2, big, small = (_task(ssn, n) for n in ("v1", "v2", "big", "small"))
    assert validate_victims(ssn, big, 0, [v1, v2])  # 1 idle + 1 + 2 = 4
    assert not validate_victims(ssn, big, 0, [v2])  # 1 idle + 2 < 4
    assert validate_victims(ssn, small, 0, [])  # the idle cpu suffices: no victim needed


def test_candidate_nodes_drop_only_unresolvable_failures() -> None:
    objs = [queue("q1"), node("n1"), node("n2"), node("n3"), podgroup("p", 1, queue="q1"), pod("p-0", "p")]
    ssn = _session(objs)
    task = _task(ssn, "p-0")
    pred = PredicateResult(
        np.array([False, False, True]),
        [NodeFailure("selector", np.array([True, False, False]), True),
         NodeFailure("too many pods", np.array([False, True, False]), False)],
    )
    assert candidate_nodes(ssn, task, pred).tolist() == [False, True, True]
    # Unresolvable failures recorded by allocate this session count too.
    ssn.jobs["ns/p"].fit_errors[task.uid] = FitErrors(3, unresolvable=np.array([False, False, True]))
    assert candidate_nodes(ssn, task, pred).tolist() == [False, True, False]


# -- victim filters ---------------------------------------------------------------------------


def _filter_cluster():
    return [
        queue("q1"), queue("q2"), node("n1", cpu="16"),
        podgroup("p", 1, queue="q1"), podgroup("same-q", 0, queue="q1"), podgroup("other-q", 0, queue="q2"),
        pod("p-run", "p", node="n1", phase="Running"),
        pod("p-pending", "p"),
        pod("p-besteffort", "p", cpu=None, memory=None),
        pod("sq-run", "same-q", node="n1", phase="Running"),
        pod("sq-bound", "same-q", node="n1", phase="Pending"),
        pod("sq-be", "same-q", node="n1", phase="Running", cpu=None, memory=None),
        pod("sq-pinned", "same-q", node="n1", phase="Running", labels={"volcano.sh/preemptable": "false"}),
        pod("sq-deleting", "same-q", node="n1", phase="Running", deleting=True),
        pod("oq-run", "other-q", node="n1", phase="Running"),
    ]


def test_between_jobs_filter() -> None:
    ssn = _session(_filter_cluster())
    accept = _between_jobs_filter(ssn, _task(ssn, "p-pending"), ssn.jobs["ns/p"])
    chosen = sorted(t.name for t in ssn.tasks.values() if accept(t))
    assert chosen == ["sq-be", "sq-bound", "sq-run"]
    # A best-effort preemptor may only evict best-effort tasks.
    accept = _between_jobs_filter(ssn, _task(ssn, "p-besteffort"), ssn.jobs["ns/p"])
    assert sorted(t.name for t in ssn.tasks.values() if accept(t)) == ["sq-be"]


def test_within_job_filter() -> None:
    ssn = _session(_filter_cluster())
    accept = _within_job_filter(_task(ssn, "p-pending"))
    assert sorted(t.name for t in ssn.tasks.values() if accept(t)) == ["p-run"]


# -- options ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "pct", "lo", "hi", "expected"),
    [(3, 10, 1, 100, 1), (50, 10, 1, 100, 5), (5000, 10, 1, 100, 100), (20, 50, 1, 5, 5), (2, 10, 5, 100, 2),
     (0, 10, 1, 100, 0)],
)
def test_number_of_dry_run_candidates(nodes: int, pct: int, lo: int, hi: int, expected: int) -> None:
    opts = PreemptOptions(True, pct, lo, hi)
    assert opts.num_candidates(nodes) == expected


def test_action_arguments_are_read_and_type_checked() -> None:
    config = PREEMPT_CONFIG + """configurations:
- name: preempt
  arguments: {enableTopologyAwarePreemption: true, minCandidateNodesPercentage: 50, maxCandidateNodesAbsolute: 7, predicateErrorCacheEnable: false}
"""
    ssn = _session([node("n1")], config)
    assert PreemptOptions.from_session(ssn) == PreemptOptions(True, 50, 1, 7)
    bad = PREEMPT_CONFIG + """configurations:
- name: preempt
  arguments: {enableTopologyAwarePreemption: "yes"}
"""
    # Refused when the config is loaded (CONF-3), before any session.
    with pytest.raises(ConfigError, match="enableTopologyAwarePreemption"):
        _session([node("n1")], bad)


# -- dry run ----------------------------------------------------------------------------------


class _Plan:
    def __init__(self, name: str, victims: list, violations: int = 0) -> None:
        self.name, self.victims, self.row, self.violations = name, victims, 0, violations


class _V:
    def __init__(self, priority: int, start: float = 0.0) -> None:
        self.priority, self.start_time = priority, start


def test_plan_order_follows_the_kube_scheduler_candidate_order() -> None:
    ssn = _session([node("n1")])
    ssn.now = 1000.0
    key = lambda p: plan_key(ssn, p)  # noqa: E731
    lower_top = _Plan("z", [_V(5), _V(5)])
    higher_top = _Plan("a", [_V(6)])
    assert key(lower_top) < key(higher_top)  # lowest highest-victim priority first
    assert key(_Plan("z", [_V(5), _V(1)])) < key(_Plan("a", [_V(5), _V(2)]))  # then the lowest sum
    assert key(_Plan("z", [_V(5)])) < key(_Plan("a", [_V(5), _V(-10**6)]))  # more victims cost more
    assert key(_Plan("z", [_V(5, 900.0)])) < key(_Plan("a", [_V(5, 100.0)]))  # latest start first
    assert key(_Plan("z", [_V(5)])) < key(_Plan("a", [_V(5, 999.0)]))  # not started = started now
    assert key(_Plan("a", [_V(5)])) < key(_Plan("b", [_V(5)]))  # finally the node name
    assert key(_Plan("z", [])) < key(_Plan("a", [_V(0)]))  # an empty plan is the cheapest


def test_dry_run_leaves_the_session_unchanged() -> None:
    objs = PRIO + [queue("q1"), node("n1", cpu="4"), podgroup("low", 0, queue="q1", priorityClassName="low"),
                   podgroup("high", 1, queue="q1", priorityClassName="high"),
                   pod("small", "low", cpu="1", node="n1", phase="Running", priority=1),
                   pod("big", "low", cpu="2", node="n1", phase="Running", priority=5),
                   pod("rest", "low", cpu="1", node="n1", phase="Running", priority=9),
                   pod("preemptor", "high", cpu="2", priority=100)]
    ssn = _session(objs)
    before = _state(ssn)
    preemptor = _task(ssn, "preemptor")
    accept = _between_jobs_filter(ssn, preemptor, ssn.jobs["ns/high"])
    found = select_victims_on_node(ssn, preemptor, ssn.queues["q1"], 0, accept)
    assert found is not None and [v.name for v in found[0]] == ["big"]  # 'small' is reprieved
    assert found[1] == 0  # no PodDisruptionBudgets
    assert _same_state(before, _state(ssn))


# -- PodDisruptionBudgets ---------------------------------------------------------------------


def _pdb(name: str, allowed: int, selector: Any, disrupted: tuple[str, ...] = ()) -> dict[str, Any]:
    status: dict[str, Any] = {"disruptionsAllowed": allowed}
    if disrupted:
        status["disruptedPods"] = {p: "2026-01-01T00:00:00Z" for p in disrupted}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"selector": selector}, "status": status}


def _budget_session(pdbs: list[dict[str, Any]], labels: dict[str, dict[str, str]]):
    """Victims a (most important) .. d on n1; ``labels`` per victim name."""
    objs = PRIO + [queue("q1"), node("n1", cpu="8"), podgroup("low", 0, queue="q1", priorityClassName="low"),
                   podgroup("high", 1, queue="q1", priorityClassName="high")]
    for prio, name in zip((9, 7, 5, 3), "abcd"):
        objs.append(pod(name, "low", cpu="2", node="n1", phase="Running", priority=prio, labels=labels.get(name)))
    objs.append(pod("preemptor", "high", cpu="2", priority=100))
    return _session(objs + pdbs)


def _violating(ssn) -> list[str]:
    preemptor = _task(ssn, "preemptor")
    victims = [t for t in ssn.tasks.values() if t.name in "abcd"]
    ordered = order_victims(ssn, victims, preemptor)
    return sorted(ssn.tasks[u].name for u in pdb_mod.budget_view(ssn).violating(reversed(ordered)))


def test_pdb_budget_counts_down_from_the_most_important_victim() -> None:
    db = {"app": "db"}
    ssn = _budget_session([_pdb("db", 2, {"matchLabels": db})], {"a": db, "b": db, "c": db, "d": db})
    assert _violating(ssn) == ["c", "d"]  # a and b use up the two allowed disruptions


def test_pdb_every_guarding_budget_counts_and_unlabelled_pods_are_never_guarded() -> None:
    pdbs = [_pdb("db", 1, {"matchLabels": {"app": "db"}}), _pdb("tier", 1, {"matchLabels": {"tier": "x"}}),
            _pdb("absent", 0, {"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]})]
    # a is guarded by all three: 'absent' allows nothing, so a violates; a also takes the
    # last disruption of 'db' and of 'tier' (no early stop), so b and c violate as well.
    labels = {"a": {"app": "db", "tier": "x"}, "b": {"app": "db", "zone": "z"}, "c": {"tier": "x", "zone": "z"}}
    ssn = _budget_session(pdbs, labels)
    assert _violating(ssn) == ["a", "b", "c"]  # d has no labels: no budget guards it


def test_pdb_disrupted_pods_and_other_selectors_do_not_count() -> None:
    db = {"app": "db"}
    pdbs = [_pdb("db", 0, {"matchLabels": db}, disrupted=("a",)), _pdb("empty", 0, {}),
            {**_pdb("elsewhere", 0, {"matchLabels": db}), "metadata": {"name": "elsewhere", "namespace": "other"}}]
    ssn = _budget_session(pdbs, {"a": db, "b": db, "c": {"app": "web"}})
    assert _violating(ssn) == ["b"]  # a's eviction is already processed; c unmatched; d unlabelled


def test_pdb_non_violating_victims_are_taken_first() -> None:
    # n1 (4 cpu) is full with 'guarded' (priority 1, budget allows nothing) and 'plain'
    # (priority 2). Without budgets the least important victim would go; with them the
    # non-violating one does (kube-scheduler: the violating victim is reprieved first).
    objs = PRIO + [queue("q1"), node("n1", cpu="4"), podgroup("low", 0, queue="q1", priorityClassName="low"),
                   podgroup("high", 1, queue="q1", priorityClassName="high"),
                   pod("guarded", "low", cpu="2", node="n1", phase="Running", priority=1, labels={"app": "db"}),
                   pod("plain", "low", cpu="2", node="n1", phase="Running", priority=2, labels={"app": "web"}),
                   pod("preemptor", "high", cpu="2", priority=100)]
    for pdbs, expected in (([], (["guarded"], 0)), ([_pdb("db", 0, {"matchLabels": {"app": "db"}})], (["plain"], 0))):
        ssn = _session(objs + pdbs)
        before = _state(ssn)
        preemptor = _task(ssn, "preemptor")
        accept = _between_jobs_filter(ssn, preemptor, ssn.jobs["ns/high"])
        found = select_victims_on_node(ssn, preemptor, ssn.queues["q1"], 0, accept)
        assert found is not None and ([v.name for v in found[0]], found[1]) == expected
        assert _same_state(before, _state(ssn))


def test_pdb_violation_counted_when_a_violating_victim_cannot_be_reprieved() -> None:
    # Both victims are guarded by a budget allowing one disruption: 'big' (more important)
    # takes it, 'small' would violate. The preemptor needs 6 of 8 cpu: 'big' alone makes
    # room, and it is no violation.
    db = {"app": "db"}
    objs = PRIO + [queue("q1"), node("n1", cpu="8"), podgroup("low", 0, queue="q1", priorityClassName="low"),
                   podgroup("high", 1, queue="q1", priorityClassName="high"),
                   pod("small", "low", cpu="2", node="n1", phase="Running", priority=1, labels=db),
                   pod("big", "low", cpu="6", node="n1", phase="Running", priority=2, labels=db),
                   pod("preemptor", "high", cpu="6", priority=100)]
    ssn = _session(objs + [_pdb("db", 1, {"matchLabels": db})])
    preemptor = _task(ssn, "preemptor")
    accept = _between_jobs_filter(ssn, preemptor, ssn.jobs["ns/high"])
    found = select_victims_on_node(ssn, preemptor, ssn.queues["q1"], 0, accept)
    assert found is not None and [v.name for v in found[0]] == ["big"] and found[1] == 0
    # With no disruption allowed both violate and both are removed; 'big' cannot be
    # reprieved, 'small' can: the same plan, now with one violation.
    ssn = _session(objs + [_pdb("db", 0, {"matchLabels": db})])
    preemptor = _task(ssn, "preemptor")
    accept = _between_jobs_filter(ssn, preemptor, ssn.jobs["ns/high"])
    found = select_victims_on_node(ssn, preemptor, ssn.queues["q1"], 0, accept)
    assert found is not None and [v.name for v in found[0]] == ["big"] and found[1] == 1


def test_plan_with_fewer_pdb_violations_wins_first() -> None:
    ssn = _session([node("n1")])
    key = lambda p: plan_key(ssn, p)  # noqa: E731
    assert key(_Plan("z", [_V(9), _V(9), _V(9)], 0)) < key(_Plan("a", [_V(1)], 1))
    assert key(_Plan("a", [_V(1)], 1)) < key(_Plan("a", [_V(1)], 2))


def test_tentative_evictions_restore_in_any_order() -> None:
    objs = [queue("q1"), node("n1", cpu="4"), podgroup("a", 0, queue="q1"),
            pod("x", "a", node="n1", phase="Running"), pod("y", "a", node="n1", phase="Pending")]
    ssn = _session(objs)
    before = _state(ssn)
    moves = TentativeEvictions(ssn)
    x, y = _task(ssn, "x"), _task(ssn, "y")
    moves.remove(x)
    moves.remove(y)
    assert ssn.table.pod_count[0] == 0 and x.status == TaskStatus.PENDING
    moves.restore(x)
    assert x.status == TaskStatus.RUNNING and ssn.table.pod_count[0] == 1
    moves.restore_all()
    assert y.status == TaskStatus.BOUND and _same_state(before, _state(ssn))


class _RejectSimulated(Plugin):
    """Allocatable always passes; SimulateAllocatable always fails."""

    name = "t-reject-simulated"

    def on_session_open(self, ssn) -> None:
        ssn.add_fn("allocatable", self.name, lambda q, t: True)
        ssn.add_fn("simulate_allocatable", self.name, lambda state, q, t: False)


class _CapOnePodPerQueue(Plugin):
    """Allocatable: at most one allocated task per queue, tracked through event handlers;
    no Simulate* hooks (the dry run must fall back to the plain check)."""

    name = "t-cap-one"

    def on_session_open(self, ssn) -> None:
        from tidesched.framework.plugin import EventHandler

        count = {q: 0 for q in ssn.queues}
        for job in ssn.jobs.values():
            count[job.queue] += sum(1 for t in job.tasks.values() if t.status in (TaskStatus.RUNNING, TaskStatus.BOUND))

        def alloc(t) -> None:
            count[ssn.jobs[t.job].queue] += 1

        def dealloc(t) -> None:
            count[ssn.jobs[t.job].queue] -= 1

        ssn.add_event_handler(EventHandler(alloc, dealloc))
        ssn.add_fn("allocatable", self.name, lambda q, t: count[q.name] < 1)


PLUGINS.setdefault(_RejectSimulated.name, _RejectSimulated)
PLUGINS.setdefault(_CapOnePodPerQueue.name, _CapOnePodPerQueue)

TOPOLOGY = """configurations:
- name: preempt
  arguments: {enableTopologyAwarePreemption: true}
"""


def _one_victim_cluster():
    return PRIO + [queue("q1"), node("n1", cpu="8"), podgroup("low", 0, queue="q1", priorityClassName="low"),
                   podgroup("high", 1, queue="q1", priorityClassName="high"),
                   pod("victim", "low", cpu="1", node="n1", phase="Running"), pod("preemptor", "high", cpu="1")]


def test_dry_run_uses_simulate_allocatable_when_registered() -> None:
    config = PREEMPT_CONFIG + "  - {name: t-reject-simulated, enabledAllocatable: true}\n" + TOPOLOGY
    out = _run(_one_victim_cluster(), config)
    assert out["evicted"] == [] and out["pipelined"] == {}
    # Without topology-aware preemption the plain Allocatable (always true) applies.
    out = _run(_one_victim_cluster(), PREEMPT_CONFIG + "  - {name: t-reject-simulated, enabledAllocatable: true}\n")
    assert out["pipelined"] == {"ns/preemptor": "n1"}


def test_dry_run_falls_back_to_plain_allocatable_without_simulate_hooks() -> None:
    # The queue may hold one task; the victim holds it. The dry run must see the queue
    # after the victim's removal, through the plugin's event handlers.
    config = PREEMPT_CONFIG + "  - {name: t-cap-one, enabledAllocatable: true}\n" + TOPOLOGY
    out = _run(_one_victim_cluster(), config)
    assert out["evicted"] == ["ns/victim"] and out["pipelined"] == {"ns/preemptor": "n1"}


# -- whole action -----------------------------------------------------------------------------


def _contended_cluster() -> list[dict[str, Any]]:
    objs = PRIO + [queue("q1"), queue("q2")]
    for i in range(4):
        objs.append(node(f"n{i}", cpu="4"))
    objs += [podgroup("low", 0, queue="q1", priorityClassName="low"),
             podgroup("other", 0, queue="q2", priorityClassName="low"),
             podgroup("high", 3, queue="q1", priorityClassName="high")]
    for i in range(4):
        objs.append(pod(f"low-{i}", "low", cpu="3", node=f"n{i}", phase="Running", priority=i))
        objs.append(pod(f"other-{i}", "other", cpu="1", node=f"n{i}", phase="Running"))
    objs += [pod(f"high-{i}", "high", cpu="2", priority=100) for i in range(3)]
    return objs


@pytest.mark.parametrize("topology", [False, True])
def test_same_input_same_decisions(topology: bool) -> None:
    config = PREEMPT_CONFIG + (TOPOLOGY if topology else "")
    first = _run(_contended_cluster(), config)
    assert len(first["evicted"]) == 3 and len(first["pipelined"]) == 3
    assert _run(_contended_cluster(), config) == first
    shuffled = _contended_cluster()
    random.Random(7).shuffle(shuffled)
    assert _run(shuffled, config) == first


def test_discarded_job_statement_restores_the_session() -> None:
    objs = PRIO + [queue("q1"), node("n1", cpu="4"), podgroup("low", 1, queue="q1", priorityClassName="low"),
                   podgroup("high", 2, queue="q1", priorityClassName="high"),
                   pod("low-0", "low", cpu="2", node="n1", phase="Running"),
                   pod("low-1", "low", cpu="2", node="n1", phase="Running"),
                   pod("high-0", "high", cpu="4"), pod("high-1", "high", cpu="4")]
    ssn = _session(objs)
    before = _state(ssn)
    preempt_mod.execute(ssn)
    assert ssn.evicted == {} and _same_state(before, _state(ssn))


def test_only_pipelined_jobs_keep_their_evictions() -> None:
    objs = PRIO + [queue("q1"), node("n1", cpu="2"), podgroup("low", 0, queue="q1", priorityClassName="low"),
                   podgroup("high", 1, queue="q1", priorityClassName="high"),
                   pod("low-0", "low", cpu="2", node="n1", phase="Running"), pod("high-0", "high", cpu="2")]
    ssn = _session(objs)
    preempt_mod.execute(ssn)
    assert list(ssn.evicted) == ["ns/low-0"]
    assert "preempt" in ssn.evicted["ns/low-0"] and "ns/high-0" in ssn.evicted["ns/low-0"]
    assert _task(ssn, "high-0").status == TaskStatus.PIPELINED
    assert _task(ssn, "low-0").status == TaskStatus.RELEASING


# -- pods evicted this session free their slot and their anti-affinity ---------------------------


ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}}


def test_normal_preemption_resolves_pod_anti_affinity() -> None:
    config = PREEMPT_CONFIG + "  - {name: predicates, enablePredicate: true, enablePreemptable: false}\n"
    objs = PRIO + [queue("q1"), node("n1", cpu="4", labels={"kubernetes.io/hostname": "n1"}),
                   podgroup("low", 0, queue="q1", priorityClassName="low"),
                   podgroup("high", 1, queue="q1", priorityClassName="high"),
                   pod("db-old", "low", node="n1", phase="Running", labels={"app": "db"}, spec={"affinity": ANTI}),
                   pod("db-new", "high", labels={"app": "db"}, spec={"affinity": ANTI})]
    out = _run(objs, config)
    assert out["evicted"] == ["ns/db-old"] and out["pipelined"] == {"ns/db-new": "n1"}


def test_best_effort_preemptor_frees_a_pod_slot() -> None:
    # Volcano preempt_test.go "BestEffort high-priority pod preempt BestEffort low-priority pod".
    config = PREEMPT_CONFIG + "  - {name: predicates, enablePredicate: true, enablePreemptable: false}\n"
    objs = PRIO + [queue("q1"), node("n1", cpu="12", pods="1"),
                   podgroup("low", 0, queue="q1", priorityClassName="low"),
                   podgroup("high", 1, queue="q1", priorityClassName="high"),
                   pod("victim", "low", cpu=None, memory=None, node="n1", phase="Running"),
                   pod("preemptor", "high", cpu=None, memory=None)]
    out = _run(objs, config)
    assert out["evicted"] == ["ns/victim"]
