"""The DRA oracle (issue 35): random DRA worlds through kube-scheduler 1.36, ``tidesched run`` and
vc-scheduler v1.15.1, each on a real control plane of its own, compared pod by pod.

A *world* (``random.Random(seed)``) is a few nodes whose GPUs a driver publishes as
ResourceSlices (model, NUMA node and memory as attributes and capacity; sometimes a node
selector slice of shared devices), DeviceClasses (every GPU; GPUs with at least 40Gi by a
capacity selector), ResourceClaimTemplates (one GPU; one big GPU; two GPUs on one NUMA node by
``matchAttribute``; ``firstAvailable`` H100 else any; an L4 by model) and pods each naming one
template — some share a ResourceClaim by name. Every column runs the same world in the same
order on its own control plane with kube-controller-manager's resourceclaim controller (it
makes the claims from the templates); kube-scheduler and tidesched start once every claim is
made (each sees the whole world at once) and stop after it; kube-scheduler takes pods of
``default-scheduler``;
tidesched (its built-in default config, Volcano's default, as ``tidesched run`` starts; or
``--tidesched-conf ci``: Volcano v1.15.1's CI config) and vc-scheduler v1.15.1 (its CI config,
``predicate.DynamicResourceAllocationEnable: true``, less ``proportion``, with which it binds no
pod that has a claim; started before any pod exists, as its README asks) take ``volcano`` pods,
each in a PodGroup of one. Once pods
and claims have not changed for ``--quiet`` seconds the outcome is read.

Each column's outcome is checked on its own — **valid**: every bound pod's claims allocated and
reserved for it, every device on the pod's node, selected by its request (class and request
selectors, evaluated again), the right count, constraints kept, no device in two claims — and
**maximal**: tidesched's core, run on the final objects, binds nothing more (no pending pod
could still have been placed). Then tidesched against kube-scheduler:

* *match*: the same pods bound;
* *explained*: both valid and maximal, different pods bound — placement choices differ (node
  scores and the order pods arrive), which the issue allows ("device choice among equals may
  differ: compare validity and counts");
* *unexplained*: tidesched invalid or not maximal, or a pod bound by both on the same node to
  a claim whose devices there are the only answer (as many matching devices as asked) with
  other devices than kube-scheduler's.

vc-scheduler is a third column: its validity, maximality and count are reported, not judged.

    .venv/bin/python benchmarks/dra_differential.py --worlds 200 --seed 1 --out dra-diff-200
    .venv/bin/python benchmarks/dra_differential.py --worlds 3 --no-volcano   # a quick look

Prints one line per world and the totals (pods bound per column, matches, explained,
unexplained); exit code 1 when anything is unexplained. Mismatching worlds are written to
``--out``/seed-N/ (objects, outcomes, verdict, the schedulers' logs).
"""

from __future__ import annotations

import argparse
import copy

import httpx
import json
import random
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _dir in (str(ROOT / "tests" / "e2e"), str(ROOT / "src")):
    if _dir not in sys.path:
        sys.path.append(_dir)

from cluster import TIDESCHED, VOLCANO_115_CI_CONF, create_node, ensure_namespace, install_deploy  # noqa: E402
from controlplane import Api, ApiError, ControlPlane, _Proc, find_assets, free_port  # noqa: E402
from resourceclaim_kcm import kcm_binary, start_resourceclaim_controller  # noqa: E402

from tidesched.framework.config import DEFAULT_CONFIG_TEXT  # noqa: E402
from tidesched.model.dra.objects import ALL  # noqa: E402
from tidesched.model.snapshot import build_snapshot  # noqa: E402
from tidesched.model.state import build_state  # noqa: E402
from tidesched.scheduler import config_from_text, schedule_manifests  # noqa: E402

