"""Chaos simulations (REL-1..3, SIM-3): a seeded random cluster and workload over a simulated
day with faults injected, every invariant checked at every step, and a failing run shrunk to
a small scenario file that reproduces it.

* :func:`generate` builds, from a seed alone, a scenario *document* (the mapping a scenario
  file holds): card nodes of several models (whole cards, MIG slices, alternatives), CPU
  nodes, a queue tree (``root`` → ``online``/``offline`` → leaves with ``volcano.sh/card.quota``)
  under the capacity-card plugin with tidal reclaim, inference Deployments scaled up by day and
  down by night, training gangs (Volcano Jobs) submitted through the day — and faults, written
  as ordinary scenario events (:data:`FAULT_KINDS`); on most seeds also vGPU nodes, GPU-share
  workloads and device faults (:mod:`tidesched.sim.chaos_vgpu`); DRA GPUs as ResourceSlices,
  gangs claiming them from templates, node and slice faults (:mod:`tidesched.sim.chaos_dra`).
* :func:`run_document` runs a document through the normal loader and simulator, so a written
  file (:func:`dump_document`) replays exactly the same run with ``tidesched simulate FILE``.
* :func:`shrink` cuts a failing document down while *the same invariant* still fails: first
  the simulated time is cut just after the first violation, then chunks of events and of
  objects are removed (delta debugging, ddmin) until no single one can go.

Nothing here schedules: the chaos is only in the input; the world, controllers, invariants and
the scheduling core are the ones every simulation uses.
"""

from __future__ import annotations

import copy
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tidesched.sim.chaos_dra import add_dra
from tidesched.sim.chaos_vgpu import add_vgpu
from tidesched.sim.invariants import RULE_RESTART
from tidesched.sim.runner import SimulationRun, run
from tidesched.sim.events import Scenario
from tidesched.sim.vocabulary import ScenarioError, parse_duration
from tidesched.sim.scenario import scenario_from_mapping

DAY = 86400.0
PERIOD = 1.0

# Fault kinds and the scenario event that injects each (docs/simulator.md lists them).
FAULT_KINDS = {
    "node-lost": "removeNode",
    "node-returned": "addNode (the lost node, as it was)",
    "node-not-ready": "setNode ready: false",
    "node-ready": "setNode ready: true",
    "cordon": "cordon",
    "uncordon": "uncordon",
    "quota-raised": "setQuota cardQuota (more cards)",
    "quota-lowered": "setQuota cardQuota (fewer cards, often below what the queue uses)",
    "queue-closed": "setQuota state: Closed",
    "queue-opened": "setQuota state: Open",
    "mig-split": "setNode allocatable: whole cards re-split into MIG slices",
    "mig-merge": "setNode allocatable: the slices merged back into whole cards",
    "pod-failed": "failPod (a running pod of a Job or Deployment ends Failed; its policy restarts it)",
    "podgroup-deleted": "delete PodGroup of a training job, seconds after an inference scale-up (mid-reclaim)",
    "job-deleted": "delete Job while it runs",
    "config-reload": "setConfig (another scheduler config: actions, plugin arguments)",
    "device-unhealthy": "submit Node: a vGPU node re-registers one device unhealthy (running pods stay on it)",
    "device-healthy": "submit Node: the device registered healthy again",
    "slice-republished": "submit ResourceSlice: a DRA driver republishes a node's GPUs under a new pool generation",
}
# Workload events (not faults, but counted beside them).
WORKLOAD_KINDS = ("scale-up", "scale-down", "job-submitted")

# --------------------------------------------------------------------------------------------
# Card models and node shapes


@dataclass(frozen=True)
class _Model:
    product: str  # nvidia.com/gpu.product
    cards: int  # per node
    cpu: int
    memory_gi: int
    mig: tuple[tuple[str, int], ...] = ()  # MIG profiles and slices per card


_MODELS = (
    _Model("NVIDIA-H200", 8, 192, 2048, (("1g.18gb", 7), ("3g.71gb", 2))),
    _Model("NVIDIA-A100-SXM4-80GB", 8, 128, 1024, (("1g.10gb", 7), ("3g.40gb", 2))),
    _Model("NVIDIA-GeForce-RTX-4090", 8, 64, 512),
)
_PRIORITY_CLASSES = (("pc-high", 80000), ("pc-medium", 60000), ("pc-low", 40000), ("pc-lowest", 20000))


