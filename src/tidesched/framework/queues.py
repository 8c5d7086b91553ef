"""Priority queues of jobs, queues and tasks as the actions pop them (Volcano's
``util.PriorityQueue``): on a session comparator, or on a sort key computed at push time."""

from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable, Iterable


class _Ordered:
    """Heap entry ordered by a session comparator (Volcano's PriorityQueue)."""

    __slots__ = ("item", "less")

    def __init__(self, item: Any, less: Callable[[Any, Any], bool]) -> None:
        self.item = item
        self.less = less

    def __lt__(self, other: "_Ordered") -> bool:
        return self.less(self.item, other.item)


class KeyedQueue:
    """PriorityQueue's interface and pop order for items ranked by a sort key computed when
    they are pushed (the key must not change while an item waits). Ties on the key pop in
    push order."""

    def __init__(self, key: Callable[[Any], Any], items: Iterable[Any] = ()) -> None:
        self.key = key
        self._seq = itertools.count()
        self.heap = [(key(i), next(self._seq), i) for i in items]
        heapq.heapify(self.heap)

    def push(self, item: Any) -> None:
        heapq.heappush(self.heap, (self.key(item), next(self._seq), item))

    def pop(self) -> Any:
        return heapq.heappop(self.heap)[2]

    def empty(self) -> bool:
        return not self.heap

    def __len__(self) -> int:
        return len(self.heap)


class PriorityQueue:
    def __init__(self, less: Callable[[Any, Any], bool], items: Iterable[Any] = ()) -> None:
        self.less = less
        self.heap = [_Ordered(i, less) for i in items]
        heapq.heapify(self.heap)

    def push(self, item: Any) -> None:
        heapq.heappush(self.heap, _Ordered(item, self.less))

    def copy(self) -> "PriorityQueue":
        """Another queue of the same items in the same heap order (Volcano's Clone)."""
        other = PriorityQueue.__new__(PriorityQueue)
        other.less = self.less
        other.heap = list(self.heap)
        return other

    def pop(self) -> Any:
        return heapq.heappop(self.heap).item

    def empty(self) -> bool:
        return not self.heap

    def __len__(self) -> int:
        return len(self.heap)
