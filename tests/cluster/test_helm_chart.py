"""The Helm chart deploy/helm/tidesched, rendered by the real Helm binary (.ci/install_helm.py):
it lints, renders for the default and other value sets into objects that fit together (names,
labels and selectors, ports, the config file path, the ServiceAccount), its RBAC is the one the e2e
tests run with (deploy/rbac.yaml), and deploy/ is exactly its rendering."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tidesched.scheduler import config_from_text

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"

_spec = importlib.util.spec_from_file_location("deploy_render", DEPLOY / "render.py")
assert _spec and _spec.loader
render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render)


@pytest.fixture(scope="module", autouse=True)
def _helm() -> None:
    try:
        render.ensure_helm()
    except render.HelmMissing as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Helm required in CI: {exc}")
        pytest.skip(str(exc))


OTHER_CONF = 'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n'

# name → (release, namespace, --set values, --values file contents)
VALUE_SETS: dict[str, tuple[str, str, list[str], dict[str, Any] | None]] = {
    "default": ("tidesched", "volcano-system", [], None),
    "inline-config": ("sched", "batch", ["schedulerNames={volcano,tidesched}"], {"config": {"inline": OTHER_CONF}}),
    "existing-configmap": (
        "tidesched", "volcano-system", ["config.existingConfigMap=volcano-scheduler-configmap"], None,
    ),
    "servicemonitor": (
        "tidesched", "monitoring-test", ["metrics.serviceMonitor.enabled=true",
                                         "metrics.serviceMonitor.labels.release=prom"], None,
    ),
    "crds-and-queue": ("tidesched", "volcano-system", ["crds.install=true", "defaultQueue.create=true"], None),
    "no-leader-election": ("tidesched", "volcano-system", ["leaderElection.enabled=false", "replicas=1"], None),
    "lease-elsewhere": ("tidesched", "tidesched", ["leaderElection.namespace=volcano-system"], None),
}


def rendered(name: str, tmp_path: Path) -> list[dict[str, Any]]:
    release, ns, sets, values = VALUE_SETS[name]
    files = []
    if values is not None:
        f = tmp_path / "values.yaml"
        f.write_text(yaml.safe_dump(values))
        files.append(f)
    text = render.template(sets, files, release=release, namespace=ns)
    return [d for d in yaml.safe_load_all(text) if d]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} objects"
    return found[0]


def rules(docs: list[dict[str, Any]], kind: str) -> set[tuple[str, str, str]]:
    return {
        (g, r, v)
        for d in docs if d["kind"] == kind
        for rule in d["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }


def committed_rbac() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / "rbac.yaml").read_text()) if d]


NAMESPACED = {"ServiceAccount", "ConfigMap", "Deployment", "Service", "ServiceMonitor", "Role", "RoleBinding"}


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_renders_objects_that_fit_together(name: str, tmp_path: Path) -> None:
    release, ns, sets, values = VALUE_SETS[name]
    docs = rendered(name, tmp_path)
    for d in docs:
        assert d.get("apiVersion") and d.get("kind") and d["metadata"].get("name"), d
        if d["kind"] in NAMESPACED:
            assert d["metadata"]["namespace"], f"{d['kind']} {d['metadata']['name']} without a namespace"

    dep = one(docs, "Deployment")
    pod = dep["spec"]["template"]
    selector = dep["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert dep["metadata"]["namespace"] == ns
    c = pod["spec"]["containers"][0]
    args = c["args"]
    flags = dict(a.split("=", 1) for a in args if "=" in a)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}

    # Non-root, read-only root filesystem, nothing to escalate.
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]

    # The config file: the mounted ConfigMap (the chart's or an existing one) and its key.
    mount = next(m for m in c["volumeMounts"] if m["name"] == "scheduler-config")
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "scheduler-config")
    assert "subPath" not in mount  # updates must reach the file for the reload
    cm_name = volume["configMap"]["name"]
    key = flags["--scheduler-conf"].removeprefix(mount["mountPath"] + "/")
    assert flags["--scheduler-conf"] == f"{mount['mountPath']}/{key}"
    assert key == "volcano-scheduler.conf"  # Volcano's key, so Volcano's ConfigMap works as is
    cms = [d for d in docs if d["kind"] == "ConfigMap"]
    if name == "existing-configmap":
        assert cm_name == "volcano-scheduler-configmap" and not cms
    else:
        cm = one(docs, "ConfigMap")
        assert cm["metadata"]["name"] == cm_name
        conf = cm["data"][key]
        expected = OTHER_CONF if values else (ROOT / "tests/data/config/seed000_tidal.conf").read_text()
        assert conf == expected
        assert config_from_text(conf).actions  # a configuration the scheduler accepts

    names = [a.split("=", 1)[1] for a in args if a.startswith("--scheduler-name=")]
    assert names == (["volcano", "tidesched"] if name == "inline-config" else ["volcano"])

    # The ServiceAccount the pods run as is the one the bindings name.
    sa = one(docs, "ServiceAccount")
    assert pod["spec"]["serviceAccountName"] == sa["metadata"]["name"]
    for binding in (d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": ns}]
        role = next(d for d in docs if d["kind"] == binding["roleRef"]["kind"]
                    and d["metadata"]["name"] == binding["roleRef"]["name"])
        assert role["metadata"].get("namespace") == binding["metadata"].get("namespace")

    # RBAC: the cluster rules the e2e tests run with, whatever the values.
    expected_rbac = committed_rbac()
    assert rules(docs, "ClusterRole") == rules(expected_rbac, "ClusterRole")
    leader = name != "no-leader-election"
    assert flags["--leader-elect"] == str(leader).lower()
    if leader:
        role = one(docs, "Role")
        assert role["metadata"]["namespace"] == flags["--lock-object-namespace"]
        assert flags["--lock-object-namespace"] == ("volcano-system" if name == "lease-elsewhere" else ns)
        assert flags["--leader-elect-resource-name"] == "vc-scheduler"
        assert rules(docs, "Role") == rules(expected_rbac, "Role")
        assert dep["spec"]["replicas"] == 2
    else:
        assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]  # no Lease access unused
        assert dep["spec"]["replicas"] == 1

    # Metrics: the Service selects the pods and targets the named port the flag listens on.
    svc = one(docs, "Service")
    assert svc["spec"]["selector"] == selector
    assert svc["spec"]["ports"][0]["targetPort"] == "metrics"
    assert ports["metrics"] == int(flags["--listen-address"].rsplit(":", 1)[1])
    assert ports["healthz"] == int(flags["--healthz-address"].rsplit(":", 1)[1])
    monitors = [d for d in docs if d["kind"] == "ServiceMonitor"]
    if name == "servicemonitor":
        sm = monitors[0]
        assert sm["metadata"]["labels"]["release"] == "prom"
        assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
        assert sm["spec"]["namespaceSelector"]["matchNames"] == [ns]
        assert [e["port"] for e in sm["spec"]["endpoints"]] == [p["name"] for p in svc["spec"]["ports"]]
    else:
        assert not monitors

    crds = {d["spec"]["names"]["kind"] for d in docs if d["kind"] == "CustomResourceDefinition"}
    queues = [d for d in docs if d["kind"] == "Queue"]
    if name == "crds-and-queue":
        assert crds == {"PodGroup", "Queue"}
        assert [q["metadata"]["name"] for q in queues] == ["default"]
    else:
        assert not crds and not queues  # default: Volcano's own CRDs and queue stay in charge

    if release != "tidesched":  # names follow the release
        assert dep["metadata"]["name"] == f"{release}-tidesched"
        assert cm_name == f"{release}-tidesched-scheduler-configmap"


@pytest.mark.parametrize(
    "sets, message",
    [
        (["leaderElection.enabled=false"], "replicas > 1 needs leaderElection.enabled"),
        (["metrics.serviceMonitor.enabled=true", "metrics.enabled=false"], "metrics.serviceMonitor.enabled needs"),
        (["config.inline="], "give config.inline"),
        (["evictionMode=drain"], "evictionMode"),
        # values.schema.json: a misspelt key and a wrong type are refused, not ignored.
        (["replica=3"], "additional properties 'replica' not allowed"),
        (["schedulePeriod=3"], "/schedulePeriod': got number, want string"),
        (["metrics.serviceMonitor.intervall=1m"], "additional properties 'intervall' not allowed"),
    ],
)
def test_value_sets_that_cannot_work_are_refused_with_the_field(sets: list[str], message: str) -> None:
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(")):
        render.template(sets)


def test_lint_passes_for_the_default_and_the_other_value_sets() -> None:
    for sets in ([], ["crds.install=true", "defaultQueue.create=true", "metrics.serviceMonitor.enabled=true"],
                 ["config.existingConfigMap=volcano-scheduler-configmap"]):
        args = ["lint", "--strict", str(render.CHART)]
        for s in sets:
            args += ["--set", s]
        out = render.helm(*args)
        assert out.returncode == 0, out.stdout + out.stderr


def test_deploy_files_are_the_charts_rendering() -> None:
    """deploy/ (what `kubectl apply -k deploy/` and the e2e fixture apply) is generated from the
    chart: a hand edit there, or a chart edit without `python deploy/render.py`, fails here."""
    files = render.generated()
    assert set(files) == {
        "rbac.yaml", "configmap.yaml", "deployment.yaml", "service.yaml", "default-queue.yaml",
        "crds/scheduling.volcano.sh_podgroups.yaml", "crds/scheduling.volcano.sh_queues.yaml",
    }
    assert render.stale(files) == []
