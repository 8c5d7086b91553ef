"""DRA claims drawn into the differential's v1.15.1 worlds (``benchmarks/differential.py``, issue
33 item 3).

In some of the worlds whose configuration has neither ``proportion`` nor ``reclaim`` (a random stream of
its own, ``v1.15-claims-SEED``, so every other draw of a seed stays as it was): a DeviceClass
(every device of the test driver, ``dra_differential.DRIVER``), ResourceSlices publishing one to
four GPUs (a model and a memory size each, as ``dra_differential.MODELS`` has them) on one to
three nodes, ResourceClaimTemplates (one GPU; two GPUs; one GPU of at least 40Gi), and on some
pending pods a claim made from one of them; ``predicate.DynamicResourceAllocationEnable: true``
in the predicates plugin's arguments (vc-scheduler v1.15.1 allocates no claim without it; the
Kubernetes gate ``DynamicResourceAllocation`` is on by default in the Kubernetes it embeds).

Why not with ``proportion``: vc-scheduler v1.15.1 then binds no pod with a claim (every session
"Queue <q> is overused when considering task": proportion's allocatable check counts the claimed
device class against a queue that deserves none; docs/dra.md). The capacity plugin is drawn as
the other worlds draw it.

The claims are made as kube-controller-manager's resourceclaim controller makes them from the
templates (each named ``<pod>-gpu``, controlled by its pod, annotated with the pod's claim name,
and in the pod's ``status.resourceClaimStatuses``), so no controller runs: the planes create them
with the pods. Templates rather than ResourceClaims by name, because vc-scheduler v1.15.1 drops a
pod whose claim, named directly, is not yet in its informer when the pod is (both exist before it
starts here) and never retries it; a claim from a template it retries (``pendingDRAResourceClaimError``).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from dra_differential import DRIVER, MODELS, RES

if TYPE_CHECKING:
    from differential import PodSpec, World

CLASS = "gpu-diff"
CLAIM = "gpu"  # the pod's name for its claim (spec.resourceClaims[].name)
CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
SHARE = 0.45  # of the worlds without proportion (about a quarter of all)
KINDS = {  # DeviceClass, ResourceSlice, ResourceClaimTemplate, ResourceClaim: plural paths
    "DeviceClass": f"{RES}/deviceclasses",
    "ResourceSlice": f"{RES}/resourceslices",
    "ResourceClaimTemplate": f"{RES}/namespaces/{{ns}}/resourceclaimtemplates",
    "ResourceClaim": f"{RES}/namespaces/{{ns}}/resourceclaims",
}


def _template(name: str, ns: str, request: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}}}


def templates(ns: str) -> list[dict[str, Any]]:
    big = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
    return [
        _template("one", ns, {"deviceClassName": CLASS}),
        _template("two", ns, {"deviceClassName": CLASS, "count": 2}),
        _template("big", ns, {"deviceClassName": CLASS, "selectors": [{"cel": {"expression": big}}]}),
    ]


def draw(world: World) -> None:
    """Devices, templates and claims on some pending pods, into ``world`` (or nothing)."""
    import yaml
    from differential import NS

    rng = random.Random(f"v1.15-claims-{world.seed}")
    conf = yaml.safe_load(world.config)
    plugins = conf["tiers"][-1]["plugins"]
    if any(p["name"] == "proportion" for p in plugins) or rng.random() >= SHARE:
        return
    if "reclaim" in conf["actions"]:
        return  # left out for now: seed 3198 (reclaim for a pod with a claim), not yet explained
    pending = [p for p in world.pods if not p.node]
    if not pending:
        return
    objs: list[dict[str, Any]] = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}]
    for node in rng.sample(world.nodes, rng.randint(1, min(3, len(world.nodes)))):
        devices = []
        for j in range(rng.randint(1, 4)):
            model = rng.choice(sorted(MODELS))
            devices.append({"name": f"gpu-{j}", "attributes": {"model": {"string": model}},
                            "capacity": {"memory": {"value": rng.choice(MODELS[model])}}})
        objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                     "metadata": {"name": f"{node.name}-gpus"},
                     "spec": {"driver": DRIVER, "nodeName": node.name, "devices": devices,
                              "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1}}})
    objs.extend(templates(NS))
    world.dra = objs
    jobs = sorted({p.job for p in pending})
    for job in rng.sample(jobs, rng.randint(1, len(jobs))):
        kind = rng.choices(["one", "two", "big"], weights=[5, 2, 2])[0]
        for p in pending:
            if p.job == job and rng.random() < 0.8:
                p.claim_template = kind
    for p in plugins:
        if p["name"] == "predicates":
            p.setdefault("arguments", {})["predicate.DynamicResourceAllocationEnable"] = True
    world.config = yaml.safe_dump(conf, sort_keys=False)


# -- manifests ----------------------------------------------------------------------------------


def claim_name(p: PodSpec) -> str:
    return f"{p.name}-{CLAIM}"


def pod_parts(p: PodSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec fields, status fields) a pod with a claim has; both empty without."""
    if not p.claim_template:
        return {}, {}
    return ({"resourceClaims": [{"name": CLAIM, "resourceClaimTemplateName": p.claim_template}]},
            {"resourceClaimStatuses": [{"name": CLAIM, "resourceClaimName": claim_name(p)}]})


