"""Fixtures for the end-to-end tests: one real control plane per test run, ``deploy/`` applied to
it as an operator would, and per test a clean cluster, a namespace, a kubelet stand-in and
``tidesched run`` subprocesses authenticated as the deployed ServiceAccount."""

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

_counter = itertools.count(1)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    assets, missing = find_assets()
    if assets is None:
        if os.environ.get("CI"):
            pytest.fail(f"e2e control plane required in CI: {missing}")
        pytest.skip(f"e2e tests need a control plane: {missing}")
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
def installed(control_plane: ControlPlane) -> Installed:
    api = control_plane.admin
    install_deploy(api)
    token = control_plane.service_account_token(SA_NAMESPACE, SA_NAME)
    kubeconfig = control_plane.kubeconfig(control_plane.workdir / "tidesched.kubeconfig", token)
    cm = api.get(f"/api/v1/namespaces/{SA_NAMESPACE}/configmaps/tidesched-scheduler-configmap")
    return Installed(kubeconfig, token, cm["data"]["volcano-scheduler.conf"])


def clean_cluster(api: Api) -> None:
    """Remove what earlier tests left: pods (at once), PodGroups, PDBs, nodes, queues but default.
    Namespaces stay (no namespace controller runs to finish deleting them); tests use new ones."""
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
def e2e(control_plane: ControlPlane, installed: Installed, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[E2E]:
    api = control_plane.admin
    clean_cluster(api)
    ns = f"e2e{next(_counter)}"
    ensure_namespace(api, ns)
    kubelet = Kubelet(control_plane).start()
    env = E2E(control_plane, installed, api, ns, tmp_path, kubelet)
    try:
        yield env
    finally:
        codes = [s.stop() for s in env.schedulers]
        kubelet.stop()
        failed = request.node.rep_call.failed if hasattr(request.node, "rep_call") else False
        if failed:
            for s in env.schedulers:
                sys.stderr.write(f"\n--- {s.log} ---\n{s.tail(60)}\n")
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
