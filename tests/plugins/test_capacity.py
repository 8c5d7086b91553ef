"""capacity plugin (CAP-1..3, seed 001): worked examples, hook rules, robustness, reasons."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from builders import node, pod, podgroup, queue

from tidesched.framework.plugin import PERMIT, REJECT
from tidesched.framework.statement import Statement
from tidesched.model.resource import Resource
from tidesched.model.snapshot import build_snapshot
from tidesched.model.status import TaskStatus
from tidesched.plugins.capacity import CapacityPlugin, inqueue_reservation
from tidesched.plugins.capacity_tree import QueueAttr, build_tree, compare_share, queue_level
from tidesched.scheduler import config_from_text, open_session, run_actions

GI = 1024**3


def config(hierarchy: bool = False, actions: str = "enqueue, allocate", args: str = "") -> str:
    extra = "    enableHierarchy: true\n" if hierarchy else ""
    if args:
        extra += f"    arguments: {{{args}}}\n"
    return f"""
actions: "{actions}"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: capacity
{extra}  - name: nodeorder
"""


def session(objs: list[dict[str, Any]], **kw: Any):
    ssn = open_session(build_snapshot(objs), config_from_text(config(**kw)))
    return ssn, ssn.plugins["capacity"]


def res(cpu: float = 0, mem_gi: float = 0, **scalars: float) -> Resource:
    return Resource(cpu * 1000, mem_gi * GI, {k.replace("_", "/"): v * 1000 for k, v in scalars.items()})


def q(name: str, parent: str | None = None, deserved: tuple | None = None, cap: tuple | None = None,
      guarantee: tuple | None = None, **spec: Any) -> dict[str, Any]:
    def rl(t: tuple) -> dict[str, str]:
        out = {"cpu": str(t[0])}
        if len(t) > 1 and t[1] is not None:
            out["memory"] = f"{t[1]}Gi"
        return out

    if parent is not None:
        spec["parent"] = parent
    if deserved is not None:
        spec["deserved"] = rl(deserved)
    if cap is not None:
        spec["capability"] = rl(cap)
    if guarantee is not None:
        spec["guarantee"] = {"resource": rl(guarantee)}
    return queue(name, **spec)


def running(name: str, queue_name: str, cpu: float, node_name: str, mem: str = "1Gi", **kw: Any) -> list[dict[str, Any]]:
    return [podgroup(name, queue=queue_name, phase="Running", **kw),
            pod(name, group=name, cpu=str(cpu), memory=mem, node=node_name, phase="Running")]


def pending(name: str, queue_name: str, cpu: float, mem: str = "1Gi", phase: str = "Inqueue",
            min_resources: dict | None = None, **kw: Any) -> list[dict[str, Any]]:
    return [podgroup(name, queue=queue_name, phase=phase, min_resources=min_resources, **kw),
            pod(name, group=name, cpu=str(cpu), memory=mem)]


def events(decisions_or_ssn: Any, kind: str | None = None, name: str | None = None) -> list[Any]:
    evs = decisions_or_ssn.events
    return [e for e in evs if (kind is None or e.kind == kind) and (name is None or e.name == name)]


# ------------------------------------------------------------------------------------------
# Seed 001 §7: the hierarchical example (cluster 100 CPU, 400Gi)

def seed_tree(extra_running: list[tuple[str, float, str]] = ()) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        q("root", deserved=(100, 400)),
        q("team-a", "root", (60, 240), (70, 300), (20, 80)),
        q("team-b", "root", (40, 160), (50, 200), (20, 80)),
        q("training", "team-a", (40, 160), (50, 200), (10, 40)),
        q("inference", "team-a", (20, 80), (30, 120), (10, 40)),
        q("batch", "team-b", (30, 120), (40, 160), (15, 60)),
        q("interactive", "team-b", (10, 40), (20, 80), (5, 20)),
    ]
    objs += [node(f"n{i}", cpu="10", memory="40Gi") for i in range(10)]
    usage = [("training", 10, "n0"), ("training", 10, "n1"), ("training", 10, "n2"),
             ("inference", 10, "n3"), ("inference", 5, "n4"),
             ("batch", 10, "n5"), ("batch", 10, "n6"), ("interactive", 10, "n7"), *extra_running]
    for k, (qn, cpu, n) in enumerate(usage):
        objs += running(f"r{k}", qn, cpu, n)
    return objs


def test_seed_7_2_allocation_table() -> None:
    """training 30→40 CPU (share 1.0), team-a 45→55 (0.917), root 75→85 (0.85)."""
    ssn, cap = session(seed_tree() + pending("new", "training", 10), hierarchy=True)
    a = cap.attrs
    assert [a[n].allocated.milli_cpu / 1000 for n in ("training", "team-a", "root")] == [30, 45, 75]
    decisions = run_actions(ssn)
    assert decisions.bound == {"ns/new": "n8"}
    assert [a[n].allocated.milli_cpu / 1000 for n in ("training", "team-a", "root")] == [40, 55, 85]
    assert a["training"].share == pytest.approx(1.0)
    assert a["team-a"].share == pytest.approx(55 / 60)
    assert round(a["team-a"].share, 3) == 0.917
    assert a["root"].share == pytest.approx(0.85)
    # The deltas reached every ancestor and nothing else.
    assert a["team-b"].allocated.milli_cpu == 30_000
    assert a["inference"].allocated.milli_cpu == 15_000


def test_seed_7_3_order_at_lowest_common_ancestor() -> None:
    """batch goes before training: team-b's share 0.75 < team-a's 0.917 (compared at level 1)."""
    ssn, cap = session(seed_tree([("training", 10, "n8")]), hierarchy=True)
    a = cap.attrs
    assert a["team-a"].share == pytest.approx(0.9167, abs=1e-4)
    assert a["team-b"].share == pytest.approx(0.75)
    assert a["training"].ancestors == ["root", "team-a"] and a["batch"].ancestors == ["root", "team-b"]
    assert queue_level(a["training"], a["batch"]) == 0
    qs = ssn.queues
    assert ssn.queue_order_less(qs["batch"], qs["training"])
    assert not ssn.queue_order_less(qs["training"], qs["batch"])
    # interactive's own share (1.0) is above inference's (0.75), but team-b still goes first.
    assert a["interactive"].share == pytest.approx(1.0) and a["inference"].share == pytest.approx(0.75)
    assert ssn.queue_order_less(qs["interactive"], qs["inference"])
    # Siblings compare their own shares.
    assert ssn.queue_order_less(qs["inference"], qs["training"])


def test_seed_7_1_limits_of_the_tree() -> None:
    _ssn, cap = session(seed_tree(), hierarchy=True)
    a = cap.attrs
    # root: capability and deserved from the cluster, guarantee = its children's sum.
    assert a["root"].real_capability.milli_cpu == 100_000
    assert a["root"].guarantee.milli_cpu == 40_000
    # team-a: min(70, 100 − 40 + 20) = 70; training: min(50, 70 − 20 + 10) = 50.
    assert a["team-a"].real_capability.milli_cpu == 70_000
    assert a["training"].real_capability.milli_cpu == 50_000
    assert a["batch"].real_capability.milli_cpu == 40_000  # min(40, 50 − 20 + 15)
    assert not events(_ssn, "Queue")  # a consistent tree raises no warning


def test_hierarchical_leaf_before_inner_queue_and_inner_by_share() -> None:
    ssn, _cap = session(seed_tree(), hierarchy=True)
    qs = ssn.queues
    assert ssn.queue_order_less(qs["training"], qs["team-a"])
    assert not ssn.queue_order_less(qs["team-a"], qs["training"])


# ------------------------------------------------------------------------------------------
# Seed §4.1: share semantics

@pytest.mark.parametrize(
    ("deserved", "allocated", "share"),
    [
        (Resource(), res(5, 5), 1.0),          # best effort: fixed at 1
        (Resource(), Resource(), 1.0),
        (res(4, 4), Resource(), 0.0),          # deserved, nothing allocated
        (res(4, 4), res(1, 3), 0.75),          # dominant dimension
        (res(4, 4), res(4, 4), 1.0),           # exactly used up
        (res(4, 4), res(6, 1), 1.5),           # overused
        (res(0, 0, nvidia_gpu=2), res(8, 8, nvidia_gpu=1), 0.5),  # only deserved dimensions count
    ],
)
def test_seed_4_1_share_table(deserved: Resource, allocated: Resource, share: float) -> None:
    attr = QueueAttr("q", None)
    attr.deserved = deserved
    attr.allocated = allocated
    attr.freeze_deserved()
    attr.update_share()
    assert attr.share == pytest.approx(share)


def test_seed_4_2_ties_prefer_queue_with_deserved() -> None:
    full, best_effort, half = (QueueAttr(n, None) for n in ("full", "be", "half"))
    full.deserved, full.allocated = res(2, 2), res(2, 2)
    half.deserved, half.allocated = res(2, 2), res(1, 1)
    for a in (full, best_effort, half):
        a.freeze_deserved()
        a.update_share()
    assert full.share == best_effort.share == 1.0
    assert compare_share(full, best_effort) == -1 and compare_share(best_effort, full) == 1
    assert compare_share(half, best_effort) == -1 and compare_share(half, full) == -1
    assert compare_share(best_effort, best_effort) == 0


def test_flat_queue_order_priority_then_share_then_deserved() -> None:
    objs = [node("n1", cpu="8", memory="16Gi"),
            q("full", deserved=(2, 2)), q("be"), q("low", deserved=(4, 4)), q("vip", deserved=(1, 1), priority=5)]
    objs += running("r1", "full", 2, "n1", mem="2Gi") + running("r2", "be", 1, "n1") + running("r3", "low", 1, "n1")
    objs += running("r4", "vip", 1, "n1", mem="1Gi")
    ssn, _cap = session(objs)
    qs = ssn.queues
    order = sorted(qs.values(), key=lambda x: x.name)
    def cmp(left: Any, right: Any) -> int:
        if ssn.queue_order_less(left, right):
            return -1
        return 1 if ssn.queue_order_less(right, left) else 0

    ranked = sorted(order, key=functools.cmp_to_key(cmp))
    names = [x.name for x in ranked if x.name != "default"]
    assert names == ["vip", "low", "full", "be"]


# ------------------------------------------------------------------------------------------
# CAP-1: flat attributes

def test_flat_real_capability_and_deserved_clamp() -> None:
    objs = [node("n1", cpu="10", memory="20Gi"),
            q("gold", deserved=(8, 8), cap=(8, 8), guarantee=(6, 6)),
            q("silver", deserved=(9, 2), cap=(8, 8)),
            q("bronze", deserved=(1, 1), guarantee=(2, 1))]
    _ssn, cap = session(objs)
    a = cap.attrs
    # Σguarantee = 8 CPU, 7Gi → what is left for the others is 2 CPU, 13Gi.
    assert a["silver"].real_capability.milli_cpu == 2000        # min(8, 10 − 8 + 0): seed Q3
    assert a["silver"].real_capability.memory == 8 * GI        # min(8Gi, 20 − 7 + 0)
    assert a["silver"].deserved.milli_cpu == 2000              # deserved clamped down to realCapability
    assert a["gold"].real_capability.milli_cpu == 8000         # min(8, 2 + 6)
    assert a["bronze"].deserved.milli_cpu == 2000              # deserved raised to the guarantee
    assert a["bronze"].real_capability.milli_cpu == 4000       # no capability: 2 + 2
    for attr in a.values():
        assert attr.real_capability.less_equal(attr.capability) or not attr.info.queue.capability_set


def test_flat_capability_zero_cpu_means_unlimited() -> None:
    objs = [node("n1", cpu="4", memory="8Gi"),
            queue("gpuonly", capability={"cpu": "0", "nvidia.com/gpu": "1"})]
    objs += pending("p", "gpuonly", 3)
    ssn, cap = session(objs)
    assert cap.attrs["gpuonly"].real_capability.milli_cpu == 4000  # the cluster, not 0
    assert run_actions(ssn).bound == {"ns/p": "n1"}


def test_inqueue_and_elastic_accounting() -> None:
    objs = [node("n1", cpu="16", memory="64Gi"), q("qa")]
    # Inqueue job with 1 of its 3 CPUs allocated reserves the other 2.
    objs += [podgroup("inq", queue="qa", phase="Inqueue", min_member=2, min_resources={"cpu": "3"}),
             pod("inq-0", "inq", cpu="1", node="n1", phase="Running"), pod("inq-1", "inq", cpu="2")]
    # Running job at minMember with minResources above its usage reserves the rest.
    objs += [podgroup("run", queue="qa", phase="Running", min_member=1, min_resources={"cpu": "4"}),
             pod("run-0", "run", cpu="1", node="n1", phase="Running")]
    # Running job below minMember reserves nothing; its elastic is what exceeds minResources.
    objs += [podgroup("big", queue="qa", phase="Running", min_member=3, min_resources={"cpu": "1"}),
             pod("big-0", "big", cpu="2", node="n1", phase="Running"), pod("big-1", "big", cpu="1")]
    _ssn, cap = session(objs)
    a = cap.attrs["qa"]
    assert a.inqueue.milli_cpu == 2000 + 3000
    assert a.elastic.milli_cpu == 1000  # big: 2 allocated − 1 min
    assert a.allocated.milli_cpu == 4000
    assert a.request.milli_cpu == 4000 + 2000 + 1000  # allocated + pending


def test_inqueue_reservation_rules() -> None:
    r = inqueue_reservation(res(4, 2, nvidia_gpu=2), res(1, 4))
    assert r.milli_cpu == 3000 and r.memory == 0 and r.scalars == {"nvidia/gpu": 2000}


# ------------------------------------------------------------------------------------------
# CAP-3: allocatable, enqueueable, preemptive, reclaimable

def test_allocatable_refusal_event_names_queue_resource_amounts() -> None:
    objs = [node("n1", cpu="8", memory="16Gi"), q("team-a", cap=(4, 8))]
    objs += running("r", "team-a", 4, "n1")
    objs += pending("p", "team-a", 2)
    decisions = run_actions(session(objs)[0])
    assert decisions.bound == {}
    [ev] = [e for e in events(decisions, "Pod", "p") if e.reason == "InsufficientQuota"]
    assert ev.type == "Warning"
    assert ev.message == "Queue <team-a> has insufficient <cpu> quota: requested 2, total would be 6, but capability is 4"


def test_ancestor_limit_blocks_with_named_ancestor() -> None:
    objs = [node("n1", cpu="16", memory="32Gi"), q("root"), q("org", "root", cap=(4, 16)),
            q("leaf1", "org"), q("leaf2", "org")]
    objs += running("r", "leaf1", 3, "n1") + pending("p", "leaf2", 2)
    decisions = run_actions(session(objs, hierarchy=True)[0])
    assert decisions.bound == {}
    msgs = [e.message for e in events(decisions, "Pod", "p") if e.reason == "InsufficientQuota"]
    assert msgs == [("Queue <org> (ancestor of <leaf2>) has insufficient <cpu> quota: requested 2, "
                    "total would be 5, but capability is 4")]


def test_effective_limit_is_explained_when_below_configured_capability() -> None:
    objs = [node("n1", cpu="10", memory="40Gi"), q("held", guarantee=(6, 1)), q("q2", cap=(8, 16))]
    objs += running("r", "q2", 3, "n1") + pending("p", "q2", 2)
    decisions = run_actions(session(objs)[0])
    [msg] = [e.message for e in events(decisions, "Pod", "p") if e.reason == "InsufficientQuota"]
    assert msg == ("Queue <q2> has insufficient <cpu> quota: requested 2, total would be 5, but capability is 4 "
                   "(effective limit; configured 8)")


def test_memory_reason_in_natural_units() -> None:
    objs = [node("n1", cpu="8", memory="64Gi"), q("m", cap=(8, 4))]
    objs += running("r", "m", 1, "n1", mem="3Gi") + pending("p", "m", 1, mem="2Gi")
    decisions = run_actions(session(objs)[0])
    [msg] = [e.message for e in events(decisions, "Pod", "p") if e.reason == "InsufficientQuota"]
    assert msg == "Queue <m> has insufficient <memory> quota: requested 2Gi, total would be 5Gi, but capability is 4Gi"


def test_one_event_per_pod_per_session_and_none_when_placed() -> None:
    objs = [node("n1", cpu="8", memory="16Gi"), q("qa", cap=(2, 16))]
    objs += pending("p", "qa", 3)
    ssn, _cap = session(objs)
    task = ssn.tasks["ns/p"]
    queue_info = ssn.queues["qa"]
    assert not ssn.allocatable(queue_info, task)
    assert not ssn.allocatable(queue_info, task)
    decisions = run_actions(ssn)
    assert len([e for e in events(decisions, "Pod", "p") if e.reason == "InsufficientQuota"]) == 1
    # A pod that ends placed gets no quota event even if refused earlier in the session.
    objs2 = [node("n1", cpu="8", memory="16Gi"), q("qa", cap=(4, 16))] + pending("p", "qa", 3)
    ssn2, _ = session(objs2)
    ssn2.plugins["capacity"]._pod_reasons["ns/p"] = (ssn2.tasks["ns/p"], "InsufficientQuota", "stale")
    d2 = run_actions(ssn2)
    assert d2.bound == {"ns/p": "n1"}
    assert not [e for e in events(d2, "Pod", "p") if e.reason == "InsufficientQuota"]


def test_enqueue_counts_allocated_inqueue_and_elastic_then_reserves() -> None:
    objs = [node("n1", cpu="16", memory="32Gi"), q("qa", cap=(6, 32))]
    objs += running("r", "qa", 2, "n1", min_resources={"cpu": "2"})  # at its minimum: no reservation, no elastic
    objs += [podgroup("j1", queue="qa", phase="Pending", min_resources={"cpu": "3"}),
             podgroup("j2", queue="qa", phase="Pending", min_resources={"cpu": "2"})]
    ssn, cap = session(objs)
    j1, j2 = ssn.jobs["ns/j1"], ssn.jobs["ns/j2"]
    assert ssn.job_enqueueable(j1)
    ssn.job_enqueued(j1)
    assert cap.attrs["qa"].inqueue.milli_cpu == 3000
    assert not ssn.job_enqueueable(j2)  # 2 + 2 + 3 = 7 > 6
    assert cap._job_reasons["ns/j2"][2] == (
        "Queue <qa> has insufficient <cpu> quota: requested 2, total would be 7, but capability is 6")


def test_job_without_min_resources_is_all_elastic() -> None:
    """As Volcano: elastic = ExceededPart(allocated, minResources), so a job without
    minResources does not hold back later admissions."""
    objs = [node("n1", cpu="16", memory="32Gi"), q("qa", cap=(6, 32))]
    objs += running("r", "qa", 5, "n1")
    objs += [podgroup("j", queue="qa", phase="Pending", min_resources={"cpu": "6"})]
    ssn, cap = session(objs)
    assert cap.attrs["qa"].elastic.milli_cpu == 5000
    assert ssn.job_enqueueable(ssn.jobs["ns/j"])


def test_enqueue_elastic_is_deducted() -> None:
    objs = [node("n1", cpu="16", memory="32Gi"), q("qa", cap=(6, 32))]
    objs += [podgroup("el", queue="qa", phase="Running", min_member=1, min_resources={"cpu": "1"}),
             pod("el-0", "el", cpu="3", node="n1", phase="Running"), pod("el-1", "el", cpu="2", node="n1", phase="Running")]
    objs += [podgroup("j", queue="qa", phase="Pending", min_resources={"cpu": "5"})]
    ssn, cap = session(objs)
    a = cap.attrs["qa"]
    assert a.allocated.milli_cpu == 5000 and a.elastic.milli_cpu == 4000 and a.inqueue.milli_cpu == 0
    assert ssn.job_enqueueable(ssn.jobs["ns/j"])  # 5 + 5 + 0 − 4 = 6 ≤ 6


def test_job_enqueued_updates_every_ancestor() -> None:
    objs = [node("n1", cpu="16", memory="32Gi"), q("root"), q("org", "root"), q("leaf", "org"),
            podgroup("j", queue="leaf", phase="Pending", min_resources={"cpu": "3", "memory": "1Gi"})]
    ssn, cap = session(objs, hierarchy=True)
    decisions = run_actions(ssn)
    assert decisions.podgroups["ns/j"] == "Inqueue"
    for name in ("leaf", "org", "root"):
        assert cap.attrs[name].inqueue.milli_cpu == 3000


def test_preemptive_any_one_dimension_within_deserved() -> None:
    """Seed Q4: a queue over deserved on CPU but under on GPU may still reclaim for a GPU task."""
    objs = [node("n1", cpu="16", memory="64Gi", nvidia_com__gpu="8"),
            queue("qa", deserved={"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "4"})]
    objs += [podgroup("r", queue="qa", phase="Running"),
             pod("r", "r", cpu="4", memory="1Gi", node="n1", phase="Running", extra_requests={"nvidia.com/gpu": "1"})]
    objs += [podgroup("p", queue="qa", phase="Inqueue"),
             pod("p", "p", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu": "1"})]
    objs += [podgroup("c", queue="qa", phase="Inqueue"), pod("c", "c", cpu="1", memory="1Gi")]
    ssn, _cap = session(objs)
    qa = ssn.queues["qa"]
    assert ssn.preemptive(qa, ssn.tasks["ns/p"])        # cpu 5 > 2, but gpu 2 ≤ 4 (and memory)
    assert ssn.preemptive(qa, ssn.tasks["ns/c"])        # memory 2Gi ≤ 4Gi
    objs[1] = queue("qa", deserved={"cpu": "2", "nvidia.com/gpu": "4"})
    ssn2, _ = session(objs)
    assert not ssn2.preemptive(ssn2.queues["qa"], ssn2.tasks["ns/c"])  # only cpu requested-and-deserved: 5 > 2


def test_preemptive_refuses_best_effort_closed_and_over_capability() -> None:
    objs = [node("n1", cpu="8", memory="16Gi"), q("be"), q("closed", deserved=(4, 4)),
            q("capped", deserved=(8, 8), cap=(2, 8))]
    objs[2]["status"] = {"state": "Closed"}
    objs += pending("p1", "be", 1) + pending("p2", "closed", 1) + pending("p3", "capped", 3)
    ssn, _ = session(objs)
    for qn, t in (("be", "p1"), ("closed", "p2"), ("capped", "p3")):
        assert not ssn.preemptive(ssn.queues[qn], ssn.tasks[f"ns/{t}"])


def _reclaim_setup(**victim_queue: Any) -> tuple[Any, CapacityPlugin]:
    objs = [node("n1", cpu="16", memory="64Gi", nvidia_com__gpu="4"),
            q("asker", deserved=(8, 32)), queue("victims", **victim_queue)]
    objs += pending("ask", "asker", 2, mem="2Gi")
    objs += [podgroup("v", queue="victims", phase="Running", min_member=1),
             pod("v-1", "v", cpu="3", memory="2Gi", node="n1", phase="Running"),
             pod("v-2", "v", cpu="3", memory="2Gi", node="n1", phase="Running"),
             pod("v-3", "v", cpu="3", memory="2Gi", node="n1", phase="Running"),
             pod("v-gpu", "v", cpu=None, memory=None, node="n1", phase="Running", extra_requests={"nvidia.com/gpu": "1"})]
    return session(objs, actions="allocate")


def _victims(ssn: Any, names: list[str]) -> list[str]:
    cands = [ssn.tasks[f"ns/{n}"] for n in names]
    chosen, vote = ssn.plugins["capacity"]._reclaimable(ssn.tasks["ns/ask"], cands)
    assert vote == PERMIT
    return sorted(t.name for t in chosen)


def test_reclaimable_takes_victims_only_while_over_deserved() -> None:
    ssn, _ = _reclaim_setup(deserved={"cpu": "5", "memory": "32Gi"})
    # 9 CPU allocated, deserved 5: the first victim leaves 6 (> 5) so the second may go too, then 3.
    assert _victims(ssn, ["v-1", "v-2", "v-3"]) == ["v-2", "v-3"]


def test_reclaimable_skips_victims_without_shared_dimension() -> None:
    ssn, _ = _reclaim_setup(deserved={"cpu": "1", "memory": "1Gi"})
    assert _victims(ssn, ["v-gpu"]) == []          # the reclaimer asks no GPU


def test_reclaimable_immediate_victim_when_deserved_does_not_cover_it() -> None:
    """Seed Q1: a best-effort queue's tasks are immediate victims."""
    ssn, _ = _reclaim_setup()
    assert _victims(ssn, ["v-1", "v-2", "v-3"]) == ["v-1", "v-2", "v-3"]


