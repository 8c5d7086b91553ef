"""Simulated controllers (SIM-2): what the Kubernetes and Volcano controllers would do between
scheduling sessions. No scheduling logic lives here — only object lifecycles.

* **Volcano Job** (``batch.volcano.sh/v1alpha1``, volcano-semantics §9/§10): on submission a
  PodGroup named like the Job with *all* Job annotations and labels, ``minMember`` =
  ``minAvailable``, ``minTaskMember`` per task, ``minResources`` of the first ``minAvailable``
  pods (tasks by priority), queue and priority class. Pods ``<job>-<task>-<index>`` (with
  ``volcano.sh/task-spec`` annotation and label, ``scheduling.k8s.io/group-name``, job name,
  queue, version, index; the Job's ``volcano.sh/preemptable`` and friends copied) are created
  only once the PodGroup has left Pending. Lifecycle policies (task-level first, then job-level;
  ``event``/``events``/``"*"``/``exitCode``) map PodEvicted / PodFailed / TaskCompleted (and
  Unknown) to AbortJob, RestartJob, RestartTask, RestartPod, CompleteJob, TerminateJob,
  ResumeJob; unmatched events sync. Phases and transitions follow Volcano's state machine
  (Pending, Running, Restarting, Completing, Completed, Aborting, Aborted, Terminating,
  Terminated, Failed), with ``maxRetry`` (default 3) and ``minSuccess``.
* **Deployment → ReplicaSet → Pods**: a ReplicaSet ``<deploy>-<template hash>`` carrying the
  Deployment's annotations; pods ``<rs>-<5 chars>``; scale changes (HPA-like) create pods or
  delete the cheapest ones first (unbound, then pending, then the newest), as Kubernetes does.
* **PodGroups for other pods** (Volcano's podgroup controller): one PodGroup per controlling
  owner (``podgroup-<owner uid>``, else ``podgroup-<pod uid>``) with the owner's
  ``volcano.sh/*`` annotations inherited and the pod's own ``volcano.sh/*`` annotations on top
  (newer Volcano's inherit-pod-annotations; also what the core's ``synthesize_podgroup``
  does), ``minMember`` from the owner's
  ``scheduling.volcano.sh/group-min-member`` (default 1), the pod's queue, priority class,
  ``volcano.sh/preemptable`` and friends, ``minResources`` = pod requests × minMember; the pod
  then gets the ``scheduling.k8s.io/group-name`` annotation.
* **ResourceClaims** (kube-controller-manager's resourceclaim controller, ``resourceclaim``): a
  claim per pod and ResourceClaimTemplate; pods that are done leave their claims'
  ``reservedFor``, unreserved claims are deallocated, claims made for such pods deleted.
* **Completion and clean-up**: pods end after their run time (see :mod:`tidesched.sim.world`);
  finished Jobs, finished bare pods and their PodGroups are removed after ``finishedTTL``.
* **Volumes** (kube-controller-manager's PV binder and ephemeral-volume controller, and a
  provisioner): claims bound, provisioned on the node the scheduler chose, ephemeral volumes'
  claims made (``volumes``).

Modules: ``vcjob``, ``deployment`` (Deployment and ReplicaSet), ``podgroup`` (PodGroups for other
pods, clean-up), ``volumes``, ``common`` (what they share); :class:`Controllers` here routes world changes
to them. Controllers react to world changes: a listener marks objects dirty and :meth:`Controllers.
reconcile` works through them in sorted order until nothing is left, so a run is the same every
time.
"""

from __future__ import annotations

from typing import Any

from tidesched.sim.controllers.common import Emit, Timer
from tidesched.sim.controllers.deployment import DeploymentController, ReplicaSetController
from tidesched.sim.controllers.podgroup import PodGroupController
from tidesched.sim.controllers.resourceclaim import ResourceClaimController
from tidesched.sim.controllers.vcjob import VolcanoJobController
from tidesched.sim.controllers.volumes import VolumeController
from tidesched.sim.world import FINISHED_POD_PHASES, World, controller_owner, pod_phase, split_key


