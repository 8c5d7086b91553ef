"""Pod topology spread: parsing on the Pod record, and kube-scheduler's scores reproduced.

The score cases are ported from kube-scheduler's podtopologyspread scoring_test.go
(TestPodTopologySpreadScore): the same nodes, pods and expected normalised scores, computed
through a real session (the nodeorder plugin's inputs) for the candidate nodes only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from builders import node, pod
from tidesched.rules.topology_spread import spread_scores
from tidesched.model.objects import ObjectError, parse_pod
from tidesched.model.snapshot import build_snapshot
from tidesched.plugins.topology_spread import spread_inputs
from tidesched.scheduler import config_from_text, open_session

CONFIG = """
actions: "allocate"
tiers:
- plugins:
  - {name: predicates}
  - {name: nodeorder}
"""
HOST = "kubernetes.io/hostname"
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}


def soft(key: str, selector: Any, max_skew: int = 1) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector}


def placed(name: str, on: str, labels: dict[str, str], **kw: Any) -> dict[str, Any]:
    return pod(name, node=on, phase="Running", labels=labels, cpu="10m", memory="10Mi", **kw)


def scores(nodes: list[dict], candidates: list[str], existing: list[dict], constraints: list[dict],
           labels: dict[str, str] | None = None) -> dict[str, int]:
    incoming = pod("p", labels=labels or {"foo": ""}, spec={"topologySpreadConstraints": constraints})
    ssn = open_session(build_snapshot([*nodes, *existing, incoming]), config_from_text(CONFIG))
    order = ssn.plugins["nodeorder"]
    task = next(t for t in ssn.tasks.values() if t.name == "p")
    idx = np.array([ssn.table.index[n] for n in candidates], dtype=np.int64)
    soft_cs = [c for c in task.pod.spread_constraints if not c.hard]
    inputs = spread_inputs(ssn, order.labels, order.taints, task, soft_cs)
    return dict(zip(candidates, (int(s) for s in spread_scores(inputs, idx))))


def hosts(*names: str) -> list[dict]:
    return [node(n, labels={HOST: n}) for n in names]


def zoned(*pairs: tuple[str, str]) -> list[dict]:
    return [node(n, labels={"zone": z, HOST: n}) for n, z in pairs]


def spread(counts: dict[str, int], labels: dict[str, str] | None = None) -> list[dict]:
    return [placed(f"p-{n}{i}", n, labels or {"foo": ""}) for n, c in counts.items() for i in range(c)]


FOUR_HOSTS = hosts("node-a", "node-b", "node-c", "node-d")
ALL4 = ["node-a", "node-b", "node-c", "node-d"]


@pytest.mark.parametrize(
    ("max_skew", "counts", "want"),
    [
        (1, {}, {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100}),
        (1, {"node-a": 2, "node-b": 1, "node-d": 3}, {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0}),
        (2, {"node-a": 2, "node-b": 1, "node-d": 3}, {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16}),
        (3, {"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}, {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}),
    ],
    ids=["no-pods", "2/1/0/3", "2/1/0/3-maxSkew-2", "4/3/2/1-maxSkew-3"],
)
def test_hostname_constraint_scores(max_skew: int, counts: dict[str, int], want: dict[str, int]) -> None:
    got = scores(FOUR_HOSTS, ALL4, spread(counts), [soft(HOST, FOO, max_skew)])
    assert got == want


def test_null_selector_scores_every_node_alike() -> None:
    got = scores(FOUR_HOSTS, ALL4, spread({"node-a": 2, "node-b": 1, "node-d": 3}), [soft(HOST, None)])
    assert got == {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100}


def test_only_candidates_are_scored() -> None:
    # 4/2/1/~3~: node-y is no candidate, its pods do not shape the others' scores.
    nodes = hosts("node-a", "node-b", "node-x", "node-y")
    existing = spread({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3})
    got = scores(nodes, ["node-a", "node-b", "node-x"], existing, [soft(HOST, FOO)])
    assert got == {"node-a": 33, "node-b": 83, "node-x": 100}


def test_candidate_without_the_key_scores_zero() -> None:
    nodes = [node("node-a", labels={HOST: "node-a"}), node("node-b", labels={"n": "node-b"}),
             node("node-x", labels={HOST: "node-x"}), node("node-y", labels={HOST: "node-y"})]
    existing = spread({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3})
    got = scores(nodes, ["node-a", "node-b", "node-x"], existing, [soft(HOST, FOO)])
    assert got == {"node-a": 16, "node-b": 0, "node-x": 100}


ZONES = zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))


def test_zone_constraint_counts_non_candidate_nodes_of_the_domain() -> None:
    existing = spread({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3})
    got = scores(ZONES, ["node-a", "node-b", "node-x"], existing, [soft("zone", FOO)])
    assert got == {"node-a": 75, "node-b": 75, "node-x": 100}


def test_zone_and_hostname_constraints() -> None:
    existing = spread({"node-a": 2, "node-b": 1, "node-x": 2, "node-y": 4})
    got = scores(ZONES, ["node-a", "node-x"], existing, [soft("zone", FOO), soft(HOST, FOO)])
    assert got == {"node-a": 100, "node-x": 63}


def test_two_zone_constraints_with_different_selectors() -> None:
    nodes = [node(n, labels={"zone": z}) for n, z in (("node-a", "zone1"), ("node-b", "zone1"),
                                                     ("node-x", "zone2"), ("node-y", "zone2"))]
    existing = [
        placed("p-a1", "node-a", {"foo": "", "bar": ""}), placed("p-a2", "node-a", {"foo": ""}),
        placed("p-b1", "node-b", {"foo": "", "bar": ""}), placed("p-y1", "node-y", {"foo": ""}),
        placed("p-y2", "node-y", {"foo": "", "bar": ""}), placed("p-y3", "node-y", {"foo": ""}),
    ]
    # Two ScheduleAnyway constraints on one key are a duplicate the API server refuses; the
    # Go test builds them directly. Here the second one spreads over a copy of the key.
    for n in nodes:
        n["metadata"]["labels"]["zone-copy"] = n["metadata"]["labels"]["zone"]
    got = scores(nodes, ["node-a", "node-x"], existing, [soft("zone", FOO), soft("zone-copy", BAR)],
                 labels={"foo": "", "bar": ""})
    assert got == {"node-a": 85, "node-x": 100}


@pytest.mark.parametrize(
    ("existing", "candidates", "want"),
    [
        ([("p-a1", "node-a", {"foo": ""}), ("p-b1", "node-b", {"foo": "", "bar": ""}),
          ("p-y1", "node-y", {"foo": ""}), ("p-y2", "node-y", {"bar": ""})],
         ["node-a", "node-b", "node-x", "node-y"], {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60}),
        ([("p-b1", "node-b", {"bar": ""}), ("p-x1", "node-x", {"foo": ""}), ("p-y1", "node-y", {"foo": "", "bar": ""})],
         ["node-a", "node-b", "node-x", "node-y"], {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0}),
        ([("p-a1", "node-a", {"foo": ""}), ("p-b1", "node-b", {"foo": "", "bar": ""}),
          ("p-y1", "node-y", {"foo": ""}), ("p-y2", "node-y", {"bar": ""})],
         ["node-a", "node-b", "node-x"], {"node-a": 50, "node-b": 25, "node-x": 100}),
    ],
    ids=["2/2/1/1-and-0/1/0/1", "0/0/2/2-and-0/1/0/1", "three-candidates"],
)
def test_zone_and_hostname_with_different_selectors(existing, candidates, want) -> None:
    pods = [placed(n, on, labels) for n, on, labels in existing]
    got = scores(ZONES, candidates, pods, [soft("zone", FOO), soft(HOST, BAR)], labels={"foo": "", "bar": ""})
    assert got == want


def test_other_namespaces_and_terminating_pods_do_not_count() -> None:
    nodes = hosts("node-a", "node-b")
    existing = [placed("p-a1", "node-a", {"foo": ""}, namespace="ns1"), placed("p-a2", "node-a", {"foo": ""}),
                placed("p-b1", "node-b", {"foo": ""}), placed("p-b2", "node-b", {"foo": ""})]
    assert scores(nodes, ["node-a", "node-b"], existing, [soft(HOST, FOO)]) == {"node-a": 100, "node-b": 33}
    existing = [placed("p-a", "node-a", {"foo": ""}, deleting=True), placed("p-b", "node-b", {"foo": ""})]
    assert scores(nodes, ["node-a", "node-b"], existing, [soft(HOST, FOO)]) == {"node-a": 100, "node-b": 0}


# -- parsing ----------------------------------------------------------------------------------


def parsed(constraints: Any, labels: dict[str, str] | None = None):
    return parse_pod(pod("p", labels=labels, spec={"topologySpreadConstraints": constraints})).spread_constraints


def test_defaults_and_policies() -> None:
    (c,) = parsed([{"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": FOO}])
    assert (c.max_skew, c.topology_key, c.hard, c.min_domains, c.honor_affinity, c.honor_taints) == (
        2, "zone", True, 1, True, False)
    (c,) = parsed([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3,
                    "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor", "labelSelector": FOO}])
    assert (c.min_domains, c.honor_affinity, c.honor_taints) == (3, False, True)
    assert parsed(None) == ()
    # Fields of newer Kubernetes versions are ignored, not refused.
    assert len(parsed([{**BASE, "someFutureField": True}])) == 1


def test_match_label_keys_narrow_the_selector_to_the_pods_values() -> None:
    (c,) = parsed([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["rev", "absent"]}],
                  labels={"app": "web", "rev": "2"})
    assert c.selector.matches({"app": "web", "rev": "2"})
    assert not c.selector.matches({"app": "web", "rev": "1"})
    assert not c.selector.matches({"app": "db", "rev": "2"})
    # An empty selector counts no pod, unless matchLabelKeys gave it requirements.
    (c,) = parsed([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}])
    assert not c.counts_pods and c.selector.matches({"any": "pod"})
    (c,) = parsed([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {},
                    "matchLabelKeys": ["rev"]}], labels={"rev": "2"})
    assert c.counts_pods and c.selector.matches({"rev": "2"}) and not c.selector.matches({"rev": "1"})
    # The API server of Kubernetes 1.34+ merges matchLabelKeys into labelSelector itself;
    # such a pod is valid and spreads the same.
    (merged,) = parsed([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                         "labelSelector": {"matchLabels": {"app": "web"},
                                           "matchExpressions": [{"key": "rev", "operator": "In", "values": ["2"]}]},
                         "matchLabelKeys": ["rev"]}], labels={"app": "web", "rev": "2"})
    for labels in ({"app": "web", "rev": "2"}, {"app": "web", "rev": "1"}, {"rev": "2"}):
        assert merged.selector.matches(labels) == (labels == {"app": "web", "rev": "2"})


BASE = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": FOO}


@pytest.mark.parametrize(
    ("constraints", "field"),
    [
        ("zone", "spec.topologySpreadConstraints"),
        (["zone"], "spec.topologySpreadConstraints[0]"),
        ([{**BASE, "maxSkew": 0}], "spec.topologySpreadConstraints[0].maxSkew"),
        ([{**BASE, "maxSkew": "1"}], "spec.topologySpreadConstraints[0].maxSkew"),
        ([{k: v for k, v in BASE.items() if k != "maxSkew"}], "spec.topologySpreadConstraints[0].maxSkew"),
        ([{**BASE, "topologyKey": ""}], "spec.topologySpreadConstraints[0].topologyKey"),
        ([{**BASE, "whenUnsatisfiable": "Sometimes"}], "spec.topologySpreadConstraints[0].whenUnsatisfiable"),
        ([BASE, {**BASE, "maxSkew": 2}], "spec.topologySpreadConstraints[1]"),
        ([{**BASE, "minDomains": 0}], "spec.topologySpreadConstraints[0].minDomains"),
        ([{**BASE, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}], "spec.topologySpreadConstraints[0].minDomains"),
        ([{**BASE, "nodeAffinityPolicy": "honor"}], "spec.topologySpreadConstraints[0].nodeAffinityPolicy"),
        ([{**BASE, "nodeTaintsPolicy": 1}], "spec.topologySpreadConstraints[0].nodeTaintsPolicy"),
        ([{**BASE, "matchLabelKeys": "rev"}], "spec.topologySpreadConstraints[0].matchLabelKeys"),
        ([{**BASE, "matchLabelKeys": [""]}], "spec.topologySpreadConstraints[0].matchLabelKeys[0]"),
        ([{k: v for k, v in BASE.items() if k != "labelSelector"} | {"matchLabelKeys": ["rev"]}],
         "spec.topologySpreadConstraints[0].labelSelector"),
        ([{**BASE, "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}}],
         "spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator"),
    ],
)
def test_malformed_constraints_name_the_field(constraints: Any, field: str) -> None:
    with pytest.raises(ObjectError) as err:
        parsed(constraints)
    assert err.value.field == field


def test_malformed_pod_is_a_warning_not_a_crash() -> None:
    bad = pod("bad", spec={"topologySpreadConstraints": [{**BASE, "maxSkew": -1}]})
    good = pod("good")
    snap = build_snapshot([node("n1"), bad, good])
    assert [p.meta.name for p in snap.pods] == ["good"]
    (problem,) = [e for e in snap.problems if e.name == "bad"]
    assert problem.type == "Warning" and "spec.topologySpreadConstraints[0].maxSkew" in problem.message


# -- the simulator: Deployments, the cache, several sessions ----------------------------------


def test_simulated_deployment_spreads_across_zones_over_sessions(tmp_path) -> None:
    """A Deployment's replicas (pod template with a DoNotSchedule zone spread and a
    ScheduleAnyway hostname spread) over three zones, then scaled out in a later session:
    the simulator's cache feeds the same core, and the counts carry over from bound pods."""
    import yaml

    from tidesched.sim.runner import Engine
    from tidesched.sim.scenario import load_scenario

    zones = {"node-a1": "z1", "node-a2": "z1", "node-b1": "z2", "node-c1": "z3"}
    nodes = [node(n, cpu="16", labels={"zone": z, HOST: n}) for n, z in zones.items()]
    for n in nodes:
        n["apiVersion"] = "v1"
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                     "topologySpreadConstraints": [
                         {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                          "labelSelector": {"matchLabels": {"app": "web"}}},
                         {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway",
                          "labelSelector": {"matchLabels": {"app": "web"}}}]}}},
    }
    doc = {"name": "spread", "schedulePeriod": "1s", "duration": "20s",
           "scheduler": {"config": CONFIG.replace('"allocate"', '"enqueue, allocate"')},
           "objects": [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                        "metadata": {"name": "default"}, "spec": {"weight": 1}}, *nodes, deployment],
           "events": [{"at": "10s", "scale": {"deployment": "ns/web", "replicas": 6}}]}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    engine = Engine(load_scenario(path), 0)
    sim = engine.run()
    assert not sim.failed
    placed = [p["spec"].get("nodeName") for _k, p in engine.world.items("Pod")]
    assert len(placed) == 6 and all(placed)
    per_zone = {z: sum(zones[n] == z for n in placed) for z in ("z1", "z2", "z3")}
    assert per_zone == {"z1": 2, "z2": 2, "z3": 2}
    # ScheduleAnyway on the hostname: zone1's two replicas are on its two nodes.
    assert sorted(n for n in placed if zones[n] == "z1") == ["node-a1", "node-a2"]