def test_reclaimable_never_breaks_the_guarantee() -> None:
    ssn, _ = _reclaim_setup(deserved={"cpu": "1", "memory": "1Gi"}, guarantee={"resource": {"cpu": "5"}})
    # 9 allocated, guarantee 5: one 3-CPU victim leaves 6, a second would leave 3 < 5.
    assert len(_victims(ssn, ["v-1", "v-2", "v-3"])) == 1


def test_reclaimable_guarantee_on_an_unused_dimension_does_not_lock_the_queue() -> None:
    ssn, _ = _reclaim_setup(deserved={"cpu": "1"}, guarantee={"resource": {"nvidia.com/gpu": "4"}})
    assert len(_victims(ssn, ["v-1", "v-2", "v-3"])) == 3


def test_victim_queue_order_prefers_closest_queue() -> None:
    objs = [node("n1", cpu="16", memory="64Gi"), q("root"), q("a", "root"), q("a1", "a"), q("a2", "a"),
            q("b", "root"), q("b1", "b")]
    ssn, _cap = session(objs, hierarchy=True)
    qs = ssn.queues
    assert ssn.victim_queue_order_less(qs["a2"], qs["b1"], qs["a1"])
    assert not ssn.victim_queue_order_less(qs["b1"], qs["a2"], qs["a1"])


