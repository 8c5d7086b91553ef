"""Memos of per-job values that session-open code recomputes for every job of every session.

proportion, drf and overcommit each derive a few values per job when a session opens (what an
admitted job still reserves, its part above minResources, its dominant share). A long
simulation opens tens of thousands of sessions over the same few dozen running jobs, most of
them unchanged since the last session. :func:`job_memo` hands each job a dict for those values
that lives as long as the job's amounts stay the same: its ``allocated`` (compared by value, as
it is changed in place) and its ``minResources`` (the PodGroup record's own object: parsed
records are never changed in place, a new PodGroup is a new object). Anything else a value
depends on (the phase, the cluster total) is checked by the caller. Values are exactly what a
fresh computation gives, and the per-queue sums still add them per job in job order, so float
totals do not move.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidesched.model.infos import JobInfo

# Jobs remembered at most; a 149-day trace has a few thousand. Past it the memo starts afresh.
MAX_JOBS = 100_000

# id(job) -> (job, copy of its allocated, its min_resources, derived values). The job is held
# so that its id is not reused while the entry lives.
_JOBS: dict[int, tuple[Any, Any, Any, dict[str, Any]]] = {}


def job_memo(job: "JobInfo") -> dict[str, Any]:
    """The derived-values dict of ``job``: the one of the last call while the job's allocated
    amounts and minResources are unchanged, else a new empty one. Values put in it must never
    be changed (callers only add them into their own sums)."""
    alloc = job.allocated
    hit = _JOBS.get(id(job))
    if hit is not None and hit[0] is job and hit[2] is job.min_resources:
        seen = hit[1]
        if (
            seen.milli_cpu == alloc.milli_cpu
            and seen.memory == alloc.memory
            and seen.max_task_num == alloc.max_task_num
            and seen.scalars == alloc.scalars
        ):
            return hit[3]
    if len(_JOBS) >= MAX_JOBS:
        _JOBS.clear()
    values: dict[str, Any] = {}
    _JOBS[id(job)] = (job, alloc.clone(), job.min_resources, values)
    return values


def forget_all() -> None:
    """Empty the memo (tests)."""
    _JOBS.clear()
