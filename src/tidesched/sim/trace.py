"""Loader for the Alibaba GPU cluster trace v2023 ("openb", FGD paper, USENIX ATC '23).

The trace is not part of tidesched: its files are read from a path given by the user (the
trace's own ``SOURCE.md`` states its origin, licence and schema).

``load_trace(path)`` returns ``(objects, timed_events)``: the cluster the simulation starts
with (Nodes, the two Queues) and the workload as timed events for the scenario engine.

Input files
    ``path`` is the trace directory (holding ``csv/``), its ``csv/`` directory, or one pod CSV.
    The pod list defaults to ``csv/openb_pod_list_default.csv``; the node list to
    ``csv/openb_node_list_all_node.csv`` (GPU and CPU-only nodes) next to the pod list.
    ``node_file`` picks another node list, CSV or the ``node_yaml`` Node documents.

Nodes
    One Node per row. A GPU node gets the labels the capacity-card plugin discovers cards from
    (CARD-1): ``nvidia.com/gpu.product`` (the card name), ``nvidia.com/gpu.count``,
    ``nvidia.com/gpu.memory`` (MiB), and its GPUs: vGPU devices (``gpu_sharing="vgpu"``, the
    default, :mod:`tidesched.sim.trace_vgpu`), DRA devices (``gpu_sharing="dra"``,
    :mod:`tidesched.sim.trace_dra`: no card labels, a ResourceSlice per node) or allocatable
    ``nvidia.com/gpu``. The trace's model codes
    (P100, T4, V100M16, V100M32, A10, G1, G2, G3) become card names through ``DEFAULT_MODEL_MAP``;
    ``model_map`` (a dict or a YAML file) overrides entries, each either a card name or
    ``{name: ..., memory_mib: ...}``. The trace keeps its own label
    ``alibabacloud.com/gpu-card-model`` for reference.

Fractional GPUs (``gpu_milli`` < 1000)
    By default (``gpu_sharing="vgpu"``) a share of one vGPU device: ``gpu_milli / 10`` % of its
    compute and memory, under deviceshare (:mod:`tidesched.sim.trace_vgpu`, docs/gpu-sharing.md).
    With ``gpu_sharing="mps"``, the older approximation: none of the trace's GPU models supports
    MIG, so sharing is modelled as NVIDIA MPS: a *shared* node advertises ``nvidia.com/gpu.shared
    = gpus × mps_replicas`` with label ``nvidia.com/gpu.replicas = mps_replicas`` instead of
    whole cards, and its slices are named
    ``<card>/mps-<memGi>g*1/<replicas>`` (CARD-1). A pod asking for ``gpu_milli`` of one GPU
    requests ``ceil(gpu_milli × mps_replicas / 1000)`` slices (never less than it asked; with the
    default 10 replicas one slice is 100 milli-GPU). A whole node is shared or not, as with the
    device plugin's per-node sharing config, so whole-card gangs of 8 still find 8-card nodes.
    Which nodes are shared: per card model, a seeded random choice of nodes holding about
    ``shared_fraction`` of that model's GPUs; by default ``shared_fraction`` is the fraction of
    the pod list's GPU demand (in milli-GPU) that comes from fractional pods.

Pods → workloads (one pod per group: the trace has no job or gang ids)
    ``qos`` picks the service type through ``qos_map`` (default LS and Guaranteed → inference,
    BE and Burstable → training):

    * inference → a Deployment of one replica in queue ``queue-inference`` with
      ``volcano.sh/service.type: inference``; it is deleted when the trace deletes the pod.
    * training → a Volcano Job (``batch.volcano.sh/v1alpha1``) with one task of one replica,
      ``minAvailable: 1``, in queue ``queue-training`` with ``volcano.sh/service.type: training``
      and ``volcano.sh/card.request``; its pod completes after its trace run time.

    ``gpu_spec`` (``A|B``, duplicates removed) becomes ``volcano.sh/card.name: "A|B"`` with the
    mapped names; an empty spec means any model, so the pod lists every card model of the
    cluster (in the model table's order; CARD-4 prefers earlier names). CPU-only pods carry no
    card name.

Time
    Arrival = ``creation_time`` relative to the first pod loaded; run time = ``deletion_time``
    − ``scheduled_time`` (− ``creation_time`` for pods the real cluster never scheduled).
    ``time_compression`` divides both. ``fill=True`` submits everything at t = 0 (FGD's way of
    saturating the cluster), keeping run times.

Queues
    ``queue-inference`` (priority 80000, not reclaimable) and ``queue-training`` (priority 20000,
    reclaimable), as in seed 000. Their card quota (``volcano.sh/card.quota``) and ``capability``
    (cpu, memory, ``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, the ``volcano.sh/vgpu-*``
    resources) are ``quota_fraction`` × the
    cluster's totals (default 1: the quota never binds and only the cluster's size limits the
    trace).

Why one module of about 770 lines: it reads one file format end to end (the CSV columns, node
and pod shapes, the Deployments and Jobs they become, the timed events); splitting it would
spread one format's rules over several files.
"""

