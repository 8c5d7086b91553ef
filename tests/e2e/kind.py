"""The cluster Volcano's e2e suites expect, as ``hack/run-e2e-kind.sh`` makes it with kind, on a bare
control plane: the nodes (one tainted control-plane node and four workers, 4 CPU / 8 Gi each),
kindnet's per-node pod (its requests count on every node), the default scheduler
(``kube-scheduler`` from envtest, for the suites' pods that name no scheduler), a kubelet that runs
what is bound to a node that exists, and a ConfigMap volume that keeps the scheduler's
configuration file in step with its ConfigMap (the suites edit it and expect the scheduler to
reload).

For the hypernode and gangevict suites, kwok's fake nodes (:func:`create_kwok_nodes`): kwok's node
controller (their heartbeat) is ``kubelet.NodeHeartbeat``, its pod stages the kubelet stand-in
(a pod there runs until deleted, as Volcano's CI keeps kwok's stages without ``pod-complete``).

The kubelet stand-in (:class:`KindKubelet`) extends ``kubelet.Kubelet``: a deleted pod goes away
``TERMINATION_SECONDS`` (at most its grace period) after its deletion, not at once; a pod bound to a node
that does not exist (or is not Ready) stays Pending, as nothing would run it; a container whose
command is a small shell script of ``sleep``/``exit``/no-op statements ends when the script would,
with its exit code, and the pod's phase follows its ``restartPolicy`` (``Always``: it keeps
running; ``OnFailure``: succeeded on 0, else restarted in place with a back-off; ``Never``:
succeeded or failed). Anything else runs until deleted.
"""

from __future__ import annotations

import heapq
import os
import re
import shlex
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from cluster import create_node
from kubelet import Kubelet, now_rfc3339
from controlplane import ApiError, ControlPlane, _Proc
from informer import Informer

CLUSTER_NAME = "integration"  # hack/run-e2e-kind.sh's default
WORKERS = 4
NODE_CPU, NODE_MEMORY, NODE_PODS = "4", "8Gi", "110"
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
# kindnet's DaemonSet pod (requests = limits) on every node.
KINDNET_REQUESTS = {"cpu": "100m", "memory": "50Mi"}
# The scheduler's ConfigMap as the Helm release "integration" names it, and the key it mounts.
SCHEDULER_CONFIGMAP = ("volcano-system", f"{CLUSTER_NAME}-scheduler-configmap")
SCHEDULER_CONF_KEY = "volcano-scheduler-ci.conf"
# How long the kubelet stand-in takes to stop a deleted pod's containers and report it (at most
# the pod's grace period): a kubelet's relist period and status round trip, about a second or two.
TERMINATION_SECONDS = 1.5


def node_names() -> list[str]:
    return [f"{CLUSTER_NAME}-control-plane"] + [
        f"{CLUSTER_NAME}-worker{'' if i == 1 else i}" for i in range(1, WORKERS + 1)
    ]


def create_kind_nodes(api: Any) -> list[str]:
    """The nodes and kindnet's pods; returns the node names, control plane first."""
    names = node_names()
    common = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
              "beta.kubernetes.io/arch": "amd64"}
    for i, name in enumerate(names):
        labels = dict(common)
        if i == 0:
            labels.update({"node-role.kubernetes.io/control-plane": "", "node.kubernetes.io/exclude-from-external-load-balancers": ""})
        create_node(api, name, cpu=NODE_CPU, memory=NODE_MEMORY, pods=NODE_PODS, labels=labels)
        if i == 0:
            api.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": [CONTROL_PLANE_TAINT]}})
    for name in names:
        kindnet_pod(api, name)
    return names


def kindnet_pod(api: Any, node: str) -> None:
    """kindnet's DaemonSet pod on ``node``: it tolerates every taint, so kwok's nodes get one too."""
    api.post("/api/v1/namespaces/kube-system/pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"kindnet-{node}", "namespace": "kube-system", "labels": {"app": "kindnet"}},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "kindnet-cni", "image": "kindest/kindnetd",
                            "resources": {"requests": KINDNET_REQUESTS, "limits": KINDNET_REQUESTS}}],
        },
    })


# kwok's fake nodes as hack/run-e2e-kind.sh makes them for the hypernode (8) and gangevict (4)
# suites: 8 CPU, 8 Gi, 110 pods, labelled type=kwok and tainted so that only pods that tolerate
# the taint land there (and kindnet's, which tolerates everything).
KWOK_CPU, KWOK_MEMORY = "8", "8Gi"
KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
KWOK_LABEL = ("type", "kwok")


def create_kwok_nodes(api: Any, count: int) -> list[str]:
    names = [f"kwok-node-{i}" for i in range(count)]
    labels = {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "kubernetes.io/os": "linux", "kubernetes.io/role": "agent", "node-role.kubernetes.io/agent": "",
              KWOK_LABEL[0]: KWOK_LABEL[1]}
    for name in names:
        create_node(api, name, cpu=KWOK_CPU, memory=KWOK_MEMORY, pods=NODE_PODS, labels=labels)
        api.patch(f"/api/v1/nodes/{name}", {"metadata": {"annotations": {"kwok.x-k8s.io/node": "fake",
                                                                           "node.alpha.kubernetes.io/ttl": "0"}},
                                           "spec": {"taints": [KWOK_TAINT]}})
        # kind's DaemonSets tolerate every taint: kindnet's pod (its requests count) runs on kwok's
        # nodes too, as in Volcano's CI, where the hypernode suite's expected placements need it.
        kindnet_pod(api, name)
    return names


