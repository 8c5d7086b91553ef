"""Tolerations vs taints, the TaintToleration filter mask and PreferNoSchedule counts."""

from __future__ import annotations

import numpy as np
import pytest

from tidesched.rules.selectors import SelectorError
from tidesched.rules.taints import (
    Taint,
    TaintIndex,
    count_intolerable_prefer_no_schedule,
    find_untolerated,
    tolerates,
    tolerates_unschedulable,
    tolerations_tolerate,
)

GPU_NS = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_NE = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoExecute"}
SPOT_PNS = {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}
DEDICATED_NS = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}


class TestTolerates:
    @pytest.mark.parametrize(
        "tol, taint, expected",
        [
            # empty key + Exists tolerates everything
            ({"operator": "Exists"}, GPU_NS, True),
            ({"operator": "Exists"}, SPOT_PNS, True),
            # empty key + Exists restricted by effect
            ({"operator": "Exists", "effect": "NoExecute"}, GPU_NS, False),
            ({"operator": "Exists", "effect": "NoExecute"}, GPU_NE, True),
            # Exists on a key ignores value
            ({"key": "nvidia.com/gpu", "operator": "Exists"}, GPU_NS, True),
            ({"key": "nvidia.com/gpu", "operator": "Exists"}, DEDICATED_NS, False),
            # default operator is Equal
            ({"key": "dedicated", "value": "ml"}, DEDICATED_NS, True),
            ({"key": "dedicated", "value": "web"}, DEDICATED_NS, False),
            (
                {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
                DEDICATED_NS,
                True,
            ),
            (
                {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"},
                DEDICATED_NS,
                False,
            ),
            # empty effect matches all effects
            ({"key": "nvidia.com/gpu", "value": "present"}, GPU_NE, True),
            ({"key": "nvidia.com/gpu", "value": "present"}, GPU_NS, True),
            # Equal with empty value vs a taint without value
            ({"key": "k", "operator": "Equal"}, {"key": "k", "effect": "NoSchedule"}, True),
            ({"key": "k", "operator": "Equal", "value": "v"}, {"key": "k", "effect": "NoSchedule"}, False),
            # unknown operator tolerates nothing
            ({"key": "dedicated", "operator": "Matches", "value": "ml"}, DEDICATED_NS, False),
            # numeric comparison operators (newer kube): compare taint value to toleration value
            (
                {"key": "gen", "operator": "Gt", "value": "3"},
                {"key": "gen", "value": "5", "effect": "NoSchedule"},
                True,
            ),
            (
                {"key": "gen", "operator": "Gt", "value": "5"},
                {"key": "gen", "value": "5", "effect": "NoSchedule"},
                False,
            ),
            (
                {"key": "gen", "operator": "Lt", "value": "5"},
                {"key": "gen", "value": "4", "effect": "NoSchedule"},
                True,
            ),
            (
                {"key": "gen", "operator": "Lt", "value": "x"},
                {"key": "gen", "value": "4", "effect": "NoSchedule"},
                False,
            ),
        ],
    )
    def test_table(self, tol: dict, taint: dict, expected: bool) -> None:
        assert tolerates(tol, taint) is expected

    def test_no_execute_with_toleration_seconds_still_tolerates(self) -> None:
        tol = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
        assert tolerates(tol, GPU_NE)
        assert find_untolerated([GPU_NE], [tol]) is None

    def test_malformed(self) -> None:
        with pytest.raises(SelectorError):
            tolerates("x", GPU_NS)  # type: ignore[arg-type]
        with pytest.raises(SelectorError):
            tolerates({}, {"key": "k", "effect": "Sometimes"})
        with pytest.raises(SelectorError):
            tolerates({}, {"effect": "NoSchedule"})
        with pytest.raises(SelectorError):
            tolerations_tolerate({"key": "k"}, GPU_NS)  # not a list

    def test_dataclass_inputs(self) -> None:
        assert tolerations_tolerate([{"operator": "Exists"}], Taint("a", "", "NoSchedule"))


class TestFindUntolerated:
    def test_filter_effects(self) -> None:
        taints = [SPOT_PNS, GPU_NS, DEDICATED_NS]
        # PreferNoSchedule is ignored by the filter
        assert find_untolerated(taints, [{"key": "nvidia.com/gpu", "operator": "Exists"}]) == DEDICATED_NS
        assert (
            find_untolerated(
                taints, [{"key": "nvidia.com/gpu", "operator": "Exists"}, {"key": "dedicated", "value": "ml"}]
            )
            is None
        )
        assert find_untolerated(taints, []) == GPU_NS
        assert find_untolerated(taints, None, effects=None) == SPOT_PNS
        assert find_untolerated(taints, None, effects=["PreferNoSchedule"]) == SPOT_PNS
        assert find_untolerated(None, None) is None

    def test_counts(self) -> None:
        taints = [SPOT_PNS, {"key": "old", "effect": "PreferNoSchedule"}, GPU_NS]
        assert count_intolerable_prefer_no_schedule(taints, []) == 2
        assert count_intolerable_prefer_no_schedule(taints, [{"key": "spot", "operator": "Exists"}]) == 1
        assert (
            count_intolerable_prefer_no_schedule(taints, [{"operator": "Exists", "effect": "NoSchedule"}])
            == 2
        )
        assert count_intolerable_prefer_no_schedule(taints, [{"operator": "Exists"}]) == 0

    def test_unschedulable(self) -> None:
        assert not tolerates_unschedulable([])
        assert tolerates_unschedulable([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
        assert tolerates_unschedulable([{"operator": "Exists"}])
        assert not tolerates_unschedulable([{"operator": "Exists", "effect": "NoExecute"}])


NODES: list = [
    None,
    [GPU_NS],
    [GPU_NS, SPOT_PNS],
    [SPOT_PNS, GPU_NS],  # same set, other order
    [DEDICATED_NS, GPU_NE],
    [SPOT_PNS, {"key": "old", "effect": "PreferNoSchedule"}],
    [],
]


class TestTaintIndex:
    def test_grouping(self) -> None:
        ix = TaintIndex(NODES)
        assert len(ix) == 7
        assert len(ix.distinct_sets) == 5
        assert ix.set_ids[0] == ix.set_ids[6]
        assert ix.set_ids[2] == ix.set_ids[3]
        assert not ix.set_ids.flags.writeable

    def test_filter_mask(self) -> None:
        ix = TaintIndex(NODES)
        assert ix.filter_mask(None).tolist() == [True, False, False, False, False, True, True]
        gpu = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
        assert ix.filter_mask(gpu).tolist() == [True, True, True, True, False, True, True]
        assert ix.filter_mask(gpu + [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]).all()
        assert ix.filter_mask([{"operator": "Exists"}]).all()
        # cached result is not shared
        m = ix.filter_mask(None)
        m[:] = True
        assert ix.filter_mask(None).tolist() == [True, False, False, False, False, True, True]

    def test_prefer_counts(self) -> None:
        ix = TaintIndex(NODES)
        counts = ix.prefer_no_schedule_counts([])
        assert counts.dtype == np.int64
        assert counts.tolist() == [0, 0, 1, 1, 0, 2, 0]
        assert ix.prefer_no_schedule_counts(
            [{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}]
        ).tolist() == [
            0,
            0,
            0,
            0,
            0,
            1,
            0,
        ]

    def test_untolerated(self) -> None:
        ix = TaintIndex(NODES)
        assert ix.untolerated([], 0) is None
        t = ix.untolerated([{"key": "nvidia.com/gpu", "operator": "Exists"}], 4)
        assert t == Taint("dedicated", "ml", "NoSchedule")

    def test_matches_scalar_functions(self) -> None:
        tol_sets = [
            None,
            [{"operator": "Exists"}],
            [{"key": "spot", "operator": "Exists"}],
            [{"key": "nvidia.com/gpu", "value": "present"}],
        ]
        ix = TaintIndex(NODES)
        for tols in tol_sets:
            expected_ok = [find_untolerated(t, tols) is None for t in NODES]
            expected_counts = [count_intolerable_prefer_no_schedule(t, tols) for t in NODES]
            assert ix.filter_mask(tols).tolist() == expected_ok
            assert ix.prefer_no_schedule_counts(tols).tolist() == expected_counts

    def test_malformed(self) -> None:
        bad = [[GPU_NS], [{"key": "x", "effect": "Bogus"}, SPOT_PNS], "nope"]
        with pytest.raises(SelectorError, match=r"nodes\[1\]"):
            TaintIndex(bad)  # type: ignore[arg-type]
        errors: list[str] = []
        ix = TaintIndex(bad, errors=errors)  # type: ignore[arg-type]
        assert len(errors) == 2
        assert ix.prefer_no_schedule_counts([]).tolist() == [0, 1, 0]
        with pytest.raises(SelectorError):
            ix.filter_mask([{"key": 5}])
