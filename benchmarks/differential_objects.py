"""The world's objects beyond Node, Queue, PodGroup and Pod that Volcano v1.15.1 reads and v1.7.0
did not (issue 33 item 3), for the differential runs of ``benchmarks/differential.py``:

* **Scheduling gates** (``spec.schedulingGates``) on some pending pods: vc-scheduler v1.15.1
  never places a gated pod (allocate, backfill, preempt, reclaim skip ``SchGated`` tasks) and
  leaves a gated pod's requests out of what its admitted job reserves in its queue
  (``DeductSchGatedResources``). Some gates stay; some (``lift``) the harness lifts once both
  schedulers have settled, and both settle again: the same state in both when those pods become
  schedulable, so the outcome does not hang on when the gate went. The gate is not Volcano's own
  (``scheduling.volcano.sh/queue-allocation-gate``, which only matters with the feature
  ``SchedulingGatesQueueAdmission``, off by default, and its webhook).
* **PersistentVolumeClaims** on some pending pods: a claim already bound to a local PV (the
  PV's node affinity pins the pod to one node through VolumeBinding), or a claim of a
  ``WaitForFirstConsumer`` class of static local PVs (the scheduler picks the smallest PV that
  fits on the chosen node and writes its ``claimRef``; the PV controller then binds the claim,
  and only then is the pod bound). The PV controller is the real one: kube-controller-manager
  with only ``persistentvolume-binder-controller``, started for a world with such claims once its
  objects are made, stopped at the next reset (:func:`prepare`). Both schedulers run with ``--ignored-provisioners
  kubernetes.io/no-provisioner`` (as Volcano's own e2e runs vc-scheduler for volumes), so that
  the claims of the no-provisioner class are not counted against CSI attach limits the nodes do
  not publish.
* **PodDisruptionBudgets** with the ``pdb`` plugin, in worlds that preempt or reclaim: budgets
  with an integer ``minAvailable`` over running jobs' pods (labelled ``job: <name>``), their
  status as the disruption controller writes it for pods without a controller
  (``disruptionsAllowed`` = ready pods − minAvailable). No disruption controller runs, so the
  status stays as written while schedulers evict (both schedulers see the same budgets; a live
  controller would lower them at its own pace, which no comparison survives). The plugin runs
  with ``countSessionEvictions: false``: Volcano's rule (see plugins/pdb.py; seed 3168).
* **A ResourceQuota** on ``cpu`` in the worlds' namespace, with the ``resourcequota`` plugin
  (its JobEnqueueable: ``status.used`` + the PodGroup's ``minResources`` within ``status.hard``),
  drawn only where every pod asks for cpu (the quota admission takes no other pod) and at least
  as large as all pods ask for (the admission counts each pod as created, and refuses one over
  the limit). The plane writes the status as the quota controller first does (``hard``, nothing
  used); the admission then adds every pod, and ``used`` is written again once all are created
  (settle_quota: the admission's own view of the quota may lag); no quota controller runs, so
  ``used`` stays while pods are evicted, in both planes and in the replay.

Each feature is drawn from a stream of its own (``random.Random(f"v1.15-objects-<part>-{seed}")``),
so every other draw of a seed stays as it was. Everything drawn lives in ``World.objects`` (JSON); :func:`decorate`
turns it into manifests (the same for both control planes and for the in-process replay),
:func:`populate_object` creates them with the status their controllers would have written,
:func:`reset` removes them between worlds, and :func:`after_session` plays the PV controller in
the in-process replay.
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from controlplane import Api

    from differential import Plane, PodSpec, World

NS = "diff"
GATE = "example.com/hold"
WFFC_CLASS = "diff-local"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
SCHEDULER_ARGS = ("--ignored-provisioners", NO_PROVISIONER)
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
JOB_LABEL = "job"
SC_API = "/apis/storage.k8s.io/v1/storageclasses"
PV_API = "/api/v1/persistentvolumes"
PVC_API = f"/api/v1/namespaces/{NS}/persistentvolumeclaims"
PDB_API = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets"
QUOTA_API = f"/api/v1/namespaces/{NS}/resourcequotas"
QUOTA = "diff-quota"
KCM_CONTROLLERS = "persistentvolume-binder-controller"

# Shares of worlds drawing each feature (independent draws).
GATES_SHARE = 0.3
VOLUMES_SHARE = 0.3
PDB_SHARE = 0.4  # of the worlds that preempt or reclaim
QUOTA_SHARE = 0.3  # of the worlds where every pod asks for cpu (a cpu quota admits no other pod)


# ------------------------------------------------------------------------------------------
# Drawing


def draw(world: World) -> None:
    """Draw gates (some lifted mid-run), claims, budgets and a quota into ``world.objects``, and the
    pdb and resourcequota plugins into its config where drawn."""
    def stream(part: str) -> random.Random:  # one per feature: each draws as if alone
        return random.Random(f"v1.15-objects-{part}-{world.seed}")

    objects: dict[str, Any] = {}
    rng = stream("gates")
    pending = [p for p in world.pods if p.node is None]
    if pending and rng.random() < GATES_SHARE:
        gates: dict[str, list[str]] = {}
        for job in world.jobs:
            members = [p for p in world.pods_of(job.name) if p.node is None]
            if members and rng.random() < 0.5:
                for p in rng.sample(members, rng.randint(1, len(members))):
                    gates[p.name] = [GATE]
        if gates:
            objects["gates"] = gates
            # Some gates lifted by the harness once both schedulers have settled (then they
            # settle again): the same state in both when the pods become schedulable.
            lift = sorted(p for p in gates if rng.random() < 0.4)
            if lift:
                objects["lift"] = lift
    rng = stream("volumes")
    if pending and rng.random() < VOLUMES_SHARE:
        vols = _draw_volumes(rng, world, pending, set(objects.get("gates", {})))
        if vols["bound"] or vols["wffc"]:
            objects["volumes"] = vols
    conf = yaml.safe_load(world.config)
    actions = {a.strip() for a in conf["actions"].split(",")}
    running = [j for j in world.jobs if j.running]
    rng = stream("pdb")
    if actions & {"preempt", "reclaim"} and running and rng.random() < PDB_SHARE:
        pdbs = []
        for job in running:
            if rng.random() < 0.6:
                n = len(world.pods_of(job.name))
                pdbs.append({"job": job.name, "minAvailable": rng.randint(0, n), "pods": n})
        if pdbs:
            objects["pdbs"] = pdbs
            # In the first tier its empty answer leaves victims to the next tier's plugins (as
            # Volcano's Preemptable/Reclaimable do); in the last it has the final word.
            # countSessionEvictions: false — Volcano's count-down from disruptionsAllowed on
            # every call (tidesched's default also takes off what the session evicted).
            conf["tiers"][rng.choice([0, 0, -1])]["plugins"].append(
                {"name": "pdb", "arguments": {"countSessionEvictions": False}})
            world.config = yaml.safe_dump(conf, sort_keys=False)
    rng = stream("quota")
    if all(p.cpu for p in world.pods) and rng.random() < QUOTA_SHARE:
        # The quota's admission counts every pod as it is created, so ``hard`` is at least what
        # all pods ask for; above that, room for some of what pending PodGroups' minResources ask.
        used = sum(p.cpu for p in world.pods)
        asked = sum(_milli(j.min_resources.get("cpu", "0")) for j in world.jobs if j.min_resources and not j.running)
        objects["quota"] = {"cpu": used + int(asked * rng.choice([0.0, 0.25, 0.5, 0.75])) // 100 * 100}
        conf["tiers"][-1]["plugins"].append({"name": "resourcequota"})
        world.config = yaml.safe_dump(conf, sort_keys=False)
    if objects:
        world.objects = objects


def _milli(cpu: str) -> int:
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


def _draw_volumes(rng: random.Random, world: World, pending: list[PodSpec], gated: set[str]) -> dict[str, Any]:
    """Claims bound to a node's PV (``bound``: pod → node), claims of the WaitForFirstConsumer
    class (``wffc``: pod → size in Gi) and that class's PVs (``pvs``: name → [node, size Gi];
    sizes all different, so that the smallest fitting PV is never a tie)."""
    from differential import static_fit

    bound: dict[str, str] = {}
    wffc: dict[str, int] = {}
    for p in pending:
        if p.name in gated or rng.random() >= 0.4:
            continue
        fits = [n.name for n in world.nodes if static_fit(p, n)]
        if fits and rng.random() < 0.4:
            bound[p.name] = rng.choice(fits)
        else:
            wffc[p.name] = rng.choice([1, 2, 4])
    pvs: dict[str, list[Any]] = {}
    if wffc:
        sizes = rng.sample(range(1, 9), min(8, rng.randint(1, len(wffc) + 2)))
        for i, size in enumerate(sizes):
            pvs[f"pv-local-{i}"] = [rng.choice(world.nodes).name, size]
    return {"bound": bound, "wffc": wffc, "pvs": pvs}


def pinned_node(world: World, pod: str) -> str | None:
    """The node a pod's bound claim's PV pins it to, if any."""
    return ((world.objects or {}).get("volumes") or {}).get("bound", {}).get(pod)


def needs_pv_controller(world: World) -> bool:
    return bool(((world.objects or {}).get("volumes") or {}).get("wffc"))


# ------------------------------------------------------------------------------------------
# Manifests


def _claim_name(pod: str) -> str:
    return f"{pod}-data"


def _pv(name: str, node: str, size: int, cls: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": cls,
            "capacity": {"storage": f"{size}Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "local": {"path": f"/mnt/{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
        },
        "status": {"phase": "Available"},
    }


def _pvc(name: str, size: int, cls: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": f"{size}Gi"}}},
        "status": {"phase": "Pending"},
    }


def _bind(pv: dict[str, Any], pvc: dict[str, Any]) -> None:
    """What the PV controller leaves on a PV and the claim bound to it."""
    md = pvc["metadata"]
    # The uid as the in-process replay gives it (namespace/name); populate_object writes the real
    # one: the PV controller takes a bound claim whose PV names no uid or another one for Lost.
    pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": md["namespace"],
                              "name": md["name"], "uid": md.get("uid") or f"{md['namespace']}/{md['name']}"}
    pv["status"] = {"phase": "Bound"}
    pvc["spec"]["volumeName"] = pv["metadata"]["name"]
    md.setdefault("annotations", {}).update({BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"})
    pvc["status"] = {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": dict(pv["spec"]["capacity"])}


def storage_manifests(world: World) -> list[dict[str, Any]]:
    """StorageClass, PVs and claims of the world, claims already bound as the PV controller
    leaves them (created before the pods)."""
    vols = (world.objects or {}).get("volumes")
    if not vols:
        return []
    out: list[dict[str, Any]] = []
    if vols["wffc"]:
        out.append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": WFFC_CLASS},
                    "provisioner": NO_PROVISIONER, "volumeBindingMode": "WaitForFirstConsumer"})
        for name, (node, size) in sorted(vols["pvs"].items()):
            out.append(_pv(name, node, size, WFFC_CLASS))
    for pod, node in sorted(vols["bound"].items()):
        pv = _pv(f"pv-{pod}", node, 1, "")
        pvc = _pvc(_claim_name(pod), 1, "")
        _bind(pv, pvc)
        out += [pvc, pv]  # the claim first: its PV names its uid
    for pod, size in sorted(vols["wffc"].items()):
        out.append(_pvc(_claim_name(pod), size, WFFC_CLASS))
    return out


def pdb_manifests(world: World) -> list[dict[str, Any]]:
    out = []
    for b in (world.objects or {}).get("pdbs") or []:
        # Every pod of a running job is Ready when the world starts (populate).
        allowed = max(0, b["pods"] - b["minAvailable"])
        out.append({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": f"pdb-{b['job']}", "namespace": NS},
            "spec": {"minAvailable": b["minAvailable"], "selector": {"matchLabels": {JOB_LABEL: b["job"]}}},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": b["pods"],
                       "desiredHealthy": b["minAvailable"], "expectedPods": b["pods"], "observedGeneration": 1},
        })
    return out


def quota_manifests(world: World) -> list[dict[str, Any]]:
    """The namespace's ResourceQuota on cpu, ``status.used`` as the quota admission leaves it once
    every pod of the world is created (no quota controller runs: it stays so while pods go)."""
    from differential import quantity_cpu

    quota = (world.objects or {}).get("quota")
    if not quota:
        return []
    hard = {"cpu": quantity_cpu(quota["cpu"])}
    return [{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": QUOTA, "namespace": NS},
             "spec": {"hard": hard},
             "status": {"hard": hard, "used": {"cpu": quantity_cpu(sum(p.cpu for p in world.pods))}}}]


def decorate(world: World, manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``manifests`` (the world's, in creation order) with its gates, claims and budgets: pods
    given their gates, volumes and labels; storage objects and budgets created before the pods."""
    objects = world.objects or {}
    if not objects:
        return manifests
    gates = objects.get("gates") or {}
    vols = objects.get("volumes") or {}
    claimed = set(vols.get("bound") or ()) | set(vols.get("wffc") or ())
    labelled = {b["job"] for b in objects.get("pdbs") or []}
    job_of = {p.name: p.job for p in world.pods}
    out: list[dict[str, Any]] = []
    inserted = False
    for m in manifests:
        if m["kind"] == "Pod":
            if not inserted:
                out += storage_manifests(world) + pdb_manifests(world) + quota_manifests(world)
                inserted = True
            name = m["metadata"]["name"]
            if name in gates:
                m["spec"]["schedulingGates"] = [{"name": g} for g in gates[name]]
            if name in claimed:
                m["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": _claim_name(name)}}]
            job = job_of[name]
            if job in labelled:
                m["metadata"]["labels"] = {JOB_LABEL: job}
        out.append(m)
    if not inserted:
        out += storage_manifests(world) + pdb_manifests(world) + quota_manifests(world)
    return out


