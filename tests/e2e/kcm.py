"""Stand-ins for the kube-controller-manager controllers Volcano's e2e suites rely on, for a bare
control plane (etcd + kube-apiserver) that has none:

- **namespace**: a namespace being deleted has its content deleted (every namespaced resource the
  API server serves, by deletecollection), then its ``kubernetes`` finalizer removed;
- **serviceaccount**: every namespace gets its ``default`` ServiceAccount (the ServiceAccount
  admission plugin refuses pods without it);
- **garbagecollector**: objects whose owners (by ``ownerReferences`` uid) are all gone are deleted;
  an owner deleted in the foreground (``foregroundDeletion`` finalizer) has its dependents deleted
  and keeps the finalizer until those that block its deletion are gone; ``orphan`` detaches them;
- **replicaset** (and replicationcontroller): a ReplicaSet's pods are created from its template up to ``replicas`` (and extra
  ones deleted), its status counted;
- **deployment**: a Deployment's ReplicaSet for its current template, scaled to ``replicas``
  (older templates' ReplicaSets scaled to 0: the Recreate strategy);
- **job** (batch/v1): up to ``parallelism`` pods, ``active``/``succeeded``/``failed`` counted, the
  Complete condition when enough succeeded;
- **pvc-protection**: a deleted claim's finalizer goes once no pod uses it.

Not stood in for: the persistent-volume binder (a claim stays unbound), node lifecycle, pod GC
(the kubelet stand-in removes deleted pods even on nodes that do not exist), endpoints, quotas.

Each is small and level-triggered: it reads a shared cache kept by list+watch (:class:`Informer`)
and acts on the whole state whenever something changed (and every few seconds). They are written
for the handful of objects an e2e spec makes, not for scale. Volcano's own Job, PodGroup and Queue
controllers are never stood in for: the real ``vc-controller-manager`` runs beside these.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any, Callable, Iterable

import httpx

from controlplane import Api, ApiError, ControlPlane

# (path of the collection, kind, apiVersion, namespaced): what the garbage collector watches, i.e.
# every kind the suites, Volcano's controllers (and their job plugins) and these stand-ins create
# with or point at by ownerReferences.
WATCHED: tuple[tuple[str, str, str, bool], ...] = (
    ("/api/v1/namespaces", "Namespace", "v1", False),
    ("/api/v1/pods", "Pod", "v1", True),
    ("/api/v1/services", "Service", "v1", True),
    ("/api/v1/configmaps", "ConfigMap", "v1", True),
    ("/api/v1/secrets", "Secret", "v1", True),
    ("/api/v1/persistentvolumeclaims", "PersistentVolumeClaim", "v1", True),
    ("/api/v1/replicationcontrollers", "ReplicationController", "v1", True),
    ("/apis/apps/v1/replicasets", "ReplicaSet", "apps/v1", True),
    ("/apis/apps/v1/deployments", "Deployment", "apps/v1", True),
    ("/apis/batch/v1/jobs", "Job", "batch/v1", True),
    ("/apis/networking.k8s.io/v1/networkpolicies", "NetworkPolicy", "networking.k8s.io/v1", True),
    ("/apis/batch.volcano.sh/v1alpha1/jobs", "Job", "batch.volcano.sh/v1alpha1", True),
    ("/apis/bus.volcano.sh/v1alpha1/commands", "Command", "bus.volcano.sh/v1alpha1", True),
    ("/apis/scheduling.volcano.sh/v1beta1/podgroups", "PodGroup", "scheduling.volcano.sh/v1beta1", True),
    ("/apis/scheduling.volcano.sh/v1beta1/queues", "Queue", "scheduling.volcano.sh/v1beta1", False),
)
FOREGROUND, ORPHAN = "foregroundDeletion", "orphan"


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def object_path(collection: str, md: dict[str, Any], namespaced: bool) -> str:
    """``/api/v1/pods`` + metadata → ``/api/v1/namespaces/NS/pods/NAME``."""
    if not namespaced:
        return f"{collection}/{md['name']}"
    prefix, _, plural = collection.rpartition("/")
    return f"{prefix}/namespaces/{md['namespace']}/{plural}/{md['name']}"


def is_controlled_by(obj: dict[str, Any], uid: str) -> bool:
    return any(r.get("controller") and r.get("uid") == uid for r in obj["metadata"].get("ownerReferences") or [])


def controller_ref(owner: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    md = owner["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": md["name"], "uid": md["uid"],
            "controller": True, "blockOwnerDeletion": True}


class Informer:
    """One collection kept current by list + watch in a thread: ``objects`` by uid. Every change
    sets each of ``listeners`` (threading.Event). Relists when a watch fails (410 Gone, restart)."""

    def __init__(self, cp: ControlPlane, collection: str, kind: str, api_version: str, namespaced: bool) -> None:
        self.api = cp.client(cp.admin_token)
        self.collection, self.kind, self.api_version, self.namespaced = collection, kind, api_version, namespaced
        self.objects: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.listeners: list[threading.Event] = []
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"informer{collection}", daemon=True)

    def start(self) -> Informer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.signal_stop()
        self._thread.join(10)
        self.api.close()

    def signal_stop(self) -> None:
        self._stop.set()

    def list(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.objects.values())

    def path(self, obj: dict[str, Any]) -> str:
        return object_path(self.collection, obj["metadata"], self.namespaced)

    def _notify(self) -> None:
        for ev in self.listeners:
            ev.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                listing = self.api.get(self.collection)
                with self.lock:
                    self.objects = {o["metadata"]["uid"]: o for o in listing.get("items") or []}
                self.synced.set()
                self._notify()
                rv = listing["metadata"]["resourceVersion"]
                while not self._stop.is_set():
                    for ev in self.api.watch_lines(self.collection, rv, timeout=5):
                        obj = ev.get("object") or {}
                        kind = ev.get("type")
                        if kind == "ERROR":
                            raise ApiError(int(obj.get("code") or 500), str(obj.get("message")), "WATCH", self.collection)
                        rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                        if kind == "BOOKMARK":
                            continue
                        with self.lock:
                            if kind == "DELETED":
                                self.objects.pop(obj["metadata"]["uid"], None)
                            else:
                                self.objects[obj["metadata"]["uid"]] = obj
                        self._notify()
                        if self._stop.is_set():
                            return
            except (ApiError, httpx.HTTPError, KeyError, ValueError):
                self._stop.wait(0.3)


class Controller:
    """A reconcile loop in a thread: ``reconcile()`` whenever an informer it listens to changed
    (after a short settling pause), and every ``resync`` seconds anyway."""

    name = "controller"
    resync = 2.0

    def __init__(self, cp: ControlPlane) -> None:
        self.api = cp.client(cp.admin_token)
        self.wake = threading.Event()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def listen(self, *informers: Informer) -> None:
        for inf in informers:
            inf.listeners.append(self.wake)

    def start(self) -> Controller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.signal_stop()
        self._thread.join(10)
        self.api.close()

    def signal_stop(self) -> None:
        self._stop.set()
        self.wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.wake.wait(self.resync)
            if self._stop.is_set():
                return
            time.sleep(0.02)  # let a burst of events land first
            self.wake.clear()
            try:
                self.reconcile()
            except (ApiError, httpx.HTTPError) as exc:
                self.errors.append(str(exc)[:300])
                del self.errors[:-50]
                self._stop.wait(0.2)
                self.wake.set()

    def reconcile(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def ignore_missing(self, fn: Callable[[], Any]) -> Any:
        """Run one write; an object gone (404) or changed meanwhile (409) is next round's business."""
        try:
            return fn()
        except ApiError as exc:
            if exc.status in (404, 409) or (exc.status == 403 and "being terminated" in exc.body):
                self.wake.set()
                return None
            raise