def test_reclaim_victims_in_sibling_queue_come_first() -> None:
    objs = [node("n1", cpu="16", memory="64Gi"), q("root"), q("a", "root"), q("a1", "a", deserved=(4, 4)),
            q("a2", "a"), q("b", "root"), q("b1", "b")]
    objs += pending("ask", "a1", 1)
    objs += running("x", "b1", 1, "n1") + running("y", "a2", 1, "n1")
    ssn, cap = session(objs, hierarchy=True)
    order = cap._victim_order(ssn.tasks["ns/ask"], [ssn.tasks["ns/x"], ssn.tasks["ns/y"]])
    assert [t.name for t in order] == ["y", "x"]


def test_ancestor_reclaim_level_checks_the_victims_parent() -> None:
    objs = [q("root"), queue("pa", parent="root", deserved={"cpu": "1"}), queue("qa", parent="pa", deserved={"cpu": "1"}),
            queue("pb", parent="root", deserved={"cpu": "3"}), queue("qb", parent="pb", deserved={"cpu": "1"})]
    objs += [node(f"n{i}", cpu="1", memory="4Gi") for i in range(4)]
    objs += [podgroup("ask", queue="qa", phase="Inqueue"), pod("ask", "ask", cpu="1", memory=None)]
    objs += [podgroup("vb", queue="qb", phase="Running", min_member=1)]
    objs += [pod(f"v{i}", "vb", cpu="1", memory=None, node=f"n{i}", phase="Running") for i in range(4)]
    for level, want in ((0, 3), (1, 1)):
        ssn, cap = session(objs, hierarchy=True, args=f"ancestorReclaimLevel: {level}")
        cands = [ssn.tasks[f"ns/v{i}"] for i in range(4)]
        chosen, _ = cap._reclaimable(ssn.tasks["ns/ask"], cands)
        assert len(chosen) == want, level


