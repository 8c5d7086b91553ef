"""deploy/: manifests parse, the ConfigMap holds the seed-000 config, RBAC covers exactly what the
adapter calls, and the Grafana board only uses metrics the scheduler exports."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import yaml

from builders import node, pod, podgroup, queue
from cluster_helpers import ManualClock, fake_api, make_runner, wait
from fakeapi import _PATH
from tidesched.cluster.server import Metrics
from tidesched.explain.quota import QuotaReport, Usage
from tidesched.scheduler import config_from_text

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def test_manifests_parse_and_configmap_is_the_seed_config() -> None:
    generated = [*DEPLOY.glob("*.yaml"), *DEPLOY.glob("crds/*.yaml")]  # not the chart's templates
    kinds = {d["kind"] for f in generated for d in _docs(str(f.relative_to(DEPLOY)))}
    assert {"CustomResourceDefinition", "ClusterRole", "Role", "ConfigMap", "Deployment", "Service"} <= kinds
    conf = _docs("configmap.yaml")[0]["data"]["volcano-scheduler.conf"]
    assert conf == (ROOT / "tests/data/config/seed000_tidal.conf").read_text()
    assert config_from_text(conf).actions == ["enqueue", "allocate", "backfill", "reclaim"]
    dep = _docs("deployment.yaml")[0]
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    mount = dep["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["mountPath"]
    assert f"--scheduler-conf={mount}/volcano-scheduler.conf" in args
    crds = {
        d["spec"]["names"]["kind"]: d
        for d in _docs("crds/scheduling.volcano.sh_queues.yaml")
        + _docs("crds/scheduling.volcano.sh_podgroups.yaml")
    }
    assert crds["Queue"]["spec"]["versions"][0]["subresources"] == {"status": {}}
    assert crds["PodGroup"]["spec"]["versions"][0]["subresources"] == {}  # as Volcano's


def test_deployment_probes_ports_and_service_match_the_flags() -> None:
    dep = _docs("deployment.yaml")[0]
    pod_spec = dep["spec"]["template"]["spec"]
    c = pod_spec["containers"][0]
    args = dict(a.split("=", 1) for a in c["args"] if "=" in a)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert args["--enable-healthz"] == "true" and args["--enable-metrics"] == "true"
    assert ports["healthz"] == int(args["--healthz-address"].rsplit(":", 1)[1])
    assert ports["metrics"] == int(args["--listen-address"].rsplit(":", 1)[1])
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": "healthz"}
    # Leader election with a standby; SIGTERM's drain (10 s) fits in the grace period.
    assert args["--leader-elect"] == "true" and dep["spec"]["replicas"] >= 2
    assert pod_spec["terminationGracePeriodSeconds"] > 10
    assert pod_spec["serviceAccountName"] == _docs("rbac.yaml")[0]["metadata"]["name"]
    svc = _docs("service.yaml")[0]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["ports"][0]["targetPort"] == "metrics"


def _rules() -> set[tuple[str, str, str]]:
    allowed: set[tuple[str, str, str]] = set()
    for d in _docs("rbac.yaml"):
        for rule in d.get("rules", []):
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for v in rule["verbs"]:
                        allowed.add((g, r, v))
    return allowed


def _needed(method: str, path: str) -> set[tuple[str, str, str]]:
    m = _PATH.match(path)
    assert m, path
    group = m["group"] or ""
    res = m["res"] + (f"/{m['sub']}" if m["sub"] else "")
    if method == "GET":
        return {(group, res, "get")} if m["name"] else {(group, res, "list"), (group, res, "watch")}
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
    return {(group, res, verb)}


def test_rbac_allows_every_call_the_scheduler_makes(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many(
            [
                node("n1", cpu="2"),
                queue("default"),
                podgroup("pg", 1, phase="Pending"),
                pod("a", "pg"),
                pod("big", "pg", cpu="16"),
                pod("bare"),
            ]
        )
        r = make_runner(
            api,
            tmp_path,
            leader_elect=True,
            identity="x",
            lease_duration=2.0,
            renew_deadline=1.0,
            retry_period=0.1,
            component_options={"elector": {"clock": ManualClock()}},  # the lease cannot be lost by a stall
        )
        t = threading.Thread(target=r.run, daemon=True)
        t.start()
        assert wait(lambda: api.count("POST", r"/binding$", 201) >= 1, 10)
        assert wait(
            lambda: api.count("POST", r"/events$") >= 1 and api.count("PATCH", r"/pods/.*/status$") >= 1, 5
        )
        r.stop()
        t.join(10)
    allowed = _rules()
    # Calls this scenario does not trigger, each made by the adapter in some other situation:
    calls = {(m, p) for m, p, _s in api.requests} | {
        ("POST", "/api/v1/namespaces/ns/pods/a/eviction"),  # evictor.py, --eviction-mode=evict
        ("DELETE", "/api/v1/namespaces/ns/pods/a"),  # evictor.py, --eviction-mode=delete
        ("PATCH", "/api/v1/namespaces/ns/pods/a"),  # gate_remover.py, SchedulingGatesQueueAdmission
        ("GET", "/api/v1/namespaces/ns/pods/a"),  # binder.py: re-read after a 409 on binding
        ("PATCH", "/api/v1/namespaces/ns/events/a.1"),  # status.py: a repeated event's count
        ("GET", "/apis/scheduling.volcano.sh/v1beta1/queues/default"),  # status.py: re-read on 409
        ("GET", "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups/pg"),  # idem
        # A CRD with a status subresource:
        ("PUT", "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups/pg/status"),
        ("PUT", "/apis/scheduling.volcano.sh/v1beta1/queues/default/status"),
        ("GET", "/apis/coordination.k8s.io/v1/namespaces/volcano-system/leases/vc-scheduler"),
        ("POST", "/apis/coordination.k8s.io/v1/namespaces/volcano-system/leases"),
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/volcano-system/leases/vc-scheduler"),
        # volume_binder.py: a pod's volumes bound before its Binding (a PV's claimRef, a claim's node)
        ("PUT", "/api/v1/persistentvolumes/pv-1"),
        ("PUT", "/api/v1/namespaces/ns/persistentvolumeclaims/data"),
        # claim_writer.py, a bind of a pod with DRA claims: the finalizer, then the status (which
        # the API server also authorizes as resourceclaims/binding); a re-read after a 409.
        ("PUT", "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"),
        ("PUT", "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status"),
        ("PUT", "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/binding"),
        ("GET", "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"),
    }
    needed = {n for m, p in calls for n in _needed(m, p)}
    assert not needed - allowed, needed - allowed  # every call the scheduler makes is allowed
    assert not allowed - needed, allowed - needed  # least privilege: nothing beyond those calls


def test_dashboard_uses_only_exported_metrics() -> None:
    m = Metrics()
    m.report = QuotaReport(
        "capacity-card",
        {"q": {"NVIDIA-H200": Usage(3, 1, 0, 2)}},
        {"NVIDIA-H200": 8},
        {"inference": {"NVIDIA-H200": 1}},
    )
    m.bind_result("bound", 0.01)
    m.bind_result("error", 0.01)
    m.evict_result("blocked")
    m.config_reloads.labels("rejected").inc()
    m.informer_event("Pod", "relist")
    m.action_duration.labels("allocate").observe(0.1)
    exported = set(re.findall(r"^(tidesched_[a-z_]+)", m.render().decode(), re.M))
    board = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    used = {
        name
        for p in board["panels"]
        for t in p.get("targets", [])
        for name in re.findall(r"tidesched_[a-z_]+", t["expr"])
    }
    assert used and used <= exported, used - exported
