"""Gang-safe reclaim (TIDE-6, DEC-8): inference takes cards back from training by whole jobs,
breaking as few and as low-priority jobs as it can, and never leaves one below minAvailable.

The configuration is the bundled tidal day's: seed 000's with one change (gang does not vote
on starving, so a Deployment can reclaim for every replica)."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

from builders import card_node, card_pod, card_queue, podgroup
from hypothesis import HealthCheck, given, settings, strategies as st

from tidesched.actions.reclaim import gang as gang_reclaim
from tidesched.actions.reclaim.gang_victims import GangVictims
from tidesched.actions.reclaim.steps import reclaimees
from tidesched.framework.victim_order import order_victims
from tidesched.scheduler import PLUGINS, config_from_text, open_session, run_actions
from tidesched.framework.plugin import Plugin
from tidesched.framework.decisions import Decisions
from tidesched.model.snapshot import build_snapshot
from tidesched.sim import bundled_example

H200 = "NVIDIA-H200"


TIDAL_CONF = (bundled_example().parent / "scheduler.conf").read_text()


def tidal_config(gang_safe: bool = True, extra_plugin: str = "", victim_order: str = "") -> str:
    """The bundled tidal day's configuration, with the reclaim switches and an extra plugin."""
    order = f", victimOrder: {victim_order}" if victim_order else ""
    switch = (f"configurations:\n- name: reclaim\n"
              f"  arguments: {{enableGangSafeReclaim: {str(gang_safe).lower()}{order}}}\n")
    tier = extra_plugin.replace("  - name:", "- plugins:\n  - name:", 1)
    return TIDAL_CONF + tier + switch


def queues(inference_cards: int = 64) -> list[dict[str, Any]]:
    return [
        card_queue("q-inference", f'{{"{H200}":{inference_cards}}}', cpu=None, priority=80000, reclaimable=False),
        card_queue("q-training", f'{{"{H200}":1000}}', cpu=None, priority=20000, reclaimable=True),
        {"kind": "PriorityClass", "metadata": {"name": "low"}, "value": 100},
        {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 10000},
    ]


def training(
    name: str,
    pods: list[tuple[str, int]],
    min_member: int,
    priority_class: str | None = None,
    started: str = "2026-01-01T00:00:00Z",
    protected: tuple[int, ...] = (),
) -> list[dict[str, Any]]:
    """A running training job: one pod per (node, cards) entry."""
    pg = podgroup(name, min_member, queue="q-training", phase="Running")
    pg["metadata"]["annotations"] = {"volcano.sh/service.type": "training", "volcano.sh/preemptable": "true"}
    if priority_class:
        pg["spec"]["priorityClassName"] = priority_class
    out = [pg]
    for i, (node_name, cards) in enumerate(pods):
        ann = {"volcano.sh/preemptable": "false" if i in protected else "true"}
        p = card_pod(f"{name}-{i}", H200, cards, group=name, node_name=node_name, phase="Running", annotations=ann)
        p["status"]["startTime"] = started
        if priority_class:
            p["spec"]["priorityClassName"] = priority_class
        out.append(p)
    return out


def inference(name: str, replicas: int, cards: int) -> list[dict[str, Any]]:
    pg = podgroup(name, 1, queue="q-inference", phase="Inqueue")
    pg["metadata"]["annotations"] = {"volcano.sh/service.type": "inference"}
    return [pg] + [card_pod(f"{name}-{i}", H200, cards, group=name) for i in range(replicas)]


def run(objs: list[dict[str, Any]], config: str | None = None) -> Decisions:
    ssn = open_session(build_snapshot(objs), config_from_text(config or tidal_config()))
    return run_actions(ssn)


def nodes(*names: str) -> list[dict[str, Any]]:
    return [card_node(n, H200) for n in names]


# ------------------------------------------------------------------------------ whole gangs


def test_a_gang_spread_over_two_nodes_is_evicted_whole() -> None:
    objs = nodes("n1", "n2") + queues() + training("train", [("n1", 8), ("n2", 8)], 2) + inference("chat", 1, 8)
    out = run(objs)
    assert sorted(out.evicted) == ["ns/train-0", "ns/train-1"]
    assert out.pipelined == {"ns/chat-0": "n1"}
    assert "whole job ns/train evicted" in out.eviction_reasons["ns/train-1"]


