"""Scenario files (SIM-1): the format, plain manifests (the seeds' YAMLs as they are), and clear
errors naming the entry for bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tidesched.sim.events import Scenario, make_event
from tidesched.sim.vocabulary import ScenarioError, parse_duration
from tidesched.sim.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]

# Complete YAML examples from seed 000 (queues, priority class, the gang training Job) and seed
# 002 (the cr-queue1 quota table), verbatim apart from indentation.
SEED_YAML = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: queue-inference
  annotations:
    volcano.sh/card.quota: '{"NVIDIA-GeForce-RTX-4090":8}'
spec:
  weight: 1
  priority: 80000
  reclaimable: false
  capability:
    cpu: 4
    memory: 4Gi
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: queue-training
  annotations:
    volcano.sh/card.quota: '{"NVIDIA-GeForce-RTX-4090":8}'
spec:
  weight: 1
  priority: 20000
  reclaimable: true
  capability:
    cpu: 4
    memory: 4Gi
---
apiVersion: scheduling.k8s.io/v1
description: High priority class for Volcano.
kind: PriorityClass
metadata:
  name: pc-high
globalDefault: false
preemptionPolicy: PreemptLowerPriority
value: 80000
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: cr-queue1
  annotations:
    volcano.sh/card.quota: '{"NVIDIA-H200":3,"NVIDIA-H800":2,"NVIDIA-GeForce-RTX-4090":2,"NVIDIA-H800/mps-80g*1/2":2,"NVIDIA-H200/mig-1g.18gb-mixed":3,"NVIDIA-H200/mig-3g.71gb-mixed":1}'
spec:
  weight: 1
  capability:
    cpu: 4
    memory: 4Gi
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: training-low
  annotations:
    volcano.sh/preemptable: "true"
spec:
  minAvailable: 2
  priorityClassName: pc-low
  schedulerName: volcano
  queue: queue-training
  policies:
  - event: TaskCompleted
    action: CompleteJob
  - event: PodEvicted
    action: AbortJob
  tasks:
  - replicas: 1
    name: worker1
    template:
      metadata:
        annotations:
          volcano.sh/card.name: NVIDIA-GeForce-RTX-4090
      spec:
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions:
                - key: nvidia.com/gpu.product
                  operator: In
                  values:
                  - NVIDIA-GeForce-RTX-4090
        restartPolicy: Never
        containers:
        - image: alpine:latest
          imagePullPolicy: IfNotPresent
          name: worker
          command: ["sh", "-c", "sleep 1d"]
          resources:
            requests:
              cpu: 100m
              memory: 100Mi
              nvidia.com/gpu: 4
            limits:
              cpu: 100m
              memory: 100Mi
              nvidia.com/gpu: 4
  - replicas: 1
    name: worker2
    template:
      metadata:
        annotations:
          volcano.sh/card.name: NVIDIA-GeForce-RTX-4090
      spec:
        restartPolicy: Never
        containers:
        - image: alpine:latest
          name: worker
          resources:
            requests: {cpu: 100m, memory: 100Mi, nvidia.com/gpu: 4}
            limits: {cpu: 100m, memory: 100Mi, nvidia.com/gpu: 4}
"""  # noqa: E501 (seed text verbatim)


def write(tmp_path: Path, doc: Any, name: str = "scenario.yaml") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return p


@pytest.mark.parametrize(
    "value, seconds",
    [
        (30, 30.0),
        (2.5, 2.5),
        ("90", 90.0),
        ("90s", 90.0),
        ("15m", 900.0),
        ("8h", 28800.0),
        ("1d", 86400.0),
        ("1h30m", 5400.0),
        ("2.5h", 9000.0),
        ("500ms", 0.5),
        ("08:30", 30600.0),
        ("1d08:00", 115200.0),
        ("07:00:30", 25230.0),
    ],
)
def test_durations(value: Any, seconds: float) -> None:
    assert parse_duration(value, "x") == seconds


@pytest.mark.parametrize(
    "value", ["", "8 hours", "h", "-5s", -1, True, "25:99", None, "1h 30m", float("inf")]
)
def test_bad_durations_name_the_field(value: Any) -> None:
    with pytest.raises(ScenarioError, match="where"):
        parse_duration(value, "where")


def test_seed_yamls_load_as_they_are(tmp_path: Path) -> None:
    sc = load_scenario(write(tmp_path, SEED_YAML, "seed.yaml"))
    kinds = sorted(m.obj["kind"] for m in sc.objects)
    assert kinds == ["Job", "PriorityClass", "Queue", "Queue", "Queue"]
    assert sc.name == "seed" and sc.events == [] and sc.schedule_period == 1.0 and sc.duration is None


