"""Victim bundles of gangpreempt and gangreclaim, ported from Volcano's
pkg/scheduler/actions/utils/bundle_test.go (its cases with sub-jobs — sub-groups of a
``subGroupPolicy`` — at the end; a job without sub-groups is one group, as Volcano's default
sub-job makes it). Requests are vectors over (cpu, memory); one pod requests 1000 milli-cpu."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np

from builders import node, pod, podgroup, queue
from tidesched.actions.bundles import SAFE, WHOLE, Bundle, job_bundles, keep_allowed, roi, sort_for_preempt, sort_for_reclaim
from tidesched.model.snapshot import build_snapshot
from tidesched.scheduler import config_from_text, open_session

W = 2  # cpu, memory


def _job(min_member: int, running: int, role_min: dict[str, int] | None = None, pending: int = 0,
         roles: list[str] | None = None):
    """A session with one job of ``running`` Running pods (priority = index; role ``worker`` or
    ``roles[i]``) and ``pending`` more."""
    spec: dict[str, Any] = {"minTaskMember": role_min} if role_min else {}
    objs: list[dict[str, Any]] = [queue("q"), node("n1", cpu="64"), podgroup("job", min_member, queue="q", phase="Running", **spec)]
    for i in range(running):
        role = roles[i] if roles else "worker"
        objs.append(pod(f"t-{i}", "job", node="n1", phase="Running", priority=i, annotations={"volcano.sh/task-spec": role}))
    for i in range(pending):
        objs.append(pod(f"p-{i}", "job", annotations={"volcano.sh/task-spec": "worker"}))
    ssn = open_session(build_snapshot(objs), config_from_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'))
    for t in ssn.tasks.values():
        ssn.table.prepare_task(t)
    job = ssn.jobs["ns/job"]
    return job, sorted((t for t in job.tasks.values() if t.node_name), key=lambda t: t.name)


def test_safe_and_whole() -> None:
    # TestCreateJobBundles_SafeAndWhole: 5 ready, minAvailable 3, worker min 3: two safe.
    job, local = _job(3, 5, {"worker": 3})
    bundles = job_bundles(job, local, W)
    assert [(b.kind, [t.name for t in b.tasks]) for b in bundles] == [
        (SAFE, ["t-0", "t-1"]), (WHOLE, ["t-2", "t-3", "t-4"])]
    assert bundles[1].job_total is not None and bundles[1].job_total[0] == 5000


def test_no_role_minimums_leave_roles_unconstrained() -> None:
    # TestCreateJobBundles_NoTaskMinAvailableTreatsAllRolesAsUnconstrained.
    job, local = _job(2, 4)
    assert [len(b.tasks) for b in job_bundles(job, local, W)] == [2, 2]


def test_role_minimum_caps_the_safe_pods() -> None:
    # The role gate (CheckTaskReady): the job could spare 3 pods, but ps must keep 2 of its 3.
    job, local = _job(2, 5, {"ps": 2}, roles=["ps", "ps", "ps", "worker", "worker"])
    bundles = job_bundles(job, local, W)
    assert [(b.kind, [t.name for t in b.tasks]) for b in bundles] == [
        (SAFE, ["t-0", "t-3", "t-4"]), (WHOLE, ["t-1", "t-2"])]
    # Role minimums above minAvailable are not checked (gang's CheckTaskReady skips them too).
    job.task_min_available["ps"] = 3
    assert [[t.name for t in b.tasks] for b in job_bundles(job, local, W)] == [["t-0", "t-1", "t-2"], ["t-3", "t-4"]]


def test_a_job_already_not_ready_is_all_safe() -> None:
    # TestCreateJobBundles_JobNotReadyShortCircuitsAllSafe (without its sub-jobs).
    job, local = _job(10, 2)
    bundles = job_bundles(job, local, W)
    assert [(b.kind, len(b.tasks)) for b in bundles] == [(SAFE, 2)]


def _bundle(kind: int, job: Any, uid: str, cpu: float, total: float | None = None) -> Bundle:
    task = SimpleNamespace(uid=uid, req_vec=np.array([cpu, 0.0, 1.0]))
    return Bundle(kind, job, [task], np.array([cpu, 0.0]), None if total is None else np.array([total, 0.0]))  # type: ignore[list-item]


def test_keep_allowed_takes_whole_bundles_whole_and_shrinks_safe_ones() -> None:
    # TestApplyAllowedTasks_WholeAtomicAndSafeShrink.
    job = SimpleNamespace(uid="j", queue="q")
    t1, t2, t3 = (SimpleNamespace(uid=u, req_vec=np.array([1000.0, 0.0, 1.0])) for u in ("t1", "t2", "t3"))
    safe = Bundle(SAFE, job, [t1, t2], np.array([2000.0, 0.0]))  # type: ignore[list-item, arg-type]
    whole = Bundle(WHOLE, job, [t3], np.array([1000.0, 0.0]), np.array([3000.0, 0.0]))  # type: ignore[list-item, arg-type]
    valid = keep_allowed([safe, whole], {"t1", "t3x"}, W)
    assert len(valid) == 1 and valid[0].kind == SAFE and [t.uid for t in valid[0].tasks] == ["t1"]
    assert valid[0].local[0] == 1000


def test_sort_for_preempt_type_then_roi() -> None:
    # TestSortBundlesForPreempt_TypePriorityAndROI.
    low, high = SimpleNamespace(uid="low", priority=1), SimpleNamespace(uid="high", priority=10)
    safe = _bundle(SAFE, high, "s1", 1000)
    whole_low_roi = _bundle(WHOLE, low, "w1", 1000, 4000)
    whole_high_roi = _bundle(WHOLE, low, "w2", 1000, 2000)
    need = np.array([1000.0, 0.0])
    ordered = sort_for_preempt([whole_low_roi, safe, whole_high_roi], need, lambda l, r: l.priority < r.priority)
    assert [b.tasks[0].uid for b in ordered] == ["s1", "w2", "w1"]
    assert roi(safe, need) == math.inf and roi(whole_high_roi, need) == 0.5


def test_sort_for_preempt_uses_the_victim_job_order() -> None:
    # TestSortBundlesForPreempt_UsesVictimJobOrder.
    a, b = _bundle(WHOLE, SimpleNamespace(uid="ja"), "a", 1000, 2000), _bundle(WHOLE, SimpleNamespace(uid="jb"), "b", 1000, 2000)
    ordered = sort_for_preempt([a, b], np.array([1000.0, 0.0]), lambda l, r: l.uid > r.uid)
    assert ordered[0].tasks[0].uid == "b"


def test_sort_for_reclaim_queue_order_then_roi() -> None:
    # TestSortBundlesForReclaim_UsesQueueOrderThenROI.
    need = np.array([1000.0, 0.0])
    a = _bundle(WHOLE, SimpleNamespace(uid="ja", queue="qa"), "a", 1000, 4000)
    b = _bundle(WHOLE, SimpleNamespace(uid="jb", queue="qb"), "b", 1000, 2000)
    assert sort_for_reclaim([b, a], need, lambda l, r: l < r)[0].tasks[0].uid == "a"
    c = _bundle(WHOLE, SimpleNamespace(uid="jc", queue="qc"), "c", 1000, 4000)
    d = _bundle(WHOLE, SimpleNamespace(uid="jd", queue="qd"), "d", 1000, 2000)
    assert sort_for_reclaim([c, d], need, None)[0].tasks[0].uid == "d"


def test_sort_for_reclaim_deterministic_tie_breaker() -> None:
    # TestSortBundlesForReclaim_DeterministicTieBreaker.
    a = _bundle(WHOLE, SimpleNamespace(uid="ja", queue="q"), "a", 1000, 2000)
    b = _bundle(WHOLE, SimpleNamespace(uid="jb", queue="q"), "b", 1000, 2000)
    assert [x.tasks[0].uid for x in sort_for_reclaim([b, a], np.array([1000.0, 0.0]), None)] == ["a", "b"]


# -- sub-groups ----------------------------------------------------------------------------------

PART = "volcano.sh/partition-id"


def _sub_job(min_member: int, groups: dict[str, tuple[int, int]], pods: list[tuple[str, str, str, int]],
             role_min: dict[str, int] | None = None):
    """A session with one job whose policies are ``groups`` (name -> (subGroupSize,
    minSubGroups), pods joining by the label ``<name>`` = sub-group) and Running ``pods``
    (name, policy, sub-group, priority), each of role ``worker`` unless its policy is ``m-g``."""
    spec: dict[str, Any] = {"minTaskMember": role_min} if role_min else {}
    spec["subGroupPolicy"] = [{"name": g, "subGroupSize": size, "minSubGroups": m, "matchLabelKeys": [g]}
                              for g, (size, m) in groups.items()]
    objs: list[dict[str, Any]] = [queue("q"), node("n1", cpu="64"), podgroup("job", min_member, queue="q", phase="Running", **spec)]
    for name, group, sub, prio in pods:
        role = "master" if group == "m-g" else "worker"
        objs.append(pod(name, "job", node="n1", phase="Running", priority=prio, labels={group: sub},
                        annotations={"volcano.sh/task-spec": role}))
    ssn = open_session(build_snapshot(objs), config_from_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'))
    for t in ssn.tasks.values():
        ssn.table.prepare_task(t)
    job = ssn.jobs["ns/job"]
    return job, {t.name: t for t in job.tasks.values()}


def _kinds(bundles: list[Bundle]) -> list[tuple[int, list[str]]]:
    return [(b.kind, sorted(t.name for t in b.tasks)) for b in bundles]


def test_a_policy_without_a_sub_group_to_spare_caps_the_safe_pods() -> None:
    # TestCreateJobBundles_SubJobGroupSlackCapsSafe: six pods run in three ready sub-groups of
    # two, minSubGroups 2, minMember 4: the job could lose 2 pods, the policy only one sub-group.
    pods = [(f"t{i}{x}", "g", f"sj{i}", 99 + 2 * i + (x == "b")) for i in (1, 2, 3) for x in "ab"]
    job, t = _sub_job(4, {"g": (2, 2)}, pods)
    bundles = job_bundles(job, [t["t1a"], t["t2a"], t["t3a"]], W)
    assert _kinds(bundles) == [(SAFE, ["t1a"]), (WHOLE, ["t2a", "t3a"])]


def test_role_and_sub_group_minimums_both_hold() -> None:
    # TestCreateJobBundles_MixedLegacyAndSubJobBothEnforced: the master goes safe (its policy
    # has a ready sub-group to spare); the worker is held by its role's minimum alone (its
    # sub-group is broken already).
    pods = [("m1", "m-g", "1", 0), ("m2", "m-g", "2", 10), ("w1a", "w-g", "1", 1), ("w2a", "w-g", "2", 11),
            ("w2b", "w-g", "2", 12), ("w3a", "w-g", "3", 13), ("w3b", "w-g", "3", 14)]
    job, t = _sub_job(5, {"m-g": (1, 1), "w-g": (2, 2)}, pods, role_min={"worker": 5})
    assert _kinds(job_bundles(job, [t["m1"], t["w1a"]], W)) == [(SAFE, ["m1"]), (WHOLE, ["w1a"])]


def test_a_broken_sub_group_may_lose_more_pods_but_ready_ones_not() -> None:
    # TestCreateJobBundles_AlreadyBrokenSubJobIsSubjectToFurtherEviction.
    pods = [("sj1a", "g", "1", 1), ("sj2a", "g", "2", 2), ("sj2b", "g", "2", 3), ("sj3a", "g", "3", 4), ("sj3b", "g", "3", 5)]
    job, t = _sub_job(3, {"g": (2, 2)}, pods)
    assert _kinds(job_bundles(job, [t["sj1a"], t["sj2a"], t["sj3a"]], W)) == [(SAFE, ["sj1a"]), (WHOLE, ["sj2a", "sj3a"])]


def test_a_job_not_ready_puts_every_pod_in_the_safe_bundle() -> None:
    # TestCreateJobBundles_JobNotReadyShortCircuitsAllSafe.
    job, t = _sub_job(10, {"g": (3, 2)}, [("a", "g", "1", 0), ("b", "g", "1", 1)])
    assert _kinds(job_bundles(job, [t["a"], t["b"]], W)) == [(SAFE, ["a", "b"])]