def test_volcano_mode_breaks_the_gang_one_pod_at_a_time() -> None:
    """enableGangSafeReclaim: false keeps Volcano's behaviour (the bug TIDE-6 fixes)."""
    objs = nodes("n1", "n2") + queues() + training("train", [("n1", 8), ("n2", 8)], 2) + inference("chat", 1, 8)
    out = run(objs, tidal_config(gang_safe=False))
    assert list(out.evicted) == ["ns/train-0"]


def test_the_next_replica_takes_the_cards_the_broken_gang_frees_elsewhere() -> None:
    objs = (
        nodes("n1", "n2", "n3")
        + queues()
        + training("train", [("n1", 8), ("n2", 8)], 2)
        + training("other", [("n3", 8)], 1, priority_class="high")
        + inference("chat", 2, 8)
    )
    out = run(objs)
    assert sorted(out.evicted) == ["ns/train-0", "ns/train-1"]
    assert out.pipelined == {"ns/chat-0": "n1", "ns/chat-1": "n2"}


def test_only_what_the_reclaimer_needs_beyond_whole_jobs() -> None:
    objs = (
        nodes("n1", "n2")
        + queues()
        + training("a", [("n1", 4)], 1)
        + training("b", [("n1", 4)], 1)
        + training("c", [("n2", 8)], 1)
        + inference("chat", 1, 4)
    )
    out = run(objs)
    # Equal single-pod jobs: DEC-8 ties, so Volcano's victim, the newest of equal jobs.
    assert list(out.evicted) == ["ns/b-0"]


# ------------------------------------------------------------------------------ tidal victim order


def test_tidal_order_breaks_one_job_not_two() -> None:
    """Issue 25: three single-pod training jobs on one node (4, 2 and 2 cards) and a 4-card
    inference pod. Volcano's order takes the newest jobs first (the two 2-card ones, both
    broken); DEC-8 breaks the fewest jobs: the 4-card one alone."""
    objs = (
        nodes("n1")
        + queues()
        + training("big", [("n1", 4)], 1, started="2026-01-01T00:00:00Z")
        + training("small-a", [("n1", 2)], 1, started="2026-01-02T00:00:00Z")
        + training("small-b", [("n1", 2)], 1, started="2026-01-03T00:00:00Z")
        + inference("chat", 1, 4)
    )
    assert list(run(objs).evicted) == ["ns/big-0"]
    # victimOrder: volcano keeps Volcano's victims: the newest jobs, two of them.
    assert sorted(run(objs, tidal_config(victim_order="volcano")).evicted) == ["ns/small-a-0", "ns/small-b-0"]
    assert sorted(run(objs, tidal_config(gang_safe=False)).evicted) == ["ns/small-a-0", "ns/small-b-0"]


def test_tidal_order_evicts_the_lower_priority_job_on_a_later_node() -> None:
    """Issue 25: two full nodes, training jobs of PriorityClass 40000 (on n1) and 20000 (on n2).
    Volcano's walk stops at the first node that works, evicting the higher-priority job; DEC-8
    evicts the lower-priority one."""
    objs = (
        nodes("n1", "n2")
        + queues()
        + [{"kind": "PriorityClass", "metadata": {"name": "p40000"}, "value": 40000},
           {"kind": "PriorityClass", "metadata": {"name": "p20000"}, "value": 20000}]
        + training("hi", [("n1", 8)], 1, priority_class="p40000")
        + training("lo", [("n2", 8)], 1, priority_class="p20000")
        + inference("chat", 1, 8)
    )
    out = run(objs)
    assert list(out.evicted) == ["ns/lo-0"] and out.pipelined == {"ns/chat-0": "n2"}
    assert list(run(objs, tidal_config(victim_order="volcano")).evicted) == ["ns/hi-0"]


def test_victim_order_argument_is_checked() -> None:
    import pytest

    from tidesched.framework.arguments import ConfigError

    with pytest.raises(ConfigError, match="victimOrder"):
        config_from_text(tidal_config(victim_order="newest"))


# ------------------------------------------------------------------------------ DEC-8 choice


def test_a_lower_priority_job_is_broken_before_a_higher_priority_one() -> None:
    objs = (
        nodes("n1", "n2")
        + queues()
        + training("important", [("n1", 4), ("n1", 4)], 2, priority_class="high")
        + training("filler", [("n2", 4), ("n2", 4)], 2, priority_class="low")
        + inference("chat", 1, 8)
    )
    out = run(objs)
    assert sorted(out.evicted) == ["ns/filler-0", "ns/filler-1"]
    assert out.pipelined == {"ns/chat-0": "n2"}


