"""Scorers vs worked numbers from kube-scheduler's unit-test tables and hand computation."""

from __future__ import annotations

import numpy as np
import pytest

from tidesched.rules.node_index import NodeLabelIndex
from tidesched.rules.scoring import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    VOLCANO_LEAST_ALLOCATED_WEIGHTS,
    VOLCANO_NODEORDER_DEFAULT_WEIGHTS,
    balanced_allocation,
    default_normalize,
    extended_resource_bypass,
    interpod_affinity_normalize,
    interpod_affinity_raw_scores,
    interpod_affinity_scores,
    least_allocated,
    most_allocated,
    non_zero_request,
    taint_toleration_scores,
    weighted_sum,
)

CPU_MEM = np.array([1, 1])
MI = 1024 * 1024


def arr(rows: list[list[int]]) -> np.ndarray:
    return np.array(rows, dtype=np.int64)


class TestLeastAllocated:
    @pytest.mark.parametrize(
        "alloc, req, weights, expected",
        [
            # nothing requested
            ([[4000, 10000], [4000, 10000]], [[0, 0], [0, 0]], [1, 1], [100, 100]),
            # cpu 25, mem 50 -> 37 ; cpu 50, mem 50 -> 50
            ([[4000, 10000], [6000, 10000]], [[3000, 5000], [3000, 5000]], [1, 1], [37, 50]),
            # (40 + 100)/2 = 70 ; (40 + 75)/2 = 57
            ([[10000, 20000], [10000, 20000]], [[6000, 0], [6000, 5000]], [1, 1], [70, 57]),
            # memory 80 on the bigger node -> 60
            ([[10000, 20000], [10000, 50000]], [[6000, 5000], [6000, 10000]], [1, 1], [57, 60]),
            # requested exceeds capacity -> that resource scores 0
            ([[4000, 10000], [4000, 10000]], [[6000, 0], [6000, 5000]], [1, 1], [50, 25]),
            # zero node resources -> 0
            ([[0, 0], [0, 0]], [[3000, 0], [3000, 5000]], [1, 1], [0, 0]),
            # memory weight 2: (25*1 + 50*2)/3 = 41 ; 50
            ([[4000, 10000], [6000, 10000]], [[3000, 5000], [3000, 5000]], [1, 2], [41, 50]),
        ],
    )
    def test_k8s_table(self, alloc: list, req: list, weights: list, expected: list) -> None:
        got = least_allocated(arr(alloc), arr(req), weights)
        assert got.dtype == np.float64
        assert got.tolist() == expected

    def test_volcano_weights_50_50_same_as_1_1(self) -> None:
        rng = np.random.default_rng(1)
        alloc = rng.integers(1, 100_000, size=(200, 2))
        req = rng.integers(0, 120_000, size=(200, 2))
        w = [VOLCANO_LEAST_ALLOCATED_WEIGHTS["cpu"], VOLCANO_LEAST_ALLOCATED_WEIGHTS["memory"]]
        assert np.array_equal(least_allocated(alloc, req, w), least_allocated(alloc, req, [1, 1]))

    def test_zero_allocatable_resource_left_out_of_weight_sum(self) -> None:
        # cpu 50, mem 50, gpu allocatable 0 on node0 -> ignored (not averaged in as 0)
        alloc = arr([[6000, 10000, 0], [6000, 10000, 4]])
        req = arr([[3000, 5000, 0], [3000, 5000, 2]])
        assert least_allocated(alloc, req, [1, 1, 1]).tolist() == [50, 50]
        # with the gpu counted on node1: (50+50+50)/3 = 50 ; with gpu used 2/10: (50+50+80)/3 = 60
        alloc2 = arr([[6000, 10000, 4], [6000, 10000, 10]])
        req2 = arr([[3000, 5000, 2], [3000, 5000, 2]])
        assert least_allocated(alloc2, req2, [1, 1, 1]).tolist() == [50, 60]

    def test_bypass_unrequested_extended_resource(self) -> None:
        names = ["cpu", "memory", "example.com/foo"]
        bypass = extended_resource_bypass(names, [3000, 5000, 0])
        assert bypass.tolist() == [False, False, True]
        alloc = arr([[6000, 10000, 0], [6000, 10000, 4]])
        req = arr([[3000, 5000, 0], [3000, 5000, 4]])
        assert least_allocated(alloc, req, [1, 1, 1], bypass=bypass).tolist() == [50, 50]
        assert extended_resource_bypass(["cpu", "memory"], [0, 0]).tolist() == [False, False]

    def test_shape_errors(self) -> None:
        with pytest.raises(ValueError):
            least_allocated(arr([[1, 2]]), arr([[1, 2, 3]]), [1, 1])
        with pytest.raises(ValueError):
            least_allocated(arr([[1, 2]]), arr([[1, 2]]), [1, 1, 1])
        with pytest.raises(ValueError):
            least_allocated(np.array([1, 2]), np.array([1, 2]), [1, 1])