# ------------------------------------------------------------------------------------------


class ServiceAccountController(Controller):
    name = "serviceaccount-controller"

    def __init__(self, cp: ControlPlane, namespaces: Informer) -> None:
        super().__init__(cp)
        self.namespaces = namespaces
        self.done: set[str] = set()
        self.listen(namespaces)

    def reconcile(self) -> None:
        for ns in self.namespaces.list():
            md = ns["metadata"]
            if md["uid"] in self.done or md.get("deletionTimestamp"):
                continue
            try:
                self.api.post(f"/api/v1/namespaces/{md['name']}/serviceaccounts",
                              {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
            except ApiError as exc:
                if exc.status not in (409, 403, 404):  # exists; namespace terminating or gone
                    raise
            self.done.add(md["uid"])


class NamespaceController(Controller):
    """Deletes a terminating namespace's content, then finalizes it (as kube-controller-manager's
    namespace controller: deletecollection over every namespaced, deletable resource in discovery)."""

    name = "namespace-controller"
    resync = 1.0

    def __init__(self, cp: ControlPlane, namespaces: Informer) -> None:
        super().__init__(cp)
        self.namespaces = namespaces
        self._resources: list[str] | None = None
        self.listen(namespaces)

    def resources(self) -> list[str]:
        """Collection paths (with ``{ns}``) of every namespaced resource that can be listed and
        deletecollection'ed: discovered once (the CRDs are installed before this starts)."""
        if self._resources is None:
            out = []
            groups = [("/api/v1", self.api.get("/api/v1"))]
            for g in self.api.get("/apis").get("groups") or []:
                gv = g["preferredVersion"]["groupVersion"]
                try:
                    groups.append((f"/apis/{gv}", self.api.get(f"/apis/{gv}")))
                except ApiError:
                    continue
            for prefix, res in groups:
                for r in res.get("resources") or []:
                    verbs = set(r.get("verbs") or [])
                    if r.get("namespaced") and "/" not in r["name"] and {"list", "deletecollection"} <= verbs:
                        out.append(f"{prefix}/namespaces/{{ns}}/{r['name']}")
            self._resources = out
        return self._resources

    def reconcile(self) -> None:
        for ns in self.namespaces.list():
            md, spec = ns["metadata"], ns.get("spec") or {}
            if not md.get("deletionTimestamp") or "kubernetes" not in (spec.get("finalizers") or []):
                continue
            name = md["name"]
            left = 0
            for path in self.resources():
                coll = path.format(ns=name)
                try:
                    items = self.api.items(coll)
                    if items:
                        left += len(items)
                        if any(not i["metadata"].get("deletionTimestamp") for i in items):
                            self.api.request("DELETE", coll)
                except ApiError as exc:
                    if exc.status not in (404, 405):
                        raise
            if left:
                self.wake.set()  # the kubelet removes terminating pods; look again soon
                time.sleep(0.2)
                continue
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "resourceVersion": md["resourceVersion"]},
                    "spec": {"finalizers": [f for f in spec.get("finalizers") or [] if f != "kubernetes"]}}
            self.ignore_missing(lambda: self.api.put(f"/api/v1/namespaces/{name}/finalize", body))


