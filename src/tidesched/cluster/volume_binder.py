"""Binding a pod's volumes before its Binding (kube-scheduler's VolumeBinding PreBind, which
Volcano's predicates plugin runs before it binds a pod): the step :class:`~tidesched.cluster.binder.Binder`
takes for a bind whose decision carries a :class:`~tidesched.model.volumes.VolumePlan`.

1. Each PV chosen for a claim is updated with ``spec.claimRef`` naming the claim (and the
   ``pv.kubernetes.io/bound-by-controller`` annotation), each claim to provision with the
   ``volume.kubernetes.io/selected-node`` annotation — one PUT at a time, with the
   resourceVersion the store holds, so a write that races another fails (409) instead of
   taking a PV twice. Until the watch shows them, the store shows the written objects
   (``ClusterStore.assume_object``), so the next session sees the PV taken.
2. The PV controller (kube-controller-manager's persistentvolume-binder) completes the
   binding, or a provisioner makes the volume; the pod's Binding is sent once every claim is
   bound (``spec.volumeName`` and ``pv.kubernetes.io/bind-completed``), as kube-scheduler waits.
   A claim's PV losing its claimRef, a provisioning claim losing its selected node (the PV
   controller gives up on the node), the pod going, or ``volumebinding.bindTimeoutSeconds``
   (600) passing ends the wait: the bind is given up and the pod is pending again.

The waits are checked on one thread of their own whenever the store changes (and every half
second), made on the first volume bind: most clusters never start it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from tidesched.cluster.api import Cancelled, Kube, error_message
from tidesched.cluster.store import POD, PV, PVC, ClusterStore
from tidesched.model.volumes import BIND_COMPLETED, BOUND_BY_CONTROLLER, SELECTED_NODE, VolumePlan

log = logging.getLogger("tidesched.cluster.volume_binder")

# Called once per prebind: None when the pod may be bound now, else why it may not.
Done = Callable[[str | None], None]


@dataclass
class _Prebind:
    pod_key: str
    pod_uid: str
    plan: VolumePlan
    done: Done
    writes: list[tuple[str, str, dict[str, Any]]]  # (kind, key, object to PUT), in order
    written: dict[tuple[str, str], int] = field(default_factory=dict)  # resourceVersion our write made
    deadline: float = 0.0


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _rv(obj: dict[str, Any] | None) -> int:
    """A resourceVersion as a number (etcd's revision), -1 when unreadable."""
    try:
        return int(str(_meta(obj or {}).get("resourceVersion", "")))
    except ValueError:
        return -1


def _path(kind: str, key: str) -> str:
    if kind == PV:
        return f"/api/v1/persistentvolumes/{key}"
    ns, name = key.split("/", 1)
    return f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}"


def _claimed(
    pv: dict[str, Any], claim_key: str, claim_uid: str, claim: dict[str, Any]
) -> dict[str, Any] | None:
    """The PV bound to the claim (GetBindVolumeToClaim), None when it already is."""
    ns, name = claim_key.split("/", 1)
    spec = dict(pv.get("spec") or {})
    ref = spec.get("claimRef") or {}
    uid = ref.get("uid")
    bound = ref.get("namespace") == ns and ref.get("name") == name and (not uid or uid == claim_uid)
    if bound and ref.get("uid") == claim_uid:
        return None
    spec["claimRef"] = {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": ns,
        "name": name,
        "uid": claim_uid,
        "resourceVersion": _meta(claim).get("resourceVersion", ""),
    }
    md = dict(_meta(pv))
    if not bound:
        md["annotations"] = {**(md.get("annotations") or {}), BOUND_BY_CONTROLLER: "yes"}
    return {**pv, "metadata": md, "spec": spec}


