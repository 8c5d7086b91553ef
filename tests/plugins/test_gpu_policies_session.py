"""The GPU placement plugins in a scheduling session (what `tidesched run` and `simulate` do):
one session places a queue of one-pod jobs in creation order, each scored on the session's
state after the previous placements, and lands every pod where the experiment's placement loop
(sim/experiment, the same plugins' scoring) lands it."""

from __future__ import annotations

import numpy as np
import pytest

from builders import node, pod, podgroup, queue
from tidesched.model.gpu_nodes import GpuNodes, GpuRequest
from tidesched.scheduler import config_from_text, schedule_manifests
from tidesched.sim.experiment.placement import place_all
from tidesched.sim.experiment.policies import POLICY_DIR, bundled, parse, placement_plugins

NODES = [(f"n{i:02d}", (16, 32, 64, 96, 8)[i % 5], (2, 4, 8, 8, 1)[i % 5], ("T4", "V100", "G2", "G2", "P100")[i % 5])
         for i in range(12)]
PODS = [((2, 4, 8, 1, 16, 2, 6, 3, 12, 2)[k % 10], (1, 0, 2, 1, 4, 1, 0, 1, 8, 2)[(k * 7) % 10]) for k in range(60)]


def manifests() -> list[dict]:
    objs: list[dict] = [queue("q", weight=1)]
    for name, cpu, gpus, model in NODES:
        objs.append(node(name, cpu=str(cpu), memory="64Gi", labels={"nvidia.com/gpu.product": model},
                         nvidia_com__gpu=str(gpus)))
    for k, (cpu, gpus) in enumerate(PODS):
        objs.append(podgroup(f"pg{k:02d}", 1, queue="q"))
        p = pod(f"p{k:02d}", f"pg{k:02d}", cpu=str(cpu), memory="1Gi",
                extra_requests={"nvidia.com/gpu": str(gpus)} if gpus else None)
        p["metadata"]["creationTimestamp"] = f"2025-01-01T00:{k // 60:02d}:{k % 60:02d}Z"
        objs[-1]["metadata"]["creationTimestamp"] = f"2025-01-01T00:{k // 60:02d}:{k % 60:02d}Z"
        objs.append(p)
    return objs


def experiment(name: str) -> list[str]:
    nodes = GpuNodes([n[0] for n in NODES], [n[3] for n in NODES], [n[1] * 1000 for n in NODES], [65536] * len(NODES),
                     [n[2] for n in NODES])
    reqs = [GpuRequest(cpu * 1000, 1024, gpus, 1000 if gpus else 0) for cpu, gpus in PODS]
    policies = placement_plugins(parse(bundled(name)))
    fgd = placement_plugins(parse(bundled("fgd")))[0][0]
    nodes.set_typical(fgd.typical([r.shape() for r in reqs]))
    p = place_all(nodes, reqs, policies, np.random.default_rng(0))
    return [nodes.names[i] if i >= 0 else "" for i in p.node]


@pytest.mark.parametrize("name", ["fgd", "bestfit", "dotprod", "gpupacking", "gpuclustering"])
def test_a_session_places_as_the_experiment_does(name: str) -> None:
    config = config_from_text((POLICY_DIR / f"{name}.yaml").read_text())
    _ssn, decisions = schedule_manifests(manifests(), config)
    session = [decisions.bound.get(f"ns/p{k:02d}", "") for k in range(len(PODS))]
    assert session == experiment(name)
    assert sum(1 for s in session if s) >= 30


def test_random_places_every_pod_that_fits_and_its_seed_decides() -> None:
    text = (POLICY_DIR / "random.yaml").read_text()
    bound = [schedule_manifests(manifests(), config_from_text(text.replace("random.seed: 0", f"random.seed: {s}")))[1].bound
             for s in (0, 0, 1)]
    assert bound[0] == bound[1] != bound[2]
    assert min(len(bound[0]), len(bound[2])) >= 10