def test_explain_names_the_spread_reasons(tmp_path) -> None:
    import yaml
    from typer.testing import CliRunner

    from tidesched.cli import app

    constraint = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"app": "web"}}}
    objs = [
        node("node-a", labels={"zone": "z1"}), node("node-b", cpu="1", labels={"zone": "z2"}), node("node-c"),
        placed("web-1", "node-a", {"app": "web"}), placed("web-2", "node-a", {"app": "web"}),
        pod("web-3", labels={"app": "web"}, cpu="2", spec={"topologySpreadConstraints": [constraint]}),
    ]
    f = tmp_path / "objs.yaml"
    f.write_text(yaml.safe_dump_all(objs))
    cfg = tmp_path / "scheduler.conf"
    cfg.write_text(CONFIG)
    res = CliRunner().invoke(app, ["explain", "ns/web-3", "-c", str(cfg), str(f)])
    assert res.exit_code == 0, res.output
    assert ("0/3 nodes are unavailable: 1 Insufficient cpu, 1 node(s) didn't match pod topology spread "
            "constraints, 1 node(s) didn't match pod topology spread constraints (missing required label).") in res.output


@pytest.mark.parametrize(
    ("plugin", "argument"),
    [("predicates", "predicate.PodTopologySpreadEnable: maybe"), ("nodeorder", "podtopologyspread.weight: heavy")],
)
def test_bad_switches_are_config_errors_naming_the_argument(plugin: str, argument: str) -> None:
    from tidesched.framework.arguments import ConfigError

    text = f'actions: "allocate"\ntiers:\n- plugins:\n  - name: {plugin}\n    arguments: {{{argument}}}\n'
    with pytest.raises(ConfigError, match=argument.split(":")[0].replace(".", r"\.")):
        config_from_text(text)


