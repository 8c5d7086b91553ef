"""Row caches carried from the cluster cache's long-lived node table into session copies.

A session's copy starts each request shape's per-node values from the parent's entry and
recomputes only the rows the cluster changed since; the values always equal a fresh
computation. (tests/model/test_cache.py runs whole sessions on carried caches against rebuilds.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tidesched.model.infos import TaskInfo
from tidesched.model.node_table import MAX_CARRIED, NodeTable
from tidesched.model.objects import parse_node, parse_pod

N = 40


def make_node(i: int) -> Any:
    return parse_node({"kind": "Node", "metadata": {"name": f"n{i:02d}"},
                       "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "10"}}})


def make_task(i: int, cpu: str, node: str = "") -> TaskInfo:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if node:
        spec["nodeName"] = node
    obj = {"kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "a", "uid": f"u{i}"},
           "spec": spec, "status": {"phase": "Running" if node else "Pending"}}
    return TaskInfo(parse_pod(obj), "", 0)


def parent_table() -> NodeTable:
    t = NodeTable([make_node(i) for i in range(N)])
    t.enable_carry()
    return t


class Counting:
    """A row compute (cpu left after the request, per node) that records what it was asked."""

    def __init__(self, table: NodeTable, need: float) -> None:
        self.table, self.need, self.calls = table, need, []

    def __call__(self, rows: np.ndarray | None) -> np.ndarray:
        self.calls.append(None if rows is None else rows.tolist())
        idle = self.table.idle[:, 0]
        return (idle if rows is None else idle[rows]) - self.need


def place(table: NodeTable, row: int, i: int, cpu: str = "1") -> TaskInfo:
    task = make_task(i, cpu, table.names[row])
    table.prepare_task(task)
    table.add_task(row, task)
    return task


def test_a_session_copy_starts_from_the_parents_values_and_recomputes_only_changed_rows() -> None:
    ctx = object()
    parent = parent_table()
    first = parent.copy()
    first.carry_caches(ctx)
    c1 = Counting(first, 1000.0)
    first.row_cached("k", c1)
    assert c1.calls == [None]  # nothing to start from yet: every row
    place(parent, 3, 1)  # the cluster changes between sessions
    place(parent, 7, 2)
    second = parent.copy()
    second.carry_caches(ctx)
    c2 = Counting(second, 1000.0)
    got = second.row_cached("k", c2)
    assert c2.calls == [[3, 7]]  # only the rows the cluster changed
    np.testing.assert_array_equal(got, parent.idle[:, 0] - 1000.0)
    # The session's own changes move its copy of the values, never the parent's.
    place(second, 5, 3, "2")
    after = second.row_cached("k", c2)
    assert after[5] == second.idle[5, 0] - 1000.0 and after[5] != parent.idle[5, 0] - 1000.0
    third = parent.copy()
    third.carry_caches(ctx)
    c3 = Counting(third, 1000.0)
    np.testing.assert_array_equal(third.row_cached("k", c3), parent.idle[:, 0] - 1000.0)
    assert c3.calls == []  # the parent's entry was caught up by the second session


def test_a_copy_that_changed_before_its_first_read_computes_its_own_state_and_leaves_the_parent() -> None:
    ctx = object()
    parent = parent_table()
    s1 = parent.copy()
    s1.carry_caches(ctx)
    s1.row_cached("k", Counting(s1, 500.0))
    place(parent, 2, 1)
    s2 = parent.copy()
    s2.carry_caches(ctx)
    place(s2, 9, 2, "3")  # the session places a pod before it first reads "k"
    c = Counting(s2, 500.0)
    got = s2.row_cached("k", c)
    np.testing.assert_array_equal(got, s2.idle[:, 0] - 500.0)
    assert c.calls == [[2, 9]]
    # The parent's entry still stands where it was (row 2 not caught up): a later session does.
    s3 = parent.copy()
    s3.carry_caches(ctx)
    c3 = Counting(s3, 500.0)
    np.testing.assert_array_equal(s3.row_cached("k", c3), parent.idle[:, 0] - 500.0)
    assert c3.calls == [[2]]


def test_another_config_drops_the_carried_values() -> None:
    parent = parent_table()
    s1 = parent.copy()
    s1.carry_caches("config A")
    s1.row_cached("k", Counting(s1, 1.0))
    s2 = parent.copy()
    s2.carry_caches("config B")  # a reloaded config: weights or plugins may differ
    c = Counting(s2, 1.0)
    s2.row_cached("k", c)
    assert c.calls == [None]


def test_carried_values_stay_bounded() -> None:
    ctx = object()
    parent = parent_table()
    s = parent.copy()
    s.carry_caches(ctx)
    for k in range(MAX_CARRIED + 1):
        s.row_cached(("shape", k), Counting(s, float(k)))
    nxt = parent.copy()
    nxt.carry_caches(ctx)  # too many shapes kept: the parent starts afresh
    c = Counting(nxt, 0.0)
    nxt.row_cached(("shape", 0), c)
    assert c.calls == [None]
    # A change log longer than a few passes over the nodes is dropped with the values.
    s = parent.copy()
    s.carry_caches(ctx)
    s.row_cached("k", Counting(s, 0.0))
    for i in range(3 * N):
        place(parent, i % N, 100 + i, "10m")
    for i in range(3 * N):
        parent.remove_task(i % N, parent.tasks[i % N][f"u{100 + i}"])
    s = parent.copy()
    s.carry_caches(ctx)
    assert parent.change_log == []
    c = Counting(s, 0.0)
    np.testing.assert_array_equal(s.row_cached("k", c), parent.idle[:, 0])
    assert c.calls == [None]


def test_tables_not_marked_long_lived_carry_nothing() -> None:
    table = NodeTable([make_node(i) for i in range(N)])
    s1 = table.copy()
    s1.carry_caches(object())
    s1.row_cached("k", Counting(s1, 0.0))
    s2 = table.copy()
    s2.carry_caches(object())
    c = Counting(s2, 0.0)
    s2.row_cached("k", c)
    assert c.calls == [None] and table._row_caches == {}


def test_used_total_follows_every_change_and_is_summed_once_per_cluster_state() -> None:
    parent = parent_table()
    place(parent, 1, 1, "2")
    s1 = parent.copy()
    s1.carry_caches(object())
    assert s1.used_total().milli_cpu == 2000.0
    memo = parent._used_total
    assert memo is not None  # summed on the long-lived table, for the next sessions too
    s2 = parent.copy()
    assert s2.used_total().milli_cpu == 2000.0 and parent._used_total is memo
    place(s2, 4, 2, "3")  # the session's own placement
    assert s2.used_total().milli_cpu == 5000.0 and parent.used_total().milli_cpu == 2000.0
    place(parent, 6, 3, "1")
    s3 = parent.copy()
    got = s3.used_total()
    got.milli_cpu = 0.0  # a fresh Resource: changing it changes no memo
    assert s3.used_total().milli_cpu == 3000.0


def test_releasing_and_pipelined_amounts_are_copied_on_first_change_by_either_table() -> None:
    parent = parent_table()
    child = parent.copy()
    assert child.releasing is parent.releasing  # shared while neither changed them
    pipelined = make_task(1, "2", parent.names[4])
    child.prepare_task(pipelined)
    from tidesched.model.status import TaskStatus

    pipelined.status = TaskStatus.PIPELINED
    child.add_task(4, pipelined)
    assert child.pipelined[4, 0] == 2000.0 and parent.pipelined[4, 0] == 0.0
    assert child.future_idle[4, 0] == 6000.0 and parent.future_idle[4, 0] == 8000.0
    other = parent.copy()
    releasing = make_task(2, "1", parent.names[5])
    parent.prepare_task(releasing)
    releasing.status = TaskStatus.RELEASING
    parent.add_task(5, releasing)  # the parent changes next: the copy keeps what it saw
    assert parent.releasing[5, 0] == 1000.0 and other.releasing[5, 0] == 0.0 and child.releasing[5, 0] == 0.0


def test_a_copy_whose_parent_moved_on_carries_nothing_and_changes_nothing_there() -> None:
    ctx = object()
    parent = parent_table()
    s1 = parent.copy()
    s1.carry_caches(ctx)
    s1.row_cached("k", Counting(s1, 0.0))
    late = parent.copy()
    late.carry_caches(ctx)
    place(parent, 8, 1, "4")  # the cluster changes while an old copy is still around
    c = Counting(late, 0.0)
    got = late.row_cached("k", c)
    assert c.calls == [None] and got[8] == 8000.0  # the copy's own state, computed afresh
    assert late.used_total().milli_cpu == 0.0 and parent.used_total().milli_cpu == 4000.0
    s3 = parent.copy()
    s3.carry_caches(ctx)
    c3 = Counting(s3, 0.0)
    assert s3.row_cached("k", c3)[8] == 4000.0 and c3.calls == [[8]]
