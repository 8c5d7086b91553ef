"""The incremental cluster cache against a full rebuild (the oracle).

Random sequences of object adds, updates and deletes, with sessions in between whose decisions
are written back to the objects, as both worlds do. After every step the cache must give a
session the same state (infos, node rows, warnings) and the session the same decisions as
infos built afresh from the raw objects with ``build_snapshot`` + ``build_state``.

DRA rides along: pods may use ResourceClaims (some shared between pods), nodes publish GPUs
as ResourceSlices, and binds write the claims' allocations back, as kube-scheduler's PreBind
does. After every session no device may be in two claims.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from builders import node, pod
from tidesched.model.cache import ClusterCache
from tidesched.model.objects import GROUP_NAME_ANNOTATION
from tidesched.model.snapshot import build_snapshot
from tidesched.model.state import SessionState, build_state
from tidesched.scheduler import config_from_text, open_session, run_actions

PLUGINS = """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
# With overcommit and proportion, pending groups wait for room to be enqueued (and reclaim has
# queue shares to act on); without them groups are enqueued at once and preempt gets to evict.
CONFIGS = [
    config_from_text(PLUGINS.replace("- name: drf", "- name: overcommit\n  - name: drf")),
    config_from_text(PLUGINS.replace("  - name: proportion\n", "")),
]
OURS = ("volcano",)
N_NODES, N_PODS, N_GROUPS = 4, 14, 3


def node_obj(i: int, cpu: int, gpus: int, ready: bool, zone: int) -> dict[str, Any]:
    alloc = {"cpu": str(cpu), "memory": "16Gi", "pods": "6"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    return {
        "kind": "Node",
        "metadata": {"name": f"n{i}", "labels": {"zone": f"z{zone}"}},
        "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pod_obj(
    i: int, version: int, group: int | None, ours: bool, cpu: int, gpu: bool, node: int | None,
    done: bool, deleting: bool, prio: str | None, selector: int | None, bad: bool,
    spread: str | None = None, claim: int | None = None,
) -> dict[str, Any]:
    phase = "Pending" if node is None else ("Succeeded" if done else "Running")
    requests: dict[str, str] = {"cpu": "lots" if bad else f"{cpu}", "memory": "1Gi"}
    if gpu:
        requests["nvidia.com/gpu"] = "1"
    meta: dict[str, Any] = {
        "name": f"p{i}",
        "namespace": "a",
        "uid": f"uid-{i}-{version}",
        "creationTimestamp": f"2025-01-01T00:00:{i:02d}Z",
        "annotations": {GROUP_NAME_ANNOTATION: f"g{group}"} if group is not None else {},
        "labels": {"part": str(i % 2)},  # the sub-group of a PodGroup with a subGroupPolicy
    }
    if prio == "low":
        meta["annotations"]["volcano.sh/preemptable"] = "true"
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T01:00:00Z"
    spec: dict[str, Any] = {
        "schedulerName": "volcano" if ours else "default-scheduler",
        "containers": [{"name": "c", "resources": {"requests": requests}}],
    }
    if node is not None:
        spec["nodeName"] = f"n{node}"
    if prio:
        spec["priorityClassName"] = prio
    if selector is not None:
        spec["nodeSelector"] = {"zone": f"z{selector}"}
    if spread is not None:  # topology spread: counts that sessions keep as pods move
        meta["labels"]["app"] = "web"
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": spread,
            "labelSelector": {"matchLabels": {"app": "web"}},
        }]
    if claim is not None:  # a DRA claim (pods naming the same one share it)
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"c{claim}"}]
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


N_CLAIMS = 4
DEVICE_CLASS = {
    "kind": "DeviceClass", "metadata": {"name": "gpu"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
}


def slice_obj(i: int, gpus: int, generation: int) -> dict[str, Any]:
    return {
        "kind": "ResourceSlice", "metadata": {"name": f"n{i}-gpus"},
        "spec": {"driver": "gpu.example.com", "nodeName": f"n{i}",
                 "pool": {"name": f"n{i}", "generation": generation, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{d}", "attributes": {"big": {"bool": d % 2 == 0}}} for d in range(gpus)]},
    }


def claim_obj(i: int, count: int, big: bool, held_on: int | None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "count": count}
    if big:
        exactly["selectors"] = [{"cel": {"expression": 'device.attributes["gpu.example.com"].big'}}]
    obj: dict[str, Any] = {
        "kind": "ResourceClaim", "metadata": {"name": f"c{i}", "namespace": "a", "uid": f"claim-{i}"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}, "status": {},
    }
    if held_on is not None:  # allocated before (by another scheduler), on gpu-0 of that node
        obj["status"]["allocation"] = {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": f"n{held_on}", "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [f"n{held_on}"]}]}]},
        }
    return obj