def lift_gates(api: Api, world: World, lifted: set[str]) -> bool:
    """Lift the gates the world lifts once settled (the first time only); True if it did."""
    todo = [p for p in (world.objects or {}).get("lift") or () if p not in lifted]
    for pod in todo:
        api.patch(f"/api/v1/namespaces/{NS}/pods/{pod}", {"spec": {"schedulingGates": None}})
        lifted.add(pod)
    return bool(todo)


def lift_local_gates(world: World, pods: dict[str, dict[str, Any]]) -> bool:
    """The same in the in-process replay: ``pods`` are its pod manifests by name."""
    # A lifted pod may since have been bound and evicted (gone from the replay).
    todo = [p for p in (world.objects or {}).get("lift") or () if p in pods and pods[p]["spec"].get("schedulingGates")]
    for pod in todo:
        del pods[pod]["spec"]["schedulingGates"]
    return bool(todo)


# ------------------------------------------------------------------------------------------
# A control plane


def populate_object(api: Api, m: dict[str, Any]) -> bool:
    """Create ``m`` if it is one of this module's kinds (with its status, written through the
    status subresource as its controller would); False for other kinds."""
    path = {"StorageClass": SC_API, "PersistentVolume": PV_API, "PersistentVolumeClaim": PVC_API,
            "PodDisruptionBudget": PDB_API, "ResourceQuota": QUOTA_API}.get(m["kind"])
    if path is None:
        return False
    status = m.pop("status", None)
    ref = m.get("spec", {}).get("claimRef") if m["kind"] == "PersistentVolume" else None
    if ref:
        ref["uid"] = api.get(f"/api/v1/namespaces/{ref['namespace']}/persistentvolumeclaims/{ref['name']}")[
            "metadata"]["uid"]
    if m["kind"] == "ResourceQuota":
        # What the quota controller writes first; the admission adds each pod as it is created.
        status = {"hard": status["hard"], "used": {"cpu": "0"}}
    api.post(path, m)
    if status:
        api.patch(f"{path}/{m['metadata']['name']}/status", {"status": status})
    return True


