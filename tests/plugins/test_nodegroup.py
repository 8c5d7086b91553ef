"""nodegroup plugin: Queue spec.affinity parsing, per-node predicate verdicts and scores.

``test_volcano_node_group_cases`` and ``test_volcano_resource_limit_cases`` follow the situations of Volcano's
plugins/nodegroup/nodegroup_test.go (TestNodeGroup, TestNodeGroupResourceLimits,
TestNodeGroupResourceLimitAllocationEvent), written here in our own terms; the rest cover
tidesched's additions (exclusive groups, the pod's node-group label) and bad input.
Decisions end to end are in tests/scenarios/nodegroup.yaml.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from builders import node, pod, podgroup, queue
from tidesched.framework.arguments import ConfigError
from tidesched.framework.statement import Statement
from tidesched.model.objects import NodeGroupAffinity, parse_queue
from tidesched.model.snapshot import build_snapshot
from tidesched.plugins.nodegroup import NODE_GROUP_LABEL, POD_GROUP_LABEL, RESOURCE_LIMITS_ANNOTATION
from tidesched.scheduler import config_from_text, open_session

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def affinity(req=None, pref=None, anti_req=None, anti_pref=None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if req is not None or pref is not None:
        out["nodeGroupAffinity"] = {k: v for k, v in ((REQ, req), (PREF, pref)) if v is not None}
    if anti_req is not None or anti_pref is not None:
        out["nodeGroupAntiAffinity"] = {k: v for k, v in ((REQ, anti_req), (PREF, anti_pref)) if v is not None}
    return out


# Both the root queue and q1 use this rule set in Volcano's test.
FULL = affinity(req=["group1", "group3"], pref=["group3"], anti_req=["group2", "group4"], anti_pref=["group4"])


def five_nodes() -> list[dict]:
    """group1..group4 and one node without a group label."""
    nodes = [node("n1", cpu="2", memory="4Gi", labels={NODE_GROUP_LABEL: "group1"})]
    nodes += [node(f"n{i}", cpu="4", memory="16Gi", labels={NODE_GROUP_LABEL: f"group{i}"}) for i in (2, 3, 4)]
    nodes.append(node("n5", cpu="4", memory="16Gi"))
    return nodes


def config(hierarchy: bool = False, **arguments: Any) -> str:
    lines = [
        'actions: "allocate"',
        "tiers:",
        "- plugins:",
        "  - name: nodegroup",
        f"    enableHierarchy: {str(hierarchy).lower()}",
    ]
    if arguments:
        lines.append("    arguments:")
        lines += [f"      {k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in arguments.items()]
    return "\n".join(lines) + "\n"


def session(objects: list[dict], cfg: str | None = None):
    return open_session(build_snapshot(objects), config_from_text(cfg or config()))


def verdicts(ssn, pod_name: str) -> tuple[dict[str, float], dict[str, str]]:
    """Per node: the score, and "" for a fit or the fit-error reason."""
    task = next(t for t in ssn.tasks.values() if t.name == pod_name)
    idx = np.arange(len(ssn.table))
    scores = ssn.node_order(task, idx)
    res = ssn.predicate(task)
    reasons = {}
    for i, name in enumerate(ssn.table.names):
        why = [f.reason for f in res.failures if f.nodes[i]]
        assert bool(res.passed[i]) == (not why), name
        reasons[name] = why[0] if why else ""
    return {n: float(scores[i]) for i, n in enumerate(ssn.table.names)}, reasons


def fits(reasons: dict[str, str]) -> set[str]:
    return {n for n, r in reasons.items() if not r}


def job(name: str, q: str) -> list[dict]:
    return [podgroup(f"pg-{name}", queue=q, namespace="c1"), pod(name, f"pg-{name}", cpu="2", memory="4Gi", namespace="c1")]


# -- Queue spec.affinity parsing ----------------------------------------------------------


def test_queue_affinity_parsed_in_order_and_absent_is_none() -> None:
    q = parse_queue(queue("q", affinity=affinity(req=["b", "a"], pref=["c"], anti_pref=["d"])))
    assert q.node_group_affinity == NodeGroupAffinity(required=("b", "a"), preferred=("c",), anti_preferred=("d",))
    assert q.affinity_error == ""
    assert parse_queue(queue("q")).node_group_affinity is None
    empty = parse_queue(queue("q", affinity={})).node_group_affinity
    assert empty is not None and empty.is_empty()


@pytest.mark.parametrize(
    "raw, field",
    [
        ("group1", "spec.affinity"),
        ({"nodeGroupAffinity": ["group1"]}, "spec.affinity.nodeGroupAffinity"),
        ({"nodeGroupAffinity": {REQ: "group1"}}, f"spec.affinity.nodeGroupAffinity.{REQ}"),
        ({"nodeGroupAntiAffinity": {PREF: ["ok", 3]}}, f"spec.affinity.nodeGroupAntiAffinity.{PREF}[1]"),
        ({"nodeGroupAfinity": {REQ: ["g"]}}, "spec.affinity.nodeGroupAfinity"),
        ({"nodeGroupAffinity": {"required": ["g"]}}, "spec.affinity.nodeGroupAffinity.required"),
    ],
)
def test_malformed_queue_affinity_keeps_the_queue_and_names_the_field(raw: Any, field: str) -> None:
    q = parse_queue(queue("q", weight=3, affinity=raw))
    assert q.weight == 3 and q.node_group_affinity is None
    assert q.affinity_error.startswith(field + ":"), q.affinity_error


# -- Volcano's TestNodeGroup situations -----------------------------------------------------

ALL_FIVE = {"n1", "n2", "n3", "n4", "n5"}


@pytest.mark.parametrize(
    "queues, pod_queue, hierarchy, args, scores, fitting",
    [
        pytest.param(
            [queue("q1", affinity=FULL)], "q1", False, {},
            {"n1": 100, "n2": 0, "n3": 150, "n4": -1, "n5": 0}, {"n1", "n3", "n4"},
            id="preferred-within-required",
        ),
        pytest.param(
            [queue("q2", affinity=affinity(req=["group1"], pref=["group3"], anti_req=["group2"], anti_pref=["group4"]))],
            "q2", False, {},
            {"n1": 100, "n2": 0, "n3": 50, "n4": -1, "n5": 0}, {"n1", "n3", "n4"},
            id="preferred-outside-required",
        ),
        pytest.param(
            [queue("root-no-affinity")], "root-no-affinity", False, {"strict": False},
            dict.fromkeys(ALL_FIVE, 0.0), {"n5"},
            id="no-affinity-non-strict-only-unlabelled",
        ),
        pytest.param(
            [queue("root", affinity=FULL), queue("q1", affinity=FULL, parent="root"), queue("q1-child", parent="q1")],
            "q1-child", True, {},
            {"n1": 100, "n2": 0, "n3": 150, "n4": -1, "n5": 0}, {"n1", "n3", "n4"},
            id="hierarchy-inherits-parent",
        ),
        pytest.param(
            [queue("root", affinity=FULL), queue("q-no-affinity", parent="root"),
             queue("q-no-affinity-child", parent="q-no-affinity")],
            "q-no-affinity-child", True, {},
            {"n1": 100, "n2": 0, "n3": 150, "n4": -1, "n5": 0}, {"n1", "n3", "n4"},
            id="hierarchy-inherits-grandparent",
        ),
        pytest.param(
            [queue("q-no-affinity", parent="root")], "q-no-affinity", False, {},
            dict.fromkeys(ALL_FIVE, 0.0), set(),
            id="no-affinity-strict-fits-nowhere",
        ),
        pytest.param(
            [queue("q3", affinity=affinity(pref=["group1", "group3"]))], "q3", False, {"enablePreferredOrder": True},
            {"n1": 50, "n2": 0, "n3": 25, "n4": 0, "n5": 0}, {"n1", "n3"},
            id="preferred-order",
        ),
    ],
)
def test_volcano_node_group_cases(queues, pod_queue, hierarchy, args, scores, fitting) -> None:
    ssn = session(five_nodes() + queues + job("p", pod_queue), config(hierarchy, **args))
    got_scores, reasons = verdicts(ssn, "p")
    assert got_scores == scores
    assert fits(reasons) == fitting


def test_reasons_say_which_rule_refused_each_node() -> None:
    ssn = session(five_nodes() + [queue("q1", affinity=FULL)] + job("p", "q1"))
    _, reasons = verdicts(ssn, "p")
    assert reasons["n2"] == ("node does not satisfy the node group affinity "
                             "(queue q1 has required anti-affinity to group group2)")
    assert reasons["n5"].startswith("node group label not found (queue q1 has node group affinity")
    ssn = session(five_nodes() + [queue("plain")] + job("p", "plain"))
    _, reasons = verdicts(ssn, "p")
    assert reasons["n1"] == "node group affinity not specified (queue plain names no node group; node is in group group1)"
    assert reasons["n5"].startswith("node group label not found (strict: queue plain may only use nodes labelled")


def test_without_preferred_order_every_preferred_group_scores_half() -> None:
    ssn = session(five_nodes() + [queue("q3", affinity=affinity(pref=["group1", "group3"]))] + job("p", "q3"))
    scores, _ = verdicts(ssn, "p")
    assert scores["n1"] == scores["n3"] == 50


def test_non_strict_queue_with_rules_still_needs_labelled_nodes() -> None:
    ssn = session(five_nodes() + [queue("q1", affinity=FULL)] + job("p", "q1"), config(strict=False))
    _, reasons = verdicts(ssn, "p")
    assert fits(reasons) == {"n1", "n3", "n4"}


def test_hierarchy_is_off_unless_enabled_on_the_plugin() -> None:
    objs = five_nodes() + [queue("q1", affinity=FULL), queue("child", parent="q1")] + job("p", "child")
    _, reasons = verdicts(session(objs, config(hierarchy=False)), "p")
    assert fits(reasons) == set()
    _, reasons = verdicts(session(objs, config(hierarchy=True)), "p")
    assert fits(reasons) == {"n1", "n3", "n4"}


def test_reasons_name_the_queue_the_rules_come_from() -> None:
    objs = five_nodes() + [queue("q1", affinity=FULL), queue("child", parent="q1")] + job("p", "child")
    _, reasons = verdicts(session(objs, config(hierarchy=True)), "p")
    assert reasons["n2"] == ("node does not satisfy the node group affinity (queue child (rules inherited from "
                             "queue q1) has required anti-affinity to group group2)")


def test_own_empty_affinity_is_not_replaced_by_the_parents() -> None:
    objs = five_nodes() + [queue("q1", affinity=FULL), queue("child", parent="q1", affinity={})] + job("p", "child")
    _, reasons = verdicts(session(objs, config(hierarchy=True)), "p")
    assert fits(reasons) == set()
    assert reasons["n1"].startswith("node group affinity not specified (queue child")


def test_queue_hierarchy_cycle_is_reported_and_inherits_nothing() -> None:
    objs = five_nodes() + [queue("a", parent="b"), queue("b", parent="a")] + job("p", "a")
    ssn = session(objs, config(hierarchy=True))
    _, reasons = verdicts(ssn, "p")
    assert fits(reasons) == set()
    assert any(e.reason == "QueueHierarchyCycle" and e.name == "a" for e in ssn.events)


# -- resource limits (Volcano's TestNodeGroupResourceLimits) -------------------------------

LIMIT_AFFINITY = affinity(req=["group1", "group2"], pref=["group1"])


def limit_objects(annotation: str | None, running: bool = False) -> list[dict]:
    nodes = [node(n, cpu="16", memory="64Gi", pods="32", labels={NODE_GROUP_LABEL: g}) for n, g in (("n1", "group1"), ("n2", "group2"))]
    q = queue("ql", affinity=LIMIT_AFFINITY)
    if annotation is not None:
        q["metadata"]["annotations"] = {RESOURCE_LIMITS_ANNOTATION: annotation}
    objs = nodes + [q] + [podgroup("pg-pending", queue="ql", namespace="limit"),
                          pod("pending", "pg-pending", cpu="2", memory="4Gi", namespace="limit")]
    if running:
        objs += [podgroup("pg-used", queue="ql", namespace="limit", phase="Running"),
                 pod("used", "pg-used", cpu="2", memory="4Gi", namespace="limit", node="n1", phase="Running")]
    return objs


@pytest.mark.parametrize(
    "annotation, running, fitting",
    [
        pytest.param(None, False, {"n1", "n2"}, id="no-annotation"),
        pytest.param('{"group1":{"cpu":"3","memory":"8Gi"}}', False, {"n1", "n2"}, id="under-limit"),
        pytest.param('{"group1":{"cpu":"3"}}', False, {"n1", "n2"}, id="unnamed-resource-unlimited"),
        pytest.param('{"group1":{"cpu":"1"}}', False, {"n2"}, id="named-resource-enforced"),
        pytest.param('{"group1":{"cpu":"3","memory":"8Gi"}}', True, {"n2"}, id="running-pods-count"),
        pytest.param('{"group1":{"cpu":', False, set(), id="invalid-annotation"),
    ],
)
def test_volcano_resource_limit_cases(annotation, running, fitting) -> None:
    ssn = session(limit_objects(annotation, running))
    _, reasons = verdicts(ssn, "pending")
    assert fits(reasons) == fitting


def test_resource_limit_reasons_and_warning() -> None:
    _, reasons = verdicts(session(limit_objects('{"group1":{"cpu":"1"}}')), "pending")
    assert reasons["n1"] == "node group resource limit exceeded (queue ql in group group1, insufficient: cpu)"
    ssn = session(limit_objects('{"group1":{"cpu":'))
    _, reasons = verdicts(ssn, "pending")
    assert reasons["n2"].startswith("node group resource limit annotation invalid (queue ql: invalid JSON")
    warn = [e for e in ssn.events if e.reason == "InvalidNodeGroupResourceLimits"]
    assert warn and RESOURCE_LIMITS_ANNOTATION in warn[0].message and warn[0].name == "ql"


def test_allocation_in_the_session_counts_against_the_limit() -> None:
    objs = [node("n1", cpu="16", memory="64Gi", pods="32", labels={NODE_GROUP_LABEL: "group1"})]
    q = queue("qe", affinity=affinity(req=["group1"]))
    q["metadata"]["annotations"] = {RESOURCE_LIMITS_ANNOTATION: '{"group1":{"cpu":"3","memory":"8Gi"}}'}
    objs += [q] + [podgroup(f"pg-{i}", queue="qe", namespace="limit") for i in (1, 2)]
    objs += [pod(f"pending-{i}", f"pg-{i}", cpu="2", memory="4Gi", namespace="limit") for i in (1, 2)]
    ssn = session(objs)
    t1, t2 = sorted(ssn.tasks.values(), key=lambda t: t.name)
    assert ssn.predicate(t1).passed.all()
    stmt = Statement(ssn)
    stmt.allocate(t1, "n1")
    assert not ssn.predicate(t2).passed.any()
    stmt.discard()  # the deallocate handler gives the usage back
    assert ssn.predicate(t2).passed.all()


# -- tidesched: exclusive groups and the pod's group label ----------------------------------


def test_exclusive_groups_open_only_to_required_affinity() -> None:
    objs = five_nodes() + [queue("q1", affinity=FULL), queue("q3", affinity=affinity(pref=["group1", "group3"]))]
    objs += job("a", "q1") + job("b", "q3")
    ssn = session(objs, config(exclusive=True))
    _, reasons = verdicts(ssn, "a")
    # group4 was open to q1 only through its preferred anti-affinity
    assert fits(reasons) == {"n1", "n3"}
    assert reasons["n4"].startswith("node group is exclusive (group group4 is only for queues whose required affinity names it")
    _, reasons = verdicts(ssn, "b")
    assert fits(reasons) == set()
    assert "queue q3 does not require it" in reasons["n1"]


def test_pod_group_label_keeps_the_pod_in_its_group() -> None:
    objs = five_nodes() + [queue("q1", affinity=FULL)] + job("p", "q1") + job("r", "q1")
    objs[-1]["metadata"]["labels"][POD_GROUP_LABEL] = "group1"
    ssn = session(objs)
    scores, reasons = verdicts(ssn, "r")
    assert fits(reasons) == {"n1"}
    assert reasons["n3"] == f"node is outside the pod's node group (pod label {POD_GROUP_LABEL}=group1)"
    assert scores["n3"] == 150  # the score is the queue's, the label only filters
    _, reasons = verdicts(ssn, "p")
    assert fits(reasons) == {"n1", "n3", "n4"}


def test_pod_group_label_does_not_open_a_group_the_queue_may_not_use() -> None:
    objs = five_nodes() + [queue("q1", affinity=FULL)] + job("p", "q1")
    objs[-1]["metadata"]["labels"][POD_GROUP_LABEL] = "group2"
    _, reasons = verdicts(session(objs), "p")
    assert fits(reasons) == set()
    assert reasons["n2"].startswith("node does not satisfy the node group affinity")


# -- bad input and arguments ----------------------------------------------------------------


def test_invalid_queue_affinity_refuses_its_jobs_with_a_warning() -> None:
    objs = five_nodes() + [queue("bad", affinity={"nodeGroupAffinity": {REQ: "group1"}})] + job("p", "bad")
    ssn = session(objs)
    _, reasons = verdicts(ssn, "p")
    assert fits(reasons) == set()
    assert reasons["n1"].startswith(f"queue node group affinity invalid (queue bad: spec.affinity.nodeGroupAffinity.{REQ}:")
    warn = [e for e in ssn.events if e.reason == "InvalidNodeGroupAffinity"]
    assert warn and warn[0].kind == "Queue" and warn[0].name == "bad" and "spec.affinity" in warn[0].message


def test_child_of_a_queue_with_invalid_affinity_inherits_the_refusal() -> None:
    objs = five_nodes() + [queue("bad", affinity="group1"), queue("kid", parent="bad")] + job("p", "kid")
    _, reasons = verdicts(session(objs, config(hierarchy=True)), "p")
    assert fits(reasons) == set()
    assert "queue kid inherits it from queue bad" in reasons["n1"]


@pytest.mark.parametrize("arg", ["strict", "enablePreferredOrder", "exclusive"])
def test_non_boolean_arguments_are_refused_at_load(arg: str) -> None:
    with pytest.raises(ConfigError, match=f"arguments\\['{arg}'\\].*expected true or false"):
        config_from_text(config(**{arg: '"yes"'}))


def test_verdicts_are_computed_once_per_queue_and_group_wish() -> None:
    objs = five_nodes() + [queue("q1", affinity=FULL)] + job("a", "q1") + job("b", "q1")
    ssn = session(objs)
    plugin = ssn.plugins["nodegroup"]
    for t in ssn.tasks.values():
        ssn.predicate(t)
    assert list(plugin._static) == [("q1", "")]


# -- the command line: schedule and explain -------------------------------------------------


def test_schedule_and_explain_show_node_group_reasons(tmp_path) -> None:
    import json

    import yaml
    from typer.testing import CliRunner

    from tidesched.cli import app

    conf = tmp_path / "sched.conf"
    conf.write_text(config(exclusive=True))
    objs = five_nodes() + [queue("q3", affinity=affinity(req=["group3"], pref=["group1"])),
                           queue("bad", affinity={"nodeGroupAffinity": {REQ: "group1"}})]
    objs += job("p", "q3") + job("q", "q3") + job("waits", "q3") + job("refused", "bad")
    files = tmp_path / "objs.yaml"
    files.write_text(yaml.safe_dump_all(objs))
    cli = CliRunner()
    res = cli.invoke(app, ["schedule", "-c", str(conf), "--format", "json", str(files)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["bound"] == {"c1/p": "n3", "c1/q": "n3"}
    res = cli.invoke(app, ["explain", "c1/waits", "-c", str(conf), str(files)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "stays pending" in text
    assert "1 Insufficient cpu" in text
    assert ("1 node group is exclusive (group group1 is only for queues whose required affinity names it; "
            "queue q3 does not require it)") in text
    assert "1 node does not satisfy the node group affinity (group group2 is not in the node group affinity of queue q3)" in text
    res = cli.invoke(app, ["explain", "c1/refused", "-c", str(conf), str(files)])
    text = " ".join(res.stdout.split())
    assert "5 queue node group affinity invalid (queue bad: spec.affinity.nodeGroupAffinity" in text
    assert "Queue event InvalidNodeGroupAffinity" in text