def test_the_policies_place_differently() -> None:
    placements = {name: tuple(experiment(name)) for name in ("fgd", "bestfit", "dotprod", "gpupacking", "gpuclustering")}
    assert len(set(placements.values())) >= 3


# -- vGPU devices (deviceshare): shared pods, and the device each policy chooses -------------------

VNODES = [(f"v{i}", (16, 32, 64)[i % 3], (2, 4, 8)[i % 3]) for i in range(6)]
VPODS = [((2, 4, 1, 8, 3)[k % 5], (1, 1, 2, 1, 1)[(k * 3) % 5], (50, 30, 100, 70, 20, 100, 40)[k % 7]) for k in range(50)]


def vgpu_manifests() -> list[dict]:
    from vgpu_builders import vgpu_node, vgpu_pod

    objs: list[dict] = [queue("q", weight=1)]
    for name, cpu, gpus in VNODES:
        n = vgpu_node(name, gpus=gpus, cpu=str(cpu), mem="64Gi", product="Tesla-T4")
        n["status"]["allocatable"]["volcano.sh/vgpu-memory-percentage"] = str(100 * gpus)  # as the trace's nodes
        objs.append(n)
    for k, (cpu, number, pct) in enumerate(VPODS):
        stamp = f"2025-01-01T00:{k // 60:02d}:{k % 60:02d}Z"
        objs.append(podgroup(f"pg{k:02d}", 1, queue="q"))
        objs[-1]["metadata"]["creationTimestamp"] = stamp
        number = 1 if pct < 100 else number
        p = vgpu_pod(f"p{k:02d}", f"pg{k:02d}", number=number, cores=pct, percent=pct, cpu=str(cpu))  # 1Gi memory
        p["metadata"]["creationTimestamp"] = stamp
        objs.append(p)
    return objs


def vgpu_experiment(name: str) -> list[tuple[str, int]]:
    nodes = GpuNodes([n[0] for n in VNODES], ["Tesla-T4"] * len(VNODES), [n[1] * 1000 for n in VNODES],
                     [65536] * len(VNODES), [n[2] for n in VNODES])
    reqs = [GpuRequest(cpu * 1000, 1024, 1 if pct < 100 else number, pct * 10) for cpu, number, pct in VPODS]
    fgd = placement_plugins(parse(bundled("fgd")))[0][0]
    nodes.set_typical(fgd.typical([r.shape() for r in reqs]))
    out = []
    for req in reqs:  # one at a time, to read the device each shared pod took
        before = nodes.dev_free.copy()
        p = place_all(nodes, [req], placement_plugins(parse(bundled(name))), np.random.default_rng(0))
        i = int(p.node[0])
        dev = -1
        if i >= 0 and req.shared:
            dev = int(np.flatnonzero(nodes.dev_free[i] != before[i])[0])
        out.append((nodes.names[i] if i >= 0 else "", dev))
    return out


@pytest.mark.parametrize("name", ["fgd", "bestfit", "gpupacking"])
def test_a_session_places_shared_pods_on_the_devices_the_experiment_chooses(name: str) -> None:
    from tidesched.model.vgpu import pod_assignment

    config = config_from_text((POLICY_DIR / f"{name}.yaml").read_text())
    _ssn, decisions = schedule_manifests(vgpu_manifests(), config)
    want = vgpu_experiment(name)
    got = []
    for k, (_cpu, _n, pct) in enumerate(VPODS):
        key = f"ns/p{k:02d}"
        node_name = decisions.bound.get(key, "")
        dev = -1
        if node_name and pct < 100:
            assignment = pod_assignment(decisions.bind_annotations[key])
            assert assignment is not None
            (use,) = assignment.uses()
            dev = int(use.uuid.rsplit("-", 1)[1])
        got.append((node_name, dev))
    assert got == want
    assert sum(1 for n, d in got if d >= 0) >= 20
