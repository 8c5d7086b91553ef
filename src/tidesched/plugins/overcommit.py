"""overcommit plugin (Volcano plugins/overcommit): admit jobs while the cluster, inflated by
an overcommit factor, still has room for what admitted jobs have reserved.

Arguments:

- ``overcommit-factor`` (default 1.2): the factor applied to every resource dimension;
- ``overcommit-factor.<resource>`` (e.g. ``overcommit-factor.cpu``): a factor for one
  dimension, overriding the general one.

A factor below 1 is replaced by the default 1.2 (upstream: invalid value, default used).

At session open: ``idle = total × factor − used`` (used = what is charged to the nodes now;
it may make idle negative), and ``inqueue`` = minResources of Inqueue jobs + the part of
minResources not yet allocated of Running jobs whose allocated tasks reach minMember.

Hooks registered:

- ``job_enqueueable``: Permit when the job has no minResources; Permit when inqueue +
  minResources ≤ idle on the dimensions minResources requests; otherwise Reject (with a
  Warning event on the PodGroup naming each short resource and the amounts). The plugin
  never abstains.
- ``job_enqueued``: the admitted job's minResources join ``inqueue``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.framework.gates import deduct_gated
from tidesched.framework.plugin import PERMIT, REJECT, Plugin
from tidesched.model.quantity import format_amount
from tidesched.model.resource import Resource
from tidesched.model.status import PodGroupPhase
from tidesched.plugins.proportion import allocated_task_num
from tidesched.framework.job_memo import is_nothing, job_memo

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo

FACTOR_KEY = "overcommit-factor"
FACTOR_PREFIX = FACTOR_KEY + "."
DEFAULT_FACTOR = 1.2


def parse_factors(arguments: "Arguments") -> tuple[float, dict[str, float]]:
    """(general factor, per-resource factors); values below 1 become the default."""
    general = arguments.get_float(FACTOR_KEY, DEFAULT_FACTOR)
    if general < 1.0:
        general = DEFAULT_FACTOR
    per: dict[str, float] = {}
    for key in arguments:
        if key.startswith(FACTOR_PREFIX) and len(key) > len(FACTOR_PREFIX):
            v = arguments.get_float(key, DEFAULT_FACTOR)
            per[key[len(FACTOR_PREFIX):]] = v if v >= 1.0 else DEFAULT_FACTOR
    return general, per


def scale(total: Resource, general: float, per: dict[str, float]) -> Resource:
    out = total.clone()
    out.milli_cpu *= per.get("cpu", general)
    out.memory *= per.get("memory", general)
    for name in out.scalars:
        out.scalars[name] *= per.get(name, general)
    return out


def unallocated_min(job: "JobInfo") -> Resource:
    """max(0, minResources − allocated) per dimension minResources names."""
    out = Resource()
    mr = job.min_resources
    if mr is None:
        return out
    alloc = job.allocated
    out.milli_cpu = max(0.0, mr.milli_cpu - alloc.milli_cpu)
    out.memory = max(0.0, mr.memory - alloc.memory)
    for name, v in mr.scalars.items():
        left = v - alloc.scalars.get(name, 0.0)
        if left > 0:
            out.scalars[name] = left
    return out


class OvercommitPlugin(Plugin):
    name = "overcommit"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.factor, self.factors = parse_factors(arguments)

    def on_session_open(self, ssn: "Session") -> None:
        total = ssn.total_resource
        used = ssn.table.used_total()
        self.capacity = scale(total, self.factor, self.factors)
        self.idle = self.capacity.clone().sub(used)
        self.used = used
        inqueue = Resource()
        self.inqueue = inqueue
        for job in ssn.jobs.values():
            if job.min_resources is None:
                continue
            phase = job.phase  # as read from the cluster, less a gang timed out at open
            if phase == PodGroupPhase.INQUEUE:
                inqueue.add(deduct_gated(job, job.min_resources))
            elif phase == PodGroupPhase.RUNNING:
                # A running job whose gang is placed keeps what it still may need; the
                # minMember test stops a finished driver's share from being reserved again.
                # What is left depends on allocated and minResources only: kept while they
                # stay. Adding nothing (a placed gang) is skipped.
                memo = job_memo(job)
                left = memo.get("overcommit")
                if left is None:
                    left = memo["overcommit"] = unallocated_min(job)
                if not is_nothing(left) and allocated_task_num(job) >= job.min_available:
                    inqueue.add(deduct_gated(job, left))

        def job_enqueueable(job: "JobInfo") -> int:
            if job.min_resources is None:
                return PERMIT
            min_req = job.min_resources
            wanted = inqueue.clone().add(min_req)
            ok, names = wanted.less_equal_with_dimension_names(self.idle, min_req)
            if ok:
                return PERMIT
            ssn.event("PodGroup", job.namespace, job.name, "Warning", "Unschedulable",
                      self._message(job, names))
            return REJECT

        def job_enqueued(job: "JobInfo") -> None:
            if job.min_resources is not None:
                inqueue.add(deduct_gated(job, job.min_resources))

        ssn.add_fn("job_enqueueable", self.name, job_enqueueable)
        ssn.add_fn("job_enqueued", self.name, job_enqueued)

    def _message(self, job: "JobInfo", names: list[str]) -> str:
        assert job.min_resources is not None
        parts = []
        for n in names:
            f = self.factors.get(n, self.factor)
            need = job.min_resources.get(n) + self.inqueue.get(n)
            parts.append(
                f"{n}: min resources {format_amount(n, job.min_resources.get(n))} + already admitted "
                f"{format_amount(n, self.inqueue.get(n))} = {format_amount(n, need)} exceeds the room left "
                f"{format_amount(n, max(self.idle.get(n), 0.0))} "
                f"(total {format_amount(n, self.capacity.get(n) / f)} x {f:g} - used {format_amount(n, self.used.get(n))})"
            )
        return f"resource in cluster is overused: PodGroup {job.key} is not admitted; " + "; ".join(parts)
