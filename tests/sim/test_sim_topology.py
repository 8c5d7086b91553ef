"""Simulations on a generated fat-tree: the HyperNodes, gang constraints and topology figures."""

from __future__ import annotations

import pytest

from builders import node, pod, podgroup
from tidesched.model.loader import Manifest
from tidesched.scheduler import config_from_text
from tidesched.sim import ScenarioError, run
from tidesched.sim.events import Scenario
from tidesched.sim.topology import add_fat_tree, constrain_gangs, parse_constraint, parse_shape
from topology_builders import TOPOLOGY_CONFIG, hypernode


def scenario() -> Scenario:
    objs = [node(f"gpu-{i}", cpu="16", memory="64Gi", nvidia_com__gpu="4") for i in range(4)] + [node("cpu-0")]
    # A 2-pod gang of 4 GPUs each: one leaf of two nodes holds it exactly.
    objs.append(podgroup("train", 2))
    objs += [pod(f"train-{k}", "train", cpu="1", memory="1Gi", extra_requests={"nvidia.com/gpu": "4"},
                 annotations={"sim.tidesched.io/duration": "1h"}) for k in range(2)]
    return Scenario(name="t", objects=[Manifest(f"o{i}", o) for i, o in enumerate(objs)],
                    config=config_from_text(TOPOLOGY_CONFIG, "t"), duration=600.0)


def test_shapes_and_constraints_are_read_or_refused() -> None:
    assert parse_shape("4x2") == (4, 2)
    assert parse_constraint("hard:1") == {"mode": "hard", "highestTierAllowed": 1}
    assert parse_constraint("soft") == {"mode": "soft"} and parse_constraint("none") is None
    for bad in ("4", "0x2", "x2"):
        with pytest.raises(ScenarioError, match="NODESxLEAVES"):
            parse_shape(bad)
    for bad in ("hard", "strict:1", "hard:x"):
        with pytest.raises(ScenarioError, match="--gang-topology"):
            parse_constraint(bad)


def test_the_fat_tree_holds_the_gpu_nodes_in_name_order() -> None:
    sc = scenario()
    assert add_fat_tree(sc, 2, 2) == ["leaf-0", "leaf-1"]
    hns = {m.obj["metadata"]["name"]: m.obj["spec"] for m in sc.objects if m.obj["kind"] == "HyperNode"}
    assert [x["selector"]["exactMatch"]["name"] for x in hns["leaf-1"]["members"]] == ["gpu-2", "gpu-3"]
    assert hns["spine-0"]["tier"] == 2 and len(hns["spine-0"]["members"]) == 2
    assert constrain_gangs(sc, {"mode": "hard", "highestTierAllowed": 1}) == 1  # the 2-pod gang only


def test_a_run_reports_where_gangs_landed() -> None:
    sc = scenario()
    add_fat_tree(sc, 2, 1)
    constrain_gangs(sc, parse_constraint("hard:1"))
    result = run(sc).result
    topo = result["summary"]["topology"]
    assert topo["gangs_placed"] == 1 and topo["gangs_within_tier1"] == 1 and topo["gangs_across"] == 0
    assert topo["constrained_gang_mean_wait"] is not None
    leaf = next(h for h in result["topology"]["hypernodes"] if h["gangs"])
    assert leaf["tier"] == 1 and leaf["gangs"] == ["ns/train"]


def test_a_run_without_hypernodes_reports_no_topology() -> None:
    result = run(scenario()).result
    assert "topology" not in result["summary"] and "topology" not in result


def test_the_experiment_configs_differ_only_where_they_should() -> None:
    from tidesched.sim import bundled_example
    from tidesched.sim.topology_experiment import CONSTRAINTS, configs

    made = configs((bundled_example().parent / "scheduler.conf").read_text())
    assert made["blind"] is None and set(made) == set(CONSTRAINTS)
    for name in ("volcano-hard", "volcano-soft", "tidesched"):
        cfg = made[name]
        assert cfg is not None and any(p.name == "network-topology-aware" for t in cfg.tiers for p in t)
    assert made["volcano-hard"].configurations["reclaim"]["enableGangSafeReclaim"] is False  # type: ignore[union-attr]
    assert "reclaim" not in made["tidesched"].configurations  # type: ignore[union-attr]


def test_simulate_takes_the_topology_options(tmp_path) -> None:
    import yaml
    from typer.testing import CliRunner

    from tidesched.cli import app

    sc = scenario()
    (tmp_path / "objs.yaml").write_text(yaml.safe_dump_all([m.obj for m in sc.objects]))
    (tmp_path / "sched.conf").write_text(TOPOLOGY_CONFIG)
    res = CliRunner().invoke(app, ["simulate", str(tmp_path / "objs.yaml"), "-c", str(tmp_path / "sched.conf"),
                                   "--topology", "2x1", "--gang-topology", "hard:1", "--out", str(tmp_path / "out"), "--no-progress"])
    assert res.exit_code == 0, res.output
    import json

    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["summary"]["topology"]["gangs_within_tier1"] == 1
    assert "Network topology" in (tmp_path / "out" / "report.html").read_text()
    bad = CliRunner().invoke(app, ["simulate", str(tmp_path / "objs.yaml"), "--topology", "2", "--no-progress"])
    assert bad.exit_code == 2 and "NODESxLEAVES" in bad.output


def test_a_partitioned_volcano_job_lands_each_partition_in_its_own_leaf() -> None:
    """A Volcano Job's task with a partitionPolicy (two partitions of two, each held to a leaf,
    the job to the spine) on leaves of three 4-GPU nodes: each partition takes two nodes of one
    leaf. Placed as one gang the pods would fill leaf-0 in order and split partition 1."""
    from tidesched.sim.runner import Engine

    objs = [node(f"n{leaf}-{i}", cpu="16", memory="64Gi", nvidia_com__gpu="4") for leaf in range(2) for i in range(3)]
    objs += [hypernode(f"leaf-{leaf}", 1, [f"n{leaf}-{i}" for i in range(3)]) for leaf in range(2)]
    objs += [hypernode("spine-0", 2, ["leaf-0", "leaf-1"], of="HyperNode"), {"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}}]
    worker = {"name": "worker", "replicas": 4,
              "partitionPolicy": {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 2,
                                  "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
              "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "4"}}}]}}}
    objs.append({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                 "metadata": {"name": "train", "namespace": "ml", "annotations": {"sim.tidesched.io/duration": "1h"}},
                 "spec": {"queue": "default", "schedulerName": "volcano", "minAvailable": 4,
                          "networkTopology": {"mode": "hard", "highestTierAllowed": 2}, "tasks": [worker]}})
    sc = Scenario(name="t", objects=[Manifest(f"o{i}", o) for i, o in enumerate(objs)],
                  config=config_from_text(TOPOLOGY_CONFIG, "t"), duration=600.0)
    engine = Engine(sc, 0)
    outcome = engine.run()
    assert not outcome.failed
    nodes = {k: p["spec"].get("nodeName", "") for k, p in engine.world.items("Pod")}
    leaf = {k: n.split("-")[0] for k, n in nodes.items()}
    assert all(nodes.values()), nodes
    assert leaf["ml/train-worker-0"] == leaf["ml/train-worker-1"] != leaf["ml/train-worker-2"] == leaf["ml/train-worker-3"], nodes
    partitions = {k: p["metadata"]["labels"]["volcano.sh/partition-id"] for k, p in engine.world.items("Pod")}
    assert partitions == {"ml/train-worker-0": "0", "ml/train-worker-1": "0", "ml/train-worker-2": "1", "ml/train-worker-3": "1"}
