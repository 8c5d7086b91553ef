"""tidesched with Volcano's own controllers in the loop (``vc-controller-manager`` v1.7.0, started by
the e2e fixtures): the objects those controllers write are read as Volcano's scheduler reads them.

Before this was tested, every Volcano Job and every bare pod stayed Pending for ever: the PodGroups
the controllers write carry quota-style keys in ``minResources`` (``requests.cpu``, ``count/pods``)
which tidesched took for resources no node has."""

from __future__ import annotations

import json

from cluster import (
    GROUP_NAME,
    bound,
    condition,
    create_node,
    create_pod,
    create_queue,
    create_volcano_job,
    events,
    gpu_node,
    job_pod_names,
    job_task,
    podgroup,
    podgroup_name,
    pods,
    replicaset,
    replicaset_pods,
    volcano_job,
    volcano_job_status,
    wait_until,
)

H200 = "NVIDIA-H200"


def _job_phase(api, ns: str, name: str) -> str:
    return str(volcano_job_status(api, ns, name).get("state", {}).get("phase") or "")


def _pg_phase(api, ns: str, name: str) -> str:
    return str((podgroup(api, ns, name).get("status") or {}).get("phase") or "")


def test_volcano_job_and_bare_pod_bind_and_the_job_completes(e2e, volcano_dir) -> None:
    """The case reported from a fresh install: a Job of one master and four 4-GPU workers, and a
    bare pod, with Volcano's default scheduler configuration."""
    api, ns = e2e.api, e2e.ns
    for i in range(3):
        gpu_node(api, f"gpu-{i}", H200, cards=8, cpu="32", memory="128Gi")
    tasks = [
        job_task("master", 1, cpu="2", memory="4Gi", run_seconds=3),
        job_task("worker", 4, cpu="2", memory="4Gi", gpus=4, run_seconds=3),
    ]
    create_volcano_job(api, ns, "llm", tasks, min_available=5)
    names = job_pod_names("llm", tasks)

    # Before any scheduler runs: the controller has written the PodGroup as it does in a real
    # install, quota-style keys included, and made no pod.
    pg_name = podgroup_name(api, ns, "llm")
    pg = podgroup(api, ns, "llm")
    assert pg["spec"]["minMember"] == 5
    assert pg["spec"]["minTaskMember"] == {"master": 1, "worker": 4}
    min_res = pg["spec"]["minResources"]
    assert {"requests.cpu", "count/pods", "pods"} <= set(min_res) and min_res["nvidia.com/gpu"] == "16"
    assert (pg.get("status") or {}).get("phase", "Pending") == "Pending"
    assert not pods(api, ns)

    bare = create_pod(api, ns, "bare", cpu="1", memory="1Gi")
    bare_pg = f"podgroup-{bare['metadata']['uid']}"
    e2e.scheduler((volcano_dir / "volcano-scheduler.conf").read_text())

    wait_until(lambda: _pg_phase(api, ns, "llm") in ("Inqueue", "Running"), 30, "the Job's PodGroup to leave Pending")
    placed = wait_until(lambda: (b := bound(api, ns)) and set(names) | {"bare"} <= set(b) and b, 60,
                        "the job's five pods and the bare pod to bind")
    workers = [placed[n] for n in names if "-worker-" in n]
    assert all(workers.count(node) <= 2 for node in set(workers)), f"more than 8 GPUs on a node: {workers}"

    # The bare pod's PodGroup is the one Volcano's PodGroup controller made and named it after.
    bare_now = api.get(f"/api/v1/namespaces/{ns}/pods/bare")
    wait_until(lambda: api.get(f"/api/v1/namespaces/{ns}/pods/bare")["metadata"]["annotations"].get(GROUP_NAME), 30,
               "the PodGroup controller to annotate the bare pod")
    bare_now = api.get(f"/api/v1/namespaces/{ns}/pods/bare")
    assert bare_now["metadata"]["annotations"][GROUP_NAME] == bare_pg
    owner = podgroup(api, ns, bare_pg)["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("Pod", "bare")
    wait_until(lambda: _pg_phase(api, ns, bare_pg) == "Running", 30, "the bare pod's PodGroup Running")

    wait_until(lambda: _pg_phase(api, ns, "llm") == "Running", 30, "the Job's PodGroup Running")
    assert (podgroup(api, ns, "llm").get("status") or {}).get("running", 0) + \
        (podgroup(api, ns, "llm").get("status") or {}).get("succeeded", 0) == 5
    # The stand-in kubelet ends every pod after 3 s: the controller completes the Job (and then
    # deletes its PodGroup).
    wait_until(lambda: _job_phase(api, ns, "llm") == "Completed", 60, "the Volcano Job to complete")
    # (v1.7.0's job controller also counts them in the Job's status.succeeded; v1.15's zeroes the
    # counts once it completes the Job and keeps the pods.)
    assert sorted(n for n, p in pods(api, ns).items() if (p.get("status") or {}).get("phase") == "Succeeded"
                  and n in names) == sorted(names)
    assert not events(api, ns, pg_name, "Unschedulable")


def test_gang_larger_than_the_cluster_waits_whole_then_runs(e2e, volcano_dir) -> None:
    api, ns = e2e.api, e2e.ns
    create_node(api, "node-a", cpu="4", memory="16Gi")
    names = volcano_job(api, ns, "big", replicas=3, cpu="3", memory="1Gi")
    e2e.scheduler((volcano_dir / "volcano-scheduler.conf").read_text())
    pg_name = podgroup_name(api, ns, "big")

    # Not admitted: the PodGroup stays Pending with the reason, the controller makes no pod.
    wait_until(lambda: [e for e in events(api, ns, pg_name) if "overused" in e.get("message", "")], 30,
               "the enqueue refusal on the PodGroup")
    assert _pg_phase(api, ns, "big") == "Pending"
    assert _job_phase(api, ns, "big") == "Pending"
    assert not pods(api, ns)

    create_node(api, "node-b", cpu="4", memory="16Gi")
    create_node(api, "node-c", cpu="4", memory="16Gi")
    placed = wait_until(lambda: (b := bound(api, ns)) and set(names) <= set(b) and b, 60, "the whole gang to bind")
    assert sorted(placed.values()) == ["node-a", "node-b", "node-c"]
    wait_until(lambda: _job_phase(api, ns, "big") == "Running", 30, "the Job Running")


def test_task_minimums_hold_a_job_whose_roles_cannot_all_start(e2e, volcano_dir) -> None:
    """minAvailable 2 would be met by the two parameter servers alone; minTaskMember (one of each
    role, written by the job controller from the tasks' minAvailable) keeps them from binding
    until a worker can start too. The workers may only run on gpu-1, whose GPUs a running job
    holds; gpu-2's idle GPUs let the job in (Volcano v1.15's job controller counts a worker's GPUs
    in the PodGroup's minResources, and makes no pod before the PodGroup is admitted)."""
    api, ns = e2e.api, e2e.ns
    create_node(api, "cpu-1", cpu="8", memory="32Gi")
    gpu_node(api, "gpu-1", H200, cards=4, cpu="16", memory="64Gi")
    gpu_node(api, "gpu-2", H200, cards=4, cpu="16", memory="64Gi")
    only_gpu_1 = {"kubernetes.io/hostname": "gpu-1"}
    blocker = volcano_job(api, ns, "blocker", replicas=1, gpus=4, cpu="1", memory="1Gi", node_selector=only_gpu_1)
    tasks = [
        job_task("ps", 2, min_available=1, cpu="1", memory="1Gi"),
        job_task("worker", 2, min_available=1, gpus=4, cpu="1", memory="1Gi", node_selector=only_gpu_1),
    ]
    create_volcano_job(api, ns, "tf", tasks, min_available=2)
    e2e.scheduler((volcano_dir / "volcano-scheduler.conf").read_text())
    wait_until(lambda: set(blocker) <= set(bound(api, ns)), 30, "the blocker to bind")
    assert podgroup(api, ns, "tf")["spec"]["minTaskMember"] == {"ps": 1, "worker": 1}

    names = job_pod_names("tf", tasks)
    wait_until(lambda: set(names) <= set(pods(api, ns)), 30, "the job controller to create tf's pods")
    wait_until(lambda: (c := condition(podgroup(api, ns, "tf"), "Unschedulable")) and c["status"] == "True", 30,
               "tf's Unschedulable condition")
    assert not set(names) & set(bound(api, ns)), "parameter servers bound without a worker"

    api.delete(f"/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs/blocker")
    for pod in blocker:
        api.delete(f"/api/v1/namespaces/{ns}/pods/{pod}", gracePeriodSeconds=0)
    placed = wait_until(lambda: (b := bound(api, ns)) and {"tf-ps-0", "tf-ps-1", "tf-worker-0"} <= set(b) and b, 60,
                        "tf's servers and a worker to bind")
    assert placed["tf-worker-0"] == "gpu-1" and "tf-worker-1" not in placed


def test_replicaset_pods_share_the_podgroup_volcano_makes_for_them(e2e, volcano_dir) -> None:
    api, ns = e2e.api, e2e.ns
    create_node(api, "node-a", cpu="8", memory="32Gi")
    create_queue(api, "web")
    rs = replicaset(api, ns, "web-7d9f")
    names = replicaset_pods(api, ns, "web-7d9f", 3, cpu="1", memory="1Gi",
                            annotations={"scheduling.volcano.sh/queue-name": "web"})
    e2e.scheduler((volcano_dir / "volcano-scheduler.conf").read_text())
    wait_until(lambda: set(names) <= set(bound(api, ns)), 30, "the ReplicaSet's pods to bind")

    shared = f"podgroup-{rs['metadata']['uid']}"

    def annotated() -> bool:
        return all((p["metadata"].get("annotations") or {}).get(GROUP_NAME) == shared
                   for n, p in pods(api, ns).items() if n in names)

    wait_until(annotated, 30, "Volcano's PodGroup controller to give the pods their PodGroup")
    pg = podgroup(api, ns, shared)
    assert pg["spec"]["minMember"] == 1 and pg["spec"]["queue"] == "web"
    assert pg["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    wait_until(lambda: (podgroup(api, ns, shared).get("status") or {}).get("running") == 3, 30,
               "the shared PodGroup Running with three pods")
    assert _pg_phase(api, ns, shared) == "Running"


def test_card_quota_on_a_volcano_job_with_the_real_controller(e2e) -> None:
    """capacity-card (deploy/'s configuration): the Job's ``volcano.sh/card.request`` reaches its
    PodGroup through the job controller; a job over its queue's card quota waits with the reason
    on its PodGroup, and is admitted once the first job has completed."""
    api, ns = e2e.api, e2e.ns
    gpu_node(api, "h200-1", H200, cards=8)
    gpu_node(api, "h200-2", H200, cards=8)
    create_queue(api, "team", annotations={"volcano.sh/card.quota": json.dumps({H200: 8})})
    card = {"volcano.sh/card.name": H200}
    first = volcano_job(api, ns, "first", replicas=2, queue="team", gpus=4, cpu="8", memory="32Gi",
                        annotations={"volcano.sh/card.request": json.dumps({H200: 8})}, pod_annotations=card,
                        run_seconds=6)
    e2e.scheduler()  # deploy/configmap.yaml: capacity-card
    wait_until(lambda: set(first) <= set(bound(api, ns)), 30, "the first job to bind")

    second = volcano_job(api, ns, "second", replicas=1, queue="team", gpus=4, cpu="8", memory="32Gi",
                         annotations={"volcano.sh/card.request": json.dumps({H200: 4})}, pod_annotations=card)
    pg_name = podgroup_name(api, ns, "second")
    ev = wait_until(lambda: [e for e in events(api, ns, pg_name) if H200 in e.get("message", "")], 30,
                    "the quota reason on the second job's PodGroup")
    assert "Queue <team> has insufficient <NVIDIA-H200> quota: requested 4, total would be 12, but capability is 8" \
        in ev[0]["message"]
    # Not admitted. (v1.15's job controller writes the PodGroup with no phase, which the
    # scheduler reads as Pending and writes so with its next status update.)
    assert _pg_phase(api, ns, "second") in ("", "Pending") and not set(second) & set(pods(api, ns))

    # The first job's pods end (the kubelet stand-in), the Job completes, its cards return.
    wait_until(lambda: _job_phase(api, ns, "first") == "Completed", 60, "the first job to complete")
    wait_until(lambda: set(second) <= set(bound(api, ns)), 60, "the second job to bind")


def test_cli_reads_the_config_where_the_cluster_keeps_it(e2e, volcano_dir) -> None:
    """``simulate --from-cluster`` and ``quota``/``explain --kubeconfig`` without ``--config``:
    tidesched's ConfigMap, else Volcano's (a tidesched that replaced vc-scheduler and kept its
    configuration), else the default ``run`` uses, saying which."""
    import subprocess

    from cluster import TIDESCHED

    api = e2e.api
    create_node(api, "node-a", cpu="8", memory="32Gi")
    admin = e2e.cp.kubeconfig(e2e.tmp / "admin.kubeconfig", e2e.cp.admin_token, user="admin")
    ours = "/api/v1/namespaces/volcano-system/configmaps/tidesched-scheduler-configmap"
    volcanos = "/api/v1/namespaces/volcano-system/configmaps/volcano-scheduler-configmap"
    saved = api.get(ours)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(TIDESCHED), *args], capture_output=True, text=True, timeout=120,
                              env={**__import__("os").environ, "NO_PROXY": "127.0.0.1,localhost"})

    def whatif_config(tag: str) -> str:
        out = e2e.tmp / tag
        res = cli("simulate", "--from-cluster", "--kubeconfig", str(admin), "--for", "10m", "--out", str(out),
                  "--no-progress")
        assert res.returncode == 0, res.stderr + res.stdout
        return str(json.loads((out / "result.json").read_text())["whatif"]["config"])

    assert whatif_config("ours") == "ConfigMap volcano-system/tidesched-scheduler-configmap"
    api.delete(ours)
    try:
        api.create({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                    "data": {"volcano-scheduler.conf": (volcano_dir / "volcano-scheduler-ci.conf").read_text()}})
        assert whatif_config("volcano") == "ConfigMap volcano-system/volcano-scheduler-configmap"
        quota = cli("quota", "--kubeconfig", str(admin))
        assert quota.returncode == 0, quota.stderr
        assert "scheduler config: ConfigMap volcano-system/volcano-scheduler-configmap" in quota.stderr
        api.delete(volcanos)
        assert whatif_config("none").startswith("the default configuration (Volcano's built-in, as tidesched run uses)")
        quota = cli("quota", "--kubeconfig", str(admin))
        assert quota.returncode == 0 and "scheduler config: the default tidesched run uses" in quota.stderr, quota.stderr
    finally:
        api.delete(volcanos)
        md = saved["metadata"]
        api.create({"apiVersion": "v1", "kind": "ConfigMap", "data": saved["data"],
                    "metadata": {"name": md["name"], "namespace": md["namespace"], "labels": md.get("labels") or {}}})