def test_bad_ancestor_reclaim_level_is_reported_not_fatal() -> None:
    objs = [node("n1"), q("root"), q("a", "root")]
    for args, text in (("ancestorReclaimLevel: -2", "must not be negative"), ("ancestorReclaimLevel: 'x'", "integer")):
        ssn, cap = session(objs, hierarchy=True, args=args)
        assert cap.ancestor_level == 0
        assert any(e.reason == "InvalidArgument" and text in e.message for e in ssn.events)


# ------------------------------------------------------------------------------------------
# Simulate hooks and event handlers

def test_simulate_hooks_work_on_a_copy() -> None:
    objs = [node("n1", cpu="8", memory="16Gi"), q("qa", cap=(4, 16))]
    objs += running("r", "qa", 3, "n1") + pending("p", "qa", 2)
    ssn, cap = session(objs)
    task, victim, qa = ssn.tasks["ns/p"], ssn.tasks["ns/r"], ssn.queues["qa"]
    state = ssn.simulate_state(task)
    assert not ssn.simulate_allocatable(state, qa, task)
    ssn.simulate_remove_task(state, task, victim, 0)
    assert ssn.simulate_allocatable(state, qa, task)
    ssn.simulate_add_task(state, task, task, 0)
    ssn.simulate_add_task(state, task, victim, 0)
    assert not ssn.simulate_allocatable(state, qa, task)
    assert cap.attrs["qa"].allocated.milli_cpu == 3000  # the real state never moved
    assert ssn.simulate_allocatable(ssn.simulate_state(victim), qa, ssn.tasks["ns/r"]) is False


