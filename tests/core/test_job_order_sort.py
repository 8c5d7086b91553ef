"""Session.sorted_jobs gives the order a PriorityQueue of job_order_less pops (enqueue sorts
each queue's jobs once instead of keeping a heap)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from builders import node, pod, podgroup, queue
from tidesched.framework.session import PriorityQueue
from tidesched.model.snapshot import build_snapshot
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
        st.integers(0, 3),  # priority
        st.integers(1, 3),  # minMember
        st.integers(0, 3),  # pods already running (gang readiness, DRF share)
        st.integers(0, 5),  # creation second (ties are common)
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(job_shapes)
def test_sorted_jobs_pops_like_the_heap(shapes: list[tuple[int, int, int, int]]) -> None:
    objs = [node("n1", cpu="200", memory="400Gi"), queue("default")]
    objs += [{"kind": "PriorityClass", "metadata": {"name": f"p{v}"}, "value": v} for v in range(4)]
    for j, (prio, min_member, running, second) in enumerate(shapes):
        pg = podgroup(f"j{j}", min_member=min_member, phase="Pending", priorityClassName=f"p{prio}")
        pg["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:0{second}Z"
        objs.append(pg)
        for k in range(max(min_member, running)):
            objs.append(pod(f"j{j}-{k}", group=f"j{j}", priority=prio, node="n1" if k < running else ""))
    ssn = open_session(build_snapshot(objs), config_from_text(CONFIG))
    jobs = list(ssn.jobs.values())
    heap = PriorityQueue(ssn.job_order_less, jobs)
    popped = [heap.pop().uid for _ in jobs]
    assert [j.uid for j in ssn.sorted_jobs(jobs)] == popped
    if len({j.priority for j in jobs}) > 1:  # the order is not just creation and uid
        assert popped[0] in {j.uid for j in jobs if j.priority == max(x.priority for x in jobs)}
    assert [j.uid for j in ssn.sorted_jobs(reversed(jobs))] == popped
