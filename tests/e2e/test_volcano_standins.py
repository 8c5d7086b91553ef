"""The stand-ins Volcano's e2e suites run on, checked without a control plane: the admission rules
(Volcano v1.7.0's defaults and refusals) and the kubelet's reading of container scripts."""

from __future__ import annotations

from typing import Any

import pytest

from admission import Denied, mutate_job, mutate_queue, validate_job_create, validate_job_update, validate_pod
from controlplane import ApiError
from kind import outcome, script_of


class FakeApi:
    """Answers GETs from a dict of path -> object; 404 for the rest."""

    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, path: str, **_: Any) -> dict[str, Any]:
        if path not in self.objects:
            raise ApiError(404, "not found", "GET", path)
        return self.objects[path]

    def items(self, path: str, **_: Any) -> list[dict[str, Any]]:
        return []


QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
OPEN = FakeApi({f"{QUEUES}/default": {"status": {"state": "Open"}}, f"{QUEUES}/closed": {"status": {"state": "Closed"}}})


def job(**spec: Any) -> dict[str, Any]:
    tasks = spec.pop("tasks", [{"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}])
    return {"metadata": {"name": "j", "namespace": "ns"}, "spec": {"tasks": tasks, **spec}}


def apply(obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    for op in patch:
        *parents, last = op["path"].strip("/").split("/")
        target = obj
        for p in parents:
            target = target.setdefault(p, {})
        target[last.replace("~1", "/")] = op["value"]
    return obj


def test_job_defaults_queue_scheduler_task_names_and_min_available() -> None:
    j = job(tasks=[{"replicas": 2}, {"replicas": 3, "minAvailable": 1}])
    out = apply(j, mutate_job(j, OPEN))["spec"]
    assert out["queue"] == "default" and out["schedulerName"] == "volcano" and out["maxRetry"] == 3
    assert [t["name"] for t in out["tasks"]] == ["default0", "default1"]
    assert [t["minAvailable"] for t in out["tasks"]] == [2, 1]
    assert out["minAvailable"] == 3


def test_job_refusals() -> None:
    ok = apply(job(), mutate_job(job(), OPEN))
    validate_job_create(ok, OPEN)
    for bad, why in [
        (job(queue="nowhere"), "unable to find job queue"),
        (job(queue="closed"), "status is `Closed`"),
        (job(queue="default", tasks=[]), "No task specified"),
        (job(queue="default", minAvailable=5, tasks=[{"name": "a", "replicas": 2}]), "should not be greater than total replicas"),
        (job(queue="default", tasks=[{"name": "a", "replicas": 1}, {"name": "a", "replicas": 1}]), "duplicated task name"),
        (job(queue="default", tasks=[{"name": "Bad_Name", "replicas": 1}]), "DNS-1123"),
        (job(queue="default", plugins={"nope": []}, tasks=[{"name": "a", "replicas": 1}]), "unable to find job plugin"),
        (job(queue="default", policies=[{"event": "PodFailed", "exitCode": 3, "action": "AbortJob"}],
             tasks=[{"name": "a", "replicas": 1}]), "simultaneously"),
        (job(queue="default", tasks=[{"name": "a", "replicas": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "-1"}}}]}}}]), "greater than or equal to 0"),
    ]:
        with pytest.raises(Denied, match=why):
            validate_job_create(bad, OPEN)


def test_job_update_may_change_only_counts() -> None:
    old = job(queue="default", minAvailable=2, tasks=[{"name": "a", "replicas": 2, "minAvailable": 2}])
    scaled = job(queue="default", minAvailable=1, tasks=[{"name": "a", "replicas": 4, "minAvailable": 1}])
    validate_job_update(old, scaled)
    with pytest.raises(Denied, match="may not change"):
        validate_job_update(old, job(queue="other", minAvailable=2, tasks=[{"name": "a", "replicas": 2, "minAvailable": 2}]))


def test_pod_of_a_missing_podgroup_is_refused_others_pass() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "annotations": {"scheduling.k8s.io/group-name": "pg"}},
           "spec": {"schedulerName": "volcano"}}
    with pytest.raises(Denied, match="failed to get PodGroup"):
        validate_pod(pod, OPEN)
    validate_pod({**pod, "spec": {"schedulerName": "default-scheduler"}}, OPEN)


def test_queue_defaults() -> None:
    q = {"metadata": {"name": "q"}, "spec": {}}
    assert apply(q, mutate_queue(q, OPEN))["spec"] == {"reclaimable": True, "weight": 1}