def test_event_handlers_follow_statements_and_discard() -> None:
    ssn, cap = session(seed_tree() + pending("new", "training", 10), hierarchy=True)
    task = ssn.tasks["ns/new"]
    victim = ssn.tasks["ns/r0"]
    stmt = Statement(ssn)
    stmt.pipeline(task, "n8")
    stmt.evict(victim, "test")
    a = cap.attrs
    assert [a[n].allocated.milli_cpu for n in ("training", "team-a", "root")] == [30_000, 45_000, 75_000]
    stmt.discard()
    assert [a[n].allocated.milli_cpu for n in ("training", "team-a", "root")] == [30_000, 45_000, 75_000]
    stmt.allocate(task, "n8")
    assert a["root"].allocated.milli_cpu == 85_000 and a["root"].share == pytest.approx(0.85)
    assert task.status == TaskStatus.ALLOCATED


# ------------------------------------------------------------------------------------------
# CAP-2: the tree

def test_capability_inheritance_for_unset_dimensions() -> None:
    """Seed Q2: unset cpu/memory/scalar dimensions come from the parent."""
    objs = [node("n1", cpu="32", memory="64Gi", nvidia_com__gpu="8"), q("root"),
            queue("org", parent="root", capability={"cpu": "8", "nvidia.com/gpu": "2"}),
            queue("leaf", parent="org", capability={"memory": "4Gi"})]
    _ssn, cap = session(objs, hierarchy=True)
    leaf = cap.attrs["leaf"]
    assert leaf.capability.milli_cpu == 8000
    assert leaf.capability.memory == 4 * GI
    assert leaf.capability.scalars["nvidia.com/gpu"] == 2000
    assert cap.attrs["org"].capability.memory == 64 * GI  # root's, i.e. the cluster


