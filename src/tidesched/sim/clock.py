"""Discrete-event simulated time (SIM-1, SIM-4).

A heap of ``(time, seq, event)``: events at the same instant come out in the order they were
scheduled (``seq`` is a global counter), so a run never depends on how Python orders equal
times or on anything but the input. Time is a float number of simulated seconds from the
start of the scenario; it only moves forward.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any


class Clock:
    """The simulator's event queue and current time."""

    __slots__ = ("_heap", "_seq", "now")

    def __init__(self, start: float = 0.0) -> None:
        self._heap: list[tuple[float, int, Any]] = []
        self._seq = 0
        self.now = float(start)

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, at: float, event: Any) -> None:
        """Queue ``event`` at time ``at``; a time in the past means "now" (never backwards)."""
        at = float(at)
        if at < self.now:
            at = self.now
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, event))

    def after(self, delay: float, event: Any) -> None:
        self.schedule(self.now + max(0.0, float(delay)), event)

    def peek_time(self) -> float | None:
        """Time of the next event, or None when nothing is queued."""
        return self._heap[0][0] if self._heap else None

    def pop(self) -> tuple[float, Any]:
        """The next event; the clock moves to its time."""
        at, _seq, event = heapq.heappop(self._heap)
        if at > self.now:
            self.now = at
        return at, event

    def pop_until(self, t: float) -> Iterator[tuple[float, Any]]:
        """Pop every event due at or before ``t`` in order, including events scheduled while
        iterating (a handler may schedule follow-ups at the same instant)."""
        while self._heap and self._heap[0][0] <= t:
            yield self.pop()

    def advance(self, t: float) -> None:
        """Move the clock to ``t`` (no earlier than now)."""
        if t > self.now:
            self.now = float(t)
