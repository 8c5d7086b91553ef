"""Differential runs: random Volcano worlds through Volcano's vc-scheduler (v1.15.1 by default;
``--volcano 1.7.0``: v1.7.0's) and through ``tidesched run``, each on a real control plane of its
own, compared at job level.

A *world* is what a scheduler finds when it starts: Nodes (labels, taints, cpu/memory/pods and
sometimes ``nvidia.com/gpu``), Queues (weight, capability, reclaimable), PriorityClasses,
PodGroups (``Pending`` with pods waiting, or ``Running`` with pods already bound and running, so
preempt and reclaim have victims) and their pods (requests, node selectors, tolerations), and a
scheduler configuration drawn from what v1.7.0 has (actions enqueue, allocate, backfill, preempt,
reclaim; plugins priority, gang, conformance, drf, proportion, predicates, nodeorder, binpack,
overcommit; always predicates and a nodeorder scorer). For v1.15.1 (:func:`extend_v115`) each
further part comes from a random stream of its own: the new actions and plugins
(``differential_plugins``), gates, PVCs, budgets and a quota (``differential_objects``), HyperNodes
and gangs held to them (``differential_topology``), queue priority, capacity and its hierarchy,
and DRA claims (``differential_claims``). Worlds come from a seed (``random.Random(seed)``): a seed
is a world. ``--preset`` gives the twelve hand-made kinds.

Each world is created on a control plane (etcd + kube-apiserver, ``tests/e2e/controlplane.py``)
per scheduler — the same objects in the same order, PodGroups in name order so that creation
time and name (Volcano's job-order tie-break) agree, Queues Open as Volcano's queue controller
leaves them — and the scheduler starts with the same configuration file and
``--schedule-period`` (``--period``, 0.5 s). A kubelet stand-in (``tests/e2e/cluster.py``)
runs what is bound and removes what is evicted. Once pods and PodGroups have not changed for
``--quiet`` seconds (3) the outcome is read and compared:

* per PodGroup: pods bound, pods evicted, whether minMember was reached, the phase;
* per queue: pods bound;
* the node of every pod the world forces onto one node (selector, taints and size allow one
  node only). Other node names are not compared: vc-scheduler picks at random among nodes of
  equal score (``SelectBestNode``), tidesched the first by name.

A mismatch is *explained* against v1.15.1 only as Volcano's own randomness — a rerun of
vc-scheduler (``--reruns``) gives tidesched's outcome, or tidesched's own rules, replayed with the
choices vc-scheduler made at random (read from its log: ``differential_ties``) and the pod uids of
the run, give vc-scheduler's — or as a difference tidesched makes on purpose, confirmed by
replaying Volcano's rule for it (``differential_deliberate``); never as a version difference.
Against v1.7.0 a known difference between v1.7.0 and Volcano master also explains one: the world
replayed with v1.7.0's variant of the parts concerned (``differential_v170.py``, each difference
listed there and in docs/fidelity.md) gives vc-scheduler's outcome. The rest is *unexplained*.
Every mismatch is written to ``--out``/seed-N/ (or PRESET-N/): world.json, objects.yaml and
scheduler.conf, both outcomes, the reruns, the differences, the verdict and both schedulers'
logs; replay it
with ``--only N``, ``--preset NAME`` or ``--replay DIR`` (``--local``: through tidesched's core
in this process, no control plane, each session's decisions printed).

    .venv/bin/python benchmarks/differential.py --worlds 20 --seed 1
    .venv/bin/python benchmarks/differential.py --preset all
    .venv/bin/python benchmarks/differential.py --only 17
    .venv/bin/python benchmarks/differential.py --replay differential-out/seed-17 --local

The big run (about 7 s per world on two cores, both schedulers side by side, plus reruns of
mismatching worlds):

    .venv/bin/python benchmarks/differential.py --worlds 300 --seed 3000 --out differential-300

Prints ``N worlds, M match, K explained, U unexplained`` and which difference explained how
many worlds; exit code 1 when U > 0.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import random
import re
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

ROOT = Path(__file__).resolve().parents[1]
# Appended, not prepended: imported from the unit tests too, where these directories must not
# shadow anything (benchmarks/trace.py would hide the standard library's trace).
for _dir in (str(ROOT / "tests" / "e2e"), str(Path(__file__).resolve().parent)):
    if _dir not in sys.path:
        sys.path.append(_dir)

from cluster import (  # noqa: E402
    KEPT_QUEUES,
    SA_NAME,
    SA_NAMESPACE,
    Kubelet,
    Scheduler,
    create_node,
    ensure_namespace,
    install_deploy,
)
from controlplane import Api, ApiError, ControlPlane, find_assets  # noqa: E402
from volcano import V115, V170, find_volcano, install_volcano_crds, start_vc_scheduler  # noqa: E402

import differential_claims  # noqa: E402
import differential_deliberate  # noqa: E402
import differential_topology  # noqa: E402
import differential_objects  # noqa: E402
import differential_plugins  # noqa: E402

NS = "diff"
VOLCANO_API = "/apis/scheduling.volcano.sh/v1beta1"
GROUP_NAME = "scheduling.k8s.io/group-name"
WORLD_LABEL = "differential.tidesched.io/world"
SCHEDULERS = ("vc-scheduler", "tidesched")
# vc-scheduler v1.15.1 deletes its victims (defaultEvictor: a status update, then DELETE), so a
# PodDisruptionBudget binds it only through the pdb plugin; tidesched's default Eviction API also
# lets the API server refuse what a budget forbids (docs/operations.md, --eviction-mode): Volcano's
# way here (seed 3092: a budget of 4 of 4 pods, vc-scheduler evicted one, the API server refused
# tidesched's eviction).
TIDESCHED_ARGS = ("--eviction-mode", "delete")
GPU = "nvidia.com/gpu"
PRIORITY_CLASSES = {"pc-low": 10, "pc-mid": 100, "pc-high": 1000}
ROOT_QUEUE = "root"
ACTIONS = ("enqueue", "allocate", "backfill", "preempt", "reclaim")
PLUGINS = ("priority", "gang", "conformance", "drf", "proportion", "predicates", "nodeorder", "binpack",
           "overcommit")


# ------------------------------------------------------------------------------------------
# Worlds


@dataclass
class NodeSpec:
    name: str
    cpu: int  # milli
    memory: int  # Mi
    gpu: int = 0
    pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)


@dataclass
class PodSpec:
    name: str
    job: str
    cpu: int  # milli; 0 with memory 0 and gpu 0: best effort
    memory: int  # Mi
    gpu: int = 0
    priority_class: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, str]] = field(default_factory=list)
    node: str | None = None  # bound and Running when the world starts
    preemptable: bool | None = None  # volcano.sh/preemptable annotation; None: absent (true)
    claim_template: str | None = None  # a DRA claim made from this template (differential_claims)
    annotations: dict[str, str] = field(default_factory=dict)  # differential_plugins' (cdp, task-spec)


@dataclass
class JobSpec:
    name: str
    queue: str
    min_member: int
    priority_class: str | None = None
    running: bool = False  # PodGroup Running with its pods bound (else Pending, pods waiting)
    min_resources: dict[str, str] | None = None
    network_topology: dict[str, Any] | None = None  # spec.networkTopology (differential_topology)
    sub_groups: list[dict[str, Any]] | None = None  # spec.subGroupPolicy (differential_topology)
    annotations: dict[str, str] = field(default_factory=dict)  # differential_plugins' (sla, task-topology)


@dataclass
class QueueSpec:
    name: str
    weight: int = 1
    capability: dict[str, str] | None = None
    reclaimable: bool | None = True
    # Volcano v1.15's queue fields (the generator draws them for --volcano 1.15.1 only)
    priority: int = 0
    deserved: dict[str, str] | None = None
    guarantee: dict[str, str] | None = None
    parent: str | None = None
    affinity: dict[str, Any] | None = None  # nodegroup's spec.affinity (differential_plugins)


@dataclass
class World:
    seed: int
    kind: str  # "random" or a preset's name
    config: str
    nodes: list[NodeSpec]
    queues: list[QueueSpec]
    jobs: list[JobSpec]
    pods: list[PodSpec]
    note: str = ""
    # The ``root`` Queue as vc-scheduler v1.15 creates it at start (reclaimable false), made in
    # both schedulers' planes (and the in-process replay) so that both see the same queues.
    root_queue: bool = False
    hypernodes: list[dict[str, Any]] = field(default_factory=list)  # manifests (differential_topology)
    dra: list[dict[str, Any]] = field(default_factory=list)  # manifests (differential_claims)
    # Gates, claims and budgets (differential_objects): JSON, turned into manifests there.
    objects: dict[str, Any] = field(default_factory=dict)

    # -- views ----------------------------------------------------------------------------

    def job(self, name: str) -> JobSpec:
        return next(j for j in self.jobs if j.name == name)

    def pods_of(self, job: str) -> list[PodSpec]:
        return [p for p in self.pods if p.job == job]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> World:
        return cls(
            d["seed"], d["kind"], d["config"],
            [NodeSpec(**n) for n in d["nodes"]],
            [QueueSpec(**q) for q in d["queues"]],
            [JobSpec(**j) for j in d["jobs"]],
            [PodSpec(**p) for p in d["pods"]],
            d.get("note", ""),
            d.get("root_queue", False),
            d.get("hypernodes", []),
            d.get("dra", []),
            d.get("objects") or {},
        )

    def manifests(self) -> list[dict[str, Any]]:
        """Every object as a manifest, in creation order (also for ``tidesched schedule``)."""
        out: list[dict[str, Any]] = []
        for name, value in PRIORITY_CLASSES.items():
            out.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": name, "labels": {WORLD_LABEL: "1"}}, "value": value})
        if self.root_queue:
            out.append(queue_manifest(QueueSpec(ROOT_QUEUE, 1, None, False)))
        for q in self.queues:
            out.append(queue_manifest(q))
        for n in self.nodes:
            out.append(node_manifest(n))
        out.extend(copy.deepcopy(self.hypernodes))
        out.extend(copy.deepcopy(self.dra))
        for j in sorted(self.jobs, key=lambda j: j.name):
            out.append(podgroup_manifest(j))
        for p in self.pods:
            out.append(pod_manifest(p, self.job(p.job)))
            if p.claim_template:
                out.append(differential_claims.claim_manifest(p, NS))
        return differential_objects.decorate(self, out)


def quantity_cpu(milli: int) -> str:
    return f"{milli // 1000}" if milli % 1000 == 0 else f"{milli}m"


def quantity_mem(mi: int) -> str:
    return f"{mi // 1024}Gi" if mi % 1024 == 0 else f"{mi}Mi"


def node_manifest(n: NodeSpec) -> dict[str, Any]:
    alloc = {"cpu": quantity_cpu(n.cpu), "memory": quantity_mem(n.memory), "pods": str(n.pods)}
    if n.gpu:
        alloc[GPU] = str(n.gpu)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": n.name, "labels": {"kubernetes.io/hostname": n.name, **n.labels}},
        "spec": {"taints": list(n.taints)} if n.taints else {},
        "status": {"capacity": alloc, "allocatable": alloc,
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def queue_manifest(q: QueueSpec) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": q.weight}
    if q.capability:
        spec["capability"] = dict(q.capability)
    if q.reclaimable is not None:
        spec["reclaimable"] = q.reclaimable
    if q.priority:
        spec["priority"] = q.priority
    if q.deserved:
        spec["deserved"] = dict(q.deserved)
    if q.guarantee:
        spec["guarantee"] = {"resource": dict(q.guarantee)}
    if q.parent:
        spec["parent"] = q.parent
    if q.affinity:
        spec["affinity"] = copy.deepcopy(q.affinity)
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q.name},
            "spec": spec, "status": {"state": "Open", "allocated": {}}}


def podgroup_manifest(j: JobSpec) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": j.min_member, "queue": j.queue}
    if j.priority_class:
        spec["priorityClassName"] = j.priority_class
    if j.min_resources:
        spec["minResources"] = dict(j.min_resources)
    spec.update(differential_topology.podgroup_spec(j))
    status: dict[str, Any] = {"phase": "Running" if j.running else "Pending"}
    md: dict[str, Any] = {"name": j.name, "namespace": NS}
    if j.annotations:
        md["annotations"] = dict(j.annotations)
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": md, "spec": spec, "status": status}


def pod_requests(p: PodSpec) -> dict[str, str]:
    req: dict[str, str] = {}
    if p.cpu:
        req["cpu"] = quantity_cpu(p.cpu)
    if p.memory:
        req["memory"] = quantity_mem(p.memory)
    if p.gpu:
        req[GPU] = str(p.gpu)
    return req


def pod_manifest(p: PodSpec, job: JobSpec) -> dict[str, Any]:
    req = pod_requests(p)
    resources: dict[str, Any] = {"requests": req} if req else {}
    if p.gpu:
        resources["limits"] = {GPU: str(p.gpu)}
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
    }
    if p.priority_class:
        spec["priorityClassName"] = p.priority_class
    if p.node_selector:
        spec["nodeSelector"] = dict(p.node_selector)
    if p.tolerations:
        spec["tolerations"] = [dict(t) for t in p.tolerations]
    if p.node:
        spec["nodeName"] = p.node
    ann = {GROUP_NAME: job.name, **p.annotations}
    if p.preemptable is not None:
        ann["volcano.sh/preemptable"] = "true" if p.preemptable else "false"
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": p.name, "namespace": NS, "annotations": ann}, "spec": spec}
    if labels := differential_topology.pod_labels(p.name, job):
        body["metadata"]["labels"] = labels
    extra_spec, extra_status = differential_claims.pod_parts(p)
    if extra_spec:
        spec.update(extra_spec)
        spec["containers"][0]["resources"]["claims"] = [{"name": c["name"]} for c in extra_spec["resourceClaims"]]
        body["status"] = extra_status
    if p.node:
        # PodScheduled as the binding left it (cdp's cooldown counts from it); populate
        # sets it to the time the world is made.
        body["status"] = {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2023-11-14T22:13:20Z"}]}
    return body


# -- what the world allows ---------------------------------------------------------------


def tolerates(p: PodSpec, taint: dict[str, str]) -> bool:
    if taint.get("effect") not in ("NoSchedule", "NoExecute"):
        return True
    for t in p.tolerations:
        if t.get("operator") == "Exists" and (not t.get("key") or t.get("key") == taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", "") and (
            not t.get("effect") or t.get("effect") == taint.get("effect")
        ):
            return True
    return False


def static_fit(p: PodSpec, n: NodeSpec) -> bool:
    """Could the pod ever run on the node (labels, taints, its size against the node's)?"""
    labels = {"kubernetes.io/hostname": n.name, **n.labels}
    if any(labels.get(k) != v for k, v in p.node_selector.items()):
        return False
    if not all(tolerates(p, t) for t in n.taints):
        return False
    return p.cpu <= n.cpu and p.memory <= n.memory and p.gpu <= n.gpu


def forced_node(world: World, p: PodSpec) -> str | None:
    fits = [n.name for n in world.nodes if static_fit(p, n)]
    return fits[0] if len(fits) == 1 else None


# -- the generator ---------------------------------------------------------------------------


CPU_SIZES = (500, 1000, 1000, 2000)
MEM_SIZES = (512, 1024, 1024, 2048)


def random_config(rng: random.Random, *, evicting: bool | None = None) -> str:
    """A valid scheduler configuration within v1.7.0's surface. Always enqueue and allocate
    (v1.7.0 admits nothing otherwise... it admits in allocate, but Volcano's own configurations
    all have enqueue) and predicates (without it taints and selectors mean nothing)."""
    actions = ["enqueue", "allocate"]
    if rng.random() < 0.6:
        actions.append("backfill")
    if evicting is None:
        evict = [a for a in ("preempt", "reclaim") if rng.random() < 0.45]
    else:
        evict = ["preempt", "reclaim"] if evicting else []
    rng.shuffle(evict)
    actions += evict
    tier1: list[dict[str, Any]] = []
    if rng.random() < 0.85:
        tier1.append({"name": "priority"})
    if rng.random() < 0.9:
        gang: dict[str, Any] = {"name": "gang"}
        if rng.random() < 0.5:
            gang["enablePreemptable"] = False
        tier1.append(gang)
    if rng.random() < 0.7:
        tier1.append({"name": "conformance"})
    tier2: list[dict[str, Any]] = []
    if rng.random() < 0.4:
        oc: dict[str, Any] = {"name": "overcommit"}
        if rng.random() < 0.5:
            oc["arguments"] = {"overcommit-factor": rng.choice([1.0, 1.2, 2.0])}
        tier2.append(oc)
    if rng.random() < 0.6:
        drf: dict[str, Any] = {"name": "drf"}
        if rng.random() < 0.5:
            drf["enablePreemptable"] = False
        tier2.append(drf)
    tier2.append({"name": "predicates"})
    if rng.random() < 0.85:
        tier2.append({"name": "proportion"})
    # Always a scorer that tells nodes apart by their use: without one every node scores 0 and
    # vc-scheduler picks one at random for every task (SelectBestNode), which no comparison
    # of outcomes survives.
    no: dict[str, Any] = {"name": "nodeorder"}
    if rng.random() < 0.5:
        least = rng.choice([0, 1, 2])
        most = rng.choice([1, 2]) if least == 0 else rng.choice([0, 0, 1])
        no["arguments"] = {"leastrequested.weight": least, "mostrequested.weight": most,
                           "balancedresource.weight": rng.choice([0, 1])}
    tier2.append(no)
    if rng.random() < 0.4:
        bp: dict[str, Any] = {"name": "binpack"}
        if rng.random() < 0.5:
            bp["arguments"] = {"binpack.weight": rng.choice([1, 5]), "binpack.cpu": rng.choice([1, 2]),
                               "binpack.memory": rng.choice([1, 2])}
        tier2.append(bp)
    tiers = [t for t in (tier1, tier2) if t]
    conf: dict[str, Any] = {"actions": ", ".join(actions), "tiers": [{"plugins": t} for t in tiers]}
    if "reclaim" in actions:
        # tidesched's own gang-safe reclaim is on by default; this is the documented switch to
        # Volcano's per-pod reclaim (docs/reclaim.md). vc-scheduler ignores the argument.
        conf["configurations"] = [{"name": "reclaim", "arguments": {"enableGangSafeReclaim": False}}]
    return yaml.safe_dump(conf, sort_keys=False)


def _shape(rng: random.Random, gpu_nodes: bool) -> tuple[int, int, int]:
    if rng.random() < 0.05:
        return 0, 0, 0  # best effort
    gpu = rng.choice([1, 1, 2]) if gpu_nodes and rng.random() < 0.2 else 0
    return rng.choice(CPU_SIZES), rng.choice(MEM_SIZES), gpu


def generate(seed: int, version: str = V115) -> World:
    """The random world of ``seed``: within v1.7.0's surface, and for v1.15.1 with what v1.15 adds
    on top (:func:`extend_v115`, drawn from a second generator, so a seed's v1.7.0 world stays
    what it was)."""
    world = _generate_v170(seed)
    return extend_v115(world) if version == V115 else world


def _shares(rng: random.Random, nodes: list[NodeSpec], fracs: tuple[float, ...]) -> dict[str, str]:
    frac = rng.choice(fracs)
    return {"cpu": quantity_cpu(int(sum(n.cpu for n in nodes) * frac) // 100 * 100),
            "memory": quantity_mem(int(sum(n.memory for n in nodes) * frac) // 64 * 64)}


def extend_v115(world: World) -> World:
    """What Volcano v1.15 (and tidesched now) has beyond v1.7.0, drawn into ``world``: queue
    ``priority``; the capacity plugin in place of proportion (queues with ``deserved`` and
    ``guarantee``), in a third of those worlds with a queue hierarchy (``spec.parent``,
    ``enableHierarchy``: the key v1.15.1 reads; it ignores tidesched's other spelling).
    HyperNodes and gangs held to them (``differential_topology``), DRA claims
    (``differential_claims``), and gates, PVCs, budgets and a quota (``differential_objects``), each
    from a random stream of its own; the new actions and plugins (gangpreempt, gangreclaim,
    resource-strategy-fit, sla, task-topology, nodegroup, cdp, binpack's GPU arguments) from
    ``differential_plugins``, first: the other parts look at the actions it chose."""
    differential_plugins.extend(world)  # the new actions and plugins: a stream of their own
    differential_objects.draw(world)  # gates, claims, budgets: a random stream of their own
    world.root_queue = True
    differential_topology.draw(world)
    _extend_queues(world)
    differential_claims.draw(world)  # after the queue draws: it looks for proportion
    conf = yaml.safe_load(world.config)
    differential_deliberate.volcano_switches(conf)  # Volcano's side of tidesched's switches
    world.config = yaml.safe_dump(conf, sort_keys=False)
    return world


def _extend_queues(world: World) -> None:
    rng = random.Random(f"v1.15-{world.seed}")
    for q in world.queues:
        if rng.random() < 0.3:
            q.priority = rng.choice([1, 5, 10])
    conf = yaml.safe_load(world.config)
    tier2 = conf["tiers"][-1]["plugins"]
    names = [p["name"] for p in tier2]
    if "proportion" not in names or rng.random() >= 0.35:
        return
    hierarchical = len(world.queues) >= 2 and rng.random() < 0.35
    capacity: dict[str, Any] = {"name": "capacity"}
    if hierarchical:
        capacity["enableHierarchy"] = True
    tier2[names.index("proportion")] = capacity
    for q in world.queues:
        if rng.random() < 0.7:
            q.deserved = _shares(rng, world.nodes, (0.25, 0.5, 0.75))
            if rng.random() < 0.3:
                q.guarantee = _shares(rng, world.nodes, (0.1, 0.2))
    if hierarchical:
        parent = QueueSpec("p1", 1, _shares(rng, world.nodes, (0.5, 0.75, 1.0)) if rng.random() < 0.5 else None,
                           True, deserved=_shares(rng, world.nodes, (0.5, 0.75)))
        for q in world.queues[: rng.randint(1, len(world.queues))]:
            q.parent = parent.name
        world.queues.insert(0, parent)  # created before its children
    world.config = yaml.safe_dump(conf, sort_keys=False)


def _generate_v170(seed: int) -> World:
    """The random world of ``seed`` within v1.7.0's surface."""
    rng = random.Random(seed)
    nodes: list[NodeSpec] = []
    # No two nodes of one size: nodes that differ only in labels or taints score alike while
    # empty, and vc-scheduler picks among equal scores at random.
    shapes = rng.sample([(c, m) for c in (2000, 4000, 6000, 8000) for m in (4096, 8192, 12288, 16384)], 5)
    for i in range(rng.randint(2, 5)):
        gpu = rng.choice([2, 4]) if rng.random() < 0.25 else 0
        taints = []
        if rng.random() < 0.2:
            taints.append({"key": "dedicated", "value": rng.choice(["x", "y"]), "effect": "NoSchedule"})
        pods = rng.randint(2, 5) if rng.random() < 0.05 else 110
        cpu, mem = shapes[i]
        nodes.append(NodeSpec(f"node-{i}", cpu, mem, gpu, pods, {"zone": rng.choice(["a", "b"])}, taints))
    gpu_nodes = any(n.gpu for n in nodes)
    total_cpu = sum(n.cpu for n in nodes)
    total_mem = sum(n.memory for n in nodes)
    queues: list[QueueSpec] = []
    for i in range(rng.randint(1, 3)):
        cap = None
        if rng.random() < 0.3:
            frac = rng.choice([0.25, 0.5, 0.75])
            cap = {"cpu": quantity_cpu(int(total_cpu * frac) // 100 * 100),
                   "memory": quantity_mem(int(total_mem * frac) // 64 * 64)}
        queues.append(QueueSpec(f"q{i + 1}", rng.randint(1, 4), cap, rng.random() < 0.85))
    config = random_config(rng)
    evicting = "preempt" in config or "reclaim" in config
    jobs: list[JobSpec] = []
    pods: list[PodSpec] = []
    free = {n.name: [n.cpu, n.memory, n.gpu, n.pods] for n in nodes}
    # Running jobs until the cluster is about as full as drawn (fuller where something may be
    # evicted), then pending ones.
    fill = rng.uniform(0.5, 1.0) if evicting else rng.uniform(0.0, 0.7)
    n_pending = rng.randint(1, 5)
    index = 0
    running_jobs = 0
    while True:
        used = 1 - sum(f[0] for f in free.values()) / total_cpu
        running = used < fill and running_jobs < 4
        if not running and n_pending == 0:
            break
        if running:
            running_jobs += 1
        else:
            n_pending -= 1
        name = f"j{index:02d}"
        index += 1
        queue = rng.choice(queues).name
        pc = rng.choice([None, "pc-low", "pc-mid", "pc-high"])
        replicas = rng.randint(1, 4)
        roles = [_shape(rng, gpu_nodes)]
        if rng.random() < 0.2:
            roles.append(_shape(rng, gpu_nodes))
        selector: dict[str, str] = {}
        r = rng.random()
        if r < 0.15:
            selector = {"zone": rng.choice(["a", "b"])}
        elif r < 0.22:
            selector = {"kubernetes.io/hostname": rng.choice(nodes).name}
        tolerations = []
        if rng.random() < 0.25:
            tolerations = [{"key": "dedicated", "operator": "Equal", "value": rng.choice(["x", "y"]),
                            "effect": "NoSchedule"}]
        members: list[PodSpec] = []
        for i in range(replicas):
            role = 0 if i < (replicas + 1) // 2 or len(roles) == 1 else 1
            cpu, mem, gpu = roles[role]
            p = PodSpec(f"{name}-{'ab'[role]}-{i}", name, cpu, mem, gpu, pc, dict(selector),
                        list(tolerations))
            if running:
                fits = [n for n in nodes if static_fit(p, n) and _fits_free(free[n.name], p)]
                if not fits:
                    continue
                n = rng.choice(fits)
                _take(free[n.name], p)
                p.node = n.name
            if rng.random() < 0.05:
                p.preemptable = False
            members.append(p)
        if not members:
            continue
        min_member = rng.randint(1, len(members)) if rng.random() < 0.5 else len(members)
        job = JobSpec(name, queue, min_member, pc, running)
        if not running and rng.random() < 0.7:
            job.min_resources = _sum_requests(members[:min_member])
        jobs.append(job)
        pods.extend(members)
    return World(seed, "random", config, nodes, queues, jobs, pods)


def _fits_free(free: list[int], p: PodSpec) -> bool:
    return p.cpu <= free[0] and p.memory <= free[1] and p.gpu <= free[2] and free[3] >= 1


def _take(free: list[int], p: PodSpec) -> None:
    free[0] -= p.cpu
    free[1] -= p.memory
    free[2] -= p.gpu
    free[3] -= 1


def _sum_requests(pods: list[PodSpec]) -> dict[str, str] | None:
    cpu = sum(p.cpu for p in pods)
    mem = sum(p.memory for p in pods)
    gpu = sum(p.gpu for p in pods)
    out: dict[str, str] = {}
    if cpu:
        out["cpu"] = quantity_cpu(cpu)
    if mem:
        out["memory"] = quantity_mem(mem)
    if gpu:
        out[GPU] = str(gpu)
    return out or None


# -- presets: hand-made kinds of worlds ----------------------------------------------------

BASE_CONF = {
    "actions": "enqueue, allocate, backfill",
    "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
        {"plugins": [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}]},
    ],
}


def _conf(actions: str | None = None, **extra: Any) -> str:
    conf = copy.deepcopy(BASE_CONF)
    if actions:
        conf["actions"] = actions
        if "reclaim" in actions:
            conf["configurations"] = [{"name": "reclaim", "arguments": {"enableGangSafeReclaim": False}}]
    conf.update(extra)
    return yaml.safe_dump(conf, sort_keys=False)


def _job(world: World, name: str, queue: str, n: int, min_member: int | None = None, *, cpu: int = 1000,
         memory: int = 1024, gpu: int = 0, pc: str | None = None, nodes: list[str] | None = None,
         selector: dict[str, str] | None = None, tolerations: list[dict[str, str]] | None = None,
         min_resources: bool = True) -> None:
    """A PodGroup of ``n`` pods; ``nodes``: running there (one per pod), else pending."""
    running = nodes is not None
    mm = n if min_member is None else min_member
    pods = [PodSpec(f"{name}-a-{i}", name, cpu, memory, gpu, pc, dict(selector or {}),
                    list(tolerations or []), nodes[i] if nodes else None) for i in range(n)]
    world.jobs.append(JobSpec(name, queue, mm, pc, running,
                              None if running or not min_resources else _sum_requests(pods[:mm])))
    world.pods.extend(pods)


def _nodes(*shapes: tuple[int, int]) -> list[NodeSpec]:
    return [NodeSpec(f"node-{i}", c, m, labels={"zone": "a" if i % 2 == 0 else "b"})
            for i, (c, m) in enumerate(shapes)]


def _world(seed: int, kind: str, nodes: list[NodeSpec], queues: list[QueueSpec],
           actions: str | None = None) -> World:
    return World(seed, kind, _conf(actions), nodes, queues, [], [])


def _preset_gang_fit(seed: int) -> World:
    """A gang that fits only when spread one pod per node, and a smaller job created after it
    that would take the room the gang needs if it went first."""
    w = _world(seed, "gang-fit", _nodes((4000, 8192), (3000, 12288), (2000, 16384)), [QueueSpec("q1")])
    _job(w, "j00", "q1", 3, cpu=2000)
    _job(w, "j01", "q1", 2, cpu=1000)
    return w


def _preset_gang_too_big(seed: int) -> World:
    """A gang larger than the cluster beside one that fits: the first binds nothing (its
    PodGroup stays Inqueue), the second all its pods."""
    w = _world(seed, "gang-too-big", _nodes((4000, 8192), (4000, 12288)), [QueueSpec("q1")])
    _job(w, "j00", "q1", 4, cpu=3000)
    _job(w, "j01", "q1", 3, cpu=1000)
    return w


def _preset_proportion_1_3(seed: int) -> World:
    """Two queues of weight 1 and 3, each asking for the whole cluster: their pods split 1:3."""
    w = _world(seed, "proportion-1-3", _nodes((8000, 16384), (6000, 12288)),
               [QueueSpec("q1", 1), QueueSpec("q2", 3)])
    for i in range(7):
        _job(w, f"j{i:02d}", "q1", 1)
    for i in range(7, 14):
        _job(w, f"j{i:02d}", "q2", 2, 1)
    return w


def _preset_proportion_surplus(seed: int) -> World:
    """A heavy queue beside a light one that asks for little: the light queue's unused share
    goes to the heavy one."""
    w = _world(seed, "proportion-surplus", _nodes((8000, 16384), (4000, 8192)),
               [QueueSpec("q1", 3), QueueSpec("q2", 1)])
    _job(w, "j00", "q1", 1, cpu=500)
    for i in range(1, 6):
        _job(w, f"j{i:02d}", "q2", 2, 1, cpu=1000)
    return w


def _preset_queue_capability(seed: int) -> World:
    """A queue capped at 3 CPUs on a 12-CPU cluster, with jobs asking for more; another queue
    without a cap beside it."""
    w = _world(seed, "queue-capability", _nodes((8000, 16384), (4000, 8192)),
               [QueueSpec("q1", 2, {"cpu": "3", "memory": "8Gi"}), QueueSpec("q2", 1)])
    for i in range(4):
        _job(w, f"j{i:02d}", "q1", 1, cpu=1000)
    _job(w, "j04", "q1", 2, cpu=1000)
    _job(w, "j05", "q2", 3, 2, cpu=1000)
    return w


def _preset_drf(seed: int) -> World:
    """One queue, jobs with different dominant resources and one already running: drf orders
    the pending jobs by dominant share."""
    w = _world(seed, "drf", _nodes((6000, 8192), (4000, 16384)), [QueueSpec("q1")])
    _job(w, "j00", "q1", 2, cpu=2000, memory=1024, nodes=["node-0", "node-1"])
    _job(w, "j01", "q1", 3, 1, cpu=500, memory=4096)
    _job(w, "j02", "q1", 3, 1, cpu=2000, memory=512)
    _job(w, "j03", "q1", 2, 1, cpu=1000, memory=2048)
    return w


def _preset_priority_order(seed: int) -> World:
    """Scarce room and jobs of three priority classes created lowest first: the highest
    priority binds first."""
    w = _world(seed, "priority-order", _nodes((4000, 8192), (2000, 8192)), [QueueSpec("q1")])
    _job(w, "j00", "q1", 2, cpu=1500, pc="pc-low")
    _job(w, "j01", "q1", 2, cpu=1500, pc="pc-mid")
    _job(w, "j02", "q1", 2, cpu=1500, pc="pc-high")
    _job(w, "j03", "q1", 1, cpu=1000)
    return w


def _preset_min_member(seed: int) -> World:
    """minMember below replicas: what fits beyond the minimum binds, the rest waits; a job
    whose minimum cannot be met binds nothing."""
    w = _world(seed, "min-member-below-replicas", _nodes((4000, 8192), (3000, 8192)), [QueueSpec("q1")])
    _job(w, "j00", "q1", 6, 2, cpu=1000)
    _job(w, "j01", "q1", 4, 3, cpu=1500)
    _job(w, "j02", "q1", 3, 1, cpu=500)
    return w


def _preset_forced_nodes(seed: int) -> World:
    """Pods pinned by hostname selectors and taints: each may go to one node only."""
    w = _world(seed, "forced-nodes", _nodes((4000, 8192), (4000, 8192), (4000, 8192)), [QueueSpec("q1")])
    w.nodes[2].taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    tol = [{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]
    _job(w, "j00", "q1", 2, cpu=1000, selector={"kubernetes.io/hostname": "node-1"})
    _job(w, "j01", "q1", 2, cpu=1000, selector={"zone": "a"}, tolerations=tol)
    _job(w, "j02", "q1", 1, cpu=3000, selector={"kubernetes.io/hostname": "node-0"})
    _job(w, "j03", "q1", 3, 1, cpu=1000, selector={"zone": "b"})
    return w


def _preset_many_podgroups(seed: int) -> World:
    """Twenty single-pod PodGroups in two queues for room for fourteen."""
    w = _world(seed, "many-podgroups", _nodes((8000, 16384), (6000, 16384)),
               [QueueSpec("q1", 1), QueueSpec("q2", 1)])
    for i in range(20):
        _job(w, f"j{i:02d}", "q1" if i % 2 else "q2", 1, cpu=1000)
    return w


def _preset_preempt(seed: int) -> World:
    """A full node of low-priority running jobs and a high-priority job pending in the same
    queue: preempt evicts the lowest priority first."""
    w = _world(seed, "preempt", _nodes((4000, 8192), (2000, 8192)), [QueueSpec("q1")],
               "enqueue, allocate, backfill, preempt")
    _job(w, "j00", "q1", 2, 1, cpu=1000, pc="pc-low", nodes=["node-0", "node-0"])
    _job(w, "j01", "q1", 2, 1, cpu=1000, pc="pc-mid", nodes=["node-1", "node-1"])
    _job(w, "j02", "q1", 1, cpu=2000, pc="pc-low", nodes=["node-0"])
    _job(w, "j03", "q1", 2, cpu=1000, pc="pc-high")
    return w


def _preset_reclaim(seed: int) -> World:
    """A queue running on all of the cluster and a starving job in an equal-weight queue:
    reclaim evicts from the queue over its share."""
    w = _world(seed, "reclaim", _nodes((4000, 8192), (4000, 8192)), [QueueSpec("q1"), QueueSpec("q2")],
               "enqueue, allocate, backfill, reclaim")
    _job(w, "j00", "q1", 4, 2, cpu=1000, nodes=["node-0", "node-0", "node-1", "node-1"])
    _job(w, "j01", "q1", 4, 1, cpu=1000, nodes=["node-0", "node-0", "node-1", "node-1"])
    _job(w, "j02", "q2", 2, cpu=1000)
    return w


PRESETS: dict[str, Callable[[int], World]] = {
    "gang-fit": _preset_gang_fit,
    "gang-too-big": _preset_gang_too_big,
    "proportion-1-3": _preset_proportion_1_3,
    "proportion-surplus": _preset_proportion_surplus,
    "queue-capability": _preset_queue_capability,
    "drf": _preset_drf,
    "priority-order": _preset_priority_order,
    "min-member-below-replicas": _preset_min_member,
    "forced-nodes": _preset_forced_nodes,
    "many-podgroups": _preset_many_podgroups,
    "preempt": _preset_preempt,
    "reclaim": _preset_reclaim,
}


# ------------------------------------------------------------------------------------------
# Running a world on a control plane


@dataclass
class Outcome:
    scheduler: str
    pods: dict[str, dict[str, Any]]  # name -> {"node": str | None, "phase": str, "deleting": bool}
    podgroups: dict[str, str]  # name -> phase
    settled: bool
    seconds: float
    sessions: int
    log: str = ""
    uids: dict[str, str] = field(default_factory=dict)  # pod name -> uid as the world was made

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Outcome:
        return cls(**d)


@dataclass
class Options:
    period: float = 0.5  # --schedule-period of both schedulers, seconds
    quiet: float = 3.0  # nothing changed for this long: settled
    timeout: float = 60.0  # per run
    keep_logs: bool = False
    volcano: str = V115  # vc-scheduler's version (and its CRDs)


class Plane:
    """A control plane for one scheduler with what both schedulers need installed: deploy/
    (tidesched's namespace, ServiceAccount and RBAC, the default Queue) and Volcano v1.7.0's
    CRDs, as benchmarks/kube.py prepares it. ``reset()`` empties it between worlds."""

    def __init__(self, assets: Path, volcano: Path, workdir: Path | None = None) -> None:
        self.volcano = volcano
        self.cp = ControlPlane(assets, **({"workdir": workdir} if workdir else {}))
        self.cp.start()
        try:
            install_deploy(self.cp.admin)
            install_volcano_crds(self.cp.admin, volcano)
            token = self.cp.service_account_token(SA_NAMESPACE, SA_NAME)
            self.tidesched_kubeconfig = self.cp.kubeconfig(self.cp.workdir / "tidesched.kubeconfig", token)
        except BaseException:
            self.cp.cleanup()
            raise
        self.used = False
        self.pv_controller: Any = None  # differential_objects.PVController, once a world needs one

    @property
    def api(self) -> Api:
        return self.cp.admin

    def close(self) -> None:
        differential_objects.close(self)
        self.cp.cleanup()

    def reset(self) -> None:
        """Everything a world made goes: pods, PodGroups, nodes, queues but default, the
        world's PriorityClasses."""
        differential_objects.close(self)  # the PV controller is per world: started after populate
        api = self.api
        for p in api.items(f"/api/v1/namespaces/{NS}/pods"):
            api.delete(f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}", gracePeriodSeconds=0)
        for pg in api.items(f"{VOLCANO_API}/namespaces/{NS}/podgroups"):
            api.delete(f"{VOLCANO_API}/namespaces/{NS}/podgroups/{pg['metadata']['name']}")
        api.delete("/api/v1/nodes")
        differential_topology.clear(api)
        differential_claims.clear(api, NS)
        for q in api.items(f"{VOLCANO_API}/queues"):
            if q["metadata"]["name"] not in KEPT_QUEUES:
                api.delete(f"{VOLCANO_API}/queues/{q['metadata']['name']}")
        for pc in api.items("/apis/scheduling.k8s.io/v1/priorityclasses", labelSelector=WORLD_LABEL):
            api.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{pc['metadata']['name']}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if differential_objects.reset(api) and not (
                    api.items(f"/api/v1/namespaces/{NS}/pods") or api.items("/api/v1/nodes")
                    or differential_topology.left(api) or differential_claims.left(api, NS)
                    or api.items(f"{VOLCANO_API}/namespaces/{NS}/podgroups")
                    or [q for q in api.items(f"{VOLCANO_API}/queues") if q["metadata"]["name"] not in KEPT_QUEUES]):
                return
            time.sleep(0.1)
        raise RuntimeError("control plane not empty 30 s after the reset")


def populate(api: Api, world: World) -> None:
    """The world's objects as its users and controllers would have left them."""
    ensure_namespace(api, NS)
    for m in world.manifests():
        kind = m["kind"]
        if kind == "PriorityClass":
            api.apply(m)
        elif kind == "Queue":
            status = m.pop("status")
            api.apply(m)  # root stays between worlds
            # The queue controller's write (Open), through the status subresource.
            api.patch(f"{VOLCANO_API}/queues/{m['metadata']['name']}/status", {"status": status})
        elif kind == "Node":
            md, alloc = m["metadata"], m["status"]["allocatable"]
            labels = {k: v for k, v in md["labels"].items() if k != "kubernetes.io/hostname"}
            extra = {k: v for k, v in alloc.items() if k not in ("cpu", "memory", "pods")}
            create_node(api, md["name"], cpu=alloc["cpu"], memory=alloc["memory"], pods=alloc["pods"],
                        labels=labels, extra=extra)
            if m["spec"].get("taints"):
                api.patch(f"/api/v1/nodes/{md['name']}", {"spec": {"taints": m["spec"]["taints"]}})
        elif kind == "HyperNode":
            api.create(m)
        elif kind in differential_claims.KINDS:
            differential_claims.create(api, m)
        elif kind == "PodGroup":
            api.create(m)  # PodGroups have no status subresource in v1.7.0's CRD: the phase stays
        elif kind == "Pod":
            status = m.pop("status", None)
            api.create(m)
            if status and "phase" not in status:  # a claim's name, as the resourceclaim controller writes it
                api.patch(f"/api/v1/namespaces/{NS}/pods/{m['metadata']['name']}/status", {"status": status})
            elif status:
                now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                api.patch(f"/api/v1/namespaces/{NS}/pods/{m['metadata']['name']}/status", {"status": {
                    **status, "startTime": now,
                    "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                                   {"type": "Ready", "status": "True", "lastTransitionTime": now}]}})
        else:
            differential_objects.populate_object(api, m)


def _fingerprint(api: Api) -> tuple[Any, ...]:
    pods = tuple(sorted(
        (p["metadata"]["name"], p["spec"].get("nodeName") or "", bool(p["metadata"].get("deletionTimestamp")),
         (p.get("status") or {}).get("phase", ""))
        for p in api.items(f"/api/v1/namespaces/{NS}/pods")
    ))
    pgs = tuple(sorted(
        (pg["metadata"]["name"], (pg.get("status") or {}).get("phase", ""))
        for pg in api.items(f"{VOLCANO_API}/namespaces/{NS}/podgroups")
    ))
    return pods, pgs


_VC_SESSION = re.compile(r"End scheduling \.\.\.")
_TS_SESSION = re.compile(r"session \d+: ")


def _count(log: Path, pattern: re.Pattern[str]) -> int:
    try:
        return len(pattern.findall(log.read_text(errors="replace")))
    except OSError:
        return 0


def run_world(plane: Plane, world: World, which: str, opts: Options, workdir: Path) -> Outcome:
    """One run of ``world`` under ``which`` on ``plane`` (reset first when used before)."""
    if plane.used:
        plane.reset()
    plane.used = True
    api = plane.api
    populate(api, world)
    differential_objects.prepare(plane, world)
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in api.items(f"/api/v1/namespaces/{NS}/pods")}
    workdir.mkdir(parents=True, exist_ok=True)
    # Not beside the log: vc-scheduler watches its configuration's directory and reloads on
    # every write there.
    conf = workdir / "conf" / "scheduler.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(world.config)
    log = workdir / f"{which}.log"
    log.unlink(missing_ok=True)
    kubelet = Kubelet(plane.cp).start()
    period = f"{int(opts.period * 1000)}ms"
    proc: Any = None
    tide: Scheduler | None = None
    t0 = time.monotonic()
    try:
        if which == "vc-scheduler":
            proc = start_vc_scheduler(plane.cp, plane.volcano, workdir, conf, log_name=log.name,
                                      args=(f"--schedule-period={period}", "-v=4",
                                            *differential_objects.SCHEDULER_ARGS))
            sessions, pattern, min_sessions = (lambda: _count(log, _VC_SESSION)), _VC_SESSION, 2
        else:
            tide = Scheduler(plane.tidesched_kubeconfig, conf, log,
                             [*differential_objects.SCHEDULER_ARGS, *TIDESCHED_ARGS], period=period).start()
            tide.wait_ready()
            sessions, pattern, min_sessions = (lambda: _count(log, _TS_SESSION)), _TS_SESSION, 1
        del pattern
        last: Any = None
        changed = time.monotonic()
        settled = False
        lifted: set[str] = set()
        while True:
            fp = _fingerprint(api)
            now = time.monotonic()
            if fp != last:
                last, changed = fp, now
            elif now - changed >= opts.quiet and sessions() >= min_sessions:
                if differential_objects.lift_gates(api, world, lifted):  # then settle again
                    changed = now
                    continue
                settled = True
                break
            if now - t0 > opts.timeout:
                break
            time.sleep(0.2)
        seconds = time.monotonic() - t0
        out = read_outcome(api, which, settled, seconds, sessions())
    finally:
        if proc is not None:
            proc.stop()
        if tide is not None:
            tide.stop()
        kubelet.stop()
    out.log = str(log)
    out.uids = uids
    return out


def read_outcome(api: Api, which: str, settled: bool, seconds: float, sessions: int) -> Outcome:
    pods = {
        p["metadata"]["name"]: {
            "node": p["spec"].get("nodeName"),
            "phase": (p.get("status") or {}).get("phase", ""),
            "deleting": bool(p["metadata"].get("deletionTimestamp")),
        }
        for p in api.items(f"/api/v1/namespaces/{NS}/pods")
    }
    pgs = {pg["metadata"]["name"]: (pg.get("status") or {}).get("phase", "")
           for pg in api.items(f"{VOLCANO_API}/namespaces/{NS}/podgroups")}
    return Outcome(which, pods, pgs, settled, round(seconds, 2), sessions)


# ------------------------------------------------------------------------------------------
# The same world through tidesched's core in this process (no API server): sessions until
# nothing changes, each session's binds and evictions applied as a kubelet would. For reading a
# mismatch (``--local``): which session decided what, and why (eviction reasons).


def local_run(world: World, *, config: str | None = None, max_sessions: int = 20,
              trace: Callable[[str], None] | None = None, v170: frozenset[str] = frozenset(),
              fired: Any = None, seed: int | None = None, deliberate: frozenset[str] = frozenset(),
              seen: Any = None, guide: Any = None, uids: dict[str, str] | None = None) -> Outcome:
    """``v170``: the parts (allocate, preempt, reclaim, session, binpack) run as Volcano
    v1.7.0's (``differential_v170``); ``fired`` collects the differences that decided
    something; ``seed``: vc-scheduler's random choices drawn from it; ``deliberate``: Volcano's
    rule where tidesched differs on purpose (``differential_deliberate``), ``seen`` collecting
    where it decided otherwise; ``guide``: equal node scores broken as a vc-scheduler run broke
    them (``differential_ties``); ``uids``: the pods' uids as a run of the world had them
    (:func:`run_uids`; else namespace/name), since Volcano and tidesched break some ties by pod
    uid (gangpreempt's and gangreclaim's bundles)."""
    from differential_deliberate import volcano_rules
    from differential_ties import following
    from differential_v170 import emulating

    ties = following(guide) if guide is not None else contextlib.nullcontext()
    with emulating(v170, fired, seed), volcano_rules(deliberate, seen), ties:
        return _local_run(world, config=config, max_sessions=max_sessions, trace=trace, uids=uids)


def run_uids(out: Outcome | None) -> dict[str, str] | None:
    """The pods' uids in the run ``out`` (None when it recorded none)."""
    return dict(out.uids) if out is not None and out.uids else None


def _local_run(world: World, *, config: str | None, max_sessions: int,
               trace: Callable[[str], None] | None, uids: dict[str, str] | None = None) -> Outcome:
    from tidesched.model.loader import Manifest
    from tidesched.scheduler import config_from_text, schedule_manifests

    cfg = config_from_text(config or world.config, "<world config>")
    objs = world.manifests()
    base = 1_700_000_000.0
    for i, m in enumerate(objs):
        md = m["metadata"]
        if m["kind"] == "Pod" and uids and md["name"] in uids:
            md["uid"] = uids[md["name"]]
        md.setdefault("uid", f"{md.get('namespace', '')}/{md['name']}")
        # PodGroups one second apart in name order (as created), everything else at the start.
        order = i if m["kind"] == "PodGroup" else 0
        md["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(base + order))
    pods = {m["metadata"]["name"]: m for m in objs if m["kind"] == "Pod"}
    all_uids = {name: m["metadata"]["uid"] for name, m in pods.items()}
    pgs = {m["metadata"]["name"]: m for m in objs if m["kind"] == "PodGroup"}
    quiet = 0
    n = 0
    for n in range(1, max_sessions + 1):
        manifests = [Manifest(f"{m['kind']}/{m['metadata']['name']}", m) for m in objs]
        _ssn, d = schedule_manifests(manifests, cfg, now=base + 100 + n,
                                     ignored_provisioners=differential_objects.SCHEDULER_ARGS[1:])
        differential_objects.after_session(objs, d)
        changed = False
        differential_claims.apply_writes(objs, d)
        for key, node in d.bound.items():
            p = pods[key.split("/", 1)[1]]
            p["spec"]["nodeName"] = node
            p["status"] = {"phase": "Running"}
            changed = True
        for key in d.evicted:
            name = key.split("/", 1)[1]
            objs.remove(pods.pop(name))
            changed = True
            if trace:
                trace(f"session {n}: evict {name}: {d.eviction_reasons.get(key, '')}")
        for key, node in d.nominated.items():  # as run's status writer
            pods[key.split("/", 1)[1]].setdefault("status", {})["nominatedNodeName"] = node
        for key, phase in d.podgroups.items():
            pg = pgs.get(key.split("/", 1)[1])
            if pg is not None and pg["status"].get("phase") != phase:
                pg["status"]["phase"] = phase
                changed = True
        for key, conds in d.podgroup_conditions.items():
            pg = pgs.get(key.split("/", 1)[1])
            if pg is not None:
                pg["status"]["conditions"] = conds
        if trace:
            for key, node in sorted(d.bound.items()):
                trace(f"session {n}: bind {key.split('/', 1)[1]} -> {node}")
            for key, node in sorted(d.pipelined.items()):
                trace(f"session {n}: pipelined {key.split('/', 1)[1]} -> {node}")
        quiet = 0 if changed else quiet + 1
        if quiet >= 2 and differential_objects.lift_local_gates(world, pods):
            quiet = 0
        if quiet >= 2:
            break
    out = {name: {"node": p["spec"].get("nodeName"), "phase": (p.get("status") or {}).get("phase", ""),
                  "deleting": False}
           for name, p in pods.items()}
    return Outcome("tidesched-local", out, {k: v["status"].get("phase", "") for k, v in pgs.items()},
                   quiet >= 2, 0.0, n, uids=all_uids)


# ------------------------------------------------------------------------------------------
# Comparing


@dataclass
class JobResult:
    bound: int
    evicted: int
    reached: bool
    phase: str


def job_results(world: World, out: Outcome) -> dict[str, JobResult]:
    res = {}
    for j in world.jobs:
        bound = evicted = 0
        for p in world.pods_of(j.name):
            o = out.pods.get(p.name)
            if o is None or o["deleting"]:
                evicted += 1
            elif o["node"]:
                bound += 1
        res[j.name] = JobResult(bound, evicted, bound >= j.min_member, out.podgroups.get(j.name, "(gone)"))
    return res


def queue_bound(world: World, out: Outcome) -> dict[str, int]:
    res: dict[str, int] = {q.name: 0 for q in world.queues}
    for name, r in job_results(world, out).items():
        q = world.job(name).queue
        res[q] = res.get(q, 0) + r.bound
    return res


@dataclass(frozen=True)
class Diff:
    what: str  # job-bound, job-evicted, job-reached, job-phase, queue-bound, forced-node, unsettled
    subject: str  # job, queue or pod name; "" for unsettled
    vc: Any
    tide: Any

    def __str__(self) -> str:
        return f"{self.what} {self.subject}: vc-scheduler {self.vc!r}, tidesched {self.tide!r}"


def compare(world: World, vc: Outcome, ts: Outcome) -> list[Diff]:
    diffs: list[Diff] = []
    if not vc.settled or not ts.settled:
        diffs.append(Diff("unsettled", "", vc.settled, ts.settled))
    a, b = job_results(world, vc), job_results(world, ts)
    for name in sorted(a):
        x, y = a[name], b[name]
        for f in ("bound", "evicted", "reached", "phase"):
            if getattr(x, f) != getattr(y, f):
                diffs.append(Diff(f"job-{f}", name, getattr(x, f), getattr(y, f)))
    qa, qb = queue_bound(world, vc), queue_bound(world, ts)
    for q in sorted(qa):
        if qa[q] != qb[q]:
            diffs.append(Diff("queue-bound", q, qa[q], qb[q]))
    for p in world.pods:
        forced = forced_node(world, p) or differential_objects.pinned_node(world, p.name)
        na, nb = (vc.pods.get(p.name) or {}).get("node"), (ts.pods.get(p.name) or {}).get("node")
        if forced and na and nb and na != nb:
            diffs.append(Diff("forced-node", p.name, na, nb))
    va, vb = differential_topology.violations(world, vc), differential_topology.violations(world, ts)
    for name in sorted(va.keys() | vb.keys()):
        diffs.append(Diff("hard-topology", name, va.get(name), vb.get(name)))
    return diffs


# ------------------------------------------------------------------------------------------
# Explained mismatches
#
# The known differences are differential_v170.DIFFERENCES: where Volcano v1.7.0 decides
# otherwise than master (which tidesched follows), each with the master commit that changed it
# (docs/fidelity.md, "Differential runs against vc-scheduler v1.7.0"). A mismatch is explained
# when the world, replayed in this process through tidesched's framework and plugins with
# v1.7.0's variant of some parts (differential_v170: allocate, preempt, reclaim, the PodGroup
# phase at session close, binpack), gives vc-scheduler's outcome — vc-scheduler's random choices
# drawn from one of a few seeds — while the plain replay gives tidesched's live outcome. The
# explanation names the differences that acted in that replay; a part needed for the match in
# which no listed difference acted is no explanation (a difference not listed yet, or a bug).
# Failing that, tidesched's own rules replayed with vc-scheduler's random tie-breaks (no v1.7.0
# part) may give vc-scheduler's outcome: Volcano's luck (RANDOM_CHOICE), not a difference.


@dataclass
class Explanation:
    keys: list[str]  # differential_v170.DIFFERENCES or differential_deliberate.DELIBERATE that acted
    parts: list[str]  # v1.7.0 parts the replay needed
    seed: int | None  # the replay's seed for vc-scheduler's random choices
    examples: dict[str, str]
    note: str = ""  # why it is no explanation (then keys may still be listed)

    @property
    def explains(self) -> bool:
        return bool(self.keys) and not self.note

    def text(self) -> str:
        from differential_deliberate import DELIBERATE
        from differential_v170 import DIFFERENCES

        if self.note:
            return self.note
        if self.keys == [RANDOM_CHOICE] and self.examples.get(RANDOM_CHOICE) == UID_TIES:
            return ("Volcano's random choices: tidesched's own rules give vc-scheduler's outcome with the pod "
                    "uids its run had (ties broken by pod uid, e.g. between gang actions' bundles; the API "
                    "server draws uids at random)")
        if self.keys == [RANDOM_CHOICE] and self.seed is None:
            return ("Volcano's random choices: tidesched's own rules give vc-scheduler's outcome with equal "
                    "node scores broken as vc-scheduler's log shows it broke them (tidesched takes the first "
                    "by name)")
        if self.keys == [RANDOM_CHOICE]:
            return ("Volcano's random choices: tidesched's own rules give vc-scheduler's outcome with equal "
                    f"node scores broken as drawn by seed {self.seed} (tidesched takes the first by name)")
        if all(k in DELIBERATE for k in self.keys):
            names = ", ".join(f"{k} ({DELIBERATE[k].reference})" for k in self.keys)
            chance = "" if self.seed is None else f"; vc-scheduler's random choices as drawn by seed {self.seed}"
            return f"deliberately not as Volcano: {names}{chance}"
        names = ", ".join(f"{k} (master {DIFFERENCES[k].commit})" for k in self.keys)
        chance = "" if self.seed is None else f"; vc-scheduler's random choices as drawn by seed {self.seed}"
        return f"Volcano v1.7.0 vs master: {names}{chance}"


EMULATION_SEEDS = 64
# A mismatch that Volcano's own randomness explains (a rerun of vc-scheduler, or a replay of
# tidesched's rules with vc-scheduler's random tie-breaks) rather than a v1.7.0/master difference.
RANDOM_CHOICE = "volcano-random-choice"
UID_TIES = "pod uids as vc-scheduler's run had them"


def _matches(world: World, out: Outcome, samples: list[Outcome]) -> bool:
    return any(s.settled and not compare(world, s, out) for s in samples)


def explain(world: World, vc_samples: list[Outcome], ts: Outcome, version: str = V115) -> Explanation | None:
    """An explanation of why vc-scheduler's outcomes (``vc_samples``: its runs of the world)
    differ from tidesched's ``ts``, or None when neither the v1.7.0 replay (against vc-scheduler
    v1.7.0 only: against v1.15.1 no difference is explained by version) nor a replay of
    tidesched's rules with Volcano's random tie-breaks reproduces any of them."""
    from differential_v170 import PARTS

    vc_samples = [s for s in vc_samples if s.settled and compare(world, s, ts)]
    if not ts.settled or not vc_samples:
        return None  # (a run of vc-scheduler that gives tidesched's outcome is the caller's to weigh)
    plain = local_run(world, uids=run_uids(ts))
    if compare(world, plain, ts):
        first = "; ".join(str(d) for d in compare(world, plain, ts)[:3])
        return Explanation([], [], None, {}, note=f"tidesched's live run differs from its in-process replay "
                           f"({first}): timing, not a rule")
    conf = yaml.safe_load(world.config)
    plugins = {p["name"] for t in conf.get("tiers") or [] for p in t.get("plugins") or []}
    actions = {a.strip() for a in conf["actions"].split(",")}
    parts = [p for p in PARTS if p in actions or p in plugins or p == "session"
             or (p == "victims" and actions & {"preempt", "reclaim"})]
    if version != V170:
        expl = _explain_by_deliberate(world, vc_samples)
        if expl is not None and expl.explains:
            return expl
        return _explain_by_luck(world, vc_samples)
    expl = _explain_by_v170(world, vc_samples, parts)
    if expl is not None and expl.explains:
        return expl
    return _explain_by_luck(world, vc_samples) or expl


def _explain_by_luck(world: World, vc_samples: list[Outcome]) -> Explanation | None:
    """tidesched's own rules with equal node scores broken as vc-scheduler broke them (read
    from its log), or at random as Volcano breaks them: an explanation when that gives one of
    vc-scheduler's outcomes."""
    for sample in vc_samples:
        choices, guide = _guide(world, sample)
        if choices and _matches(world, local_run(world, guide=guide, uids=run_uids(sample)), [sample]) \
                and guide.followed:
            return Explanation([RANDOM_CHOICE], [], None,
                               {RANDOM_CHOICE: f"{guide.followed} tie(s) broken as vc-scheduler's log shows"})
    for uids, samples in _by_uids(vc_samples):
        if uids and _matches(world, local_run(world, uids=uids), samples):
            return Explanation([RANDOM_CHOICE], [], None, {RANDOM_CHOICE: UID_TIES})
    for seed in range(1, EMULATION_SEEDS + 1):
        for uids, samples in _by_uids(vc_samples):
            if _matches(world, local_run(world, seed=seed, uids=uids), samples):
                return Explanation([RANDOM_CHOICE], [], seed, {RANDOM_CHOICE: f"ties drawn by seed {seed}"})
    return None


def _guide(world: World, sample: Outcome) -> tuple[dict[str, list[str]], Any]:
    """vc-scheduler's random choices in the run ``sample`` (read from its log), and a Guide that
    follows them (realigned after the world's gates are lifted)."""
    from differential_ties import Guide, vc_choices, vc_choices_after_lift, vc_victims

    if not sample.log:
        return {}, Guide({}, [])
    choices = vc_choices(sample.log)
    lifted = (world.objects or {}).get("lift") or ()
    after_lift = vc_choices_after_lift(sample.log, lifted) if lifted else None
    return choices, Guide(choices, vc_victims(sample.log), after_lift)


def _by_uids(samples: list[Outcome]) -> list[tuple[dict[str, str] | None, list[Outcome]]]:
    """The samples grouped by the pod uids their runs had (one replay per group)."""
    groups: dict[tuple[tuple[str, str], ...], list[Outcome]] = {}
    for sample in samples:
        groups.setdefault(tuple(sorted((run_uids(sample) or {}).items())), []).append(sample)
    return [(dict(key) or None, group) for key, group in groups.items()]


def _explain_by_deliberate(world: World, vc_samples: list[Outcome]) -> Explanation | None:
    """tidesched's rules with Volcano's where tidesched differs on purpose (``DELIBERATE``): an
    explanation when that replay gives one of vc-scheduler's outcomes and Volcano's rule decided
    otherwise than tidesched's somewhere in it."""
    from differential_deliberate import DELIBERATE, Seen

    everything = frozenset(DELIBERATE)
    for sample in vc_samples:  # ties broken as this run broke them
        choices, guide = _guide(world, sample)
        seen = Seen()
        if choices and _matches(world, local_run(world, deliberate=everything, seen=seen, guide=guide,
                                                 uids=run_uids(sample)), [sample]) and seen.seen:
            return Explanation(sorted(seen.seen), [], None, dict(seen.seen))
    for seed in (None, *range(1, EMULATION_SEEDS + 1)):
        for uids, samples in _by_uids(vc_samples):
            seen = Seen()
            if _matches(world, local_run(world, seed=seed, deliberate=everything, seen=seen, uids=uids), samples):
                if not seen.seen:
                    return None  # nothing deliberate acted: the random-choice replay says more
                return Explanation(sorted(seen.seen), [], seed, dict(seen.seen))
    return None


def _explain_by_v170(world: World, vc_samples: list[Outcome], parts: list[str]) -> Explanation | None:
    """The replay with v1.7.0's variant of ``parts`` (then of as few of them as still give
    vc-scheduler's outcome), and the listed differences that acted in it."""
    from differential_v170 import DIFFERENCES, Fired

    found: tuple[int | None, Outcome] | None = None
    for seed in (None, *range(1, EMULATION_SEEDS + 1)):
        out = local_run(world, v170=frozenset(parts), seed=seed)
        if _matches(world, out, vc_samples):
            found = (seed, out)
            break
    if found is None:
        return None
    seed = found[0]
    keep = list(parts)
    for p in list(keep):
        trial = [q for q in keep if q != p]
        if _matches(world, local_run(world, v170=frozenset(trial), seed=seed), vc_samples):
            keep = trial
    if not keep:
        # tidesched's own rules give vc-scheduler's outcome once ties are drawn as Volcano
        # draws them (the plain replay, ties by node name, gave tidesched's).
        return Explanation([RANDOM_CHOICE], [], seed, {RANDOM_CHOICE: f"ties drawn by seed {seed}"})
    fired = Fired()
    local_run(world, v170=frozenset(keep), seed=seed, fired=fired)
    keys = [k for k in DIFFERENCES if k in fired.seen]
    silent = [p for p in keep if not any(DIFFERENCES[k].part.find(p) >= 0 for k in keys)]
    note = ""
    if silent:
        note = (f"the v1.7.0 replay of {', '.join(silent)} gives vc-scheduler's outcome, but no listed "
                "difference acted there: a difference not listed yet, or a tidesched bug")
    return Explanation(keys, keep, seed, {k: fired.seen[k] for k in keys}, note)


# ------------------------------------------------------------------------------------------
# Driving


@dataclass
class Verdict:
    seed: int
    kind: str
    status: str  # match, explained, unexplained
    diffs: list[str]
    explanation: str = ""
    seconds: float = 0.0
    table: str = ""
    keys: list[str] = field(default_factory=list)  # the differences that explain it
    examples: dict[str, str] = field(default_factory=dict)


class Runner:
    """Two planes (one per scheduler), used for one world after another (``fresh``: new planes
    per world), the two runs of a world side by side."""

    def __init__(self, assets: Path, volcano: Path, opts: Options, out: Path, *, fresh: bool = False) -> None:
        self.assets, self.volcano, self.opts, self.out, self.fresh = assets, volcano, opts, out, fresh
        self.planes: dict[str, Plane] = {}

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        for p in self.planes.values():
            p.close()
        self.planes.clear()

    def _planes(self) -> dict[str, Plane]:
        if self.fresh:
            self.close()
        missing = [w for w in SCHEDULERS if w not in self.planes]
        if missing:
            with ThreadPoolExecutor(len(missing)) as pool:
                made = list(pool.map(lambda w: Plane(self.assets, self.volcano), missing))
            self.planes.update(zip(missing, made))
        return self.planes

    def run_pair(self, world: World, which: tuple[str, ...] = SCHEDULERS) -> dict[str, Outcome]:
        planes = self._planes()
        with ThreadPoolExecutor(len(which)) as pool:
            futs = {w: pool.submit(run_world, planes[w], world, w, self.opts, planes[w].cp.workdir / "run")
                    for w in which}
            return {w: f.result() for w, f in futs.items()}

    def judge(self, world: World, reruns: int = 2) -> Verdict:
        t0 = time.monotonic()
        outs = self.run_pair(world)
        vc, ts = outs["vc-scheduler"], outs["tidesched"]
        diffs = compare(world, vc, ts)
        verdict = Verdict(world.seed, world.kind, "match", [str(d) for d in diffs],
                          table=summary_table(world, vc, ts))
        if diffs:
            # Set aside before the reruns write theirs to the same file.
            self._keep_log(vc, "vc-scheduler-first")
            samples = [vc]
            expl = explain(world, samples, ts, self.opts.volcano)
            for i in range(reruns):
                if expl is not None and expl.explains:
                    break
                again = self.run_pair(world, ("vc-scheduler",))["vc-scheduler"]
                self._keep_log(again, f"vc-scheduler-rerun{i + 1}")
                samples.append(again)
                if again.settled and ts.settled and not compare(world, again, ts):
                    verdict.status = "explained"
                    verdict.explanation = (f"vc-scheduler's rerun {i + 1} gave tidesched's outcome: "
                                           "Volcano's random choices (equal node scores, Go map order)")
                    verdict.keys = [RANDOM_CHOICE]
                    break
                expl = explain(world, samples, ts, self.opts.volcano)
            if verdict.status == "match":
                if expl is not None and expl.explains:
                    verdict.status = "explained"
                    verdict.explanation = expl.text()
                    verdict.keys = list(expl.keys)
                    verdict.examples = dict(expl.examples)
                else:
                    verdict.status = "unexplained"
                    if expl is not None:
                        verdict.explanation = expl.text()
            self.write_mismatch(world, vc, ts, diffs, verdict, samples[1:])
        verdict.seconds = round(time.monotonic() - t0, 1)
        return verdict

    def _keep_log(self, out: Outcome, name: str) -> None:
        src = Path(out.log)
        if src.exists():
            dst = src.with_name(f"{name}.log")
            shutil.copy(src, dst)
            out.log = str(dst)

    def write_mismatch(self, world: World, vc: Outcome, ts: Outcome, diffs: list[Diff], verdict: Verdict,
                       reruns: list[Outcome]) -> Path:
        d = self.out / world_id(world)
        d.mkdir(parents=True, exist_ok=True)
        (d / "world.json").write_text(json.dumps(world.to_json(), indent=1))
        (d / "scheduler.conf").write_text(world.config)
        (d / "objects.yaml").write_text(yaml.safe_dump_all(world.manifests(), sort_keys=False))
        for o in (vc, ts):
            (d / f"outcome-{o.scheduler}.json").write_text(json.dumps(o.to_json(), indent=1))
            if o.log and Path(o.log).exists():
                shutil.copy(o.log, d / f"{o.scheduler}.log")
        for i, o in enumerate(reruns, 1):
            (d / f"outcome-vc-scheduler-rerun{i}.json").write_text(json.dumps(o.to_json(), indent=1))
            if o.log and Path(o.log).exists():
                shutil.copy(o.log, d / f"vc-scheduler-rerun{i}.log")
        (d / "verdict.json").write_text(json.dumps(asdict(verdict), indent=1))
        (d / "diffs.txt").write_text("\n".join(str(x) for x in diffs) + "\n")
        return d


def world_id(w: World | Verdict) -> str:
    """A world's name in reports and mismatch directories: seed-N, or PRESET-N."""
    return f"seed-{w.seed}" if w.kind == "random" else f"{w.kind}-{w.seed}"


def summary_table(world: World, vc: Outcome, ts: Outcome) -> str:
    a, b = job_results(world, vc), job_results(world, ts)
    rows = ["job   queue  minMember pods | vc: bound evicted phase | tidesched: bound evicted phase"]
    for j in world.jobs:
        x, y = a[j.name], b[j.name]
        rows.append(f"{j.name:<5} {j.queue:<6} {j.min_member:>9} {len(world.pods_of(j.name)):>4} | "
                    f"{x.bound:>9} {x.evicted:>7} {x.phase:<8} | {y.bound:>16} {y.evicted:>7} {y.phase}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1, help="first seed (1)")
    ap.add_argument("--worlds", type=int, default=10, help="how many random worlds (10)")
    ap.add_argument("--only", type=int, metavar="SEED", help="run only the world of SEED")
    ap.add_argument("--replay", type=Path, metavar="DIR", help="run the world saved in DIR/world.json")
    ap.add_argument("--preset", metavar="NAMES",
                    help=f"hand-made worlds instead: comma-separated, or all ({', '.join(PRESETS)})")
    ap.add_argument("--out", type=Path, default=Path("differential-out"), help="mismatches go here")
    ap.add_argument("--reruns", type=int, default=2, help="vc-scheduler reruns of a mismatching world (2)")
    ap.add_argument("--period", type=float, default=0.5, help="--schedule-period of both, seconds (0.5)")
    ap.add_argument("--quiet", type=float, default=3.0,
                    help="settled after this many seconds without change (3)")
    ap.add_argument("--fresh", action="store_true",
                    help="new control planes for every world (default: the same two, emptied between worlds)")
    ap.add_argument("--show", action="store_true", help="print each world's job table")
    ap.add_argument("--volcano", choices=(V115, V170), default=V115,
                    help="vc-scheduler's version (default %(default)s; 1.7.0 explains differences by version)")
    ap.add_argument("--local", action="store_true",
                    help="no control plane: replay the world(s) through tidesched's core in this process, "
                         "printing each session's binds, pipelines and evictions")
    args = ap.parse_args(argv)
    assets, missing = find_assets()
    volcano, vc_missing = find_volcano(binaries=("vc-scheduler",), version=args.volcano)
    if (assets is None or volcano is None) and not args.local:
        print(f"cannot run: {missing or vc_missing}", file=sys.stderr)
        return 2
    if args.replay:
        saved = json.loads((args.replay / "world.json").read_text())
        worlds: Iterator[World] = iter([World.from_json(saved)])
        total = 1
    elif args.preset:
        names = list(PRESETS) if args.preset == "all" else args.preset.split(",")
        unknown = [n for n in names if n not in PRESETS]
        if unknown:
            ap.error(f"unknown preset {', '.join(unknown)} (choose from {', '.join(PRESETS)} or all)")
        worlds, total = (for_version(PRESETS[n](args.seed), args.volcano) for n in names), len(names)
    elif args.only is not None:
        worlds, total = iter([generate(args.only, args.volcano)]), 1
    else:
        worlds, total = (generate(s, args.volcano) for s in range(args.seed, args.seed + args.worlds)), args.worlds
    if args.local:
        for world in worlds:
            print(f"seed {world.seed} ({world.kind}), tidesched's core in this process:")
            out = local_run(world, trace=lambda line: print("   ", line))
            res = job_results(world, out)
            print("    job   queue  minMember pods  bound evicted phase")
            for j in world.jobs:
                r = res[j.name]
                print(f"    {j.name:<5} {j.queue:<6} {j.min_member:>9} {len(world.pods_of(j.name)):>4} "
                      f"{r.bound:>6} {r.evicted:>7} {r.phase}")
        return 0
    opts = Options(period=args.period, quiet=args.quiet, volcano=args.volcano)
    verdicts = run_worlds(worlds, total, assets, volcano, opts, args.out, fresh=args.fresh,
                          reruns=args.reruns, show=args.show)
    print(report(verdicts, args.out))
    return 1 if any(v.status == "unexplained" for v in verdicts) else 0


def for_version(world: World, version: str) -> World:
    world.root_queue = version == V115
    return world


def run_worlds(worlds: Iterator[World], total: int, assets: Path, volcano: Path, opts: Options, out: Path, *,
               fresh: bool = False, reruns: int = 2, show: bool = False,
               say: Callable[[str], None] = lambda s: print(s, flush=True)) -> list[Verdict]:
    verdicts: list[Verdict] = []
    with Runner(assets, volcano, opts, out, fresh=fresh) as runner:
        for i, world in enumerate(worlds, 1):
            try:
                v = runner.judge(world, reruns)
            except Exception as exc:  # noqa: BLE001 - one broken run must not lose the rest
                v = Verdict(world.seed, world.kind, "unexplained", [],
                            explanation=f"run failed: {exc!r}"[:2000])
                runner.close()  # fresh control planes for the next world
            verdicts.append(v)
            say(f"[{i}/{total}] seed {world.seed} ({world.kind}): {v.status} in {v.seconds:.0f}s"
                + (f" — {v.explanation}" if v.explanation else ""))
            for d in v.diffs if v.status != "match" else ():
                say(f"    {d}")
            if show:
                say("    " + v.table.replace("\n", "\n    "))
    return verdicts


def report(verdicts: list[Verdict], out: Path) -> str:
    counts = {"match": 0, "explained": 0, "unexplained": 0}
    by_key: dict[str, list[str]] = {}
    for v in verdicts:
        counts[v.status] += 1
        for k in v.keys:
            by_key.setdefault(k, []).append(world_id(v))
    lines = [f"\n{len(verdicts)} worlds, {counts['match']} match, {counts['explained']} explained, "
             f"{counts['unexplained']} unexplained"]
    if by_key:
        lines.append("explained by (a world may count under several):")
        for k, seeds in sorted(by_key.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"  {k}: {len(seeds)} ({', '.join(seeds[:12])}{', ...' if len(seeds) > 12 else ''})")
    bad = [v for v in verdicts if v.status == "unexplained"]
    if bad:
        lines.append("unexplained: " + ", ".join(world_id(v) for v in bad))
    if counts["explained"] or counts["unexplained"]:
        lines.append(f"mismatches written to {out}/")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