def queue_obj(name: str, weight: int) -> dict[str, Any]:
    return {"kind": "Queue", "metadata": {"name": name}, "spec": {"weight": weight}}


def class_obj(name: str, value: int, default: bool) -> dict[str, Any]:
    return {"kind": "PriorityClass", "metadata": {"name": name}, "value": value, "globalDefault": default}


# Every start has both queues and both classes, so that preempt and reclaim have work.
BASE = [queue_obj("default", 1), queue_obj("q1", 2), class_obj("high", 100, False), class_obj("low", 0, False), DEVICE_CLASS]


def group_obj(i: int, min_member: int, queue: str, phase: str, prio: str | None, sub_groups: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if prio:
        spec["priorityClassName"] = prio
    if sub_groups:  # sub-groups kept per pod as pods come, go and change status
        spec["subGroupPolicy"] = [{"name": "p", "subGroupSize": 1, "minSubGroups": 1, "matchLabelKeys": ["part"]}]
    return {
        "kind": "PodGroup",
        "metadata": {"name": f"g{i}", "namespace": "a", "creationTimestamp": f"2025-01-01T00:00:0{i}Z"},
        "spec": spec,
        "status": {"phase": phase},
    }


nodes = st.builds(
    node_obj, st.integers(0, N_NODES - 1), st.sampled_from([2, 3, 4]), st.sampled_from([0, 0, 2]),
    st.sampled_from([True, True, True, False]), st.integers(0, 1),
)
pods = st.builds(
    pod_obj,
    st.integers(0, N_PODS - 1),
    st.integers(0, 3),
    st.none() | st.integers(0, N_GROUPS - 1),
    st.booleans() | st.just(True),
    st.sampled_from([1, 2, 3]),
    st.sampled_from([False, False, True]),
    st.none() | st.integers(0, N_NODES - 1),
    st.sampled_from([False, False, False, True]),
    st.sampled_from([False, False, False, True]),
    st.sampled_from([None, "high", "low", "low"]),
    st.sampled_from([None, None, 0, 1]),
    st.sampled_from([False] * 9 + [True]),
    st.sampled_from([None, None, None, "DoNotSchedule", "ScheduleAnyway"]),
    st.sampled_from([None, None, 0, 1, 2, 3]),
)
slices = st.builds(slice_obj, st.integers(0, N_NODES - 1), st.sampled_from([1, 2, 3]), st.sampled_from([1, 1, 2]))
claims = st.builds(
    claim_obj, st.integers(0, N_CLAIMS - 1), st.sampled_from([1, 1, 2]), st.booleans(),
    st.sampled_from([None, None, None, None, 0, 1]),
)
groups = st.builds(
    group_obj, st.integers(0, N_GROUPS - 1), st.sampled_from([1, 1, 2, 3]), st.sampled_from(["default", "default", "q1", "gone"]),
    st.sampled_from(["Pending", "Inqueue", "Running"]), st.sampled_from([None, "high", "low"]),
    st.sampled_from([False, False, True]),
)
queues = st.builds(queue_obj, st.sampled_from(["default", "q1"]), st.integers(1, 3))
classes = st.builds(
    class_obj, st.sampled_from(["high", "low"]), st.integers(-5, 100), st.booleans(),
)
objects = st.one_of(pods, pods, pods, groups, nodes, queues, classes, slices, claims)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("put"), objects),
        st.tuples(st.just("put"), objects),
        st.tuples(st.just("delete"), objects),
        st.tuples(st.just("session"), st.booleans()),
    ),
    min_size=1,
    max_size=30,
)


def key_of(obj: dict[str, Any]) -> str:
    md = obj["metadata"]
    return f"{md['namespace']}/{md['name']}" if "namespace" in md else md["name"]