class TestMostAllocated:
    @pytest.mark.parametrize(
        "alloc, req, weights, expected",
        [
            ([[4000, 10000], [4000, 10000]], [[0, 0], [0, 0]], [1, 1], [0, 0]),
            ([[4000, 10000], [6000, 10000]], [[3000, 5000], [3000, 5000]], [1, 1], [62, 50]),
            ([[10000, 20000], [10000, 20000]], [[6000, 0], [6000, 5000]], [1, 1], [30, 42]),
            ([[10000, 20000], [10000, 20000]], [[6000, 5000], [6000, 10000]], [1, 1], [42, 55]),
            # requested equal to capacity
            ([[5000, 10000], [10000, 9000]], [[5000, 9000], [5000, 9000]], [1, 1], [95, 75]),
            # memory weight 2: (75 + 100)/3 = 58
            ([[4000, 10000], [6000, 10000]], [[3000, 5000], [3000, 5000]], [1, 2], [58, 50]),
        ],
    )
    def test_k8s_table(self, alloc: list, req: list, weights: list, expected: list) -> None:
        assert most_allocated(arr(alloc), arr(req), weights).tolist() == expected

    def test_over_capacity_is_clamped_with_non_zero_requests(self) -> None:
        # Three containers without requests count 100m / 200Mi each (k8s table: 80 and 30).
        cpu, mem = non_zero_request(None, None)
        alloc = arr([[250, 1000 * MI], [250, 1000 * MI]])
        req = arr([[3 * cpu, 3 * mem], [cpu, mem]])
        assert most_allocated(alloc, req, [1, 1]).tolist() == [80, 30]