from __future__ import annotations

import csv
import json
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tidesched.sim import trace_dra, trace_vgpu

if TYPE_CHECKING:  # the scenario module is imported lazily: parsing the trace does not need it
    from tidesched.sim.events import Scenario, TimedEvent

DEFAULT_POD_FILE = "openb_pod_list_default.csv"
DEFAULT_NODE_FILE = "openb_node_list_all_node.csv"
NAMESPACE = "openb"
INFERENCE_QUEUE = "queue-inference"
TRAINING_QUEUE = "queue-training"
DEFAULT_MPS_REPLICAS = 10
NODE_MAX_PODS = 1001  # the trace's node_yaml allocatable pods

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE = "nvidia.com/gpu.shared"
PRODUCT_LABEL = "nvidia.com/gpu.product"
COUNT_LABEL = "nvidia.com/gpu.count"
MEMORY_LABEL = "nvidia.com/gpu.memory"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
TRACE_MODEL_LABEL = "alibabacloud.com/gpu-card-model"
SERVICE_TYPE = "volcano.sh/service.type"
CARD_NAME = "volcano.sh/card.name"
CARD_REQUEST = "volcano.sh/card.request"
CARD_QUOTA = "volcano.sh/card.quota"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"


@dataclass(frozen=True, slots=True)
class CardModel:
    """How one trace model code appears in the simulated cluster."""

    name: str
    memory_mib: int


# Trace model code → card name and per-card memory. Memory is the public board size for the
# named models; the G codes are undisclosed ("internal GPU codes" in the trace's README), so
# their names say so and their memory is an assumption that only affects MPS slice names.
DEFAULT_MODEL_MAP: dict[str, CardModel] = {
    "P100": CardModel("Tesla-P100", 16384),
    "T4": CardModel("Tesla-T4", 16384),
    "V100M16": CardModel("Tesla-V100-16GB", 16384),
    "V100M32": CardModel("Tesla-V100-32GB", 32768),
    "A10": CardModel("NVIDIA-A10", 24576),
    "G1": CardModel("Alibaba-G1", 32768),
    "G2": CardModel("Alibaba-G2", 32768),
    "G3": CardModel("Alibaba-G3", 32768),
}

DEFAULT_QOS_MAP: dict[str, str] = {"LS": "inference", "Guaranteed": "inference", "BE": "training",
                                   "Burstable": "training"}


class TraceError(ValueError):
    """Unreadable or inconsistent trace input; the message names the file and row."""


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str  # trace code, "" for CPU-only nodes