def describe(state: SessionState) -> dict[str, Any]:
    """Everything a session reads from its state, in a comparable form (orders included)."""
    t = state.table
    return {
        "events": [(e.kind, e.namespace, e.name, e.reason) for e in state.events],
        "priorities": (state.priority_classes, state.default_priority),
        "queues": [(q.name, q.weight, q.state, q.parent) for q in state.queues.values()],
        "jobs": [
            (
                k, j.queue, j.priority, j.min_available, j.phase, j.pod_group,
                [x.key for x in j.tasks.values()], sorted((s, c) for s, c in j.status_count.items() if c),
                j.ready_count, j.valid_count, j.pending_best_effort_total,
                j.allocated, j.total_request, sorted(j.allocated.scalars), sorted(j.total_request.scalars),
                j.fit_errors, j.conditions,
                None if j.sub_jobs is None else sorted(
                    (u, sorted(x.key for x in sj.tasks.values()), sj.ready_count, sj.waiting_count,
                     sj.pending_best_effort, sj.allocated_count) for u, sj in j.sub_jobs.by_uid.items()),
            )
            for k, j in state.jobs.items()
        ],
        "tasks": [
            (x.key, x.uid, x.job, x.priority, x.status, x.node_name, list(x.req_vec), list(x.check_cols))
            for x in state.tasks.values()
        ],
        "table": (
            t.names, t.dims, t.allocatable.tolist(), t.used.tolist(), t.releasing.tolist(),
            t.pipelined.tolist(), t.idle.tolist(), t.future_idle.tolist(), t.pod_count.tolist(),
            [[x.key for x in row.values()] for row in t.tasks],
        ),
        "dra": (
            [e.id for e in t.dra.index.entries], t.dra.use.in_use.tolist(), sorted(state.snapshot.dra.claims),
        ),
    }