def test_child_capability_above_parent_warns_and_parent_limits() -> None:
    objs = [node("n1", cpu="32", memory="64Gi"), q("root"), q("org", "root", cap=(4, 64)),
            q("leaf", "org", cap=(10, 8))]
    objs += pending("p", "leaf", 5)
    ssn, cap = session(objs, hierarchy=True)
    [w] = [e for e in events(ssn, "Queue", "leaf") if e.reason == "CapabilityExceedsParent"]
    assert w.type == "Warning" and "capability cpu 10 is above the capability of parent queue org (cpu 4)" in w.message
    assert cap.attrs["leaf"].real_capability.milli_cpu == 4000
    assert run_actions(ssn).bound == {}


def test_children_deserved_and_guarantee_above_parent_warn() -> None:
    objs = [node("n1", cpu="10", memory="64Gi"), q("root"),
            q("org", "root", deserved=(4, 8), guarantee=(2, 1)),
            q("c1", "org", deserved=(3, 1), guarantee=(2, 1)), q("c2", "org", deserved=(3, 1), guarantee=(1, 0))]
    ssn, _ = session(objs, hierarchy=True)
    reasons = {(e.name, e.reason) for e in events(ssn, "Queue")}
    assert ("org", "ChildrenDeservedExceedParent") in reasons
    assert ("org", "ChildrenGuaranteeExceedParent") in reasons


def test_cycle_is_reported_and_other_queues_keep_working() -> None:
    objs = [node("n1", cpu="8", memory="16Gi"), q("root"), q("a", "b"), q("b", "a"), q("c", "a"), q("ok", "root")]
    objs += pending("in-cycle", "c", 1) + pending("fine", "ok", 1)
    ssn, cap = session(objs, hierarchy=True)
    cyc = [e for e in events(ssn, "Queue") if e.reason == "QueueHierarchyCycle"]
    assert {e.name for e in cyc} == {"a", "b"}
    assert "a -> b -> a" in cyc[0].message
    decisions = run_actions(ssn)
    assert decisions.bound == {"ns/fine": "n1"}
    [ev] = [e for e in events(decisions, "Pod", "in-cycle") if e.reason == "QueueHierarchyInvalid"]
    assert "cycle" in ev.message
    assert cap.attrs["c"].ancestors[0] == "root"


def test_self_parent_is_a_cycle() -> None:
    objs = [node("n1"), q("root"), q("loop", "loop")]
    ssn, cap = session(objs, hierarchy=True)
    assert cap.attrs["loop"].broken and any(e.reason == "QueueHierarchyCycle" for e in ssn.events)


