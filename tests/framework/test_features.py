"""``--feature-gates`` as vc-scheduler reads it (framework/features.py)."""

from __future__ import annotations

import pytest

from tidesched.framework.features import QUEUE_ADMISSION, FeatureGates, parse_feature_gates


def test_volcano_defaults_and_the_flag_format() -> None:
    assert not FeatureGates().enabled(QUEUE_ADMISSION) and FeatureGates().enabled("PodDisruptionBudgetsSupport")
    gates = parse_feature_gates(" SchedulingGatesQueueAdmission=true , PodDisruptionBudgetsSupport=false,,")
    assert gates.enabled(QUEUE_ADMISSION) and not gates.enabled("PodDisruptionBudgetsSupport")
    assert gates.flag() == "PodDisruptionBudgetsSupport=false,SchedulingGatesQueueAdmission=true"
    assert parse_feature_gates({QUEUE_ADMISSION: "t"}).enabled(QUEUE_ADMISSION)  # strconv.ParseBool
    assert parse_feature_gates(None) == FeatureGates() == parse_feature_gates("")


@pytest.mark.parametrize(("text", "message"), [
    ("SchedulingGatesQueueAdmission", "missing bool value for SchedulingGatesQueueAdmission"),
    ("SchedulingGatesQueueAdmission=yes", "invalid value of SchedulingGatesQueueAdmission=yes"),
])
def test_a_bad_item_is_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_feature_gates(text)


def test_what_tidesched_does_not_act_on_is_said() -> None:
    notes = parse_feature_gates("SchedulingGatesQueueAdmission=true,CSIStorage=true,DRAAdminAccess=true,"
                                "PriorityClass=true").notes()
    assert notes == [
        "feature gate CSIStorage=true: tidesched behaves as with the default (false)",
        "feature gate DRAAdminAccess=true: not a Volcano v1.15.1 gate tidesched knows; ignored",
    ]
