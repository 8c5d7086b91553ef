"""The simulator runs under its own cyclic-GC thresholds and gives the caller's back."""

from __future__ import annotations

import gc

from tidesched.sim import bundled_example, run
from tidesched.sim.runner import SIM_GC_THRESHOLDS


def test_run_uses_its_gc_thresholds_and_restores_the_callers() -> None:
    before = gc.get_threshold()
    caller = (12_345, 7, 9)
    gc.set_threshold(*caller)
    seen: list[tuple[int, ...]] = []
    try:
        run(bundled_example(), progress=lambda _t, _end: seen.append(gc.get_threshold()))
        assert seen and set(seen) == {SIM_GC_THRESHOLDS}
        assert gc.get_threshold() == caller
    finally:
        gc.set_threshold(*before)
