"""Parsing raw objects into typed records (model/objects.py, snapshot.py, loader.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import node, pod, podgroup, queue
from tidesched.model.loader import InputError, load_paths, load_text
from tidesched.model.objects import (
    INT32,
    ObjectError,
    parse_int,
    parse_node,
    parse_pdb,
    parse_pod,
    parse_podgroup,
    parse_queue,
)
from tidesched.model.snapshot import UnknownKindError, build_snapshot
from tidesched.model.status import TaskStatus


@pytest.mark.parametrize(
    "phase,node_name,deleting,expected",
    [
        ("Pending", "", False, TaskStatus.PENDING),
        ("Pending", "n1", False, TaskStatus.BOUND),
        ("Running", "n1", False, TaskStatus.RUNNING),
        ("Running", "n1", True, TaskStatus.RELEASING),
        ("Pending", "n1", True, TaskStatus.RELEASING),
        ("Succeeded", "n1", False, TaskStatus.SUCCEEDED),
        ("Failed", "n1", False, TaskStatus.FAILED),
        ("Unknown", "n1", False, TaskStatus.UNKNOWN),
    ],
)
def test_task_status_from_pod(phase: str, node_name: str, deleting: bool, expected: TaskStatus) -> None:
    p = parse_pod(pod("p", node=node_name, phase=phase, deleting=deleting))
    assert p.status == expected


def test_requests_default_to_limits_and_init_containers_take_max() -> None:
    raw = pod("p", cpu=None, memory=None)
    raw["spec"]["containers"] = [
        {"name": "a", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}, "requests": {"cpu": "500m"}}},
        {"name": "b", "resources": {"requests": {"memory": "1Gi"}}},
    ]
    raw["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "3"}}}]
    p = parse_pod(raw)
    assert p.resreq.milli_cpu == 500  # the explicit request wins over the limit
    assert p.resreq.scalars == {"nvidia.com/gpu": 1000}  # limit used as the request
    assert p.resreq.memory == 1024**3
    assert p.init_resreq.milli_cpu == 3000
    assert not p.init_resreq.is_best_effort()


def test_nonzero_request_defaults_each_container_naming_no_request() -> None:
    """kube-scheduler's scorers count a container that names no cpu (memory) request as 100m
    (200Mi); one that names 0 counts 0; a limit stands for the request; init containers and
    the overhead as in init_resreq."""
    mi = 1024**2
    raw = pod("p", cpu=None, memory=None)
    raw["spec"]["containers"] = [
        {"name": "a"},  # nothing named: 100m, 200Mi
        {"name": "b", "resources": {"requests": {"cpu": "0"}, "limits": {"memory": "1Gi"}}},  # 0, 1Gi
    ]
    assert parse_pod(raw).nonzero_request == (100.0, 200 * mi + 1024 * mi)
    raw["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "2"}}}]  # 2000m, 200Mi
    raw["spec"]["overhead"] = {"cpu": "50m", "memory": "10Mi"}
    assert parse_pod(raw).nonzero_request == (2050.0, 1234 * mi)
    assert parse_pod(pod("q", cpu="1", memory="1Gi")).nonzero_request == (1000.0, 1024 * mi)


def test_best_effort_pod_ignores_pods_resource() -> None:
    p = parse_pod(pod("p", cpu=None, memory=None))
    assert p.init_resreq.is_best_effort()


def test_preemptable_annotation_then_label_default_true() -> None:
    assert parse_pod(pod("p")).preemptable is True
    assert parse_pod(pod("p", annotations={"volcano.sh/preemptable": "false"})).preemptable is False
    assert parse_pod(pod("p", labels={"volcano.sh/preemptable": "false"})).preemptable is False
    assert parse_pod(pod("p", annotations={"volcano.sh/preemptable": "maybe"})).preemptable is False


def test_task_role_and_priority_annotation() -> None:
    p = parse_pod(pod("p", annotations={"volcano.sh/task-spec": "worker", "volcano.sh/task-priority": "7"}))
    assert p.role == "worker" and p.priority == 7
    assert parse_pod(pod("p", labels={"volcano.sh/task-spec": "ps"})).role == "ps"


def test_invalid_quantity_names_the_field() -> None:
    with pytest.raises(ObjectError, match=r"spec.containers\[0\].resources.*4Gix"):
        parse_pod(pod("p", memory="4Gix"))


def test_node_ready_condition_and_capacity_fallback() -> None:
    raw = node("n1")
    raw["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    assert parse_node(raw).ready is False
    raw = {"kind": "Node", "metadata": {"name": "n2"}, "status": {"capacity": {"cpu": "2", "pods": "10"}}}
    n = parse_node(raw)
    assert n.ready and n.allocatable.milli_cpu == 2000 and n.allocatable.max_task_num == 10


def test_podgroup_and_queue_defaults() -> None:
    pg = parse_podgroup({"kind": "PodGroup", "metadata": {"name": "pg"}})
    assert (pg.min_member, pg.queue, pg.phase, pg.min_resources) == (1, "default", "Pending", None)
    q = parse_queue({"kind": "Queue", "metadata": {"name": "q"}})
    assert (q.weight, q.reclaimable, q.state, q.capability_set) == (1, True, "Open", False)
    with pytest.raises(ObjectError, match="spec.reclaimable"):
        parse_queue(queue("q", reclaimable="perhaps"))
    with pytest.raises(ObjectError, match="status.phase"):
        parse_podgroup({"kind": "PodGroup", "metadata": {"name": "pg"}, "status": {"phase": "Bogus"}})


def test_snapshot_skips_malformed_objects_with_warning() -> None:
    snap = build_snapshot([node("n1"), pod("good", "pg"), pod("bad", "pg", cpu="lots"), podgroup("pg")])
    assert [p.meta.name for p in snap.pods] == ["good"]
    assert len(snap.problems) == 1
    ev = snap.problems[0]
    assert (ev.kind, ev.name, ev.type, ev.reason) == ("Pod", "bad", "Warning", "InvalidObject")
    assert "lots" in ev.message


def test_snapshot_unknown_kind_is_an_error_when_strict() -> None:
    with pytest.raises(UnknownKindError, match="Widget"):
        build_snapshot([{"kind": "Widget", "metadata": {"name": "w"}}])
    snap = build_snapshot([{"kind": "Widget", "metadata": {"name": "w"}}], strict_kinds=False)
    assert snap.problems[0].reason == "UnknownKind"
    assert build_snapshot([{"kind": "Deployment", "metadata": {"name": "d"}}]).ignored


def test_snapshot_synthesizes_podgroup_for_bare_pod_and_default_queue() -> None:
    raw = pod("bare", annotations={"scheduling.volcano.sh/queue-name": "q1", "volcano.sh/service.type": "inference"})
    snap = build_snapshot([raw, queue("q1")])
    (pg,) = snap.podgroups
    assert pg.queue == "q1" and pg.min_member == 1
    assert pg.meta.annotations == {"volcano.sh/service.type": "inference"}
    assert snap.pods[0].group_name == pg.meta.name
    assert {q.name for q in snap.queues} == {"q1", "default"}


def test_duplicate_objects_later_wins() -> None:
    snap = build_snapshot([node("n1", cpu="1"), node("n1", cpu="2")])
    assert len(snap.nodes) == 1 and snap.nodes[0].allocatable.milli_cpu == 2000
    assert snap.problems[0].reason == "DuplicateObject"


def _pdb(name: str = "db", namespace: str | None = "shop", **parts) -> dict:
    meta = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta, **parts}


def test_pdb_record() -> None:
    rec = parse_pdb(_pdb(
        spec={"minAvailable": 2, "selector": {"matchLabels": {"app": "db", "replicas": 3},
                                                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["test"]}]}},
        status={"disruptionsAllowed": 1, "disruptedPods": {"db-0": "2026-01-01T00:00:00Z"}, "currentHealthy": 3},
    ))
    assert (rec.key, rec.namespace, rec.name, rec.disruptions_allowed) == ("shop/db", "shop", "db", 1)
    assert rec.disrupted_pods == frozenset({"db-0"})
    assert rec.covers("shop", {"app": "db", "replicas": "3"})  # YAML ints compared as label strings
    assert not rec.covers("shop", {"app": "db", "replicas": "3", "tier": "test"})
    assert not rec.covers("other", {"app": "db", "replicas": "3"})  # only its own namespace
    with pytest.raises(AttributeError):
        rec.disruptions_allowed = 5  # type: ignore[misc]


def test_pdb_defaults_and_selectors_that_guard_nothing() -> None:
    rec = parse_pdb(_pdb(namespace=None, spec={"selector": {"matchLabels": {"app": "db"}}}))
    assert rec.namespace == "default" and rec.disruptions_allowed == 0 and rec.disrupted_pods == frozenset()
    # kube-scheduler's preemption: a nil or empty selector matches no pod; a pod without
    # labels is never guarded, even by a selector that would match an empty label set.
    for spec in ({}, {"selector": None}, {"selector": {}}, {"selector": {"matchLabels": {}, "matchExpressions": []}}):
        assert not parse_pdb(_pdb(spec=spec)).covers("shop", {"app": "db"})
    absent = parse_pdb(_pdb(spec={"selector": {"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}}))
    assert absent.covers("shop", {"app": "db"}) and not absent.covers("shop", {})


@pytest.mark.parametrize(
    "parts,field",
    [
        ({"spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}}},
         "spec.selector.matchExpressions[0].operator"),
        ({"spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}},
         "spec.selector.matchExpressions[0].values"),
        ({"spec": {"selector": "app=db"}}, "spec.selector"),
        ({"spec": {"selector": {"matchLabels": ["app"]}}}, "spec.selector.matchLabels"),
        ({"spec": []}, "spec"),
        ({"status": {"disruptionsAllowed": "lots"}}, "status.disruptionsAllowed"),
        ({"status": {"disruptionsAllowed": 1.5}}, "status.disruptionsAllowed"),
        ({"status": {"disruptionsAllowed": -1}}, "status.disruptionsAllowed"),
        ({"status": {"disruptedPods": ["db-0"]}}, "status.disruptedPods"),
    ],
)
def test_malformed_pdb_names_the_field(parts: dict, field: str) -> None:
    with pytest.raises(ObjectError) as err:
        parse_pdb(_pdb(**parts))
    assert err.value.field == field


def test_snapshot_holds_pdbs_and_skips_malformed_ones_with_a_warning() -> None:
    good = _pdb("good", spec={"selector": {"matchLabels": {"app": "db"}}}, status={"disruptionsAllowed": 2})
    bad = _pdb("bad", spec={"selector": {"matchExpressions": [{"key": "app", "operator": "Bogus"}]}})
    nameless = {"kind": "PodDisruptionBudget", "metadata": {"namespace": "shop"}}
    snap = build_snapshot([node("n1"), good, bad, nameless])
    assert [(p.key, p.disruptions_allowed) for p in snap.pdbs] == [("shop/good", 2)]
    assert not snap.ignored
    assert [(e.kind, e.namespace, e.name, e.type, e.reason) for e in snap.problems] == [
        ("PodDisruptionBudget", "shop", "bad", "Warning", "InvalidObject"),
        ("PodDisruptionBudget", "shop", "", "Warning", "InvalidObject"),
    ]
    assert "Bogus" in snap.problems[0].message and "metadata.name" in snap.problems[1].message


def test_snapshot_pdb_identity_is_namespace_and_name() -> None:
    snap = build_snapshot([_pdb("db", "a", status={"disruptionsAllowed": 1}), _pdb("db", "b"),
                           _pdb("db", "a", status={"disruptionsAllowed": 3})])
    assert sorted((p.key, p.disruptions_allowed) for p in snap.pdbs) == [("a/db", 3), ("b/db", 0)]
    assert [e.reason for e in snap.problems] == ["DuplicateObject"]


def test_loader_yaml_json_and_lists(tmp_path) -> None:
    (tmp_path / "a.yaml").write_text("kind: Node\nmetadata: {name: a}\n---\nkind: List\nitems:\n- kind: Node\n  metadata: {name: b}\n")
    (tmp_path / "b.json").write_text('[{"kind": "Node", "metadata": {"name": "c"}}]')
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "c.yml").write_text("kind: Node\nmetadata: {name: d}\n")
    names = [m.obj["metadata"]["name"] for m in load_paths([tmp_path])]
    assert names == ["a", "b", "c", "d"]


def test_loader_reports_bad_yaml_with_line() -> None:
    with pytest.raises(InputError, match=r"x.yaml:4: invalid YAML: did not find expected"):
        load_text("kind: Node\nmetadata:\n  name: [a\n", "x.yaml")
    with pytest.raises(InputError, match="no such file"):
        load_paths(["/nonexistent/dir"])



@given(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                 st.text(max_size=30), st.lists(st.integers(), max_size=2)))
def test_parse_int_returns_an_integer_or_names_the_field(value: object) -> None:
    try:
        n = parse_int(value, "spec.x", default=5, bounds=INT32)
    except ObjectError as exc:
        assert "spec.x" in str(exc)
        return
    assert isinstance(n, int) and INT32[0] <= n <= INT32[1]
    if value is None:
        assert n == 5
    elif isinstance(value, int):
        assert n == value


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_parse_int_reads_whole_numbers_in_every_spelling(n: int) -> None:
    assert parse_int(n, "f") == parse_int(str(n), "f") == parse_int(f" {n} ", "f") == n
    if abs(n) < 2**52:
        assert parse_int(float(n), "f") == parse_int(f"{n}.0", "f") == n


def test_objects_from_a_world_with_a_kind_that_is_no_string_are_reported() -> None:
    snap = build_snapshot([{"kind": ["Pod"], "metadata": {"name": "x", "namespace": "ns"}}], strict_kinds=False)
    assert [p.reason for p in snap.problems] == ["InvalidObject"]
    assert "field kind must be a string" in snap.problems[0].message


@pytest.mark.parametrize("weight", ["true", True, "3", 2.5, None, [1]])
def test_preferred_pod_affinity_weight_must_be_an_integer(weight: object) -> None:
    """nodeorder multiplies scores by this weight: a pod whose weight is no integer is refused
    at parse time, naming the field, and the rest of the cluster is scheduled (found by the
    object fuzzer: such a weight used to fail a whole session)."""
    term = {"weight": weight, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                  "labelSelector": {"matchLabels": {"app": "x"}}}}
    for kind in ("podAffinity", "podAntiAffinity"):
        raw = pod("odd", "pg", spec={"affinity": {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}})
        with pytest.raises(ObjectError, match=rf"spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution\[0\].weight"):
            parse_pod(raw)
        snap = build_snapshot([node("n1"), pod("good", "pg"), raw, podgroup("pg")])
        assert [p.meta.name for p in snap.pods] == ["good"]
        assert [(e.name, e.reason) for e in snap.problems] == [("odd", "InvalidObject")]
    ok = pod("fine", "pg", spec={"affinity": {"podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{**term, "weight": 7}]}}})
    assert parse_pod(ok).affinity["podAffinity"]