def assert_same(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Equal, or a message naming the first part (and element) that differs."""
    for part, value in ours.items():
        if value != theirs[part]:
            diff = [(a, b) for a, b in zip(value, theirs[part]) if a != b]
            raise AssertionError(f"{part} differs: {diff[0] if diff else (value, theirs[part])}")


def decide(snapshot: Any, state: SessionState, n: int, config: Any = CONFIGS[0]) -> dict[str, Any]:
    ssn = open_session(snapshot, config, scheduler_names=OURS, uid=f"s{n}", now=1000.0 + n, state=state)
    d = run_actions(ssn)
    return {
        **d.to_json(),
        "claim_writes": {k: [(w.claim, w.allocation) for w in v] for k, v in d.claim_writes.items()},
        "conditions": d.podgroup_conditions,
        "queues": d.queue_allocated,
        "events": [(e.kind, e.namespace, e.name, e.reason, e.message) for e in d.events],
    }


def write_back(world: dict[tuple[str, str], dict[str, Any]], decisions: dict[str, Any]) -> list[tuple[str, str]]:
    """What a world does with decisions: binds, evictions, PodGroup phases."""
    changed = []
    for key, writes in decisions["claim_writes"].items():  # before the binds, as PreBind
        uid = world[("Pod", key)]["metadata"]["uid"]
        for claim_key, allocation in writes:
            obj = copy.deepcopy(world[("ResourceClaim", claim_key)])
            if allocation is not None:
                obj["status"]["allocation"] = allocation
            obj["status"].setdefault("reservedFor", []).append({"resource": "pods", "name": key.split("/")[1], "uid": uid})
            world[("ResourceClaim", claim_key)] = obj
            changed.append(("ResourceClaim", claim_key))
    for key, node in decisions["bound"].items():
        obj = copy.deepcopy(world[("Pod", key)])
        obj["spec"]["nodeName"] = node
        obj["status"]["phase"] = "Running"
        world[("Pod", key)] = obj
        changed.append(("Pod", key))
    for key in decisions["evicted"]:
        obj = copy.deepcopy(world[("Pod", key)])
        obj["metadata"]["deletionTimestamp"] = "2025-01-01T02:00:00Z"
        world[("Pod", key)] = obj
        changed.append(("Pod", key))
    for key, phase in decisions["podgroups"].items():
        obj = world.get(("PodGroup", key))
        if obj is not None and obj["status"]["phase"] != phase:
            obj = copy.deepcopy(obj)
            obj["status"]["phase"] = phase
            world[("PodGroup", key)] = obj
            changed.append(("PodGroup", key))
    return changed


# A cluster to start from (nodes, queues, some jobs), so that sessions have something to do.
clusters = st.tuples(
    st.lists(nodes, min_size=2, max_size=N_NODES, unique_by=key_of),
    st.lists(groups, max_size=N_GROUPS, unique_by=key_of),
    st.lists(pods, min_size=6, max_size=N_PODS, unique_by=key_of),
    st.lists(slices, min_size=2, max_size=N_NODES, unique_by=key_of),
    st.lists(claims, min_size=2, max_size=N_CLAIMS, unique_by=key_of),
)
# Half the starts end with a contended corner: a high-priority gang waiting for a node that a
# low-priority job of the same queue fills with more pods than its minimum (preempt evicts).
CONTENDED = [
    node_obj(0, 2, 0, True, 9),
    group_obj(0, 1, "default", "Running", "low"),
    group_obj(1, 1, "default", "Inqueue", "high"),
    pod_obj(N_PODS - 1, 0, 0, True, 1, False, 0, False, False, "low", None, False),
    pod_obj(N_PODS - 2, 0, 0, True, 1, False, 0, False, False, "low", None, False),
    pod_obj(N_PODS - 3, 0, 1, True, 1, False, None, False, False, "high", 9, False),
]
start = st.tuples(clusters, st.booleans()).map(
    lambda t: [*(("put", o) for o in BASE),
               *(("put", o) for o in t[0][0] + t[0][1] + t[0][2] + t[0][3] + t[0][4] + (CONTENDED if t[1] else []))]
)




@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CONFIGS), start, steps)
def test_incremental_cache_matches_a_rebuild(config: Any, first: list[tuple[str, Any]], plan: list[tuple[str, Any]]) -> None:
    cache = ClusterCache(OURS)
    world: dict[tuple[str, str], dict[str, Any]] = {}
    n = 0
    for op, arg in [*first, ("session", True), *plan]:
        if op == "put":
            ident = (arg["kind"], key_of(arg))
            world[ident] = arg
            cache.update(*ident, arg)
        elif op == "delete":
            ident = (arg["kind"], key_of(arg))
            world.pop(ident, None)
            cache.update(*ident, None)
        else:
            n += 1
            snapshot, state = cache.open()
            rebuilt_snapshot = build_snapshot(
                [world[k] for k in sorted(world)], scheduler_names=OURS, strict_kinds=False
            )
            rebuilt = build_state(rebuilt_snapshot, OURS)
            assert_same(describe(state), describe(rebuilt))
            ours = decide(snapshot, state, n, config)
            theirs = decide(rebuilt_snapshot, rebuilt, n, config)
            assert_same(ours, theirs)
            if arg:  # the world applies the decisions, and the cache hears of them
                for ident in write_back(world, ours):
                    cache.update(*ident, world[ident])
                held = build_snapshot([world[k] for k in sorted(world)], scheduler_names=OURS, strict_kinds=False).dra
                shared = {d: c for d, c in held.held_devices().items() if len(c) > 1}
                # Claims written before the first session (allocated "by another scheduler")
                # may collide among themselves; a session must never add a holder.
                for device, holders in shared.items():
                    written = {w[0] for ws in ours["claim_writes"].values() for w in ws if w[1] is not None}
                    assert not written & set(holders), f"device {device} in claims {holders}"


def test_unchanged_objects_are_not_parsed_again_and_a_quiet_cache_does_not_move() -> None:
    cache = ClusterCache(OURS)
    node = node_obj(0, 4, 0, True, 0)
    pod = pod_obj(0, 0, None, True, 1, False, None, "Pending", False, None, None, False)
    cache.update("Node", "n0", node)
    cache.update("Pod", "a/p0", pod)
    _, state = cache.open()
    gen = cache.generation
    task = state.tasks["uid-0-0"]
    # A copy of the same content (a status-only write elsewhere, a resourceVersion bump) is no change.
    cache.update("Pod", "a/p0", copy.deepcopy(pod))
    assert cache.generation == gen
    _, state2 = cache.open()
    assert state2.tasks["uid-0-0"] is task  # the same info, not rebuilt
    assert state2.table is not state.table and np.array_equal(state2.table.used, state.table.used)


def test_a_session_changes_are_put_back_before_the_next_open() -> None:
    cache = ClusterCache(OURS)
    cache.update("Node", "n0", node_obj(0, 4, 0, True, 0))
    cache.update("Pod", "a/p0", pod_obj(0, 0, None, True, 1, False, None, "Pending", False, None, None, False))
    snapshot, state = cache.open()
    d = run_actions(open_session(snapshot, CONFIGS[0], scheduler_names=OURS, state=state))
    assert d.bound == {"a/p0": "n0"}
    _, again = cache.open()  # the bind never reached the world: the pod is pending again
    task = again.tasks["uid-0-0"]
    assert task.node_name == "" and task.status.name == "PENDING"
    assert again.table.used.sum() == 0
    assert next(iter(again.jobs.values())).phase == "Pending"


def test_preparsed_objects_are_taken_by_their_update_and_dropped_at_open(monkeypatch) -> None:
    """An object parsed ahead (a page of the first list) is not parsed again when the same
    object arrives by update; a different object under the same key is; a malformed one keeps
    its warning; what no update took is gone after the next open."""
    from tidesched.model import snapshot as snapshot_module

    calls: list[str] = []
    real = dict(snapshot_module._PARSERS)
    for kind, fn in real.items():
        monkeypatch.setitem(snapshot_module._PARSERS, kind, lambda obj, fn=fn: calls.append(obj["metadata"]["name"]) or fn(obj))
    cache = ClusterCache(("volcano",))
    n1, a, b, bad = node("n1"), pod("a"), pod("b"), pod("bad")
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    for kind, key, obj in (("Node", "n1", n1), ("Pod", "ns/a", a), ("Pod", "ns/b", b), ("Pod", "ns/bad", bad)):
        cache.preparse(kind, key, obj)
    assert calls == ["n1", "a", "b", "bad"]
    cache.update("Node", "n1", n1)
    cache.update("Pod", "ns/a", a)
    cache.update("Pod", "ns/bad", bad)
    b_again = pod("b")  # changed (a new object) since its page was parsed
    cache.update("Pod", "ns/b", b_again)
    assert calls == ["n1", "a", "b", "bad", "b"]
    assert [e.name for e in cache.problems()] == ["bad"]
    cache.preparse("Pod", "ns/late", late := pod("late"))
    cache.open()
    cache.update("Pod", "ns/late", late)  # the early parse went with the open
    assert calls[-1] == "late" and calls.count("late") == 2
    snapshot, _ = cache.open()
    assert sorted(p.key for p in snapshot.pods) == ["ns/a", "ns/b", "ns/late"]


def test_a_task_a_session_allocated_and_took_back_leaves_no_zero_scalar_in_its_job() -> None:
    """A session that allocates a GPU task and takes it back within itself (a failed gang
    attempt) ends with the task's status as its pod says but ``nvidia.com/gpu: 0`` in the job's
    allocated sum; a rebuilt job names no GPU there, and comparisons whose missing dimensions
    count as infinite tell the two apart. Found by the property test above."""
    from tidesched.model.status import TaskStatus

    cache = ClusterCache(OURS)
    cache.update("Node", "n0", node_obj(0, 8, 2, True, 0))
    cache.update("Pod", "a/p0", pod_obj(0, 0, None, True, 1, True, None, "Pending", False, None, None, False))
    _, state = cache.open()
    job = next(iter(state.jobs.values()))
    task = state.tasks["uid-0-0"]
    job.update_task_status(task, TaskStatus.ALLOCATED)
    job.update_task_status(task, TaskStatus.PENDING)
    assert job.allocated.scalars == {"nvidia.com/gpu": 0.0}  # what the session left
    _, again = cache.open()
    assert next(iter(again.jobs.values())).allocated.scalars == {}


def test_sub_groups_follow_their_pods_in_the_cache_as_in_a_rebuild() -> None:
    """A PodGroup's sub-groups (model/sub_jobs.py) as pods come, go, change partition and run,
    and as the PodGroup's policy changes: the cache's equal a rebuild's after each change."""
    cache = ClusterCache(OURS)
    world: dict[str, tuple[str, dict[str, Any]]] = {}

    def put(kind: str, key: str, obj: dict[str, Any] | None) -> None:
        cache.update(kind, key, obj)
        if obj is None:
            world.pop(key, None)
        else:
            world[key] = (kind, obj)

    def check() -> dict[str, Any]:
        snapshot, state = cache.open()
        rebuilt = build_state(build_snapshot([o for _k, o in world.values()]), OURS)
        ours, theirs = describe(state), describe(rebuilt)
        assert_same(ours, theirs)
        return {k: j for k, j in state.jobs.items()}

    put("Node", "n0", node_obj(0, 4, 0, True, 0))
    put("PodGroup", "a/g0", group_obj(0, 2, "default", "Inqueue", None, sub_groups=True))
    for i in range(3):
        put("Pod", f"a/p{i}", pod_obj(i, 0, 0, True, 1, False, None, False, False, None, None, False))
    jobs = check()
    assert sorted(jobs["a/g0"].sub_jobs.by_uid) == ["a/g0/p-0", "a/g0/p-1"]
    put("Pod", "a/p1", None)  # partition 1 loses its only pod
    assert sorted(check()["a/g0"].sub_jobs.by_uid) == ["a/g0/p-0"]
    moved = pod_obj(2, 1, 0, True, 1, False, 0, False, False, None, None, False)
    moved["metadata"]["labels"]["part"] = "7"  # runs now, in another partition
    put("Pod", "a/p2", moved)
    subs = check()["a/g0"].sub_jobs.by_uid
    assert sorted(subs) == ["a/g0/p-0", "a/g0/p-7"] and subs["a/g0/p-7"].ready_count == 1
    put("PodGroup", "a/g0", group_obj(0, 2, "default", "Inqueue", None))  # the policy goes
    assert check()["a/g0"].sub_jobs is None
