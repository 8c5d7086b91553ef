"""task-topology plugin: Test_readTopologyFromPgAnnotations case by case (the topology read from
the PodGroup's annotations, or the error), the buckets of its "correct annotation" job, and the
weight argument. Placements are in tests/scenarios/task_topology.yaml."""

from __future__ import annotations

from typing import Any

import pytest

from builders import node, pod, podgroup, queue
from tidesched.framework.arguments import ConfigError
from tidesched.model.snapshot import build_snapshot
from tidesched.plugins.task_topology_buckets import JobManager, Topology, read_topology
from tidesched.scheduler import config_from_text, open_session

ROLES = {"ps": 2, "worker": 2, "chief": 1, "evaluator": 1}


def _job(roles: dict[str, int], annotations: dict[str, str]):
    pg = podgroup("job1", 1, namespace="default")
    pg["metadata"]["annotations"] = annotations
    objs: list[dict[str, Any]] = [queue("default"), node("n1"), pg]
    objs += [pod(f"job1-{r}-{i}", "job1", namespace="default", annotations={"volcano.sh/task-spec": r})
             for r, n in roles.items() for i in range(n)]
    ssn = open_session(build_snapshot(objs), config_from_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'))
    return ssn, ssn.jobs["default/job1"]


CORRECT = Topology([["ps", "worker"], ["ps", "chief"]], [["ps"], ["worker", "chief"]], ["ps", "worker", "chief", "evaluator"])


@pytest.mark.parametrize("roles, annotations, want", [
    (ROLES, {"volcano.sh/task-topology-affinity": "ps,worker;ps,chief",
             "volcano.sh/task-topology-anti-affinity": "ps;worker,chief",
             "volcano.sh/task-topology-task-order": "ps,worker,chief,evaluator"}, CORRECT),
    ({"ps-some": 2, "worker-another-some": 2, "chief-kk": 1, "evaluator-tt": 1},
     {"volcano.sh/task-topology-affinity": "ps-some,worker-another-some;ps-some,chief-kk",
      "volcano.sh/task-topology-anti-affinity": "ps-some;worker-another-some,chief-kk",
      "volcano.sh/task-topology-task-order": "ps-some,worker-another-some,chief-kk,evaluator-tt"},
     Topology([["ps-some", "worker-another-some"], ["ps-some", "chief-kk"]],
              [["ps-some"], ["worker-another-some", "chief-kk"]],
              ["ps-some", "worker-another-some", "chief-kk", "evaluator-tt"])),
    (ROLES, {}, None),
    (ROLES, {"volcano.sh/task-topology-affinity": "ps,worker;ps,,chief,;",
             "volcano.sh/task-topology-anti-affinity": "ps;worker,chief;;;",
             "volcano.sh/task-topology-task-order": "ps,worker,chief,evaluator,,,"},
     Topology([["ps", "worker"], ["ps", "", "chief", ""], [""]], [["ps"], ["worker", "chief"], [""], [""], [""]],
              ["ps", "worker", "chief", "evaluator", "", "", ""])),
])
def test_topology_read_from_annotations(roles: dict[str, int], annotations: dict[str, str], want: Topology | None) -> None:
    _ssn, job = _job(roles, annotations)
    assert read_topology(job) == want


@pytest.mark.parametrize("roles, annotations, error", [
    (ROLES, {"volcano.sh/task-topology-affinity": "$%GF$^trtqwrg^",
             "volcano.sh/task-topology-anti-affinity": "ps;worker,chief;#@FGEW^vfa897bgs;;",
             "volcano.sh/task-topology-task-order": "ps,worker,chief,evaluator,,,"},
     "task $%GF$^trtqwrg^ do not exist in job <default/job1>"),
    ({"ps": 2, "worker": 2}, {"volcano.sh/task-topology-affinity": "ps,worker",
                              "volcano.sh/task-topology-anti-affinity": "ps",
                              "volcano.sh/task-topology-task-order": "ps,worker,chief"},
     "task chief do not exist in job <default/job1>"),
    ({"ps": 2, "worker": 2}, {"volcano.sh/task-topology-affinity": "ps,worker",
                              "volcano.sh/task-topology-anti-affinity": "ps,ps",
                              "volcano.sh/task-topology-task-order": "ps,worker"},
     "task ps is duplicate in job <default/job1>"),
])
def test_invalid_topology_is_refused_with_volcanos_words(roles: dict[str, int], annotations: dict[str, str], error: str) -> None:
    _ssn, job = _job(roles, annotations)
    with pytest.raises(ValueError) as err:
        read_topology(job)
    assert str(err.value) == error


def test_buckets_of_the_correct_annotation() -> None:
    ssn, job = _job(ROLES, {})
    manager = JobManager(job, CORRECT, ssn.table)
    buckets = [sorted(t.name for t in b.tasks.values()) for b in manager.buckets]
    # ps is self-anti-affine: one bucket per ps; worker-1 goes to the bucket requesting less;
    # chief is anti-affine with worker, affine with ps: a tie, kept by the first bucket.
    assert buckets == [["job1-chief-0", "job1-ps-0", "job1-worker-0"], ["job1-ps-1", "job1-worker-1"]]
    assert manager.max_size == 3
    assert manager.priority == {"ps": 4, "worker": 3, "chief": 3}
    evaluator = next(t for t in job.tasks.values() if t.name == "job1-evaluator-0")
    assert manager.bucket_of(evaluator) is None


def test_weight_must_be_an_integer() -> None:
    with pytest.raises(ConfigError) as err:
        config_from_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: task-topology\n'
                         '    arguments: {task-topology.weight: "10"}\n', "tt.conf")
    assert str(err.value).startswith("tt.conf:5:") and "task-topology.weight" in str(err.value)