def test_manifest_directory_and_bundled_example_load() -> None:
    sc = load_scenario(REPO / "examples" / "basic")
    assert len(sc.objects) > 5 and sc.config is None
    from tidesched.sim import bundled_example

    assert (REPO / "examples" / "tidal-day" / "scenario.yaml").resolve() == bundled_example().resolve()
    tidal = yaml.safe_load(bundled_example().read_text())
    assert tidal["name"] == "tidal-day"


def test_full_scenario_format(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "j.yaml").write_text(SEED_YAML.split("---")[-1])
    (tmp_path / "sched.conf").write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n')
    doc = {
        "name": "full",
        "description": "d",
        "schedulePeriod": "3s",
        "duration": "1d",
        "evictionGracePeriod": "10s",
        "deletionGracePeriod": 5,
        "finishedTTL": "1m",
        "recordEvery": 10,
        "maxIdleGap": "1h",
        "durationJitter": 0.1,
        "scheduler": {"configFile": "sched.conf", "names": ["volcano", "other"]},
        "objects": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}],
        "events": [
            {"at": "10:00", "submit": "jobs/j.yaml"},
            {"at": "1h", "scale": {"deployment": "web", "replicas": 3}},
            {"at": 60, "delete": {"kind": "Job", "name": "ns/a"}},
            {"at": "2h", "addNode": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}}},
            {"at": "2h", "removeNode": ["n1", "n2"]},
            {"at": "3h", "cordon": "n1"},
            {"at": "4h", "uncordon": "n1"},
            {
                "at": "5h",
                "setNode": {
                    "name": "n1",
                    "labels": {"a": None, "b": "1"},
                    "allocatable": {"nvidia.com/mig-1g.18gb": "7", "nvidia.com/gpu": None},
                },
            },
            {"at": "6h", "setQuota": {"queue": "q", "cardQuota": {"NVIDIA-H200": 4}, "capability": None}},
            {"at": "7h", "failPod": {"name": "ns/p", "exitCode": 2}},
        ],
    }
    sc = load_scenario(write(tmp_path, doc))
    assert (sc.name, sc.schedule_period, sc.duration, sc.eviction_grace, sc.deletion_grace) == (
        "full",
        3,
        86400,
        10,
        5,
    )
    assert (sc.finished_ttl, sc.record_every, sc.max_idle_gap, sc.duration_jitter) == (60, 10, 3600, 0.1)
    assert sc.scheduler_names == ("volcano", "other") and sc.config is not None
    assert sc.config.actions == ["enqueue", "allocate"]
    assert [e.action for e in sc.sorted_events()][:3] == ["delete", "scale", "addNode"]
    by = {e.action: e for e in sc.events}
    assert by["submit"].at == 36000 and by["submit"].args["objects"][0].obj["kind"] == "Job"
    assert by["scale"].args == {"kind": "Deployment", "name": "default/web", "replicas": 3}
    assert by["removeNode"].args == {"names": ["n1", "n2"]}
    assert by["setNode"].args["labels"] == {"a": None, "b": "1"}
    assert by["setNode"].args["allocatable"] == {"nvidia.com/mig-1g.18gb": "7", "nvidia.com/gpu": None}
    assert by["setQuota"].args == {
        "queue": "q",
        "state": None,
        "cardQuota": {"NVIDIA-H200": 4},
        "capability": None,
    }
    assert by["failPod"].args == {"name": "ns/p", "exitCode": 2}
    assert by["submit"].source.endswith("events[0]")