RES = "/apis/resource.k8s.io/v1"
PG = "/apis/scheduling.volcano.sh/v1beta1"
DRIVER = "gpu.example.com"
GROUP_NAME = "scheduling.k8s.io/group-name"
VC_VERBOSITY = "1"
# vc-scheduler's config: v1.15.1's CI config less proportion. With proportion it binds no pod with
# a claim (every session: "Queue <default> is overused when considering task", its allocatable
# check refusing), measured on these worlds; without it, it allocates claims.
VC_CONF = VOLCANO_115_CI_CONF.replace("  - name: proportion\n", "")
# tidesched's config (--tidesched-conf): its built-in default (Volcano's default config), as
# ``tidesched run`` starts without --scheduler-conf, or v1.15.1's CI config.
TIDESCHED_CONF = {"default": DEFAULT_CONFIG_TEXT, "ci": VOLCANO_115_CI_CONF}
COLUMNS = ("kube-scheduler", "tidesched", "vc-scheduler")
MODELS = {"L4": ["24Gi"], "A100": ["40Gi", "80Gi"], "H100": ["80Gi"]}
REPLAY_CONFIG = config_from_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - {name: gang}\n  - {name: predicates}\n')


# -- worlds ---------------------------------------------------------------------------------


def make_world(seed: int) -> dict[str, Any]:
    """The objects of world ``seed``: cluster-scoped ones named after it, the rest in its namespace."""
    rng = random.Random(seed)
    ns, w = f"w{seed}", f"w{seed}"
    sel = lambda e: [{"cel": {"expression": e}}]  # noqa: E731
    classes = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"gpu-{w}"},
         "spec": {"selectors": sel(f'device.driver == "{DRIVER}"')}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"big-{w}"},
         "spec": {"selectors": sel(f'device.driver == "{DRIVER}" && '
                                   f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0')}},
    ]
    nodes, slices = [], []
    for i in range(rng.randint(2, 5)):
        name = f"{w}-n{i}"
        nodes.append({"name": name, "labels": {"rack": f"r{i % 2}"}})
        devices = []
        for j in range(rng.choice([0, 1, 2, 2, 4, 4])):
            model = rng.choice(sorted(MODELS))
            devices.append({"name": f"gpu-{j}", "attributes": {"model": {"string": model}, "numa": {"int": j // 2}},
                            "capacity": {"memory": {"value": rng.choice(MODELS[model])}}})
        if devices:
            slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{name}-gpus"},
                           "spec": {"driver": DRIVER, "nodeName": name, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                                    "devices": devices}})
    if rng.random() < 0.3:  # GPUs any node of rack r0 reaches (a node selector slice)
        slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{w}-rack0"},
                       "spec": {"driver": DRIVER, "pool": {"name": f"{w}-rack0", "generation": 1, "resourceSliceCount": 1},
                                "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r0"]}]}]},
                                "devices": [{"name": "remote-0", "attributes": {"model": {"string": "A100"}, "numa": {"int": 9}},
                                             "capacity": {"memory": {"value": "80Gi"}}}]}})

    def template(name: str, devices: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": ns},
                "spec": {"spec": {"devices": devices}}}

    one = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": f"gpu-{w}"}}]}
    templates = [
        template("one", one),
        template("big", {"requests": [{"name": "gpu", "exactly": {"deviceClassName": f"big-{w}"}}]}),
        template("pair", {"requests": [{"name": "gpus", "exactly": {"deviceClassName": f"gpu-{w}", "count": 2}}],
                          "constraints": [{"matchAttribute": f"{DRIVER}/numa"}]}),
        template("prefer-h100", {"requests": [{"name": "gpu", "firstAvailable": [
            {"name": "h100", "deviceClassName": f"gpu-{w}", "selectors": sel(f'device.attributes["{DRIVER}"].model == "H100"')},
            {"name": "any", "deviceClassName": f"gpu-{w}"}]}]}),
        template("l4", {"requests": [{"name": "gpu", "exactly": {"deviceClassName": f"gpu-{w}",
                                                                 "selectors": sel(f'device.attributes["{DRIVER}"].model == "L4"')}}]}),
    ]
    claims, pods = [], []
    n_pods = rng.randint(3, 9)
    shared = 0
    i = 0
    while i < n_pods:
        if rng.random() < 0.12 and i + 1 < n_pods:  # two pods sharing one claim by name
            cname = f"shared-{shared}"
            shared += 1
            claims.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": cname, "namespace": ns},
                           "spec": {"devices": one}})
            for _ in range(2):
                pods.append({"name": f"p{i}", "claim": {"resourceClaimName": cname}})
                i += 1
            continue
        kind = rng.choices(["one", "big", "pair", "prefer-h100", "l4"], weights=[5, 2, 2, 2, 1])[0]
        pods.append({"name": f"p{i}", "claim": {"resourceClaimTemplateName": kind}})
        i += 1
    return {"seed": seed, "namespace": ns, "classes": classes, "nodes": nodes, "slices": slices,
            "templates": templates, "claims": claims, "pods": pods}