class GarbageCollector(Controller):
    """Owner-reference garbage collection over the ``WATCHED`` kinds (background, foreground and
    orphan deletion). A dependent is deleted only after its owners' absence is confirmed by a live
    GET (a watch of the owner's kind may lag behind the dependent's)."""

    name = "garbage-collector"

    def __init__(self, cp: ControlPlane, informers: dict[tuple[str, str], Informer]) -> None:
        super().__init__(cp)
        self.informers = informers  # (apiVersion, kind) -> informer
        self.listen(*informers.values())

    def _owner_path(self, ref: dict[str, Any], ns: str | None) -> str | None:
        inf = self.informers.get((ref.get("apiVersion", ""), ref.get("kind", "")))
        if inf is None:
            return None
        return object_path(inf.collection, {"name": ref["name"], "namespace": ns}, inf.namespaced)

    def _owner_gone(self, ref: dict[str, Any], ns: str | None) -> bool:
        path = self._owner_path(ref, ns)
        if path is None:
            return False  # a kind we do not watch: never collect for it
        try:
            live = self.api.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return True
            raise
        return live["metadata"]["uid"] != ref["uid"]

    def reconcile(self) -> None:
        everything: dict[str, tuple[Informer, dict[str, Any]]] = {}
        for inf in self.informers.values():
            for o in inf.list():
                everything[o["metadata"]["uid"]] = (inf, o)
        dependents: dict[str, list[tuple[Informer, dict[str, Any], dict[str, Any]]]] = {}
        for inf, o in everything.values():
            for ref in o["metadata"].get("ownerReferences") or []:
                dependents.setdefault(ref["uid"], []).append((inf, o, ref))

        for inf, o in list(everything.values()):
            md = o["metadata"]
            fins = md.get("finalizers") or []
            deps = dependents.get(md["uid"], [])
            if md.get("deletionTimestamp") and ORPHAN in fins:
                for dinf, d, _ in deps:
                    refs = [r for r in d["metadata"].get("ownerReferences") or [] if r["uid"] != md["uid"]]
                    self.ignore_missing(lambda: self.api.patch(dinf.path(d), {"metadata": {
                        "ownerReferences": refs, "resourceVersion": d["metadata"]["resourceVersion"]}}))
                if not deps:
                    self._drop_finalizer(inf, o, ORPHAN)
            elif md.get("deletionTimestamp") and FOREGROUND in fins:
                blocking = [d for _, d, ref in deps if ref.get("blockOwnerDeletion")]
                for dinf, d, ref in deps:
                    if not d["metadata"].get("deletionTimestamp"):
                        policy = "Foreground" if ref.get("blockOwnerDeletion") else "Background"
                        self.ignore_missing(lambda: self.api.delete(dinf.path(d), propagationPolicy=policy))
                if not blocking:
                    self._drop_finalizer(inf, o, FOREGROUND)

            refs = md.get("ownerReferences") or []
            if refs and not md.get("deletionTimestamp"):
                present = [r for r in refs if r["uid"] in everything]
                if not present and all(self._owner_gone(r, md.get("namespace")) for r in refs):
                    self.ignore_missing(lambda: self.api.delete(inf.path(o), propagationPolicy="Background"))

    def _drop_finalizer(self, inf: Informer, o: dict[str, Any], name: str) -> None:
        md = o["metadata"]
        fins = [f for f in md.get("finalizers") or [] if f != name]
        self.ignore_missing(lambda: self.api.patch(inf.path(o), {"metadata": {
            "finalizers": fins or None, "resourceVersion": md["resourceVersion"]}}))