def _slice_model(m: _Model, profile: str) -> str:
    return f"{m.product}/mig-{profile}-mixed"


# --------------------------------------------------------------------------------------------
# Scheduler configs: the base (seed 000's tidal config, as the tidal-day example) and variants
# that config reloads switch between. Every variant keeps gang-safe reclaim and predicates.

_BASE_TIER1 = """- plugins:
  - name: priority
  - name: gang
    enableReclaimable: false
    enableJobStarving: false
  - name: conformance
    enableReclaimable: false"""


def _config(
    actions: str, over_commit: float = 2.0, unlimited: bool = True, extra: str = "", starving: bool = False,
    policy: str = "binpack",
) -> str:
    tier1 = _BASE_TIER1 if not starving else _BASE_TIER1.replace("    enableJobStarving: false\n", "")
    return (
        f'actions: "{actions}"\n'
        "tiers:\n"
        f"{tier1}\n"
        "- plugins:\n"
        "  - name: predicates\n"
        "  - name: capacity-card\n"
        "    arguments:\n"
        f"      overCommitFactor: {over_commit}\n"
        f"      cardUnlimitedCpuMemory: {'true' if unlimited else 'false'}\n"
        "      podOwnerReferenceToServiceType:\n"
        "        ReplicaSet: inference\n"
        "        Deployment: inference\n"
        "        Job: training\n"
        "  - name: nodeorder\n"
        "  - name: deviceshare\n"
        "    arguments:\n"
        "      deviceshare.VGPUEnable: true\n"
        f"      deviceshare.SchedulePolicy: {policy}\n"
        "      deviceshare.ScheduleWeight: 5\n"
        f"{extra}"
    )


CONFIGS = (
    _config("enqueue, allocate, backfill, reclaim"),
    _config("enqueue, allocate, reclaim, backfill", over_commit=1.2, unlimited=False),
    _config("enqueue, allocate, backfill, reclaim", extra="  - name: binpack\n", policy="spread"),
    _config("enqueue, allocate, backfill"),
    _config("enqueue, allocate, backfill, reclaim", over_commit=1.0, starving=True),
    _config("enqueue, allocate, preempt, reclaim, backfill"),
)

# --------------------------------------------------------------------------------------------
# Generation


@dataclass
class Generated:
    """A chaos scenario document and the fault kind of each of its events (same order)."""

    seed: int
    doc: dict[str, Any]
    kinds: list[str] = field(default_factory=list)


