"""Label selectors, requirement parsing and affinity-term namespace rules."""

from __future__ import annotations

import pytest

from tidesched.rules.selectors import (
    SelectorError,
    affinity_term_namespaces,
    compile_label_selector,
    match_label_selector,
    parse_field_requirement,
    parse_go_int64,
    parse_node_requirement,
    term_matches_pod,
    term_namespaces_match,
    validate_label_selector,
    validate_node_affinity,
    validate_node_selector_term,
)

LABELS = {"app": "web", "tier": "frontend", "env": ""}


class TestNilVsEmpty:
    def test_nil_selector_matches_nothing(self) -> None:
        assert match_label_selector(None, LABELS) is False
        assert match_label_selector(None, {}) is False

    def test_empty_selector_matches_everything(self) -> None:
        assert match_label_selector({}, LABELS) is True
        assert match_label_selector({}, {}) is True
        assert match_label_selector({"matchLabels": {}, "matchExpressions": []}, {}) is True
        assert match_label_selector({"matchLabels": None}, None) is True


class TestOperators:
    @pytest.mark.parametrize(
        "sel, expected",
        [
            ({"matchLabels": {"app": "web"}}, True),
            ({"matchLabels": {"app": "db"}}, False),
            ({"matchLabels": {"missing": "x"}}, False),
            ({"matchLabels": {"env": ""}}, True),  # empty value present
            ({"matchLabels": {"app": "web", "tier": "backend"}}, False),  # AND
            ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "web"]}]}, True),
            ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}, False),
            ({"matchExpressions": [{"key": "nope", "operator": "In", "values": ["x"]}]}, False),
            ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}, True),
            ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, False),
            # NotIn matches objects without the key
            ({"matchExpressions": [{"key": "nope", "operator": "NotIn", "values": ["x"]}]}, True),
            ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, True),
            ({"matchExpressions": [{"key": "env", "operator": "Exists"}]}, True),
            ({"matchExpressions": [{"key": "nope", "operator": "Exists"}]}, False),
            ({"matchExpressions": [{"key": "nope", "operator": "DoesNotExist"}]}, True),
            ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, False),
            (
                {
                    "matchLabels": {"tier": "frontend"},
                    "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}],
                },
                True,
            ),
        ],
    )
    def test_matches(self, sel: dict, expected: bool) -> None:
        assert match_label_selector(sel, LABELS) is expected

    def test_non_string_values_are_coerced(self) -> None:
        assert match_label_selector({"matchLabels": {"replicas": 3}}, {"replicas": "3"})
        assert match_label_selector({"matchLabels": {"gpu": True}}, {"gpu": "true"})

    @pytest.mark.parametrize(
        "sel, fragment",
        [
            ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "operator"),
            ({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["1"]}]}, "operator"),
            ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "non-empty"),
            ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "non-empty"),
            ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "empty"),
            ({"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]}, "list"),
            ({"matchExpressions": [{"operator": "Exists"}]}, "key"),
            ({"matchExpressions": {"key": "a"}}, "list"),
            ({"matchLabels": ["a"]}, "mapping"),
            ("app=web", "mapping"),
        ],
    )
    def test_malformed_raises_selector_error(self, sel: object, fragment: str) -> None:
        with pytest.raises(SelectorError, match=fragment):
            match_label_selector(sel, LABELS)  # type: ignore[arg-type]
        assert validate_label_selector(sel)  # and validation reports something

    def test_selector_error_is_value_error(self) -> None:
        assert issubclass(SelectorError, ValueError)


class TestValidateLabelSelector:
    def test_valid(self) -> None:
        sel = {
            "matchLabels": {"app.kubernetes.io/name": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "x", "operator": "DoesNotExist"},
            ],
        }
        assert validate_label_selector(sel) == []
        assert validate_label_selector(None) == []
        assert validate_label_selector({}) == []

    def test_problems(self) -> None:
        sel = {
            "matchLabels": {"bad key!": "v", "ok": "bad value!"},
            "matchExpressions": [
                {"key": "a", "operator": "Exists", "values": ["x"]},
                {"key": "b", "operator": "Foo", "values": ["x"]},
                {"key": "c", "operator": "NotIn"},
            ],
            "extra": 1,
        }
        problems = validate_label_selector(sel)
        text = "\n".join(problems)
        assert "unknown field" in text
        assert "bad key!" in text
        assert "bad value!" in text
        assert "must be empty for operator Exists" in text
        assert "'Foo' is not valid" in text
        assert "non-empty for operator NotIn" in text

    def test_prefix_rules(self) -> None:
        assert validate_label_selector({"matchLabels": {"Example.com/x": "v"}})  # upper-case prefix
        assert validate_label_selector({"matchLabels": {"/x": "v"}})
        assert validate_label_selector({"matchLabels": {"a" * 64: "v"}})
        assert validate_label_selector({"matchLabels": {"k": "v" * 64}})
        assert validate_label_selector({"matchLabels": {"example.com/x": "v"}}) == []


class TestGoInt:
    @pytest.mark.parametrize(
        "text, value",
        [
            ("0", 0),
            ("42", 42),
            ("-7", -7),
            ("+5", 5),
            ("007", 7),
            (str(2**63 - 1), 2**63 - 1),
            (str(-(2**63)), -(2**63)),
        ],
    )
    def test_ok(self, text: str, value: int) -> None:
        assert parse_go_int64(text) == value

    @pytest.mark.parametrize("text", ["", " 1", "1 ", "1_000", "1.0", "0x10", "abc", str(2**63), "--1", "+"])
    def test_rejected(self, text: str) -> None:
        assert parse_go_int64(text) is None

    def test_non_string(self) -> None:
        assert parse_go_int64(5) is None  # type: ignore[arg-type]