def settle_quota(api: Api, world: World) -> None:
    """The quota's ``used`` written again once every pod is created, as the admission leaves it
    (the world's sum, as the replay has it). The API server's quota admission reads quotas from
    its own informer: a pod created before that informer has seen ``status.hard`` is admitted
    uncharged, and ``used`` ends lower than the replay's (seed 3030 in one CI run: tidesched saw
    room for a gang the replay and vc-scheduler's plane did not)."""
    for m in quota_manifests(world):
        api.patch(f"{QUOTA_API}/{m['metadata']['name']}/status", {"status": {"used": m["status"]["used"]}})


def prepare(plane: Plane, world: World) -> None:
    """Once the world is populated: settle the quota's ``used`` (settle_quota), and start the PV
    controller on ``plane`` if the world needs one, stopped again at the plane's reset. Started
    after the objects, its informers list every claim and PV before it syncs any: running while
    they are created one by one, it finds a bound claim whose PV it has not seen yet and marks the
    claim Lost (until its PV arrives), which keeps the pod off every node in whichever scheduler
    looks at that moment."""
    settle_quota(plane.api, world)
    if needs_pv_controller(world) and getattr(plane, "pv_controller", None) is None:
        plane.pv_controller = PVController(plane)


def close(plane: Plane) -> None:
    kcm = getattr(plane, "pv_controller", None)
    if kcm is not None:
        kcm.stop()
        plane.pv_controller = None


