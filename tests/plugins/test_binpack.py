"""binpack plugin: argument parsing and vectorised node scores (own cases modelled on
Volcano plugins/binpack/binpack_test.go TestArguments / TestNode, with the current rule that
a node the task would overflow scores 0 altogether)."""

from __future__ import annotations

import numpy as np
import pytest

from builders import node, pod, podgroup, queue
from tidesched.framework.arguments import Arguments
from tidesched.model.snapshot import build_snapshot
from tidesched.plugins.binpack import parse_weights
from tidesched.scheduler import config_from_text, open_session

GPU = "nvidia.com/gpu"
FOO = "example.com/foo"


def _config(args: dict) -> str:
    lines = "\n".join(f"      {k}: {v!r}" if isinstance(v, str) else f"      {k}: {v}" for k, v in args.items())
    return f"""
actions: "allocate"
tiers:
- plugins:
  - name: binpack
    enableNodeOrder: true
    arguments:
{lines}
"""


def _objects() -> list[dict]:
    return [
        node("n1", cpu="2", memory="4Gi"),
        node("n2", cpu="4", memory="16Gi", nvidia_com__gpu="4"),
        node("n3", cpu="2", memory="4Gi", example_com__foo="16"),
        queue("c1", weight=1),
        podgroup("pg1", 1, queue="c1", namespace="c1"),
        pod("p1", "pg1", cpu="1", memory="1Gi", namespace="c1", node="n1"),
        pod("p2", "pg1", cpu="1500m", memory=None, namespace="c1", node="n3"),
        pod("p3", "pg1", cpu="2", memory="10Gi", namespace="c1", extra_requests={GPU: "2"}),
        pod("p4", "pg1", cpu="3", memory="4Gi", namespace="c1", extra_requests={FOO: "3"}),
    ]


def _scores(args: dict) -> dict[str, dict[str, float]]:
    ssn = open_session(build_snapshot(_objects()), config_from_text(_config(args)))
    idx = np.arange(len(ssn.table))
    out: dict[str, dict[str, float]] = {}
    for t in ssn.tasks.values():
        s = ssn.node_order(t, idx)
        out[t.name] = {ssn.table.names[i]: float(s[k]) for k, i in enumerate(idx)}
    return out


def test_builder_node_scalar_names() -> None:
    # the builder spells "nvidia.com/gpu" as nvidia_com__gpu; make sure the node got it
    n = node("n2", nvidia_com__gpu="4")
    assert n["status"]["allocatable"][GPU] == "4"


def test_arguments() -> None:
    w, res = parse_weights(Arguments({
        "binpack.weight": 10, "binpack.cpu": 5, "binpack.memory": 2,
        "binpack.resources": "nvidia.com/gpu, example.com/foo",
        "binpack.resources.nvidia.com/gpu": 7, "binpack.resources.example.com/foo": -3,
    }))
    assert w == 10
    assert res == {"cpu": 5, "memory": 2, GPU: 7, FOO: 1}


def test_argument_defaults_and_negative_cpu() -> None:
    w, res = parse_weights(Arguments({"binpack.cpu": -4, "binpack.resources": " , x.io/y ,"}))
    assert w == 1
    assert res == {"cpu": 1, "memory": 1, "x.io/y": 1}


def test_listing_cpu_as_resource_does_not_override_binpack_cpu() -> None:
    _, res = parse_weights(Arguments({"binpack.cpu": 3, "binpack.resources": "cpu", "binpack.resources.cpu": 9}))
    assert res["cpu"] == 3


def test_scores_weighted_case() -> None:
    s = _scores({
        "binpack.weight": 10, "binpack.cpu": 2, "binpack.memory": 3,
        "binpack.resources": "nvidia.com/gpu, example.com/foo",
        "binpack.resources.nvidia.com/gpu": 7, "binpack.resources.example.com/foo": 8,
    })
    # p1 counts itself on n1: cpu 2/2·2 + mem 2/4·3 = 3.5 of weight 5 → 0.7 · 100 · 10
    assert s["p1"] == pytest.approx({"n1": 700, "n2": 137.5, "n3": 0})  # n3: cpu 1+1.5 > 2
    assert s["p2"] == pytest.approx({"n1": 0, "n2": 375, "n3": 0})
    assert s["p3"] == pytest.approx({"n1": 0, "n2": 531.25, "n3": 0})
    # foo is weighted but n2 has none: term 0, weight 8 still in the divisor
    assert s["p4"] == pytest.approx({"n1": 0, "n2": 2250 / 13, "n3": 0})


def test_scores_default_weights_and_unweighted_scalar() -> None:
    s = _scores({"binpack.weight": 1, "binpack.resources": "nvidia.com/gpu", "binpack.resources.nvidia.com/gpu": 23})
    assert s["p1"] == pytest.approx({"n1": 75, "n2": 15.625, "n3": 0})
    assert s["p2"] == pytest.approx({"n1": 0, "n2": 37.5, "n3": 0})
    assert s["p3"] == pytest.approx({"n1": 0, "n2": 50.5, "n3": 0})
    # foo has no weight here: only cpu and memory count
    assert s["p4"] == pytest.approx({"n1": 0, "n2": 50, "n3": 0})


def test_zero_weight_registers_nothing() -> None:
    ssn = open_session(build_snapshot(_objects()), config_from_text(_config({"binpack.weight": 0})))
    assert not ssn.has_hook("node_order")


def test_scores_only_candidate_rows() -> None:
    ssn = open_session(build_snapshot(_objects()), config_from_text(_config({"binpack.weight": 1})))
    p1 = next(t for t in ssn.tasks.values() if t.name == "p1")
    row = ssn.table.index["n2"]
    got = ssn.node_order(p1, np.array([row]))
    assert got.shape == (1,) and got[0] == pytest.approx((1 / 4 + 1 / 16) / 2 * 100)


def test_pipelined_task_not_counted_as_used() -> None:
    from tidesched.framework.statement import Statement

    objs = [node("n1", cpu="4", memory="4Gi"), queue("q"), podgroup("pg", 1, queue="q"),
            pod("a", "pg", cpu="2", memory="1Gi"), pod("b", "pg", cpu="1", memory="1Gi")]
    ssn = open_session(build_snapshot(objs), config_from_text(_config({"binpack.weight": 1})))
    a = next(t for t in ssn.tasks.values() if t.name == "a")
    b = next(t for t in ssn.tasks.values() if t.name == "b")
    before = ssn.node_order(b, np.array([0]))[0]
    stmt = Statement(ssn)
    stmt.pipeline(a, "n1")
    assert ssn.node_order(b, np.array([0]))[0] == pytest.approx(before)
    stmt.discard()
    stmt.allocate(a, "n1")
    assert ssn.node_order(b, np.array([0]))[0] == pytest.approx((3 / 4 + 2 / 4) / 2 * 100)
