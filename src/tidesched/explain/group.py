"""``tidesched explain`` for a PodGroup or a Volcano Job: why a gang waits.

Read from one session over the cluster (or manifests): the gang condition (minMember, ready and
valid counts, phase and conditions), the pods per task role against ``spec.minTaskMember``, the
quota per card model of its queue, and the node reasons of its pending pods, most common first.
Counts and quota are the cluster as it is (taken before the session's actions); what the session
would do, and why the pods it leaves pending stay so, come from running it. This module only reads.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidesched.explain.claims import group_claim_lines
from tidesched.explain.topology import topology_lines
from tidesched.model.quantity import format_natural
from tidesched.model.status import VALID_STATUSES, PodGroupPhase, TaskStatus
from tidesched.scheduler import run_actions

if TYPE_CHECKING:
    from tidesched.explain.quota import QuotaReport
    from tidesched.framework.decisions import Decisions
    from tidesched.framework.session import Session

JOB_NAME_ANNOTATION = "volcano.sh/job-name"  # set on a Volcano Job's pods by its controller
# Target kinds as typed (singular, plural, short names as kubectl knows them) → canonical.
KINDS = {
    "pod": "pod", "pods": "pod", "po": "pod",
    "podgroup": "podgroup", "podgroups": "podgroup", "pg": "podgroup",
    "job": "job", "jobs": "job", "vcjob": "job", "vcjobs": "job", "vj": "job",
}
_NON_CARD = ("cpu", "memory", "pods")
TOP_REASONS = 5


class TargetError(ValueError):
    pass


@dataclass(frozen=True)
class Target:
    kind: str  # pod | podgroup | job
    namespace: str
    name: str


def parse_target(text: str) -> Target:
    """``name``, ``ns/name`` (a pod, as before), ``ns/KIND/name`` with KIND pod, podgroup (pg) or
    job (vcjob): a Volcano Job, explained through its PodGroup."""
    parts = text.split("/")
    if any(not p for p in parts) or len(parts) > 3:
        raise TargetError(
            f"{text!r}: expected NAMESPACE/NAME, or NAMESPACE/KIND/NAME with KIND pod, podgroup or job"
        )
    if len(parts) == 1:
        return Target("pod", "default", parts[0])
    if len(parts) == 2:
        return Target("pod", parts[0], parts[1])
    kind = KINDS.get(parts[1].lower())
    if kind is None:
        raise TargetError(f"{text!r}: unknown kind {parts[1]!r} (pod, podgroup or job)")
    return Target(kind, parts[0], parts[2])


def find_groups(ssn: Session, target: Target) -> list[str]:
    """Keys of the session's PodGroups the target names. A Volcano Job's PodGroup is the one it
    owns (its name varies across Volcano versions: NAME or NAME-UID), else the one its pods
    (``volcano.sh/job-name``) belong to."""
    if target.kind == "podgroup":
        key = f"{target.namespace}/{target.name}"
        return [key] if key in ssn.jobs else []
    found = []
    for key, job in sorted(ssn.jobs.items()):
        if job.namespace != target.namespace:
            continue
        meta = job.pod_group.meta
        if (meta.owner_kind == "Job" and meta.owner_name == target.name) or any(
            t.pod.meta.annotations.get(JOB_NAME_ANNOTATION) == target.name for t in job.tasks.values()
        ):
            found.append(key)
    return found


@dataclass
class RoleCounts:
    min_member: int | None  # spec.minTaskMember[role], None when not set
    statuses: Counter[TaskStatus] = field(default_factory=Counter)

    @property
    def pods(self) -> int:
        return sum(self.statuses.values())

    def count(self, *statuses: TaskStatus) -> int:
        return sum(self.statuses[s] for s in statuses)


@dataclass
class GroupBefore:
    """A PodGroup as the cluster holds it, taken before the session's actions."""

    key: str
    phase: str
    ready: int
    valid: int
    pods: int
    roles: dict[str, RoleCounts]
    quota: dict[str, tuple[float | None, float, float, float]]  # resource -> quota, used, inqueue, pending
    quota_source: str