def pod_object(world: dict[str, Any], p: dict[str, Any], scheduler: str) -> dict[str, Any]:
    ns = world["namespace"]
    md: dict[str, Any] = {"name": p["name"], "namespace": ns}
    if scheduler == "volcano":
        md["annotations"] = {GROUP_NAME: p["name"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": {
        "schedulerName": scheduler,
        "resourceClaims": [{"name": "gpu", **p["claim"]}],
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "claims": [{"name": "gpu"}]}}],
    }}


# -- a column: one scheduler on its own control plane ----------------------------------------


@dataclass
class Column:
    which: str
    cp: ControlPlane
    procs: list[_Proc] = field(default_factory=list)
    log: Path | None = None
    last: dict[str, Any] | None = None  # the world now in the cluster
    # kube-scheduler and tidesched run per world, started once its claims exist (so each sees the
    # whole world at once, not pods in the order kube-controller-manager made their claims);
    # vc-scheduler runs throughout (it must start before pods with claims exist).
    per_world: _Proc | None = None
    ready_url: str = ""  # tidesched's /readyz: its informers synced, sessions running

    def start_world(self) -> None:
        if self.per_world is None:
            return
        self.per_world.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not self.per_world.alive():
                raise RuntimeError(f"{self.which} exited:\n{self.per_world.tail()}")
            if not self.ready_url:
                time.sleep(1.0)  # kube-scheduler: its first pass over the pods starts at once
                return
            try:
                if httpx.get(self.ready_url, trust_env=False, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.which} not ready in 60 s:\n{self.per_world.tail()}")

    def stop_world(self) -> None:
        if self.per_world is not None:
            self.per_world.stop()

    def wait_claims(self, world: dict[str, Any], timeout: float = 30.0) -> None:
        """Until kube-controller-manager made every pod's claim from its template."""
        ns, deadline = world["namespace"], time.monotonic() + timeout
        wanted = {p["name"] for p in world["pods"] if "resourceClaimTemplateName" in p["claim"]}
        while time.monotonic() < deadline:
            made = {p["metadata"]["name"] for p in self.api.items(f"/api/v1/namespaces/{ns}/pods")
                    if (p.get("status") or {}).get("resourceClaimStatuses")}
            if wanted <= made:
                return
            time.sleep(0.2)

    @property
    def api(self) -> Api:
        return self.cp.admin

    def stop(self) -> None:
        self.stop_world()
        for p in reversed(self.procs):
            p.stop()
        self.cp.stop()

    def clear(self) -> None:
        """Remove the last world: its pods at once, its claims (finalizers dropped), its devices and nodes."""
        world, self.last = self.last, None
        if world is None:
            return
        api, ns = self.api, world["namespace"]
        for p in api.items(f"/api/v1/namespaces/{ns}/pods"):
            api.delete(f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}", gracePeriodSeconds=0)
        for c in api.items(f"{RES}/namespaces/{ns}/resourceclaims"):
            path = f"{RES}/namespaces/{ns}/resourceclaims/{c['metadata']['name']}"
            try:
                api.patch(path, {"metadata": {"finalizers": None}})
                api.delete(path)
            except ApiError:
                pass
        for s in world["slices"]:
            _gone(lambda: api.delete(f"{RES}/resourceslices/{s['metadata']['name']}"))
        for c in world["classes"]:
            _gone(lambda: api.delete(f"{RES}/deviceclasses/{c['metadata']['name']}"))
        for n in world["nodes"]:
            _gone(lambda: api.delete(f"/api/v1/nodes/{n['name']}"))

    def create(self, world: dict[str, Any]) -> None:
        api, ns = self.api, world["namespace"]
        self.last = world
        ensure_namespace(api, ns)
        for c in world["classes"]:
            api.post(f"{RES}/deviceclasses", c)
        for n in world["nodes"]:
            create_node(api, n["name"], cpu="8", memory="32Gi", labels=n["labels"])
        for s in world["slices"]:
            api.post(f"{RES}/resourceslices", s)
        for t in world["templates"]:
            api.post(f"{RES}/namespaces/{ns}/resourceclaimtemplates", t)
        for c in world["claims"]:
            api.post(f"{RES}/namespaces/{ns}/resourceclaims", c)
        scheduler = "default-scheduler" if self.which == "kube-scheduler" else "volcano"
        for p in world["pods"]:
            if scheduler == "volcano":
                api.post(f"{PG}/namespaces/{ns}/podgroups", {
                    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": p["name"], "namespace": ns}, "spec": {"minMember": 1, "queue": "default"}})
            api.post(f"/api/v1/namespaces/{ns}/pods", pod_object(world, p, scheduler))

    def outcome(self, world: dict[str, Any], quiet: float, timeout: float) -> dict[str, Any]:
        """Pods' nodes and claims once nothing changed for ``quiet`` seconds (at most ``timeout``)."""
        ns = world["namespace"]
        deadline, last, since = time.monotonic() + timeout, None, time.monotonic()
        while True:
            pods = {p["metadata"]["name"]: p for p in self.api.items(f"/api/v1/namespaces/{ns}/pods")}
            claims = {c["metadata"]["name"]: c for c in self.api.items(f"{RES}/namespaces/{ns}/resourceclaims")}
            state = ({k: (p.get("spec") or {}).get("nodeName") for k, p in pods.items()},
                     {k: json.dumps(c.get("status") or {}, sort_keys=True) for k, c in claims.items()})
            if state != last:
                last, since = state, time.monotonic()
            elif time.monotonic() - since >= quiet or time.monotonic() > deadline:
                return {"pods": pods, "claims": claims}
            time.sleep(0.3)


def _gone(fn: Any) -> None:
    try:
        fn()
    except ApiError as exc:
        if exc.status != 404:
            raise


def start_column(which: str, assets: Path, kcm: Path, volcano: Path | None, workdir: Path, period: str,
                 tidesched_conf: str = "default") -> Column:
    cp = ControlPlane(assets, workdir=workdir)
    cp.start()
    col = Column(which, cp)
    try:
        col.procs.append(start_resourceclaim_controller(cp, kcm))
        log = workdir / f"{which}.log"
        col.log = log
        admin = cp.kubeconfig(workdir / "admin.kubeconfig", cp.admin_token, user="e2e-admin")
        if which == "kube-scheduler":
            conf = workdir / "kube-scheduler.yaml"
            conf.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                            f"clientConnection:\n  kubeconfig: {admin}\nleaderElection:\n  leaderElect: false\n")
            col.per_world = _Proc(which, [str(assets / "kube-scheduler"), f"--config={conf}", "--secure-port=0", "-v=2"], log)
            return col
        if which == "tidesched":
            install_deploy(cp.admin)
            conf = workdir / "tidesched.conf"
            conf.write_text(TIDESCHED_CONF[tidesched_conf])
            port = free_port()
            col.per_world = _Proc(which, [str(TIDESCHED), "run", f"--kubeconfig={admin}", f"--scheduler-conf={conf}",
                                          f"--schedule-period={period}", "-v=2", "--enable-healthz",
                                          f"--healthz-address=127.0.0.1:{port}"], log)
            col.ready_url = f"http://127.0.0.1:{port}/readyz"
            return col
        from volcano import install_volcano_crds, start_vc_scheduler  # noqa: PLC0415

        assert volcano is not None
        install_volcano_crds(cp.admin, volcano)
        conf = workdir / "vc-scheduler.conf"
        conf.write_text(VC_CONF)
        vc = start_vc_scheduler(cp, volcano, workdir, conf, args=(f"--schedule-period={period}", "-v=" + VC_VERBOSITY),
                                log_name=f"{which}.log", healthy_timeout=120.0)
        col.procs.append(vc)
        return col
    except BaseException:
        col.stop()
        raise


# -- judging an outcome ---------------------------------------------------------------------


def _world_objects(world: dict[str, Any], out: dict[str, Any]) -> list[dict[str, Any]]:
    """The world as tidesched's core reads it, with the outcome's pods (as ``volcano`` pods in
    PodGroups of one) and claims."""
    objs: list[dict[str, Any]] = [{"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}}]
    objs += copy.deepcopy(world["classes"]) + copy.deepcopy(world["slices"]) + copy.deepcopy(world["templates"])
    for n in world["nodes"]:
        objs.append({"kind": "Node", "metadata": {"name": n["name"], "labels": n["labels"]},
                     "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}})
    for c in out["claims"].values():
        objs.append({**c, "kind": "ResourceClaim"})
    for name, p in out["pods"].items():
        pod = copy.deepcopy(p)
        pod["kind"] = "Pod"
        pod["spec"]["schedulerName"] = "volcano"
        pod.setdefault("metadata", {}).setdefault("annotations", {})[GROUP_NAME] = name
        pod["status"] = {**(pod.get("status") or {}), "phase": "Running" if pod["spec"].get("nodeName") else "Pending"}
        objs.append(pod)
        objs.append({"kind": "PodGroup", "metadata": {"name": name, "namespace": world["namespace"]},
                     "spec": {"minMember": 1}, "status": {"phase": "Inqueue"}})
    return objs


def judge(world: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Bound pods, and whether the outcome is valid and maximal (see the module docstring)."""
    problems: list[str] = []
    objs = _world_objects(world, out)
    snap = build_snapshot(objs, strict_kinds=False)
    state = build_state(snap, ("volcano",))
    ledger = state.table.dra
    index = ledger.index
    ns = world["namespace"]
    bound = {name: (p.get("spec") or {}).get("nodeName") for name, p in out["pods"].items() if (p.get("spec") or {}).get("nodeName")}
    holders: dict[tuple[str, str, str], str] = {}
    devices_of: dict[str, dict[str, list[str]]] = {}
    for key, claim in snap.dra.claims.items():
        if claim.allocation is None:
            continue
        for d in claim.allocation.devices:
            if not d.admin_access and not d.share_id:
                if d.id in holders:
                    problems.append(f"device {'/'.join(d.id)} in claims {holders[d.id]} and {key}")
                holders[d.id] = key
    for name, node in sorted(bound.items()):
        pod = next(p for p in snap.pods if p.meta.name == name)
        row = state.table.index.get(node)
        for pc in pod.claims:
            key = f"{ns}/{pc.claim_name}"
            claim = snap.dra.claims.get(key) if pc.claim_name else None
            if claim is None or claim.allocation is None:
                problems.append(f"{name} bound to {node} with claim {pc.describe()} not allocated")
                continue
            if not claim.reserved_for_pod(pod.meta.uid):
                problems.append(f"{name}: claim {key} not reserved for it")
            reach = set(index.reachable(row).tolist()) if row is not None else set()
            per_request: dict[str, list[int]] = {}
            for d in claim.allocation.devices:
                i = index.ids.get(d.id)
                if i is None or i not in reach:
                    problems.append(f"{name} on {node}: device {'/'.join(d.id)} is not on that node")
                    continue
                per_request.setdefault(d.request, []).append(i)
            devices_of[name] = {r: sorted(index.entries[i].device.name for i in v) for r, v in per_request.items()}
            for req in claim.spec.requests:
                subs = [s for s in req.alternatives if s.name in per_request]
                if len(subs) != 1:
                    problems.append(f"{name}: claim {key} request {req.name} has {len(subs)} alternatives allocated")
                    continue
                sub = subs[0]
                got = per_request[sub.name]
                match, _err = index.matching(sub)
                if not all(match[i] for i in got):
                    problems.append(f"{name}: claim {key} request {sub.name}: a device its selectors do not select")
                want = len([i for i in reach if match[i]]) if sub.mode == ALL else sub.count
                if len(got) != want:
                    problems.append(f"{name}: claim {key} request {sub.name}: {len(got)} devices, {want} asked")
            for con in claim.spec.constraints:
                values = {repr(index.entries[i].device.attributes.get(con.attribute.split("/", 1)[1]))
                          for v in per_request.values() for i in v}
                if not con.distinct and len(values) > 1:
                    problems.append(f"{name}: claim {key} matchAttribute {con.attribute} differs: {values}")
    # Maximal: tidesched's core places nothing more on the final objects.
    _ssn, decisions = schedule_manifests(objs, REPLAY_CONFIG, now=0.0)
    more = sorted(k.split("/", 1)[1] for k in decisions.bound)
    return {"bound": bound, "devices": devices_of, "problems": problems, "placeable": more}


def unique_answer(world: dict[str, Any], out: dict[str, Any], pod: str, node: str) -> bool:
    """Whether the pod's claim has one possible answer on ``node``: one ExactCount request asking
    as many devices as match on that node at all."""
    objs = _world_objects(world, out)
    snap = build_snapshot(objs, strict_kinds=False)
    state = build_state(snap, ("volcano",))
    index = state.table.dra.index
    p = next(x for x in snap.pods if x.meta.name == pod)
    claim = snap.dra.claims.get(f"{world['namespace']}/{p.claims[0].claim_name}")
    if claim is None or len(claim.spec.requests) != 1 or claim.spec.requests[0].first_available:
        return False
    sub = claim.spec.requests[0].alternatives[0]
    match, _err = index.matching(sub)
    reach = index.reachable(state.table.index[node])
    return sub.mode != ALL and sub.count == int(match[reach].sum())


def verdict(world: dict[str, Any], outs: dict[str, dict[str, Any]], judged: dict[str, dict[str, Any]]) -> tuple[str, str]:
    ts, ks = judged["tidesched"], judged["kube-scheduler"]
    if ts["problems"]:
        return "unexplained", "tidesched invalid: " + "; ".join(ts["problems"][:3])
    if ts["placeable"]:
        return "unexplained", f"tidesched left placeable pods pending: {', '.join(ts['placeable'])}"
    for name, node in ts["bound"].items():
        if ks["bound"].get(name) == node and ts["devices"].get(name) != ks["devices"].get(name):
            if unique_answer(world, outs["tidesched"], name, node):
                return "unexplained", f"{name} on {node}: devices {ts['devices'].get(name)} where kube-scheduler's {ks['devices'].get(name)} are the only answer"
    if set(ts["bound"]) == set(ks["bound"]):
        return "match", ""
    why = f"tidesched {len(ts['bound'])} bound, kube-scheduler {len(ks['bound'])}"
    if ks["problems"] or ks["placeable"]:
        why += " (kube-scheduler's outcome " + ("invalid" if ks["problems"] else "not maximal") + ")"
    return "explained", f"both valid and maximal, different placements: {why}"


# -- the run --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worlds", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1, help="the first world's seed (worlds are seed, seed+1, ...)")
    ap.add_argument("--quiet", type=float, default=3.0, help="seconds without a change that end a world")
    ap.add_argument("--timeout", type=float, default=60.0, help="the longest a world may take per column")
    ap.add_argument("--period", default="200ms", help="tidesched's and vc-scheduler's --schedule-period")
    ap.add_argument("--no-volcano", action="store_true", help="leave out the vc-scheduler column")
    ap.add_argument("--tidesched-conf", choices=sorted(TIDESCHED_CONF), default="default",
                    help="tidesched's scheduler config: its built-in default, or Volcano v1.15.1's CI config")
    ap.add_argument("--out", type=Path, default=Path("dra-differential-out"))
    args = ap.parse_args(argv)

    assets, missing = find_assets(("kube-scheduler",))
    if assets is None:
        print(f"skipped: {missing}")
        return 0
    kcm = kcm_binary(assets)
    if kcm is None:
        print("skipped: no kube-controller-manager.xz beside the control plane")
        return 0
    volcano = None
    columns = [c for c in COLUMNS if not (args.no_volcano and c == "vc-scheduler")]
    if "vc-scheduler" in columns:
        volcano = _volcano_115()
        if volcano is None:
            print("vc-scheduler v1.15.1 not found (../shared/volcano-1.15): its column is left out")
            columns.remove("vc-scheduler")
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "columns"
    shutil.rmtree(work, ignore_errors=True)
    with ThreadPoolExecutor(len(columns)) as pool:
        started = list(pool.map(lambda c: start_column(c, assets, kcm, volcano, work / c, args.period, args.tidesched_conf),
                                columns))
    cols = dict(zip(columns, started))
    totals = {c: 0 for c in columns}
    counts = {"match": 0, "explained": 0, "unexplained": 0}
    lock = threading.Lock()
    try:
        for n in range(args.worlds):
            seed = args.seed + n
            world = make_world(seed)

            def run(col: Column) -> dict[str, Any]:
                col.clear()
                col.create(world)
                col.wait_claims(world)
                col.start_world()
                try:
                    return col.outcome(world, args.quiet, args.timeout)
                finally:
                    col.stop_world()

            with ThreadPoolExecutor(len(cols)) as pool:
                outs = dict(zip(cols, pool.map(run, cols.values())))
            judged = {c: judge(world, outs[c]) for c in cols}
            kind, why = verdict(world, outs, judged)
            with lock:
                counts[kind] += 1
                for c in cols:
                    totals[c] += len(judged[c]["bound"])
            cells = "  ".join(f"{c} {len(judged[c]['bound'])}/{len(world['pods'])}"
                              + ("!" if judged[c]["problems"] else "") + ("+" if judged[c]["placeable"] else "") for c in cols)
            print(f"world {seed}: {cells}  {kind}{': ' + why if why else ''}", flush=True)
            if kind != "match" or any(judged[c]["problems"] or judged[c]["placeable"] for c in cols):
                d = args.out / f"seed-{seed}"
                d.mkdir(parents=True, exist_ok=True)
                (d / "world.json").write_text(json.dumps(world, indent=1))
                (d / "judged.json").write_text(json.dumps({"verdict": kind, "why": why, **judged}, indent=1, default=str))
                for c in cols:
                    (d / f"{c}.outcome.json").write_text(json.dumps(outs[c], indent=1))
    finally:
        for col in cols.values():
            try:
                col.clear()
            except Exception:  # noqa: BLE001 - on the way out
                pass
            col.stop()
            if col.log is not None and col.log.exists():
                shutil.copy(col.log, args.out / col.log.name)
    print(f"\n{args.worlds} worlds: {counts['match']} match, {counts['explained']} explained, {counts['unexplained']} unexplained")
    print("pods bound in all: " + ", ".join(f"{c} {totals[c]}" for c in cols)
          + "  (! = invalid allocation, + = a placeable pod left pending)")
    return 1 if counts["unexplained"] else 0


def _volcano_115() -> Path | None:
    shared = ROOT.parent / "shared" / "volcano-1.15"
    if not (shared / "unpack").exists():
        return None
    import subprocess  # noqa: PLC0415

    dest = Path.home() / ".cache" / "volcano-1.15.1"
    subprocess.run(["sh", str(shared / "unpack"), str(dest)], check=True, capture_output=True)
    return dest


if __name__ == "__main__":
    sys.exit(main())
