"""Fixtures for the end-to-end tests: one real control plane per test run with the real
kube-controller-manager and Volcano installed as its users install it (Volcano's CRDs, its own
``vc-controller-manager`` and, from v1.15, ``vc-webhook-manager`` with the chart's webhook
configurations), ``deploy/`` applied to it as an operator would, and per test a clean cluster, a
namespace, a kubelet stand-in and ``tidesched run`` subprocesses authenticated as the deployed
ServiceAccount. Volcano's version is ``VOLCANO_VERSION`` (v1.15.1 by default; see ``volcano.py``).
The control plane's binaries come from ``../shared/envtest`` (or ``KUBEBUILDER_ASSETS``),
Volcano's from ``../shared/volcano-1.15`` or ``../shared/volcano`` (or ``VOLCANO_ASSETS``); where
any is missing the tests are skipped saying so, and fail under ``CI``. tests/e2e/README.md lists
what still stands in for a real component, and why."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from cluster import (  # noqa: E402
    SA_NAME,
    SA_NAMESPACE,
    Kubelet,
    Scheduler,
    ensure_namespace,
    delete_queues,
    install_deploy,
    queue_admits,
    wait_until,
)
from controlplane import Api, ApiError, ControlPlane, find_assets  # noqa: E402
from kcm import KubeControllerManager, find_kcm, start_kcm  # noqa: E402
from volcano import (  # noqa: E402
    V115,
    VolcanoProcess,
    default_version,
    find_volcano,
    install_volcano_crds,
    start_controller_manager,
    version_of,
)
from webhooks import WebhookManager, start_webhook_manager  # noqa: E402

_counter = itertools.count(1)


def _required(what: str, missing: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} required in CI: {missing}")
    pytest.skip(f"e2e tests need {what}: {missing}")


@pytest.fixture(scope="session")
def volcano_version() -> str:
    """``1.15.1`` (the default) or ``1.7.0``, from ``VOLCANO_VERSION``."""
    return default_version()


@pytest.fixture(scope="session")
def volcano_dir(volcano_version: str) -> Path:
    found, missing = find_volcano(version=volcano_version)
    if found is None:
        _required("Volcano's components", missing)
    assert found is not None
    return found


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    assets, missing = find_assets()
    if assets is None:
        _required("a control plane", missing)
        return
    cp = ControlPlane(assets, workdir=tmp_path_factory.mktemp("controlplane"))
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()
        # Keep the logs for a look after a failure; the etcd data (tens of MB) goes.
        shutil.rmtree(cp.workdir / "etcd", ignore_errors=True)


@pytest.fixture(scope="session")
def kube_controller_manager(control_plane: ControlPlane) -> Iterator[KubeControllerManager]:
    """The real kube-controller-manager for the whole run (namespace, garbage-collector,
    ReplicaSet, Deployment, Job, node-lifecycle... controllers)."""
    binary, missing = find_kcm()
    if binary is None:
        _required("kube-controller-manager", missing)
    proc = start_kcm(control_plane, control_plane.workdir, args=KCM_ARGS)
    try:
        yield proc
    finally:
        proc.stop()


# The harness's client rate for kube-controller-manager: kind's default (20/s) makes a ReplicaSet
# of a few hundred pods take tens of seconds, which is the controller's pace, not the scheduler's.
KCM_ARGS = ("--kube-api-qps=200", "--kube-api-burst=400")


@dataclass
class Installed:
    """``deploy/`` as applied to the cluster, and the scheduler's credentials."""

    kubeconfig: Path
    token: str
    config_text: str  # the ConfigMap's volcano-scheduler.conf, as the volume would mount it


@pytest.fixture(scope="session")
def installed(control_plane: ControlPlane, kube_controller_manager: KubeControllerManager, volcano_dir: Path) -> Installed:
    api = control_plane.admin
    install_deploy(api)
    # Volcano's CRDs as its chart installs them. With v1.7.0, deploy/'s PodGroup and Queue CRDs
    # stay: they are newer than v1.7.0's (queue parent, priority, deserved), as with a newer Volcano.
    install_volcano_crds(api, volcano_dir, replace=version_of(volcano_dir) == V115)
    token = control_plane.service_account_token(SA_NAMESPACE, SA_NAME)
    kubeconfig = control_plane.kubeconfig(control_plane.workdir / "tidesched.kubeconfig", token)
    cm = api.get(f"/api/v1/namespaces/{SA_NAMESPACE}/configmaps/tidesched-scheduler-configmap")
    return Installed(kubeconfig, token, cm["data"]["volcano-scheduler.conf"])


