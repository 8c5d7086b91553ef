"""Fuzzing scheduler configs (CONF-1, CONF-3, REL-1): a corrupted Volcano config is refused with
a ConfigError naming the file (line and field where one is at fault), never a traceback; an
accepted one runs a session."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

import contract
from configs import corrupted_configs, valid_config_texts
from objects import clusters

FUZZ = settings(max_examples=200, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_the_valid_configs_are_valid() -> None:
    from tidesched.scheduler import config_from_text

    for text in valid_config_texts():
        config_from_text(text)


@FUZZ
@given(corrupted_configs(), clusters(workloads=False))
def test_corrupted_configs_are_refused_with_a_message_or_run(text, objs) -> None:
    contract.check_config(text, objs)