def capture(ssn: Session, key: str, report: QuotaReport | None) -> GroupBefore:
    job = ssn.jobs[key]
    roles: dict[str, RoleCounts] = {r: RoleCounts(m) for r, m in sorted(job.task_min_available.items())}
    for t in job.tasks.values():
        roles.setdefault(t.role, RoleCounts(None)).statuses[t.status] += 1
    quota: dict[str, tuple[float | None, float, float, float]] = {}
    if report is not None:
        rows = report.queues.get(job.queue, {})
        # Card models first (the quota that usually binds), then the generic resources.
        for res in sorted(rows, key=lambda r: (r in _NON_CARD, r)):
            u = rows[res]
            if res in _NON_CARD and not (u.quota or u.used or u.inqueue or u.pending):
                continue  # e.g. capacity-card's cpu/memory rows when only cards are limited
            quota[res] = (u.quota, u.used, u.inqueue, u.pending)
    return GroupBefore(
        key=key,
        phase=job.pod_group.phase,
        ready=job.ready_task_num(),
        valid=job.valid_task_num(),
        pods=len(job.tasks),
        roles=dict(sorted(roles.items())),
        quota=quota,
        quota_source=report.source if report is not None else "",
    )


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _conditions(conds: object) -> list[str]:
    out = []
    for c in conds or []:  # type: ignore[attr-defined]
        if not hasattr(c, "get"):
            continue
        reason = f" ({c.get('reason')})" if c.get("reason") else ""
        message = f": {c.get('message')}" if c.get("message") else ""
        out.append(f"{c.get('type')}={c.get('status')}{reason}{message}")
    return out


def pending_reasons(ssn: Session, key: str) -> tuple[list[tuple[str, int, int]], list[tuple[str, int]], int]:
    """The job's pods still pending after the session, by reason: node reasons as (reason, nodes
    summed over the pods, pods), most pods first; other reasons (gang, quota) as (message, pods);
    and the number of pending pods with no recorded reason (the session did not try them)."""
    from tidesched.framework.decisions import FitErrors

    job = ssn.jobs[key]
    nodes: Counter[str] = Counter()
    pods: Counter[str] = Counter()
    other: Counter[str] = Counter()
    untried = 0
    for t in job.tasks.values():
        if t.status != TaskStatus.PENDING:
            continue
        fe = job.fit_errors.get(t.uid)
        if isinstance(fe, FitErrors) and fe.reasons and not fe.message:
            for reason, n in fe.reasons.items():
                nodes[reason] += n
                pods[reason] += 1
        elif isinstance(fe, FitErrors):
            other[fe.error()] += 1
        elif fe:
            other[str(fe)] += 1
        else:
            untried += 1
    node_rows = sorted(((r, nodes[r], pods[r]) for r in nodes), key=lambda x: (-x[2], -x[1], x[0]))
    other_rows = sorted(other.items(), key=lambda x: (-x[1], x[0]))
    return node_rows, other_rows, untried