@dataclass(frozen=True, slots=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...]  # trace codes, de-duplicated, in the order given
    qos: str
    creation: float
    deletion: float | None
    scheduled: float | None

    @property
    def fractional(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < 1000

    @property
    def run_time(self) -> float | None:
        """Seconds the pod ran (or, never scheduled, existed) in the real cluster."""
        if self.deletion is None:
            return None
        start = self.scheduled if self.scheduled is not None else self.creation
        return max(self.deletion - start, 0.0)


@dataclass(slots=True)
class TraceEvent:
    """One timed action, before it becomes a scenario ``TimedEvent`` (see ``to_scenario``)."""

    t: float
    action: str  # "submit" | "delete"
    obj: dict[str, Any] = field(default_factory=dict)  # the manifest, or a reference for delete


# --------------------------------------------------------------------------- reading


def _int(row: Mapping[str, str], key: str, where: str) -> int:
    raw = (row.get(key) or "").strip()
    if raw == "":
        return 0
    try:
        return int(float(raw))
    except ValueError:
        raise TraceError(f"{where}: column {key!r} is not a number: {raw!r}") from None


def _time(row: Mapping[str, str], key: str, where: str) -> float | None:
    raw = (row.get(key) or "").strip()
    if raw == "":
        return None
    try:
        v = float(raw)
    except ValueError:
        raise TraceError(f"{where}: column {key!r} is not a time in seconds: {raw!r}") from None
    if not math.isfinite(v):
        raise TraceError(f"{where}: column {key!r} is not finite: {raw!r}")
    return v


def _check_columns(reader: csv.DictReader, required: Iterable[str], path: Path) -> None:
    have = set(reader.fieldnames or ())
    missing = [c for c in required if c not in have]
    if missing:
        have_text = ", ".join(reader.fieldnames or [])
        raise TraceError(f"{path}: missing column(s) {', '.join(missing)} (have {have_text})")


def read_nodes(path: str | Path) -> list[TraceNode]:
    """Node list from the trace's node CSV (``sn,cpu_milli,memory_mib,gpu,model``) or node YAML."""
    path = Path(path)
    if path.suffix in (".yaml", ".yml"):
        return _read_nodes_yaml(path)
    out: list[TraceNode] = []
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        _check_columns(reader, ("sn", "cpu_milli", "memory_mib", "gpu", "model"), path)
        for i, row in enumerate(reader, start=2):
            where = f"{path}:{i}"
            name = (row.get("sn") or "").strip()
            if not name:
                raise TraceError(f"{where}: empty node name")
            out.append(TraceNode(name, _int(row, "cpu_milli", where), _int(row, "memory_mib", where),
                                 _int(row, "gpu", where), (row.get("model") or "").strip()))
    return out


def _quantity_int(raw: Any, unit: str, where: str) -> int:
    """The few quantity spellings the trace's node YAML uses: ``64000m`` cpu, ``262144Mi``, ``'2'``."""
    s = str(raw).strip()
    try:
        if unit == "milli":
            return int(s[:-1]) if s.endswith("m") else int(float(s) * 1000)
        if unit == "mib":
            if s.endswith("Mi"):
                return int(s[:-2])
            if s.endswith("Gi"):
                return int(s[:-2]) * 1024
            return int(float(s)) // (1024 * 1024)
        return int(float(s))
    except ValueError:
        raise TraceError(f"{where}: unreadable quantity {s!r}") from None


def _read_nodes_yaml(path: Path) -> list[TraceNode]:
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out: list[TraceNode] = []
    with path.open() as fh:
        for i, doc in enumerate(yaml.load_all(fh, Loader=loader)):
            if not isinstance(doc, Mapping) or doc.get("kind") != "Node":
                continue
            where = f"{path}#{i}"
            meta = doc.get("metadata") or {}
            alloc = (doc.get("status") or {}).get("allocatable") or {}
            out.append(TraceNode(
                str(meta.get("name", "")),
                _quantity_int(alloc.get("cpu", "0"), "milli", where),
                _quantity_int(alloc.get("memory", "0"), "mib", where),
                _quantity_int(alloc.get("alibabacloud.com/gpu-count", "0"), "count", where),
                str((meta.get("labels") or {}).get(TRACE_MODEL_LABEL, "") or ""),
            ))
    return out


def read_pods(path: str | Path, limit: int | None = None) -> list[TracePod]:
    """Pods from a trace pod CSV, in file order (the trace files are sorted by creation time).

    The ``multigpu`` files have no qos or time columns: such pods are training and all arrive
    at t = 0 with no run time (they run to the end of the simulation)."""
    path = Path(path)
    out: list[TracePod] = []
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        _check_columns(reader, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"), path)
        for i, row in enumerate(reader, start=2):
            if limit is not None and len(out) >= limit:
                break
            where = f"{path}:{i}"
            name = (row.get("name") or "").strip()
            if not name:
                raise TraceError(f"{where}: empty pod name")
            raw_spec = (row.get("gpu_spec") or "").split("|")
            spec = tuple(dict.fromkeys(s.strip() for s in raw_spec if s.strip()))  # the trace repeats models
            num_gpu = _int(row, "num_gpu", where)
            gpu_milli = _int(row, "gpu_milli", where)
            if num_gpu < 0 or gpu_milli < 0 or gpu_milli > 1000:
                raise TraceError(f"{where}: num_gpu {num_gpu} / gpu_milli {gpu_milli} out of range")
            creation = _time(row, "creation_time", where)
            out.append(TracePod(
                name, _int(row, "cpu_milli", where), _int(row, "memory_mib", where), num_gpu, gpu_milli, spec,
                (row.get("qos") or "BE").strip() or "BE", creation if creation is not None else 0.0,
                _time(row, "deletion_time", where), _time(row, "scheduled_time", where),
            ))
    return out


def _resolve_files(path: str | Path, node_file: str | Path | None) -> tuple[Path, Path]:
    p = Path(path)
    if p.is_dir():
        csv_dir = p / "csv" if (p / "csv").is_dir() else p
        pod_file = csv_dir / DEFAULT_POD_FILE
    elif p.is_file():
        pod_file, csv_dir = p, p.parent
    else:
        raise TraceError(f"{p}: no such trace file or directory")
    if not pod_file.is_file():
        raise TraceError(f"{pod_file}: pod list not found")
    nodes = Path(node_file) if node_file is not None else csv_dir / DEFAULT_NODE_FILE
    if not nodes.is_file():
        raise TraceError(f"{nodes}: node list not found (pass node_file=)")
    return pod_file, nodes


def load_model_map(model_map: Mapping[str, Any] | str | Path | None) -> dict[str, CardModel]:
    """The default model table with the user's entries applied (dict or YAML file).

    An entry is ``CODE: card-name`` or ``CODE: {name: card-name, memory_mib: N}``."""
    table = dict(DEFAULT_MODEL_MAP)
    if model_map is None:
        return table
    source = "model_map"
    if isinstance(model_map, (str, Path)):
        source = str(model_map)
        try:
            loaded = yaml.safe_load(Path(model_map).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise TraceError(f"{source}: cannot read the model map: {exc}") from None
        model_map = loaded if loaded is not None else {}
    if not isinstance(model_map, Mapping):
        raise TraceError(f"{source}: expected a mapping of model code to card name")
    for code, entry in model_map.items():
        old = table.get(str(code))
        if isinstance(entry, str) and entry.strip():
            table[str(code)] = CardModel(entry.strip(), old.memory_mib if old else 0)
        elif isinstance(entry, Mapping) and isinstance(entry.get("name", old.name if old else None), str):
            mem = entry.get("memory_mib", old.memory_mib if old else 0)
            if not isinstance(mem, int) or isinstance(mem, bool) or mem < 0:
                raise TraceError(f"{source}: {code}.memory_mib must be a non-negative integer, got {mem!r}")
            table[str(code)] = CardModel(str(entry.get("name", old.name if old else "")), mem)
        else:
            raise TraceError(f"{source}: entry {code!r} must be a card name or {{name, memory_mib}}, "
                             f"got {entry!r}")
        card_name = table[str(code)].name
        if "|" in card_name or "/" in card_name:
            # '|' separates alternatives in volcano.sh/card.name and '/' starts a slice suffix.
            raise TraceError(f"{source}: card name {card_name!r} for {code} may not contain '|' or '/'")
    return table


# --------------------------------------------------------------------------- building


def mps_card_name(card: CardModel, replicas: int) -> str:
    """Slice name as the capacity-card plugin derives it (CARD-1)."""
    mem_gi = int(round(card.memory_mib / 1024))
    return f"{card.name}/mps-{mem_gi}g*1/{replicas}"


def _shared_fraction_from_pods(pods: Iterable[TracePod]) -> float:
    shared = total = 0
    for p in pods:
        if p.num_gpu <= 0:
            continue
        milli = p.gpu_milli if p.fractional else 1000 * p.num_gpu
        total += milli
        if p.fractional:
            shared += milli
    return shared / total if total else 0.0


def _choose_shared_nodes(nodes: list[TraceNode], fraction: float, seed: int) -> set[str]:
    """Per model, a seeded random set of nodes holding about ``fraction`` of its GPUs."""
    if fraction <= 0:
        return set()
    rng = random.Random(seed)
    by_model: dict[str, list[TraceNode]] = {}
    for n in nodes:
        if n.gpus > 0 and n.model:
            by_model.setdefault(n.model, []).append(n)
    chosen: set[str] = set()
    for model in sorted(by_model):
        group = sorted(by_model[model], key=lambda n: n.name)
        rng.shuffle(group)
        target = fraction * sum(n.gpus for n in group)
        got = 0
        for n in group:
            # Take a node while doing so brings the total closer to the target.
            if abs(got + n.gpus - target) < abs(got - target):
                chosen.add(n.name)
                got += n.gpus
    return chosen


def _node_manifest(n: TraceNode, card: CardModel | None, shared: bool, replicas: int,
                   vgpu_split: int = 0, dra: bool = False) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux"}
    alloc = {"cpu": f"{n.cpu_milli}m", "memory": f"{n.memory_mib}Mi", "pods": str(NODE_MAX_PODS)}
    if dra and card is not None and n.gpus > 0:  # its GPUs are in a ResourceSlice (sim.trace_dra)
        labels[TRACE_MODEL_LABEL] = n.model
    elif card is not None and n.gpus > 0:
        labels.update({
            TRACE_MODEL_LABEL: n.model, PRODUCT_LABEL: card.name, COUNT_LABEL: str(n.gpus),
            MEMORY_LABEL: str(card.memory_mib),
        })
        if vgpu_split:  # per-device GPUs (sim.trace_vgpu)
            out = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name, "labels": labels},
                   "status": {"allocatable": dict(alloc), "capacity": dict(alloc)}}
            return trace_vgpu.merge_node(out, trace_vgpu.node_resources(n, card, vgpu_split),
                                         trace_vgpu.node_annotations(n, card, vgpu_split))
        if shared:
            labels[REPLICAS_LABEL] = str(replicas)
            alloc[SHARED_RESOURCE] = str(n.gpus * replicas)
        else:
            alloc[GPU_RESOURCE] = str(n.gpus)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name, "labels": labels},
            "status": {"allocatable": dict(alloc), "capacity": dict(alloc)}}