def test_fewer_jobs_are_broken_before_fewer_pods() -> None:
    objs = (
        nodes("n1", "n2")
        + queues()
        + training("a", [("n1", 4)], 1)
        + training("b", [("n1", 4)], 1)
        + training("big", [("n2", 2), ("n2", 2), ("n2", 2), ("n2", 2)], 4)
        + inference("chat", 1, 8)
    )
    out = run(objs)
    assert sorted(out.evicted) == [f"ns/big-{i}" for i in range(4)]


def test_the_most_recently_started_job_goes_first() -> None:
    objs = (
        nodes("n1", "n2")
        + queues()
        + training("old", [("n1", 4), ("n1", 4)], 2, started="2026-01-01T00:00:00Z")
        + training("new", [("n2", 4), ("n2", 4)], 2, started="2026-01-02T00:00:00Z")
        + inference("chat", 1, 8)
    )
    assert sorted(run(objs).evicted) == ["ns/new-0", "ns/new-1"]


def test_surplus_pods_go_before_any_job_is_broken() -> None:
    objs = (
        nodes("n1", "n2")
        + queues()
        + training("elastic", [("n1", 4), ("n1", 4), ("n2", 4)], 2)
        + training("single", [("n2", 4)], 1)
        + inference("chat", 1, 4)
    )
    out = run(objs)
    assert len(out.evicted) == 1
    (victim,) = out.evicted
    assert victim.startswith("ns/elastic-")


def test_a_job_with_a_protected_pod_is_never_broken() -> None:
    objs = (
        nodes("n1", "n2")
        + queues()
        + training("guarded", [("n1", 4), ("n1", 4)], 2, priority_class="low", protected=(1,))
        + training("open", [("n2", 4), ("n2", 4)], 2, priority_class="high")
        + inference("chat", 1, 8)
    )
    out = run(objs)
    assert sorted(out.evicted) == ["ns/open-0", "ns/open-1"]


def test_nothing_is_evicted_when_no_plan_is_enough() -> None:
    objs = (
        nodes("n1")
        + queues()
        + training("guarded", [("n1", 4), ("n1", 4)], 2, protected=(0,))
        + inference("chat", 1, 8)
    )
    out = run(objs)
    assert out.evicted == [] and out.pipelined == {}


# ------------------------------------------------------------------------------ REL-2


class _NoRoom(Plugin):
    """Allocatable says no for every task; Preemptive says yes."""

    name = "t-no-room"

    def on_session_open(self, ssn) -> None:
        ssn.add_fn("allocatable", self.name, lambda q, t: False)


PLUGINS.setdefault(_NoRoom.name, _NoRoom)


def test_reclaim_never_pipelines_a_task_its_queue_cannot_take() -> None:
    objs = nodes("n1") + queues() + training("train", [("n1", 8)], 1) + inference("chat", 1, 8)
    for gang_safe in (True, False):
        config = tidal_config(gang_safe, extra_plugin="  - name: t-no-room\n")
        out = run(objs, config)
        assert out.pipelined == {} and out.evicted == [], gang_safe


# ------------------------------------------------------------------------------ property


@st.composite
def tidal_worlds(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int]:
    n_nodes = draw(st.integers(1, 4))
    names = [f"n{i}" for i in range(n_nodes)]
    free = {n: 8 for n in names}
    quota = draw(st.integers(0, 16))
    objs: list[dict[str, Any]] = nodes(*names) + queues(quota)
    for j in range(draw(st.integers(0, 6))):
        size = draw(st.integers(1, 4))
        pods: list[tuple[str, int]] = []
        for _ in range(size):
            cards = draw(st.sampled_from([1, 2, 4, 8]))
            fits = [n for n in names if free[n] >= cards]
            if not fits:
                break
            where = draw(st.sampled_from(fits))
            free[where] -= cards
            pods.append((where, cards))
        if not pods:
            continue
        min_member = draw(st.integers(1, len(pods)))
        pc = draw(st.sampled_from([None, "low", "high"]))
        protected = (0,) if draw(st.integers(0, 5)) == 0 else ()
        objs += training(f"t{j}", pods, min_member, priority_class=pc, protected=protected)
    for j in range(draw(st.integers(1, 3))):
        objs += inference(f"inf{j}", draw(st.integers(1, 4)), draw(st.sampled_from([1, 2, 4, 8])))
    return objs, quota


def _cards(p: dict[str, Any]) -> int:
    return int(p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tidal_worlds())
