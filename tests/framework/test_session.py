"""Session framework: gang arithmetic, node accounting, statements and tier aggregation."""

from __future__ import annotations

import numpy as np
import pytest

from builders import BASIC_CONFIG, node, pod, podgroup
from tidesched.framework.config import PluginOption, SchedulerConfig, Tier
from tidesched.framework.plugin import ABSTAIN, PERMIT, REJECT, EventHandler, Plugin
from tidesched.scheduler import PLUGINS, config_from_text, open_session, run_actions
from tidesched.framework.statement import Statement
from tidesched.model.snapshot import build_snapshot
from tidesched.model.status import TaskStatus


def _session(objs, config_text: str = BASIC_CONFIG):
    return open_session(build_snapshot(objs), config_from_text(config_text))


def test_node_accounting_for_releasing_and_pipelined() -> None:
    objs = [
        node("n1", cpu="4"),
        podgroup("pg", 1),
        pod("run", "pg", cpu="1", node="n1", phase="Running"),
        pod("rel", "pg", cpu="2", node="n1", phase="Running", deleting=True),
    ]
    ssn = _session(objs)
    t = ssn.table
    cpu = t.dim_index["cpu"]
    assert t.used[0, cpu] == 3000
    assert t.idle[0, cpu] == 1000
    assert t.releasing[0, cpu] == 2000
    assert t.future_idle[0, cpu] == 3000
    assert t.pod_count[0] == 2


def test_statement_discard_reverts_state_and_handlers() -> None:
    objs = [node("n1", cpu="4"), podgroup("pg", 2), pod("a", "pg", cpu="1"), pod("b", "pg", cpu="1"),
            pod("v", "pg", cpu="1", node="n1", phase="Running")]
    ssn = _session(objs)
    calls: list[tuple[str, str]] = []
    ssn.add_event_handler(EventHandler(lambda t: calls.append(("alloc", t.name)), lambda t: calls.append(("dealloc", t.name))))
    a, b, v = (next(t for t in ssn.tasks.values() if t.name == n) for n in ("a", "b", "v"))
    before = ssn.table.used.copy()
    job = ssn.jobs["ns/pg"]
    stmt = Statement(ssn)
    stmt.allocate(a, "n1")
    stmt.pipeline(b, "n1")
    stmt.evict(v, "test")
    assert (a.status, b.status, v.status) == (TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.RELEASING)
    assert job.ready_task_num() == 1 and job.waiting_task_num() == 1
    stmt.discard()
    assert (a.status, b.status, v.status) == (TaskStatus.PENDING, TaskStatus.PENDING, TaskStatus.RUNNING)
    assert a.node_name == "" and v.node_name == "n1"
    assert np.array_equal(ssn.table.used, before)
    assert ssn.table.pipelined.sum() == 0 and ssn.table.releasing.sum() == 0
    assert calls == [("alloc", "a"), ("alloc", "b"), ("dealloc", "v"), ("alloc", "v"), ("dealloc", "b"), ("dealloc", "a")]
    assert job.ready_task_num() == 1  # the running task only


def test_statement_commit_records_binds_and_evictions() -> None:
    objs = [node("n1", cpu="4"), podgroup("pg", 1), pod("a", "pg"), pod("v", "pg", node="n1", phase="Running")]
    ssn = _session(objs)
    a = next(t for t in ssn.tasks.values() if t.name == "a")
    v = next(t for t in ssn.tasks.values() if t.name == "v")
    stmt = Statement(ssn)
    stmt.evict(v, "make room")
    stmt.allocate(a, "n1")
    stmt.commit()
    assert ssn.bound == {"ns/a": "n1"}
    assert ssn.evicted == {"ns/v": "make room"}
    assert a.status == TaskStatus.BINDING


def test_gang_arithmetic_per_role() -> None:
    objs = [node("n1"), podgroup("pg", 3, minTaskMember={"ps": 1, "worker": 2}),
            pod("ps-0", "pg", annotations={"volcano.sh/task-spec": "ps"}),
            pod("w-0", "pg", annotations={"volcano.sh/task-spec": "worker"}, node="n1", phase="Running"),
            pod("w-1", "pg", annotations={"volcano.sh/task-spec": "worker"})]
    ssn = _session(objs)
    job = ssn.jobs["ns/pg"]
    assert job.valid_task_num() == 3 and job.check_task_valid()
    assert job.ready_task_num() == 1 and not job.is_ready() and job.is_starving()
    assert not job.check_task_ready()
    w1 = next(t for t in job.tasks.values() if t.name == "w-1")
    ssn.move_task(w1, TaskStatus.PIPELINED, "n1")
    assert job.check_task_pipelined() is False  # ps still missing
    ps = next(t for t in job.tasks.values() if t.name == "ps-0")
    ssn.move_task(ps, TaskStatus.ALLOCATED, "n1")
    assert job.check_task_pipelined() and job.is_pipelined() and not job.is_ready()


