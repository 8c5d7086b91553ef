"""What the tests do as users and operators do it: deploy/ applied, nodes as a kubelet registers
them, queues, PodGroups, pods, Volcano Jobs and ReplicaSets submitted (their pods made by the real
controllers), what was made read back, and ``tidesched run`` started as a user starts it. The
kubelet stand-in is ``kubelet.py`` (re-exported here)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import httpx

from controlplane import REPO, Api, ApiError, free_port
from kubelet import RUN_SECONDS, Kubelet, NodeHeartbeat, now_rfc3339  # noqa: F401 - re-exported for tests

VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"
DEPLOY = REPO / "deploy"
SA_NAMESPACE, SA_NAME = "volcano-system", "tidesched"
# Volcano's own default scheduler configuration (plus binpack): for scenarios about pods without
# cards, which deploy/'s capacity-card configuration gives no CPU quota in the default queue.
VOLCANO_DEFAULT_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
# Volcano v1.15.1's own e2e config (its chart's volcano-scheduler-ci.conf): the config a new user
# who follows Volcano's CI tries first.
VOLCANO_115_CI_CONF = """
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: sla
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: true
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"""
GROUP_NAME = "scheduling.k8s.io/group-name"
CARD_LABEL = "nvidia.com/gpu.product"


def wait_until(pred: Callable[[], Any], timeout: float = 30.0, what: str = "condition", interval: float = 0.1) -> Any:
    """Poll ``pred`` until it returns something truthy; fail the test with ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


# ------------------------------------------------------------------------------------------
# deploy/ as an operator applies it


def install_deploy(api: Api) -> None:
    """kubectl apply -f deploy/crds/ -f deploy/default-queue.yaml; kubectl apply -k deploy/ (less
    the Deployment and Service, which need a kubelet)."""
    for crd in sorted((DEPLOY / "crds").glob("*.yaml")):
        api.apply_file(crd)
    # CRDs are served a moment after they are created.
    wait_until(
        lambda: {r["name"] for r in api.get("/apis/scheduling.volcano.sh/v1beta1").get("resources", [])}
        >= {"queues", "podgroups"} if _discoverable(api) else False,
        30, "the Volcano CRDs in discovery",
    )
    for name in ("namespace.yaml", "rbac.yaml", "configmap.yaml", "default-queue.yaml"):
        api.apply_file(DEPLOY / name)


def _discoverable(api: Api) -> bool:
    try:
        api.get("/apis/scheduling.volcano.sh/v1beta1")
        return True
    except ApiError:
        return False


# ------------------------------------------------------------------------------------------
# Objects


def create_node(
    api: Api,
    name: str,
    *,
    cpu: str = "8",
    memory: str = "32Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
    ready: bool = True,
) -> dict[str, Any]:
    """Register a node as its kubelet would: the object, then its status, then the not-ready taint
    the admission plugin put on it removed (a node lifecycle controller's job)."""
    api.post(
        "/api/v1/nodes",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        },
    )
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    api.request(
        "PATCH",
        f"/api/v1/nodes/{name}/status",
        {
            "status": {
                "capacity": alloc,
                "allocatable": alloc,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "reason": "KubeletReady",
                        "lastHeartbeatTime": now_rfc3339(),
                        "lastTransitionTime": now_rfc3339(),
                    }
                ],
            }
        },
    )
    return api.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})


def gpu_node(api: Api, name: str, model: str = "NVIDIA-H200", cards: int = 8, **kw: Any) -> dict[str, Any]:
    labels = {CARD_LABEL: model, "nvidia.com/gpu.count": str(cards), **kw.pop("labels", {})}
    return create_node(
        api, name, cpu=kw.pop("cpu", "192"), memory=kw.pop("memory", "2Ti"), labels=labels,
        extra={"nvidia.com/gpu": str(cards)}, **kw,
    )


def ensure_namespace(api: Api, ns: str) -> None:
    """A namespace with its ``default`` ServiceAccount (the token controller's job): the
    ServiceAccount admission plugin refuses pods without it."""
    for obj in (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}},
    ):
        try:
            api.create(obj)
        except ApiError as exc:
            if exc.status != 409:
                raise


