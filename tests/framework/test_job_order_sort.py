"""Job order three ways: PriorityQueue on job_order_less (the reference, as Volcano's
PriorityQueue), Session.sorted_jobs (enqueue), and KeyedQueue on the plugins' sort keys
(allocate, backfill). All must pop the same jobs in the same order, also when a popped job
is allocated (its gang readiness and DRF share move) and pushed back, as allocate does."""

from __future__ import annotations

import random

from hypothesis import given, settings, strategies as st

from builders import node, pod, podgroup, queue
from tidesched.framework.queues import KeyedQueue, PriorityQueue
from tidesched.framework.session import Session
from tidesched.model.snapshot import build_snapshot
from tidesched.model.status import TaskStatus
from tidesched.scheduler import config_from_text, open_session

CONFIG = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
"""

job_shapes = st.lists(
    st.tuples(
        st.integers(0, 3),  # priority class
        st.integers(1, 3),  # minMember
        st.integers(0, 3),  # pods already running (gang readiness, DRF share)
        st.integers(0, 5),  # creation second (ties are common)
        st.integers(0, 2),  # extra pending pods
    ),
    min_size=1,
    max_size=30,
)


def _session(shapes: list[tuple[int, int, int, int, int]]) -> Session:
    objs = [node("n1", cpu="400", memory="800Gi", pods="1000"), queue("default")]
    objs += [{"kind": "PriorityClass", "metadata": {"name": f"p{v}"}, "value": v} for v in range(4)]
    for j, (prio, min_member, running, second, extra) in enumerate(shapes):
        pg = podgroup(f"j{j}", min_member=min_member, phase="Pending", priorityClassName=f"p{prio}")
        pg["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:0{second}Z"
        objs.append(pg)
        for k in range(max(min_member, running) + extra):
            objs.append(pod(f"j{j}-{k}", group=f"j{j}", node="n1" if k < running else ""))
    return open_session(build_snapshot(objs), config_from_text(CONFIG))


@settings(max_examples=60, deadline=None)
@given(job_shapes)
def test_sorted_jobs_pop_like_the_heap(shapes: list[tuple[int, int, int, int, int]]) -> None:
    ssn = _session(shapes)
    assert ssn.job_sort_key() is not None  # every JobOrder plugin here offers a key
    jobs = list(ssn.jobs.values())
    heap = PriorityQueue(ssn.job_order_less, jobs)
    popped = [heap.pop().uid for _ in jobs]
    assert [j.uid for j in ssn.sorted_jobs(jobs)] == popped
    assert [j.uid for j in ssn.sorted_jobs(reversed(jobs))] == popped
    ssn._job_key = None  # the comparator path, as with a JobOrder plugin that offers no key
    assert [j.uid for j in ssn.sorted_jobs(reversed(jobs))] == popped
    if len({j.priority for j in jobs}) > 1:  # the order is not just creation and uid
        assert popped[0] in {j.uid for j in jobs if j.priority == max(x.priority for x in jobs)}


@settings(max_examples=60, deadline=None)
@given(job_shapes, st.integers(0, 2**32 - 1))
def test_keyed_queue_pops_like_the_heap_through_allocations(
    shapes: list[tuple[int, int, int, int, int]], seed: int
) -> None:
    ssn = _session(shapes)
    jobs = list(ssn.jobs.values())
    keyed = ssn.job_queue(jobs)
    assert isinstance(keyed, KeyedQueue)
    heap = PriorityQueue(ssn.job_order_less, jobs)
    rng = random.Random(seed)
    while not heap.empty():
        job = heap.pop()
        assert keyed.pop() is job
        pending = [t for t in job.tasks.values() if t.status == TaskStatus.PENDING]
        if pending and rng.random() < 0.7:  # its turn placed a task: readiness and share move
            ssn.allocate_and_dispatch(pending[0], "n1")
            heap.push(job)
            keyed.push(job)
    assert keyed.empty()
