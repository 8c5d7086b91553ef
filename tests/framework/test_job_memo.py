"""Per-job memos of session-open values (framework/job_memo.py): sessions opened on one cache
over changing jobs must see exactly what a session opened afresh sees."""

from __future__ import annotations

from builders import node, pod, podgroup, queue
from tidesched.model.cache import ClusterCache
from tidesched.model.snapshot import build_snapshot
from tidesched.framework import job_memo as job_memo_mod
from tidesched.scheduler import config_from_text, open_session, run_actions

CFG = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: drf
  - name: proportion
  - name: overcommit
"""
MIN_RES = {"cpu": "2", "memory": "2Gi"}


def _objects(bound: int) -> list[dict]:
    """Two running jobs; the first has ``bound`` of its three pods on a node."""
    objs: list[dict] = [node("n1", cpu="16", memory="32Gi"), queue("q1"), queue("q2")]
    objs.append(podgroup("a", 1, queue="q1", phase="Running", min_resources=MIN_RES))
    for i in range(3):
        objs.append(pod(f"a-{i}", "a", node="n1" if i < bound else "",
                        phase="Running" if i < bound else "Pending"))
    objs.append(podgroup("b", 1, queue="q2", phase="Running", min_resources=MIN_RES))
    objs.append(pod("b-0", "b", cpu="2", node="n1", phase="Running"))
    return objs


def _figures(ssn) -> dict:
    prop, drf, over = ssn.plugins["proportion"], ssn.plugins["drf"], ssn.plugins["overcommit"]
    return {
        "queues": {q: (a.allocated.clone(), a.request.clone(), a.inqueue.clone(), a.elastic.clone(), a.share)
                   for q, a in prop.attrs.items()},
        "drf": {uid: (a.allocated.clone(), a.share, a.dominant) for uid, a in drf.attrs.items()},
        "overcommit": over.inqueue.clone(),
    }


def _fresh(objs: list[dict]) -> dict:
    """The figures of a session opened afresh, with an empty memo (the memo in use is put back)."""
    saved = dict(job_memo_mod._JOBS)
    job_memo_mod.forget_all()
    try:
        return _figures(open_session(build_snapshot(objs), config_from_text(CFG)))
    finally:
        job_memo_mod.forget_all()
        job_memo_mod._JOBS.update(saved)


def test_memo_follows_a_job_whose_allocation_changes() -> None:
    config = config_from_text(CFG)
    cache = ClusterCache()
    job_memo_mod.forget_all()
    seen = []
    for bound in (1, 1, 2, 3, 2):
        for obj in _objects(bound):
            key = obj["metadata"]["name"] if obj["kind"] in ("Node", "Queue") else f"ns/{obj['metadata']['name']}"
            cache.update(obj["kind"], key, obj)
        snapshot, state = cache.open()
        figures = _figures(open_session(snapshot, config, state=state))
        seen.append(figures)
        assert figures == _fresh(_objects(bound)), f"with {bound} pods of job a bound"
    # The figures did move with the job (the memo did not freeze them).
    assert seen[0]["queues"]["q1"][0] != seen[2]["queues"]["q1"][0]
    assert seen[0]["queues"]["q1"][2] != seen[2]["queues"]["q1"][2]  # inqueue: minResources left
    assert seen[2]["queues"]["q1"][3] != seen[3]["queues"]["q1"][3]  # elastic: above minResources
    assert seen[1]["overcommit"] != seen[2]["overcommit"]


def test_memo_keeps_a_job_until_its_amounts_change() -> None:
    config = config_from_text(CFG)
    job_memo_mod.forget_all()
    ssn = open_session(build_snapshot(_objects(2)), config)
    job = next(j for j in ssn.jobs.values() if j.name == "a")
    memo = job_memo_mod.job_memo(job)
    assert "proportion" in memo and "overcommit" in memo and "drf" in memo
    assert job_memo_mod.job_memo(job) is memo
    job.allocated.add(job.allocated.clone())  # changed in place, as the session does
    assert job_memo_mod.job_memo(job) == {}


def test_a_session_that_allocates_leaves_the_memo_as_it_found_it() -> None:
    """drf lends the memo's attribute of a job (allocation and share) to the session;
    allocating to that job must change a copy the session makes, never the memo's."""
    config = config_from_text(CFG)
    cache = ClusterCache()
    job_memo_mod.forget_all()
    for obj in _objects(1):
        key = obj["metadata"]["name"] if obj["kind"] in ("Node", "Queue") else f"ns/{obj['metadata']['name']}"
        cache.update(obj["kind"], key, obj)
    for _ in range(3):
        snapshot, state = cache.open()
        ssn = open_session(snapshot, config, state=state)
        assert _figures(ssn) == _fresh(_objects(1))
        before = {uid: a.share for uid, a in ssn.plugins["drf"].attrs.items()}
        run_actions(ssn)
        after = {uid: a.share for uid, a in ssn.plugins["drf"].attrs.items()}
        assert before != after  # the session allocated job a's pending pods
