"""Hypothesis strategies for fuzzing what the scheduler reads (REL-1, REL-2).

``clusters()`` builds a *valid* small cluster of every kind the scheduler or the simulator reads
(Node, Pod, PodGroup, Queue, PriorityClass, PodDisruptionBudget, Volcano Job, Deployment), with
card-model labels, card quotas and requests, gangs, bound pods and hierarchical queues.
``corrupted(objs)`` then damages it the ways a careless user or a broken controller would:
fields deleted or given the wrong type at any depth, extreme or malformed quantities and
integers, malformed JSON annotations, unicode and very long strings, duplicate names, queue
parent cycles, pods on missing nodes.

Used by the fuzz tests beside this file and by ``benchmarks/fuzz.py``; no test logic here.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

MODELS = ("NVIDIA-A100-80GB", "NVIDIA-H200", "Ascend-910B")
NAMESPACES = ("ns", "team-a")
QUEUE_NAMES = ("default", "q1", "q2", "q3")
PRIORITY_CLASSES = ("high", "low")

CARD_NAME = "volcano.sh/card.name"
CARD_REQUEST = "volcano.sh/card.request"
CARD_QUOTA = "volcano.sh/card.quota"
GROUP_NAME = "scheduling.k8s.io/group-name"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"
TASK_SPEC = "volcano.sh/task-spec"
TASK_PRIORITY = "volcano.sh/task-priority"
PREEMPTABLE = "volcano.sh/preemptable"
SERVICE_TYPE = "volcano.sh/service.type"
HIERARCHY = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS = "volcano.sh/hierarchy-weights"
DURATION = "sim.tidesched.io/duration"

# Annotations some part of the scheduler reads, and on which kinds of object.
ANNOTATIONS = (
    CARD_NAME, CARD_REQUEST, CARD_QUOTA, GROUP_NAME, QUEUE_NAME, TASK_SPEC, TASK_PRIORITY, PREEMPTABLE,
    SERVICE_TYPE, HIERARCHY, HIERARCHY_WEIGHTS, DURATION,
)

# The annotations read on each kind (a mutation mostly hits one that is read).
ANNOTATIONS_READ: dict[str, tuple[str, ...]] = {
    "Pod": (CARD_NAME, GROUP_NAME, QUEUE_NAME, TASK_SPEC, TASK_PRIORITY, PREEMPTABLE, DURATION),
    "PodGroup": (CARD_REQUEST, SERVICE_TYPE, PREEMPTABLE, HIERARCHY),
    "Queue": (CARD_QUOTA, HIERARCHY, HIERARCHY_WEIGHTS),
    "Job": (SERVICE_TYPE, CARD_REQUEST, QUEUE_NAME),
    "Deployment": (SERVICE_TYPE, CARD_NAME, QUEUE_NAME),
}

# -- bad values -------------------------------------------------------------------------------

_LONG = "x" * 20_000
NASTY_SCALARS: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 2**31, -(2**31) - 1, 2**63, 2**64, 10**30, -(10**30), 10**400,
    0.5, -0.0, 1e308, float("nan"), float("inf"), float("-inf"),
    "", " ", "Inf", "-Inf", "NaN", "nan", "infinity", "1e400", "-1", "0x10", "1_000", "٣", "true",
    "null", "{}", "[]", "\x00", "\u202e", "名前", "🚀🚀", "a:b", "ns/name", "a|b", _LONG,
)
NASTY_QUANTITIES: tuple[Any, ...] = (
    "1e400", "1E400", "-1e400", "Inf", "NaN", "-1", "-0.001", "1Ki2", "1.2.3", "0x10", "1e", "e3",
    "1ee3", "+", "--1", "9" * 400, "9" * 400 + "Ei", "1e-400", "0.0000000001", "1000000000000000000Ei",
    "1n", "1u", "∞", "٣", "1 Gi", " 1Gi", "1gi", "1KB", "1.5Mi", "9223372036854775807",
    "9223372036854775808", "1e18", "4e9Ki", "1e308", "1e309", "0", "0m", ".5", "5.", "1E-3",
    10**400, 2**63, -5, 1.5, float("inf"), float("nan"), True, None, [], {},
)
NASTY_JSON: tuple[str, ...] = (
    "", " ", "{", "}", "[]", "null", '"x"', "1", "true", "{'a': 1}",
    '{"NVIDIA-H200": -1}', '{"NVIDIA-H200": 1.5}', '{"NVIDIA-H200": 1e400}', '{"NVIDIA-H200": -1e400}',
    '{"NVIDIA-H200": 1' + "0" * 400 + "}", '{"NVIDIA-H200": 1' + "0" * 5000 + "}",
    '{"": 1}', '{"NVIDIA-H200|": 1}', '{"A||B": 2}', '{"NVIDIA-H200": "2"}', '{"NVIDIA-H200": true}',
    '{"NVIDIA-H200": null}', '{"NVIDIA-H200": {"x": 1}}', '{"NVIDIA-H200": [1]}',
    '{"NVIDIA-H200": 2, "NVIDIA-H200": 3}', '{"NVIDIA-H200|Ascend-910B": 1}', '{"NVIDIA-H200|NVIDIA-A100-80GB": 2}',
    '{"a": NaN}', '{"a": Infinity}', '{"NVIDIA-H200": -Infinity}', '{"名前": 1}', '{"NVIDIA-H200": 1}' * 2,
    "[" * 50_000, '{"a":' * 50_000, '{"NVIDIA-H200": 9007199254740993}', '{"NVIDIA-H200": 0}',
)


def nasty_values() -> st.SearchStrategy[Any]:
    """A value of the wrong type or an extreme value, for any field."""
    leaf = st.one_of(
        st.sampled_from(NASTY_SCALARS),
        st.integers(),
        st.floats(),
        st.text(max_size=40),
        st.binary(max_size=8).map(lambda b: b.decode("latin-1")),
    )
    return st.one_of(
        leaf,
        st.lists(leaf, max_size=3),
        st.dictionaries(st.text(max_size=6), leaf, max_size=3),
        st.recursive(leaf, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2), max_leaves=6),
    )


_JSON_NUMBERS = st.one_of(
    st.integers(0, 16), st.integers(), st.sampled_from([10**30, 10**400, 2**63, -1, 1.5, 2.0, 1e308]),
    st.floats(allow_nan=True, allow_infinity=True),
)
_JSON_KEYS = st.one_of(
    st.sampled_from(MODELS + ("NVIDIA-H200|NVIDIA-A100-80GB", "NVIDIA-H200|Ascend-910B", "", "|", "a||b", "unknown")),
    st.text(max_size=12),
)


@st.composite
def json_annotations(draw: Any) -> str:
    """A card map as JSON with extreme or wrong-typed counts and odd names, sometimes cut short
    or wrapped in a list."""
    import json

    value: Any = draw(st.dictionaries(_JSON_KEYS, st.one_of(_JSON_NUMBERS, nasty_values()), max_size=4))
    if draw(st.integers(0, 5)) == 0:
        value = [value]
    text = json.dumps(value, allow_nan=True, default=str)
    if draw(st.integers(0, 5)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text


def nasty_annotation(key: str) -> st.SearchStrategy[Any]:
    """A bad value for annotation ``key``: malformed JSON, a wrong-typed value (a broken
    controller's object is not always a map of strings), or any text."""
    return st.one_of(
        json_annotations(),
        json_annotations(),
        st.sampled_from(NASTY_JSON),
        st.sampled_from(NASTY_SCALARS),
        st.text(max_size=40),
        st.sampled_from(("NVIDIA-H200", "NVIDIA-H200|Ascend-910B", "missing-model", "a||b", "|", "H200 | A100")),
    )


# -- valid objects ----------------------------------------------------------------------------

_CPU = st.sampled_from(["1", "2", "4", "16", "64", "500m", "3500m"])
_MEM = st.sampled_from(["1Gi", "4Gi", "8Gi", "64Gi", "256Gi", "1000M"])
_SMALL_CPU = st.sampled_from(["100m", "250m", "500m", "1", "2", "4"])
_SMALL_MEM = st.sampled_from(["128Mi", "512Mi", "1Gi", "2Gi", "8Gi"])


@st.composite
def node_objs(draw: Any, i: int) -> dict[str, Any]:
    name = f"node-{i}"
    alloc: dict[str, Any] = {"cpu": draw(_CPU), "memory": draw(_MEM), "pods": draw(st.sampled_from(["3", "10", "110"]))}
    labels = {"kubernetes.io/hostname": name, "zone": draw(st.sampled_from(["a", "b"]))}
    card = draw(st.sampled_from((None,) + MODELS))
    if card == "Ascend-910B":
        labels["huawei.com/npu.product"] = card
        alloc["huawei.com/Ascend910"] = str(draw(st.integers(0, 8)))
    elif card is not None:
        labels["nvidia.com/gpu.product"] = card
        labels["nvidia.com/gpu.memory"] = "81920"
        alloc["nvidia.com/gpu"] = str(draw(st.integers(0, 8)))
        if draw(st.booleans()):
            alloc["nvidia.com/mig-1g.10gb"] = str(draw(st.integers(0, 7)))
    spec: dict[str, Any] = {}
    if draw(st.integers(0, 4)) == 0:
        spec["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    if draw(st.integers(0, 6)) == 0:
        spec["unschedulable"] = True
    ready = draw(st.sampled_from(["True", "True", "True", "False"]))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": alloc, "capacity": dict(alloc), "conditions": [{"type": "Ready", "status": ready}]},
    }


def _quota_json(draw: Any) -> str:
    import json

    models = draw(st.lists(st.sampled_from(MODELS), max_size=3, unique=True))
    return json.dumps({m: draw(st.integers(0, 8)) for m in models})


@st.composite
def queue_objs(draw: Any, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": draw(st.integers(1, 10)), "reclaimable": draw(st.booleans())}
    if draw(st.booleans()):
        cap = {"cpu": draw(_CPU), "memory": draw(_MEM)}
        if draw(st.booleans()):
            cap["nvidia.com/gpu"] = str(draw(st.integers(0, 16)))
        spec["capability"] = cap
    if draw(st.integers(0, 3)) == 0:
        spec["deserved"] = {"cpu": draw(_SMALL_CPU), "memory": draw(_SMALL_MEM)}
    if draw(st.integers(0, 3)) == 0:
        spec["guarantee"] = {"resource": {"cpu": draw(_SMALL_CPU)}}
    if name != "default" and draw(st.integers(0, 2)) == 0:
        spec["parent"] = draw(st.sampled_from(("root",) + QUEUE_NAMES))
    if draw(st.booleans()):
        spec["priority"] = draw(st.integers(0, 100))
    meta: dict[str, Any] = {"name": name}
    if draw(st.booleans()):
        meta["annotations"] = {CARD_QUOTA: _quota_json(draw)}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": meta, "spec": spec,
            "status": {"state": draw(st.sampled_from(["Open", "Open", "Closed"]))}}


def _container(draw: Any, card_resource: str | None) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": draw(_SMALL_CPU), "memory": draw(_SMALL_MEM)}
    if card_resource is not None:
        requests[card_resource] = str(draw(st.integers(1, 4)))
    res: dict[str, Any] = {"requests": requests}
    if draw(st.integers(0, 3)) == 0:
        res["limits"] = dict(requests)
    c: dict[str, Any] = {"name": "main", "image": "busybox", "resources": res}
    if draw(st.integers(0, 5)) == 0:
        c["ports"] = [{"containerPort": 8080, "hostPort": draw(st.integers(1, 65535)), "protocol": "TCP"}]
    return c


@st.composite
def pod_spec(draw: Any) -> dict[str, Any]:
    """A pod spec as pods, Job tasks and Deployments carry it."""
    card_resource = draw(st.sampled_from([None, None, "nvidia.com/gpu", "huawei.com/Ascend910", "nvidia.com/mig-1g.10gb"]))
    spec: dict[str, Any] = {"schedulerName": draw(st.sampled_from(["volcano", "volcano", "default-scheduler"])),
                            "containers": [_container(draw, card_resource)]}
    if draw(st.integers(0, 4)) == 0:
        spec["initContainers"] = [_container(draw, None)]
    if draw(st.booleans()):
        spec["priorityClassName"] = draw(st.sampled_from(PRIORITY_CLASSES + ("missing",)))
    if draw(st.integers(0, 3)) == 0:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    if draw(st.integers(0, 3)) == 0:
        spec["nodeSelector"] = {"zone": draw(st.sampled_from(["a", "b"]))}
    if draw(st.integers(0, 4)) == 0:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": [draw(st.sampled_from(["a", "b"]))]}]}]}}}
    if draw(st.integers(0, 5)) == 0:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    return spec


@st.composite
def pod_objs(draw: Any, name: str, namespace: str, group: str | None, nodes: list[str]) -> dict[str, Any]:
    spec = draw(pod_spec())
    ann: dict[str, str] = {}
    if group is not None:
        ann[GROUP_NAME] = group
    elif draw(st.booleans()):
        ann[QUEUE_NAME] = draw(st.sampled_from(QUEUE_NAMES))
    if draw(st.integers(0, 2)) == 0:
        ann[CARD_NAME] = draw(st.sampled_from(MODELS + ("NVIDIA-H200|NVIDIA-A100-80GB",)))
    if draw(st.integers(0, 5)) == 0:
        ann[PREEMPTABLE] = draw(st.sampled_from(["true", "false"]))
    if draw(st.integers(0, 5)) == 0:
        ann[TASK_SPEC] = draw(st.sampled_from(["worker", "ps"]))
    phase = "Pending"
    if nodes and draw(st.integers(0, 2)) == 0:
        spec["nodeName"] = draw(st.sampled_from(nodes))
        phase = draw(st.sampled_from(["Running", "Running", "Pending", "Succeeded", "Failed"]))
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": ann,
                            "labels": {"app": draw(st.sampled_from(["web", "train"]))},
                            "creationTimestamp": "2026-01-01T00:00:00Z"}
    if draw(st.integers(0, 8)) == 0:
        meta["deletionTimestamp"] = "2026-01-01T01:00:00Z"
    if draw(st.integers(0, 3)) == 0:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{name}-rs", "uid": f"uid-{name}"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


