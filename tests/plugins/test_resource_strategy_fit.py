"""resource-strategy-fit plugin: the cases of Volcano v1.15.1's
plugins/resource-strategy-fit/{resource_strategy_fit,sra,proportional}_test.go, each asserting
the weights, scores or predicate answers Volcano's test asserts (the allocate cases are
scenarios in tests/scenarios/resource_strategy_fit.yaml). Every score is checked on both the
full path (``node_order``) and the row-local one (``node_order_all``)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import yaml

from builders import node, pod, podgroup, queue
from tidesched.framework.arguments import Arguments, ConfigError
from tidesched.model.snapshot import build_snapshot
from tidesched.plugins.resource_strategy_fit import (
    LEAST,
    MOST,
    SCORING_TYPE_ANNOTATION,
    SCORING_WEIGHT_ANNOTATION,
    parse_arguments,
    strategy_for,
)
from tidesched.scheduler import config_from_text, open_session

GPU, FOO = "nvidia.com/gpu", "example.com/foo"
T4, A10 = "nvidia.com/t4", "nvidia.com/a10"


def _config(arguments: dict[str, Any], *, predicate: bool = False) -> str:
    entry: dict[str, Any] = {"name": "resource-strategy-fit", "enableNodeOrder": True, "arguments": arguments}
    if predicate:
        entry["enablePredicate"] = True
    return yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [entry]}]})


def _session(objects: list[dict], arguments: dict[str, Any], **kw: Any):
    return open_session(build_snapshot(objects), config_from_text(_config(arguments, **kw)))


def _scores(objects: list[dict], arguments: dict[str, Any]) -> dict[str, dict[str, float]]:
    ssn = _session(objects, arguments)
    idx = np.arange(len(ssn.table))
    out: dict[str, dict[str, float]] = {}
    for t in ssn.tasks.values():
        if t.node_name:
            continue
        full = ssn.node_order(t, idx)
        rows = ssn.node_order_all(t)
        assert rows is not None, "resource-strategy-fit offers a row-local score"
        assert np.allclose(full, rows), (t.name, full, rows)
        out[f"{t.namespace}/{t.name}"] = {ssn.table.names[i]: float(full[i]) for i in idx}
    return out


# -- Test_calculateWeight --------------------------------------------------------------------


def test_calculate_weight_explicit() -> None:  # test1
    a = parse_arguments(Arguments({"resourceStrategyFitWeight": 10, "resources": {
        "cpu": {"type": "MostAllocated", "weight": 1}, "memory": {"type": "LeastAllocated", "weight": 2}}}))
    assert (a.weight, a.resources) == (10, {"cpu": (MOST, 1), "memory": (LEAST, 2)})


def test_calculate_weight_default_plugin_weight() -> None:  # test2
    a = parse_arguments(Arguments({"resources": {
        "cpu": {"type": "MostAllocated", "weight": 1}, "memory": {"type": "LeastAllocated", "weight": 2}}}))
    assert (a.weight, a.resources) == (10, {"cpu": (MOST, 1), "memory": (LEAST, 2)})


def test_calculate_weight_default_resources() -> None:  # test3
    a = parse_arguments(Arguments({"resourceStrategyFitWeight": 10}))
    assert a.resources == {"cpu": (LEAST, 1), "memory": (LEAST, 1)}


def test_negative_weights_fall_back() -> None:
    a = parse_arguments(Arguments({"resourceStrategyFitWeight": -3, "resources": {"cpu": {"type": "MostAllocated", "weight": -2}}}))
    assert (a.weight, a.resources) == (10, {"cpu": (MOST, 1)})


@pytest.mark.parametrize("pattern", ["*", "cloudml.gpu**", "cloudml.*.gpu", "*.com/gpu", "*test*resource*"])
def test_invalid_wildcards_are_refused(pattern: str) -> None:
    # test4..test7: Volcano drops these patterns with a log line; tidesched refuses the
    # config at load instead (CONF-3), naming the pattern.
    with pytest.raises(ConfigError, match=r"at most one '\*'"):
        parse_arguments(Arguments({"resources": {"cpu": {"type": "LeastAllocated", "weight": 1},
                                                 pattern: {"type": "MostAllocated", "weight": 2}}}))


def test_valid_wildcards_are_kept() -> None:  # test5/test7's surviving entries
    a = parse_arguments(Arguments({"resources": {
        "nvidia.com/gpu/*": {"type": "MostAllocated", "weight": 3},
        "example.com/foo/*": {"type": "LeastAllocated", "weight": 2}}}))
    assert a.resources == {"nvidia.com/gpu/*": (MOST, 3), "example.com/foo/*": (LEAST, 2)}


def test_unknown_type_is_refused_at_load() -> None:
    cfg = _config({"resources": {"cpu": {"type": "MostAlocated", "weight": 1}}})
    with pytest.raises(ConfigError, match="type LeastAllocated or MostAllocated"):
        config_from_text(cfg)


# -- Test_findResourceConfigWithPrefix -------------------------------------------------------


def test_exact_match_beats_wildcard() -> None:
    assert strategy_for(GPU, {GPU: (MOST, 3), "nvidia.com/*": (LEAST, 1)}) == (MOST, 3)


def test_longest_prefix_wins() -> None:
    assert strategy_for("nvidia.com/gpu/v100", {"nvidia.com/gpu/*": (MOST, 2), "nvidia.com/*": (LEAST, 1)}) == (MOST, 2)
    assert strategy_for("cloudml.gpu/tensorflow/v2", {
        "cloudml.gpu/tensorflow/*": (MOST, 3), "cloudml.gpu/*": (LEAST, 2), "cloudml/*": (MOST, 1)}) == (MOST, 3)


def test_no_match() -> None:
    assert strategy_for(FOO, {"nvidia.com/gpu/*": (MOST, 2)}) is None
    assert strategy_for("any.resource", {}) is None


# -- TestScore: one task, one node with used 200/200 ------------------------------------------


def _one_node_score(task_cpu: str | None, task_mem: str | None, alloc_cpu: str, alloc_mem: str,
                    resources: dict[str, tuple[str, int]], weight: int = 10,
                    used: tuple[str, str] = ("200m", "200"), annotations: dict | None = None) -> float:
    objects = [
        node("n1", cpu=alloc_cpu, memory=alloc_mem),
        queue("q"),
        podgroup("pg", 0, queue="q"),
        pod("running", "pg", cpu=used[0], memory=used[1], node="n1", phase="Running"),
        pod("t", "pg", cpu=task_cpu, memory=task_mem, annotations=annotations),
    ]
    args = {"resourceStrategyFitWeight": weight,
            "resources": {n: {"type": k, "weight": w} for n, (k, w) in resources.items()}}
    return _scores(objects, args)["ns/t"]["n1"]


LEAST11 = {"cpu": (LEAST, 1), "memory": (LEAST, 1)}
MOST11 = {"cpu": (MOST, 1), "memory": (MOST, 1)}


@pytest.mark.parametrize(
    "case, task, alloc, resources, weight, want",
    [
        ("test1", ("100m", "100"), ("500m", "500"), LEAST11, 10, 400),
        ("test2", ("100m", "100"), ("400m", "400"), LEAST11, 10, 250),
        ("test3", ("100m", "100"), ("500m", "500"), MOST11, 10, 600),
        ("test4", ("100m", "100"), ("400m", "400"), MOST11, 10, 750),
        ("test5", ("100m", "100"), ("500m", "500"), {"cpu": (LEAST, 2), "memory": (MOST, 1)}, 10, 466.66666667),
        ("test6", ("100m", "100"), ("500m", "500"), {"cpu": (LEAST, 1), "memory": (MOST, 2)}, 10, 533.33333333),
        ("test7", (None, "100"), ("500m", "500"), {"cpu": (LEAST, 1), "memory": (MOST, 2)}, 10, 600),
        ("test8 cpu allocatable 0", ("100m", "100"), ("0", "400"), {"cpu": (LEAST, 1), "memory": (MOST, 2)}, 10, 500),
        ("test9", ("100m", "100"), ("500m", "500"), {"memory": (MOST, 2)}, 10, 600),
        ("zero-resources-requested", (None, None), ("500m", "500"), LEAST11, 10, 0),
        ("mixed-scoring-strategies", ("100m", "100"), ("500m", "500"), {"cpu": (LEAST, 3), "memory": (MOST, 1)}, 10, 450),
        ("high-weight-scenario", ("100m", "100"), ("500m", "500"), {"cpu": (LEAST, 5), "memory": (LEAST, 5)}, 20, 800),
    ],
)
def test_score(case: str, task: tuple, alloc: tuple, resources: dict, weight: int, want: float) -> None:
    assert _one_node_score(*task, *alloc, resources, weight) == pytest.approx(want, abs=1e-6)


def test_score_node_fully_allocated() -> None:
    assert _one_node_score("100m", "100", "500m", "500", LEAST11, used=("500m", "500")) == 0


@pytest.mark.parametrize(
    "case, kind, weights, want",
    [
        ("pod-level-scoring-least-allocated", LEAST, '{"cpu": 2, "memory": 1}', 400),
        ("pod-level-scoring-most-allocated", MOST, '{"cpu": 1, "memory": 2}', 600),
        ("pod-level-scoring-invalid-json", LEAST, "invalid-json", 0),
        ("pod-level-scoring-missing-resource-weight", LEAST, '{"cpu": 2}', 400),
    ],
)
def test_pod_level_scoring(case: str, kind: str, weights: str, want: float) -> None:
    ann = {SCORING_TYPE_ANNOTATION: kind, SCORING_WEIGHT_ANNOTATION: weights}
    assert _one_node_score("100m", "100", "500m", "500", LEAST11, annotations=ann) == pytest.approx(want)


def test_pod_level_scoring_without_weights_scores_zero() -> None:
    ann = {SCORING_TYPE_ANNOTATION: MOST}
    assert _one_node_score("100m", "100", "500m", "500", LEAST11, annotations=ann) == 0


# -- TestResourceStrategyFitPlugin -----------------------------------------------------------


def _four_pods_four_nodes() -> list[dict]:
    return [
        node("n1", cpu="4", memory="4Gi", pods="10", nvidia_com__gpu="10"),
        node("n2", cpu="4", memory="4Gi", pods="10", nvidia_com__gpu="5"),
        node("n3", cpu="4", memory="4Gi", pods="10", example_com__foo="10"),
        node("n4", cpu="4", memory="4Gi", pods="10", example_com__foo="5"),
        queue("c1", weight=1),
        podgroup("pg1", 0, queue="c1", namespace="c1", phase="Pending"),
        pod("p1", "pg1", cpu="1", memory="1Gi", namespace="c1", extra_requests={FOO: "2"}),
        pod("p2", "pg1", cpu="1", memory="1Gi", namespace="c1", extra_requests={FOO: "3"}),
        pod("p3", "pg1", cpu="1", memory="10Gi", namespace="c1", extra_requests={GPU: "2"}),
        pod("p4", "pg1", cpu="1", memory="1Gi", namespace="c1", extra_requests={GPU: "3"}),
    ]


def test_plugin_scores_gpu_most_foo_least() -> None:
    got = _scores(_four_pods_four_nodes(), {"resourceStrategyFitWeight": 10, "resources": {
        GPU: {"type": "MostAllocated", "weight": 1}, FOO: {"type": "LeastAllocated", "weight": 1}}})
    assert got == {
        "c1/p1": pytest.approx({"n1": 0, "n2": 0, "n3": 800, "n4": 600}),
        "c1/p2": pytest.approx({"n1": 0, "n2": 0, "n3": 700, "n4": 400}),
        "c1/p3": pytest.approx({"n1": 200, "n2": 400, "n3": 0, "n4": 0}),
        "c1/p4": pytest.approx({"n1": 300, "n2": 600, "n3": 0, "n4": 0}),
    }


def test_plugin_scores_two_scalars() -> None:
    # Volcano's n6 sets example.com/foo twice (5, then 10): the node has 10.
    objects = [
        node("n5", cpu="4", memory="4Gi", pods="10", nvidia_com__gpu="10", example_com__foo="5"),
        node("n6", cpu="4", memory="4Gi", pods="10", example_com__foo="10"),
        queue("c1", weight=1),
        podgroup("pg1", 0, queue="c1", namespace="c1", phase="Pending"),
        pod("p5", "pg1", cpu="1", memory="1Gi", namespace="c1", extra_requests={GPU: "4", FOO: "4"}),
    ]
    got = _scores(objects, {"resourceStrategyFitWeight": 10, "resources": {
        GPU: {"type": "MostAllocated", "weight": 1}, FOO: {"type": "LeastAllocated", "weight": 2}}})
    assert got == {"c1/p5": pytest.approx({"n5": 266.66666666, "n6": 399.99999999})}


# -- sra: TestArguments, TestNode ------------------------------------------------------------


def test_sra_and_proportional_arguments() -> None:
    a = parse_arguments(Arguments({
        "sra": {"enable": True, "resources": "nvidia.com/t4, nvidia.com/a10", "weight": 3,
                "resourceWeight": {T4: 1, A10: 2}},
        "proportional": {"enable": True, "resources": "nvidia.com/t4, nvidia.com/a10",
                         "resourceProportion": {"nvidia.com/t4.cpu": 3, "nvidia.com/t4.memory": 6,
                                                "nvidia.com/a10.cpu": 4, "nvidia.com/a10.memory": 8}},
    }))
    assert a.sra_weight == 3 and a.sra_weight_sum == 3 and a.sra_resources == {T4: 1, A10: 2}
    assert a.proportional == {T4: (3.0, 6.0), A10: (4.0, 8.0)}


def test_sra_disabled_and_defaults() -> None:
    a = parse_arguments(Arguments({"sra": {"enable": False, "resources": T4, "weight": 3}}))
    assert a.sra_resources == {} and a.sra_weight == 0
    a = parse_arguments(Arguments({"sra": {"enable": True, "resources": f"{T4}, ,{A10}",
                                           "resourceWeight": {T4: -2}}}))
    assert a.sra_weight == 0 and a.sra_resources == {T4: 1, A10: 1}
    assert parse_arguments(Arguments({})).proportional is None


def _sra_objects() -> list[dict]:
    return [
        node("n1", cpu="32", memory="64Gi", pods="10"),
        node("n2", cpu="8", memory="16Gi", pods="10", nvidia_com__t4="16"),
        node("n3", cpu="8", memory="16Gi", pods="10", nvidia_com__a10="16"),
        node("n4", cpu="8", memory="16Gi", pods="10", nvidia_com__t4="8", nvidia_com__a10="16"),
        queue("c1", weight=1),
        podgroup("pg1", 0, queue="c1", namespace="c1", phase="Pending"),
        pod("p1", "pg1", cpu="1", memory="1Gi", namespace="c1"),
        pod("p2", "pg1", cpu="1.5", memory=None, namespace="c1", extra_requests={T4: "2"}),
        pod("p3", "pg1", cpu="2", memory="4Gi", namespace="c1", extra_requests={A10: "2"}),
        pod("p4", "pg1", cpu="3", memory="4Gi", namespace="c1", extra_requests={T4: "1", A10: "3"}),
    ]


SRA_CASES = [
    (
        "case1: multi-GPU resource",
        {"resourceStrategyFitWeight": 0, "sra": {"enable": True, "resources": f"{T4}, {A10}", "weight": 5,
                                                  "resourceWeight": {T4: 2, A10: 3}}},
        {"p1": {"n1": 500, "n2": 300, "n3": 200, "n4": 0}, "p2": {"n1": 0, "n2": 300, "n3": 0, "n4": 0},
         "p3": {"n1": 0, "n2": 0, "n3": 200, "n4": 0}, "p4": {"n1": 0, "n2": 0, "n3": 0, "n4": 0}},
    ),
    (
        "case2: single GPU resource",
        {"resourceStrategyFitWeight": 0, "sra": {"enable": True, "resources": T4, "weight": 5,
                                                  "resourceWeight": {T4: 2}}},
        {"p1": {"n1": 500, "n2": 0, "n3": 500, "n4": 0}, "p2": {"n1": 0, "n2": 0, "n3": 0, "n4": 0},
         "p3": {"n1": 0, "n2": 0, "n3": 500, "n4": 0}, "p4": {"n1": 0, "n2": 0, "n3": 0, "n4": 0}},
    ),
    (
        "case3: sra weight 0 with resourceStrategyFit",
        {"resourceStrategyFitWeight": 8,
         "resources": {T4: {"type": "MostAllocated", "weight": 3}, "cpu": {"type": "LeastAllocated", "weight": 1}},
         "sra": {"enable": True, "resources": T4, "weight": 0, "resourceWeight": {T4: 2}}},
        {"p1": {"n1": 775, "n2": 700, "n3": 700, "n4": 700},
         "p2": {"n1": 190.625, "n2": 237.5, "n3": 162.5, "n4": 312.5},
         "p3": {"n1": 750, "n2": 600, "n3": 600, "n4": 600},
         "p4": {"n1": 181.25, "n2": 162.5, "n3": 125, "n4": 200}},
    ),
    (
        "case4: sra and resourceStrategyFit",
        {"resourceStrategyFitWeight": 8,
         "resources": {T4: {"type": "MostAllocated", "weight": 3}, "cpu": {"type": "LeastAllocated", "weight": 1}},
         "sra": {"enable": True, "resources": T4, "weight": 5, "resourceWeight": {T4: 2}}},
        {"p1": {"n1": 1275, "n2": 700, "n3": 1200, "n4": 700},
         "p2": {"n1": 190.625, "n2": 237.5, "n3": 162.5, "n4": 312.5},
         "p3": {"n1": 750, "n2": 600, "n3": 1100, "n4": 600},
         "p4": {"n1": 181.25, "n2": 162.5, "n3": 125, "n4": 200}},
    ),
]


@pytest.mark.parametrize("case, arguments, want", SRA_CASES, ids=[c[0] for c in SRA_CASES])
def test_sra_node_scores(case: str, arguments: dict, want: dict) -> None:
    got = _scores(_sra_objects(), arguments)
    assert got == {f"c1/{p}": pytest.approx(s) for p, s in want.items()}


def test_zero_weights_register_no_scorer() -> None:
    ssn = _session(_sra_objects(), {"resourceStrategyFitWeight": 0})
    assert not ssn.has_hook("node_order")


# -- proportional: Test_checkNodeResourceIsProportional ---------------------------------------


PROPORTIONAL = {"resourceStrategyFitWeight": 0, "proportional": {
    "enable": True, "resources": GPU, "resourceProportion": {f"{GPU}.cpu": 4, f"{GPU}.memory": 4}}}


@pytest.mark.parametrize(
    "case, task, node_idle, passes",
    [
        ("cpu_task_less_than_reserved_resource", ("4", "4G", None), ("30", "30G", "6"), True),
        ("cpu_task_greater_than_reserved_resource", ("10", "10G", None), ("30", "30G", "6"), False),
        ("gpu_task_no_proportional_check", ("10", "10G", "1"), ("30", "30G", "6"), True),
        ("cpu_task_less_than_idle_resource", ("10", "10G", None), ("26", "26G", "2"), True),
    ],
)
def test_proportional_predicate(case: str, task: tuple, node_idle: tuple, passes: bool) -> None:
    cpu, mem, gpu = task
    objects = [node("n1", cpu=node_idle[0], memory=node_idle[1], nvidia_com__gpu=node_idle[2]),
               queue("q"), podgroup("pg", 0, queue="q"),
               pod("t", "pg", cpu=cpu, memory=mem, extra_requests={GPU: gpu} if gpu else None)]
    ssn = _session(objects, PROPORTIONAL, predicate=True)
    t = next(iter(ssn.tasks.values()))
    res = ssn.predicate(t)
    assert bool(res.passed[0]) is passes
    assert bool(ssn.predicate_mask(t)[0]) is passes  # the row-local form agrees
    if not passes:
        (failure,) = res.failures
        assert failure.reason == f"proportional of resource {GPU} check failed" and failure.unresolvable


def test_proportional_node_without_the_resource_passes() -> None:
    objects = [node("n1", cpu="4", memory="4G"), node("n2", cpu="30", memory="30G", nvidia_com__gpu="6"),
               queue("q"), podgroup("pg", 0, queue="q"), pod("t", "pg", cpu="3", memory="3G")]
    ssn = _session(objects, PROPORTIONAL, predicate=True)
    t = next(iter(ssn.tasks.values()))
    assert ssn.predicate(t).passed.tolist() == [True, True]


def test_pod_annotation_weights_are_json_ints() -> None:
    # {"cpu": 2.0} is not a Go map[ResourceName]int: Volcano cannot read it and scores 0.
    ann = {SCORING_TYPE_ANNOTATION: LEAST, SCORING_WEIGHT_ANNOTATION: json.dumps({"cpu": 2.0})}
    assert _one_node_score("100m", "100", "500m", "500", LEAST11, annotations=ann) == 0


@pytest.mark.parametrize("case, arguments, want", SRA_CASES + [
    ("fit only", {"resources": {T4: {"type": "MostAllocated", "weight": 3}, "cpu": {"type": "LeastAllocated", "weight": 1}}}, None),
    ("pod strategy", {}, None),
], ids=[c[0] for c in SRA_CASES] + ["fit only", "pod strategy"])
def test_few_rows_in_plain_floats_equal_the_array_path(case: str, arguments: dict, want: Any) -> None:
    """A placement rescored only its rows, in plain floats: the same values as the array path."""
    from tidesched.plugins.resource_strategy_fit import _requested, pod_strategy

    objs = _sra_objects()
    objs[-1]["metadata"]["annotations"].update({SCORING_TYPE_ANNOTATION: MOST, SCORING_WEIGHT_ANNOTATION: '{"cpu": 1}'})
    ssn = _session(objs, arguments)
    plugin = ssn.plugins["resource-strategy-fit"]
    rows = np.arange(len(ssn.table))
    for t in ssn.tasks.values():
        _key, compute = plugin._plan(ssn.table, tuple(_requested(t)), pod_strategy(t.pod.meta.annotations))
        assert np.allclose(compute(rows), compute(None)), t.name
