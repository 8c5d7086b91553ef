"""The session's row-local paths (Session.predicate_mask, Session.node_order_all: one cached
vector per task class, recomputed only where rows changed) give exactly what the full
per-task predicate and node_order give, through placements, pipelines, evictions and their
undoing; and binpack's one-row scores equal its vectorised ones."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import node, pod, podgroup, queue
from tidesched.framework.statement import Statement
from tidesched.model.snapshot import build_snapshot
from tidesched.model.status import TaskStatus
from tidesched.scheduler import config_from_text, open_session

CONFIG = """
actions: "allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
    arguments:
      mostrequested.weight: 1
  - name: binpack
    arguments:
      binpack.resources: nvidia.com/gpu
      binpack.resources.nvidia.com/gpu: 3
"""

ZONES = ["a", "b", "c"]


@st.composite
def worlds(draw):
    n_nodes = draw(st.integers(2, 9))
    objs = [queue("default", weight=1)]
    names = []
    for i in range(n_nodes):
        taints = []
        if draw(st.integers(0, 3)) == 0:
            taints.append({"key": "spot", "value": "yes", "effect": draw(st.sampled_from(["PreferNoSchedule", "NoSchedule"]))})
        gpus = draw(st.sampled_from(["0", "2", "8"]))
        extra = {"nvidia.com/gpu": gpus} if gpus != "0" else {}
        n = node(f"n{i}", cpu=draw(st.sampled_from(["2", "4", "16"])), memory=draw(st.sampled_from(["4Gi", "16Gi"])),
                 pods=draw(st.sampled_from(["3", "110"])), labels={"zone": draw(st.sampled_from(ZONES))},
                 taints=taints, unschedulable=draw(st.integers(0, 9)) == 0)
        n["status"]["allocatable"].update(extra)
        objs.append(n)
        names.append(f"n{i}")
    for j in range(draw(st.integers(0, 6))):  # running pods: rows start with some usage
        spec = None
        if draw(st.integers(0, 5)) == 0:  # a placed pod whose anti-affinity binds newcomers
            spec = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "x"}}}]}}}
        objs.append(pod(f"run-{j}", cpu=draw(st.sampled_from(["500m", "1", "3"])), node=draw(st.sampled_from(names)),
                        phase="Running", labels={"app": draw(st.sampled_from(["x", "y"]))}, spec=spec))
    for j in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 4))
        objs.append(podgroup(f"g{j}", min_member=1))
        spec: dict = {}
        if draw(st.booleans()):
            spec["nodeSelector"] = {"zone": draw(st.sampled_from(ZONES))}
        if draw(st.booleans()):
            spec["tolerations"] = [{"key": "spot", "operator": "Exists"}]
        if draw(st.booleans()):
            spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": draw(st.integers(1, 50)), "preference": {"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": [draw(st.sampled_from(ZONES))]}]}}]}}
        if draw(st.integers(0, 4)) == 0:
            spec["affinity"] = {**spec.get("affinity", {}), "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "y"}}}]}}
        if draw(st.integers(0, 4)) == 0:
            spec["containers"] = [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}],
                                   "resources": {"requests": {"cpu": "100m"}}}]
        extra = {"nvidia.com/gpu": draw(st.sampled_from(["1", "2"]))} if draw(st.booleans()) else None
        cpu = draw(st.sampled_from([None, "250m", "1", "2"]))
        for k in range(size):
            objs.append(pod(f"g{j}-w-{k}", group=f"g{j}", cpu=cpu, extra_requests=extra, spec=dict(spec)))
    steps = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10**6)), min_size=1, max_size=25))
    return objs, steps


def _assert_same(ssn, task) -> None:
    table = ssn.table
    for name, row_fn in ssn._row_fns["node_order"].items():  # few-row (plain float) vs all-row forms
        if row_fn.key(task) is not None:
            rows = np.arange(min(len(table), 8))
            assert np.array_equal(row_fn.rows(task, rows), row_fn.rows(task, None)[rows]), name
    assert np.array_equal(table.fits_cached(task, "future"), table.fits(task, table.future_idle))
    assert np.array_equal(table.fits_cached(task, "idle"), table.fits(task, table.idle))
    full = ssn.predicate(task).passed
    assert np.array_equal(ssn.predicate_mask(task), full)
    fast = ssn.node_order_all(task)
    idx = np.flatnonzero(full)
    if fast is not None and len(idx):
        assert np.array_equal(fast[idx], ssn.node_order(task, idx))


@settings(max_examples=120, deadline=None)
@given(worlds())
def test_row_local_paths_equal_full_paths(world) -> None:
    objs, steps = world
    ssn = open_session(build_snapshot(objs), config_from_text(CONFIG))
    pending = sorted((t for t in ssn.tasks.values() if t.status == TaskStatus.PENDING), key=lambda t: t.uid)
    running = sorted((t for t in ssn.tasks.values() if t.status == TaskStatus.RUNNING), key=lambda t: t.uid)
    stmt = Statement(ssn)
    checked_fast = 0
    for op, pick in steps:
        for task in pending:
            _assert_same(ssn, task)
            checked_fast += ssn.node_order_all(task) is not None
        waiting = [t for t in pending if t.status == TaskStatus.PENDING]
        if op <= 1 and waiting:  # place a task on a node it fits (allocate or pipeline)
            task = waiting[pick % len(waiting)]
            rows = np.flatnonzero(ssn.predicate(task).passed & ssn.table.fits_cached(task, "future"))
            if len(rows):
                name = ssn.table.names[int(rows[pick % len(rows)])]
                (stmt.allocate if op == 0 else stmt.pipeline)(task, name)
        elif op == 2 and running:  # evict a running pod: its row frees resources and a slot
            victim = running[pick % len(running)]
            if victim.status == TaskStatus.RUNNING:
                stmt.evict(victim, "test")
        elif op == 3:  # undo everything staged so far
            stmt.discard()
    for task in pending:
        _assert_same(ssn, task)


def test_worlds_exercise_the_fast_path() -> None:
    """A plain pod in a taint-free cluster takes the row-local path for both hooks."""
    objs = [queue("default", weight=1), node("n0"), node("n1"), podgroup("g"), pod("g-w-0", group="g")]
    ssn = open_session(build_snapshot(objs), config_from_text(CONFIG))
    task = next(iter(ssn.tasks.values()))
    assert ssn._row_vector("predicate", task) is not None
    assert ssn.node_order_all(task) is not None
    # A pod with preferred pod affinity is scored against placed pods: the full path.
    objs[-1]["spec"]["affinity"] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {"matchLabels": {"x": "y"}}}}]}}
    ssn = open_session(build_snapshot(objs), config_from_text(CONFIG))
    assert ssn.node_order_all(next(iter(ssn.tasks.values()))) is None


amount = st.one_of(st.just(0.0), st.floats(1e-3, 1e12, allow_nan=False), st.integers(0, 10**6).map(float))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(amount, amount, amount, amount, amount, amount), min_size=1, max_size=6),
       st.tuples(amount, amount, amount))
def test_binpack_row_scores_equal_vector_scores(rows, request) -> None:
    """binpack's plain-float path for a few rows (≤ 8) against its numpy path (more rows)."""
    objs = [queue("default", weight=1)]
    for i, (cpu, mem, gpu, *_used) in enumerate(rows):
        n = node(f"n{i}", cpu=f"{int(cpu)}m", memory=str(int(mem)), pods="110")
        n["status"]["allocatable"]["nvidia.com/gpu"] = str(int(gpu))
        objs.append(n)
    for i, (_c, _m, _g, ucpu, umem, ugpu) in enumerate(rows):
        objs.append(pod(f"u{i}", cpu=f"{int(ucpu)}m", memory=str(int(umem)), node=f"n{i}", phase="Running",
                        extra_requests={"nvidia.com/gpu": str(int(ugpu))}))
    cpu, mem, gpu = request
    objs += [podgroup("g"), pod("g-w-0", group="g", cpu=f"{int(cpu)}m", memory=str(int(mem)),
                                 extra_requests={"nvidia.com/gpu": str(int(gpu))})]
    ssn = open_session(build_snapshot(objs), config_from_text(CONFIG))
    task = next(t for t in ssn.tasks.values() if t.status == TaskStatus.PENDING)
    row_fn = ssn._row_fns["node_order"]["binpack"]
    all_rows = row_fn.rows(task, None)  # numpy path
    few = row_fn.rows(task, np.arange(len(rows)))  # plain floats (len ≤ 8)
    assert np.array_equal(all_rows, few)
