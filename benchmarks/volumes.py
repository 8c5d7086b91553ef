"""Benchmark: one scheduling session over pods with WaitForFirstConsumer claims of local PVs.

N nodes, each with K local PVs (node affinity to the node's hostname, sizes 10–100 Gi); M pending
pods in gangs of G, a share of them (``--claims``) with one claim each of a no-provisioner class
(``--ignored-provisioners kubernetes.io/no-provisioner`` as Volcano's e2e runs); Volcano's default
config. Printed: the session's wall time, pods bound, binds with a PV, and the same session with
no claims at all (what pods without claims cost: the difference should be nil).

Run by hand (on a quiet machine for figures to keep):

    .venv/bin/python benchmarks/volumes.py              # 1,000 nodes × 5,000 pods, all with claims
    .venv/bin/python benchmarks/volumes.py --nodes 5000 --pods 20000 --pvs-per-node 4
    .venv/bin/python benchmarks/volumes.py --claims 0.1 # one pod in ten with a claim
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from tidesched.model.loader import Manifest
from tidesched.scheduler import config_from_file, schedule_manifests, tune_gc

NS = "bench"
IGNORED = ("kubernetes.io/no-provisioner",)


def generate(
    n_nodes: int, n_pods: int, pvs_per_node: int, gang: int, claims: float, seed: int = 1
) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = [
        {"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}},
        {
            "kind": "StorageClass",
            "apiVersion": "storage.k8s.io/v1",
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    ]
    for i in range(n_nodes):
        name = f"node-{i:05d}"
        objs.append(
            {
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
            }
        )
        for j in range(pvs_per_node):
            objs.append(
                {
                    "kind": "PersistentVolume",
                    "apiVersion": "v1",
                    "metadata": {"name": f"pv-{i:05d}-{j}"},
                    "spec": {
                        "storageClassName": "local",
                        "capacity": {"storage": f"{rng.randrange(10, 101)}Gi"},
                        "accessModes": ["ReadWriteOnce"],
                        "local": {"path": f"/mnt/disk{j}"},
                        "nodeAffinity": {
                            "required": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": "kubernetes.io/hostname",
                                                "operator": "In",
                                                "values": [name],
                                            }
                                        ]
                                    }
                                ]
                            }
                        },
                    },
                    "status": {"phase": "Available"},
                }
            )
    for g in range(0, n_pods, gang):
        pg = f"job-{g // gang:05d}"
        members = min(gang, n_pods - g)
        objs.append(
            {
                "kind": "PodGroup",
                "metadata": {"name": pg, "namespace": NS},
                "spec": {"minMember": members},
                "status": {"phase": "Inqueue"},
            }
        )
        for k in range(members):
            name = f"{pg}-{k}"
            spec: dict[str, Any] = {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}],
            }
            if rng.random() < claims:
                claim = f"data-{name}"
                objs.append(
                    {
                        "kind": "PersistentVolumeClaim",
                        "apiVersion": "v1",
                        "metadata": {"name": claim, "namespace": NS},
                        "spec": {
                            "storageClassName": "local",
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": f"{rng.randrange(5, 60)}Gi"}},
                        },
                    }
                )
                spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
            objs.append(
                {
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": NS,
                        "annotations": {"scheduling.k8s.io/group-name": pg},
                    },
                    "spec": spec,
                }
            )
    return objs


def session(objs: list[dict[str, Any]]) -> tuple[float, Any]:
    config = config_from_file(None)
    manifests = [Manifest("bench", o) for o in objs]
    t0 = time.perf_counter()
    _ssn, decisions = schedule_manifests(manifests, config, ignored_provisioners=IGNORED)
    return time.perf_counter() - t0, decisions


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=5000)
    p.add_argument("--pvs-per-node", type=int, default=6)
    p.add_argument("--gang", type=int, default=4)
    p.add_argument("--claims", type=float, default=1.0, help="share of pods with a claim (1.0)")
    a = p.parse_args()
    tune_gc()
    with_claims = generate(a.nodes, a.pods, a.pvs_per_node, a.gang, a.claims)
    without = [
        o for o in generate(a.nodes, a.pods, a.pvs_per_node, a.gang, 0.0) if o["kind"] != "PersistentVolume"
    ]
    for label, objs in (("with claims", with_claims), ("no claims", without)):
        seconds, d = session(objs)
        pvs = sum(len(v.static) for v in d.volume_bindings.values())
        print(
            f"{label:>12}: {a.nodes} nodes, {a.pods} pods: session {seconds:.2f} s (build included), "
            f"{len(d.bound)} bound, {pvs} with a PV, {len(d.bound) / seconds:,.0f} pods/s"
        )


if __name__ == "__main__":
    main()
