"""The Helm chart installed by the real Helm binary on the real API server, beside Volcano's own
ConfigMap: the objects are accepted, the chart's ServiceAccount with the chart's RBAC runs
``tidesched run`` with the Deployment's flags (leader election on a Lease in the release namespace,
configuration from ``volcano-scheduler-configmap``), binds a gang without a refused request, and
``helm uninstall`` removes what it installed."""

from __future__ import annotations

import importlib.util
import os

import pytest

from cluster import VOLCANO_DEFAULT_CONF, Scheduler, bound, create_node, volcano_job, wait_until
from controlplane import REPO, Api, ApiError

_spec = importlib.util.spec_from_file_location("deploy_render", REPO / "deploy" / "render.py")
assert _spec and _spec.loader
render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render)

RELEASE = "rel"
FULLNAME = f"{RELEASE}-tidesched"
# Flags of the chart's Deployment the test scheduler takes as they are; addresses, period, verbosity
# and the config path (inside the container) are the test harness's own.
TAKEN = ("--scheduler-name=", "--leader-elect", "--lock-object-namespace=", "--kube-api-", "--eviction-mode=")


def _helm_or_skip() -> None:
    try:
        render.ensure_helm()
    except render.HelmMissing as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Helm required in CI: {exc}")
        pytest.skip(str(exc))


def test_helm_install_runs_as_the_charts_service_account(e2e) -> None:
    _helm_or_skip()
    api, cp = e2e.api, e2e.cp
    ns = e2e.namespace("helm")
    api.create({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "volcano-scheduler-configmap", "namespace": ns},
        "data": {"volcano-scheduler.conf": VOLCANO_DEFAULT_CONF},
    })
    admin = cp.kubeconfig(e2e.tmp / "admin.kubeconfig", cp.admin_token, user="e2e-admin")

    def helm(*args: str) -> None:
        out = render.helm(*args, "--kubeconfig", str(admin), "--namespace", ns)
        assert out.returncode == 0, out.stdout + out.stderr

    helm("install", RELEASE, str(render.CHART),
         "--set", "config.existingConfigMap=volcano-scheduler-configmap",
         "--set", "leaderElection.leaseName=tidesched-e2e")
    try:
        dep = api.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{FULLNAME}")
        spec = dep["spec"]["template"]["spec"]
        assert spec["volumes"][0]["configMap"]["name"] == "volcano-scheduler-configmap"
        assert spec["serviceAccountName"] == FULLNAME
        api.get(f"/api/v1/namespaces/{ns}/services/{FULLNAME}-metrics")
        api.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/{FULLNAME}-leader-election")
        with pytest.raises(ApiError):  # the existing ConfigMap is used, none is made
            api.get(f"/api/v1/namespaces/{ns}/configmaps/{FULLNAME}-scheduler-configmap")

        # tidesched run as the chart's ServiceAccount, with the Deployment's flags and the
        # ConfigMap's text: the e2e fixture fails the test on any request RBAC refuses.
        token = cp.service_account_token(ns, FULLNAME)
        kubeconfig = cp.kubeconfig(e2e.tmp / "chart-sa.kubeconfig", token)
        flags = [a for a in spec["containers"][0]["args"] if a.startswith(TAKEN)]
        assert f"--lock-object-namespace={ns}" in flags and "--leader-elect=true" in flags
        conf = e2e.tmp / "volcano-scheduler.conf"
        conf.write_text(api.get(f"/api/v1/namespaces/{ns}/configmaps/volcano-scheduler-configmap")["data"]["volcano-scheduler.conf"])
        sched = Scheduler(kubeconfig, conf, e2e.tmp / "chart-sa.log", args=flags)
        e2e.schedulers.append(sched)
        sched.start().wait_ready()

        create_node(api, "node-a", cpu="4", memory="16Gi")
        names = volcano_job(api, e2e.ns, "gang", replicas=2, cpu="1", memory="1Gi")
        wait_until(lambda: set(names) <= set(bound(api, e2e.ns)), 30, "the gang to bind")
        lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/tidesched-e2e")
        assert lease["spec"]["holderIdentity"]
        assert sched.stop() == 0  # before its permissions go
    finally:
        helm("uninstall", RELEASE, "--wait")
    gone = f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{FULLNAME}"
    wait_until(lambda: _missing(api, gone), 30, "the ClusterRole to be removed")


def _missing(api: Api, path: str) -> bool:
    try:
        api.get(path)
        return False
    except ApiError as exc:
        return exc.status == 404