class VolumePreBinder:
    """Writes each prebind's PVs and claims, then waits for the PV controller."""

    def __init__(
        self,
        kube: Kube,
        store: ClusterStore,
        *,
        may_send: Callable[[], bool] | None = None,
        owner: object = None,
        max_active: int = 16,
        poll: float = 0.5,
    ) -> None:
        self.kube = kube
        self.store = store
        self.may_send = may_send
        self.owner = owner
        self.max_active = max_active
        self.poll = poll
        self._waiting: list[_Prebind] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self, pod_key: str, pod_uid: str, plan: VolumePlan, done: Done) -> None:
        """Begin a pod's prebind: ``done`` is called once, from another thread."""
        writes: list[tuple[str, str, dict[str, Any]]] = []
        for pv_name, claim_key, claim_uid in plan.static:
            pv, claim = self.store.get(PV, pv_name), self.store.get(PVC, claim_key)
            if pv is None or claim is None:
                done(f'persistentvolume "{pv_name}" or its claim "{claim_key}" is gone')
                return
            new = _claimed(pv, claim_key, claim_uid, claim)
            if new is not None:
                writes.append((PV, pv_name, new))
        for claim_key in plan.provision:
            claim = self.store.get(PVC, claim_key)
            if claim is None:
                done(f'persistentvolumeclaim "{claim_key}" is gone')
                return
            md = dict(_meta(claim))
            if (md.get("annotations") or {}).get(SELECTED_NODE) != plan.node:
                md["annotations"] = {**(md.get("annotations") or {}), SELECTED_NODE: plan.node}
                writes.append((PVC, claim_key, {**claim, "metadata": md}))
        for kind, key, obj in writes:
            self.store.assume_object(kind, key, obj)
        job = _Prebind(pod_key, pod_uid, plan, done, writes, deadline=time.monotonic() + plan.timeout)
        self._write(job, 0)

    def _write(self, job: _Prebind, i: int) -> None:
        if i == len(job.writes):
            self._wait(job)
            return
        kind, key, obj = job.writes[i]
        self.kube.send(
            "PUT",
            _path(kind, key),
            obj,
            lambda answer, exc: self._written(job, i, answer, exc),
            may_send=self._allowed,
            owner=self.owner,
            max_active=self.max_active,
        )

    def _written(
        self, job: _Prebind, i: int, answer: dict[str, Any] | None, exc: BaseException | None
    ) -> None:
        kind, key, _obj = job.writes[i]
        if exc is not None:
            self._finish(
                job,
                "cancelled"
                if isinstance(exc, Cancelled)
                else f"binding volumes: updating {kind} {key}: {error_message(exc)}",
            )
            return
        job.written[(kind, key)] = _rv(answer)
        self._write(job, i + 1)

    def _allowed(self) -> bool:
        return not self._stopped and (self.may_send is None or self.may_send())

    # -- the wait for the PV controller ----------------------------------------------------

    def _wait(self, job: _Prebind) -> None:
        with self._lock:
            self._waiting.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="volume-binding", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        seen = -1
        while not self._stopped:
            self.store.wait_for(lambda: self.store.version != seen or self._wake.is_set(), self.poll)
            self._wake.clear()
            seen = self.store.version
            with self._lock:
                jobs = list(self._waiting)
            for job in jobs:
                verdict = self._check(job)
                if verdict is not False:
                    with self._lock:
                        self._waiting.remove(job)
                    self._finish(job, verdict)

    def _check(self, job: _Prebind) -> str | None | bool:
        """checkBindings: None when every claim is bound, a reason when the wait is over without
        that, False to wait on."""
        pod = self.store.get(POD, job.pod_key)
        if pod is None or (job.pod_uid and _meta(pod).get("uid") != job.pod_uid):
            return "binding volumes: pod does not exist any more"
        plan = job.plan
        pending = False
        for pv_name, claim_key, _uid in plan.static:
            pv, claim = self.store.get(PV, pv_name), self.store.get(PVC, claim_key)
            if pv is None or claim is None:
                gone = f"persistentvolume {pv_name}" if pv is None else f"claim {claim_key}"
                return f"binding volumes: {gone} is gone"
            if _rv(pv) < job.written.get((PV, pv_name), -1):
                pending = True  # our write not seen yet
                continue
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if not ref.get("uid"):
                return f'binding volumes: ClaimRef got reset for pv "{pv_name}"'
            pending |= not _fully_bound(claim)
        for claim_key in plan.provision:
            claim = self.store.get(PVC, claim_key)
            if claim is None:
                return f"binding volumes: claim {claim_key} is gone"
            if _rv(claim) < job.written.get((PVC, claim_key), -1):
                pending = True
                continue
            selected = (_meta(claim).get("annotations") or {}).get(SELECTED_NODE)
            name = claim_key.split("/", 1)[1]
            if selected is None:
                return f'binding volumes: selectedNode annotation reset for PVC "{name}"'
            if selected != plan.node:
                return f'binding volumes: provisioning failed for PVC "{name}"'
            pending |= not _fully_bound(claim)
        if not pending:
            return None
        if time.monotonic() > job.deadline:
            return "binding volumes: timed out waiting for the condition"
        return False

    def _finish(self, job: _Prebind, error: str | None) -> None:
        if error is not None:
            for kind, key, _obj in job.writes:
                self.store.forget_object(kind, key)
            log.warning("volumes of %s not bound: %s", job.pod_key, error)
        job.done(error)

    def pending(self) -> int:
        with self._lock:
            return len(self._waiting)

    def stop(self) -> None:
        """Wait no more: every prebind still waiting is given up."""
        self._stopped = True
        self._wake.set()
        with self._lock:
            jobs, self._waiting = self._waiting, []
        for job in jobs:
            self._finish(job, "cancelled")
        if self._thread is not None:
            self._thread.join(2.0)


def _fully_bound(claim: dict[str, Any]) -> bool:
    annotations = _meta(claim).get("annotations") or {}
    return bool((claim.get("spec") or {}).get("volumeName")) and BIND_COMPLETED in annotations
