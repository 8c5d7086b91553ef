"""What the simulated controllers share: the labels and annotations Volcano's and Kubernetes'
controllers write, the owner references they set, pod-template requests and hashes, replica
counts, and the ``Timer`` a controller leaves for delayed work."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tidesched.model.fields import INT32, parse_int
from tidesched.model.objects import ObjectError, parse_pod
from tidesched.model.resource import Resource
from tidesched.sim.world import meta, split_key

Emit = Callable[[str, str, str, str, str, str], None]  # kind, namespace, name, type, reason, message

# Labels and annotations the controllers write (volcano-semantics §10).
VOLCANO_JOB_API = "batch.volcano.sh/v1alpha1"
PODGROUP_API = "scheduling.volcano.sh/v1beta1"
JOB_NAME_KEY = "volcano.sh/job-name"
JOB_NAMESPACE_KEY = "volcano.sh/job-namespace"
JOB_VERSION_KEY = "volcano.sh/job-version"
JOB_QUEUE_KEY = "volcano.sh/queue-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_INDEX_KEY = "volcano.sh/task-index"
TEMPLATE_UID_KEY = "volcano.sh/template-uid"
GROUP_MIN_MEMBER_KEY = "scheduling.volcano.sh/group-min-member"
POD_TEMPLATE_HASH = "pod-template-hash"


@dataclass(frozen=True, slots=True)
class Timer:
    """A controller's delayed work (clean-up after ``finishedTTL``)."""

    what: str  # "job-gc" | "pod-gc"
    key: str


def resource_list(r: Resource) -> dict[str, str]:
    """A Resource as a Kubernetes resource list (exact: millicores, bytes, milli-units)."""
    out: dict[str, str] = {}
    if r.milli_cpu:
        out["cpu"] = f"{int(round(r.milli_cpu))}m"
    if r.memory:
        out["memory"] = str(int(round(r.memory)))
    for name in sorted(r.scalars):
        v = int(round(r.scalars[name]))
        if v:
            out[name] = str(v // 1000) if v % 1000 == 0 else f"{v}m"
    return out


_REQUEST_CACHE: dict[str, Resource] = {}


def template_request(pod_spec: Mapping[str, Any]) -> Resource:
    """Requests of one pod built from ``pod_spec`` (limits when no request), as the scheduler
    reads them; cached by content."""
    key = json.dumps(pod_spec, sort_keys=True, default=str)
    hit = _REQUEST_CACHE.get(key)
    if hit is None:
        try:
            hit = parse_pod({"metadata": {"name": "template"}, "spec": pod_spec}).resreq
        except ObjectError:
            hit = Resource()
        if len(_REQUEST_CACHE) > 4096:
            _REQUEST_CACHE.clear()
        _REQUEST_CACHE[key] = hit
    return hit.clone()


def template_hash(template: Mapping[str, Any]) -> str:
    """A stable 10-character hash of a pod template (the ``pod-template-hash`` label)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True, default=str).encode()).digest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(alphabet[b % len(alphabet)] for b in digest[:10])


def make_owner_ref(api: str, kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    m = meta(obj)
    return {
        "apiVersion": api,
        "kind": kind,
        "name": m.get("name"),
        "uid": m.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


# More pods than this per Job task, Deployment or ReplicaSet is a typo, not a workload: the
# simulator refuses such a Job and caps a Deployment with a Warning instead of building
# billions of pods.
MAX_SIM_REPLICAS = 100_000


def int_field(value: Any, default: int) -> int:
    """An int32 field (as the API server's schema has it) through the one integer reader;
    ValueError otherwise. Strings are refused, as the typed API refuses them."""
    if isinstance(value, str):
        raise ValueError(f"expected an integer, got {value!r}")
    try:
        return parse_int(value, "", default, bounds=INT32)
    except ObjectError as exc:
        raise ValueError(str(exc).removeprefix(": ")) from None


def replica_count(value: Any, emit: Emit, kind: str, key: str) -> int:
    """A Deployment's or ReplicaSet's replicas: 1 when unreadable, at most MAX_SIM_REPLICAS,
    each with a Warning event."""
    ns, name = split_key(key)
    try:
        replicas = int_field(value, 1)
    except ValueError as exc:
        emit(kind, ns, name, "Warning", "InvalidReplicas", f"{kind} {key}: spec.replicas: {exc}; using 1")
        return 1
    if replicas > MAX_SIM_REPLICAS:
        emit(kind, ns, name, "Warning", "InvalidReplicas",
             f"{kind} {key}: spec.replicas: {replicas} is more than the simulator runs; using {MAX_SIM_REPLICAS}")
        return MAX_SIM_REPLICAS
    return max(replicas, 0)