def test_counts_follow_statements_whether_or_not_kept_dense() -> None:
    """The session's counts against a recount from the node table, after staged allocations,
    evictions and a discard, with only one selector's dense array kept at a time."""
    from tidesched.framework.statement import Statement
    from tidesched.rules.selectors import compile_label_selector
    from tidesched.model.status import TaskStatus
    from tidesched.plugins.topology_spread import matching_pods

    objs = [*hosts("node-a", "node-b", "node-c"),
            placed("web-1", "node-a", {"app": "web", "rev": "1"}), placed("db-1", "node-b", {"app": "db"}),
            placed("web-gone", "node-c", {"app": "web"}, deleting=True),
            pod("web-2", labels={"app": "web", "rev": "2"}), pod("db-2", labels={"app": "db"})]
    ssn = open_session(build_snapshot(objs), config_from_text(CONFIG))
    counter = matching_pods(ssn)
    counter.DENSE_KEPT = 1
    selectors = [compile_label_selector(s) for s in (
        {"matchLabels": {"app": "web"}}, {"matchLabels": {"app": "db"}},
        {"matchExpressions": [{"key": "rev", "operator": "Exists"}]}, {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]})]

    def recount(sel) -> list[int]:
        return [sum(1 for t in row.values() if t.status != TaskStatus.RELEASING and sel.matches(t.pod.meta.labels))
                for row in ssn.table.tasks]

    def check() -> None:
        for sel in selectors + selectors[::-1]:
            assert counter.counts("ns", sel).tolist() == recount(sel)
        assert counter.counts("other", selectors[0]).tolist() == [0, 0, 0]

    check()
    by_name = {t.name: t for t in ssn.tasks.values()}
    stmt = Statement(ssn)
    stmt.allocate(by_name["web-2"], "node-b")
    stmt.pipeline(by_name["db-2"], "node-a")
    stmt.evict(by_name["web-1"], "test")
    check()
    assert counter.counts("ns", selectors[0]).tolist() == [0, 1, 0]
    stmt.discard()
    check()
    assert counter.counts("ns", selectors[0]).tolist() == [1, 0, 0]