@st.composite
def podgroup_objs(draw: Any, name: str, namespace: str, members: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": draw(st.integers(0, max(members, 1))), "queue": draw(st.sampled_from(QUEUE_NAMES + ("missing",)))}
    if draw(st.booleans()):
        spec["minResources"] = {"cpu": draw(_SMALL_CPU), "memory": draw(_SMALL_MEM)}
    if draw(st.integers(0, 3)) == 0:
        spec["priorityClassName"] = draw(st.sampled_from(PRIORITY_CLASSES))
    if draw(st.integers(0, 4)) == 0:
        spec["minTaskMember"] = {"worker": draw(st.integers(0, members))}
    if draw(st.integers(0, 3)) == 0:
        spec["networkTopology"] = {"mode": draw(st.sampled_from(["hard", "soft"])), "highestTierAllowed": draw(st.integers(0, 3))}
    ann: dict[str, str] = {}
    if draw(st.integers(0, 2)) == 0:
        import json

        ann[CARD_REQUEST] = json.dumps({draw(st.sampled_from(MODELS)): draw(st.integers(0, 8))})
    if draw(st.integers(0, 2)) == 0:
        ann[SERVICE_TYPE] = draw(st.sampled_from(["training", "inference"]))
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "annotations": ann}, "spec": spec,
            "status": {"phase": draw(st.sampled_from(["Pending", "Inqueue", "Running"]))}}