def _queue_manifest(name: str, priority: int, reclaimable: bool, cards: Mapping[str, int],
                    totals: Mapping[str, int], fraction: float) -> dict[str, Any]:
    quota = {c: int(math.floor(v * fraction)) for c, v in cards.items()}
    # The device resources are in the capability too: the capacity and proportion plugins read
    # a dimension missing from a set capability as zero.
    capability = {"cpu": f"{int(totals['cpu_milli'] * fraction)}m",
                  "memory": f"{int(totals['memory_mib'] * fraction)}Mi"}
    for res in (GPU_RESOURCE, SHARED_RESOURCE, *trace_vgpu.VGPU_CAPABILITY):
        if totals.get(res):
            capability[res] = str(int(math.floor(totals[res] * fraction)))
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name, "annotations": {CARD_QUOTA: json.dumps(quota, sort_keys=True)}},
        "spec": {"weight": 1, "priority": priority, "reclaimable": reclaimable, "capability": capability},
        "status": {"state": "Open"},
    }


@dataclass(frozen=True, slots=True)
class _PodShape:
    resources: dict[str, str]
    card_name: str | None  # "A|B" or None for CPU-only pods
    cards: int  # count of card_name's resource (vGPU, DRA: card equivalents rounded up)
    claim_template: str = ""  # DRA: the ResourceClaimTemplate of its GPUs


