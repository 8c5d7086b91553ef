"""The static-filter template key (plugins/predicates.py ``template_key``): pods whose node
selector, node affinity and tolerations are equal share one key, whatever the order of their
fields; any difference gives another key; no value the pod may carry makes it fail."""

from __future__ import annotations

from builders import node, pod
from tidesched.model.infos import TaskInfo
from tidesched.model.objects import parse_pod
from tidesched.model.snapshot import build_snapshot
from tidesched.plugins.predicates import template_key
from tidesched.scheduler import config_from_text, open_session, run_actions

# What an API server adds to every pod (DefaultTolerationSeconds).
DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]


def _key(spec: dict) -> str:
    return template_key(TaskInfo(parse_pod(pod("p", spec=spec)), "ns/j", 0))


def test_equal_templates_share_a_key_whatever_the_field_order() -> None:
    reordered = [dict(reversed(list(t.items()))) for t in DEFAULT_TOLERATIONS]
    a = _key({"tolerations": DEFAULT_TOLERATIONS, "nodeSelector": {"zone": "a", "pool": "x"}})
    b = _key({"nodeSelector": {"pool": "x", "zone": "a"}, "tolerations": reordered})
    assert a == b
    assert a.startswith("[")  # the JSON form: the pod has tolerations


def test_any_difference_gives_another_key() -> None:
    base = _key({"tolerations": DEFAULT_TOLERATIONS})
    longer = [dict(DEFAULT_TOLERATIONS[0], tolerationSeconds=600), DEFAULT_TOLERATIONS[1]]
    assert _key({"tolerations": longer}) != base
    assert _key({"tolerations": DEFAULT_TOLERATIONS, "nodeSelector": {"zone": "a"}}) != base
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
    assert _key({"tolerations": DEFAULT_TOLERATIONS, "affinity": affinity}) != base
    # A plain selector without tolerations (an empty list is none) has the short form, which
    # never equals a JSON key.
    plain = _key({"nodeSelector": {"zone": "a"}})
    assert plain.startswith("S") and plain == _key({"nodeSelector": {"zone": "a"}, "tolerations": []})
    assert plain != _key({"nodeSelector": {"zone": "a"}, "tolerations": DEFAULT_TOLERATIONS[:1]})


def test_values_json_has_no_type_for_still_give_a_key() -> None:
    """An integer past 64 bits (orjson refuses it), and a non-string key in a selector."""
    huge = [dict(DEFAULT_TOLERATIONS[0], tolerationSeconds=2**70)]
    assert _key({"tolerations": huge}) != _key({"tolerations": [dict(huge[0], tolerationSeconds=2**71)]})
    assert _key({"tolerations": DEFAULT_TOLERATIONS, "nodeSelector": {1: "a"}}).startswith("[")


def test_pods_with_the_default_tolerations_are_placed() -> None:
    objs = [node("n1", cpu="4"), node("n2", cpu="4")]
    objs += [pod(f"p{i}", spec={"tolerations": DEFAULT_TOLERATIONS}) for i in range(6)]
    objs.append(pod("huge", spec={"tolerations": [dict(DEFAULT_TOLERATIONS[0], tolerationSeconds=2**70)]}))
    ssn = open_session(build_snapshot(objs), config_from_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: predicates\n'))
    decisions = run_actions(ssn)
    assert sorted(decisions.bound) == sorted([f"ns/p{i}" for i in range(6)] + ["ns/huge"])