def claim_manifest(p: PodSpec, ns: str) -> dict[str, Any]:
    """The claim the resourceclaim controller would make for ``p`` from its template (the owner's
    uid as the in-process replay gives pods theirs; :func:`create` puts the real one in)."""

    tmpl = next(t for t in templates(ns) if t["metadata"]["name"] == p.claim_template)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": claim_name(p), "namespace": ns, "annotations": {CLAIM_ANNOTATION: CLAIM},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": p.name,
                                              "uid": f"{ns}/{p.name}", "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": tmpl["spec"]["spec"]}


# -- a plane ----------------------------------------------------------------------------------


def create(api: Any, m: dict[str, Any]) -> None:
    """One of the kinds above on a real control plane (a claim owned by its pod's real uid)."""
    ns = m["metadata"].get("namespace", "")
    if m["kind"] == "ResourceClaim":
        for ref in m["metadata"].get("ownerReferences") or []:
            ref["uid"] = api.get(f"/api/v1/namespaces/{ns}/pods/{ref['name']}")["metadata"]["uid"]
    api.post(KINDS[m["kind"]].format(ns=ns), m)


def clear(api: Any, ns: str) -> None:
    """Everything the draw made goes (claims with their finalizers dropped)."""
    from controlplane import ApiError

    for kind in ("ResourceClaim", "ResourceClaimTemplate", "ResourceSlice", "DeviceClass"):
        path = KINDS[kind].format(ns=ns)
        for obj in api.items(path):
            one = f"{path}/{obj['metadata']['name']}"
            try:
                if obj["metadata"].get("finalizers"):
                    api.patch(one, {"metadata": {"finalizers": None}})
                api.delete(one)
            except ApiError as exc:
                if exc.status != 404:
                    raise


def left(api: Any, ns: str) -> bool:
    return any(api.items(KINDS[k].format(ns=ns)) for k in ("ResourceClaim", "ResourceSlice", "DeviceClass"))


# -- the in-process replay -----------------------------------------------------------------------


def apply_writes(objs: list[dict[str, Any]], decisions: Any) -> None:
    """What each bind of a session wrote to its pod's claims (the allocation, the pod in
    ``reservedFor``), into the replay's objects, as the plane's claims hold them after a bind."""
    claims = {f"{m['metadata']['namespace']}/{m['metadata']['name']}": m for m in objs if m["kind"] == "ResourceClaim"}
    for key in decisions.bound:
        ns, _, name = key.partition("/")
        for w in decisions.claim_writes.get(key, ()):
            claim = claims.get(w.claim)
            if claim is None:
                continue
            st = claim.setdefault("status", {})
            if w.allocation is not None and st.get("allocation") is None:
                st["allocation"] = dict(w.allocation)
            reserved = st.setdefault("reservedFor", [])
            if not any(r.get("name") == name for r in reserved):
                reserved.append({"resource": "pods", "name": name, "uid": f"{ns}/{name}"})