class PVController:
    """kube-controller-manager running only the PV binder, on a plane's control plane."""

    def __init__(self, plane: Plane) -> None:
        from kcm import KubeControllerManager, find_kcm

        binary, missing = find_kcm()
        if binary is None:
            raise FileNotFoundError(missing)
        workdir = plane.cp.workdir / "kcm"
        workdir.mkdir(parents=True, exist_ok=True)
        self.kcm = KubeControllerManager(plane.cp, binary, workdir)
        self.kcm.cmd = [f"--controllers={KCM_CONTROLLERS}" if a == "--controllers=*" else a for a in self.kcm.cmd]
        # Not KubeControllerManager.start: it waits for a ServiceAccount, which this one makes none of.
        env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        with open(self.kcm.log, "ab") as out:
            self.kcm.popen = subprocess.Popen(self.kcm.cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True)
        self._wait_ready(plane.api)

    def _wait_ready(self, api: Api, timeout: float = 60.0) -> None:
        """Ready once it has made a new PV Available (a probe PV, removed again)."""
        probe = _pv("pv-controller-probe", "nowhere", 1, "diff-probe")
        probe.pop("status")
        api.post(PV_API, probe)
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if not self.kcm.alive():
                    raise RuntimeError(f"kube-controller-manager exited:\n{self.kcm.tail()}")
                got = api.get(f"{PV_API}/pv-controller-probe")
                if (got.get("status") or {}).get("phase") == "Available":
                    return
                time.sleep(0.2)
            raise RuntimeError(f"the PV controller made no PV Available in {timeout:.0f}s:\n{self.kcm.tail()}")
        finally:
            _force_delete(api, f"{PV_API}/pv-controller-probe")

    def stop(self) -> None:
        self.kcm.stop()