class Controllers:
    """Routes world changes to the controllers and runs them until the world settles."""

    MAX_ROUNDS = 50

    def __init__(self, world: World, emit: Emit, finished_ttl: float = 0.0) -> None:
        self.world = world
        self.emit = emit
        self.jobs = VolcanoJobController(world, emit, finished_ttl)
        self.deployments = DeploymentController(world, emit)
        self.replicasets = ReplicaSetController(world, emit)
        self.podgroups = PodGroupController(world, emit, finished_ttl)
        self.claims = ResourceClaimController(world, emit)
        self.volumes = VolumeController(world, emit)
        self._removed_owners: list[tuple[str, str]] = []
        world.listeners.append(self.on_change)

    def on_change(
        self, kind: str, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None, cause: str
    ) -> None:
        if kind in ("Pod", "PersistentVolumeClaim", "PersistentVolume"):
            self.volumes.on_change(kind, key, old, new)
        if kind == "Pod":
            pod = new if new is not None else old
            assert pod is not None
            self.claims.on_pod(key, old, new)
            owner = controller_owner(pod)
            if owner is None:
                if new is None or self.podgroups.wants(new) or pod_phase(new) in FINISHED_POD_PHASES:
                    self.podgroups.dirty.add(key)
            else:
                if new is not None and self.podgroups.wants(new):
                    self.podgroups.dirty.add(key)
                if owner[0] == "Job":
                    self.jobs.on_pod(key, old, new, cause)
                elif owner[0] == "ReplicaSet":
                    self.replicasets.dirty.add(f"{split_key(key)[0]}/{owner[1]}")
        elif kind == "PodGroup":
            self.jobs.on_podgroup(key, old, new)
            if new is None and cause != "gc":
                self.podgroups.dirty.update(self.world.pods_by_group.get(key, ()))
        elif kind == "Job":
            if cause != "controller":
                self.jobs.dirty.add(key)
        elif kind == "Deployment":
            self.deployments.dirty.add(key)
        elif kind == "ReplicaSet":
            self.replicasets.dirty.add(key)
            if new is None:
                self._removed_owners.append(("ReplicaSet", key))
            owner = controller_owner(new if new is not None else old or {})
            if owner is not None and owner[0] == "Deployment" and new is None:
                self.deployments.dirty.add(f"{split_key(key)[0]}/{owner[1]}")

    def pending(self) -> bool:
        return bool(
            self.jobs.dirty
            or self.deployments.dirty
            or self.replicasets.dirty
            or self.podgroups.dirty
            or self.claims.dirty
            or self.volumes.dirty
            or self._removed_owners
        )

    def reconcile(self, now: float) -> None:
        """Run every controller over its dirty objects (sorted) until nothing is dirty."""
        for _ in range(self.MAX_ROUNDS):
            if not self.pending():
                return
            for ctl in (self.deployments, self.replicasets, self.podgroups, self.jobs, self.claims):
                keys = sorted(ctl.dirty)
                ctl.dirty.clear()
                for key in keys:
                    ctl.reconcile(key, now)
            removed, self._removed_owners = self._removed_owners, []
            for kind, key in removed:
                self.podgroups.gc_owner(kind, key)
            self.volumes.reconcile(now)
        self.emit(
            "Simulator",
            "",
            "controllers",
            "Warning",
            "NotSettled",
            f"controllers did not settle after {self.MAX_ROUNDS} rounds; continuing",
        )

    def on_timer(self, timer: Timer, now: float) -> None:
        if timer.what == "job-gc":
            self.jobs.gc(timer.key)
        elif timer.what == "pod-gc":
            pod = self.world.get("Pod", timer.key)
            if pod is not None and pod_phase(pod) in FINISHED_POD_PHASES:
                self.world.remove("Pod", timer.key, "gc")
                self.podgroups._gc_podgroup_of_pod(timer.key)
