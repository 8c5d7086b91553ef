"""FGD's fragmentation measure (rules/gpu_frag): the cases of the paper's simulator's own tests
(pkg/utils/frag_test.go: the same nodes, typical pods and expected amounts), and the aggregates'
one-device updates against recomputing them."""

from __future__ import annotations

import numpy as np
import pytest

from tidesched.rules import gpu_frag as gf
from tidesched.rules.gpu_frag import PodShape, TypicalPods

# (cpu milli, milli per GPU, GPUs, model, per cent): the frag tests' typical pods
MIXED = [
    (6000, 465, 1, "", 9.33), (8000, 440, 1, "2080", 9.15), (8000, 475, 1, "T4", 8.76), (8000, 440, 1, "P100", 8.72),
    (2000, 465, 1, "", 8.68), (12000, 900, 1, "", 8.65), (4000, 900, 1, "", 8.43), (16000, 678, 1, "T4", 8.36),
    (8000, 500, 1, "", 8.29), (6000, 511, 1, "", 8.11), (14000, 1000, 2, "2080", 0.54), (4000, 1000, 1, "2080", 0.43),
    (32000, 1000, 2, "T4", 0.43), (16000, 1000, 1, "V100M16", 0.40), (64000, 1000, 2, "", 0.40),
    (10000, 1000, 2, "", 0.40), (11400, 1000, 1, "T4", 0.36), (16000, 1000, 1, "T4", 0.36), (4000, 1000, 2, "", 0.36),
    (14000, 1000, 2, "V100M16", 0.36), (8000, 1000, 4, "", 0.36), (16000, 1000, 2, "", 0.32), (2000, 1000, 1, "T4", 0.32),
    (6000, 1000, 1, "", 0.32), (4000, 1000, 1, "", 0.32), (5000, 1000, 1, "", 0.32), (32000, 1000, 4, "V100M16", 0.32),
    (32000, 1000, 2, "", 0.32), (24000, 1000, 8, "2080", 0.32), (40000, 1000, 4, "", 0.29), (32000, 1000, 8, "", 0.29),
    (32000, 1000, 1, "T4", 0.29), (16000, 1000, 1, "", 0.25), (7000, 1000, 1, "V100M16", 0.25), (24000, 1000, 1, "T4", 0.25),
]
WITH_CPU_PODS = [
    (15700, 1000, 1, 28.69), (11900, 1000, 1, 18.93), (11400, 1000, 1, 12.27), (1000, 0, 0, 7.36), (18710, 1000, 1, 4.85),
    (8200, 1000, 1, 3.79), (16400, 1000, 1, 3.31), (9810, 1000, 1, 1.97), (15200, 1000, 1, 1.87), (11200, 1000, 1, 1.81),
    (14200, 1000, 1, 1.76), (12000, 0, 0, 1.65), (14900, 1000, 1, 1.39), (60200, 1000, 4, 1.23), (64200, 1000, 8, 1.07),
    (32200, 1000, 4, 1.01), (17400, 1000, 2, 0.91), (30200, 1000, 2, 0.69), (16000, 1000, 1, 0.64), (15000, 1000, 1, 0.59),
    (64000, 1000, 8, 0.53), (15000, 0, 0, 0.53), (11910, 1000, 1, 0.53), (120200, 1000, 8, 0.48), (11300, 1000, 1, 0.37),
    (30000, 1000, 2, 0.32), (9800, 1000, 1, 0.32), (8000, 1000, 1, 0.32), (2000, 1000, 1, 0.27), (2000, 80, 1, 0.27),
    (1000, 1000, 1, 0.27),
]


def mixed(rows: list[tuple]) -> TypicalPods:
    # The Go tests use the listed per cents as they are (they do not sum to 1).
    shapes = tuple(PodShape(c, m, g, (model,) if model else ()) for c, m, g, model, _ in rows)
    return TypicalPods(shapes, np.array([p / 100 for *_, p in rows]))


def with_cpu_pods() -> TypicalPods:
    shapes = tuple(PodShape(c, m, g) for c, m, g, _ in WITH_CPU_PODS)
    return TypicalPods(shapes, np.array([p / 100 for *_, p in WITH_CPU_PODS]))


def frag(tp: TypicalPods, model: str, cpu: int, devices: list[int]) -> float:
    access = tp.access([model])
    return float(gf.node_frag(tp, access, np.array([cpu]), np.array([devices]))[0])


