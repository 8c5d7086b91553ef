"""Runs every scenario under tests/scenarios (see scenario_harness for the format)."""

from __future__ import annotations

import pytest

from scenario_harness import check_expectations, iter_scenarios, run_scenario

SCENARIOS = list(iter_scenarios())


@pytest.mark.parametrize("doc", [d for _, d in SCENARIOS], ids=[n for n, _ in SCENARIOS])
def test_scenario(doc: dict) -> None:
    problems = check_expectations(doc, run_scenario(doc))
    assert not problems, "\n".join(problems)
