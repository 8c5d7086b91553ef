"""Simulated controllers (SIM-2): Volcano Job lifecycle and policies, Deployment → ReplicaSet →
pods, PodGroups for other pods. The world and controllers are driven directly (no scheduler):
the test plays the scheduler's part by writing PodGroup phases and binding/evicting pods."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from builders import node

from tidesched.sim.clock import Clock
from tidesched.sim.controllers import Controllers
from tidesched.sim.controllers.common import Timer
from tidesched.sim.controllers.vcjob import match_policy, parse_job
from tidesched.sim.world import (
    PodFinish,
    PodGone,
    World,
    annotations,
    is_deleting,
    labels,
    meta,
    pod_phase,
    spec,
    status,
)


class Kit:
    """A world with controllers and one big node; helpers stand in for the scheduler."""

    def __init__(self, finished_ttl: float = 0.0, grace: float = 30.0) -> None:
        self.clock = Clock()
        self.events: list[tuple[str, ...]] = []
        self.world = World(self.clock, seed=0, eviction_grace=grace, deletion_grace=grace)
        self.ctl = Controllers(self.world, self.emit, finished_ttl)
        self.world.put("Node", node("n1", cpu="256", memory="1Ti", nvidia_com__gpu="64"))

    def emit(self, *a: str) -> None:
        self.events.append(a)

    @property
    def now(self) -> float:
        return self.clock.now

    def submit(self, kind: str, obj: dict[str, Any]) -> None:
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("uid", self.world.new_uid())
        self.world.put(kind, obj)
        self.ctl.reconcile(self.now)

    def advance(self, t: float) -> None:
        for at, ev in self.clock.pop_until(t):
            if isinstance(ev, PodFinish):
                self.world.finish_pod(ev.key, ev.phase, ev.exit_code, ev.uid)
            elif isinstance(ev, PodGone):
                self.world.pod_gone(ev)
            elif isinstance(ev, Timer):
                self.ctl.on_timer(ev, at)
            self.ctl.reconcile(at)
        self.clock.advance(t)
        self.ctl.reconcile(t)

    def pg(self, key: str) -> dict[str, Any] | None:
        return self.world.get("PodGroup", key)

    def set_pg_phase(self, key: str, phase: str) -> None:
        pg = self.world.get("PodGroup", key)
        assert pg is not None
        new = dict(pg)
        new["status"] = dict(status(pg), phase=phase)
        self.world.put("PodGroup", new)
        self.ctl.reconcile(self.now)

    def pods(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        return {k: p for k, p in self.world.items("Pod") if k.startswith(prefix)}

    def bind_pending(self, prefix: str = "") -> None:
        for k, p in self.pods(prefix).items():
            if pod_phase(p) == "Pending" and not spec(p).get("nodeName") and not is_deleting(p):
                assert self.world.bind_pod(k, "n1", self.now)
        self.ctl.reconcile(self.now)

    def evict(self, key: str) -> None:
        assert self.world.delete_pod(key, self.now, "evict", self.world.eviction_grace)
        self.ctl.reconcile(self.now)

    def job_phase(self, key: str) -> str:
        job = self.world.get("Job", key)
        assert job is not None
        return str(status(job)["state"]["phase"])

    def job_status(self, key: str) -> dict[str, Any]:
        job = self.world.get("Job", key)
        assert job is not None
        return dict(status(job))


def vcjob(
    name: str,
    ns: str = "ml",
    *,
    tasks: list[dict[str, Any]] | None = None,
    replicas: int = 2,
    min_available: int | None = None,
    policies: list[dict[str, Any]] | None = None,
    annotations_: dict[str, str] | None = None,
    labels_: dict[str, str] | None = None,
    max_retry: int | None = None,
    duration: str | None = None,
    queue: str = "train-q",
    priority_class: str | None = None,
    **spec_extra: Any,
) -> dict[str, Any]:
    ann = dict(annotations_ or {})
    if duration:
        ann["sim.tidesched.io/duration"] = duration
    s: dict[str, Any] = {"queue": queue, "schedulerName": "volcano"}
    s["tasks"] = tasks or [_task("worker", replicas)]
    if min_available is not None:
        s["minAvailable"] = min_available
    if policies is not None:
        s["policies"] = policies
    if max_retry is not None:
        s["maxRetry"] = max_retry
    if priority_class:
        s["priorityClassName"] = priority_class
    s.update(spec_extra)
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "annotations": ann, "labels": dict(labels_ or {})},
        "spec": s,
    }


def _task(
    name: str,
    replicas: int,
    gpu: str = "1",
    policies: list[dict[str, Any]] | None = None,
    min_available: int | None = None,
) -> dict[str, Any]:
    t: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": {"volcano.sh/card.name": "NVIDIA-H200"}, "labels": {"app": name}},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": gpu}},
                    }
                ]
            },
        },
    }
    if policies:
        t["policies"] = policies
    if min_available is not None:
        t["minAvailable"] = min_available
    return t


def start(kit: Kit, job: dict[str, Any]) -> str:
    """Submit a Job, let the scheduler enqueue it and bind every pod; returns its key."""
    kit.submit("Job", job)
    key = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
    kit.set_pg_phase(key, "Inqueue")
    kit.bind_pending(key.split("/")[0] + "/" + job["metadata"]["name"])
    kit.set_pg_phase(key, "Running")
    return key


# --------------------------------------------------------------------------------------------
# Volcano Job: PodGroup and pods


def test_job_podgroup_gets_all_annotations_labels_and_spec() -> None:
    kit = Kit()
    kit.submit(
        "Job",
        vcjob(
            "train",
            tasks=[_task("master", 1, gpu="0"), _task("worker", 2, gpu="4")],
            min_available=3,
            annotations_={
                "volcano.sh/service.type": "training",
                "volcano.sh/card.request": '{"NVIDIA-H200":8}',
                "team": "nlp",
            },
            labels_={"project": "x"},
            priority_class="pc-low",
        ),
    )
    pg = kit.pg("ml/train")
    assert pg is not None
    assert annotations(pg) == {
        "volcano.sh/service.type": "training",
        "volcano.sh/card.request": '{"NVIDIA-H200":8}',
        "team": "nlp",
    }
    assert labels(pg) == {"project": "x"}
    s = spec(pg)
    assert s["minMember"] == 3
    assert s["minTaskMember"] == {"master": 1, "worker": 2}
    assert s["queue"] == "train-q"
    assert s["priorityClassName"] == "pc-low"
    # the first minAvailable pods: master (0 gpu) + two workers (4 gpu each)
    assert s["minResources"] == {"cpu": "3000m", "memory": str(3 * (1 << 30)), "nvidia.com/gpu": "8"}
    assert status(pg)["phase"] == "Pending"
    assert meta(pg)["ownerReferences"][0]["kind"] == "Job"
    assert kit.job_phase("ml/train") == "Pending"


def test_job_pods_created_only_once_podgroup_leaves_pending() -> None:
    kit = Kit()
    kit.submit(
        "Job",
        vcjob(
            "train",
            replicas=2,
            annotations_={"volcano.sh/preemptable": "true"},
            labels_={"volcano.sh/preemptable": "true"},
        ),
    )
    assert kit.pods() == {}
    kit.set_pg_phase("ml/train", "Inqueue")
    pods = kit.pods()
    assert sorted(pods) == ["ml/train-worker-0", "ml/train-worker-1"]
    p = pods["ml/train-worker-1"]
    ann, lab = annotations(p), labels(p)
    assert ann["volcano.sh/task-spec"] == "worker" and lab["volcano.sh/task-spec"] == "worker"
    assert ann["scheduling.k8s.io/group-name"] == "train"
    assert ann["volcano.sh/job-name"] == "train" and ann["volcano.sh/queue-name"] == "train-q"
    assert ann["volcano.sh/task-index"] == "1" and ann["volcano.sh/job-version"] == "0"
    assert ann["volcano.sh/preemptable"] == "true" and lab["volcano.sh/preemptable"] == "true"
    assert ann["volcano.sh/card.name"] == "NVIDIA-H200"  # the template's own annotations stay
    assert spec(p)["schedulerName"] == "volcano"
    assert meta(p)["ownerReferences"][0]["kind"] == "Job"


def test_job_runs_and_completes_then_is_cleaned_up() -> None:
    kit = Kit()
    key = start(kit, vcjob("train", replicas=2, duration="1h"))
    assert kit.job_phase(key) == "Running"
    kit.advance(3599)
    assert kit.job_phase(key) == "Running"
    kit.advance(3600)
    assert kit.job_phase(key) == "Completed"
    # finishedTTL 0: pods and PodGroup go, the Job stays as the record
    assert kit.pods() == {} and kit.pg(key) is None
    assert kit.world.get("Job", key) is not None


def test_min_success_completes_early() -> None:
    kit = Kit()
    key = start(kit, vcjob("train", replicas=3, min_available=1, minSuccess=1))
    kit.world.finish_pod("ml/train-worker-0", "Succeeded", 0)
    kit.ctl.reconcile(kit.now)
    assert kit.job_phase(key) == "Completed"


def test_all_failed_without_policy_fails_the_job() -> None:
    kit = Kit()
    key = start(kit, vcjob("train", replicas=2))
    for i in range(2):
        kit.world.finish_pod(f"ml/train-worker-{i}", "Failed", 1)
    kit.ctl.reconcile(kit.now)
    assert kit.job_phase(key) == "Failed"


# --------------------------------------------------------------------------------------------
# Lifecycle policies


def test_pod_evicted_restart_job_kills_all_and_recreates_after_grace() -> None:
    kit = Kit()
    key = start(kit, vcjob("train", replicas=2, policies=[{"event": "PodEvicted", "action": "RestartJob"}]))
    kit.evict("ml/train-worker-0")
    assert kit.job_phase(key) == "Running"  # the controller hears of it when the pod is gone
    kit.advance(30)
    st = kit.job_status(key)
    assert st["state"]["phase"] == "Restarting" and st["retryCount"] == 1 and st["version"] == 1
    assert is_deleting(kit.pods()["ml/train-worker-1"])  # the rest of the gang is killed
    kit.advance(60)
    assert kit.job_phase(key) == "Pending"
    pods = kit.pods()
    assert sorted(pods) == ["ml/train-worker-0", "ml/train-worker-1"]
    assert all(
        pod_phase(p) == "Pending" and annotations(p)["volcano.sh/job-version"] == "1" for p in pods.values()
    )
    assert any(e[4] == "ExecuteAction" and "RestartJob" in e[5] for e in kit.events)


def test_pod_evicted_abort_job_aborts_and_never_recreates() -> None:
    kit = Kit()
    key = start(kit, vcjob("train", replicas=2, policies=[{"event": "PodEvicted", "action": "AbortJob"}]))
    kit.evict("ml/train-worker-0")
    kit.advance(30)
    assert kit.job_phase(key) == "Aborting"
    kit.advance(60)
    assert kit.job_phase(key) == "Aborted"
    assert kit.pods() == {} and kit.pg(key) is None


def test_restart_job_stops_at_max_retry() -> None:
    kit = Kit()
    key = start(
        kit,
        vcjob("train", replicas=1, max_retry=2, policies=[{"event": "PodEvicted", "action": "RestartJob"}]),
    )
    kit.evict("ml/train-worker-0")
    kit.advance(30)
    assert kit.job_phase(key) == "Pending"  # retry 1 of 2; no pod was left to wait for
    kit.set_pg_phase(key, "Inqueue")
    kit.bind_pending("ml/train")
    kit.evict("ml/train-worker-0")
    kit.advance(60)
    st = kit.job_status(key)
    assert st["retryCount"] == 2 and st["state"]["phase"] == "Failed"


def test_pod_failed_policies_by_exit_code_then_event() -> None:
    policies = [{"exitCode": 3, "action": "AbortJob"}, {"event": "PodFailed", "action": "RestartJob"}]
    kit = Kit()
    a = start(kit, vcjob("a", replicas=2, policies=policies))
    b = start(kit, vcjob("b", replicas=2, policies=policies))
    kit.world.finish_pod("ml/a-worker-0", "Failed", 3)
    kit.world.finish_pod("ml/b-worker-0", "Failed", 1)
    kit.ctl.reconcile(kit.now)
    assert kit.job_phase(a) == "Aborting"
    assert kit.job_phase(b) == "Restarting"


def test_task_completed_complete_job_from_task_policy() -> None:
    kit = Kit()
    job = vcjob(
        "mpi",
        tasks=[
            _task("launcher", 1, policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]),
            _task("worker", 2),
        ],
    )
    key = start(kit, job)
    kit.world.finish_pod("ml/mpi-launcher-0", "Succeeded", 0)
    kit.ctl.reconcile(kit.now)
    assert kit.job_phase(key) == "Completing"
    assert all(is_deleting(p) for k, p in kit.pods().items() if "worker" in k)
    kit.advance(30)
    assert kit.job_phase(key) == "Completed"


def test_terminate_job_on_any_event() -> None:
    kit = Kit()
    key = start(kit, vcjob("t", replicas=2, policies=[{"events": ["*"], "action": "TerminateJob"}]))
    kit.world.finish_pod("ml/t-worker-1", "Failed", 1)
    kit.ctl.reconcile(kit.now)
    assert kit.job_phase(key) == "Terminating"
    kit.advance(30)
    assert kit.job_phase(key) == "Terminated"


def test_restart_task_kills_only_that_task() -> None:
    kit = Kit()
    job = vcjob(
        "tf",
        tasks=[
            _task("ps", 1),
            _task("worker", 2, policies=[{"event": "PodEvicted", "action": "RestartTask"}]),
        ],
    )
    key = start(kit, job)
    kit.evict("ml/tf-worker-0")
    kit.advance(30)
    assert kit.job_phase(key) in ("Restarting", "Pending")
    pods = kit.pods()
    assert not is_deleting(pods["ml/tf-ps-0"]) and pod_phase(pods["ml/tf-ps-0"]) == "Running"
    assert is_deleting(pods["ml/tf-worker-1"])
    assert kit.job_status(key)["retryCount"] == 1


def test_no_policy_recreates_the_evicted_pod() -> None:
    kit = Kit()
    key = start(kit, vcjob("train", replicas=2))
    kit.evict("ml/train-worker-0")
    kit.advance(30)
    pods = kit.pods()
    assert pod_phase(pods["ml/train-worker-0"]) == "Pending" and not is_deleting(pods["ml/train-worker-0"])
    assert pod_phase(pods["ml/train-worker-1"]) == "Running"
    assert kit.job_status(key)["retryCount"] == 0
    assert kit.job_phase(key) == "Pending"  # one pending pod > replicas − minAvailable


def test_invalid_job_is_rejected_with_an_event() -> None:
    kit = Kit()
    kit.submit("Job", vcjob("bad", replicas=2, min_available=5))
    assert kit.job_phase("ml/bad") == "Failed"
    assert kit.pg("ml/bad") is None
    assert any(e[4] == "JobRejected" and "minAvailable" in e[5] for e in kit.events)


def test_parse_job_and_match_policy() -> None:
    with pytest.raises(ValueError, match=r"spec.policies\[0\].action"):
        parse_job(vcjob("x", policies=[{"event": "PodEvicted", "action": "Explode"}]))
    with pytest.raises(ValueError, match="unknown event"):
        parse_job(vcjob("x", policies=[{"event": "PodVanished", "action": "AbortJob"}]))
    js = parse_job(
        vcjob(
            "x",
            tasks=[_task("w", 2, policies=[{"event": "PodEvicted", "action": "RestartTask"}])],
            policies=[
                {"event": "PodEvicted", "action": "AbortJob"},
                {"exitCode": 7, "action": "TerminateJob"},
            ],
        )
    )
    assert js.max_retry == 3 and js.min_available == 2
    assert match_policy(js, "PodEvicted", "w", None) == "RestartTask"  # task level first
    assert match_policy(js, "PodEvicted", "other", None) == "AbortJob"
    assert match_policy(js, "PodFailed", "w", 7) == "TerminateJob"
    assert match_policy(js, "PodFailed", "w", 1) == "SyncJob"


# --------------------------------------------------------------------------------------------
# Deployments, ReplicaSets and PodGroups for other pods


def deployment(name: str = "web", ns: str = "online", replicas: int = 2, **ann: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": ns,
            "annotations": {"volcano.sh/service.type": "inference", "kubectl.kubernetes.io/x": "y", **ann},
        },
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {
                        "scheduling.volcano.sh/queue-name": "online-q",
                        "volcano.sh/card.name": "NVIDIA-H200",
                    },
                },
                "spec": {
                    "schedulerName": "volcano",
                    "priorityClassName": "pc-high",
                    "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}}
                    ],
                },
            },
        },
    }


def test_deployment_makes_replicaset_pods_and_one_podgroup_with_inherited_annotations() -> None:
    kit = Kit()
    kit.submit("Deployment", deployment(replicas=2))
    rss = kit.world.items("ReplicaSet")
    assert len(rss) == 1
    rs_key, rs = rss[0]
    assert rs_key.startswith("online/web-")
    assert annotations(rs)["volcano.sh/service.type"] == "inference"
    assert "kubectl.kubernetes.io/x" not in annotations(rs)
    pods = kit.pods("online/")
    assert len(pods) == 2
    pgs = kit.world.items("PodGroup")
    assert len(pgs) == 1
    pg_key, pg = pgs[0]
    assert pg_key == f"online/podgroup-{meta(rs)['uid']}"
    assert annotations(pg)["volcano.sh/service.type"] == "inference"
    assert annotations(pg)["volcano.sh/card.name"] == "NVIDIA-H200"
    s = spec(pg)
    assert s["queue"] == "online-q" and s["minMember"] == 1 and s["priorityClassName"] == "pc-high"
    assert s["minResources"] == {"cpu": "2000m", "nvidia.com/gpu": "1"}
    assert meta(pg)["ownerReferences"][0]["kind"] == "ReplicaSet"
    for p in pods.values():
        assert annotations(p)["scheduling.k8s.io/group-name"] == pg_key.split("/")[1]
        assert meta(p)["ownerReferences"][0]["kind"] == "ReplicaSet"


def test_group_min_member_from_owner_annotation() -> None:
    kit = Kit()
    kit.submit("Deployment", deployment(replicas=3, **{"scheduling.volcano.sh/group-min-member": "3"}))
    ((_, pg),) = kit.world.items("PodGroup")
    assert spec(pg)["minMember"] == 3
    assert spec(pg)["minResources"] == {"cpu": "6000m", "nvidia.com/gpu": "3"}


def test_scale_down_deletes_unbound_then_newest_running() -> None:
    kit = Kit()
    kit.submit("Deployment", deployment(replicas=2))
    kit.bind_pending("online/")
    kit.clock.advance(10)
    dep = kit.world.get("Deployment", "online/web")
    kit.world.put("Deployment", dict(dep, spec=dict(spec(dep), replicas=4)))
    kit.ctl.reconcile(kit.now)
    pods = kit.pods("online/")
    assert len(pods) == 4
    newest = sorted(k for k, p in pods.items() if pod_phase(p) == "Pending")
    kit.world.bind_pod(newest[0], "n1", kit.now)  # one of the two new pods runs, one waits
    kit.ctl.reconcile(kit.now)
    kit.world.put("Deployment", dict(dep, spec=dict(spec(dep), replicas=2)))
    kit.ctl.reconcile(kit.now)
    pods = kit.pods("online/")
    assert newest[1] not in pods  # the unbound one went at once
    assert is_deleting(pods[newest[0]])  # then the newest running one
    assert sum(1 for p in pods.values() if not is_deleting(p)) == 2


def test_evicted_replicaset_pod_is_replaced_at_once() -> None:
    kit = Kit()
    kit.submit("Deployment", deployment(replicas=1))
    kit.bind_pending("online/")
    (victim,) = kit.pods("online/")
    kit.evict(victim)
    pods = kit.pods("online/")
    assert len(pods) == 2 and is_deleting(pods[victim])
    kit.advance(30)
    assert victim not in kit.pods("online/")


def test_deleting_a_deployment_cascades() -> None:
    kit = Kit()
    kit.submit("Deployment", deployment(replicas=2))
    kit.bind_pending("online/")
    kit.world.remove("Deployment", "online/web", "delete")
    kit.ctl.reconcile(kit.now)
    assert kit.world.items("ReplicaSet") == [] and kit.world.items("PodGroup") == []
    assert all(is_deleting(p) for p in kit.pods("online/").values())
    kit.advance(30)
    assert kit.pods("online/") == {}


def bare_pod(name: str, scheduler: str = "volcano", **ann: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "annotations": {
                "scheduling.volcano.sh/queue-name": "q1",
                "volcano.sh/service.type": "training",
                "sim.tidesched.io/duration": "10m",
                **ann,
            },
        },
        "spec": {
            "schedulerName": scheduler,
            "priorityClassName": "pc-low",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Pending"},
    }


def test_bare_pod_gets_its_own_podgroup_and_both_go_when_it_finishes() -> None:
    kit = Kit()
    kit.submit("Pod", bare_pod("solo"))
    pod = kit.world.get("Pod", "ns/solo")
    assert pod is not None
    pg_name = f"podgroup-{meta(pod)['uid']}"
    assert annotations(pod)["scheduling.k8s.io/group-name"] == pg_name
    pg = kit.pg(f"ns/{pg_name}")
    assert pg is not None
    assert spec(pg)["queue"] == "q1" and spec(pg)["priorityClassName"] == "pc-low"
    assert annotations(pg)["volcano.sh/service.type"] == "training"
    assert meta(pg)["ownerReferences"][0] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "solo",
        "uid": meta(pod)["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    kit.bind_pending("ns/")
    kit.advance(600)
    assert kit.world.get("Pod", "ns/solo") is None and kit.pg(f"ns/{pg_name}") is None


def test_pods_of_other_schedulers_get_no_podgroup() -> None:
    kit = Kit()
    kit.submit("Pod", bare_pod("other", scheduler="default-scheduler"))
    assert kit.world.items("PodGroup") == []
    assert "scheduling.k8s.io/group-name" not in annotations(kit.world.get("Pod", "ns/other") or {})


def test_podgroup_unknown_triggers_the_unknown_policy_once() -> None:
    kit = Kit()
    key = start(kit, vcjob("u", replicas=2, policies=[{"event": "Unknown", "action": "RestartJob"}]))
    kit.set_pg_phase(key, "Unknown")
    assert kit.job_phase(key) == "Restarting" and kit.job_status(key)["retryCount"] == 1
    kit.set_pg_phase(key, "Unknown")  # rewritten with the same phase: not a new event
    assert kit.job_status(key)["retryCount"] == 1