class _Voter(Plugin):
    """Test plugin whose hook answers are set per instance through arguments."""

    name = "test-voter"

    def on_session_open(self, ssn) -> None:
        answers = dict(self.arguments)
        if "enqueue" in answers:
            ssn.add_fn("job_enqueueable", self.arguments["id"], lambda job: answers["enqueue"])
        if "victims" in answers:
            ssn.add_fn("reclaimable", self.arguments["id"],
                       lambda actor, cands: ([c for c in cands if c.name in answers["victims"]], answers.get("vote", PERMIT)))
        if "starving" in answers:
            ssn.add_fn("job_starving", self.arguments["id"], lambda job: answers["starving"])


def _voter_session(tiers: list[list[dict]]):
    for i in range(6):
        PLUGINS.setdefault(f"voter{i}", type(f"V{i}", (_Voter,), {"name": f"voter{i}"}))
    cfg_tiers = []
    n = 0
    for tier in tiers:
        opts = []
        for args in tier:
            args = dict(args, id=f"voter{n}")
            opts.append(PluginOption(f"voter{n}", arguments=args).apply_defaults())
            n += 1
        cfg_tiers.append(Tier(opts))
    config = SchedulerConfig(actions=[], tiers=cfg_tiers)
    objs = [node("n1"), podgroup("pg", 1), pod("a", "pg"), pod("v1", "pg", node="n1", phase="Running"),
            pod("v2", "pg", node="n1", phase="Running")]
    return open_session(build_snapshot(objs), config)


@pytest.mark.parametrize(
    "tiers,expected",
    [
        ([[{"enqueue": ABSTAIN}]], True),
        ([[{"enqueue": REJECT}, {"enqueue": PERMIT}]], False),
        ([[{"enqueue": PERMIT}], [{"enqueue": REJECT}]], True),  # a permitting tier is final
        ([[{"enqueue": ABSTAIN}], [{"enqueue": REJECT}]], False),
    ],
)
def test_enqueue_votes_per_tier(tiers, expected) -> None:
    ssn = _voter_session(tiers)
    assert ssn.job_enqueueable(ssn.jobs["ns/pg"]) is expected


def test_victims_intersect_within_tier_and_first_nonempty_tier_decides() -> None:
    ssn = _voter_session([[{"victims": ["v1", "v2"]}, {"victims": ["v2"]}], [{"victims": ["v1"]}]])
    actor = next(t for t in ssn.tasks.values() if t.name == "a")
    cands = [t for t in ssn.tasks.values() if t.name.startswith("v")]
    assert [t.name for t in ssn.reclaimable(actor, cands)] == ["v2"]
    # An empty answer leaves the tier undecided: the next tier decides (Volcano).
    ssn = _voter_session([[{"victims": []}], [{"victims": ["v1"]}]])
    assert [t.name for t in ssn.reclaimable(actor, cands)] == ["v1"]
    ssn = _voter_session([[{"victims": ["v1"], "vote": ABSTAIN}], [{"victims": ["v2"]}]])
    assert [t.name for t in ssn.reclaimable(actor, cands)] == ["v2"]


def test_victims_after_a_tier_that_ended_empty_the_next_tier_starts_afresh() -> None:
    """As master (7976b63e2): a tier whose plugins named victims and then none leaves the next
    tier free to decide. v1.7.0 set its "started" flag once for all tiers, so the next tier's
    answer was intersected with nothing (differential seed 2067)."""
    ssn = _voter_session([[{"victims": ["v1", "v2"]}, {"victims": []}], [{"victims": ["v1"]}]])
    actor = next(t for t in ssn.tasks.values() if t.name == "a")
    cands = [t for t in ssn.tasks.values() if t.name.startswith("v")]
    assert [t.name for t in ssn.reclaimable(actor, cands)] == ["v1"]


def test_victims_an_empty_intersection_is_not_refilled_by_a_later_plugin_of_the_tier() -> None:
    """Deliberately not as master (docs/fidelity.md): two plugins that agree on no victim leave
    their tier empty; master takes a third plugin's answer whole, as if it were the first."""
    ssn = _voter_session([[{"victims": ["v1"]}, {"victims": ["v2"]}, {"victims": ["v1", "v2"]}]])
    actor = next(t for t in ssn.tasks.values() if t.name == "a")
    cands = [t for t in ssn.tasks.values() if t.name.startswith("v")]
    assert ssn.reclaimable(actor, cands) == []
    ssn = _voter_session([[{"victims": ["v1"]}, {"victims": ["v2"]}, {"victims": ["v1", "v2"]}],
                          [{"victims": ["v2"]}]])
    actor = next(t for t in ssn.tasks.values() if t.name == "a")
    cands = [t for t in ssn.tasks.values() if t.name.startswith("v")]
    assert [t.name for t in ssn.reclaimable(actor, cands)] == ["v2"]  # the next tier decides


