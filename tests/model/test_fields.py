"""Field readers that are not covered through the object parsers."""

from __future__ import annotations

import pytest

from tidesched.model.durations import parse_go_duration
from tidesched.model.problems import ObjectError


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("3s", 3.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("500ms", 0.5), ("2m3.5s", 123.5),
        ("1h2m3s4ms5us6ns", 3723.004005006), ("5µs", 5e-6), (".5s", 0.5), ("-2m", -120.0),
        ("+1s", 1.0), ("0", 0.0), (" 30m ", 1800.0),
    ],
)
def test_go_durations_as_time_parse_duration_reads_them(text: str, seconds: float) -> None:
    assert parse_go_duration(text, "f") == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["", "3", "3 s", "3sec", "1d", "s", "1h-2m", "--1s", 3, None, ["3s"]])
def test_anything_else_is_an_error_naming_the_field(value: object) -> None:
    with pytest.raises(ObjectError, match="sla-waiting-time"):
        parse_go_duration(value, "sla-waiting-time")
