"""A stand-in for Volcano's admission webhook (``vc-webhook-manager``) as its Helm chart installs it,
for the e2e suites: the same admission paths, registered with the API server as real
``MutatingWebhookConfiguration``/``ValidatingWebhookConfiguration`` objects (failurePolicy Fail,
the chart's namespace selector), served over HTTPS from a thread in the test process with a
certificate of its own CA (handed to the API server as ``caBundle``).

What each path does (Volcano v1.7.0's behaviour, restated; see ``pkg/webhooks/admission`` there):

- ``/jobs/mutate`` (CREATE batch.volcano.sh Jobs): ``queue`` defaults to ``default``,
  ``schedulerName`` to ``volcano``, ``maxRetry`` to 3; each task gets a name (``default<i>``),
  ``minAvailable`` (its replicas), ``maxRetry`` 3, and ``dnsPolicy: ClusterFirstWithHostNet`` with
  hostNetwork; the job's ``minAvailable`` defaults to the sum of its tasks'; the ``svc`` plugin is
  added to tensorflow/mpi/pytorch jobs and ``ssh`` to mpi ones.
- ``/jobs/validate`` (CREATE, UPDATE): the checks on counts, names, policies, plugins, volumes,
  task dependencies, and that the queue exists and is Open; an update may change only
  ``minAvailable`` and the tasks' ``replicas``/``minAvailable``. Of the Kubernetes pod-template
  validation only the non-negative resource quantities are restated (the API server validates the
  pods when the controller creates them); the topology-policy CPU check is left out.
- ``/podgroups/mutate`` (CREATE): ``queue`` defaults to the namespace's
  ``scheduling.volcano.sh/queue-name`` annotation, else ``default``.
- ``/pods/validate`` (CREATE, pods of the ``volcano`` scheduler): a pod naming a PodGroup needs it
  to exist and its queue to be Open (read from informers when given: see :class:`CachedReads`); a pod naming a queue needs it Open; the job-disruption-budget
  annotations must be a positive integer or a 1–99 % percentage, not both.
- ``/queues/mutate`` (CREATE): ``reclaimable`` defaults to true, ``weight`` to 1, hierarchy
  annotations get their ``root``/``1`` prefix.
- ``/queues/validate`` (CREATE, UPDATE, DELETE): state Open/Closed, positive weight, hierarchy
  annotations well formed; ``default`` cannot be deleted.

``/pods/mutate`` is left out: with the chart's (empty) admission configuration it patches nothing.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import re
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from controlplane import Api, ApiError, ControlPlane

SCHEDULER_NAMES = ("volcano",)
GROUP_NAME = "scheduling.k8s.io/group-name"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"
JDB_KEYS = ("scheduling.volcano.sh/jdb-min-available", "scheduling.volcano.sh/jdb-max-unavailable")
HIERARCHY = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS = "volcano.sh/hierarchy-weights"
JOB_PLUGINS = {"env", "svc", "ssh", "tensorflow", "mpi", "pytorch"}
VALID_EVENTS = {"*", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated"}
VALID_ACTIONS = {"AbortJob", "RestartJob", "RestartTask", "TerminateJob", "CompleteJob", "ResumeJob"}
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# The chart's selector: not in volcano-system or kube-system.
NAMESPACE_SELECTOR = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                            "values": ["volcano-system", "kube-system"]}]}


class Denied(Exception):
    """The request is refused with this message."""


# ------------------------------------------------------------------------------------------
# The admission rules


def mutate_job(job: dict[str, Any], _api: Api) -> list[dict[str, Any]]:
    spec = job.get("spec") or {}
    patch = []
    if not spec.get("queue"):
        patch.append({"op": "add", "path": "/spec/queue", "value": "default"})
    if not spec.get("schedulerName"):
        patch.append({"op": "add", "path": "/spec/schedulerName", "value": SCHEDULER_NAMES[0]})
    if not spec.get("maxRetry"):
        patch.append({"op": "add", "path": "/spec/maxRetry", "value": 3})
    tasks = [dict(t) for t in spec.get("tasks") or []]
    changed = False
    for i, t in enumerate(tasks):
        if not t.get("name"):
            t["name"], changed = f"default{i}", True
        tspec = ((t.get("template") or {}).get("spec") or {})
        if tspec.get("hostNetwork") and not tspec.get("dnsPolicy"):
            t["template"] = {**t["template"], "spec": {**tspec, "dnsPolicy": "ClusterFirstWithHostNet"}}
            changed = True
        if t.get("minAvailable") is None:
            t["minAvailable"], changed = int(t.get("replicas") or 0), True
        if not t.get("maxRetry"):
            t["maxRetry"], changed = 3, True
    if changed:
        patch.append({"op": "replace", "path": "/spec/tasks", "value": tasks})
    if not spec.get("minAvailable"):
        patch.append({"op": "add", "path": "/spec/minAvailable", "value": sum(int(t["minAvailable"]) for t in tasks)})
    plugins = spec.get("plugins")
    if plugins is not None:
        plugins = dict(plugins)
        if {"tensorflow", "mpi", "pytorch"} & set(plugins):
            plugins.setdefault("svc", [])
        if "mpi" in plugins:
            plugins.setdefault("ssh", [])
        patch.append({"op": "replace", "path": "/spec/plugins", "value": plugins})
    return patch


def _policy_errors(policies: list[dict[str, Any]]) -> list[str]:
    errs: list[str] = []
    seen_events: set[str] = set()
    seen_codes: set[int] = set()
    for p in policies or []:
        events = list(dict.fromkeys((p.get("events") or []) + ([p["event"]] if p.get("event") else [])))
        code = p.get("exitCode")
        if events and code is not None:
            errs.append("must not specify event and exitCode simultaneously")
            break
        if not events and code is None:
            errs.append("either event and exitCode should be specified")
            break
        if events:
            stop = False
            for e in events:
                if e not in VALID_EVENTS:
                    errs.append(f"invalid policy event {e!r}")
                    stop = True
                elif p.get("action") not in VALID_ACTIONS:
                    errs.append(f"invalid policy action {p.get('action')!r}")
                    stop = True
                elif e in seen_events:
                    errs.append(f"duplicate event {e} across different policy")
                    stop = True
                else:
                    seen_events.add(e)
                if stop:
                    break
            if stop:
                break
        else:
            if int(code) == 0:
                errs.append("0 is not a valid error code")
                break
            if int(code) in seen_codes:
                errs.append(f"duplicate exitCode {code}")
                break
            seen_codes.add(int(code))
    if "*" in seen_events and len(seen_events) > 1:
        errs.append("if there's * here, no other policy should be here")
    return errs


def _volume_error(volumes: list[dict[str, Any]]) -> str:
    mounts: set[str] = set()
    for v in volumes or []:
        if not v.get("mountPath"):
            return "mountPath is required;"
        if v["mountPath"] in mounts:
            return f"duplicated mountPath: {v['mountPath']};"
        if v.get("volumeClaim") is None and not v.get("volumeClaimName"):
            return "either VolumeClaim or VolumeClaimName must be specified;"
        if v.get("volumeClaimName") and v.get("volumeClaim") is not None:
            return "conflict: an existing PVC is named and a new one specified;"
        mounts.add(v["mountPath"])
    return ""


def _queue_open(api: Api, name: str) -> str:
    try:
        q = api.get(f"/apis/scheduling.volcano.sh/v1beta1/queues/{name}")
    except ApiError as exc:
        return f"unable to find job queue: {exc.body[:200]};"
    state = (q.get("status") or {}).get("state", "")
    if state != "Open":
        return f"can only submit job to queue with state `Open`, queue `{name}` status is `{state}`;"
    return ""


def _is_dag(tasks: list[dict[str, Any]]) -> bool:
    names = [t.get("name", "") for t in tasks]
    indeg = {n: 0 for n in names}
    edges: dict[str, list[str]] = {}
    for t in tasks:
        for dep in ((t.get("dependsOn") or {}).get("name") or []):
            edges.setdefault(dep, []).append(t["name"])
            indeg[t["name"]] = indeg.get(t["name"], 0) + 1
    ready = [n for n, d in indeg.items() if d == 0]
    seen = 0
    while ready:
        n = ready.pop()
        seen += 1
        for m in edges.get(n, []):
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
    return seen == len(names)


def _template_errors(task: dict[str, Any], index: int) -> list[str]:
    """The part of the pod-template validation the suites exercise: resource quantities must not
    be negative."""
    spec = ((task.get("template") or {}).get("spec") or {})
    errs = []
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        for kind in ("requests", "limits"):
            for rname, q in (res.get(kind) or {}).items():
                if str(q).strip().startswith("-"):
                    errs.append(f"spec.task[{index}].template.spec.containers.resources.{kind}[{rname}]: "
                                f"Invalid value: {q!r}: must be greater than or equal to 0.")
    return errs


def validate_job_create(job: dict[str, Any], api: Api) -> None:
    spec = job.get("spec") or {}
    name = job["metadata"].get("name", "")
    if int(spec.get("minAvailable") or 0) < 0:
        raise Denied("job 'minAvailable' must be >= 0.")
    if int(spec.get("maxRetry") or 0) < 0:
        raise Denied("'maxRetry' cannot be less than zero.")
    if spec.get("ttlSecondsAfterFinished") is not None and int(spec["ttlSecondsAfterFinished"]) < 0:
        raise Denied("'ttlSecondsAfterFinished' cannot be less than zero.")
    tasks = spec.get("tasks") or []
    if not tasks:
        raise Denied("No task specified in job spec")
    plugins = spec.get("plugins") or {}
    if "mpi" in plugins:
        args = plugins["mpi"] or []
        master = next((a.split("=", 1)[1] for a in args if a.startswith("--master=")), "master")
        worker = next((a.split("=", 1)[1] for a in args if a.startswith("--worker=")), "worker")
        names = {t.get("name") for t in tasks}
        if master not in names:
            raise Denied("The specified mpi master task was not found")
        if worker not in names:
            raise Denied("The specified mpi worker task was not found")
    msg: list[str] = []
    seen: set[str] = set()
    total = 0
    for i, t in enumerate(tasks):
        tname, reps = t.get("name", ""), int(t.get("replicas") or 0)
        if reps < 0:
            msg.append(f"'replicas' < 0 in task: {tname}, job: {name};")
        if t.get("minAvailable") is not None:
            if int(t["minAvailable"]) < 0:
                msg.append(f"'minAvailable' < 0 in task: {tname}, job: {name};")
            elif int(t["minAvailable"]) > reps:
                msg.append(f"'minAvailable' is greater than 'replicas' in task: {tname}, job: {name};")
        total += reps
        if len(tname) > 63 or not DNS1123_LABEL.match(tname):
            msg.append(f"task name {tname!r} is not a DNS-1123 label;")
        if tname in seen:
            msg.append(f"duplicated task name {tname};")
            break
        seen.add(tname)
        errs = _policy_errors(t.get("policies") or [])
        if errs:
            msg.append(" ".join(errs) + ";")
        pod = f"{name}-{tname}-{i}"
        if len(pod) > 63 or not QUALIFIED_NAME.match(pod):
            msg.append(f"create pod with name {pod} validate failed;")
        msg += _template_errors(t, i)
    if len(name) > 63 or not QUALIFIED_NAME.match(name):
        msg.append(f"create job with name {name} validate failed")
    if total < int(spec.get("minAvailable") or 0):
        msg.append("job 'minAvailable' should not be greater than total replicas in tasks;")
    errs = _policy_errors(spec.get("policies") or [])
    if errs:
        msg.append(" ".join(errs) + ";")
    for p in plugins:
        if p not in JOB_PLUGINS:
            msg.append(f"unable to find job plugin: {p};")
    vol = _volume_error(spec.get("volumes") or [])
    if vol:
        msg.append(vol)
    q = _queue_open(api, spec.get("queue", ""))
    if q:
        msg.append(q)
    if any(t.get("dependsOn") for t in tasks) and not _is_dag(tasks):
        msg.append("job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);")
    if msg:
        raise Denied(" ".join(msg))


def validate_job_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    ns, os_ = new.get("spec") or {}, old.get("spec") or {}
    total = 0
    for t in ns.get("tasks") or []:
        reps = int(t.get("replicas") or 0)
        if reps < 0:
            raise Denied(f"'replicas' must be >= 0 in task: {t.get('name')}")
        if t.get("minAvailable") is not None:
            if int(t["minAvailable"]) < 0:
                raise Denied(f"'minAvailable' must be >= 0 in task: {t.get('name')}")
            if int(t["minAvailable"]) > reps:
                raise Denied(f"'minAvailable' must be <= 'replicas' in task: {t.get('name')}")
        total += reps
    if int(ns.get("minAvailable") or 0) > total:
        raise Denied("job 'minAvailable' must not be greater than total replicas")
    if int(ns.get("minAvailable") or 0) < 0:
        raise Denied("job 'minAvailable' must be >= 0")
    if len(ns.get("tasks") or []) != len(os_.get("tasks") or []):
        raise Denied("job updates may not add or remove tasks")

    def comparable(spec: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in spec.items() if k not in ("minAvailable", "priorityClassName")}
        out["tasks"] = [{k: v for k, v in t.items() if k not in ("replicas", "minAvailable")} for t in spec.get("tasks") or []]
        out["volumes"] = [{k: v for k, v in vol.items() if not (k == "volumeClaimName" and vol.get("volumeClaim"))}
                          for vol in spec.get("volumes") or []]
        return {k: v for k, v in out.items() if v not in (None, [], {})}

    if comparable(ns) != comparable(os_):
        raise Denied("job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec`")


def mutate_podgroup(pg: dict[str, Any], api: Api) -> list[dict[str, Any]]:
    if (pg.get("spec") or {}).get("queue"):
        return []
    queue = "default"
    try:
        ns = api.get(f"/api/v1/namespaces/{pg['metadata']['namespace']}")
        queue = ((ns["metadata"].get("annotations") or {}).get(QUEUE_NAME)) or queue
    except ApiError:
        pass
    return [{"op": "add", "path": "/spec/queue", "value": queue}]


def _jdb_error(key: str, value: str) -> str:
    v = value.strip()
    if v.endswith("%"):
        try:
            n = int(v[:-1])
        except ValueError:
            return f"invalid value {value!r} for {key}"
        return "" if 0 < n < 100 else f"invalid value <{value!r}> for {key}, it must be a valid percentage which between 1% ~ 99%"
    try:
        n = int(v)
    except ValueError:
        return f"invalid value {value!r} for {key}"
    return "" if n > 0 else f"invalid value <{value!r}> for {key}, it must be a positive integer"


def validate_pod(pod: dict[str, Any], api: Api) -> None:
    if (pod.get("spec") or {}).get("schedulerName") not in SCHEDULER_NAMES:
        return
    ann = pod["metadata"].get("annotations") or {}
    ns = pod["metadata"].get("namespace", "")
    pg_name = ann.get(GROUP_NAME)
    if pg_name:
        try:
            pg = api.get(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups/{pg_name}")
        except ApiError as exc:
            raise Denied(f"failed to get PodGroup for pod <{ns}/{pod['metadata'].get('name', '')}>: {exc.body[:200]}") from None
        queue = (pg.get("spec") or {}).get("queue")
        if queue:
            err = _queue_open(api, queue)
            if err:
                raise Denied(f"failed : {err}")
        return
    if ann.get(QUEUE_NAME):
        err = _queue_open(api, ann[QUEUE_NAME])
        if err:
            raise Denied(err)
    present = [k for k in JDB_KEYS if k in ann]
    for k in present:
        err = _jdb_error(k, ann[k])
        if err:
            raise Denied(err)
    if len(present) > 1:
        raise Denied(f"not allow configure multiple annotations <{list(JDB_KEYS)}> at same time")


def mutate_queue(queue: dict[str, Any], _api: Api) -> list[dict[str, Any]]:
    ann = queue["metadata"].get("annotations") or {}
    spec = queue.get("spec") or {}
    patch = []
    h, w = ann.get(HIERARCHY, ""), ann.get(HIERARCHY_WEIGHTS, "")
    if h and w and not h.startswith("root"):
        patch.append({"op": "add", "path": "/metadata/annotations/" + HIERARCHY.replace("/", "~1"), "value": f"root/{h}"})
        patch.append({"op": "add", "path": "/metadata/annotations/" + HIERARCHY_WEIGHTS.replace("/", "~1"), "value": f"1/{w}"})
    if spec.get("reclaimable") is None:
        patch.append({"op": "add", "path": "/spec/reclaimable", "value": True})
    if not spec.get("weight"):
        patch.append({"op": "add", "path": "/spec/weight", "value": 1})
    return patch


def validate_queue(queue: dict[str, Any], api: Api) -> None:
    state = (queue.get("status") or {}).get("state", "")
    errs = []
    if state and state not in ("Open", "Closed"):
        errs.append(f"requestBody.spec.state: Invalid value: {state!r}: queue state must be in [Open Closed]")
    weight = int((queue.get("spec") or {}).get("weight") or 0)
    if weight <= 0:
        errs.append(f"requestBody.spec.weight: Invalid value: {weight}: queue weight must be a positive integer")
    ann = queue["metadata"].get("annotations") or {}
    h, w = ann.get(HIERARCHY, ""), ann.get(HIERARCHY_WEIGHTS, "")
    if h or w:
        paths, weights = h.split("/"), w.split("/")
        if len(paths) != len(weights):
            errs.append(f"{HIERARCHY} must have the same length with {HIERARCHY_WEIGHTS}")
        else:
            for x in weights:
                try:
                    ok = float(x) > 0
                except ValueError:
                    ok = False
                if not ok:
                    errs.append(f"{x} in the {w} must be a number larger than 0")
                    break
            else:
                for other in api.items("/apis/scheduling.volcano.sh/v1beta1/queues"):
                    oh = (other["metadata"].get("annotations") or {}).get(HIERARCHY, "")
                    if oh and other["metadata"]["name"] != queue["metadata"]["name"] and oh.startswith(h):
                        errs.append(f"{h} is not allowed to be in the sub path of {oh} of queue {other['metadata']['name']}")
                        break
    if errs:
        raise Denied("[" + ", ".join(errs) + "]" if len(errs) > 1 else errs[0])


def validate_queue_delete(name: str, api: Api) -> None:
    if name == "default":
        raise Denied("`default` queue can not be deleted")
    try:
        api.get(f"/apis/scheduling.volcano.sh/v1beta1/queues/{name}")
    except ApiError as exc:
        raise Denied(exc.body[:200]) from None


def _review(req: dict[str, Any], api: Api, path: str) -> dict[str, Any]:
    """The AdmissionResponse for one AdmissionReview request on ``path``."""
    op, obj, old = req.get("operation"), req.get("object"), req.get("oldObject")
    if obj is not None and not obj.get("metadata", {}).get("namespace") and req.get("namespace"):
        obj["metadata"]["namespace"] = req["namespace"]
    patch: list[dict[str, Any]] = []
    if path == "/jobs/mutate" and op == "CREATE":
        patch = mutate_job(obj, api)
    elif path == "/jobs/validate" and op == "CREATE":
        validate_job_create(obj, api)
    elif path == "/jobs/validate" and op == "UPDATE":
        validate_job_update(old, obj)
    elif path == "/podgroups/mutate" and op == "CREATE":
        patch = mutate_podgroup(obj, api)
    elif path == "/pods/validate" and op == "CREATE":
        validate_pod(obj, api)
    elif path == "/queues/mutate" and op == "CREATE":
        patch = mutate_queue(obj, api)
    elif path == "/queues/validate" and op in ("CREATE", "UPDATE"):
        validate_queue(obj, api)
    elif path == "/queues/validate" and op == "DELETE":
        validate_queue_delete(req.get("name", ""), api)
    out: dict[str, Any] = {"uid": req["uid"], "allowed": True}
    if patch:
        out["patchType"] = "JSONPatch"
        out["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return out


# (configuration name, webhook name, path, group, version, resource, operations, mutating)
HOOKS = (
    ("volcano-admission-service-jobs-mutate", "mutatejob.volcano.sh", "/jobs/mutate", "batch.volcano.sh", "v1alpha1", "jobs", ["CREATE"], True),
    ("volcano-admission-service-jobs-validate", "validatejob.volcano.sh", "/jobs/validate", "batch.volcano.sh", "v1alpha1", "jobs", ["CREATE", "UPDATE"], False),
    ("volcano-admission-service-podgroups-mutate", "mutatepodgroup.volcano.sh", "/podgroups/mutate", "scheduling.volcano.sh", "v1beta1", "podgroups", ["CREATE"], True),
    ("volcano-admission-service-pods-validate", "validatepod.volcano.sh", "/pods/validate", "", "v1", "pods", ["CREATE"], False),
    ("volcano-admission-service-queues-mutate", "mutatequeue.volcano.sh", "/queues/mutate", "scheduling.volcano.sh", "v1beta1", "queues", ["CREATE"], True),
    ("volcano-admission-service-queues-validate", "validatequeue.volcano.sh", "/queues/validate", "scheduling.volcano.sh", "v1beta1", "queues", ["CREATE", "UPDATE", "DELETE"], False),
)


def _write_cert(d: Path) -> bytes:
    """A CA and a serving certificate for 127.0.0.1 signed by it; returns the CA's PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "volcano-admission-e2e-ca")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "volcano-admission-service")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (d / "webhook.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "webhook.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))
    return ca.public_bytes(serialization.Encoding.PEM)


