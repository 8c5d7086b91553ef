"""The identity ``benchmarks/kube.py`` runs kube-scheduler under: ``system:kube-scheduler``, as
kubeadm deploys it, authorized by the API server's bootstrap RBAC roles for it, and nothing
like the admin's ``system:masters`` (which skips authorization and API Priority and Fairness).
The peer must pay what tidesched's ServiceAccount pays for every request."""

from __future__ import annotations

from controlplane import ControlPlane


def _allowed(cp: ControlPlane, token: str, verb: str, resource: str, subresource: str = "", group: str = "") -> bool:
    review = cp.client(token).post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                                        "subresource": subresource, "namespace": "bench"}},
    })
    return bool(review["status"].get("allowed"))


def test_kube_scheduler_token_is_the_scheduler_not_an_admin(control_plane: ControlPlane) -> None:
    cp, token = control_plane, control_plane.kube_scheduler_token
    who = cp.client(token).post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    user = who["status"]["userInfo"]
    assert user["username"] == "system:kube-scheduler"
    assert "system:masters" not in user.get("groups", [])
    # What kube-scheduler does, granted by the bootstrap roles ...
    assert _allowed(cp, token, "create", "pods", "binding")
    assert _allowed(cp, token, "watch", "pods")
    assert _allowed(cp, token, "list", "nodes")
    assert _allowed(cp, token, "create", "events", group="events.k8s.io")
    # ... and not what only an admin may.
    assert not _allowed(cp, token, "delete", "nodes")
    assert not _allowed(cp, token, "create", "secrets")
    assert _allowed(cp, cp.admin_token, "delete", "nodes")
