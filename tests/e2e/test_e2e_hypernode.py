"""Network topology on a real control plane (issue 34): Volcano's HyperNode CRD (v1.15.1) served, the
HyperNode tree of Volcano's own ``hypernode`` e2e suite over eight nodes (8 CPU, 8 Gi, as its CI's
kwok nodes), and ``tidesched run`` with Volcano v1.15.1's CI config: a gang held to a leaf waits
while no leaf can take it (its FailedScheduling event, ``explain`` in topology terms), a gang that
may span a spine binds within one, a soft gang binds, a partitioned gang (sub-groups of a
``subGroupPolicy``, as Volcano's Job controller writes a ``partitionPolicy``) binds each
partition within a leaf of one spine, and a HyperNode cycle is a Warning on the HyperNode. The harness that runs Volcano's ``hypernode`` suite itself is separate work.

        s6 (tier 3)
       /          \\
     s4            s5          (tier 2)
    /   \\        /   \\
   s0    s1     s2    s3       (tier 1)
  n0 n1 n2 n3  n4 n5 n6 n7
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from cluster import TIDESCHED, VOLCANO, VOLCANO_115_CI_CONF, bound, create_node, events, pod_body, wait_until
from controlplane import REPO, ApiError, free_port
from volcano import VolcanoProcess, install_volcano_crds, start_controller_manager

CRD = REPO.parent / "shared" / "volcano-1.15" / "crds" / "topology.volcano.sh_hypernodes.yaml"
TOPOLOGY = "/apis/topology.volcano.sh/v1alpha1"
GROUP_NAME = "scheduling.k8s.io/group-name"


def install_hypernode_crd(api) -> None:  # type: ignore[no-untyped-def]
    doc = yaml.safe_load(CRD.read_text())
    try:
        api.create(doc)
    except ApiError as exc:
        if exc.status != 409:
            raise

    def served() -> bool:
        try:
            return any(r["name"] == "hypernodes" for r in api.get(TOPOLOGY).get("resources", []))
        except ApiError:
            return False

    wait_until(served, 30, "the HyperNode CRD to be served")


def hypernode(name: str, tier: int, members: list[str], of: str = "Node") -> dict:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": [{"type": of, "selector": {"exactMatch": {"name": m}}} for m in members]}}


def setup_tree(api) -> None:  # type: ignore[no-untyped-def]
    for hn in api.items(f"{TOPOLOGY}/hypernodes"):
        api.delete(f"{TOPOLOGY}/hypernodes/{hn['metadata']['name']}")
    for i in range(8):
        create_node(api, f"kwok-node-{i}", cpu="8", memory="8Gi")
    for k in range(4):
        api.create(hypernode(f"s{k}", 1, [f"kwok-node-{2 * k}", f"kwok-node-{2 * k + 1}"]))
    api.create(hypernode("s4", 2, ["s0", "s1"], "HyperNode"))
    api.create(hypernode("s5", 2, ["s2", "s3"], "HyperNode"))
    api.create(hypernode("s6", 3, ["s4", "s5"], "HyperNode"))


def occupy(api, ns: str, node: str, cpu: str) -> None:  # type: ignore[no-untyped-def]
    """A pod another scheduler placed: it holds ``cpu`` of the node."""
    body = pod_body(ns, f"busy-{node}", cpu=cpu, memory="1Gi", scheduler="default-scheduler")
    body["spec"]["nodeName"] = node
    api.post(f"/api/v1/namespaces/{ns}/pods", body)


def gang(api, ns: str, name: str, pods: int, cpu: str, topology: dict | None,  # type: ignore[no-untyped-def]
         sub_groups: list[dict] | None = None, labels: list[dict] | None = None) -> list[str]:
    spec = {"minMember": pods, "queue": "default", **({"networkTopology": topology} if topology else {})}
    if sub_groups:
        spec["subGroupPolicy"] = sub_groups
    api.post(f"{VOLCANO}/namespaces/{ns}/podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": ns},
        "spec": spec, "status": {"phase": "Pending"}})
    names = [f"{name}-{i}" for i in range(pods)]
    for i, n in enumerate(names):
        body = pod_body(ns, n, cpu=cpu, memory="1Gi", annotations={GROUP_NAME: name})
        if labels:
            body["metadata"].setdefault("labels", {}).update(labels[i])
        api.post(f"/api/v1/namespaces/{ns}/pods", body)
    return names


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "COLUMNS": "300"}
    return subprocess.run([str(TIDESCHED), *args], capture_output=True, text=True, env=env, timeout=120)


def leaf_spine_soft(e2e, start, tidesched: bool) -> None:  # type: ignore[no-untyped-def]
    """The three gangs of the tree above, with the scheduler ``start()`` starts."""
    api = e2e.api
    install_hypernode_crd(api)
    setup_tree(api)
    ns = e2e.namespace("hn")
    # Every leaf has one node with 3 CPUs free; s2 and s3 each have a free node (n5, n7).
    for i in (0, 1, 2, 3, 4, 6):
        occupy(api, ns, f"kwok-node-{i}", "5")
    wait_until(lambda: len(e2e.kubelet.started) >= 6, 30, "the occupying pods to run")
    conf = start()

    # Two pods of 5 CPUs held to one leaf: no leaf has two nodes with 5 free. It waits.
    leaf = gang(api, ns, "leaf", 2, "5", {"mode": "hard", "highestTierAllowed": 1})
    wait_until(lambda: events(api, ns, leaf[0], "FailedScheduling"), 30, "the leaf gang's FailedScheduling")
    time.sleep(2)
    assert not set(leaf) & set(bound(api, ns))
    if tidesched:
        res = cli("explain", f"{ns}/podgroup/leaf", "--kubeconfig", str(e2e.installed.kubeconfig), "--config", str(conf))
        assert res.returncode == 0, res.stderr
        assert "Network topology: hard, tier 1; applied: within one HyperNode of tier ≤ 1." in res.stdout, res.stdout
        assert "Waiting for a domain: no tier-1 HyperNode" in res.stdout, res.stdout

    # The same pods allowed a spine: s5 holds them (n5 and n7), not s4 (no node there has 5 free).
    for n in leaf:
        api.delete(f"/api/v1/namespaces/{ns}/pods/{n}", gracePeriodSeconds=0)
    api.delete(f"{VOLCANO}/namespaces/{ns}/podgroups/leaf")
    spine = gang(api, ns, "spine", 2, "5", {"mode": "hard", "highestTierAllowed": 2})
    wait_until(lambda: set(spine) <= set(bound(api, ns)), 30, "the spine gang to bind")
    assert {bound(api, ns)[n] for n in spine} == {"kwok-node-5", "kwok-node-7"}

    # A soft gang of two 3-CPU pods: every node has 3 CPUs left, so the lowest HyperNode with
    # room is a leaf: both pods in one leaf, not two.
    soft = gang(api, ns, "soft", 2, "3", {"mode": "soft"})
    wait_until(lambda: set(soft) <= set(bound(api, ns)), 30, "the soft gang to bind")
    nodes = sorted(bound(api, ns)[n] for n in soft)
    leaves = {int(n.rsplit("-", 1)[1]) // 2 for n in nodes}
    assert len(leaves) == 1, nodes

    # A partitioned gang, as Volcano's Job controller writes a task's partitionPolicy: four 3-CPU
    # pods in two partitions of two, each held to a leaf, the gang to a spine, the partitions
    # interleaved in the pods' order. Every node but the soft gang's two has 3 CPUs left: each
    # partition takes both nodes of one leaf, both leaves under one spine (as one gang, the pods
    # in order would split both partitions over two leaves).
    # (Pods named <job>-<task>-<index> go in index order in both schedulers.)
    part = gang(api, ns, "part-w", 4, "3", {"mode": "hard", "highestTierAllowed": 2},
                sub_groups=[{"name": "worker", "subGroupSize": 2, "minSubGroups": 2,
                             "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}},
                             "matchLabelKeys": ["volcano.sh/partition-id"],
                             "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}],
                labels=[{"volcano.sh/task-spec": "worker", "volcano.sh/partition-id": str(i % 2)} for i in range(4)])
    wait_until(lambda: set(part) <= set(bound(api, ns)), 30, "the partitioned gang to bind")
    at = {n.rsplit("-", 1)[1]: int(bound(api, ns)[n].rsplit("-", 1)[1]) for n in part}
    assert at["0"] // 2 == at["2"] // 2 != at["1"] // 2 == at["3"] // 2, at  # a leaf each
    assert at["0"] // 4 == at["1"] // 4, at  # one spine
    if tidesched:
        res = cli("explain", f"{ns}/podgroup/part-w", "--kubeconfig", str(e2e.installed.kubeconfig), "--config", str(conf))
        assert res.returncode == 0, res.stderr
        assert "worker: 2 sub-groups of 2 pods, 2 ready, minSubGroups 2" in res.stdout, res.stdout


def test_gangs_held_to_a_leaf_or_a_spine(e2e) -> None:
    def start() -> Path:
        return e2e.scheduler(VOLCANO_115_CI_CONF).conf

    leaf_spine_soft(e2e, start, tidesched=True)


def test_vc_scheduler_v1_15_1_decides_the_same(e2e) -> None:
    """The same objects under vc-scheduler v1.15.1 (Volcano's CI config), the reference."""
    volcano = volcano_115()
    if volcano is None:
        if os.environ.get("CI"):
            raise AssertionError("Volcano v1.15.1 is needed in CI: ../shared/volcano-1.15/unpack")
        pytest.skip("Volcano v1.15.1 not found (../shared/volcano-1.15)")
    install_volcano_crds(e2e.api, volcano, replace=False)
    procs = []

    def start() -> Path:
        conf = e2e.tmp / "vc-scheduler.conf"
        conf.write_text(VOLCANO_115_CI_CONF)
        procs.append(start_vc_scheduler_115(e2e, volcano, conf))
        return conf

    try:
        leaf_spine_soft(e2e, start, tidesched=False)
    finally:
        for p in procs:
            p.stop()


def start_vc_scheduler_115(e2e, volcano: Path, conf: Path) -> VolcanoProcess:  # type: ignore[no-untyped-def]
    """vc-scheduler v1.15.1 as its README says it starts here (no leader election), healthy on return."""
    port = free_port()
    kubeconfig = e2e.cp.kubeconfig(e2e.tmp / "vc-admin-115.kubeconfig", e2e.cp.admin_token, user="volcano")
    cmd = [str(volcano / "vc-scheduler"), f"--kubeconfig={kubeconfig}", f"--scheduler-conf={conf}",
           "--leader-elect=false", f"--listen-address=127.0.0.1:{free_port()}", "--enable-healthz",
           f"--healthz-address=127.0.0.1:{port}"]
    proc = VolcanoProcess("vc-scheduler-1.15.1", cmd, e2e.tmp / "vc-scheduler-115.log", port)
    with open(proc.log, "ab") as out:
        proc.popen = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                      env={**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    try:
        return proc.wait_healthy(60)
    except BaseException:
        proc.stop()  # never left running when it does not come up
        raise


def test_a_hypernode_cycle_is_a_warning_and_holds_only_constrained_gangs(e2e) -> None:
    api = e2e.api
    install_hypernode_crd(api)
    for hn in api.items(f"{TOPOLOGY}/hypernodes"):
        api.delete(f"{TOPOLOGY}/hypernodes/{hn['metadata']['name']}")
    create_node(api, "kwok-node-0", cpu="8", memory="8Gi")
    api.create(hypernode("a", 2, ["b"], "HyperNode"))
    api.create(hypernode("b", 2, ["a"], "HyperNode"))
    ns = e2e.namespace("cycle")
    e2e.scheduler(VOLCANO_115_CI_CONF)
    held = gang(api, ns, "held", 1, "1", {"mode": "hard", "highestTierAllowed": 1})
    free = gang(api, ns, "free", 1, "1", None)  # no constraint: not held
    wait_until(lambda: set(free) <= set(bound(api, ns)), 30, "the unconstrained gang to bind")
    cycle = wait_until(lambda: [e for e in events(api, "default") if e["reason"] == "HyperNodeCycle"], 30,
                       "the cycle's Warning")
    assert cycle[0]["involvedObject"]["kind"] == "HyperNode" and cycle[0]["type"] == "Warning"
    time.sleep(2)
    assert not set(held) & set(bound(api, ns))


def volcano_115() -> Path | None:
    """Volcano v1.15.1's binaries, unpacked once (``../shared/volcano-1.15/unpack``)."""
    shared = REPO.parent / "shared" / "volcano-1.15"
    if not (shared / "unpack").is_file():
        return None
    dest = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "volcano-1.15.1"
    subprocess.run(["sh", str(shared / "unpack"), str(dest)], check=True, capture_output=True, timeout=300)
    return dest


DISCOVERY = """networkTopologyDiscovery:
- source: label
  enabled: true
  config:
    networkTopologyTypes:
      fabric:
      - nodeLabel: topology.example/spine
      - nodeLabel: topology.example/rack
      - nodeLabel: kubernetes.io/hostname
"""


def test_hypernodes_from_node_labels_by_volcanos_controller(e2e) -> None:
    """Volcano v1.15.1's HyperNode controller (label discovery) makes the tree from node labels;
    tidesched places a rack-bound gang within one of the racks it made."""
    volcano = volcano_115()
    if volcano is None:
        if os.environ.get("CI"):
            raise AssertionError("Volcano v1.15.1 is needed in CI: ../shared/volcano-1.15/unpack")
        pytest.skip("Volcano v1.15.1 not found (../shared/volcano-1.15)")
    api = e2e.api
    install_hypernode_crd(api)
    for hn in api.items(f"{TOPOLOGY}/hypernodes"):
        api.delete(f"{TOPOLOGY}/hypernodes/{hn['metadata']['name']}")
    for i in range(8):  # racks of two nodes, spines of two racks
        create_node(api, f"kwok-node-{i}", cpu="8", memory="8Gi",
                    labels={"topology.example/spine": f"sp{i // 4}", "topology.example/rack": f"r{i // 2}"})
    try:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}})
    except ApiError as exc:
        if exc.status != 409:
            raise
    api.apply({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "volcano-controller-configmap", "namespace": "volcano-system"},
               "data": {"volcano-controller.conf": DISCOVERY}})
    ctl = start_controller_manager(e2e.cp, volcano, e2e.tmp, args=("--controllers=hyperNode-controller",),
                                   log_name="vc-controller-manager-115.log")
    try:
        made = wait_until(lambda: [h for h in api.items(f"{TOPOLOGY}/hypernodes")
                                   if h["metadata"].get("labels", {}).get("volcano.sh/network-topology-source") == "label"]
                          and len(api.items(f"{TOPOLOGY}/hypernodes")) == 6 and api.items(f"{TOPOLOGY}/hypernodes"),
                          60, "six HyperNodes from the labels (four racks, two spines)")
        tiers = sorted(h["spec"]["tier"] for h in made)
        assert tiers == [1, 1, 1, 1, 2, 2], tiers
        ns = e2e.namespace("labels")
        for i in (0, 2, 4, 6):  # one node of each rack half full
            occupy(api, ns, f"kwok-node-{i}", "5")
        wait_until(lambda: len(e2e.kubelet.started) >= 4, 30, "the occupying pods to run")
        e2e.scheduler(VOLCANO_115_CI_CONF)
        rack = gang(api, ns, "rack", 2, "3", {"mode": "hard", "highestTierName": "topology.example/rack"})
        wait_until(lambda: set(rack) <= set(bound(api, ns)), 30, "the rack-bound gang to bind")
        nodes = [bound(api, ns)[n] for n in rack]
        assert len({int(n.rsplit("-", 1)[1]) // 2 for n in nodes}) == 1, nodes
    finally:
        ctl.stop()