def test_no_card_quota_exceeded_and_no_training_job_left_below_min_available(world) -> None:
    objs, quota = world
    out = run(objs)
    evicted = set(out.evicted)
    placed = {**out.bound, **out.pipelined}
    pods = {f"ns/{o['metadata']['name']}": o for o in objs if o["kind"] == "Pod"}
    groups = {o["metadata"]["name"]: o for o in objs if o["kind"] == "PodGroup"}

    # No training job is left running below its minAvailable.
    for name, pg in groups.items():
        if pg["metadata"]["annotations"].get("volcano.sh/service.type") != "training":
            continue
        members = [k for k, p in pods.items() if p["metadata"]["annotations"].get("scheduling.k8s.io/group-name") == name]
        alive = [k for k in members if k not in evicted]
        assert not alive or len(alive) >= pg["spec"]["minMember"], (name, alive)
        # Evictions only ever come from training jobs, and only for a reclaimer.
    assert all(pods[k]["metadata"]["annotations"]["scheduling.k8s.io/group-name"].startswith("t") for k in evicted)

    # The inference queue stays within its H200 quota through this session's decisions.
    inference_cards = sum(_cards(pods[k]) for k in placed if k.split("/")[1].startswith("inf"))
    assert inference_cards <= quota

    # No node is over-committed once the evicted pods are gone.
    for n in {o["metadata"]["name"] for o in objs if o["kind"] == "Node"}:
        running = sum(_cards(p) for k, p in pods.items() if p["spec"].get("nodeName") == n and k not in evicted)
        new = sum(_cards(pods[k]) for k, where in placed.items() if where == n)
        assert running + new <= 8, n


# ------------------------------------------------------------------------------ no gang at stake


@st.composite
def gang_free_worlds(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Training jobs of minAvailable 1 only (any number of pods, so every pod is either the
    whole job or above its minimum), with random priorities, start and creation times."""
    n_nodes = draw(st.integers(1, 4))
    names = [f"n{i}" for i in range(n_nodes)]
    free = {n: 8 for n in names}
    objs: list[dict[str, Any]] = nodes(*names) + queues(draw(st.integers(0, 24)))
    for j in range(draw(st.integers(0, 7))):
        pods: list[tuple[str, int]] = []
        for _ in range(draw(st.integers(1, 3))):
            cards = draw(st.sampled_from([1, 2, 4, 8]))
            fits = [n for n in names if free[n] >= cards]
            if not fits:
                break
            where = draw(st.sampled_from(fits))
            free[where] -= cards
            pods.append((where, cards))
        if not pods:
            continue
        day = draw(st.integers(1, 9))
        job = training(f"t{j}", pods, 1, priority_class=draw(st.sampled_from([None, "low", "high"])),
                       started=f"2026-01-0{day}T00:00:00Z")
        for o in job[1:]:
            o["metadata"]["creationTimestamp"] = f"2026-01-01T0{draw(st.integers(0, 9))}:00:00Z"
        objs += job
    for j in range(draw(st.integers(1, 3))):
        objs += inference(f"inf{j}", draw(st.integers(1, 4)), draw(st.sampled_from([1, 2, 4, 8])))
    return objs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gang_free_worlds())
def test_without_a_gang_at_stake_the_decisions_are_volcanos(objs) -> None:
    """Issue 12 part 5: with ``victimOrder: volcano``, where every candidate victim is a job of
    one pod or a pod above its job's minAvailable, gang-safe reclaim evicts and places exactly
    as Volcano's per-pod reclaim (enableGangSafeReclaim: false) does. (With capacity-card the
    default is ``tidal``: DEC-8 ranks these too, see the tests below.)"""
    gang_safe = run(objs, tidal_config(victim_order="volcano")).to_json()
    volcano = run(objs, tidal_config(gang_safe=False)).to_json()
    assert gang_safe == volcano


# ------------------------------------------------------------------------------ per-job plans

_PRIORITY = {None: 0, "low": 100, "high": 10000}


@st.composite
def one_deployment_worlds(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Training gangs of any minAvailable and one inference Deployment of up to 5 replicas."""
    n_nodes = draw(st.integers(2, 5))
    names = [f"n{i}" for i in range(n_nodes)]
    free = {n: 8 for n in names}
    objs: list[dict[str, Any]] = nodes(*names) + queues(40)
    for j in range(draw(st.integers(1, 6))):
        pods: list[tuple[str, int]] = []
        for _ in range(draw(st.integers(1, 4))):
            cards = draw(st.sampled_from([2, 4, 8]))
            fits = [n for n in names if free[n] >= cards]
            if not fits:
                break
            where = draw(st.sampled_from(fits))
            free[where] -= cards
            pods.append((where, cards))
        if pods:
            objs += training(f"t{j}", pods, draw(st.integers(1, len(pods))),
                             priority_class=draw(st.sampled_from([None, "low", "high"])))
    objs += inference("chat", draw(st.integers(2, 5)), draw(st.sampled_from([2, 4, 8])))
    return objs