# -- the filter, ported from filtering_test.go TestMultipleConstraints -------------------------

OK, NO, GONE = "Success", "Unschedulable", "UnschedulableAndUnresolvable"


def hard(key: str, selector: Any) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}


def filter_codes(nodes: list[dict], existing: list[dict], constraints: list[dict], labels: dict[str, str]) -> dict[str, str]:
    from tidesched.plugins.predicates import REASON_SPREAD, REASON_SPREAD_LABEL

    incoming = pod("p", labels=labels, spec={"topologySpreadConstraints": constraints})
    ssn = open_session(build_snapshot([*nodes, *existing, incoming]), config_from_text(CONFIG))
    task = next(t for t in ssn.tasks.values() if t.name == "p")
    result = ssn.predicate(task)
    out = {name: OK for name in ssn.table.names}
    for f in result.failures:
        assert f.reason in (REASON_SPREAD, REASON_SPREAD_LABEL) and f.unresolvable == (f.reason == REASON_SPREAD_LABEL)
        for row in np.flatnonzero(f.nodes):
            out[ssn.table.names[row]] = GONE if f.unresolvable else NO
    return out


def four_nodes(without_node_label: str = "") -> list[dict]:
    return [node(n, labels={"zone": z, **({} if n == without_node_label else {"node": n})})
            for n, z in (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))]