# ------------------------------------------------------------------------------------------
# The kubelet


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_NOOPS = {"true", ":", "echo", "date", "hostname", "env", "ls", "cat", "pwd", "printf", "mkdir", "touch", "cd"}
# Images whose content the stand-in knows well enough to say a command is not there: the suites'
# busybox and nginx. In others (MPI, TensorFlow, PyTorch examples) an unknown command is taken to
# be the image's own program, which runs until deleted.
_KNOWN_IMAGES = ("busybox", "nginx")


def script_of(pod: dict[str, Any]) -> tuple[str, str] | None:
    """(script, image) of the first container when it runs a shell script (``sh -c SCRIPT``)."""
    containers = (pod.get("spec") or {}).get("containers") or []
    if not containers:
        return None
    c = containers[0]
    words = list(c.get("command") or []) + list(c.get("args") or [])
    if len(words) >= 3 and words[0] in ("/bin/sh", "sh", "/bin/bash", "bash") and words[1] == "-c":
        return words[2], str(c.get("image") or "")
    return None


def outcome(script: str, image: str = "") -> tuple[float, int] | None:
    """(seconds, exit code) of a script of ``sleep N``, ``exit N``, ``false`` and no-op statements
    joined by ``;``, ``&&`` or newlines, as ``sh -c`` would end it; a command the image does not
    have ends it with 127 (``sh FILE``: no such file, 2). None for anything else: it runs until
    deleted."""
    known_image = any(Path(image.split(":")[0]).name == k for k in _KNOWN_IMAGES)
    total = 0.0
    for stmt in re.split(r";|&&|\n", script):
        try:
            words = shlex.split(stmt)
        except ValueError:
            return None
        if not words:
            continue
        if words[0] == "sleep" and len(words) == 2 and (m := _DURATION.match(words[1])):
            total += float(m.group(1)) * _UNITS[m.group(2)]
        elif words[0] == "exit":
            return total, int(words[1]) if len(words) > 1 else 0
        elif words[0] == "false":
            return total, 1
        elif words[0] in ("sh", "bash") and len(words) == 2 and known_image:
            return total, 2  # the suites' script files are in no image
        elif words[0] in _NOOPS:
            continue
        elif known_image:
            return total, 127
        else:
            return None
    return total, 0


