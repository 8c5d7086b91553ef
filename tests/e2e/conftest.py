"""Fixtures for the end-to-end tests: one real control plane per test run with Volcano installed as
its users install it (Volcano's CRDs and its own ``vc-controller-manager``: the Job, PodGroup and
Queue controllers), ``deploy/`` applied to it as an operator would, and per test a clean cluster, a
namespace, a kubelet stand-in and ``tidesched run`` subprocesses authenticated as the deployed
ServiceAccount. The control plane's binaries come from ``../shared/envtest`` (or
``KUBEBUILDER_ASSETS``), Volcano's from ``../shared/volcano`` (or ``VOLCANO_ASSETS``); where either is
missing the tests are skipped saying so, and fail under ``CI``."""

from __future__ import annotations

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

from cluster import SA_NAME, SA_NAMESPACE, Kubelet, Scheduler, ensure_namespace, install_deploy, wait_until  # noqa: E402
from controlplane import Api, ApiError, ControlPlane, find_assets  # noqa: E402
from volcano import VolcanoProcess, find_volcano, install_volcano_crds, start_controller_manager  # noqa: E402

_counter = itertools.count(1)


def _required(what: str, missing: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} required in CI: {missing}")
    pytest.skip(f"e2e tests need {what}: {missing}")


@pytest.fixture(scope="session")
def volcano_dir() -> Path:
    found, missing = find_volcano()
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


@dataclass
class Installed:
    """``deploy/`` as applied to the cluster, and the scheduler's credentials."""

    kubeconfig: Path
    token: str
    config_text: str  # the ConfigMap's volcano-scheduler.conf, as the volume would mount it


@pytest.fixture(scope="session")
def installed(control_plane: ControlPlane, volcano_dir: Path) -> Installed:
    api = control_plane.admin
    install_deploy(api)
    # Volcano's Job and Command CRDs for its controllers. deploy/'s PodGroup and Queue CRDs stay:
    # they are newer than v1.7.0's (queue parent, priority, deserved), as with a newer Volcano.
    install_volcano_crds(api, volcano_dir, replace=False)
    token = control_plane.service_account_token(SA_NAMESPACE, SA_NAME)
    kubeconfig = control_plane.kubeconfig(control_plane.workdir / "tidesched.kubeconfig", token)
    cm = api.get(f"/api/v1/namespaces/{SA_NAMESPACE}/configmaps/tidesched-scheduler-configmap")
    return Installed(kubeconfig, token, cm["data"]["volcano-scheduler.conf"])


@pytest.fixture(scope="session")
def volcano_controllers(control_plane: ControlPlane, installed: Installed, volcano_dir: Path) -> Iterator[VolcanoProcess]:
    """Volcano's ``vc-controller-manager`` for the whole run, as a Volcano install runs it."""
    proc = start_controller_manager(control_plane, volcano_dir, control_plane.workdir)
    try:
        yield proc
    finally:
        proc.stop()


def clean_cluster(api: Api) -> None:
    """Remove what earlier tests left: Volcano Jobs and ReplicaSets first (their controllers would
    make their pods again), pods (at once), PodGroups, PDBs, nodes, queues but default.
    Namespaces stay (no namespace controller runs to finish deleting them); tests use new ones."""
    for job in api.items("/apis/batch.volcano.sh/v1alpha1/jobs"):
        md = job["metadata"]
        api.delete(f"/apis/batch.volcano.sh/v1alpha1/namespaces/{md['namespace']}/jobs/{md['name']}")
    for rs in api.items("/apis/apps/v1/replicasets"):
        md = rs["metadata"]
        api.delete(f"/apis/apps/v1/namespaces/{md['namespace']}/replicasets/{md['name']}")
    wait_until(lambda: not api.items("/apis/batch.volcano.sh/v1alpha1/jobs"), 30, "Volcano Jobs to be deleted")
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
    for q in api.items("/apis/scheduling.volcano.sh/v1beta1/queues"):
        if q["metadata"]["name"] != "default":
            api.delete(f"/apis/scheduling.volcano.sh/v1beta1/queues/{q['metadata']['name']}")
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
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[E2E]:
    api = control_plane.admin
    clean_cluster(api)
    ns = f"e2e{next(_counter)}"
    ensure_namespace(api, ns)
    kubelet = Kubelet(control_plane).start()
    env = E2E(control_plane, installed, api, ns, tmp_path, kubelet, volcano_controllers)
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
