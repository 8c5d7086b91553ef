"""The gang and priority plugins over sub-groups (Volcano v1.15.1 plugins/gang and priority:
JobValid's CheckSubJobValid, JobReady's and JobPipelined's sub-group checks, SubJobReady,
SubJobPipelined, SubJobOrder)."""

from __future__ import annotations

from builders import node, pod, podgroup, queue
from tidesched.model.loader import Manifest
from tidesched.model.snapshot import build_snapshot
from tidesched.model.status import TaskStatus
from tidesched.scheduler import config_from_text, open_session

CONFIG = """actions: "allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
"""
PARTITION = "volcano.sh/partition-id"
POLICY = {"name": "w", "subGroupSize": 2, "minSubGroups": 2, "matchLabelKeys": [PARTITION]}


def session(pods: list[dict], min_member: int = 4, config: str = CONFIG):  # type: ignore[no-untyped-def]
    objs = [node("n1", cpu="64", memory="64Gi"), queue("q1", weight=1),
            podgroup("pg", min_member, queue="q1", subGroupPolicy=[POLICY]), *pods]
    return open_session(build_snapshot([Manifest(f"o{i}", o) for i, o in enumerate(objs)]), config_from_text(config, "t"))


def part(name: str, i: int, **kw) -> dict:  # type: ignore[no-untyped-def]
    return pod(name, "pg", labels={PARTITION: str(i)}, **kw)


def test_a_gang_with_fewer_sub_groups_than_min_is_not_valid() -> None:
    ssn = session([part("a", 0), part("b", 0), part("c", 0), part("d", 0)])
    vr = ssn.job_valid(ssn.jobs["ns/pg"])
    assert vr is not None and not vr.passed
    assert (vr.reason, vr.message) == ("NotEnoughPodsOfTask", "Not enough valid subGroups of each task for gang-scheduling")
    ok = session([part("a", 0), part("b", 0), part("c", 1), part("d", 1)])
    assert ok.job_valid(ok.jobs["ns/pg"]) is None


def test_the_gang_is_ready_when_min_sub_groups_are_ready_as_well_as_min_member() -> None:
    running = {"node": "n1", "phase": "Running"}
    # Four pods run, but only one partition is whole: minMember holds, minSubGroups does not.
    ssn = session([part("a", 0, **running), part("b", 0, **running), part("c", 1, **running), part("d", 2, **running),
                   part("e", 1), part("f", 2)])
    job = ssn.jobs["ns/pg"]
    assert job.is_ready() and not ssn.job_ready(job) and not ssn.job_pipelined(job)
    e = next(t for t in job.tasks.values() if t.name == "e")
    job.update_task_status(e, TaskStatus.PIPELINED)
    assert ssn.job_pipelined(job) and not ssn.job_ready(job)
    sub = job.sub_jobs.of(e)
    assert ssn.sub_job_pipelined(job, sub) and not ssn.sub_job_ready(job, sub)
    job.update_task_status(e, TaskStatus.ALLOCATED)
    assert ssn.job_ready(job) and ssn.sub_job_ready(job, sub)


def test_sub_groups_go_not_ready_first_then_by_priority_then_match_index() -> None:
    running = {"node": "n1", "phase": "Running"}
    ssn = session([part("a", 0, **running), part("b", 0, **running),  # partition 0: ready
                   part("c", 1), part("d", 1),
                   part("e", 2, priority=5), part("f", 2),
                   part("g", 10), part("h", 10)])
    job = ssn.jobs["ns/pg"]
    subs = job.sub_jobs.by_uid
    order = sorted(subs.values(), key=lambda s: sum(ssn.sub_job_order_less(o, s) for o in subs.values()))
    assert [s.name for s in order] == ["w-2", "w-1", "w-10", "w-0"]
    # Without plugins: the match index (10 after 1, not as the text would sort), then the id.
    bare = session([part("c", 1), part("d", 1), part("g", 10), part("h", 10)], config='actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n')
    subs = bare.jobs["ns/pg"].sub_jobs.by_uid
    assert bare.sub_job_order_less(subs["ns/pg/w-1"], subs["ns/pg/w-10"])


def test_a_gang_without_sub_groups_is_asked_as_a_whole() -> None:
    objs = [node("n1"), queue("q1", weight=1), podgroup("pg", 2, queue="q1"), pod("a", "pg"), pod("b", "pg", node="n1", phase="Running")]
    ssn = open_session(build_snapshot([Manifest(f"o{i}", o) for i, o in enumerate(objs)]), config_from_text(CONFIG, "t"))
    job = ssn.jobs["ns/pg"]
    whole = ssn.topology.whole(job)
    assert whole.tasks is job.tasks and whole.uid == job.uid
    assert not ssn.sub_job_ready(job, whole)
    a = next(t for t in job.tasks.values() if t.name == "a")
    job.update_task_status(a, TaskStatus.ALLOCATED)
    assert ssn.sub_job_ready(job, whole)