class TestNodeRequirementParsing:
    def test_gt_lt(self) -> None:
        r = parse_node_requirement({"key": "k", "operator": "Gt", "values": ["10"]})
        assert r.number == 10
        with pytest.raises(SelectorError, match="exactly one value"):
            parse_node_requirement({"key": "k", "operator": "Gt", "values": ["1", "2"]})
        with pytest.raises(SelectorError, match="exactly one value"):
            parse_node_requirement({"key": "k", "operator": "Lt"})
        with pytest.raises(SelectorError, match="not an int64"):
            parse_node_requirement({"key": "k", "operator": "Lt", "values": ["ten"]})

    def test_unknown_operator(self) -> None:
        with pytest.raises(SelectorError, match="not a valid node selector operator"):
            parse_node_requirement({"key": "k", "operator": "Like", "values": ["x"]})

    def test_values_not_list(self) -> None:
        with pytest.raises(SelectorError, match="must be a list"):
            parse_node_requirement({"key": "k", "operator": "In", "values": 5})

    def test_fields(self) -> None:
        r = parse_field_requirement({"key": "metadata.name", "operator": "In", "values": ["n1"]})
        assert r.values == ("n1",)
        with pytest.raises(SelectorError, match="exactly one value"):
            parse_field_requirement({"key": "metadata.name", "operator": "In", "values": ["a", "b"]})
        with pytest.raises(SelectorError, match="not a supported node field"):
            parse_field_requirement({"key": "metadata.uid", "operator": "In", "values": ["a"]})
        with pytest.raises(SelectorError, match="not valid for matchFields"):
            parse_field_requirement({"key": "metadata.name", "operator": "Exists"})

    def test_validate_term_and_affinity(self) -> None:
        assert validate_node_selector_term({"matchExpressions": [{"key": "a", "operator": "Exists"}]}) == []
        probs = validate_node_selector_term(
            {
                "matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": []}],
            }
        )
        assert len(probs) == 2
        aff = {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 0, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}},
                {"weight": 5, "preference": {"matchExpressions": [{"key": "a", "operator": "Nope"}]}},
            ],
        }
        text = "\n".join(validate_node_affinity(aff))
        assert "non-empty list" in text
        assert "1..100" in text
        assert "Nope" in text
        assert validate_node_affinity(None) == []


class TestAffinityTermNamespaces:
    def test_default_is_own_namespace(self) -> None:
        term = {"labelSelector": {}, "topologyKey": "zone"}
        assert affinity_term_namespaces(term, "ns1") == frozenset({"ns1"})
        assert term_namespaces_match(term, "ns1", "ns1")
        assert not term_namespaces_match(term, "ns1", "ns2")

    def test_explicit_namespaces(self) -> None:
        term = {"namespaces": ["a", "b"], "labelSelector": {}}
        assert term_namespaces_match(term, "ns1", "a")
        assert not term_namespaces_match(term, "ns1", "ns1")

    def test_empty_namespace_selector_means_all(self) -> None:
        term = {"namespaceSelector": {}, "labelSelector": {}}
        # namespaces empty but selector non-nil: the own namespace is NOT implied...
        assert affinity_term_namespaces(term, "ns1") == frozenset()
        # ...yet the empty selector matches every namespace
        assert term_namespaces_match(term, "ns1", "anything")
        assert term_namespaces_match(term, "ns1", "ns1", {"team": "x"})

    def test_namespace_selector_with_labels(self) -> None:
        term = {"namespaceSelector": {"matchLabels": {"team": "ml"}}}
        assert term_namespaces_match(term, "ns1", "other", {"team": "ml"})
        assert not term_namespaces_match(term, "ns1", "other", {"team": "web"})
        assert not term_namespaces_match(term, "ns1", "other")  # unknown labels: treated as none
        assert not term_namespaces_match(term, "ns1", "ns1")  # own ns not implied

    def test_namespaces_or_selector(self) -> None:
        term = {"namespaces": ["a"], "namespaceSelector": {"matchLabels": {"team": "ml"}}}
        assert term_namespaces_match(term, "x", "a", {})
        assert term_namespaces_match(term, "x", "b", {"team": "ml"})
        assert not term_namespaces_match(term, "x", "b", {"team": "web"})

    def test_term_matches_pod_nil_label_selector(self) -> None:
        # nil labelSelector in an affinity term matches no pod, empty matches all
        assert not term_matches_pod({"topologyKey": "z"}, "ns", "ns", {"a": "b"})
        assert term_matches_pod({"labelSelector": {}, "topologyKey": "z"}, "ns", "ns", {"a": "b"})
        assert term_matches_pod(
            {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "z"}, "ns", "ns", {"a": "b"}
        )
        assert not term_matches_pod(
            {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "z"}, "ns", "other", {"a": "b"}
        )

    def test_malformed_term(self) -> None:
        with pytest.raises(SelectorError):
            term_namespaces_match("nope", "a", "b")  # type: ignore[arg-type]
        with pytest.raises(SelectorError):
            term_namespaces_match({"namespaces": "a"}, "a", "b")


def test_compiled_selector_reuse() -> None:
    sel = compile_label_selector(
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100", "h100"]}]}
    )
    pods = [{"gpu": "a100"}, {"gpu": "v100"}, {}]
    assert [sel.matches(p) for p in pods] == [True, False, False]
