"""Victim bundles of gangpreempt and gangreclaim (Volcano actions/utils/bundle.go, restated).

A victim job's candidate pods in a domain are split in two **bundles**:

* **safe** — pods the job can lose and stay gang-ready: taken lowest task priority first (then
  by uid) while the job keeps more ready pods than ``minAvailable``, the pod's role keeps more
  than its ``minTaskMember`` (roles count only when ``minAvailable`` ≥ the sum of the role
  minimums, as the gang plugin's check), and, for a job with sub-groups (``subGroupPolicy``),
  the pod's sub-group is already broken (a pod of it is missing) or its policy has a ready
  sub-group to spare above ``minSubGroups`` (the first pod taken from a ready sub-group breaks
  it). A job that is not gang-ready already puts all its candidates in the safe bundle:
  evicting more breaks nothing more.
* **whole** — the rest: evicting any of them breaks the job's gang. Its cost is the whole job's
  request, not only the pods in the domain.

Bundles are ordered safe before whole; between two jobs by the action's rule (gangpreempt: the
job the JobOrder plugins would schedule last first; gangreclaim: by the victim queue order);
then by **return on investment** — how much of the need the bundle's pods free (each resource
capped at the need) over how much of the need the bundle's job holds in all (∞ for a safe
bundle); then by job uid, first pod uid and size.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np

from tidesched.model.resource import MIN_RESOURCE

if TYPE_CHECKING:
    from tidesched.model.infos import JobInfo, TaskInfo

SAFE, WHOLE = 0, 1


@dataclass
class Bundle:
    kind: int  # SAFE or WHOLE
    job: "JobInfo"
    tasks: list["TaskInfo"]
    local: np.ndarray  # what the bundle's pods request (the resource dimensions, no pod slots)
    job_total: np.ndarray | None = field(default=None)  # a whole bundle's job, all its pods

    @property
    def first_uid(self) -> str:
        return self.tasks[0].uid if self.tasks else ""


def request_sum(tasks: Iterable["TaskInfo"], width: int) -> np.ndarray:
    """The pods' requests (``resreq``) over the first ``width`` dimensions."""
    total = np.zeros(width)
    for t in tasks:
        assert t.req_vec is not None
        total += t.req_vec[:width]
    return total


def job_bundles(job: "JobInfo", local: list["TaskInfo"], width: int) -> list[Bundle]:
    """The safe and the whole bundle (either may be missing) of ``local``, the job's candidate
    pods in the domain (see the module rules)."""
    if not local:
        return []
    local = sorted(local, key=lambda t: (t.priority, t.uid))
    surplus = job.ready_task_num() - job.min_available
    if surplus < 0:
        return [Bundle(SAFE, job, local, request_sum(local, width))]
    role_surplus: dict[str, int] = {}
    if job.min_available >= job.task_min_available_total:
        role_surplus = {role: job.allocated_roles(role) - m for role, m in job.task_min_available.items()}
    # Sub-groups (Volcano's group surplus): ready sub-groups per policy above minSubGroups, and
    # the sub-groups already broken.
    subs = job.sub_jobs if job.sub_jobs is not None and job.sub_jobs.min_groups else None
    broken: set[str] = set()
    group_surplus: dict[str, int] = {}
    if subs is not None:
        for sub in subs.by_uid.values():
            if sub.is_ready():
                group_surplus[sub.gid] = group_surplus.get(sub.gid, 0) + 1
            else:
                broken.add(sub.uid)
        for gid, m in subs.min_groups.items():
            group_surplus[gid] = group_surplus.get(gid, 0) - m
    safe: list["TaskInfo"] = []
    whole: list["TaskInfo"] = []
    for task in local:
        role_safe = role_surplus.get(task.role, 1) > 0
        sub = subs.of(task) if subs is not None else None
        sub_safe = subs is None or (sub is not None and (sub.uid in broken or group_surplus.get(sub.gid, 0) > 0))
        if surplus > 0 and role_safe and sub_safe:
            safe.append(task)
            surplus -= 1
            if task.role in role_surplus:
                role_surplus[task.role] -= 1
            if sub is not None and sub.uid not in broken:
                broken.add(sub.uid)  # the first pod taken breaks it: its policy has one ready fewer
                group_surplus[sub.gid] = group_surplus.get(sub.gid, 0) - 1
        else:
            whole.append(task)
    out = []
    if safe:
        out.append(Bundle(SAFE, job, safe, request_sum(safe, width)))
    if whole:
        job_total = request_sum(job.tasks.values(), width)
        out.append(Bundle(WHOLE, job, whole, request_sum(whole, width), job_total))
    return out