def group_lines(ssn: Session, decisions: Decisions, before: GroupBefore) -> list[str]:
    """Human explanation of one PodGroup: the state before the session, then its outcome."""
    job = ssn.jobs[before.key]
    pg = job.pod_group
    owner = f", owned by {pg.meta.owner_kind} {pg.meta.owner_name}" if pg.meta.owner_kind else ""
    lines = [f"PodGroup {before.key} (queue {job.queue}{owner})"]
    after = decisions.podgroups.get(before.key, before.phase)
    phase = before.phase if after == before.phase else f"{before.phase}, {after} after this session"
    pending = sum(r.count(TaskStatus.PENDING) for r in before.roles.values())
    lines.append(
        f"Gang: minMember {job.min_available}; {before.ready} ready, {before.valid} valid, "
        f"{pending} pending of {_n(before.pods, 'pod')}; phase {phase}."
    )
    if before.ready >= job.min_available:
        lines.append("  The gang is satisfied: enough pods are placed.")
    elif before.pods == 0 and before.phase == PodGroupPhase.PENDING:
        # Volcano's job controller makes a Job's pods only once its PodGroup is admitted: no pods
        # is the normal state of a job that waits at enqueue, not a missing gang.
        if after == PodGroupPhase.PENDING:
            lines.append(
                "  Not admitted: the PodGroup is Pending, and Volcano's job controller creates a Job's "
                "pods only once its PodGroup is admitted (Inqueue); the reasons it was not admitted follow."
            )
        else:
            lines.append(f"  Admitted this session ({after}): its controller creates the pods next.")
    elif before.pods == 0:
        lines.append("  Admitted, no pods yet: waiting for its controller to create them.")
    elif before.valid < job.min_available:
        lines.append(
            f"  The gang cannot start: only {before.valid} valid pods for minMember {job.min_available} "
            f"({job.min_available - before.valid} missing, or failed)."
        )
    lines.extend(topology_lines(ssn, job))
    stored = _conditions(pg.conditions)
    for text in stored:
        lines.append(f"  condition {text}")
    for text in _conditions(decisions.podgroup_conditions.get(before.key)):
        if text not in stored:  # what the session would write, when it is news
            lines.append(f"  condition this session: {text}")

    lines.append("Tasks (role: minTaskMember; pods: running, bound, pending, other):")
    for role, rc in before.roles.items():
        running = rc.count(TaskStatus.RUNNING)
        placed = rc.count(TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.ALLOCATED)
        waiting = rc.count(TaskStatus.PENDING)
        rest = rc.pods - running - placed - waiting
        mtm = "-" if rc.min_member is None else str(rc.min_member)
        note = ""
        if rc.min_member is not None:
            valid = rc.count(*VALID_STATUSES)
            if valid < rc.min_member:
                note = f"  short by {rc.min_member - valid}"
        lines.append(
            f"  {role or '(no task-spec)'}: minTaskMember {mtm}; {_n(rc.pods, 'pod')}: "
            f"{running} running, {placed} bound, {waiting} pending, {rest} other{note}"
        )

    if before.quota:
        lines.append(f"Queue {job.queue} ({before.quota_source}): resource quota / used / inqueue / pending")
        for res, (quota, used, inqueue, pend) in before.quota.items():
            cells = " / ".join(format_natural(res, v) for v in (quota, used, inqueue, pend))
            lines.append(f"  {res}: {cells}")

    keys = {t.key for t in job.tasks.values()}
    bound = sorted(k for k in decisions.bound if k in keys)
    pipelined = sorted(k for k in decisions.pipelined if k in keys)
    evicted = sorted(k for k in decisions.evicted if k in keys)
    where = ", ".join(f"{k} -> {decisions.bound[k]}" for k in bound[:5]) + (", ..." if len(bound) > 5 else "")
    lines.append(
        f"This session: {len(bound)} bound, {len(pipelined)} pipelined, {len(evicted)} evicted"
        + (f" ({where})" if bound else "") + "."
    )

    node_rows, other_rows, untried = pending_reasons(ssn, before.key)
    still = sum(1 for t in job.tasks.values() if t.status == TaskStatus.PENDING)
    if still:
        lines.append(f"Pending after this session: {_n(still, 'pod')}.")
    if node_rows:
        lines.append("  Top node reasons (nodes summed over the pending pods; pods), most common first:")
        for reason, n, p in node_rows[:TOP_REASONS]:
            lines.append(f"    {reason}: {_n(n, 'node')}, {_n(p, 'pod')}")
        if len(node_rows) > TOP_REASONS:
            lines.append(f"    ... {len(node_rows) - TOP_REASONS} more reasons")
    for message, p in other_rows:
        lines.append(f"  {_n(p, 'pod')}: {message}")
    lines.extend(group_claim_lines(ssn, job))
    if untried:
        if node_rows:
            why = "allocation stops at the first pod of a gang that fits no node"
        elif job.job_fit_error:
            why = job.job_fit_error
        elif after == "Pending":
            why = "the PodGroup is Pending (not enqueued), so no pod was tried"
        else:
            why = "not tried this session"
        lines.append(f"  {_n(untried, 'pod')} not tried: {why}")
    shown = set(lines)
    for e in decisions.events:
        if (e.kind == "PodGroup" and f"{e.namespace}/{e.name}" == before.key) or (
            e.kind == "Queue" and e.name == job.queue
        ):
            line = f"{e.kind} event {e.reason}: {e.message}"
            if not any(e.message in s for s in shown) and line not in lines:
                lines.append(line)
    return lines


def explain_group(ssn: Session, target: Target) -> list[str]:
    """``explain NS/podgroup/NAME`` or ``NS/job/NAME``: capture, run the session, explain each
    PodGroup found (a Volcano Job has one). TargetError when none is scheduled here."""
    from tidesched.explain.quota import queue_report

    keys = find_groups(ssn, target)
    if not keys:
        decisions = run_actions(ssn)
        related = [
            e.message for e in decisions.events
            if e.namespace == target.namespace
            and (e.name == target.name or f"{target.namespace}/{target.name}" in e.message)
        ]
        what = "PodGroup" if target.kind == "podgroup" else "Volcano Job"
        raise TargetError(
            f"{what} {target.namespace}/{target.name}: no PodGroup of it is scheduled by this scheduler: "
            + ("; ".join(related) or "it is not in the input, or its queue is missing")
        )
    rep = queue_report(ssn)  # before the actions: the quota as the cluster holds it
    before = [capture(ssn, key, rep) for key in keys]
    decisions = run_actions(ssn)
    lines: list[str] = []
    if target.kind == "job":
        lines.append(f"Volcano Job {target.namespace}/{target.name}: PodGroup {', '.join(keys)}")
    for b in before:
        lines.extend(group_lines(ssn, decisions, b))
    return lines
