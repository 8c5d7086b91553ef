"""Memos of per-job sums that session-open code recomputes for every job of every session.

proportion, drf and overcommit each derive a few resource vectors per job when a session opens
(what an admitted job still reserves, its part above minResources, its dominant share). A long
simulation opens tens of thousands of sessions over the same few dozen running jobs, and those
jobs come in a handful of shapes. The values depend only on the amounts involved, so they are
memoised by those amounts (not by job: a job that changes simply misses), and the results are
exactly what a fresh computation gives. The per-queue sums stay per job, in job order, so float
totals do not change either.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from tidesched.model.resource import Resource

V = TypeVar("V")

# Distinct shapes seen in a 149-day trace number in the hundreds; the cap only bounds a run
# whose amounts never repeat.
MAX_ENTRIES = 50_000


def resource_key(res: Resource) -> tuple[Any, ...]:
    """Every amount of ``res`` (scalars in their order), hashable: equal keys, equal vectors."""
    return (res.milli_cpu, res.memory, res.max_task_num, *res.scalars.items())


class ShapeMemo(Generic[V]):
    """A bounded dict from amount keys to derived values (emptied when full). Values are
    shared by every later hit: callers must never change them (they only add them)."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: dict[Any, V] = {}

    def put(self, key: Any, value: V) -> V:
        if len(self.values) >= MAX_ENTRIES:
            self.values.clear()
        self.values[key] = value
        return value

    def __len__(self) -> int:
        return len(self.values)
