"""Queue ``spec.dequeueStrategy`` (Volcano v1.15): read and checked; v1.15.1's scheduler acts on
neither value, so neither does tidesched (model/dequeue.py)."""

from __future__ import annotations

import pytest

from builders import queue
from tidesched.model.dequeue import FIFO, TRAVERSE, honoured
from tidesched.model.objects import parse_queue
from tidesched.model.problems import ObjectError


@pytest.mark.parametrize(("given", "read"), [(None, TRAVERSE), ("", TRAVERSE), ("traverse", TRAVERSE), ("fifo", FIFO)])
def test_dequeue_strategy_is_read_with_the_crd_default(given: str | None, read: str) -> None:
    spec = {"weight": 1} if given is None else {"weight": 1, "dequeueStrategy": given}
    assert parse_queue(queue("q", **spec)).dequeue_strategy == read


@pytest.mark.parametrize("bad", ["FIFO", "lifo", 3, ["fifo"]])
def test_a_value_outside_the_crd_enum_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ObjectError) as exc:
        parse_queue(queue("q", dequeueStrategy=bad))
    assert exc.value.field == "spec.dequeueStrategy"


def test_only_traverse_is_what_the_scheduler_does() -> None:
    assert honoured(TRAVERSE) and not honoured(FIFO)