def _pod_shape(p: TracePod, table: Mapping[str, CardModel], cluster_models: list[str], replicas: int,
               where: str, vgpu: bool = False, dra: bool = False) -> _PodShape:
    res = {"cpu": f"{p.cpu_milli}m", "memory": f"{p.memory_mib}Mi"}
    if p.num_gpu <= 0:
        return _PodShape(res, None, 0)
    codes = list(p.gpu_spec) or cluster_models
    unknown = [c for c in codes if c not in table]
    if unknown:
        raise TraceError(f"{where}: gpu_spec names model code(s) {', '.join(unknown)} "
                         "missing from the model map")
    if dra:  # DRA devices (sim.trace_dra)
        names = [table[c].name for c in codes]
        return _PodShape(res, "|".join(dict.fromkeys(names)), math.ceil(trace_dra.card_equivalents(p)),
                         trace_dra.template_name(p))
    if vgpu:  # per-device GPUs (sim.trace_vgpu)
        res.update(trace_vgpu.pod_resources(p))
        names = [table[c].name for c in codes]
        return _PodShape(res, "|".join(dict.fromkeys(names)), math.ceil(trace_vgpu.card_equivalents(p)))
    if p.fractional:
        count = max(1, math.ceil(p.gpu_milli * replicas / 1000))
        res[SHARED_RESOURCE] = str(count)
        names = [mps_card_name(table[c], replicas) for c in codes]
    else:
        count = p.num_gpu
        res[GPU_RESOURCE] = str(count)
        names = [table[c].name for c in codes]
    return _PodShape(res, "|".join(dict.fromkeys(names)), count)