def test_config_override_and_inline_config(tmp_path: Path) -> None:
    conf = tmp_path / "c.conf"
    conf.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n')
    doc = {"scheduler": {"config": 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: priority\n'}}
    sc = load_scenario(write(tmp_path, doc))
    assert sc.config is not None and sc.config.actions == ["enqueue", "allocate"]
    sc2 = load_scenario(write(tmp_path, doc), config_path=conf)
    assert sc2.config is not None and sc2.config.actions == ["allocate"]


@pytest.mark.parametrize(
    "doc, message",
    [
        (
            {"events": [{"at": "1h", "scal": {"deployment": "a", "replicas": 1}}]},
            r"events\[0\]: unknown action 'scal' .*did you mean 'scale'",
        ),
        ({"events": [{"scale": {"deployment": "a", "replicas": 1}}]}, r"events\[0\]: missing 'at'"),
        ({"events": [{"at": "soon", "cordon": "n"}]}, r"events\[0\]\.at: expected a duration"),
        ({"events": [{"at": 1, "cordon": "n", "uncordon": "n"}]}, r"events\[0\]: one action per event"),
        (
            {"events": [{"at": 1, "scale": {"deployment": "a", "replicas": -1}}]},
            r"events\[0\]\.scale\.replicas: expected a non-negative integer, got -1",
        ),
        (
            {"events": [{"at": 1, "scale": {"deployment": "a", "replica": 2}}]},
            r"events\[0\]\.scale: unknown key 'replica' \(did you mean 'replicas'\?\)",
        ),
        ({"events": [{"at": 1, "delete": {"kind": "Gadget", "name": "x"}}]}, r"events\[0\]\.delete\.kind"),
        (
            {"events": [{"at": 1, "setQuota": {"queue": "q", "cardQuota": {"NVIDIA-H200": 1.5}}}]},
            r"events\[0\]\.setQuota\.cardQuota\[NVIDIA-H200\]: expected a non-negative whole number",
        ),
        (
            {"events": [{"at": 1, "setNode": {"name": "n", "allocatable": {"nvidia.com/gpu": "lots"}}}]},
            r"events\[0\]\.setNode\.allocatable\[nvidia.com/gpu\]",
        ),
        ({"events": [{"at": 1, "setNode": {"name": "n"}}]}, r"events\[0\]\.setNode: nothing to change"),
        (
            {"events": [{"at": 1, "failPod": {"name": "ns/p", "exitCode": 0}}]},
            r"exitCode: expected a non-zero",
        ),
        (
            {"events": [{"at": 1, "addNode": {"kind": "Pod", "metadata": {"name": "p"}}}]},
            r"addNode takes Node objects",
        ),
        (
            {"events": [{"at": 1, "submit": {"kind": "Gizmo", "metadata": {"name": "g"}}}]},
            r"unknown kind 'Gizmo'",
        ),
        (
            {"events": [{"at": 1, "submit": "missing.yaml"}]},
            r"events\[0\]\.submit: .*missing.yaml: no such file",
        ),
        ({"events": "later"}, r"events: expected a list"),
        ({"schedulePeriod": 0}, r"schedulePeriod must be positive"),
        ({"schedulePeriods": "1s"}, r"unknown key 'schedulePeriods' \(did you mean 'schedulePeriod'\?\)"),
        ({"recordEvery": -1}, r"recordEvery"),
        ({"scheduler": {"configFile": "nope.conf"}}, r"scheduler.configFile: .*nope.conf: no such file"),
        (
            {"scheduler": {"config": 'actions: "allocate, teleport"\ntiers: []\n'}},
            r"scheduler config: .*teleport",
        ),
        (
            {
                "objects": [
                    {
                        "kind": "Pod",
                        "metadata": {"name": "p", "annotations": {"sim.tidesched.io/duration": "forever"}},
                    }
                ]
            },
            r"Pod p: metadata.annotations\[sim.tidesched.io/duration\]: expected a duration",
        ),
        ({"objects": [{"kind": "Node", "metadata": {}}]}, r"Node without metadata.name"),
    ],
)
def test_bad_scenarios_name_the_entry(tmp_path: Path, doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message) as info:
        load_scenario(write(tmp_path, doc))
    assert str(tmp_path / "scenario.yaml") in str(info.value)


def test_unreadable_inputs(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no such file"):
        load_scenario(tmp_path / "absent.yaml")
    with pytest.raises(ScenarioError, match=r"scenario.yaml:\d+: invalid YAML"):
        load_scenario(write(tmp_path, "events: [\n  - {at: 1"))


def test_ignored_kinds_warn(tmp_path: Path) -> None:
    text = (
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n---\n"
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {}\n"
    )
    sc = load_scenario(write(tmp_path, text, "m.yaml"))
    assert sc.objects == [] and len(sc.warnings) == 2 and "batch/v1 Job" in sc.warnings[1]


def test_pdbs_are_kept_and_can_be_deleted_by_namespaced_name(tmp_path: Path) -> None:
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "shop"},
           "spec": {"selector": {"matchLabels": {"app": "db"}}}}
    doc = {"objects": [pdb], "events": [{"at": "1m", "delete": {"kind": "PodDisruptionBudget", "name": "shop/db"}},
                                        {"at": "2m", "delete": {"kind": "PodDisruptionBudget", "name": "db"}}]}
    sc = load_scenario(write(tmp_path, doc))
    assert [m.obj["kind"] for m in sc.objects] == ["PodDisruptionBudget"] and sc.warnings == []
    assert [e.args["name"] for e in sc.events] == ["shop/db", "default/db"]


def test_code_built_scenario_uses_the_same_checks() -> None:
    sc = Scenario(name="trace")
    ev = sc.add_event(
        "1h", "submit", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "x"}}
    )
    assert ev.at == 3600 and ev.args["objects"][0].obj["metadata"]["name"] == "p"
    with pytest.raises(ScenarioError, match="trace row 3"):
        make_event(5, "scale", {"deployment": "a"}, "trace row 3")