def test_missing_parent_is_reported_and_refused() -> None:
    objs = [node("n1", cpu="8", memory="16Gi"), q("root"), q("orphan", "nowhere")]
    objs += pending("p", "orphan", 1)
    ssn, cap = session(objs, hierarchy=True)
    [w] = [e for e in events(ssn, "Queue", "orphan") if e.reason == "QueueParentNotFound"]
    assert "parent queue nowhere of queue orphan does not exist" in w.message
    decisions = run_actions(ssn)
    assert decisions.bound == {}
    assert any(e.reason == "QueueHierarchyInvalid" and "nowhere does not exist" in e.message
               for e in events(decisions, "Pod", "p"))
    # Its running usage still counts at the root.
    assert cap.attrs["orphan"].ancestors == ["root"]


def test_missing_root_uses_an_implicit_root() -> None:
    objs = [node("n1", cpu="8", memory="16Gi"), q("top", cap=(4, 8)), q("leaf", "top")]
    objs += running("r", "leaf", 1, "n1") + pending("p", "leaf", 2)
    ssn, cap = session(objs, hierarchy=True)
    [w] = [e for e in events(ssn, "Queue", "root") if e.reason == "RootQueueMissing"]
    assert w.type == "Warning" and "default, top" in w.message
    assert cap.attrs["root"].allocated.milli_cpu == 1000
    assert run_actions(ssn).bound == {"ns/p": "n1"}


def test_job_in_inner_queue_is_refused_but_others_run() -> None:
    """Seed Q5 (Volcano stops the whole session here; we refuse only that job)."""
    objs = [node("n1", cpu="8", memory="16Gi"), q("root"), q("team", "root"), q("leaf", "team")]
    objs += pending("inner", "team", 1, phase="Pending", min_resources={"cpu": "1"}) + pending("ok", "leaf", 1)
    decisions = run_actions(session(objs, hierarchy=True)[0])
    assert decisions.bound == {"ns/ok": "n1"}
    assert decisions.podgroups["ns/inner"] == "Pending"
    [ev] = [e for e in events(decisions, "PodGroup", "inner") if e.reason == "QueueNotLeaf"]
    assert ev.message.startswith("Queue <team> is not a leaf queue (children: leaf)")


def test_tree_builder_handles_deep_chains_without_recursion() -> None:
    parents = {f"q{i}": (f"q{i - 1}" if i else "root") for i in range(3000)}
    parents["root"] = ""
    tree = build_tree(parents, {})
    assert len(tree.attrs["q2999"].ancestors) == 3000
    assert not tree.problems


# ------------------------------------------------------------------------------------------
# Robustness (Volcano #3127, #3929, #4261, #4104, #4673)

def test_guarantees_above_cluster_flat_warn_and_schedule() -> None:
    """#3127/#3929/#4261: Σguarantee > cluster crashed Volcano; here the session goes on."""
    objs = [node("n1", cpu="4", memory="8Gi"), q("g1", guarantee=(3, 1)), q("g2", guarantee=(3, 1)), q("none")]
    objs += pending("p", "g1", 1)
    ssn, cap = session(objs)
    warned = {e.name for e in events(ssn, "Queue") if e.reason == "GuaranteeExceedsCluster"}
    assert warned == {"g1", "g2"}
    msg = next(e.message for e in events(ssn, "Queue", "g1"))
    assert "add up to cpu 6 but the cluster has cpu 4" in msg
    assert cap.attrs["none"].real_capability.milli_cpu == 0  # nothing left beyond the guarantees
    assert cap.attrs["g1"].real_capability.milli_cpu == 3000
    assert run_actions(ssn).bound == {"ns/p": "n1"}


def test_no_nodes_at_all() -> None:
    objs = [q("qa", deserved=(2, 2), guarantee=(1, 1))] + pending("p", "qa", 1)
    ssn, _cap = session(objs)
    decisions = run_actions(ssn)
    assert decisions.bound == {}
    objs_h = [q("root"), q("qa", "root", deserved=(2, 2), guarantee=(1, 1))] + pending("p", "qa", 1)
    ssn2, _ = session(objs_h, hierarchy=True)
    assert run_actions(ssn2).bound == {}


def test_children_guarantee_above_parent_capability_4104() -> None:
    objs = [node("n1", cpu="8", memory="8Gi"), q("root"), q("q7", "root", cap=(6, 4)),
            q("q71", "q7", cap=(6, 4), guarantee=(4, 3)), q("q72", "q7", cap=(6, 4), guarantee=(4, 3))]
    objs += pending("p", "q71", 1)
    ssn, cap = session(objs, hierarchy=True)
    assert any(e.reason == "GuaranteeExceedsCapacity" and e.name == "q7" for e in ssn.events)
    assert cap.attrs["q71"].real_capability.milli_cpu == 4000  # ExceededPart(6, 8) + 4, never negative
    assert run_actions(ssn).bound == {"ns/p": "n1"}


def test_cluster_shrunk_below_children_capabilities() -> None:
    objs = [node("n1", cpu="4", memory="8Gi"), q("root"), q("a", "root", cap=(6, 8)), q("b", "a")]
    objs += running("r", "b", 3, "n1") + pending("p", "b", 2)
    ssn, _cap = session(objs, hierarchy=True)
    assert any(e.reason == "CapabilityExceedsParent" and e.name == "a" for e in ssn.events)
    decisions = run_actions(ssn)
    assert decisions.bound == {}
    assert [e.message for e in events(decisions, "Pod", "p") if e.reason == "InsufficientQuota"] == [
        "Queue <b> has insufficient <cpu> quota: requested 2, total would be 5, but capability is 4"]


def test_every_queue_gets_a_real_capability_4673() -> None:
    """#4673: a failed child check left realCapability nil and the clone panicked."""
    objs = [node("n1", cpu="8", memory="8Gi"), q("root"), q("a", "root", cap=(2, 2)), q("a1", "a", cap=(20, 20)),
            q("orphan", "gone"), q("c1", "c2"), q("c2", "c1")]
    objs += pending("p", "a1", 1)
    ssn, cap = session(objs, hierarchy=True)
    for attr in cap.attrs.values():
        assert isinstance(attr.real_capability, Resource)
    state = ssn.simulate_state(ssn.tasks["ns/p"])
    assert ssn.simulate_allocatable(state, ssn.queues["a1"], ssn.tasks["ns/p"])
    run_actions(ssn)