def _pod_template(
    p: TracePod, shape: _PodShape, service: str, queue: str, run_time: float | None
) -> dict[str, Any]:
    annotations = {SERVICE_TYPE: service, QUEUE_NAME: queue}
    if shape.card_name:
        annotations[CARD_NAME] = shape.card_name
    claims: dict[str, Any] = {}
    if shape.claim_template:
        claims = trace_dra.pod_claims(shape.claim_template)
    template: dict[str, Any] = {
        "metadata": {"labels": {"app": p.name, "openb/qos": p.qos}, "annotations": annotations},
        "spec": {"schedulerName": "volcano", "restartPolicy": "Never" if service == "training" else "Always",
                 **claims,
                 "containers": [{"name": "main", "image": "openb",
                                 "resources": {"requests": dict(shape.resources),
                                               "limits": dict(shape.resources),
                                               **({"claims": [{"name": "gpu"}]} if claims else {})}}]},
    }
    if run_time is not None:
        template["metadata"]["annotations"][DURATION_ANNOTATION] = _fmt_seconds(run_time)
    return template


# The simulator's run-time annotation (tidesched.sim.scenario.DURATION_ANNOTATION); spelled out
# here so that parsing a trace does not import the engine.
DURATION_ANNOTATION = "sim.tidesched.io/duration"


def _fmt_seconds(v: float) -> str:
    return str(int(v)) if v == int(v) else f"{v:.3f}".rstrip("0").rstrip(".")


def _inference(p: TracePod, shape: _PodShape) -> dict[str, Any]:
    ann = {SERVICE_TYPE: "inference", QUEUE_NAME: INFERENCE_QUEUE}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": p.name, "namespace": NAMESPACE, "annotations": ann},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": p.name}},
                 "template": _pod_template(p, shape, "inference", INFERENCE_QUEUE, None)},
    }


def _training(p: TracePod, shape: _PodShape, run_time: float | None) -> dict[str, Any]:
    ann = {SERVICE_TYPE: "training"}
    if shape.card_name:
        ann[CARD_REQUEST] = json.dumps({shape.card_name: shape.cards})
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": p.name, "namespace": NAMESPACE, "annotations": ann},
        "spec": {"schedulerName": "volcano", "queue": TRAINING_QUEUE, "minAvailable": 1, "maxRetry": 3,
                 "tasks": [{"name": "worker", "replicas": 1,
                            "template": _pod_template(p, shape, "training", TRAINING_QUEUE, run_time)}]},
    }


@dataclass(slots=True)
class TraceSummary:
    """What was loaded, for messages and tests."""

    nodes: int = 0
    gpu_nodes: int = 0
    shared_nodes: int = 0
    gpus: int = 0
    pods: int = 0
    inference: int = 0
    training: int = 0
    fractional: int = 0
    shared_fraction: float = 0.0
    cards: dict[str, int] = field(default_factory=dict)  # card name → count in the cluster


