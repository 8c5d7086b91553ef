"""One deterministic test per crash class the fuzzing found (docs/fuzzing.md): each input once
raised from deep inside; now it is a message naming the file, object and field."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from builders import node, pod, podgroup, queue
from tidesched.cli import app
from tidesched.model.cards import CardCatalog, parse_card_quota, parse_card_request
from tidesched.model.fields import parse_count, parse_flag, parse_int, parse_json, parse_str, str_map
from tidesched.model.loader import InputError, load_text
from tidesched.model.objects import parse_node, parse_pod, parse_podgroup, parse_queue
from tidesched.model.problems import ObjectError
from tidesched.model.snapshot import build_snapshot
from tidesched.scheduler import config_from_text, open_session, run_actions

import contract


def test_non_mapping_objects_handed_to_the_snapshot_are_reported() -> None:
    snap = build_snapshot([node("n1"), "junk", 5, None, ["a"]], strict_kinds=False)
    assert [n.name for n in snap.nodes] == ["n1"]
    assert len(snap.problems) == 4
    assert all("expected a Kubernetes object (mapping)" in p.message for p in snap.problems)


@pytest.mark.parametrize("count", ["1" + "0" * 400, "1e400", "-1", "1.5", '"2"', "true", "9223372036854775808"])
def test_card_counts_out_of_range_are_dropped_with_a_problem(count: str) -> None:
    quota, problems = parse_card_quota('{"NVIDIA-H200": %s, "NVIDIA-A100": 2}' % count)
    assert quota == {"NVIDIA-A100": 2000.0}
    assert len(problems) == 1 and "NVIDIA-H200" in problems[0] and len(problems[0]) < 300
    req = parse_card_request('{"NVIDIA-H200": %s}' % count, CardCatalog())
    assert not req.demands and req.problems


@pytest.mark.parametrize("raw", ["[" * 50_000, '{"a":' * 50_000, '{"a": 1' + "0" * 5000 + "}"])
def test_deep_or_overlong_json_annotations_are_problems(raw: str) -> None:
    quota, problems = parse_card_quota(raw)
    assert quota == {} and "not valid JSON" in problems[0]
    with pytest.raises(ObjectError, match=r"^metadata.annotations\[x\]: invalid JSON"):
        parse_json(raw, "metadata.annotations[x]")


@pytest.mark.parametrize("text", ["[" * 50_000, '{"kind": "Pod", "metadata": ' + "[" * 5000 + "]" * 5000 + "}"])
def test_deeply_nested_manifest_files_are_input_errors(text: str) -> None:
    with pytest.raises(InputError, match=r"^deep\.json"):
        load_text(text, "deep.json")


def test_a_loader_error_inside_json_keeps_its_own_message() -> None:
    with pytest.raises(InputError, match=r"^x\.json\[1\]: expected a Kubernetes object"):
        load_text(json.dumps([node("n1"), "junk"]), "x.json")


@pytest.mark.parametrize("value", ["Inf", "NaN", float("inf"), "1e400", "١٠", "1_000", True, [1], 2**63, "9" * 5000])
def test_integers_are_refused_with_the_field(value: object) -> None:
    with pytest.raises(ObjectError, match=r"^spec\.minMember: "):
        parse_int(value, "spec.minMember", bounds=(0, 2**31 - 1))


def test_counts_and_flags_and_strings() -> None:
    assert parse_count(2.0, "c") == 2 and parse_count(3, "c") == 3
    for bad in ("2", True, -1, 1.5, float("nan")):
        with pytest.raises(ObjectError):
            parse_count(bad, "c")
    assert parse_flag("false", "spec.unschedulable") is False and parse_flag(None, "f", True) is True
    with pytest.raises(ObjectError, match="spec.unschedulable"):
        parse_flag("no", "spec.unschedulable")
    assert parse_str(None, "spec.queue", "default") == "default"
    with pytest.raises(ObjectError, match=r"^spec\.queue: expected a string"):
        parse_str({"a": 1}, "spec.queue")
    assert str_map({"labels": {"a": 8, "b": True, "c": None}}, "labels", "metadata.labels") == {"a": "8", "b": "true", "c": ""}
    with pytest.raises(ObjectError, match=r"^metadata.annotations\[x\]: expected a string"):
        str_map({"annotations": {"x": {"A100": 2}}}, "annotations", "metadata.annotations")


def test_wrong_typed_string_and_bool_fields_name_the_field() -> None:
    pg = podgroup("pg", queue="q")
    pg["spec"]["queue"] = {"name": "q"}
    with pytest.raises(ObjectError, match=r"^spec\.queue"):
        parse_podgroup(pg)
    q = queue("q", weight=1)
    q["spec"]["parent"] = ["root"]
    with pytest.raises(ObjectError, match=r"^spec\.parent"):
        parse_queue(q)
    n = node("n1")
    n["spec"]["unschedulable"] = "false"  # a string, read as Go's ParseBool reads it
    assert parse_node(n).unschedulable is False
    p = pod("p")
    p["spec"]["nodeName"] = 7
    with pytest.raises(ObjectError, match=r"^spec\.nodeName"):
        parse_pod(p)


def test_plugin_argument_errors_name_the_file_line_and_field() -> None:
    text = """actions: "enqueue, allocate"