def owner_ref(api_version: str, kind: str, name: str, uid: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid or str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{name}")),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_body(
    ns: str,
    name: str,
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    gpus: int = 0,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    scheduler: str = "volcano",
    priority_class: str | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": dict(requests) if gpus else {}}}
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_selector:
        spec["nodeSelector"] = node_selector
    md: dict[str, Any] = {"name": name, "namespace": ns, "annotations": annotations or {}, "labels": labels or {}}
    if owner:
        md["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def create_pod(api: Api, ns: str, name: str, **kw: Any) -> dict[str, Any]:
    return api.post(f"/api/v1/namespaces/{ns}/pods", pod_body(ns, name, **kw))


def create_queue(
    api: Api, name: str, *, annotations: dict[str, str] | None = None, wait_open: bool = True, **spec: Any
) -> dict[str, Any]:
    """A Queue, returned once Volcano's admission would take work for it (with ``wait_open``):
    its queue controller has made it ``Open`` and a dry-run PodGroup in it is admitted (the
    webhooks read queues from an informer of their own, a moment behind the API server)."""
    out = api.post(
        f"{VOLCANO}/queues",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"weight": 1, "reclaimable": True, **spec},
        },
    )
    if wait_open:
        wait_until(lambda: queue_admits(api, name), 30, f"queue {name} to be Open for Volcano's admission")
    return out


def queue_admits(api: Api, queue: str) -> bool:
    """The queue is Open and Volcano's admission takes a (dry-run) PodGroup for it."""
    q = api.get(f"{VOLCANO}/queues/{queue}")
    if (q.get("status") or {}).get("state") != "Open":
        return False
    probe = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": f"probe-{queue}"[:63], "namespace": "default"}, "spec": {"minMember": 1, "queue": queue}}
    try:
        api.post(f"{VOLCANO}/namespaces/default/podgroups", probe, dryRun="All")
    except ApiError as exc:
        if exc.status == 400 and "denied the request" in exc.body:
            return False
        raise
    return True


def create_podgroup(
    api: Api,
    ns: str,
    name: str,
    *,
    min_member: int,
    queue: str = "default",
    annotations: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    priority_class: str | None = None,
    min_resources: dict[str, str] | None = None,
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": ns, "annotations": annotations or {}}
    if owner:
        md["ownerReferences"] = [owner]
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if min_resources:
        spec["minResources"] = min_resources
    return api.post(
        f"{VOLCANO}/namespaces/{ns}/podgroups",
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": md, "spec": spec, "status": {"phase": "Pending"}},
    )


BATCH = "/apis/batch.volcano.sh/v1alpha1"
WEBHOOK_MAX_RETRY = 3  # Volcano's admission webhook's default for a Job's and a task's maxRetry


def job_task(
    name: str,
    replicas: int,
    *,
    min_available: int | None = None,
    policies: list[dict[str, str]] | None = None,
    pod_annotations: dict[str, str] | None = None,
    pod_labels: dict[str, str] | None = None,
    run_seconds: float | None = None,
    **pod_kw: Any,
) -> dict[str, Any]:
    """One task of a Volcano Job: ``replicas`` pods from a template made by :func:`pod_body`
    (``cpu``, ``memory``, ``gpus``, ``node_selector``, ``priority_class``, ...). ``run_seconds``:
    the kubelet stand-in ends each pod ``Succeeded`` that long after starting it."""
    ann = dict(pod_annotations or {}, **pod_kw.pop("annotations", None) or {})
    if run_seconds is not None:
        ann[RUN_SECONDS] = str(run_seconds)
    pod_labels = {**(pod_labels or {}), **(pod_kw.pop("labels", None) or {})}
    pod = pod_body("", "template", annotations=ann, labels=pod_labels, **pod_kw)
    spec = {**pod["spec"], "restartPolicy": "Never"}
    task: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "template": {"metadata": {"annotations": ann, "labels": dict(pod_labels or {})}, "spec": spec},
    }
    if min_available is not None:
        task["minAvailable"] = min_available
    if policies:
        task["policies"] = policies
    return task