def _force_delete(api: Api, path: str) -> None:
    """Delete, protection finalizers removed first (no protection controller runs)."""
    from controlplane import ApiError

    try:
        api.patch(path, {"metadata": {"finalizers": None}})
        api.delete(path)
    except ApiError as exc:
        if exc.status != 404:
            raise


def reset(api: Api) -> bool:
    """Remove the objects of this module's kinds; True once none is left."""
    left = False
    for path, items in ((QUOTA_API, api.items(QUOTA_API)), (PDB_API, api.items(PDB_API)), (PVC_API, api.items(PVC_API)),
                        (PV_API, api.items(PV_API)), (SC_API, api.items(SC_API))):
        for it in items:
            left = True
            _force_delete(api, f"{path}/{it['metadata']['name']}")
    return not left


# ------------------------------------------------------------------------------------------
# The in-process replay


def after_session(objs: list[dict[str, Any]], decisions: Any) -> None:
    """What the PV controller does after a session of the replay: each PV a bind gave a claim
    (``claimRef``) is bound to it, the claim to the PV."""
    plans = getattr(decisions, "volume_bindings", None) or {}
    if not plans:
        return
    pvs = {m["metadata"]["name"]: m for m in objs if m["kind"] == "PersistentVolume"}
    pvcs = {f"{m['metadata']['namespace']}/{m['metadata']['name']}": m
            for m in objs if m["kind"] == "PersistentVolumeClaim"}
    for pod, plan in plans.items():
        if pod not in decisions.bound:
            continue
        for pv, claim, _uid in plan.static:
            _bind(pvs[pv], pvcs[claim])