class TestBalancedAllocation:
    @pytest.mark.parametrize(
        "alloc, req, expected",
        [
            ([[4000, 10000], [6000, 10000]], [[3000, 5000], [3000, 5000]], [87, 100]),
            ([[10000, 20000], [10000, 20000]], [[6000, 5000], [6000, 10000]], [82, 95]),
            ([[10000, 20000], [10000, 50000]], [[6000, 5000], [6000, 10000]], [82, 80]),
            # cpu at capacity: std 0.5 -> 50 ; std 0.25 -> 75
            ([[6000, 10000], [6000, 10000]], [[6000, 0], [6000, 5000]], [50, 75]),
            # three resources (cpu, memory, gpu): population std
            ([[3500, 40000, 8], [3500, 40000, 8]], [[3000, 5000, 4], [3000, 5000, 1]], [70, 65]),
        ],
    )
    def test_k8s_table(self, alloc: list, req: list, expected: list) -> None:
        assert balanced_allocation(arr(alloc), arr(req)).tolist() == expected

    def test_fraction_capped_at_one(self) -> None:
        # cpu 2x over capacity counts as fraction 1 -> same as at capacity
        assert balanced_allocation(arr([[6000, 10000]]), arr([[12000, 5000]])).tolist() == [75]

    def test_zero_capacity_and_single_resource(self) -> None:
        # gpu has no capacity -> skipped -> the two remaining resources decide
        assert balanced_allocation(arr([[3500, 40000, 0]]), arr([[3000, 5000, 0]])).tolist() == [63]
        # only one resource with capacity -> std 0 -> 100 ; nothing with capacity -> 100 as well
        assert balanced_allocation(arr([[4000, 0]]), arr([[1000, 5]])).tolist() == [100]
        assert balanced_allocation(arr([[0, 0]]), arr([[0, 0]])).tolist() == [100]

    def test_best_effort_pod_scores_zero(self) -> None:
        got = balanced_allocation(arr([[4000, 10000]]), arr([[3000, 5000]]), pod_requests=[0, 0])
        assert got.tolist() == [0]
        got = balanced_allocation(arr([[4000, 10000]]), arr([[3000, 5000]]), pod_requests=[1, 0])
        assert got.tolist() == [87]

    def test_bypass(self) -> None:
        alloc = arr([[3500, 40000, 8]])
        req = arr([[3000, 5000, 0]])
        assert balanced_allocation(alloc, req, bypass=[False, False, True]).tolist() == [63]

    def test_exact_boundary_like_go(self) -> None:
        # std exactly 0.05: Go computes (1-0.05)*100 = 95.00000000000001 -> 95
        assert balanced_allocation(arr([[10, 10]]), arr([[6, 5]])).tolist() == [95]

    def test_matches_go_loop_reference(self) -> None:
        rng = np.random.default_rng(7)
        alloc = rng.integers(0, 50, size=(500, 4))
        req = rng.integers(0, 60, size=(500, 4))

        def reference(a: np.ndarray, r: np.ndarray) -> int:
            fr: list[float] = []
            total = 0.0
            for i in range(len(r)):
                if a[i] == 0:
                    continue
                f = min(float(r[i]) / float(a[i]), 1.0)
                total += f
                fr.append(f)
            std = 0.0
            if len(fr) == 2:
                std = abs((fr[0] - fr[1]) / 2)
            elif len(fr) > 2:
                mean = total / len(fr)
                s = 0.0
                for f in fr:
                    s = s + (f - mean) * (f - mean)
                std = (s / len(fr)) ** 0.5
            return int((1 - std) * 100)

        got = balanced_allocation(alloc, req)
        assert got.tolist() == [reference(a, r) for a, r in zip(alloc, req)]


class TestNonZeroRequest:
    def test_defaults(self) -> None:
        assert DEFAULT_MILLI_CPU_REQUEST == 100
        assert DEFAULT_MEMORY_REQUEST == 200 * 1024 * 1024
        assert non_zero_request(None, None) == (100, 200 * MI)
        # explicit zero is kept
        assert non_zero_request(0, 0) == (0, 0)
        assert non_zero_request(250, None) == (250, 200 * MI)
        assert non_zero_request(float("nan"), 5) == (100, 5)

    def test_arrays(self) -> None:
        cpu, mem = non_zero_request(np.array([np.nan, 0.0, 500.0]), np.array([1.0, np.nan, 0.0]))
        assert cpu.tolist() == [100, 0, 500]
        assert mem.tolist() == [1, 200 * MI, 0]
        cpu, mem = non_zero_request(np.array([None, 3], dtype=object), np.array([5, 6]))
        assert cpu.tolist() == [100, 3] and mem.tolist() == [5, 6]


