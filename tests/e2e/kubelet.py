"""The kubelet stand-in every e2e test runs (no kubelet or container runtime runs here): bound
pods become Running, deleted ones go, pods with ``RUN_SECONDS`` end Succeeded, and every node's
Lease is renewed so that kube-controller-manager's node-lifecycle controller keeps the nodes Ready
(it also plays kwok's node controller for kwok nodes). ``kind.KindKubelet`` extends it for
Volcano's suites."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from controlplane import ApiError, ControlPlane

# A pod annotation the kubelet stand-in reads: end the pod Succeeded this many seconds after
# starting it (no annotation: it runs until deleted).
RUN_SECONDS = "e2e.tidesched.io/run-seconds"


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class NodeHeartbeat:
    """Every node's kubelet heartbeat: its Lease in ``kube-node-lease`` renewed every
    ``PERIOD`` seconds, so kube-controller-manager's node-lifecycle controller keeps the nodes
    Ready (without it, it marks them unreachable after 50 s and taints them). The same stand-in
    plays kwok's node controller for nodes no kubelet runs."""

    PERIOD = 10.0
    LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"

    def __init__(self, cp: ControlPlane) -> None:
        self.api = cp.client(cp.admin_token)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="node-heartbeat", daemon=True)

    def start(self) -> NodeHeartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.api.close()

    def beat(self) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        for node in self.api.items("/api/v1/nodes"):
            md = node["metadata"]
            name = md["name"]
            spec = {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now}
            try:
                self.api.patch(f"{self.LEASES}/{name}", {"spec": spec})
            except ApiError as exc:
                if exc.status != 404:
                    raise
                owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": md["uid"]}
                try:
                    self.api.post(self.LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                "metadata": {"name": name, "ownerReferences": [owner]}, "spec": spec})
                except ApiError as exc2:
                    if exc2.status != 409:
                        raise

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat()
            except (ApiError, httpx.HTTPError):
                pass  # the API server is restarting: next beat
            self._stop.wait(self.PERIOD)


class Kubelet:
    """Plays every node's kubelet: a bound pod becomes Running with a startTime; a pod with the
    ``RUN_SECONDS`` annotation ends ``Succeeded`` (exit code 0) that long after; a pod being
    deleted (evicted) is removed once ``hold_deletions`` is off; every node's Lease is renewed
    (:class:`NodeHeartbeat`). Watches all pods; reconnects when the watch ends (API server
    restarted, 410 Gone)."""

    def __init__(self, cp: ControlPlane) -> None:
        self.api = cp.client(cp.admin_token)
        self.hold_deletions = False
        self.started: dict[str, str] = {}  # ns/name -> node, every pod it ever started
        self.deleted: list[str] = []
        self._finish_at: dict[tuple[str, str, str], float] = {}  # (ns, name, uid) -> when it succeeds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubelet", daemon=True)
        self.heartbeat = NodeHeartbeat(cp)

    def start(self) -> Kubelet:
        self._thread.start()
        self.heartbeat.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.heartbeat.stop()
        self._thread.join(10)
        self.api.close()

    def release_deletions(self) -> None:
        self.hold_deletions = False
        for p in self.api.items("/api/v1/pods"):
            self._handle(p)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                listing = self.api.get("/api/v1/pods")
                for p in listing.get("items") or []:
                    self._handle(p)
                rv = listing["metadata"]["resourceVersion"]
                while not self._stop.is_set():
                    self._finish_due()
                    for ev in self.api.watch_lines("/api/v1/pods", rv, timeout=1):
                        obj = ev.get("object") or {}
                        if ev.get("type") == "ERROR":
                            raise ApiError(int(obj.get("code") or 500), str(obj.get("message")), "WATCH", "pods")
                        rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                        if ev.get("type") in ("ADDED", "MODIFIED"):
                            self._handle(obj)
                        if self._stop.is_set():
                            return
            except (ApiError, httpx.HTTPError, KeyError, ValueError):
                self._stop.wait(0.2)  # the API server is restarting, or our version expired: relist

    def _handle(self, p: dict[str, Any]) -> None:
        md, spec, st = p["metadata"], p.get("spec") or {}, p.get("status") or {}
        key = f"{md['namespace']}/{md['name']}"
        try:
            if md.get("deletionTimestamp"):
                if not self.hold_deletions:
                    self.api.delete(
                        f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}",
                        gracePeriodSeconds=0,
                    )
                    self.deleted.append(key)
            elif spec.get("nodeName") and st.get("phase", "Pending") == "Pending":
                self.api.patch(
                    f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}/status",
                    {
                        "status": {
                            "phase": "Running",
                            "startTime": now_rfc3339(),
                            "conditions": [
                                {"type": "Ready", "status": "True", "lastTransitionTime": now_rfc3339()},
                            ],
                        }
                    },
                )
                self.started[key] = spec["nodeName"]
                seconds = (md.get("annotations") or {}).get(RUN_SECONDS)
                if seconds is not None:
                    self._finish_at[(md["namespace"], md["name"], md["uid"])] = time.monotonic() + float(seconds)
        except ApiError as exc:
            if exc.status not in (404, 409):
                raise

    def _finish_due(self) -> None:
        now = time.monotonic()
        for ident, at in list(self._finish_at.items()):
            if at > now:
                continue
            del self._finish_at[ident]
            ns, name, uid = ident
            try:
                pod = self.api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
                if pod["metadata"]["uid"] != uid or pod["metadata"].get("deletionTimestamp"):
                    continue
                containers = [c["name"] for c in pod["spec"]["containers"]]
                self.api.patch(
                    f"/api/v1/namespaces/{ns}/pods/{name}/status",
                    {
                        "status": {
                            "phase": "Succeeded",
                            "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now_rfc3339()}],
                            "containerStatuses": [
                                {"name": c, "ready": False, "restartCount": 0, "image": "busybox", "imageID": "",
                                 "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                                          "finishedAt": now_rfc3339()}}}
                                for c in containers
                            ],
                        }
                    },
                )
            except ApiError as exc:
                if exc.status not in (404, 409):
                    raise