@pytest.fixture(scope="session")
def volcano_webhooks(control_plane: ControlPlane, installed: Installed, volcano_dir: Path) -> Iterator[WebhookManager | None]:
    """Volcano's admission webhooks for the whole run, every one Volcano's CI enables. None with
    v1.7.0, which has no webhook manager here: its tests write what its webhooks would default."""
    if version_of(volcano_dir) != V115:
        yield None
        return
    proc = start_webhook_manager(control_plane, volcano_dir, control_plane.workdir)
    try:
        yield proc
    finally:
        proc.unregister()
        proc.stop()


@pytest.fixture(scope="session")
def volcano_controllers(control_plane: ControlPlane, installed: Installed, volcano_dir: Path) -> Iterator[VolcanoProcess]:
    """Volcano's ``vc-controller-manager`` for the whole run, as a Volcano install runs it."""
    proc = start_controller_manager(control_plane, volcano_dir, control_plane.workdir)
    try:
        yield proc
    finally:
        proc.stop()


# Workload controllers whose objects go before their pods (kube-controller-manager and Volcano's
# controllers would make the pods again).
WORKLOADS = (
    "/apis/batch.volcano.sh/v1alpha1/jobs",
    "/apis/apps/v1/deployments",
    "/apis/apps/v1/statefulsets",
    "/apis/apps/v1/daemonsets",
    "/apis/batch/v1/jobs",
    "/apis/apps/v1/replicasets",
)
def _path(collection: str, md: dict[str, Any]) -> str:
    prefix, _, plural = collection.rpartition("/")
    return f"{prefix}/namespaces/{md['namespace']}/{plural}/{md['name']}"