class TestDefaultNormalize:
    def test_plain(self) -> None:
        # max 7: 100*s/7 truncated
        assert default_normalize([0, 3, 7]).tolist() == [0, 42, 100]
        assert default_normalize([1, 2, 3], max_score=10).tolist() == [3, 6, 10]
        assert default_normalize(np.array([5])).tolist() == [100]

    def test_reverse(self) -> None:
        assert default_normalize([0, 3, 7], reverse=True).tolist() == [100, 58, 0]
        assert default_normalize([2, 2], reverse=True).tolist() == [0, 0]

    def test_all_zero(self) -> None:
        assert default_normalize([0, 0, 0]).tolist() == [0, 0, 0]
        assert default_normalize([0, 0, 0], reverse=True).tolist() == [100, 100, 100]

    def test_empty_and_dtype(self) -> None:
        assert default_normalize([]).tolist() == []
        assert default_normalize([1.9, 3.0]).dtype == np.int64
        assert default_normalize([1.9, 3.0]).tolist() == [33, 100]  # floats truncated first

    def test_negative_uses_go_truncation(self) -> None:
        # k8s assumes non-negative input, but keep Go semantics: -100*1/3 = -33 (not -34)
        assert default_normalize([-1, 3]).tolist() == [-33, 100]

    def test_taint_toleration_scores(self) -> None:
        assert taint_toleration_scores([0, 1, 2]).tolist() == [100, 50, 0]
        assert taint_toleration_scores([0, 0]).tolist() == [100, 100]

    def test_node_affinity_kube_style(self) -> None:
        ix = NodeLabelIndex(["a", "b", "c"], [{"z": "1"}, {"z": "2"}, {}])
        raw = ix.preferred_affinity_scores(
            [
                {
                    "weight": 30,
                    "preference": {"matchExpressions": [{"key": "z", "operator": "In", "values": ["1"]}]},
                },
                {"weight": 20, "preference": {"matchExpressions": [{"key": "z", "operator": "Exists"}]}},
            ]
        )
        assert raw.tolist() == [50, 20, 0]
        assert default_normalize(raw).tolist() == [100, 40, 0]


class TestInterPodAffinity:
    def test_raw_aggregates_per_topology_domain(self) -> None:
        ix = NodeLabelIndex(["a", "b", "c", "d"], [{"zone": "z1"}, {"zone": "z1"}, {"zone": "z2"}, {}])
        codes = ix.topology_codes("zone")
        # affinity term weight 5: one matching pod on node a; anti-affinity weight 3: two pods on c
        aff = (codes, np.array([5, 0, 0, 0]))
        anti = (codes, np.array([0, 0, -6, 0]))
        # pods on a node without the key contribute nothing
        stray = (codes, np.array([0, 0, 0, 9]))
        raw = interpod_affinity_raw_scores([aff, anti, stray], 4)
        assert raw.tolist() == [5, 5, -6, 0]
        # min -6, max 5: int(100 * (s+6)/11)
        assert interpod_affinity_normalize(raw).tolist() == [100, 100, 0, 54]
        assert interpod_affinity_scores([aff, anti, stray], 4).tolist() == [100, 100, 0, 54]

    def test_normalize_over_candidates_only(self) -> None:
        ix = NodeLabelIndex(["a", "b", "c"], [{"zone": "z1"}, {"zone": "z2"}, {"zone": "z2"}])
        contrib = [(ix.topology_codes("zone"), np.array([4, 0, 2]))]
        got = interpod_affinity_scores(contrib, 3, candidates=np.array([False, True, True]))
        # raw [4, 2, 2]; among candidates all equal -> 0
        assert got.tolist() == [0.0, 0.0, 0.0]
        got = interpod_affinity_scores(contrib, 3, candidates=np.array([True, True, False]))
        assert got.tolist() == [100.0, 0.0, 0.0]

    def test_equal_and_empty(self) -> None:
        assert interpod_affinity_normalize([3, 3]).tolist() == [0, 0]
        assert interpod_affinity_normalize([]).tolist() == []
        assert interpod_affinity_raw_scores([], 3).tolist() == [0, 0, 0]
        with pytest.raises(ValueError):
            interpod_affinity_raw_scores([(np.array([0]), np.array([1, 2]))], 2)


def test_weighted_sum_volcano_defaults() -> None:
    assert VOLCANO_NODEORDER_DEFAULT_WEIGHTS == {
        "leastrequested": 1,
        "mostrequested": 0,
        "balancedresource": 1,
        "nodeaffinity": 2,
        "podaffinity": 2,
        "tainttoleration": 3,
        "imagelocality": 1,
        "podtopologyspread": 2,
    }
    total = weighted_sum(
        {
            "leastrequested": np.array([50.0, 10.0]),
            "mostrequested": np.array([50.0, 90.0]),
            "nodeaffinity": np.array([30, 0]),
            "tainttoleration": np.array([100, 0]),
        }
    )
    assert total.tolist() == [50 + 60 + 300, 10.0]
    assert weighted_sum({"x": np.array([1.0])}, {"x": 4}).tolist() == [4.0]
    with pytest.raises(ValueError):
        weighted_sum({})
