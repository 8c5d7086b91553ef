"""Arguments of the gang timeout (EXT-1) and cardprotect (EXT-2): validated at config load."""

from __future__ import annotations

import pytest

from tidesched.framework.arguments import ConfigError
from tidesched.model.durations import format_go
from tidesched.plugins.gang import parse_timeout
from tidesched.scheduler import config_from_text

CONFIG = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
    arguments:
      defaultGangTimeoutSeconds: {value}
"""


@pytest.mark.parametrize("value", ["0", "-5", '"600"', "true", ".inf"])
def test_bad_default_timeout_is_refused_at_load_naming_the_field(value: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_text(CONFIG.format(value=value), "sched.conf")
    text = str(err.value)
    assert "defaultGangTimeoutSeconds" in text and "sched.conf" in text


@pytest.mark.parametrize("value", ["600", "90.5"])
def test_good_default_timeout_loads(value: str) -> None:
    config_from_text(CONFIG.format(value=value), "sched.conf")


def test_annotation_values() -> None:
    assert parse_timeout("300") == (300.0, "")
    assert parse_timeout(" 1.5 ") == (1.5, "")
    for bad in ("0", "-1", "abc", "", "nan", "inf"):
        value, problem = parse_timeout(bad)
        assert value is None and "gang-timeout-seconds" in problem


def test_durations_read_like_go() -> None:
    assert [format_go(s) for s in (5, 90, 600, 3600, 7322)] == ["5s", "1m30s", "10m0s", "1h0m0s", "2h2m2s"]


# -- cardprotect arguments (EXT-2) ----------------------------------------------------------------

CARD_CONFIG = """
actions: "allocate"
tiers:
- plugins:
  - name: cardprotect
    arguments:
      protectedModels: {value}
"""


@pytest.mark.parametrize("value", ["NVIDIA-H200", "[]", '["*", NVIDIA-H200]', '["A|B"]', "[1]", '[""]'])
def test_bad_protected_models_are_refused_at_load(value: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_text(CARD_CONFIG.format(value=value), "sched.conf")
    assert "protectedModels" in str(err.value) and "cardprotect" in str(err.value)


@pytest.mark.parametrize("value", ['["*"]', "[NVIDIA-H200, NVIDIA-H200/mig-3g.71gb-mixed]"])
def test_good_protected_models_load(value: str) -> None:
    config_from_text(CARD_CONFIG.format(value=value), "sched.conf")


def test_cardprotect_without_arguments_is_refused() -> None:
    with pytest.raises(ConfigError, match="protectedModels"):
        config_from_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: cardprotect\n', "sched.conf")
