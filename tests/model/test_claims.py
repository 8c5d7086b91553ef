"""A pod's DRA claims as read from ``spec.resourceClaims`` and ``status.resourceClaimStatuses``."""

from __future__ import annotations

import pytest

from tidesched.model.claims import PodClaim
from tidesched.model.objects import ObjectError, parse_pod
from tidesched.model.snapshot import build_snapshot
from tidesched.model.loader import Manifest


def _pod(claims, statuses=None) -> dict:
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [{}], "resourceClaims": claims}}
    if statuses is not None:
        pod["status"] = {"resourceClaimStatuses": statuses}
    return pod


def test_claims_from_a_claim_and_from_a_template_with_its_made_claim() -> None:
    pod = parse_pod(_pod(
        [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}, {"name": "nic", "resourceClaimName": "shared-nic"}],
        [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2"}],
    ))
    assert pod.claims == (PodClaim("gpu", "p-gpu-x7k2", "one-gpu"), PodClaim("nic", "shared-nic", ""))


def test_template_claim_not_made_yet_has_no_claim_name() -> None:
    assert parse_pod(_pod([{"name": "gpu", "resourceClaimTemplateName": "t"}])).claims == (PodClaim("gpu", "", "t"),)


def test_pod_without_claims_has_none() -> None:
    assert parse_pod({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{}]}}).claims == ()


@pytest.mark.parametrize(
    ("claims", "field", "words"),
    [
        ([{"name": "gpu"}], "spec.resourceClaims[0]", "exactly one of"),
        ([{"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}], "spec.resourceClaims[0]", "exactly one of"),
        ([{"resourceClaimName": "a"}], "spec.resourceClaims[0].name", "missing"),
        ([{"name": "g", "resourceClaimName": "a"}, {"name": "g", "resourceClaimName": "b"}], "spec.resourceClaims[1].name", "used twice"),
        (["gpu"], "spec.resourceClaims[0]", "expected a mapping"),
        ({"name": "gpu"}, "spec.resourceClaims", "expected a list"),
        ([{"name": "gpu", "resourceClaimName": 7}], "spec.resourceClaims[0].resourceClaimName", "expected a string"),
    ],
)
def test_malformed_claims_name_the_field(claims, field: str, words: str) -> None:
    with pytest.raises(ObjectError) as err:
        parse_pod(_pod(claims))
    assert err.value.field == field and words in str(err.value)


def test_malformed_claims_are_a_warning_and_the_rest_is_read() -> None:
    bad = _pod([{"name": "gpu"}])
    good = {"kind": "Pod", "metadata": {"name": "q", "namespace": "ns"}, "spec": {"containers": [{}]}}
    snap = build_snapshot([Manifest("a.yaml", bad), Manifest("b.yaml", good)])
    assert [p.key for p in snap.pods] == ["ns/q"]
    assert any("spec.resourceClaims[0]" in p.message for p in snap.problems)
