"""Fuzzing what the scheduler reads (REL-1, REL-2): valid clusters of every kind read, then
corrupted (see objects.py). The contract (contract.py): every object is accepted or reported
with file, object and field; nothing raises; a session over what was accepted over-commits no
node, queue capability or card quota. ``benchmarks/fuzz.py`` runs the same checks >= 10,000
times."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import contract
from objects import apply_sweep_case, clusters, corrupted_clusters, sweep_cases

# A few hundred examples per test; deadline off (a shared CI machine), no shrinking database.
FUZZ = settings(max_examples=200, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])


@FUZZ
@given(corrupted_clusters(), st.sampled_from(sorted(contract.CONFIGS)))
def test_snapshot_reports_every_bad_object_and_sessions_overcommit_nothing(case, config_name) -> None:
    objs, _what = case
    snap = contract.check_snapshot(objs)
    assert snap is not None
    contract.check_session(snap, config_name)


@settings(FUZZ, max_examples=150)
@given(clusters(), st.sampled_from(sorted(contract.CONFIGS)))
def test_valid_clusters_are_accepted_whole_and_sessions_overcommit_nothing(objs, config_name) -> None:
    snap = contract.check_snapshot(objs)
    assert snap is not None
    assert not snap.problems, [p.message for p in snap.problems]
    contract.check_session(snap, config_name)


@settings(FUZZ, max_examples=150)
@given(corrupted_clusters(workloads=False), st.sampled_from(sorted(contract.CONFIGS)))
def test_cache_of_run_and_simulate_drops_bad_objects_with_a_warning(case, config_name) -> None:
    objs, _what = case
    contract.check_cache(objs, config_name)


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()


@settings(FUZZ, max_examples=60)
@given(case=corrupted_clusters())
def test_schedule_command_exits_0_or_2_with_a_message(case, runner, tmp_path_factory) -> None:
    objs, _what = case
    contract.check_cli(objs, tmp_path_factory.mktemp("fuzz"), runner)


@settings(FUZZ, max_examples=25)
@given(corrupted_clusters())
def test_simulate_warns_about_bad_objects_and_keeps_its_invariants(case) -> None:
    objs, _what = case
    contract.check_simulate(objs)


_SWEEP = sweep_cases()


@settings(FUZZ, max_examples=200)
@given(st.sampled_from(_SWEEP), st.sampled_from(sorted(contract.CONFIGS)))
def test_single_mutations_of_a_cluster_that_uses_every_field(case, config_name) -> None:
    """A sample of the systematic sweep (every field of rich_cluster() deleted or replaced by
    every bad value; ``benchmarks/fuzz.py --sweep`` runs all of it)."""
    objs = apply_sweep_case(case)
    snap = contract.check_snapshot(objs)
    assert snap is not None
    contract.check_session(snap, config_name)