def build(
    nodes: list[TraceNode],
    pods: list[TracePod],
    *,
    model_map: Mapping[str, Any] | str | Path | None = None,
    time_compression: float = 1.0,
    fill: bool = False,
    seed: int = 0,
    mps_replicas: int = DEFAULT_MPS_REPLICAS,
    shared_fraction: float | None = None,
    quota_fraction: float = 1.0,
    qos_map: Mapping[str, str] | None = None,
    source: str = "trace",
    gpu_sharing: str = trace_vgpu.VGPU,
    vgpu_split: int = trace_vgpu.DEFAULT_SPLIT,
) -> tuple[list[dict[str, Any]], list[TraceEvent], TraceSummary]:
    """Turn parsed trace rows into the starting objects and the loader's timed events."""
    modes = (*trace_vgpu.SHARING_MODES, trace_dra.DRA)
    if gpu_sharing not in modes:
        raise TraceError(f"gpu_sharing must be one of {', '.join(modes)}, got {gpu_sharing!r}")
    vgpu, dra = gpu_sharing == trace_vgpu.VGPU, gpu_sharing == trace_dra.DRA
    if vgpu and vgpu_split < 1:
        raise TraceError(f"vgpu_split must be at least 1, got {vgpu_split!r}")
    if not time_compression or time_compression <= 0 or not math.isfinite(time_compression):
        raise TraceError(f"time_compression must be a positive number, got {time_compression!r}")
    if mps_replicas < 1:
        raise TraceError(f"mps_replicas must be at least 1, got {mps_replicas!r}")
    if quota_fraction < 0:
        raise TraceError(f"quota_fraction must not be negative, got {quota_fraction!r}")
    table = load_model_map(model_map)
    qos = dict(DEFAULT_QOS_MAP)
    qos.update(qos_map or {})
    for k, v in qos.items():
        if v not in ("inference", "training"):
            raise TraceError(f"qos_map: {k!r} must map to 'inference' or 'training', got {v!r}")

    summary = TraceSummary()
    present = {n.model for n in nodes if n.gpus > 0 and n.model}
    for code in sorted(present):
        if code not in table:
            raise TraceError(f"{source}: node model code {code!r} is missing from the model map")
    # Unconstrained pods may use any model of the cluster, listed in the model table's order.
    cluster_models = [c for c in table if c in present]
    fraction = _shared_fraction_from_pods(pods) if shared_fraction is None else float(shared_fraction)
    if not 0.0 <= fraction <= 1.0:
        raise TraceError(f"shared_fraction must lie in [0, 1], got {fraction!r}")
    shared_nodes = set() if vgpu else _choose_shared_nodes(nodes, fraction, seed)

    objects: list[dict[str, Any]] = []
    cards: dict[str, int] = {}
    cpu_total = mem_total = whole_total = shared_total = 0
    seen_nodes: set[str] = set()
    for n in nodes:
        if n.name in seen_nodes:
            raise TraceError(f"{source}: node {n.name} listed twice")
        seen_nodes.add(n.name)
        card = table.get(n.model) if n.gpus > 0 and n.model else None
        shared = n.name in shared_nodes
        objects.append(_node_manifest(n, card, shared, mps_replicas, vgpu_split if vgpu else 0, dra))
        if dra and card is not None:
            objects.append(trace_dra.node_slice(n, card, shared))
        cpu_total += n.cpu_milli
        mem_total += n.memory_mib
        summary.nodes += 1
        if card is not None:
            summary.gpu_nodes += 1
            summary.gpus += n.gpus
            key = mps_card_name(card, mps_replicas) if shared and not dra else card.name
            cards[key] = cards.get(key, 0) + n.gpus * (mps_replicas if shared and not dra else 1)
            if dra:
                pass  # devices, not resources: the queues' capability names none
            elif shared:
                shared_total += n.gpus * mps_replicas
            else:
                whole_total += n.gpus
            summary.shared_nodes += shared
    summary.cards = dict(sorted(cards.items()))
    summary.shared_fraction = 0.0 if vgpu else fraction
    if dra:
        objects.append(trace_dra.device_class())
        objects.extend(trace_dra.templates(pods, table, NAMESPACE))
    totals = {"cpu_milli": cpu_total, "memory_mib": mem_total, GPU_RESOURCE: whole_total,
              SHARED_RESOURCE: shared_total}
    if vgpu:
        totals[GPU_RESOURCE] = 0
        totals.update(trace_vgpu.capability_totals(
            [(n, table[n.model]) for n in nodes if n.gpus > 0 and n.model in table], vgpu_split))
    objects.append(_queue_manifest(INFERENCE_QUEUE, 80000, False, summary.cards, totals, quota_fraction))
    objects.append(_queue_manifest(TRAINING_QUEUE, 20000, True, summary.cards, totals, quota_fraction))

    events: list[TraceEvent] = []
    t0 = min((p.creation for p in pods), default=0.0)
    seen_pods: set[str] = set()
    for i, p in enumerate(pods):
        where = f"{source}: pod {p.name}"
        if p.name in seen_pods:
            raise TraceError(f"{where}: listed twice")
        seen_pods.add(p.name)
        service = qos.get(p.qos, "training")
        shape = _pod_shape(p, table, cluster_models, mps_replicas, where, vgpu, dra)
        arrive = 0.0 if fill else (p.creation - t0) / time_compression
        run = p.run_time
        run = None if run is None else run / time_compression
        summary.pods += 1
        summary.fractional += p.fractional
        if service == "inference":
            summary.inference += 1
            events.append(TraceEvent(arrive, "submit", _inference(p, shape)))
            if run is not None:
                # The Deployment lives as long as the trace pod did, counted from its arrival.
                events.append(TraceEvent(arrive + run, "delete",
                                         {"kind": "Deployment", "namespace": NAMESPACE, "name": p.name}))
        else:
            summary.training += 1
            events.append(TraceEvent(arrive, "submit", _training(p, shape, run)))
    # Stable by time: same-time events keep trace order (submit before an equal-time delete).
    events.sort(key=lambda e: e.t)
    return objects, events, summary