def _clock(t: float) -> str:
    t = int(t)
    d, rest = divmod(t, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return (f"{d}d" if d else "") + f"{h:02d}:{m:02d}:{s:02d}"


def _node(name: str, model: _Model | None, mig_strategy: bool) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if model is None:
        labels["resType"] = "CPU"
        alloc = {"cpu": "96", "memory": "384Gi", "pods": "110"}
    else:
        labels.update({"nvidia.com/gpu.product": model.product, "nvidia.com/gpu.count": str(model.cards)})
        if mig_strategy:
            labels["nvidia.com/mig.strategy"] = "mixed"
        alloc = {
            "cpu": str(model.cpu),
            "memory": f"{model.memory_gi}Gi",
            "pods": "110",
            "nvidia.com/gpu": str(model.cards),
        }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _queue(name: str, parent: str | None, priority: int, reclaimable: bool, quota: dict[str, int] | None,
           cpu: int, memory_gi: int) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if quota is not None:
        text = json.dumps(quota, sort_keys=True, separators=(",", ":"))
        md["annotations"] = {"volcano.sh/card.quota": text}
    spec: dict[str, Any] = {"weight": 1, "priority": priority, "reclaimable": reclaimable,
                            "capability": {"cpu": str(cpu), "memory": f"{memory_gi}Gi"}}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": md, "spec": spec}


def _container(cpu: int, mem_gi: int, res: str | None, count: int) -> dict[str, Any]:
    req = {"cpu": str(cpu), "memory": f"{mem_gi}Gi"}
    if res is not None:
        req[res] = str(count)
    return {"name": "main", "image": "busybox", "resources": {"requests": dict(req), "limits": dict(req)}}


class _Builder:
    """One seed's cluster, workload and faults."""

    def __init__(self, seed: int, hours: float) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.end = hours * 3600.0
        self.objects: list[dict[str, Any]] = []
        self.events: list[tuple[float, int, str, dict[str, Any]]] = []  # (t, seq, kind, event)
        self.nodes: list[dict[str, Any]] = []
        self.mig_nodes: list[tuple[str, _Model]] = []
        self.leaves: dict[str, list[str]] = {"online": [], "offline": []}
        self.quota: dict[str, dict[str, int]] = {}
        self.offers: list[tuple[str, str, _Model]] = []  # (card.name, resource, model) pods may ask
        self.capacity: Counter[str] = Counter()
        self.deployments: list[str] = []
        self.jobs: list[tuple[str, float]] = []  # (ns/name, submitted at)
        self.scale_ups: list[float] = []

    def event(self, t: float, kind: str, action: str, arg: Any) -> None:
        t = min(max(0.0, round(t)), self.end)
        self.events.append((t, len(self.events), kind, {"at": _clock(t), action: arg}))

    # -- cluster ------------------------------------------------------------------------

    def cluster(self) -> None:
        rng = self.rng
        models = [m for m in _MODELS if rng.random() < 0.8]
        if len(models) < 2:
            models = rng.sample(_MODELS, 2)
            models.sort(key=_MODELS.index)
        for m in models:
            for i in range(rng.randint(2, 5)):
                name = f"{m.product.split('-')[-1].lower()}-{i + 1:02d}"
                mig = bool(m.mig) and i == 0 and rng.random() < 0.7
                node = _node(name, m, mig)
                self.nodes.append(node)
                self.capacity[m.product] += m.cards
                if mig:
                    self.mig_nodes.append((name, m))
            self.offers.append((m.product, "nvidia.com/gpu", m))
        for name, m in self.mig_nodes:
            profile, per_card = m.mig[0] if self.rng.random() < 0.6 else m.mig[1]
            # Start with one card already split, so slices are there from t=0.
            node = next(n for n in self.nodes if n["metadata"]["name"] == name)
            node["status"]["allocatable"]["nvidia.com/gpu"] = str(m.cards - 1)
            node["status"]["allocatable"][f"nvidia.com/mig-{profile}"] = str(per_card)
            self.capacity[_slice_model(m, profile)] += per_card
            self.offers.append((_slice_model(m, profile), f"nvidia.com/mig-{profile}", m))
        if len(models) >= 2:
            a, b = models[0], models[1]
            self.offers.append((f"{a.product}|{b.product}", "nvidia.com/gpu", a))
        for i in range(rng.randint(1, 2)):
            self.nodes.append(_node(f"cpu-{i + 1:02d}", None, False))
        self.objects.extend(self.nodes)
        for name, value in _PRIORITY_CLASSES:
            self.objects.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 "metadata": {"name": name}, "value": value})

    def queues(self) -> None:
        rng = self.rng
        self.objects.append(_queue("root", None, 0, False, None, 100000, 100000))
        self.objects.append(_queue("online", "root", 80000, False, None, 50000, 50000))
        self.objects.append(_queue("offline", "root", 20000, True, None, 50000, 50000))
        models = sorted({o[0].split("|")[0] for o in self.offers})
        for group, prio, reclaimable in (("online", 80000, False), ("offline", 20000, True)):
            for i in range(rng.randint(1, 2)):
                name = f"{group}-{'ab'[i]}"
                quota = {}
                for m in models:
                    cap = self.capacity.get(m, 0)
                    if rng.random() < 0.9:  # mostly a fair share, now and then more than the cluster has
                        low = max(1, cap // (2 if group == "online" else 3))
                        quota[m] = rng.randint(low, int(cap * 1.3) + 1)
                self.quota[name] = quota
                self.leaves[group].append(name)
                self.objects.append(_queue(name, group, prio, reclaimable, quota, rng.choice((256, 1024, 4096)),
                                           rng.choice((1024, 8192, 32768))))

    # -- workload -----------------------------------------------------------------------

    def inference(self) -> None:
        rng = self.rng
        for i in range(rng.randint(3, 6)):
            name = f"serve-{i + 1}"
            card, res, m = rng.choice(self.offers)
            queue = rng.choice(self.leaves["online"])
            ann = {"volcano.sh/preemptable": "false"}
            if rng.random() < 0.7:
                ann["volcano.sh/service.type"] = "inference"  # else podOwnerReferenceToServiceType
            count = 1 if "mig" in res else rng.choice((1, 1, 2))
            dep = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": "online", "annotations": ann},
                "spec": {
                    "replicas": rng.randint(1, 2),
                    "selector": {"matchLabels": {"app": name}},
                    "template": {
                        "metadata": {
                            "labels": {"app": name},
                            "annotations": {"volcano.sh/card.name": card,
                                            "scheduling.volcano.sh/queue-name": queue},
                        },
                        "spec": {
                            "schedulerName": "volcano",
                            "priorityClassName": rng.choice(("pc-high", "pc-medium")),
                            "containers": [_container(rng.choice((4, 8, 16)), rng.choice((16, 64, 128)), res, count)],
                        },
                    },
                },
            }
            self.objects.append(dep)
            key = f"online/{name}"
            self.deployments.append(key)
            # Tidal: up through the morning, a peak by day, down in the evening.
            cap = self.capacity.get(card.split("|")[0], 8)
            peak = max(2, rng.randint(cap // 4, cap // 2 + 1) // count)
            replicas = dep["spec"]["replicas"]
            for hour in range(1, int(self.end // 3600)):
                target = peak if 9 <= hour % 24 <= 17 else (peak // 2 if 7 <= hour % 24 <= 20 else 1)
                target = max(0, target + rng.randint(-1, 1))
                if target != replicas and rng.random() < 0.6:
                    t = hour * 3600 + rng.randint(0, 3000)
                    kind = "scale-up" if target > replicas else "scale-down"
                    self.event(t, kind, "scale", {"deployment": key, "replicas": target})
                    if target > replicas:
                        self.scale_ups.append(float(t))
                    replicas = target

    def training(self) -> None:
        rng = self.rng
        gpu_offers = [o for o in self.offers if o[1] == "nvidia.com/gpu"] or self.offers
        for i in range(rng.randint(8, 18)):
            name = f"train-{i + 1}"
            card, res, m = rng.choice(gpu_offers)
            replicas = rng.randint(1, 4)
            min_avail = replicas if rng.random() < 0.75 else rng.randint(1, replicas)
            per_pod = rng.choice((1, 2, 2, 4, 4, 8)) if "|" not in card else rng.choice((1, 2))
            ann = {
                "volcano.sh/preemptable": "true" if rng.random() < 0.85 else "false",
                "sim.tidesched.io/duration": f"{rng.randint(2, 16)}h",
            }
            if rng.random() < 0.7:
                ann["volcano.sh/service.type"] = "training"
            if rng.random() < 0.5:
                ann["volcano.sh/card.request"] = json.dumps({card: per_pod * min_avail}, separators=(",", ":"))
            evicted = rng.choice(("RestartJob", "RestartJob", "RestartJob", "AbortJob", None))
            policies = [{"event": "TaskCompleted", "action": "CompleteJob"}]
            if evicted:
                policies.insert(0, {"event": "PodEvicted", "action": evicted})
            if rng.random() < 0.6:
                action = rng.choice(("RestartJob", "RestartTask", "AbortJob"))
                policies.insert(0, {"event": "PodFailed", "action": action})
            tasks = [{
                "name": "worker",
                "replicas": replicas,
                "template": {
                    "metadata": {"annotations": {"volcano.sh/card.name": card}},
                    "spec": {"restartPolicy": "Never",
                             "containers": [_container(rng.choice((8, 16, 32)), rng.choice((32, 64, 128)), res, per_pod)]},
                },
            }]
            if rng.random() < 0.3:  # a CPU master beside the workers (one gang)
                tasks.insert(0, {"name": "master", "replicas": 1, "template": {
                    "spec": {"restartPolicy": "Never", "containers": [_container(4, 16, None, 0)]}}})
                min_avail += 1
            job = {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": name, "namespace": "train", "annotations": ann},
                "spec": {
                    "minAvailable": min_avail,
                    "schedulerName": "volcano",
                    "queue": rng.choice(self.leaves["offline"]),
                    "priorityClassName": rng.choice(("pc-low", "pc-lowest")),
                    "maxRetry": rng.randint(2, 6),
                    "policies": policies,
                    "tasks": tasks,
                },
            }
            # Most training arrives at night and early morning, so inference must take cards back by day.
            at = 0.0 if rng.random() < 0.5 else rng.uniform(0, self.end * (0.3 if rng.random() < 0.6 else 0.9))
            if at == 0.0:
                self.objects.append(job)
            else:
                self.event(at, "job-submitted", "submit", job)
            self.jobs.append((f"train/{name}", at))

    # -- faults -------------------------------------------------------------------------

    def faults(self) -> None:
        rng = self.rng
        count = rng.randint(12, 40)
        card_nodes = [
            n["metadata"]["name"] for n in self.nodes if "nvidia.com/gpu.product" in n["metadata"]["labels"]
        ]
        all_nodes = [n["metadata"]["name"] for n in self.nodes]
        leaves = self.leaves["online"] + self.leaves["offline"]
        kinds = ["node-lost", "node-not-ready", "cordon", "quota", "queue-closed", "mig", "pod-failed",
                 "podgroup-deleted", "job-deleted", "config-reload"]
        weights = [3, 3, 2, 4, 1, 2 if self.mig_nodes else 0, 4, 3 if self.scale_ups else 0, 1, 2]
        for _ in range(count):
            kind = rng.choices(kinds, weights)[0]
            t = rng.uniform(60, self.end - 60)
            back = t + rng.uniform(60, 4 * 3600)
            if kind == "node-lost":
                name = rng.choice(card_nodes or all_nodes)
                self.event(t, "node-lost", "removeNode", name)
                if rng.random() < 0.8:
                    node = next(copy.deepcopy(n) for n in self.nodes if n["metadata"]["name"] == name)
                    self.event(back, "node-returned", "addNode", node)
            elif kind == "node-not-ready":
                name = rng.choice(all_nodes)
                self.event(t, "node-not-ready", "setNode", {"name": name, "ready": False})
                self.event(back, "node-ready", "setNode", {"name": name, "ready": True})
            elif kind == "cordon":
                name = rng.choice(all_nodes)
                self.event(t, "cordon", "cordon", name)
                self.event(back, "uncordon", "uncordon", name)
            elif kind == "quota":
                q = rng.choice(leaves)
                old = self.quota[q]
                new = {m: max(0, n + rng.randint(-n - 2, 8)) for m, n in old.items()}
                if rng.random() < 0.3:  # lower everything well below what is in use
                    new = {m: n // 3 for m, n in old.items()}
                self.quota[q] = new
                kind = "quota-raised" if sum(new.values()) >= sum(old.values()) else "quota-lowered"
                self.event(t, kind, "setQuota", {"queue": q, "cardQuota": new})
            elif kind == "queue-closed":
                q = rng.choice(leaves)
                self.event(t, "queue-closed", "setQuota", {"queue": q, "state": "Closed"})
                self.event(back, "queue-opened", "setQuota", {"queue": q, "state": "Open"})
            elif kind == "mig":
                name, m = rng.choice(self.mig_nodes)
                profile, per_card = rng.choice(m.mig)
                split = rng.randint(1, 3)
                alloc: dict[str, Any] = {"nvidia.com/gpu": str(m.cards - split)}
                for p, _n in m.mig:
                    alloc[f"nvidia.com/mig-{p}"] = str(per_card * split) if p == profile else None
                self.event(t, "mig-split", "setNode", {"name": name, "allocatable": alloc})
                merged = {"nvidia.com/gpu": str(m.cards), **{f"nvidia.com/mig-{p}": None for p, _ in m.mig}}
                self.event(back, "mig-merge", "setNode", {"name": name, "allocatable": merged})
            elif kind == "pod-failed":
                if self.deployments and rng.random() < 0.4:
                    target: dict[str, Any] = {"deployment": rng.choice(self.deployments)}
                else:
                    target = {"job": rng.choice(self.jobs)[0]}
                target["exitCode"] = rng.randint(1, 3)
                self.event(t, "pod-failed", "failPod", target)
            elif kind == "podgroup-deleted":
                at = rng.choice(self.scale_ups) + rng.uniform(1, 25)
                job = rng.choice(self.jobs)[0]
                self.event(at, "podgroup-deleted", "delete", {"kind": "PodGroup", "name": job})
            elif kind == "job-deleted":
                job, submitted = rng.choice(self.jobs)
                self.event(max(t, submitted + 600), "job-deleted", "delete", {"kind": "Job", "name": job})
            elif kind == "config-reload":
                self.event(t, "config-reload", "setConfig", {"config": rng.choice(CONFIGS)})

    def build(self) -> Generated:
        self.cluster()
        self.queues()
        self.inference()
        self.training()
        self.faults()
        add_vgpu(self)  # sim.chaos_vgpu: on most seeds, from its own random stream
        add_dra(self)  # sim.chaos_dra: on about half the seeds, from its own random stream
        self.events.sort(key=lambda e: (e[0], e[1]))
        doc = {
            "name": f"chaos-{self.seed}",
            "description": f"tidesched chaos scenario, generator seed {self.seed}",
            "schedulePeriod": PERIOD,
            "duration": _clock(self.end),
            "evictionGracePeriod": "30s",
            "deletionGracePeriod": "30s",
            "recordEvery": 0,
            "checkRestart": True,
            "scheduler": {"config": CONFIGS[0]},
            "objects": self.objects,
            "events": [e[3] for e in self.events],
        }
        return Generated(self.seed, doc, [e[2] for e in self.events])


def generate(seed: int, *, hours: float = 24.0) -> Generated:
    """The chaos scenario of ``seed``: the same seed always gives the same document."""
    return _Builder(seed, hours).build()


# --------------------------------------------------------------------------------------------
# Running, writing, shrinking


def to_scenario(doc: Mapping[str, Any], source: str = "<chaos>") -> Scenario:
    return scenario_from_mapping(copy.deepcopy(dict(doc)), source)


def run_document(doc: Mapping[str, Any], *, seed: int = 0, source: str = "<chaos>") -> SimulationRun:
    """Simulate a scenario document (through the normal loader, as a written file would be)."""
    return run(to_scenario(doc, source), seed=seed)


def first_rule(sim: SimulationRun) -> str | None:
    v = sim.result["invariants"]["violations"]
    return v[0]["rule"] if v else None


class _LiteralDumper(yaml.SafeDumper):
    pass


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_LiteralDumper.add_representer(str, _str_representer)


def dump_document(doc: Mapping[str, Any], header: str = "") -> str:
    """The scenario file text of a document (a leading comment block from ``header``)."""
    head = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return head + yaml.dump(dict(doc), Dumper=_LiteralDumper, sort_keys=False, width=120, allow_unicode=True)


def _parts(doc: Mapping[str, Any]) -> list[tuple[str, int]]:
    return [("objects", i) for i in range(len(doc.get("objects") or []))] + [
        ("events", i) for i in range(len(doc.get("events") or []))
    ]


def _subset(doc: Mapping[str, Any], keep: list[tuple[str, int]]) -> dict[str, Any]:
    out = dict(doc)
    wanted = set(keep)
    for section in ("objects", "events"):
        items = [x for i, x in enumerate(doc.get(section) or []) if (section, i) in wanted]
        if items:
            out[section] = items
        else:
            out.pop(section, None)
    return out


@dataclass
class ShrinkResult:
    doc: dict[str, Any]
    rule: str
    runs: int
    seconds: float
    objects_before: int
    events_before: int

    @property
    def objects(self) -> int:
        return len(self.doc.get("objects") or [])

    @property
    def events(self) -> int:
        return len(self.doc.get("events") or [])


def shrink(
    doc: Mapping[str, Any],
    rule: str,
    *,
    seed: int = 0,
    max_runs: int = 300,
    fails: Callable[[Mapping[str, Any]], bool] | None = None,
) -> ShrinkResult:
    """The smallest document found that still violates ``rule``: the run cut just after the
    first violation, then ddmin over objects and events (at most ``max_runs`` simulations).
    ``fails`` (document → bool) replaces "simulate and look for ``rule``" (tests)."""
    started = time.perf_counter()
    runs = 0

    def still_fails(candidate: Mapping[str, Any]) -> bool:
        nonlocal runs
        runs += 1
        if fails is not None:
            return fails(candidate)
        try:
            sim = run_document(candidate, seed=seed)
        except ScenarioError:  # a candidate the loader refuses simply does not reproduce
            return False
        return any(v["rule"] == rule for v in sim.result["invariants"]["violations"])

    current = dict(doc)
    if rule != RULE_RESTART and current.get("checkRestart"):
        # The restart check only adds its own rule; without it each try costs half as much.
        current["checkRestart"] = False
    before = (len(doc.get("objects") or []), len(doc.get("events") or []))
    # 1. Time: stop just after the first violation; later events cannot matter.
    if fails is None:
        sim = run_document(current, seed=seed)
        runs += 1
        hits = [v["t"] for v in sim.result["invariants"]["violations"] if v["rule"] == rule]
        if hits:
            end = float(hits[0]) + float(current.get("schedulePeriod") or 1)
            cut = dict(current, duration=_clock(end) if end.is_integer() else end)
            cut["events"] = [e for e in current.get("events") or [] if parse_duration(e["at"], "at") <= end]
            if not cut["events"]:
                cut.pop("events")
            if still_fails(cut):
                current = cut
    # 2. ddmin over the objects and events.
    parts = _parts(current)
    n = 2
    while len(parts) >= 2 and runs < max_runs:
        size = max(1, len(parts) // n)
        chunks = [parts[i:i + size] for i in range(0, len(parts), size)]
        removed = False
        for chunk in chunks:
            if runs >= max_runs:
                break
            rest = [p for p in parts if p not in chunk]
            if rest and still_fails(_subset(current, rest)):
                current = _subset(current, rest)
                parts = _parts(current)
                n = max(n - 1, 2)
                removed = True
                break
        if not removed:
            if size == 1:
                break
            n = min(n * 2, len(parts))
    return ShrinkResult(current, rule, runs, time.perf_counter() - started, *before)


@dataclass
class ChaosOutcome:
    generated: Generated
    sim: SimulationRun
    shrunk: ShrinkResult | None = None

    @property
    def failed(self) -> bool:
        return self.sim.failed

    def faults(self) -> Counter[str]:
        return Counter(self.generated.kinds)


def run_chaos(seed: int, *, hours: float = 24.0, sim_seed: int = 0, shrink_failures: bool = True,
              max_runs: int = 300) -> ChaosOutcome:
    """Generate and simulate the chaos scenario of ``seed``; shrink it when an invariant broke."""
    gen = generate(seed, hours=hours)
    sim = run_document(gen.doc, seed=sim_seed, source=f"chaos seed {seed}")
    outcome = ChaosOutcome(gen, sim)
    rule = first_rule(sim)
    if rule is not None and shrink_failures:
        outcome.shrunk = shrink(gen.doc, rule, seed=sim_seed, max_runs=max_runs)
    return outcome


def write_reproducer(outcome: ChaosOutcome, path: Path, sim_seed: int = 0) -> Path:
    """Write the (shrunk) failing scenario; ``tidesched simulate PATH`` fails the same way."""
    doc = outcome.shrunk.doc if outcome.shrunk is not None else outcome.generated.doc
    rule = outcome.shrunk.rule if outcome.shrunk is not None else first_rule(outcome.sim)
    cmd = f"tidesched simulate {path.name}" + (f" --seed {sim_seed}" if sim_seed else "")
    header = (
        f"Chaos scenario of generator seed {outcome.generated.seed}: invariant {rule!r} fails.\n"
        + (
            f"Shrunk from {outcome.shrunk.objects_before} objects and {outcome.shrunk.events_before} events "
            f"to {outcome.shrunk.objects} objects and {outcome.shrunk.events} events in {outcome.shrunk.runs} runs.\n"
            if outcome.shrunk is not None
            else ""
        )
        + f"Reproduce: {cmd}"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_document(doc, header), encoding="utf-8")
    return path