FOO_BAR = {"foo": "", "bar": ""}
F = {"foo": ""}  # labels


@pytest.mark.parametrize(
    ("existing", "selectors", "labels", "without", "want"),
    [
        ([("node-a", F)] * 2 + [("node-b", F)] + [("node-y", F)] * 3, (FOO,) * 2,
         {"foo": ""}, "", {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO}),
        ([("node-a", F)] * 2 + [("node-b", F)] + [("node-y", F)] * 4, (FOO,) * 2,
         {"foo": ""}, "", {"node-a": NO, "node-b": NO, "node-x": NO, "node-y": NO}),
        ([("node-a", F), ("node-y", {"bar": ""})], (FOO, BAR), FOO_BAR, "",
         {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO}),
        ([("node-a", F), ("node-x", {"bar": ""}), ("node-y", {"bar": ""})], (FOO, BAR), FOO_BAR, "",
         {"node-a": NO, "node-b": NO, "node-x": NO, "node-y": NO}),
        ([("node-a", F), ("node-a", FOO_BAR), ("node-y", F), ("node-y", FOO_BAR), ("node-y", F)], (FOO, BAR),
         FOO_BAR, "", {"node-a": NO, "node-b": OK, "node-x": NO, "node-y": NO}),
        ([("node-a", F), ("node-x", {"bar": ""}), ("node-y", {"bar": ""})], (FOO, BAR), {"bar": ""}, "",
         {"node-a": OK, "node-b": OK, "node-x": NO, "node-y": NO}),
        ([("node-a", F), ("node-y", F)], (FOO,) * 2, {"foo": ""}, "node-x",
         {"node-a": NO, "node-b": OK, "node-x": GONE, "node-y": NO}),
    ],
    ids=["3/3-2/1/0/3", "3/4-2/1/0/4", "1/0-1/0/0/1", "1/0-0/0/1/1", "2/3-1/0/0/1",
         "pod-does-not-match-zone-selector", "node-x-without-node-label"],
)
def test_zone_and_node_constraints(existing, selectors, labels, without, want) -> None:
    pods = [placed(f"e{i}", on, lab) for i, (on, lab) in enumerate(existing)]
    constraints = [hard("zone", selectors[0]), hard("node", selectors[1])]
    assert filter_codes(four_nodes(without), pods, constraints, labels) == want