class KindKubelet(Kubelet):
    """``kubelet.Kubelet`` for the suites' cluster: only pods on existing Ready nodes run, and
    containers with a finite script end (see the module's docstring)."""

    def __init__(self, cp: ControlPlane, nodes: Informer) -> None:
        super().__init__(cp)
        self.nodes = nodes
        self._timers: list[tuple[float, int, str, str, str]] = []  # (when, seq, what, pod uid, ns/name)
        self._seq = 0
        self._terminating: set[str] = set()
        self._timer_lock = threading.Condition()
        self._restarts: dict[str, int] = {}
        self._timer_thread = threading.Thread(target=self._run_timers, name="kubelet-runtime", daemon=True)

    def start(self) -> KindKubelet:
        super().start()
        self._timer_thread.start()
        return self

    def stop(self) -> None:
        with self._timer_lock:
            self._timer_lock.notify_all()
        super().stop()

    def ready_nodes(self) -> set[str]:
        out = set()
        for n in self.nodes.list():
            conds = (n.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
                out.add(n["metadata"]["name"])
        return out

    def kwok_nodes(self) -> set[str]:
        return {n["metadata"]["name"] for n in self.nodes.list()
                if (n["metadata"].get("labels") or {}).get(KWOK_LABEL[0]) == KWOK_LABEL[1]}

    def _handle(self, p: dict[str, Any]) -> None:
        md, spec, st = p["metadata"], p.get("spec") or {}, p.get("status") or {}
        if md.get("deletionTimestamp") and spec.get("nodeName") and not self.hold_deletions:
            # Stopping the containers and reporting it takes a kubelet a moment, bounded by the
            # grace period: the pod stays (terminating) until then, as the scheduler and Volcano's
            # job controller would see it on a real node.
            if md["uid"] not in self._terminating:
                self._terminating.add(md["uid"])
                grace = float(md.get("deletionGracePeriodSeconds") or 0)
                self._at(time.time() + min(grace, TERMINATION_SECONDS), md["uid"], f"{md['namespace']}/{md['name']}", "delete")
            return
        if not md.get("deletionTimestamp") and spec.get("nodeName"):
            if spec["nodeName"] not in self.ready_nodes():
                return  # no kubelet there: it stays Pending
        was_pending = st.get("phase", "Pending") == "Pending"
        super()._handle(p)
        if md.get("deletionTimestamp") or not spec.get("nodeName") or not was_pending:
            return
        if spec["nodeName"] in self.kwok_nodes():
            return  # kwok's stages as Volcano's CI keeps them (pod-complete deleted): runs until deleted
        script = script_of(p)
        out = outcome(*script) if script is not None else None
        if out is not None:
            self._at(time.time() + out[0], md["uid"], f"{md['namespace']}/{md['name']}", "exit")

    def _at(self, when: float, uid: str, key: str, what: str) -> None:
        with self._timer_lock:
            self._seq += 1
            heapq.heappush(self._timers, (when, self._seq, what, uid, key))
            self._timer_lock.notify_all()

    def _run_timers(self) -> None:
        while not self._stop.is_set():
            with self._timer_lock:
                wait = (self._timers[0][0] - time.time()) if self._timers else 0.5
                if wait > 0:
                    self._timer_lock.wait(min(wait, 0.5))
                    continue
                _, _, what, uid, key = heapq.heappop(self._timers)
            try:
                if what == "delete":
                    self._terminated(uid, key)
                else:
                    self._container_exited(uid, key)
            except Exception:  # noqa: BLE001 - a pod gone or the client closed at stop: nothing to run
                if self._stop.is_set():
                    return

    def _terminated(self, uid: str, key: str) -> None:
        ns, name = key.split("/", 1)
        try:
            self.api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", {
                "apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
            self.deleted.append(key)
        except ApiError as exc:
            if exc.status not in (404, 409):
                raise
        finally:
            self._terminating.discard(uid)

    def _container_exited(self, uid: str, key: str) -> None:
        ns, name = key.split("/", 1)
        path = f"/api/v1/namespaces/{ns}/pods/{name}"
        try:
            pod = self.api.get(path)
        except ApiError:
            return
        if pod["metadata"]["uid"] != uid or pod["metadata"].get("deletionTimestamp"):
            return
        if (pod.get("status") or {}).get("phase") != "Running":
            return
        script = script_of(pod)
        out = outcome(*script) if script is not None else None
        if out is None:
            return
        seconds, code = out
        policy = pod["spec"].get("restartPolicy", "Always")
        c = pod["spec"]["containers"][0]
        now = now_rfc3339()
        if policy == "Always" or (policy == "OnFailure" and code != 0):
            n = self._restarts[uid] = self._restarts.get(uid, 0) + 1
            status = {"containerStatuses": [{
                "name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True, "started": True,
                "restartCount": n, "state": {"running": {"startedAt": now}},
                "lastState": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                             "startedAt": now, "finishedAt": now}},
            }]}
            self.api.patch(f"{path}/status", {"status": status})
            self._at(time.time() + seconds + min(10 * 2 ** (n - 1), 300), uid, key, "exit")
            return
        phase = "Succeeded" if code == 0 else "Failed"
        status = {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}],
            "containerStatuses": [{
                "name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "started": False,
                "restartCount": self._restarts.get(uid, 0),
                "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                         "startedAt": pod["status"].get("startTime", now), "finishedAt": now}},
            }],
        }
        self.api.patch(f"{path}/status", {"status": status})


# ------------------------------------------------------------------------------------------
# The default scheduler and the scheduler's configuration volume


def start_kube_scheduler(cp: ControlPlane, workdir: Path) -> _Proc:
    """envtest's kube-scheduler as kubeadm runs it (identity system:kube-scheduler), no leader
    election; it schedules the pods that name no scheduler."""
    kubeconfig = cp.kubeconfig(workdir / "kube-scheduler.kubeconfig", cp.kube_scheduler_token, user="kube-scheduler")
    conf = workdir / "kube-scheduler.yaml"
    conf.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        f"clientConnection:\n  kubeconfig: {kubeconfig}\n"
        "leaderElection:\n  leaderElect: false\n"
    )
    proc = _Proc("kube-scheduler", [str(cp.assets / "kube-scheduler"), f"--config={conf}", "--secure-port=0", "-v=1"],
                 workdir / "kube-scheduler.log")
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    with open(proc.log, "ab") as out:
        proc.popen = subprocess.Popen(proc.cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return proc


class ConfigMapVolume:
    """Keeps ``path`` equal to one key of a ConfigMap, replacing the file atomically (a rename in
    its directory, as the kubelet swaps a ConfigMap volume) within about a second of a change."""

    def __init__(self, cp: ControlPlane, namespace: str, name: str, key: str, path: Path) -> None:
        self.api = cp.client(cp.admin_token)
        self.url = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
        self.key, self.path = key, path
        self.updates = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="configmap-volume", daemon=True)

    def start(self) -> ConfigMapVolume:
        self.sync()
        self._thread.start()
        return self

    def sync(self) -> None:
        try:
            data = (self.api.get(self.url).get("data") or {}).get(self.key)
        except ApiError:
            return
        if data is None:
            return
        try:
            if self.path.read_text() == data:
                return
        except OSError:
            pass
        tmp = self.path.with_name(f".{self.path.name}.new")
        tmp.write_text(data)
        os.replace(tmp, self.path)
        self.updates += 1

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.sync()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.api.close()
