"""The simulator (RUN-1, SIM-1..4): a simulated world — clock, objects, controllers — that feeds
the scheduling core a snapshot every ``schedulePeriod`` and applies its decisions, with
per-step metrics, invariant checks and a deterministic JSON result.

    from tidesched.sim import simulate
    result = simulate("examples/tidal-day/scenario.yaml", seed=0)

Modules: :mod:`~tidesched.sim.clock` (discrete-event time), :mod:`~tidesched.sim.vocabulary`
(annotations, world kinds, ``ScenarioError``, durations), :mod:`~tidesched.sim.events`
(``Scenario``, ``TimedEvent``), :mod:`~tidesched.sim.scenario` (the scenario file format),
:mod:`~tidesched.sim.world` (objects, snapshots, applying decisions),
:mod:`~tidesched.sim.controllers` (Volcano Job, Deployment/ReplicaSet, PodGroup),
:mod:`~tidesched.sim.metrics`, :mod:`~tidesched.sim.invariants`, :mod:`~tidesched.sim.runner`;
``report`` and ``report_plots`` (HTML) and ``trace`` (Alibaba trace loader) are imported on
demand.
"""

from __future__ import annotations

from pathlib import Path

from tidesched.sim.runner import SimulationRun, result_json, run, simulate, summary_lines
from tidesched.sim.events import Scenario, TimedEvent, make_event
from tidesched.sim.vocabulary import ScenarioError, parse_duration
from tidesched.sim.scenario import load_scenario

EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"


def bundled_example() -> Path:
    """The scenario ``tidesched simulate`` runs without an argument: the tidal day shipped as
    package data (``tidesched/sim/examples/tidal-day``), so it is found from any install."""
    return EXAMPLES_DIR / "tidal-day" / "scenario.yaml"


__all__ = [
    "Scenario",
    "ScenarioError",
    "SimulationRun",
    "TimedEvent",
    "bundled_example",
    "load_scenario",
    "make_event",
    "parse_duration",
    "result_json",
    "run",
    "simulate",
    "summary_lines",
]
