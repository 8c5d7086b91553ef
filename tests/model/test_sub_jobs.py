"""A PodGroup's sub-groups as the scheduler keeps them (model/sub_jobs.py): which sub-group each
pod joins, the ids and order Volcano v1.15.1 gives them (api/sub_job_info.go), their readiness
as their pods change status, and the gang's checks over them."""

from __future__ import annotations

from builders import node, pod, podgroup, queue
from tidesched.model.snapshot import build_snapshot
from tidesched.model.state import build_state
from tidesched.model.status import TaskStatus
from tidesched.model.sub_jobs import _fnv32a, sub_job_id

PARTITION = "volcano.sh/partition-id"
SPEC = "volcano.sh/task-spec"


def worker_policy(**extra) -> dict:
    return {"name": "worker", "subGroupSize": 2, "minSubGroups": 2,
            "labelSelector": {"matchLabels": {SPEC: "worker"}}, "matchLabelKeys": [PARTITION], **extra}


def state(pods: list[dict], *policies: dict, **spec):
    objs = [node("n1", cpu="64", memory="64Gi"), queue("q1", weight=1),
            podgroup("pg", 1, queue="q1", subGroupPolicy=list(policies), **spec), *pods]
    return build_state(build_snapshot(objs), ["volcano"])


def test_pods_join_the_sub_group_of_their_labels_others_the_default_one() -> None:
    pods = [pod("m", "pg", labels={SPEC: "master"}),
            pod("w0", "pg", labels={SPEC: "worker", PARTITION: "0"}),
            pod("w1", "pg", labels={SPEC: "worker", PARTITION: "0"}),
            pod("w2", "pg", labels={SPEC: "worker", PARTITION: "1"}),
            pod("w-no-key", "pg", labels={SPEC: "worker"}),
            pod("w-empty", "pg", labels={SPEC: "worker", PARTITION: ""})]
    job = state(pods, worker_policy()).jobs["ns/pg"]
    subs = job.sub_jobs
    assert subs is not None
    members = {uid: sorted(t.name for t in s.tasks.values()) for uid, s in subs.by_uid.items()}
    assert members == {"ns/pg": ["m", "w-empty", "w-no-key"], "ns/pg/worker-0": ["w0", "w1"], "ns/pg/worker-1": ["w2"]}
    default, part0 = subs.by_uid["ns/pg"], subs.by_uid["ns/pg/worker-0"]
    assert (default.gid, default.min_available, default.name) == ("ns/pg", 1, "default")
    assert (part0.gid, part0.min_available, part0.name, part0.match_index) == ("ns/pg/worker", 2, "worker-0", 0)
    assert subs.by_uid["ns/pg/worker-1"].match_index == 1


def test_the_first_policy_that_takes_a_pod_wins_and_keys_join_their_values() -> None:
    both = {"name": "both", "matchLabelKeys": ["rack", PARTITION]}
    any_rack = {"name": "rack", "matchLabelKeys": ["rack"]}
    pods = [pod("a", "pg", labels={"rack": "r1", PARTITION: "7"}), pod("b", "pg", labels={"rack": "r1"})]
    subs = state(pods, both, any_rack).jobs["ns/pg"].sub_jobs
    assert subs is not None
    assert sorted(subs.by_uid) == ["ns/pg/both-r1-7", "ns/pg/rack-r1"]
    assert subs.by_uid["ns/pg/both-r1-7"].match_index == 0  # the first value, "r1", is no number
    assert subs.by_uid["ns/pg/rack-r1"].min_available == 1  # no subGroupSize: one pod


def test_sub_group_ids_as_volcano_makes_them() -> None:
    # TestSubJobInfo_getPodSubJobID's cases.
    assert sub_job_id("job1", "policy1", "value1-value2") == "job1/policy1-value1-value2"
    assert sub_job_id("job1", "policy1", "value1") == "job1/policy1-value1"
    # FNV-1a (32 bits), the hash of a value string over 128 characters.
    assert _fnv32a(b"") == 0x811C9DC5 and _fnv32a(b"a") == 0xE40C292C
    long_id = sub_job_id("job1", "p", "x" * 129)
    suffix = long_id.removeprefix("job1/p-")
    assert suffix and set(suffix) <= set("bcdfghjklmnpqrstvwxz2456789") and len(suffix) == len(str(_fnv32a(b"x" * 129)))
    assert sub_job_id("job1", "p", "x" * 128) == "job1/p-" + "x" * 128


