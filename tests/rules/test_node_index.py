"""NodeLabelIndex: every operator, terms, nodeSelector, affinity and a naive cross-check."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidesched.rules.node_index import NodeLabelIndex
from tidesched.rules.selectors import SelectorError, parse_go_int64

NAMES = ["n0", "n1", "n2", "n3", "n4"]
LABELS: list[dict[str, str]] = [
    {"zone": "a", "gpu": "a100", "cores": "8"},
    {"zone": "a", "gpu": "h100", "cores": "64"},
    {"zone": "b", "cores": "x16"},  # not an integer
    {"zone": "b", "gpu": "a100", "cores": "-3", "empty": ""},
    {},
]


@pytest.fixture()
def idx() -> NodeLabelIndex:
    return NodeLabelIndex(NAMES, LABELS)


def names_of(mask: np.ndarray) -> list[str]:
    assert mask.dtype == bool and mask.shape == (len(NAMES),)
    return [n for n, m in zip(NAMES, mask) if m]


class TestRequirementMask:
    @pytest.mark.parametrize(
        "req, expected",
        [
            ({"key": "zone", "operator": "In", "values": ["a"]}, ["n0", "n1"]),
            ({"key": "zone", "operator": "In", "values": ["a", "b"]}, ["n0", "n1", "n2", "n3"]),
            ({"key": "zone", "operator": "In", "values": ["c"]}, []),
            ({"key": "nokey", "operator": "In", "values": ["c"]}, []),
            ({"key": "gpu", "operator": "NotIn", "values": ["a100"]}, ["n1", "n2", "n4"]),
            ({"key": "nokey", "operator": "NotIn", "values": ["x"]}, NAMES),
            ({"key": "gpu", "operator": "Exists"}, ["n0", "n1", "n3"]),
            ({"key": "empty", "operator": "Exists"}, ["n3"]),
            ({"key": "gpu", "operator": "DoesNotExist"}, ["n2", "n4"]),
            ({"key": "empty", "operator": "In", "values": [""]}, ["n3"]),
            # Gt/Lt: absent and non-integer labels never match
            ({"key": "cores", "operator": "Gt", "values": ["8"]}, ["n1"]),
            ({"key": "cores", "operator": "Gt", "values": ["-10"]}, ["n0", "n1", "n3"]),
            ({"key": "cores", "operator": "Lt", "values": ["8"]}, ["n3"]),
            ({"key": "cores", "operator": "Lt", "values": ["1000"]}, ["n0", "n1", "n3"]),
            ({"key": "gpu", "operator": "Gt", "values": ["0"]}, []),
        ],
    )
    def test_operators(self, idx: NodeLabelIndex, req: dict, expected: list[str]) -> None:
        assert names_of(idx.requirement_mask(req)) == expected

    @pytest.mark.parametrize(
        "req",
        [
            {"key": "cores", "operator": "Gt", "values": ["1", "2"]},
            {"key": "cores", "operator": "Gt", "values": ["abc"]},
            {"key": "cores", "operator": "Lt", "values": []},
            {"key": "zone", "operator": "Like", "values": ["a"]},
            {"key": "zone", "operator": "In", "values": "a"},
            {"key": "zone", "operator": "In", "values": []},
            {"key": "zone", "operator": "Exists", "values": ["a"]},
            {"operator": "Exists"},
            "zone=a",
        ],
    )
    def test_malformed(self, idx: NodeLabelIndex, req: object) -> None:
        with pytest.raises(SelectorError):
            idx.requirement_mask(req)  # type: ignore[arg-type]

    def test_results_are_fresh_arrays(self, idx: NodeLabelIndex) -> None:
        m = idx.requirement_mask({"key": "zone", "operator": "Exists"})
        m[:] = False
        assert idx.requirement_mask({"key": "zone", "operator": "Exists"}).sum() == 4


class TestFields:
    def test_in_not_in(self, idx: NodeLabelIndex) -> None:
        assert names_of(
            idx.field_requirement_mask({"key": "metadata.name", "operator": "In", "values": ["n2"]})
        ) == ["n2"]
        assert (
            names_of(idx.field_requirement_mask({"key": "metadata.name", "operator": "In", "values": ["zz"]}))
            == []
        )
        assert names_of(
            idx.field_requirement_mask({"key": "metadata.name", "operator": "NotIn", "values": ["n2"]})
        ) == ["n0", "n1", "n3", "n4"]

    def test_malformed(self, idx: NodeLabelIndex) -> None:
        with pytest.raises(SelectorError):
            idx.field_requirement_mask({"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]})
        with pytest.raises(SelectorError):
            idx.field_requirement_mask({"key": "spec.unschedulable", "operator": "In", "values": ["true"]})


class TestTerms:
    def test_empty_term_matches_nothing(self, idx: NodeLabelIndex) -> None:
        assert names_of(idx.term_mask({})) == []
        assert names_of(idx.term_mask({"matchExpressions": [], "matchFields": []})) == []
        assert names_of(idx.term_mask(None)) == []

    def test_and_of_expressions_and_fields(self, idx: NodeLabelIndex) -> None:
        term = {
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a", "b"]},
                {"key": "gpu", "operator": "Exists"},
            ],
            "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n0"]}],
        }
        assert names_of(idx.term_mask(term)) == ["n1", "n3"]

    def test_fields_only(self, idx: NodeLabelIndex) -> None:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n4"]}]}
        assert names_of(idx.term_mask(term)) == ["n4"]

    def test_required_or_of_terms(self, idx: NodeLabelIndex) -> None:
        aff = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n4"]}]},
                    {},  # empty term: ignored
                ]
            }
        }
        assert names_of(idx.required_affinity_mask(aff)) == ["n1", "n4"]

    def test_required_absent_or_empty(self, idx: NodeLabelIndex) -> None:
        assert idx.required_affinity_mask(None).all()
        assert idx.required_affinity_mask({}).all()
        assert idx.required_affinity_mask({"preferredDuringSchedulingIgnoredDuringExecution": []}).all()
        # required present but no terms / only empty terms: nothing matches
        assert not idx.required_affinity_mask({"requiredDuringSchedulingIgnoredDuringExecution": {}}).any()
        assert not idx.required_affinity_mask(
            {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}
        ).any()

    def test_malformed_term_is_lazy(self, idx: NodeLabelIndex) -> None:
        aff = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["1", "2"]}]},
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                ]
            }
        }
        errors: list[str] = []
        assert names_of(idx.required_affinity_mask(aff, errors)) == ["n2", "n3"]
        assert len(errors) == 1 and "nodeSelectorTerms[0]" in errors[0] and "exactly one value" in errors[0]
        # without an errors list the bad term is silently non-matching (kube Filter behaviour)
        assert names_of(idx.required_affinity_mask(aff)) == ["n2", "n3"]

    def test_structurally_malformed_raises(self, idx: NodeLabelIndex) -> None:
        with pytest.raises(SelectorError):
            idx.required_affinity_mask("x")  # type: ignore[arg-type]
        with pytest.raises(SelectorError):
            idx.required_affinity_mask(
                {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": "x"}}
            )
        with pytest.raises(SelectorError):
            idx.term_mask({"matchExpressions": {"key": "a"}})


class TestNodeSelectorAndPod:
    def test_node_selector(self, idx: NodeLabelIndex) -> None:
        assert idx.node_selector_mask(None).all()
        assert idx.node_selector_mask({}).all()
        assert names_of(idx.node_selector_mask({"zone": "a"})) == ["n0", "n1"]
        assert names_of(idx.node_selector_mask({"zone": "a", "gpu": "a100"})) == ["n0"]
        assert names_of(idx.node_selector_mask({"zone": "c"})) == []
        assert names_of(idx.node_selector_mask({"empty": ""})) == ["n3"]
        with pytest.raises(SelectorError):
            idx.node_selector_mask(["zone"])  # type: ignore[arg-type]

    def test_pod_node_mask(self, idx: NodeLabelIndex) -> None:
        spec = {
            "nodeSelector": {"zone": "a"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["10"]}]}
                        ]
                    }
                }
            },
        }
        assert names_of(idx.pod_node_mask(spec)) == ["n1"]
        assert names_of(idx.pod_node_mask({"spec": spec})) == ["n1"]  # whole pod accepted
        # cached path returns an independent copy
        m = idx.pod_node_mask(spec)
        m[:] = True
        assert names_of(idx.pod_node_mask(spec)) == ["n1"]
        assert idx.pod_node_mask({}).all()
        assert idx.pod_node_mask(None).all()
        assert idx.pod_node_mask({"affinity": {"podAffinity": {}}}).all()

    def test_pod_node_mask_errors_reported_on_cache_hit(self, idx: NodeLabelIndex) -> None:
        spec = {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Bogus"}]}]
                    }
                }
            }
        }
        for _ in range(2):
            errors: list[str] = []
            assert not idx.pod_node_mask(spec, errors).any()
            assert len(errors) == 1 and "Bogus" in errors[0]


class TestPreferred:
    def test_sum_of_weights(self, idx: NodeLabelIndex) -> None:
        pref = [
            {
                "weight": 10,
                "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            },
            {"weight": 5, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}},
            {"weight": 7, "preference": {}},  # empty preference: skipped
            {"weight": 0, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}},
            {
                "weight": 3,
                "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n4"]}]},
            },
        ]
        scores = idx.preferred_affinity_scores(pref)
        assert scores.dtype == np.int64
        assert scores.tolist() == [15, 15, 0, 5, 3]
        assert idx.preferred_affinity_scores(None).tolist() == [0] * 5
        assert idx.preferred_affinity_scores(pref).tolist() == [15, 15, 0, 5, 3]  # cached

    def test_malformed_raises(self, idx: NodeLabelIndex) -> None:
        with pytest.raises(SelectorError):
            idx.preferred_affinity_scores(
                [
                    {
                        "weight": 1,
                        "preference": {"matchExpressions": [{"key": "z", "operator": "Gt", "values": ["a"]}]},
                    }
                ]
            )
        with pytest.raises(SelectorError):
            idx.preferred_affinity_scores([{"weight": "high", "preference": {}}])
        with pytest.raises(SelectorError):
            idx.preferred_affinity_scores(["x"])  # type: ignore[list-item]


class TestTopologyAndSelectors:
    def test_topology_codes(self, idx: NodeLabelIndex) -> None:
        codes = idx.topology_codes("zone")
        vals = idx.topology_values("zone")
        assert [vals[c] if c >= 0 else None for c in codes] == ["a", "a", "b", "b", None]
        assert not codes.flags.writeable
        assert idx.value_code("zone", "b") == codes[2]
        assert idx.value_code("zone", "zz") == -1
        assert (idx.topology_codes("nokey") == -1).all()
        assert idx.topology_codes("empty").tolist() == [-1, -1, -1, 0, -1]

    def test_label_selector_mask(self, idx: NodeLabelIndex) -> None:
        assert not idx.label_selector_mask(None).any()
        assert idx.label_selector_mask({}).all()
        sel = {
            "matchLabels": {"zone": "a"},
            "matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["a100"]}],
        }
        assert names_of(idx.label_selector_mask(sel)) == ["n1"]

    def test_basics(self, idx: NodeLabelIndex) -> None:
        assert len(idx) == 5
        assert idx.names == tuple(NAMES)
        assert idx.index_of("n3") == 3 and idx.index_of("zz") is None
        with pytest.raises(ValueError):
            NodeLabelIndex(["a"], [])

    def test_yaml_typed_label_values(self) -> None:
        ix = NodeLabelIndex(["a", "b"], [{"gpus": 8, "spot": True}, {"gpus": "2"}])
        assert ix.requirement_mask({"key": "gpus", "operator": "Gt", "values": ["4"]}).tolist() == [
            True,
            False,
        ]
        assert ix.node_selector_mask({"spot": "true"}).tolist() == [True, False]


# ---------------------------------------------------------------------------------------------
# Consistency with a naive per-node evaluation (written independently here)
# ---------------------------------------------------------------------------------------------


def naive_requirement(req: Mapping, labels: Mapping[str, str]) -> bool:
    key, op, values = req["key"], req["operator"], req.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if key not in labels:
        return False
    node_v = parse_go_int64(labels[key])
    req_v = int(values[0])
    if node_v is None:
        return False
    return node_v > req_v if op == "Gt" else node_v < req_v


KEYS = ["zone", "rack", "gpu", "cores"]
VALUES = ["a", "b", "c", "", "1", "5", "-2", "10", "x7", "+3"]

label_sets = st.lists(
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=4), min_size=1, max_size=30
)
requirements = st.one_of(
    st.builds(
        lambda k, op, vs: {"key": k, "operator": op, "values": vs},
        st.sampled_from(KEYS + ["absent"]),
        st.sampled_from(["In", "NotIn"]),
        st.lists(st.sampled_from(VALUES + ["zz"]), min_size=1, max_size=3),
    ),
    st.builds(
        lambda k, op: {"key": k, "operator": op},
        st.sampled_from(KEYS + ["absent"]),
        st.sampled_from(["Exists", "DoesNotExist"]),
    ),
    st.builds(
        lambda k, op, v: {"key": k, "operator": op, "values": [str(v)]},
        st.sampled_from(KEYS + ["absent"]),
        st.sampled_from(["Gt", "Lt"]),
        st.integers(-5, 12),
    ),
)


@settings(max_examples=300, deadline=None)
@given(labels=label_sets, reqs=st.lists(requirements, min_size=1, max_size=4))
def test_requirement_mask_matches_naive(labels: list[dict[str, str]], reqs: list[dict]) -> None:
    names = [f"node-{i:03d}" for i in range(len(labels))]
    ix = NodeLabelIndex(names, labels)
    for req in reqs:
        expected = [naive_requirement(req, lab) for lab in labels]
        assert ix.requirement_mask(req).tolist() == expected, req
    # a term is the AND of its requirements
    term_expected = [all(naive_requirement(r, lab) for r in reqs) for lab in labels]
    assert ix.term_mask({"matchExpressions": reqs}).tolist() == term_expected


def test_ten_thousand_unique_hostnames() -> None:
    n = 10_000
    names = [f"node-{i:05d}" for i in range(n)]
    labels = [
        {"kubernetes.io/hostname": name, "zone": f"z{i % 7}", "gpu.count": str(i % 9)}
        for i, name in enumerate(names)
    ]
    ix = NodeLabelIndex(names, labels)
    m = ix.requirement_mask(
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-00042", "node-09999"]}
    )
    assert np.flatnonzero(m).tolist() == [42, 9999]
    for i in range(200):
        ix.requirement_mask({"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [names[i]]})
        ix.requirement_mask({"key": "gpu.count", "operator": "Gt", "values": [str(i % 9)]})
        ix.node_selector_mask({"zone": f"z{i % 7}"})
    assert ix.topology_codes("kubernetes.io/hostname").max() == n - 1