def test_job_starving_first_tier_with_fns_decides() -> None:
    ssn = _voter_session([[{"starving": False}, {"starving": True}], [{"starving": True}]])
    assert ssn.job_starving(ssn.jobs["ns/pg"]) is False
    ssn = _voter_session([[{"enqueue": PERMIT}], [{"starving": True}]])
    assert ssn.job_starving(ssn.jobs["ns/pg"]) is True


def test_same_input_same_decisions() -> None:
    objs = [node(f"n{i}", cpu="2") for i in range(5)] + [podgroup(f"pg{j}", 2) for j in range(4)]
    objs += [pod(f"p{j}-{k}", f"pg{j}", cpu="1") for j in range(4) for k in range(2)]
    first = run_actions(_session(objs)).to_json()
    for _ in range(3):
        assert run_actions(_session(objs)).to_json() == first


def test_not_ready_nodes_are_not_used() -> None:
    bad = node("n0")
    bad["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    d = run_actions(_session([bad, node("n1"), podgroup("pg", 1), pod("a", "pg")]))
    assert d.bound == {"ns/a": "n1"}


def test_podgroup_phase_running_after_pods_bound() -> None:
    objs = [node("n1"), podgroup("pg", 2, phase="Inqueue"), pod("a", "pg", node="n1", phase="Running"),
            pod("b", "pg", node="n1", phase="Pending")]
    d = run_actions(_session(objs))
    assert d.podgroups["ns/pg"] == "Running"


def test_podgroup_phase_completed_and_unknown() -> None:
    objs = [node("n1"), podgroup("done", 1, phase="Running"), pod("a", "done", node="n1", phase="Succeeded")]
    assert run_actions(_session(objs)).podgroups["ns/done"] == "Completed"
    # A running job whose gang cannot be completed this session turns Unknown.
    objs = [node("n1", cpu="1"), podgroup("pg", 2, phase="Running"), pod("a", "pg", node="n1", phase="Running"),
            pod("b", "pg", cpu="4")]
    d = run_actions(_session(objs))
    assert d.podgroups["ns/pg"] == "Unknown"


def test_queue_allocated_rolls_up_to_ancestors_under_root() -> None:
    from builders import queue

    objs = [node("n1", cpu="8"), queue("root"), queue("a", parent="root"), queue("a1", parent="a"),
            queue("b"), podgroup("pg", 1, queue="a1"), pod("x", "pg", cpu="2", node="n1", phase="Running"),
            podgroup("pg2", 1, queue="b"), pod("y", "pg2", cpu="1", node="n1", phase="Running")]
    alloc = _session(objs).queue_allocated()
    assert alloc["a1"].milli_cpu == 2000
    assert alloc["a"].milli_cpu == 2000
    assert alloc["b"].milli_cpu == 1000
    assert alloc["root"].milli_cpu == 3000


def test_run_reports_each_action_and_decides_as_without_the_callback() -> None:
    objs = [node("n1", cpu="2"), podgroup("pg", 2)] + [pod(f"p{k}", "pg", cpu="1") for k in range(2)]
    seen: list[tuple[str, float]] = []
    with_cb = run_actions(_session(objs), on_action=lambda name, seconds: seen.append((name, seconds)))
    assert [name for name, _ in seen] == config_from_text(BASIC_CONFIG).actions
    assert all(seconds >= 0 for _, seconds in seen)
    assert with_cb.to_json() == run_actions(_session(objs)).to_json()


def test_a_released_session_is_freed_without_the_cyclic_collector() -> None:
    """Plugins and the session refer to each other; release() drops that cycle, so a finished
    session and its node-table copy go as soon as nothing holds them (a replay opens tens of
    thousands of sessions)."""
    import gc
    import weakref

    objs = [node("n1", cpu="8"), podgroup("g", 2), pod("a", "g", cpu="1"), pod("b", "g", cpu="1")]
    gc.collect()
    gc.disable()
    try:
        kept = open_session(build_snapshot(objs), config_from_text(BASIC_CONFIG))
        d = run_actions(kept)
        ref_kept = weakref.ref(kept)
        del kept
        assert ref_kept() is not None  # the plugin cycle holds it until a collection
        released = open_session(build_snapshot(objs), config_from_text(BASIC_CONFIG))
        assert run_actions(released).bound == d.bound == {"ns/a": "n1", "ns/b": "n1"}
        table = weakref.ref(released.table)
        ref = weakref.ref(released)
        released.release()
        del released
        assert ref() is None and table() is None
    finally:
        gc.enable()