def create_volcano_job(
    api: Api,
    ns: str,
    name: str,
    tasks: list[dict[str, Any]],
    *,
    min_available: int | None = None,
    queue: str = "default",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    priority_class: str | None = None,
    policies: list[dict[str, str]] | None = None,
    max_retry: int | None = None,
) -> dict[str, Any]:
    """A Volcano Job (``batch.volcano.sh/v1alpha1``) as a user submits it. No admission webhook
    runs here, so what Volcano's would default is given explicitly: ``schedulerName``,
    ``queue``, ``minAvailable`` (all replicas), ``maxRetry`` 3, and per task ``minAvailable``
    (its replicas) and ``maxRetry`` 3. Volcano's job controller then makes the
    PodGroup ``<name>-<uid>`` (the Job's annotations and labels, ``minTaskMember`` per task,
    ``minResources``), and the pods ``<name>-<task>-<i>`` only once a scheduler has moved that
    PodGroup out of ``Pending``."""
    tasks = [{"minAvailable": t["replicas"], "maxRetry": WEBHOOK_MAX_RETRY, **t} for t in tasks]
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": queue,
        "minAvailable": min_available if min_available is not None else sum(t["replicas"] for t in tasks),
        "maxRetry": max_retry if max_retry is not None else WEBHOOK_MAX_RETRY,
        "tasks": tasks,
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if policies:
        spec["policies"] = policies
    body = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}, "labels": labels or {}},
        "spec": spec,
    }
    return api.post(f"{BATCH}/namespaces/{ns}/jobs", body)


def job_pod_names(name: str, tasks: list[dict[str, Any]]) -> list[str]:
    """The pods Volcano's job controller makes for a Job: ``<job>-<task>-<index>``."""
    return [f"{name}-{t['name']}-{i}" for t in tasks for i in range(t["replicas"])]


def volcano_job(
    api: Api,
    ns: str,
    name: str,
    *,
    replicas: int,
    min_available: int | None = None,
    queue: str = "default",
    task: str = "worker",
    annotations: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    priority_class: str | None = None,
    policies: list[dict[str, str]] | None = None,
    run_seconds: float | None = None,
    **pod_kw: Any,
) -> list[str]:
    """A one-task Volcano Job submitted to the real controller (:func:`create_volcano_job`);
    returns the names its pods will have."""
    tasks = [job_task(task, replicas, pod_annotations=pod_annotations, priority_class=priority_class,
                      run_seconds=run_seconds, **pod_kw)]
    create_volcano_job(api, ns, name, tasks, min_available=min_available, queue=queue, annotations=annotations,
                       priority_class=priority_class, policies=policies)
    return job_pod_names(name, tasks)


def volcano_job_status(api: Api, ns: str, name: str) -> dict[str, Any]:
    return api.get(f"{BATCH}/namespaces/{ns}/jobs/{name}").get("status") or {}


def replicaset(api: Api, ns: str, name: str, *, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """The ReplicaSet ``name`` (created once, with no replicas): the owner of the pods
    :func:`replicaset_pods` asks kube-controller-manager's ReplicaSet controller for, whose
    ``volcano.sh/*`` annotations Volcano's PodGroup controller copies to their PodGroup."""
    path = f"/apis/apps/v1/namespaces/{ns}/replicasets"
    try:
        return api.get(f"{path}/{name}")
    except ApiError as exc:
        if exc.status != 404:
            raise
    labels = {"app": name}
    body = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}, "labels": labels},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"schedulerName": "volcano", "containers": [{"name": "main", "image": "busybox"}]}},
        },
    }
    return api.post(path, body)


def owned_pods(api: Api, ns: str, owner_uid: str) -> list[dict[str, Any]]:
    """The pods of ``ns`` whose controller is ``owner_uid`` and that are not being deleted,
    oldest first."""
    out = [p for p in api.items(f"/api/v1/namespaces/{ns}/pods")
           if not p["metadata"].get("deletionTimestamp")
           and any(r.get("controller") and r.get("uid") == owner_uid for r in p["metadata"].get("ownerReferences") or [])]
    return sorted(out, key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))