@st.composite
def volcano_job_objs(draw: Any, name: str, namespace: str) -> dict[str, Any]:
    tasks = []
    for t in range(draw(st.integers(1, 2))):
        tasks.append({"name": f"task{t}", "replicas": draw(st.integers(0, 3)),
                      "template": {"metadata": {"annotations": {DURATION: "600"}}, "spec": draw(pod_spec())},
                      "policies": [{"event": "PodEvicted", "action": "RestartJob"}]})
    total = sum(t["replicas"] for t in tasks)
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "annotations": {SERVICE_TYPE: "training"}},
            "spec": {"minAvailable": draw(st.integers(0, total)), "queue": draw(st.sampled_from(QUEUE_NAMES)),
                     "schedulerName": "volcano", "maxRetry": 3, "tasks": tasks}}


@st.composite
def deployment_objs(draw: Any, name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "annotations": {SERVICE_TYPE: "inference"}},
            "spec": {"replicas": draw(st.integers(0, 3)), "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name},
                                               "annotations": {QUEUE_NAME: draw(st.sampled_from(QUEUE_NAMES))}},
                                  "spec": draw(pod_spec())}}}


@st.composite
def clusters(draw: Any, *, workloads: bool = True) -> list[dict[str, Any]]:
    """A valid small cluster: nodes, queues, priority classes, PodGroups with their pods, bare
    pods, PDBs and (with ``workloads``) Volcano Jobs and Deployments."""
    objs: list[dict[str, Any]] = []
    n_nodes = draw(st.integers(1, 4))
    nodes = [draw(node_objs(i)) for i in range(n_nodes)]
    objs += nodes
    node_names = [n["metadata"]["name"] for n in nodes]
    for q in draw(st.lists(st.sampled_from(QUEUE_NAMES), min_size=1, max_size=4, unique=True)):
        objs.append(draw(queue_objs(q)))
    for pc, value in zip(PRIORITY_CLASSES, (1000, 10)):
        if draw(st.booleans()):
            objs.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": pc},
                         "value": value, "globalDefault": False})
    for g in range(draw(st.integers(0, 4))):
        ns = draw(st.sampled_from(NAMESPACES))
        members = draw(st.integers(1, 3))
        objs.append(draw(podgroup_objs(f"pg-{g}", ns, members)))
        for m in range(members):
            objs.append(draw(pod_objs(f"pg-{g}-{m}", ns, f"pg-{g}", node_names)))
    for b in range(draw(st.integers(0, 2))):
        objs.append(draw(pod_objs(f"bare-{b}", draw(st.sampled_from(NAMESPACES)), None, node_names)))
    if draw(st.integers(0, 2)) == 0:
        objs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                     "metadata": {"name": "pdb", "namespace": draw(st.sampled_from(NAMESPACES))},
                     "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": draw(st.sampled_from(["web", "train"]))}}},
                     "status": {"disruptionsAllowed": draw(st.integers(0, 2))}})
    if draw(st.integers(0, 2)) == 0:  # HyperNodes: a leaf over some nodes, a spine over it
        objs.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "leaf-0"},
                     "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": n}}}
                                                     for n in node_names[: draw(st.integers(1, len(node_names)))]]
                              + [{"type": "Node", "selector": {"regexMatch": {"pattern": "^node-"}}}]}})
        objs.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "spine-0"},
                     "spec": {"tier": 2, "tierName": "spine",
                              "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-0"}}}]}})
    if workloads:
        if draw(st.booleans()):
            objs.append(draw(volcano_job_objs("job-0", draw(st.sampled_from(NAMESPACES)))))
        if draw(st.booleans()):
            objs.append(draw(deployment_objs("web", draw(st.sampled_from(NAMESPACES)))))
    return objs


