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
    from tidesched.model.resource import Resource

# Jobs remembered at most (a 149-day trace has a few thousand), so the memo of a
# long-running scheduler stays bounded. Past it the memo starts afresh.
MAX_JOBS = 20_000

# job uid -> (copy of its allocated, its min_resources, derived values). Neither the job nor its
# tasks are held: a finished job's entry is a few small vectors. The values depend on the
# amounts only, so a new JobInfo for the same uid (a rebuilt cache) may use them as well.
_JOBS: dict[str, tuple[Any, Any, dict[str, Any]]] = {}


def job_memo(job: "JobInfo") -> dict[str, Any]:
    """The derived-values dict of ``job``: the one of the last call while the job's allocated
    amounts and minResources are unchanged, else a new empty one. Values put in it must never
    be changed (callers only add them into their own sums)."""
    alloc = job.allocated
    hit = _JOBS.get(job.uid)
    if hit is not None and hit[1] is job.min_resources:
        seen = hit[0]
        if (
            seen.milli_cpu == alloc.milli_cpu
            and seen.memory == alloc.memory
            and seen.max_task_num == alloc.max_task_num
            and seen.scalars == alloc.scalars
        ):
            return hit[2]
    if len(_JOBS) >= MAX_JOBS:
        _JOBS.clear()
    values: dict[str, Any] = {}
    _JOBS[job.uid] = (alloc.clone(), job.min_resources, values)
    return values


def is_nothing(res: "Resource") -> bool:
    """Adding ``res`` would change no sum: zero cpu and memory and no scalar at all (a zero
    scalar still adds its name). Sums here start at 0.0 and only grow, so x + 0.0 is x."""
    return not res.milli_cpu and not res.memory and not res.scalars


def forget_all() -> None:
    """Empty the memo (tests)."""
    _JOBS.clear()