@pytest.mark.parametrize(
    ("script", "image", "want"),
    [
        ("sleep 10s && exit 3", "busybox:1.24", (10.0, 3)),
        ("sleep 5", "nginx:1.14", (5.0, 0)),
        ("sleep 10s && xxx", "busybox:1.24", (10.0, 127)),
        ("sh fake.sh", "busybox:1.24", (0.0, 2)),
        ("mkdir -p /var/run/sshd; /usr/sbin/sshd -D;", "volcanosh/example-mpi:0.0.1", None),
    ],
)
def test_kubelet_reads_how_a_script_ends(script: str, image: str, want: Any) -> None:
    assert outcome(script, image) == want


def test_only_shell_scripts_are_read() -> None:
    c = {"name": "c", "image": "busybox", "command": ["/bin/sh"], "args": ["-c", "sleep 1"]}
    assert script_of({"spec": {"containers": [c]}}) == ("sleep 1", "busybox")
    assert script_of({"spec": {"containers": [{"name": "c", "image": "nginx"}]}}) is None


CONFLICT = (
    'failed to update status of queue reclaim-q3\nUnexpected error: Operation cannot be fulfilled on '
    'queues.scheduling.volcano.sh "reclaim-q3": the object has been modified; please apply your changes'
)


def _report(tmp_path: Any, message: str, stack: str) -> Any:
    import json

    spec = {
        "LeafNodeType": "It",
        "ContainerHierarchyTexts": ["Reclaim E2E Test"],
        "LeafNodeText": "Reclaim Case 1",
        "State": "failed",
        "RunTime": 13_200_000_000,
        "Failure": {"Message": message, "Location": {"FileName": "/src/test/e2e/util/queue.go", "LineNumber": 96,
                                                      "FullStackTrace": stack}},
    }
    path = tmp_path / "r.json"
    path.write_text(json.dumps([{"SpecReports": [spec]}]))
    return path


def test_a_spec_whose_clean_up_alone_lost_the_queue_race_counts_as_passed(tmp_path: Any) -> None:
    from volcano_suites import parse_report

    stack = "util.DeleteQueue(...)\nutil.deleteQueues(...)\nutil.CleanupTestContext(0x1)\nschedulingaction.init.func6.3()"
    [r] = parse_report(_report(tmp_path, CONFLICT, stack))
    assert (r.state, r.cleanup_lost, r.name) == ("passed", True, "Reclaim E2E Test Reclaim Case 1")
    assert "the object has been modified" in r.failure  # the record keeps what happened


def test_the_same_conflict_in_a_spec_body_or_another_clean_up_failure_stays_a_failure(tmp_path: Any) -> None:
    from volcano_suites import parse_report

    body = "util.UpdateQueue(...)\nschedulingaction.init.func6.3()"
    [r] = parse_report(_report(tmp_path, CONFLICT, body))
    assert (r.state, r.cleanup_lost) == ("failed", False)
    cleanup = "util.CleanupTestContext(0x1)"
    [r] = parse_report(_report(tmp_path, "failed to wait for namespace deleted: timed out", cleanup))
    assert (r.state, r.cleanup_lost) == ("failed", False)


def test_suite_setup_flags_go_to_the_scheduler_that_takes_them() -> None:
    from volcano_suites import SETUP, scheduler_flags

    gates = SETUP["schedulinggates"]
    assert scheduler_flags(gates) == (["--feature-gates=SchedulingGatesQueueAdmission=true"], [])
    base = SETUP["schedulingbase"]
    assert scheduler_flags(base, {"--ignored-provisioners"}) == (
        ["--ignored-provisioners=kubernetes.io/no-provisioner"], [])
    assert scheduler_flags(base, set()) == ([], ["--ignored-provisioners=kubernetes.io/no-provisioner"])
    assert SETUP["hypernode"].kwok_nodes == 8 and SETUP["gangevict"].kwok_nodes == 4


def test_specs_no_harness_can_run_are_marked_in_the_table() -> None:
    from volcano_suites import SpecResult, SuiteRun, table

    vc = SuiteRun("schedulingbase", "vc-scheduler", specs=[
        SpecResult("Volume Binding Test Dynamic Provisioning", "failed", 0.1, "no class"),
        SpecResult("Job E2E Test Schedule Job", "passed", 12.0)])
    ts = SuiteRun("schedulingbase", "tidesched", specs=[SpecResult("Job E2E Test Schedule Job", "passed", 13.0)])
    rows = table([vc, ts]).splitlines()
    assert rows[2] == ("| Volume Binding Test Dynamic Provisioning | failed (not runnable here) | "
                       "not run (not runnable here) |")
    assert rows[3] == "| Job E2E Test Schedule Job | passed | passed |"