def load_trace(
    path: str | Path,
    *,
    model_map: Mapping[str, Any] | str | Path | None = None,
    time_compression: float = 1.0,
    fill: bool = False,
    limit: int | None = None,
    seed: int = 0,
    node_file: str | Path | None = None,
    mps_replicas: int = DEFAULT_MPS_REPLICAS,
    shared_fraction: float | None = None,
    quota_fraction: float = 1.0,
    qos_map: Mapping[str, str] | None = None,
    gpu_sharing: str = trace_vgpu.VGPU,
    vgpu_split: int = trace_vgpu.DEFAULT_SPLIT,
) -> tuple[list[dict[str, Any]], list[TimedEvent]]:
    """Load the trace at ``path``: ``(objects, timed_events)``.

    ``objects`` are the raw Node and Queue manifests the simulation starts with; the events are
    the scenario engine's :class:`~tidesched.sim.scenario.TimedEvent` (``submit`` of a
    Deployment or Volcano Job, ``delete`` of a Deployment), sorted by time. ``limit`` keeps the
    first N pods of the list. See the module docstring for the mapping."""
    objects, events, _summary = _load(
        path, model_map=model_map, time_compression=time_compression, fill=fill, limit=limit, seed=seed,
        node_file=node_file, mps_replicas=mps_replicas, shared_fraction=shared_fraction,
        quota_fraction=quota_fraction, qos_map=qos_map, gpu_sharing=gpu_sharing, vgpu_split=vgpu_split,
    )
    return objects, to_scenario(events)


def _load(path: str | Path, *, limit: int | None = None, node_file: str | Path | None = None,
          **kw: Any) -> tuple[list[dict[str, Any]], list[TraceEvent], TraceSummary]:
    if limit is not None and limit < 0:
        raise TraceError(f"limit must not be negative, got {limit!r}")
    pod_file, nodes_path = _resolve_files(path, node_file)
    return build(read_nodes(nodes_path), read_pods(pod_file, limit=limit), source=str(pod_file), **kw)


def to_scenario(events: Iterable[TraceEvent]) -> list[TimedEvent]:
    """The loader's events as scenario events, through the scenario module's own checks."""
    from tidesched.sim.events import make_event

    out: list[TimedEvent] = []
    for e in events:
        if e.action == "submit":
            src = f"trace: {e.obj['kind']} {e.obj['metadata']['namespace']}/{e.obj['metadata']['name']}"
            out.append(make_event(e.t, "submit", e.obj, src))
        else:
            src = f"trace: delete {e.obj['kind']} {e.obj['namespace']}/{e.obj['name']}"
            ref = {"kind": e.obj["kind"], "name": f"{e.obj['namespace']}/{e.obj['name']}"}
            out.append(make_event(e.t, "delete", ref, src))
    return out


def trace_scenario(
    path: str | Path,
    *,
    name: str | None = None,
    schedule_period: float = 1.0,
    duration: float | None = None,
    config_path: str | Path | None = None,
    **load_options: Any,
) -> tuple[Scenario, TraceSummary]:
    """A ready-to-run :class:`~tidesched.sim.events.Scenario` for the trace at ``path``.

    ``load_options`` are those of :func:`load_trace`; ``config_path`` a Volcano scheduler
    config (default: Volcano's default config)."""
    from tidesched.model.loader import Manifest
    from tidesched.scheduler import config_from_file
    from tidesched.sim.events import Scenario

    objects, events, summary = _load(path, **load_options)
    source = str(path)
    scenario = Scenario(
        name=name or f"alibaba-trace:{Path(path).name}",
        objects=[Manifest(f"{source}: {o['kind']} {o['metadata']['name']}", o) for o in objects],
        events=to_scenario(events),
        schedule_period=schedule_period,
        duration=duration,
        source=source,
    )
    if config_path is not None:
        scenario.config = config_from_file(config_path)
        scenario.config_source = str(config_path)
    elif load_options.get("gpu_sharing", trace_vgpu.VGPU) == trace_vgpu.VGPU:
        from tidesched.scheduler import config_from_text

        scenario.config = config_from_text(trace_vgpu.TRACE_VGPU_CONFIG, "<trace: deviceshare>")
        scenario.config_source = "tidesched.sim.trace_vgpu (Volcano's default config + deviceshare vGPU)"
    return scenario, summary