def test_readiness_counts_ready_and_pipelined_pods_and_pending_best_effort() -> None:
    # TestSubJobInfo_IsReady / IsPipelined: ready = allocated, binding, bound, running,
    # succeeded, + pending best-effort; pipelined adds the pipelined ones.
    labels = {SPEC: "worker", PARTITION: "0"}
    pods = [pod("r", "pg", labels=labels, node="n1", phase="Running"),
            pod("s", "pg", labels=labels, node="n1", phase="Succeeded"),
            pod("be", "pg", labels=labels, cpu=None, memory=None),
            pod("p", "pg", labels=labels),
            pod("f", "pg", labels=labels, node="n1", phase="Failed")]
    job = state(pods, worker_policy(subGroupSize=4)).jobs["ns/pg"]
    sub = job.sub_jobs.by_uid["ns/pg/worker-0"]
    assert (sub.ready_count, sub.pending_best_effort, sub.waiting_count) == (2, 1, 0)
    assert not sub.is_ready() and not sub.is_pipelined()
    task = next(t for t in sub.tasks.values() if t.name == "p")
    job.update_task_status(task, TaskStatus.PIPELINED)
    assert sub.is_pipelined() and not sub.is_ready()
    job.update_task_status(task, TaskStatus.ALLOCATED)
    assert sub.is_ready() and sub.allocated_count == 2
    job.remove_task(task)
    assert not sub.is_ready()


def test_a_sub_group_left_without_pods_is_gone_and_its_priority_is_its_highest_pod_s() -> None:
    labels = {SPEC: "worker", PARTITION: "0"}
    job = state([pod("a", "pg", labels=labels, priority=-5), pod("b", "pg", labels=labels, priority=7)],
                worker_policy()).jobs["ns/pg"]
    subs = job.sub_jobs
    sub = subs.by_uid["ns/pg/worker-0"]
    assert sub.priority == 7
    low = next(t for t in sub.tasks.values() if t.name == "a")
    job.remove_task(next(t for t in sub.tasks.values() if t.name == "b"))
    assert sub.priority == 0  # from 0, as Volcano's: a negative priority does not lower it
    job.remove_task(low)
    assert "ns/pg/worker-0" not in subs.by_uid


def test_the_gang_needs_min_sub_groups_of_each_policy() -> None:
    part = lambda i: {SPEC: "worker", PARTITION: str(i)}  # noqa: E731
    pods = [pod(f"w{i}", "pg", labels=part(i // 2), node="n1" if i < 2 else "", phase="Running" if i < 2 else "Pending")
            for i in range(4)]
    job = state(pods, worker_policy(), {"name": "absent", "minSubGroups": 1, "matchLabelKeys": ["nope"]}).jobs["ns/pg"]
    subs = job.sub_jobs
    # Two worker sub-groups exist, but no pod carries the key of the policy "absent".
    assert not subs.check_valid()
    assert subs.short_groups() == [("worker", 1, 2), ("absent", 0, 1)]
    job2 = state(pods, worker_policy()).jobs["ns/pg"]
    assert job2.sub_jobs.check_valid() and not job2.sub_jobs.check_ready()
    for t in job2.tasks.values():
        if t.status == TaskStatus.PENDING:
            job2.update_task_status(t, TaskStatus.PIPELINED)
    assert job2.sub_jobs.check_pipelined() and not job2.sub_jobs.check_ready()


def test_a_podgroup_without_sub_groups_has_none() -> None:
    st = build_state(build_snapshot([queue("q1", weight=1), podgroup("pg", 1, queue="q1"), pod("a", "pg")]), ["volcano"])
    assert st.jobs["ns/pg"].sub_jobs is None