def _pod_from_template(owner: dict[str, Any], template: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    tmd = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{owner['metadata']['name']}-",
            "namespace": owner["metadata"]["namespace"],
            "labels": dict(tmd.get("labels") or {}),
            "annotations": dict(tmd.get("annotations") or {}),
            "ownerReferences": [ref],
        },
        "spec": template.get("spec") or {},
    }


def _finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class ReplicaSetController(Controller):
    """ReplicaSets, and ReplicationControllers (the same loop over the other informer)."""

    name = "replicaset-controller"

    def __init__(self, cp: ControlPlane, replicasets: Informer, pods: Informer) -> None:
        super().__init__(cp)
        self.replicasets, self.pods = replicasets, pods
        self.listen(replicasets, pods)

    def reconcile(self) -> None:
        pods = self.pods.list()
        for rs in self.replicasets.list():
            md, spec = rs["metadata"], rs.get("spec") or {}
            mine = [p for p in pods if is_controlled_by(p, md["uid"])]
            active = [p for p in mine if not p["metadata"].get("deletionTimestamp") and not _finished(p)]
            if md.get("deletionTimestamp"):
                continue
            want = int(spec.get("replicas", 1))
            ns = md["namespace"]
            for _ in range(want - len(active)):
                ref = controller_ref(rs, self.replicasets.api_version, self.replicasets.kind)
                body = _pod_from_template(rs, spec.get("template") or {}, ref)
                self.ignore_missing(lambda: self.api.post(f"/api/v1/namespaces/{ns}/pods", body))
            if len(active) > want:
                # Unscheduled pods first, then pending ones, as the real controller ranks them.
                ranked = sorted(active, key=lambda p: (bool(p["spec"].get("nodeName")), (p.get("status") or {}).get("phase") == "Running"))
                for p in ranked[: len(active) - want]:
                    self.ignore_missing(lambda: self.api.delete(f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}"))
            running = sum(1 for p in active if (p.get("status") or {}).get("phase") == "Running")
            status = {"replicas": len(active), "readyReplicas": running, "availableReplicas": running,
                      "observedGeneration": md.get("generation", 1)}
            if {k: (rs.get("status") or {}).get(k, 0) for k in status} != status:
                self.ignore_missing(lambda: self.api.patch(f"{self.replicasets.path(rs)}/status", {"status": status}))


class DeploymentController(Controller):
    """Deployments: one ReplicaSet per pod template (``<name>-<hash>``, the template labelled
    ``pod-template-hash``) scaled to ``replicas``; a changed template gets a new ReplicaSet and
    the old ones go to 0 at once (the Recreate strategy: no rolling window to stand in for)."""

    name = "deployment-controller"

    def __init__(self, cp: ControlPlane, deployments: Informer, replicasets: Informer) -> None:
        super().__init__(cp)
        self.deployments, self.replicasets = deployments, replicasets
        self.listen(deployments, replicasets)

    def reconcile(self) -> None:
        sets = self.replicasets.list()
        for d in self.deployments.list():
            md, spec = d["metadata"], d.get("spec") or {}
            if md.get("deletionTimestamp"):
                continue
            ns, template = md["namespace"], spec.get("template") or {}
            digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
            name = f"{md['name']}-{digest}"
            mine = [rs for rs in sets if is_controlled_by(rs, md["uid"])]
            want = int(spec.get("replicas", 1))
            current = next((rs for rs in mine if rs["metadata"]["name"] == name), None)
            if current is None:
                tmd = template.get("metadata") or {}
                labels = {**(tmd.get("labels") or {}), "pod-template-hash": digest}
                body = {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "metadata": {"name": name, "namespace": ns, "labels": labels,
                                 "annotations": dict(md.get("annotations") or {}),
                                 "ownerReferences": [controller_ref(d, "apps/v1", "Deployment")]},
                    "spec": {
                        "replicas": want,
                        "selector": {"matchLabels": {**((spec.get("selector") or {}).get("matchLabels") or {}),
                                                     "pod-template-hash": digest}},
                        "template": {**template, "metadata": {**tmd, "labels": labels}},
                    },
                }
                self.ignore_missing(lambda: self.api.post(f"/apis/apps/v1/namespaces/{ns}/replicasets", body))
            elif int((current.get("spec") or {}).get("replicas", 1)) != want:
                self.ignore_missing(lambda: self.api.patch(self.replicasets.path(current), {"spec": {"replicas": want}}))
            for old in mine:
                if old["metadata"]["name"] != name and int((old.get("spec") or {}).get("replicas", 1)) != 0:
                    self.ignore_missing(lambda: self.api.patch(self.replicasets.path(old), {"spec": {"replicas": 0}}))
            ready = sum(int((rs.get("status") or {}).get("readyReplicas", 0)) for rs in mine)
            status = {"replicas": want, "readyReplicas": ready, "availableReplicas": ready,
                      "observedGeneration": md.get("generation", 1)}
            if {k: (d.get("status") or {}).get(k, 0) for k in status} != status:
                self.ignore_missing(lambda: self.api.patch(f"{self.deployments.path(d)}/status", {"status": status}))


class JobController(Controller):
    """batch/v1 Jobs, as far as the suites use them: ``parallelism`` pods at a time until
    ``completions`` succeeded (any one, without completions), failed pods replaced up to
    ``backoffLimit``."""

    name = "job-controller"

    def __init__(self, cp: ControlPlane, jobs: Informer, pods: Informer) -> None:
        super().__init__(cp)
        self.jobs, self.pods = jobs, pods
        self.listen(jobs, pods)

    def reconcile(self) -> None:
        pods = self.pods.list()
        for job in self.jobs.list():
            md, spec, st = job["metadata"], job.get("spec") or {}, job.get("status") or {}
            if md.get("deletionTimestamp") or any(
                c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in st.get("conditions") or []
            ):
                continue
            mine = [p for p in pods if is_controlled_by(p, md["uid"])]
            active = [p for p in mine if not p["metadata"].get("deletionTimestamp") and not _finished(p)]
            succeeded = sum(1 for p in mine if (p.get("status") or {}).get("phase") == "Succeeded")
            failed = sum(1 for p in mine if (p.get("status") or {}).get("phase") == "Failed")
            parallelism = int(spec.get("parallelism", 1))
            completions = spec.get("completions")
            ns = md["namespace"]
            done = succeeded >= int(completions) if completions is not None else (succeeded > 0 and not active)
            failed_out = failed > int(spec.get("backoffLimit", 6))
            if not done and not failed_out:
                room = parallelism if completions is None else min(parallelism, int(completions) - succeeded)
                if completions is None and succeeded:
                    room = 0
                for _ in range(room - len(active)):
                    body = _pod_from_template(job, spec.get("template") or {}, controller_ref(job, "batch/v1", "Job"))
                    self.ignore_missing(lambda: self.api.post(f"/api/v1/namespaces/{ns}/pods", body))
            status: dict[str, Any] = {"active": len(active), "succeeded": succeeded, "failed": failed,
                                      "ready": sum(1 for p in active if (p.get("status") or {}).get("phase") == "Running")}
            if not st.get("startTime"):
                status["startTime"] = now_rfc3339()
            if done or failed_out:
                now = now_rfc3339()
                kinds = ("SuccessCriteriaMet", "Complete") if done else ("FailureTarget", "Failed")
                status["conditions"] = [{"type": k, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
                                         "reason": "CompletionsReached" if done else "BackoffLimitExceeded"} for k in kinds]
                if done:
                    status["completionTime"] = now
            if any(st.get(k) != v for k, v in status.items()):
                self.ignore_missing(lambda: self.api.patch(f"/apis/batch/v1/namespaces/{ns}/jobs/{md['name']}/status",
                                                           {"status": status}))


class PVCProtectionController(Controller):
    """A deleted PersistentVolumeClaim loses its ``kubernetes.io/pvc-protection`` finalizer once
    no pod that is still running (or to run) mounts it, so a namespace holding one can go."""

    name = "pvc-protection-controller"
    FINALIZER = "kubernetes.io/pvc-protection"

    def __init__(self, cp: ControlPlane, claims: Informer, pods: Informer) -> None:
        super().__init__(cp)
        self.claims, self.pods = claims, pods
        self.listen(claims, pods)

    def reconcile(self) -> None:
        used: set[tuple[str, str]] = set()
        for p in self.pods.list():
            if _finished(p):
                continue
            for v in (p.get("spec") or {}).get("volumes") or []:
                claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
                if claim:
                    used.add((p["metadata"]["namespace"], claim))
        for c in self.claims.list():
            md = c["metadata"]
            if md.get("deletionTimestamp") and self.FINALIZER in (md.get("finalizers") or []):
                if (md["namespace"], md["name"]) not in used:
                    fins = [f for f in md["finalizers"] if f != self.FINALIZER]
                    self.ignore_missing(lambda: self.api.patch(self.claims.path(c), {"metadata": {
                        "finalizers": fins or None, "resourceVersion": md["resourceVersion"]}}))


class ControllerManager:
    """The informers and controllers above, started and stopped together."""

    def __init__(self, cp: ControlPlane) -> None:
        self.informers = {(av, kind): Informer(cp, coll, kind, av, nsd) for coll, kind, av, nsd in WATCHED}
        inf = self.informers
        self.controllers: list[Controller] = [
            ServiceAccountController(cp, inf[("v1", "Namespace")]),
            NamespaceController(cp, inf[("v1", "Namespace")]),
            GarbageCollector(cp, inf),
            ReplicaSetController(cp, inf[("apps/v1", "ReplicaSet")], inf[("v1", "Pod")]),
            ReplicaSetController(cp, inf[("v1", "ReplicationController")], inf[("v1", "Pod")]),
            DeploymentController(cp, inf[("apps/v1", "Deployment")], inf[("apps/v1", "ReplicaSet")]),
            JobController(cp, inf[("batch/v1", "Job")], inf[("v1", "Pod")]),
            PVCProtectionController(cp, inf[("v1", "PersistentVolumeClaim")], inf[("v1", "Pod")]),
        ]

    def start(self, timeout: float = 30.0) -> ControllerManager:
        for i in self.informers.values():
            i.start()
        deadline = time.monotonic() + timeout
        for i in self.informers.values():
            if not i.synced.wait(max(0.1, deadline - time.monotonic())):
                raise RuntimeError(f"informer {i.collection} not synced after {timeout:.0f}s")
        for c in self.controllers:
            c.start()
        return self

    def stop(self) -> None:
        for c in self.controllers:  # all told at once, then each waited for
            c.signal_stop()
        for i in self.informers.values():
            i.signal_stop()
        for c in self.controllers:
            c.stop()
        for i in self.informers.values():
            i.stop()

    def errors(self) -> Iterable[str]:
        for c in self.controllers:
            for e in c.errors:
                yield f"{c.name}: {e}"