# -- corruption -------------------------------------------------------------------------------


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and list indices) into ``value``, at any depth."""
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append(prefix + (k,))
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append(prefix + (i,))
            out += _paths(v, prefix + (i,))
    return out


def _parent(obj: Any, path: tuple[Any, ...]) -> Any:
    for p in path[:-1]:
        obj = obj[p]
    return obj


def _is_quantity_path(path: tuple[Any, ...]) -> bool:
    return any(p in ("requests", "limits", "allocatable", "capacity", "capability", "deserved", "minResources",
                     "resource", "overhead") for p in path[:-1])


MUTATIONS = ("delete", "replace", "replace", "quantity", "quantity", "annotation", "annotation", "annotation",
             "duplicate", "cycle", "dangling", "kind", "name", "junk")


@st.composite
def corrupted(draw: Any, objs: list[dict[str, Any]], max_mutations: int = 6) -> tuple[list[Any], list[str]]:
    """``objs`` (deep-copied) with 1..max_mutations corruptions, and what was done (for messages
    and reproducers)."""
    objs = copy.deepcopy(objs)
    done: list[str] = []
    for _ in range(draw(st.integers(1, max_mutations))):
        if not objs:
            break
        op = draw(st.sampled_from(MUTATIONS))
        i = draw(st.integers(0, len(objs) - 1))
        obj = objs[i]
        if not isinstance(obj, dict):
            continue
        if op in ("delete", "replace", "quantity"):
            paths = _paths(obj)
            if op == "quantity":
                paths = [p for p in paths if _is_quantity_path(p)] or paths
            if not paths:
                continue
            path = draw(st.sampled_from(paths))
            try:
                parent = _parent(obj, path)
            except (KeyError, IndexError, TypeError):
                continue  # an earlier mutation changed the shape
            if op == "delete":
                del parent[path[-1]]
            else:
                parent[path[-1]] = draw(st.sampled_from(NASTY_QUANTITIES) if op == "quantity" else nasty_values())
            done.append(f"{op} objs[{i}]{''.join(f'[{p!r}]' for p in path)}")
        elif op == "annotation":
            key = draw(st.sampled_from(ANNOTATIONS_READ.get(str(obj.get("kind")), ANNOTATIONS)))
            meta = obj.setdefault("metadata", {})
            if not isinstance(meta, dict):
                continue
            ann = meta.get("annotations")
            if not isinstance(ann, dict):
                ann = meta["annotations"] = {}
            ann[key] = draw(nasty_annotation(key))
            done.append(f"annotation objs[{i}] {key}")
        elif op == "duplicate":
            twin = copy.deepcopy(obj)
            if draw(st.booleans()) and isinstance(twin.get("spec"), dict):
                twin["spec"]["changed"] = True
            objs.insert(draw(st.integers(0, len(objs))), twin)
            done.append(f"duplicate objs[{i}]")
        elif op == "cycle":
            queues = [o for o in objs if isinstance(o, dict) and o.get("kind") == "Queue"
                      and isinstance(o.get("spec"), dict) and isinstance(o.get("metadata"), dict)]
            if not queues:
                continue
            names = [q["metadata"].get("name") for q in queues]
            for q, parent_name in zip(queues, names[1:] + names[:1]):
                q["spec"]["parent"] = parent_name
            done.append("cycle " + " -> ".join(map(str, names)))
        elif op == "dangling":
            if obj.get("kind") == "Pod" and isinstance(obj.get("spec"), dict):
                obj["spec"]["nodeName"] = draw(st.sampled_from(["missing-node", "node-9", ""]))
                if isinstance(obj.get("status"), dict):
                    obj["status"]["phase"] = "Running"
                done.append(f"dangling objs[{i}] nodeName")
        elif op == "kind":
            obj["kind"] = draw(st.one_of(st.sampled_from(("Pod", "Node", "Queue", "PodGroup", "List", "NodeList", "Unknown")),
                                         nasty_values()))
            done.append(f"kind objs[{i}]")
        elif op == "name":
            meta = obj.get("metadata")
            if isinstance(meta, dict):
                meta["name"] = draw(st.one_of(st.sampled_from(("", " ", _LONG, "名前-🚀", "a/b", "-x-", "default")), st.text(max_size=30)))
                done.append(f"name objs[{i}]")
        elif op == "junk":
            objs.insert(draw(st.integers(0, len(objs))), draw(nasty_values()))
            done.append("junk object")
    return objs, done


def corrupted_clusters(workloads: bool = True) -> st.SearchStrategy[tuple[list[Any], list[str]]]:
    return clusters(workloads=workloads).flatmap(corrupted)


# -- a systematic sweep -----------------------------------------------------------------------


def rich_cluster() -> list[dict[str, Any]]:
    """One valid cluster that uses every field the scheduler reads: card nodes with MIG and MPS
    labels, taints, hierarchical queues with card quotas, a gang with card requests and task
    roles, every kind of affinity, tolerations, host ports, a PriorityClass, a PDB."""
    import json

    gpu = {"kind": "Node", "metadata": {"name": "g1", "labels": {
        "nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.memory": "81920", "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.replicas": "2", "zone": "a"}},
        "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "7",
                                   "nvidia.com/mig-1g.10gb": "7", "nvidia.com/gpu.shared": "2"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}
    cpu = {"kind": "Node", "metadata": {"name": "c1", "labels": {"zone": "b"}},
           "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "20"}}}
    root = {"kind": "Queue", "metadata": {"name": "root"}, "spec": {"weight": 1, "capability": {"cpu": "100", "memory": "1Ti"}}}
    default = {"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": True}}
    q1 = {"kind": "Queue", "metadata": {"name": "q1", "annotations": {
        CARD_QUOTA: json.dumps({"NVIDIA-H200": 4}), HIERARCHY: "root/q1", HIERARCHY_WEIGHTS: "1/2"}},
        "spec": {"weight": 2, "parent": "root", "reclaimable": True, "priority": 3,
                 "capability": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "4"},
                 "deserved": {"cpu": "8"}, "guarantee": {"resource": {"cpu": "1"}}},
        "status": {"state": "Open"}}
    pc = {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000, "globalDefault": False}
    pg = {"kind": "PodGroup", "metadata": {"name": "pg", "namespace": "ns", "annotations": {
        CARD_REQUEST: json.dumps({"NVIDIA-H200": 2}), SERVICE_TYPE: "training", PREEMPTABLE: "true"}},
        "spec": {"minMember": 2, "queue": "q1", "priorityClassName": "high", "minTaskMember": {"worker": 1},
                 "minResources": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"},
                 "networkTopology": {"mode": "hard", "highestTierName": "leaf"}},
        "status": {"phase": "Inqueue", "conditions": [{"type": "Scheduled", "status": "True"}]}}

    def card_pod(name: str, port: int, node: str = "") -> dict[str, Any]:
        spec: dict[str, Any] = {
            "schedulerName": "volcano", "priorityClassName": "high",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                                                          "limits": {"nvidia.com/gpu": "1"}},
                            "ports": [{"containerPort": 80, "hostPort": port, "protocol": "TCP", "hostIP": "0.0.0.0"}]}],
            "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "2"}}}],
            "overhead": {"cpu": "10m"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule", "tolerationSeconds": 5}],
            "nodeSelector": {"zone": "a"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
                         "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["g1"]}]}]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]},
                "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 3, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "train"}}, "topologyKey": "zone"}}]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
                     "topologyKey": "kubernetes.io/hostname", "namespaces": ["ns"]}]}},
        }
        if node:
            spec["nodeName"] = node
        return {"kind": "Pod", "metadata": {
            "name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": {"app": "train"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {GROUP_NAME: "pg", CARD_NAME: "NVIDIA-H200", TASK_SPEC: "worker", TASK_PRIORITY: "5"},
            "ownerReferences": [{"kind": "Job", "name": "job", "uid": "uid-job"}]},
            "spec": spec, "status": {"phase": "Running" if node else "Pending", "startTime": "2026-01-01T00:00:01Z"}}

    bare = {"kind": "Pod", "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"},
                                        "annotations": {QUEUE_NAME: "default", PREEMPTABLE: "false"}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]},
            "status": {"phase": "Pending"}}
    pdb = {"kind": "PodDisruptionBudget", "metadata": {"name": "pdb", "namespace": "ns"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "train"},
                                                    "matchExpressions": [{"key": "app", "operator": "In", "values": ["train"]}]}},
           "status": {"disruptionsAllowed": 1, "disruptedPods": {"x": "2026-01-01T00:00:00Z"}}}
    leaf = {"kind": "HyperNode", "metadata": {"name": "leaf-a"}, "spec": {"tier": 1, "tierName": "leaf", "members": [
        {"type": "Node", "selector": {"exactMatch": {"name": "g1"}}},
        {"type": "Node", "selector": {"regexMatch": {"pattern": "^c[0-9]$"}}},
        {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"zone": "a"}}}}]}}
    spine = {"kind": "HyperNode", "metadata": {"name": "spine-a"}, "spec": {"tier": 2, "members": [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-a"}}}]}}
    return [gpu, cpu, root, default, q1, pc, pg, card_pod("w0", 8080, "g1"), card_pod("w1", 8081), card_pod("w2", 8082), bare, pdb,
            leaf, spine]


SWEEP_VALUES: tuple[Any, ...] = ("<delete>",) + NASTY_SCALARS + NASTY_QUANTITIES + NASTY_JSON


def sweep_cases(objs: list[dict[str, Any]] | None = None) -> list[tuple[int, tuple[Any, ...], int]]:
    """Every single mutation of ``objs`` (default: rich_cluster()): (object index, path, index
    into SWEEP_VALUES, 0 meaning delete)."""
    objs = rich_cluster() if objs is None else objs
    return [(i, path, v) for i, obj in enumerate(objs) for path in _paths(obj) for v in range(len(SWEEP_VALUES))]


def apply_sweep_case(case: tuple[int, tuple[Any, ...], int], objs: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    objs = copy.deepcopy(rich_cluster() if objs is None else objs)
    i, path, v = case
    parent = _parent(objs[i], path)
    if v == 0:
        del parent[path[-1]]
    else:
        parent[path[-1]] = SWEEP_VALUES[v]
    return objs