def test_deployment_pods_get_their_podgroup_from_volcano_and_bind(e2e, volcano_dir) -> None:
    """A Deployment (its ReplicaSet and pods made by kube-controller-manager): Volcano's PodGroup
    controller gives the ReplicaSet's pods one PodGroup, with the Deployment's ``volcano.sh/*``
    annotations inherited through the ReplicaSet; tidesched binds them, and a scale-out joins the
    same PodGroup."""
    api, ns = e2e.api, e2e.ns
    create_node(api, "node-a", cpu="8", memory="32Gi")
    create_queue(api, "serving")
    labels = {"app": "chat"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "chat", "namespace": ns, "annotations": {"volcano.sh/preemptable": "false"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": {"scheduling.volcano.sh/queue-name": "serving"}},
                "spec": {"schedulerName": "volcano",
                         "containers": [{"name": "main", "image": "busybox",
                                         "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
            },
        },
    }
    api.post(f"/apis/apps/v1/namespaces/{ns}/deployments", deployment)
    e2e.scheduler((volcano_dir / "volcano-scheduler.conf").read_text())
    rs = wait_until(lambda: api.items(f"/apis/apps/v1/namespaces/{ns}/replicasets"), 30, "the ReplicaSet")[0]
    shared = f"podgroup-{rs['metadata']['uid']}"

    def chat_pods() -> dict:
        return {n: p for n, p in pods(api, ns).items() if n.startswith("chat-")}

    wait_until(lambda: len(chat_pods()) == 3 and set(chat_pods()) <= set(bound(api, ns)), 60,
               "the Deployment's three pods to bind")
    wait_until(lambda: all((p["metadata"].get("annotations") or {}).get(GROUP_NAME) == shared
                           for p in chat_pods().values()), 30, "Volcano's PodGroup controller to annotate them")
    pg = podgroup(api, ns, shared)
    assert pg["spec"]["minMember"] == 1 and pg["spec"]["queue"] == "serving"
    assert pg["metadata"]["annotations"].get("volcano.sh/preemptable") == "false"  # from the ReplicaSet
    assert (pg["metadata"]["ownerReferences"][0]["kind"], pg["metadata"]["ownerReferences"][0]["name"]) == \
        ("ReplicaSet", rs["metadata"]["name"])
    wait_until(lambda: (podgroup(api, ns, shared).get("status") or {}).get("running") == 3, 30,
               "the PodGroup Running with three pods")

    # Scale out (what an HPA does): the new pods join the same PodGroup and bind.
    api.patch(f"/apis/apps/v1/namespaces/{ns}/deployments/chat", {"spec": {"replicas": 5}})
    wait_until(lambda: len(chat_pods()) == 5 and set(chat_pods()) <= set(bound(api, ns)), 60,
               "the scaled-out pods to bind")
    wait_until(lambda: (podgroup(api, ns, shared).get("status") or {}).get("running") == 5, 30,
               "the PodGroup counting five running pods")
    assert len(api.items(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups")) == 1
