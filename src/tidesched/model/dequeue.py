"""A Queue's ``spec.dequeueStrategy`` (Volcano v1.15's Queue API): ``traverse`` or ``fifo``.

What the field means in Volcano's API: with ``traverse`` (the default), a job at the head of
the queue that cannot be scheduled is passed over and the jobs behind it are tried; with
``fifo`` nothing behind it would be. What Volcano v1.15.1's scheduler does with it: nothing.
The field is in its CRD (an enum, defaulted to ``traverse`` by the API server) and its Go types,
but no action or plugin reads it, so every queue is dequeued as ``traverse`` (the strategy's
scheduler side is an unmerged pull request, volcano-sh/volcano#4580). tidesched reads and
checks the field, decides exactly as v1.15.1 does, and says so where a user looks
(``explain``, docs/queues.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidesched.model.fields import parse_str
from tidesched.model.problems import ObjectError

TRAVERSE = "traverse"
FIFO = "fifo"
STRATEGIES = (FIFO, TRAVERSE)  # the CRD's enum, in its order
DEFAULT = TRAVERSE


def parse_dequeue_strategy(spec: Mapping[str, Any]) -> str:
    """``spec.dequeueStrategy``, ``traverse`` when absent or empty. Any other value is refused
    with the field named, as the v1.15 CRD's enum makes the API server refuse it."""
    value = parse_str(spec.get("dequeueStrategy"), "spec.dequeueStrategy", DEFAULT) or DEFAULT
    if value not in STRATEGIES:
        raise ObjectError("spec.dequeueStrategy", f"expected one of {', '.join(STRATEGIES)}, got {value!r}")
    return value


def honoured(strategy: str) -> bool:
    """Whether the scheduler acts as the strategy says: only ``traverse`` (see the module)."""
    return strategy == TRAVERSE
