"""The simulator's reclaim invariants (TIDE-2..5) watch gangreclaim's evictions as reclaim's."""

from __future__ import annotations

import pytest

from tidesched.scheduler import config_from_text
from tidesched.sim.clock import Clock
from tidesched.sim.invariants import InvariantChecker
from tidesched.sim.metrics import Accounting
from tidesched.sim.world import World


@pytest.mark.parametrize("actions, checked", [
    ("enqueue, allocate, reclaim", True), ("enqueue, allocate, gangreclaim", True), ("enqueue, allocate", False),
])
def test_reclaim_rules_are_checked_for_either_reclaim_action(actions: str, checked: bool) -> None:
    config = config_from_text(f'actions: "{actions}"\ntiers:\n- plugins:\n  - name: gang\n  - name: capacity-card\n')
    world = World(Clock())
    assert InvariantChecker(world, Accounting(world), config).check_reclaim is checked