def replicaset_pods(
    api: Api,
    ns: str,
    rs: str,
    count: int,
    *,
    start: int | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    shape: Callable[[dict[str, Any]], None] | None = None,
    timeout: float = 60.0,
    **pod_kw: Any,
) -> list[str]:
    """``count`` more pods of the ReplicaSet ``rs`` (created on first use), made by
    kube-controller-manager's ReplicaSet controller: the ReplicaSet's template becomes a pod of
    :func:`pod_body` (``cpu``, ``gpus``, ``annotations``, ...; ``shape`` may change it further) and
    its ``replicas`` grows by ``count``. Returns the new pods' names (``<rs>-<random>``, oldest
    first) once they exist. ``start``, when given, is the number of pods the ReplicaSet should
    already have. They name no PodGroup: Volcano's PodGroup controller gives all of the
    ReplicaSet's pods one (``podgroup-<ReplicaSet uid>``, minMember 1)."""
    pod = pod_body(ns, "template", annotations=annotations, labels={"app": rs, **(labels or {})}, **pod_kw)
    if shape is not None:
        shape(pod)
    template = {"metadata": {"labels": pod["metadata"]["labels"], "annotations": pod["metadata"]["annotations"]},
                "spec": pod["spec"]}
    path = f"/apis/apps/v1/namespaces/{ns}/replicasets/{rs}"
    while True:
        obj = replicaset(api, ns, rs)
        uid = obj["metadata"]["uid"]
        before = {p["metadata"]["name"] for p in owned_pods(api, ns, uid)}
        have = int(obj["spec"].get("replicas") or 0)
        if start is not None and start != have:
            raise AssertionError(f"ReplicaSet {ns}/{rs} has {have} replicas, the caller expected {start}")
        obj["spec"]["replicas"] = have + count
        obj["spec"]["template"] = template
        try:
            api.put(path, obj)
            break
        except ApiError as exc:
            if exc.status != 409:
                raise
    made = wait_until(
        lambda: (new := [p for p in owned_pods(api, ns, uid) if p["metadata"]["name"] not in before])
        and len(new) >= count and new,
        timeout, f"the ReplicaSet controller to make {count} pod(s) of {ns}/{rs}",
    )
    return [p["metadata"]["name"] for p in made[:count]]


# Queues no one may delete (Volcano's admission refuses both; vc-scheduler v1.15 makes them).
KEPT_QUEUES = ("default", "root")


def delete_queues(api: Api, webhooks: Any = None, keep: tuple[str, ...] = KEPT_QUEUES) -> None:
    """Every queue but ``keep``, children first. Volcano's admission refuses to delete a queue that
    still has children, and to change one it would not admit: what a test left that way (a cycle
    of parents, a negative capability) is deleted with the webhooks off (``webhooks``: a
    ``webhooks.WebhookManager``)."""
    path = "/apis/scheduling.volcano.sh/v1beta1/queues"
    queues = {q["metadata"]["name"]: q for q in api.items(path)}

    def depth(name: str, seen: frozenset[str] = frozenset()) -> int:
        parent = ((queues.get(name) or {}).get("spec") or {}).get("parent") or ""
        if not parent or parent in seen or parent not in queues:
            return 0
        return 1 + depth(parent, seen | {name})

    doomed = sorted((n for n in queues if n not in keep), key=depth, reverse=True)
    try:
        for name in doomed:
            api.delete(f"{path}/{name}")
    except ApiError as exc:
        if webhooks is None or exc.status != 400:
            raise
        with webhooks.suspended():
            for name in doomed:
                api.delete(f"{path}/{name}")


# ------------------------------------------------------------------------------------------
# Reading back


def pods(api: Api, ns: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in api.items(f"/api/v1/namespaces/{ns}/pods")}


def bound(api: Api, ns: str) -> dict[str, str]:
    """Pod name → node for the pods of ``ns`` that are bound (and not being deleted)."""
    return {
        n: p["spec"]["nodeName"]
        for n, p in pods(api, ns).items()
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    }