def clean_cluster(api: Api, webhooks: WebhookManager | None = None) -> None:
    """Remove what earlier tests left: workloads first (Volcano Jobs, Deployments, ReplicaSets,
    ...: their controllers would make their pods again), pods (at once), PodGroups, PDBs, nodes,
    queues but default and root, the tests' PriorityClasses. Namespaces stay (tests use new ones)."""
    for coll in WORKLOADS:
        for obj in api.items(coll):
            api.delete(_path(coll, obj["metadata"]), propagationPolicy="Background")
    wait_until(lambda: not any(api.items(c) for c in WORKLOADS), 30, "the workloads to be deleted")
    for p in api.items("/api/v1/pods"):
        md = p["metadata"]
        api.delete(f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}", gracePeriodSeconds=0)
    for pg in api.items("/apis/scheduling.volcano.sh/v1beta1/podgroups"):
        md = pg["metadata"]
        api.delete(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{md['namespace']}/podgroups/{md['name']}")
    for pdb in api.items("/apis/policy/v1/poddisruptionbudgets"):
        md = pdb["metadata"]
        api.delete(f"/apis/policy/v1/namespaces/{md['namespace']}/poddisruptionbudgets/{md['name']}")
    api.delete("/api/v1/nodes")
    delete_queues(api, webhooks)
    for pc in api.items("/apis/scheduling.k8s.io/v1/priorityclasses", labelSelector="e2e.tidesched.io/test"):
        api.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{pc['metadata']['name']}")
    wait_until(lambda: not api.items("/api/v1/pods") and not api.items("/api/v1/nodes"), 30, "a clean cluster")


def _allowed(api: Api) -> bool:
    try:
        api.get("/api/v1/pods", limit=1)
        return True
    except ApiError:
        return False


@dataclass
class E2E:
    """One test's world: the admin client, its namespace, the kubelet, its schedulers."""

    cp: ControlPlane
    installed: Installed
    api: Api
    ns: str
    tmp: Path
    kubelet: Kubelet
    volcano: VolcanoProcess | None = None  # vc-controller-manager
    webhooks: WebhookManager | None = None  # vc-webhook-manager (None with Volcano v1.7.0)
    schedulers: list[Scheduler] = field(default_factory=list)
    # Epoch windows in which a refused request is the API server's doing, not a gap in RBAC.
    rbac_not_ready: list[tuple[float, float]] = field(default_factory=list)

    def restart_apiserver(self) -> None:
        """Restart kube-apiserver (same etcd). Until its RBAC cache is filled it refuses every
        ServiceAccount; those refusals are excused, and the window closes once ours is allowed."""
        start = time.time()
        self.cp.restart_apiserver()
        sa = self.cp.client(self.installed.token)
        try:
            wait_until(lambda: _allowed(sa), 30, "RBAC to be served after the restart")
        finally:
            sa.close()
        self.rbac_not_ready.append((start, time.time() + 2.0))
        # Volcano's controllers reconnect on their own, but their informers back off for up to
        # tens of seconds after the refused connections: a restart gives the tests a fresh start.
        if self.volcano is not None:
            self.volcano.restart()
        if self.webhooks is not None:
            self.webhooks.restart()

    @contextlib.contextmanager
    def webhooks_off(self) -> Iterator[None]:
        """Volcano's admission webhooks off while the block runs: for objects they would refuse,
        which a cluster gets only where they are off (or were installed later)."""
        if self.webhooks is None:
            yield
            return
        with self.webhooks.suspended():
            yield

    def namespace(self, suffix: str) -> str:
        ns = f"{self.ns}-{suffix}"
        ensure_namespace(self.api, ns)
        return ns

    def scheduler(
        self, config: str | None = None, *, args: list[str] | None = None, start: bool = True, ready: bool = True
    ) -> Scheduler:
        n = len(self.schedulers) + 1
        conf = self.tmp / f"scheduler-{n}.conf"
        if not conf.exists():
            conf.write_text(config if config is not None else self.installed.config_text)
        s = Scheduler(self.installed.kubeconfig, conf, self.tmp / f"tidesched-{n}.log", args=list(args or []))
        self.schedulers.append(s)
        if start:
            s.start()
            if ready:
                s.wait_ready()
        return s

    def priority_class(self, name: str, value: int) -> None:
        self.api.apply(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name, "labels": {"e2e.tidesched.io/test": "1"}},
                "value": value,
            }
        )


@pytest.fixture
def e2e(
    control_plane: ControlPlane,
    installed: Installed,
    volcano_controllers: VolcanoProcess,
    volcano_webhooks: WebhookManager | None,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[E2E]:
    api = control_plane.admin
    clean_cluster(api, volcano_webhooks)
    # Volcano's queue controller opens the default queue once it runs (before that, its admission
    # refuses every Job and PodGroup).
    wait_until(lambda: queue_admits(api, "default"), 60, "the default queue to be Open")
    ns = f"e2e{next(_counter)}"
    ensure_namespace(api, ns)
    kubelet = Kubelet(control_plane).start()
    env = E2E(control_plane, installed, api, ns, tmp_path, kubelet, volcano_controllers, volcano_webhooks)
    try:
        yield env
    finally:
        codes = [s.stop() for s in env.schedulers]
        kubelet.stop()
        failed = request.node.rep_call.failed if hasattr(request.node, "rep_call") else False
        if failed:
            for s in env.schedulers:
                sys.stderr.write(f"\n--- {s.log} ---\n{s.tail(60)}\n")
            sys.stderr.write(f"\n--- {volcano_controllers.log} ---\n{volcano_controllers.tail(30)}\n")
        assert volcano_controllers.alive(), f"vc-controller-manager exited:\n{volcano_controllers.tail()}"
        assert volcano_webhooks is None or volcano_webhooks.alive(), \
            f"vc-webhook-manager exited:\n{volcano_webhooks.tail() if volcano_webhooks else ''}"
        # RBAC for real: any request deploy/rbac.yaml does not allow fails the test.
        forbidden = [line for s in env.schedulers for line in s.forbidden_lines(env.rbac_not_ready)]
        assert not forbidden, "tidesched run was refused by RBAC:\n" + "\n".join(forbidden[:10])
        assert all(c in (0, None, -9) for c in codes), f"exit codes {codes}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item.rep_call = rep  # type: ignore[attr-defined]