@pytest.mark.parametrize(
    ("cpu", "devices", "expected"),
    [
        (1000, [200, 1000, 1000, 500], 2566.62),
        (1000, [1000, 1000, 1000, 1000], 3802.40),
        (1000, [1000] * 8, 7604.80),
    ],
)
def test_share_frag_amount_of_the_papers_tests(cpu: int, devices: list[int], expected: float) -> None:
    assert frag(mixed(MIXED), "1080", cpu, devices) == pytest.approx(expected, abs=0.01)


def test_one_typical_pod_lacking_cpu_counts_all_free_share() -> None:
    tp = mixed(MIXED[:1])
    assert frag(tp, "1080", 1000, [200, 1000, 1000, 500]) == pytest.approx(251.91, abs=0.01)
    classes = gf.frag_classes(tp, tp.access(["1080"]), np.array([1000]), np.array([2700]),
                              *gf.aggregates(np.array([[200, 1000, 1000, 500]]), tp))
    assert classes[0, gf.Q4] == pytest.approx(2700 * 0.0933)
    assert classes[0].sum() - classes[0, gf.Q3] == pytest.approx(251.91, abs=0.01)


@pytest.mark.parametrize(
    ("cpu", "devices", "expected"),
    [(64000, [1000] * 8, 887.20), (32000, [1000] * 4 + [0] * 4, 554.4), (0, [1000] * 4 + [0] * 4, 4000)],
)
def test_share_frag_amount_with_cpu_only_typical_pods(cpu: int, devices: list[int], expected: float) -> None:
    assert frag(with_cpu_pods(), "P100", cpu, devices) == pytest.approx(expected, abs=0.01)


def test_classes_split_the_free_share() -> None:
    tp = with_cpu_pods()
    dev = np.array([[1000, 1000, 600, 0], [300, 0, 0, 0], [1000, 1000, 1000, 1000]])
    cpu = np.array([20000, 500, 64000])
    access = tp.access(["P100"] * 3)
    small, count = gf.aggregates(dev, tp)
    classes = gf.frag_classes(tp, access, cpu, dev.sum(1), small, count)
    np.testing.assert_allclose(classes.sum(axis=1), dev.sum(1) * tp.weights.sum())
    np.testing.assert_allclose(classes.sum(axis=1) - classes[:, gf.Q3],
                               gf.frag_amount(tp, access, cpu, dev.sum(1), small, count))


def test_model_constrained_pods_see_other_models_as_no_access() -> None:
    tp = TypicalPods((PodShape(1000, 500, 1, ("T4",)),), np.array([1.0]))
    access = tp.access(["T4", "P100", ""])
    assert access[:, 0].tolist() == [True, False, False]
    dev = np.array([[1000, 1000], [1000, 1000], [0, 0]])
    amounts = gf.node_frag(tp, access, np.array([8000, 8000, 8000]), dev)
    assert amounts.tolist() == [0.0, 2000.0, 0.0]


def test_device_delta_matches_recomputing() -> None:
    rng = np.random.default_rng(3)
    tp = mixed(MIXED)
    dev = rng.integers(0, 101, size=(50, 8)) * 10
    small, count = gf.aggregates(dev, tp)
    for _ in range(200):
        i, j = rng.integers(50), rng.integers(8)
        new = int(rng.integers(0, dev[i, j] + 1))
        ds, dc = gf.device_delta(dev[i, j], new, tp)
        after = dev.copy()
        after[i, j] = new
        s2, c2 = gf.aggregates(after[i:i + 1], tp)
        np.testing.assert_array_equal(small[i] + ds, s2[0])
        np.testing.assert_array_equal(count[i] + dc, c2[0])


def test_typical_pods_cover_the_popular_shapes_and_renormalise() -> None:
    a, b, c, d = (PodShape(1000, 500, 1), PodShape(2000, 1000, 1), PodShape(500, 0, 0), PodShape(8000, 1000, 8))
    tp = gf.typical_pods({a: 50, b: 30, c: 15, d: 5}, popularity=90)
    assert tp.shapes == (a, b, c)
    np.testing.assert_allclose(tp.weights, [50 / 95, 30 / 95, 15 / 95])
    assert gf.typical_pods({a: 50, b: 30, c: 15, d: 5}, popularity=90, include_cpu_pods=False).shapes == (a, b)
    # equal counts: the larger request first
    assert gf.typical_pods([a, b], popularity=50).shapes == (b,)
