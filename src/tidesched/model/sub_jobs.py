"""A gang's sub-groups as the scheduler keeps them (Volcano v1.15.1's sub-jobs,
``pkg/scheduler/api/sub_job_info.go``): each a gang of its own inside the job.

A PodGroup's ``subGroupPolicy`` splits its pods: a pod joins the sub-group of the first policy
whose ``labelSelector`` matches it and whose ``matchLabelKeys`` it carries (one sub-group per
distinct value tuple); a pod no policy takes joins the job's **default sub-group**. Each
sub-group must have ``subGroupSize`` pods placed to be ready (its own minimum; the default
sub-group needs one), and at least ``minSubGroups`` sub-groups of each policy must be ready for
the gang to be (the gang plugin's check). Each carries the policy's ``networkTopology`` (the
default sub-group the PodGroup's own).

Ids are Volcano's, since they order sub-groups where nothing else does: the default sub-group's
is the job's (``ns/name``); another's ``<job>/<policy>-<values joined by ->`` (a value string
over 128 characters replaced by its FNV-1a hash spelled with Kubernetes' safe alphabet), and its
group's ``<job>/<policy>``. ``match_index`` is the first match value read as an integer (0
otherwise): sub-groups go in that order.

A job without a ``subGroupPolicy`` has no ``SubJobs``: its one (default) sub-group is the job
itself, and everything asked of the sub-group is asked of the job (as in Volcano).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tidesched.model.network_topology import NetworkTopology, SubGroupPolicy, sub_group_key
from tidesched.model.status import ALLOCATED_STATUSES, READY_STATUSES, TaskStatus

if TYPE_CHECKING:
    from tidesched.model.infos import TaskInfo
    from tidesched.model.objects import PodGroup

_INT = re.compile(r"[+-]?[0-9]+\Z")
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.SafeEncodeString


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def sub_job_id(job: str, policy: str, values: str) -> str:
    """Volcano getSubJobID."""
    if len(values) > 128:
        values = "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in str(_fnv32a(values.encode())))
    return f"{job}/{policy}-{values}"


class SubJobInfo:
    """One sub-group: its pods, its minimum, its topology, counts of its pods by status."""

    __slots__ = ("uid", "gid", "job", "policy", "min_available", "match_index", "network_topology",
                 "tasks", "ready_count", "waiting_count", "pending_best_effort", "allocated_count")

    def __init__(self, uid: str, gid: str, job: str, policy: str, min_available: int,
                 network_topology: NetworkTopology | None, match_index: int = 0) -> None:
        self.uid = uid
        self.gid = gid
        self.job = job
        self.policy = policy  # the subGroupPolicy's name; "" for the default sub-group
        self.min_available = min_available
        self.match_index = match_index
        self.network_topology = network_topology
        self.tasks: dict[str, "TaskInfo"] = {}
        self.ready_count = 0
        self.waiting_count = 0
        self.pending_best_effort = 0
        self.allocated_count = 0

    def __repr__(self) -> str:
        return f"SubJob({self.uid}, {self.ready_count}/{self.min_available} ready)"

    @property
    def name(self) -> str:
        """The id without its job: ``<policy>-<values>``, or ``default`` for the default one."""
        return self.uid[len(self.job) + 1:] if self.uid != self.job else "default"

    @property
    def priority(self) -> int:
        """The highest priority of its pods, from 0 (Volcano's starts at 0 and only rises)."""
        return max(0, max((t.priority for t in self.tasks.values()), default=0))

    def count(self, task: "TaskInfo", delta: int) -> None:
        status = task.status
        if status in READY_STATUSES:
            self.ready_count += delta
        if status in ALLOCATED_STATUSES:
            self.allocated_count += delta
        if status == TaskStatus.PIPELINED:
            self.waiting_count += delta
        if status == TaskStatus.PENDING and task.best_effort:
            self.pending_best_effort += delta

    def is_ready(self) -> bool:
        return self.ready_count + self.pending_best_effort >= self.min_available

    def is_pipelined(self) -> bool:
        return self.waiting_count + self.ready_count + self.pending_best_effort >= self.min_available

    def pending(self) -> list["TaskInfo"]:
        return [t for t in self.tasks.values() if t.status == TaskStatus.PENDING]


def _match_index(policy: SubGroupPolicy, labels: dict[str, str]) -> int:
    first = labels.get(policy.match_label_keys[0], "") if policy.match_label_keys else ""
    if _INT.match(first):
        value = int(first)
        if -(2**63) <= value < 2**63:
            return value
    return 0


class SubJobs:
    """A job's sub-groups, kept up to date as its pods come, go and change status."""

    __slots__ = ("job", "policies", "job_topology", "min_groups", "group_names", "by_uid", "of_task")

    def __init__(self, job: str, policies: tuple[SubGroupPolicy, ...], job_topology: NetworkTopology | None) -> None:
        self.job = job
        self.policies = policies
        self.job_topology = job_topology
        # minSubGroups per policy group (every policy, 0 included: CheckSubJobValid reads them all).
        self.min_groups: dict[str, int] = {f"{job}/{p.name}": p.min_groups for p in policies}
        self.group_names = {f"{job}/{p.name}": p.name for p in policies}
        self.by_uid: dict[str, SubJobInfo] = {}
        self.of_task: dict[str, str] = {}

    @classmethod
    def for_podgroup(cls, pg: "PodGroup") -> "SubJobs | None":
        topo = pg.topology
        if topo is None or not topo.sub_groups:
            return None
        return cls(pg.key, topo.sub_groups, topo.network_topology)

    # -- membership (infos.JobInfo calls these) --------------------------------------------

    def add(self, task: "TaskInfo") -> None:
        labels = task.pod.meta.labels
        sub = None
        for policy in self.policies:
            values = sub_group_key(policy, labels)
            if values is None:
                continue
            uid = sub_job_id(self.job, policy.name, values)
            sub = self.by_uid.get(uid)
            if sub is None:
                sub = self.by_uid[uid] = SubJobInfo(
                    uid, f"{self.job}/{policy.name}", self.job, policy.name, policy.size,
                    policy.network_topology, _match_index(policy, labels))
            break
        if sub is None:
            sub = self.by_uid.get(self.job)
            if sub is None:
                sub = self.by_uid[self.job] = SubJobInfo(self.job, self.job, self.job, "", 1, self.job_topology)
        sub.tasks[task.uid] = task
        self.of_task[task.uid] = sub.uid

    def remove(self, task: "TaskInfo") -> None:
        uid = self.of_task.pop(task.uid, None)
        sub = self.by_uid.get(uid) if uid is not None else None
        if sub is not None:
            sub.tasks.pop(task.uid, None)
            if not sub.tasks:
                del self.by_uid[sub.uid]  # as a session's copy of the job has it: only sub-groups with pods

    def count(self, task: "TaskInfo", delta: int) -> None:
        uid = self.of_task.get(task.uid)
        if uid is not None:
            self.by_uid[uid].count(task, delta)

    def of(self, task: "TaskInfo") -> SubJobInfo | None:
        uid = self.of_task.get(task.uid)
        return self.by_uid.get(uid) if uid is not None else None

    # -- the gang plugin's checks (Volcano CheckSubJobValid / Ready / Pipelined) -----------

    def check_valid(self) -> bool:
        """Every policy has at least minSubGroups sub-groups (with pods)."""
        have: dict[str, int] = {}
        for sub in self.by_uid.values():
            have[sub.gid] = have.get(sub.gid, 0) + 1
        return all(have.get(gid, 0) >= m for gid, m in self.min_groups.items())

    def short_groups(self, pipelined: bool = False) -> list[tuple[str, int, int]]:
        """The policies with fewer ready (or pipelined) sub-groups than minSubGroups: (policy
        name, how many are, how many must be)."""
        have: dict[str, int] = {}
        for sub in self.by_uid.values():
            if sub.is_pipelined() if pipelined else sub.is_ready():
                have[sub.gid] = have.get(sub.gid, 0) + 1
        out = []
        for gid, m in self.min_groups.items():
            if m and have.get(gid, 0) < m:
                out.append((self.group_names[gid], have.get(gid, 0), m))
        return out

    def check_ready(self) -> bool:
        return not self.short_groups()

    def check_pipelined(self) -> bool:
        return not self.short_groups(pipelined=True)