def flatten(bundles: Iterable[Bundle]) -> list["TaskInfo"]:
    return [t for b in bundles for t in b.tasks]


def keep_allowed(bundles: Iterable[Bundle], allowed: set[str], width: int) -> list[Bundle]:
    """The bundles as the plugins allow them (uids in ``allowed``): a whole bundle all or
    nothing, a safe bundle shrunk to its allowed pods."""
    out = []
    for b in bundles:
        kept = [t for t in b.tasks if t.uid in allowed]
        if b.kind == WHOLE:
            if kept and len(kept) == len(b.tasks):
                out.append(b)
        elif kept:
            out.append(replace(b, tasks=kept, local=request_sum(kept, width)))
    return out


def _score(res: np.ndarray | None, need: np.ndarray, cap: bool) -> float:
    if res is None:
        return 0.0
    asked = need >= MIN_RESOURCE
    if not asked.any():
        return 0.0
    got = np.minimum(res[asked], need[asked]) if cap else res[asked]
    return float(np.sum(got / need[asked]))


def roi(b: Bundle, need: np.ndarray) -> float:
    """How much of the need the bundle frees per how much of the need its job holds (∞ for a
    safe bundle, whose job loses nothing it needs to stay ready)."""
    whole = _score(b.job_total, need, cap=False)
    return math.inf if whole == 0 else _score(b.local, need, cap=True) / whole


def _tie(a: Bundle, b: Bundle, need: np.ndarray) -> int:
    ra, rb = roi(a, need), roi(b, need)
    if ra != rb:
        return -1 if ra > rb else 1
    ka = (a.job.uid, a.first_uid, len(a.tasks))
    kb = (b.job.uid, b.first_uid, len(b.tasks))
    return (ka > kb) - (ka < kb)


def sort_for_preempt(bundles: list[Bundle], need: np.ndarray,
                     victim_job_less: Callable[["JobInfo", "JobInfo"], bool] | None) -> list[Bundle]:
    """Safe first; between jobs ``victim_job_less`` decides (gangpreempt: not JobOrder, so the
    job scheduled last goes first); then return on investment and the stable keys."""

    def cmp(a: Bundle, b: Bundle) -> int:
        if a.kind != b.kind:
            return a.kind - b.kind
        if victim_job_less is not None and a.job.uid != b.job.uid:
            ab, ba = victim_job_less(a.job, b.job), victim_job_less(b.job, a.job)
            if ab != ba:
                return -1 if ab else 1
        return _tie(a, b, need)

    return sorted(bundles, key=functools.cmp_to_key(cmp))


def sort_for_reclaim(bundles: list[Bundle], need: np.ndarray,
                     queue_less: Callable[[str, str], bool] | None) -> list[Bundle]:
    """Safe first; between queues ``queue_less`` (on queue names) decides (gangreclaim: the
    victim queue order); then return on investment and the stable keys."""

    def cmp(a: Bundle, b: Bundle) -> int:
        if a.kind != b.kind:
            return a.kind - b.kind
        if queue_less is not None and a.job.queue != b.job.queue:
            ab, ba = queue_less(a.job.queue, b.job.queue), queue_less(b.job.queue, a.job.queue)
            if ab != ba:
                return -1 if ab else 1
        return _tie(a, b, need)

    return sorted(bundles, key=functools.cmp_to_key(cmp))