def _job_cost(objs: list[dict[str, Any]], out: Decisions) -> tuple:
    """(-pods placed, highest priority broken, jobs broken, pods evicted) from decisions."""
    groups = {o["metadata"]["name"]: o for o in objs if o["kind"] == "PodGroup"}
    running: dict[str, int] = {}
    for o in objs:
        if o["kind"] == "Pod" and o["spec"].get("nodeName"):
            g = o["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
            running[g] = running.get(g, 0) + 1
    evicted: dict[str, int] = {}
    for key in out.evicted:
        g = key.split("/")[1].rsplit("-", 1)[0]
        evicted[g] = evicted.get(g, 0) + 1
    broken = [g for g, n in evicted.items() if running[g] - n < max(groups[g]["spec"]["minMember"], 1)]
    priority = max((_PRIORITY[groups[g]["spec"].get("priorityClassName")] for g in broken), default=-1)
    return (-(len(out.pipelined) + len(out.bound)), priority, len(broken), len(out.evicted))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(one_deployment_worlds())
def test_a_deployment_plan_is_never_worse_than_planning_each_replica_alone(objs) -> None:
    """Issue 12 part 5: choosing victims for the reclaiming job places at least as many
    replicas as choosing them replica by replica, and costs no more in DEC-8's order."""
    per_job = run(objs)
    with patch.object(gang_reclaim, "ALTERNATIVES", 0):  # the cheapest plan per replica only
        per_task = run(objs)
    assert _job_cost(objs, per_job) <= _job_cost(objs, per_task)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(one_deployment_worlds())
def test_every_plan_makes_room_when_carried_out(objs) -> None:
    """A node's plan is only offered when its evictions there make the task fit: a job's
    pods above its minimum count once, whether or not the job is then broken."""
    ssn = open_session(build_snapshot(objs), config_from_text(tidal_config()))
    task = next(t for t in ssn.tasks.values() if t.name == "chat-0")
    job = ssn.jobs[task.job]
    table = ssn.table
    planner = GangVictims(ssn, task)
    for row in range(len(table)):
        victims = ssn.reclaimable(task, reclaimees(ssn, job, row))
        if not victims:
            continue
        plan = planner.plan(row, order_victims(ssn, victims, task))
        if plan is None:
            continue
        here = [t for t in plan.evictions(planner) if t.node_name == table.names[row]]
        room = table.future_idle[row] + sum(t.req_vec for t in here)
        assert table.fits_row(task, room), (table.names[row], plan.cost)
def test_reclaim_never_pipelines_onto_a_model_whose_quota_is_used_up() -> None:
    """Found by the chaos simulations (seed 11): an ``A|B`` reclaimer whose queue has B quota
    left but no B cards free was pipelined onto an A node with free cards although the queue's
    A quota was used up — Allocatable holds (B has room) and the quota predicate's failure on A
    nodes counts as resolvable, so nothing re-checked the node. Evicting other queues' pods
    never frees this queue's quota: the node must pass the predicates when the task is
    pipelined, in both reclaim modes."""
    a100 = "NVIDIA-A100"
    objs = [
        card_node("a100-1", a100, cards=2),
        card_node("h200-1", H200, cards=8),
        card_queue("q-inference", f'{{"{H200}":2,"{a100}":4}}', cpu=None, priority=80000, reclaimable=False),
        card_queue("q-training", f'{{"{H200}":1000}}', cpu=None, priority=20000, reclaimable=True),
        *training("train", [("h200-1", 2)], min_member=1),
    ]
    serving = podgroup("serving", 1, queue="q-inference", phase="Running")
    serving["metadata"]["annotations"] = {"volcano.sh/service.type": "inference"}
    objs += [
        serving,
        card_pod("serving-h200", H200, 2, group="serving", node_name="h200-1", phase="Running"),
        card_pod("serving-a100", a100, 2, group="serving", node_name="a100-1", phase="Running"),
        card_pod("serving-new", f"{H200}|{a100}", 1, group="serving"),
    ]
    for gang_safe in (True, False):
        d = run(objs, tidal_config(gang_safe=gang_safe))
        assert "ns/serving-new" not in d.pipelined and "ns/serving-new" not in d.bound, (gang_safe, d.to_json())
        assert not d.evicted