tiers:
- plugins:
  - name: capacity-card
    arguments:
      podOwnerReferenceToServiceType:
        Job: 5
"""
    from tidesched.framework.arguments import ConfigError

    with pytest.raises(ConfigError) as err:
        config_from_text(text, "sched.conf")
    assert str(err.value).startswith("sched.conf:")
    assert "tiers[0].plugins[0].arguments['podOwnerReferenceToServiceType']" in str(err.value)


def test_schedule_exits_2_naming_the_file_for_a_huge_card_quota_no_traceback(tmp_path) -> None:
    q = queue("q1", weight=1)
    q["metadata"]["annotations"] = {"volcano.sh/card.quota": '{"NVIDIA-H200": 1' + "0" * 400 + "}"}
    objs = [node("n1"), q, podgroup("pg", queue="q1"), pod("p", group="pg")]
    # The quota entry is dropped (DEC-6): the objects themselves are valid, the session runs.
    snap = contract.check_snapshot(objs)
    assert snap is not None and not snap.problems
    contract.check_session(snap, "capacity-card")
    path = tmp_path / "in.json"
    path.write_text(json.dumps(objs + [{"kind": 5}]))
    result = CliRunner().invoke(app, ["schedule", str(path)])
    assert result.exit_code == 2 and "in.json" in result.output and "Traceback" not in result.output


def test_session_over_a_cluster_with_every_bad_annotation_runs() -> None:
    objs = [node("n1", nvidia__gpu="8", labels={"nvidia.com/gpu.product": "NVIDIA-H200"})]
    bad = ["[" * 10_000, '{"NVIDIA-H200": 1e400}', '{"NVIDIA-H200": -1}', "null", '{"|": 1}']
    for i, raw in enumerate(bad):
        q = queue(f"q{i}", weight=1)
        q["metadata"]["annotations"] = {"volcano.sh/card.quota": raw}
        pg = podgroup(f"pg{i}", queue=f"q{i}")
        pg["metadata"]["annotations"] = {"volcano.sh/card.request": raw}
        objs += [q, pg, pod(f"p{i}", group=f"pg{i}", extra_requests={"nvidia.com/gpu": "1"},
                            annotations={"volcano.sh/card.name": "NVIDIA-H200"})]
    snap = build_snapshot(objs)
    assert not snap.problems
    d = run_actions(open_session(snap, contract.config("capacity-card")))
    assert d.bound == {}  # every queue has no usable quota for the model: nothing may be bound


@pytest.mark.parametrize("section", ["podAffinity", "podAntiAffinity", "nodeAffinity"])
def test_affinity_term_lists_of_the_wrong_type_name_the_field(section: str) -> None:
    p = pod("p", group="pg")
    p["spec"]["affinity"] = {section: {"requiredDuringSchedulingIgnoredDuringExecution": -1}}
    with pytest.raises(ObjectError, match=rf"^spec\.affinity\.{section}\.requiredDuringScheduling"):
        parse_pod(p)
    p["spec"]["affinity"] = {section: {"preferredDuringSchedulingIgnoredDuringExecution": [5]}}
    with pytest.raises(ObjectError, match=rf"^spec\.affinity\.{section}\.preferredDuringScheduling\w+\[0\]"):
        parse_pod(p)
    # The session over the rest runs.
    snap = build_snapshot([node("n1"), queue("default", weight=1), podgroup("pg"), p])
    assert len(snap.problems) == 1
    run_actions(open_session(snap, contract.config("default")))


@pytest.mark.parametrize("field, value", [("effect", 5), ("key", ["a"]), ("operator", {"x": 1})])
def test_toleration_fields_of_the_wrong_type_name_the_field(field: str, value: object) -> None:
    """Found after the merge of issue 12 (fuzz seed 2): the taint matcher raised from inside a
    session; the pod is now refused where it is read."""
    raw = pod("p", "pg", spec={"tolerations": [{"key": "k", "operator": "Exists", field: value}]})
    with pytest.raises(ObjectError, match=rf"spec\.tolerations\[0\]\.{field}"):
        parse_pod(raw)
    snap = build_snapshot([node("n1"), queue("default"), podgroup("pg"), raw])
    assert [p.message for p in snap.problems if f"spec.tolerations[0].{field}" in p.message]


def test_simulated_pod_with_a_status_that_is_not_a_mapping_is_reported_not_raised(tmp_path) -> None:
    """Found after the merge (fuzz seed 2): submitting a bound pod whose status is a number
    raised in the simulator's submit; the cache reports the pod instead."""
    from tidesched.sim.runner import run

    bad = pod("p", node="n1", phase="Running")
    bad["status"] = 1.5
    path = tmp_path / "manifests.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node("n1"), bad]}))
    sim = run(path)
    assert not sim.result["invariants"]["violations"]
    assert any("Pod ns/p: status: expected a mapping" in e["message"] for e in sim.result["events"])
