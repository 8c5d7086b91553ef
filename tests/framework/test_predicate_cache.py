"""allocate's predicate error cache by role (framework/predicate_cache.py): its switches as the
config reads them, and what the cache remembers. Decisions are in tests/scenarios/predicate_cache.yaml."""

from types import SimpleNamespace

import numpy as np
import pytest

from tidesched.framework.config import ConfigError
from tidesched.framework.predicate_cache import PredicateErrorCache, check_arguments
from tidesched.scheduler import config_from_text

CONFIG = """actions: enqueue, allocate
tiers:
- plugins:
  - name: gang
configurations:
- name: allocate
  arguments: {ARGS}
"""


@pytest.mark.parametrize(
    ("args", "on"),
    [
        ("{}", False),  # tidesched's EXT-4 rule by default
        ("{predicateErrorCacheByRole: true}", True),
        ("{predicateErrorCacheByRole: 'true', predicateErrorCacheEnable: 'false'}", False),
        ("{predicateErrorCacheEnable: true}", False),
    ],
)
def test_switches(args: str, on: bool) -> None:
    cfg = config_from_text(CONFIG.replace("{ARGS}", args))
    assert check_arguments(cfg.action_arguments("allocate")) is on


def test_bad_switch_is_refused_when_the_config_loads() -> None:
    with pytest.raises(ConfigError) as info:
        config_from_text(CONFIG.replace("{ARGS}", "{predicateErrorCacheByRole: 2}"))
    assert "predicateErrorCacheByRole" in str(info.value) and "allocate" in str(info.value)


def _task(job: str, role: str) -> SimpleNamespace:
    return SimpleNamespace(job=job, role=role)


def test_failures_are_shared_by_job_and_role_only() -> None:
    cache = PredicateErrorCache(True)
    first = _task("ns/j", "w")
    assert cache.failed(first) is None
    cache.record(first, None, np.array([True, False, True]))
    assert cache.failed(_task("ns/j", "w")).tolist() == [False, True, False]
    assert cache.failed(_task("ns/j", "ps")) is None
    assert cache.failed(_task("ns/other", "w")) is None
    # a HyperNode's run: only the nodes tried count; failures add up
    cache.record(first, np.array([True, True, False]), np.array([False, True, False]))
    assert cache.failed(first).tolist() == [True, True, False]


def test_no_entry_without_a_failure_nor_without_a_role() -> None:
    cache = PredicateErrorCache(True)
    cache.record(_task("ns/j", "w"), None, np.array([True, True]))
    assert cache.failed(_task("ns/j", "w")) is None
    cache.record(_task("ns/j", ""), None, np.array([False, False]))
    assert cache.failed(_task("ns/j", "")) is None
    off = PredicateErrorCache(False)
    off.record(_task("ns/j", "w"), None, np.array([False, True]))
    assert off.failed(_task("ns/j", "w")) is None