def events(api: Api, ns: str, name: str | None = None, reason: str | None = None) -> list[dict[str, Any]]:
    out = api.items(f"/api/v1/namespaces/{ns}/events")
    return [
        e for e in out
        if (name is None or e["involvedObject"].get("name") == name) and (reason is None or e.get("reason") == reason)
    ]


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def podgroup(api: Api, ns: str, name: str) -> dict[str, Any]:
    """The PodGroup ``name``, or the one a Volcano Job ``name`` owns (``<name>-<uid>``)."""
    try:
        return api.get(f"{VOLCANO}/namespaces/{ns}/podgroups/{name}")
    except ApiError as exc:
        if exc.status != 404:
            raise
    for pg in api.items(f"{VOLCANO}/namespaces/{ns}/podgroups"):
        if any(o.get("kind") == "Job" and o.get("name") == name for o in pg["metadata"].get("ownerReferences") or []):
            return pg
    raise ApiError(404, f"no PodGroup {name} and none owned by Job {name}", "GET", f"{ns}/podgroups/{name}")


def podgroup_name(api: Api, ns: str, job: str) -> str:
    """The name of the PodGroup Volcano's job controller made for Job ``job``."""
    return wait_until(lambda: _pg_name(api, ns, job), 30, f"the PodGroup of Job {ns}/{job}")


def _pg_name(api: Api, ns: str, job: str) -> str | None:
    try:
        return str(podgroup(api, ns, job)["metadata"]["name"])
    except ApiError:
        return None


# ------------------------------------------------------------------------------------------
# The scheduler as a user runs it

TIDESCHED = Path(sys.executable).with_name("tidesched")
# A refused request as the scheduler logs it: the API server's "... is forbidden: ..." message,
# the "(403)" error_message appends, or urllib3's debug line for the response.
FORBIDDEN = re.compile(r'forbidden|\(403\)|HTTP/1\.1" 403 ', re.IGNORECASE)


@dataclass
class Scheduler:
    """``tidesched run`` as a subprocess with a kubeconfig holding its ServiceAccount's token."""

    kubeconfig: Path
    conf: Path
    log: Path
    args: list[str] = field(default_factory=list)
    period: str = "200ms"
    metrics_port: int = field(default_factory=free_port)
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Scheduler:
        cmd = [
            str(TIDESCHED), "run",
            f"--kubeconfig={self.kubeconfig}",
            f"--scheduler-conf={self.conf}",
            f"--schedule-period={self.period}",
            "--enable-metrics", f"--listen-address=127.0.0.1:{self.metrics_port}",
            "--enable-healthz", f"--healthz-address=127.0.0.1:{self.metrics_port}",
            "-v=4",
            *self.args,
        ]
        env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        return self

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.metrics_port}{path}"

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url(path), trust_env=False, timeout=5.0)

    def wait_ready(self, timeout: float = 60.0) -> None:
        def ready() -> bool:
            if self.popen is not None and self.popen.poll() is not None:
                raise AssertionError(f"tidesched run exited {self.popen.returncode}:\n{self.tail()}")
            try:
                return self.get("/readyz").status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout, "tidesched run /readyz")

    def metric(self, name: str, **labels: str) -> float:
        """The value of one sample on /metrics (0 when absent)."""
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in self.get("/metrics").text.splitlines():
            if line.startswith("#"):
                continue
            head, _, value = line.rpartition(" ")
            sample, _, lab = head.partition("{")
            if sample != name:
                continue
            got = ",".join(sorted(x for x in lab.rstrip("}").split(",") if x))
            if not want or all(f in got.split(",") for f in want.split(",")):
                return float(value)
        return 0.0

    def kill(self, sig: int = signal.SIGKILL) -> int:
        p = self.popen
        assert p is not None
        os.killpg(p.pid, sig)
        return p.wait(30)

    def stop(self) -> int | None:
        p = self.popen
        if p is None:
            return None
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        return p.returncode

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.text().splitlines()[-n:])

    def forbidden_lines(self, excused: list[tuple[float, float]] = ()) -> list[str]:  # type: ignore[assignment]
        """Log lines of refused requests, less those logged inside an ``excused`` window of epoch
        seconds (a restarting API server refuses everything until its RBAC cache is filled)."""
        out = []
        at: float | None = None  # a multi-line message's lines share its first line's time
        for line in self.text().splitlines():
            try:
                at = time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S"))
            except ValueError:
                pass
            if not FORBIDDEN.search(line):
                continue
            if at is not None and any(a - 1 <= at <= b + 1 for a, b in excused):
                continue
            out.append(line)
        return out