def test_zero_and_absent_dimensions() -> None:
    objs = [node("n1", cpu="8", memory="16Gi", **{"hugepages-1Gi": "0"}),
            queue("zeros", deserved={"cpu": "0", "memory": "0", "hugepages-1Gi": "0"},
                  capability={"hugepages-1Gi": "0"}, guarantee={"resource": {}}),
            queue("gpuonly", deserved={"nvidia.com/gpu": "2"})]
    objs += pending("p", "zeros", 1)
    objs += [podgroup("g", queue="gpuonly", phase="Inqueue"),
             pod("g", "g", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu": "1"})]
    ssn, cap = session(objs)
    assert cap.attrs["zeros"].share == 1.0  # all-zero deserved is best effort
    decisions = run_actions(ssn)
    assert decisions.bound == {"ns/p": "n1"}
    # The cluster has no GPU: the pod is refused by quota, with a reason, not by a crash.
    assert any(e.reason == "InsufficientQuota" and "<nvidia.com/gpu>" in e.message for e in events(decisions, "Pod", "g"))


def test_queue_status_snapshot() -> None:
    ssn, cap = session(seed_tree(), hierarchy=True)
    run_actions(ssn)
    st = cap.queue_status()["training"]
    assert st["allocated"]["cpu"] == "30" and st["realCapability"]["cpu"] == "50"
    assert st["parent"] == "team-a" and st["leaf"] is True and st["share"] == 0.75


def test_plugin_absent_in_flat_mode_ignores_parents() -> None:
    objs = [node("n1", cpu="8", memory="16Gi"), q("a", "b"), q("b", "a")] + pending("p", "a", 1)
    ssn, _ = session(objs)  # hierarchy off: parents mean nothing, no cycle report
    assert not [e for e in ssn.events if e.reason == "QueueHierarchyCycle"]
    assert run_actions(ssn).bound == {"ns/p": "n1"}


def test_enqueueable_rejects_unknown_queue_defensively() -> None:
    objs = [node("n1"), q("qa")] + pending("p", "qa", 1, phase="Pending", min_resources={"cpu": "1"})
    ssn, _cap = session(objs)
    job = ssn.jobs["ns/p"]
    job.queue = "vanished"
    fn = ssn._fns["job_enqueueable"]["capacity"]
    assert fn(job) == REJECT


def test_reclaim_never_takes_victims_that_cannot_free_the_short_ancestor() -> None:
    """REL-2: a1's parent A is at its capability; evicting B's task would free the node but
    not A, and pipelining a1's task would break A's capability. Only A's own subtree helps."""
    objs = [node("n1", cpu="4", memory="16Gi"), node("n2", cpu="4", memory="16Gi"),
            q("root"), q("A", "root", cap=(4, 16)), q("a1", "A", deserved=(4, 8)), q("a2", "A"),
            q("B", "root"), q("b1", "B")]
    objs += [podgroup("vb", queue="b1", phase="Running", min_member=0),
             pod("vb-0", "vb", cpu="4", memory="1Gi", node="n1", phase="Running"),
             pod("vb-1", "vb", cpu="1", memory="1Gi", node="n2", phase="Running"),
             podgroup("va", queue="a2", phase="Running", min_member=0),
             pod("va-0", "va", cpu="3", memory="1Gi", node="n2", phase="Running")]
    objs += pending("ask", "a1", 2)
    # capacity decides the victims (a tier-1 gang/conformance answer would decide first).
    text = """
actions: "reclaim"
tiers:
- plugins:
  - name: gang
    enableReclaimable: false
  - name: capacity
    enableHierarchy: true
  - name: predicates
"""
    ssn = open_session(build_snapshot(objs), config_from_text(text))
    cap = ssn.plugins["capacity"]
    chosen, _ = cap._reclaimable(ssn.tasks["ns/ask"], [ssn.tasks["ns/vb-0"], ssn.tasks["ns/va-0"]])
    assert [t.name for t in chosen] == ["va-0"]
    decisions = run_actions(ssn)
    assert decisions.evicted == ["ns/va-0"]
    assert decisions.pipelined == {"ns/ask": "n2"}
    assert cap.attrs["A"].allocated.milli_cpu <= cap.attrs["A"].real_capability.milli_cpu


def test_pre_predicate_refuses_tasks_of_queues_that_cannot_take_work() -> None:
    objs = [node("n1"), q("root"), q("team", "root"), q("leaf", "team"), q("lost", "gone")]
    objs += pending("inner", "team", 1) + pending("ok", "leaf", 1) + pending("orphan", "lost", 1)
    ssn, _cap = session(objs, hierarchy=True)
    assert ssn.pre_predicate(ssn.tasks["ns/ok"]) is None
    assert "is not a leaf queue" in (ssn.pre_predicate(ssn.tasks["ns/inner"]) or "")
    assert "gone does not exist" in (ssn.pre_predicate(ssn.tasks["ns/orphan"]) or "")


def test_preemptive_through_ancestor_deserved_with_ancestor_reclaim_level() -> None:
    objs = [node("n1", cpu="2", memory="2Gi"), q("root"), q("parent", "root", deserved=(4, 4)),
            q("qa", "parent"), q("qb", "parent")]
    objs += pending("ask", "qa", 2, mem="2Gi")
    for level, want in ((0, False), (1, True)):
        ssn, _cap = session(objs, hierarchy=True, args=f"ancestorReclaimLevel: {level}")
        assert ssn.preemptive(ssn.queues["qa"], ssn.tasks["ns/ask"]) is want