class CachedReads:
    """Reads of PodGroups and Queues served from informers' caches, falling back to the API
    server for what they do not hold (yet): every pod creation asks the pod hook for its
    PodGroup and queue, and a Python webhook that made two round trips per pod would admit a
    job's pods one after another, several times slower than Volcano's. Everything else goes to
    ``api``."""

    def __init__(self, api: Api, informers: dict[str, Any]) -> None:
        self.api = api
        self.informers = informers  # collection path -> kcm.Informer

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        for collection, inf in self.informers.items():
            prefix, _, plural = collection.rpartition("/")
            if inf.namespaced:
                m = re.fullmatch(rf"{re.escape(prefix)}/namespaces/([^/]+)/{plural}/([^/]+)", path)
                want = (m.group(1), m.group(2)) if m else None
            else:
                m = re.fullmatch(rf"{re.escape(collection)}/([^/]+)", path)
                want = (None, m.group(1)) if m else None
            if want is None:
                continue
            for o in inf.list():
                md = o["metadata"]
                if (md.get("namespace") if inf.namespaced else None, md["name"]) == want:
                    return o
            break
        return self.api.get(path, **params)

    def items(self, path: str, **params: Any) -> list[dict[str, Any]]:
        return self.api.items(path, **params)


class AdmissionWebhook:
    """The webhook server (a thread) and its registrations; ``start()`` returns once the API server
    calls it. ``denied`` and ``calls`` count what it answered, for a look after a run."""

    def __init__(self, cp: ControlPlane, workdir: Path, informers: dict[str, Any] | None = None) -> None:
        self.cp, self.workdir = cp, workdir
        self.api = cp.client(cp.admin_token)
        self.pod_reads: Any = CachedReads(self.api, informers) if informers else self.api
        self.calls = 0
        self.seconds: list[float] = []  # how long each answer took
        self.denied: list[str] = []
        self.errors: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    def start(self, timeout: float = 30.0) -> AdmissionWebhook:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ca = _write_cert(self.workdir)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the API server reuses its connections

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                req = body.get("request") or {}
                out = owner.answer(req, self.path.split("?")[0])
                data = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": out}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.workdir / "webhook.crt", self.workdir / "webhook.key")
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        self._server = server
        threading.Thread(target=server.serve_forever, name="volcano-admission", daemon=True).start()
        port = server.server_address[1]
        self._register(base64.b64encode(ca).decode(), port)
        self._wait_effective(timeout)
        return self

    def answer(self, req: dict[str, Any], path: str) -> dict[str, Any]:
        t0 = time.monotonic()
        try:
            return self._answer(req, path)
        finally:
            with self._lock:
                self.calls += 1
                self.seconds.append(time.monotonic() - t0)

    def latency(self) -> str:
        """Median and slowest answer, for the run's notes."""
        with self._lock:
            xs = sorted(self.seconds)
        if not xs:
            return "no calls"
        return f"{len(xs)} calls, median {xs[len(xs) // 2] * 1000:.0f} ms, slowest {xs[-1] * 1000:.0f} ms"

    def _answer(self, req: dict[str, Any], path: str) -> dict[str, Any]:
        try:
            return _review(req, self.pod_reads if path == "/pods/validate" else self.api, path)
        except Denied as exc:
            with self._lock:
                self.denied.append(f"{path} {req.get('operation')} {req.get('namespace', '')}/{req.get('name', '')}: {exc}")
            return {"uid": req.get("uid", ""), "allowed": False, "status": {"message": str(exc), "code": 400}}
        except Exception as exc:  # a bug here must show, not pass silently: refuse and record
            with self._lock:
                self.errors.append(f"{path}: {exc!r}")
            return {"uid": req.get("uid", ""), "allowed": False, "status": {"message": f"admission stand-in error: {exc!r}", "code": 500}}

    def _register(self, ca_bundle: str, port: int) -> None:
        for cfg, name, path, group, version, resource, ops, mutating in HOOKS:
            hook = {
                "name": name,
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle},
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "namespaceSelector": NAMESPACE_SELECTOR,
                "objectSelector": {},
                "rules": [{"apiGroups": [group], "apiVersions": [version], "operations": ops,
                           "resources": [resource], "scope": "*"}],
                "sideEffects": "None",
                "timeoutSeconds": 10,
            }
            kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
            if mutating:
                hook["reinvocationPolicy"] = "Never"
            plural = kind.lower() + "s"
            body = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": cfg}, "webhooks": [hook]}
            base = f"/apis/admissionregistration.k8s.io/v1/{plural}"
            try:
                self.api.post(base, body)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                cur = self.api.get(f"{base}/{cfg}")
                body["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
                self.api.put(f"{base}/{cfg}", body)

    def _wait_effective(self, timeout: float) -> None:
        """Until the API server calls the validating hook: a dry-run Job without tasks is refused."""
        probe = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                 "metadata": {"name": "admission-probe", "namespace": "default"}, "spec": {"queue": "default", "tasks": []}}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.api.post("/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs", probe, dryRun="All")
            except ApiError as exc:
                if "No task specified" in exc.body:
                    self.denied.clear()
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the admission webhook is not called after {timeout:.0f}s")

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self.api.close()


