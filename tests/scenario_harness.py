"""Scenario tests: YAML documents with a scheduler config, plain manifests and the expected
decisions, run through the same code path as ``tidesched schedule``.

Format (one scenario per YAML document; a file may hold many)::

    name: allocate-gang-fits
    source: where the case comes from (e.g. the Volcano unit test it was ported from)
    scheduler_config: |            # Volcano scheduler config text (or a mapping)
      actions: "enqueue, allocate"
      tiers: ...
    now: "2024-01-01T00:10:00Z"    # the session's time (RFC 3339); default: the epoch
    feature_gates: "SchedulingGatesQueueAdmission=true"   # as --feature-gates (default: none set)
    ignored_provisioners: [...]    # vc-scheduler's --ignored-provisioners (docs/volumes.md)
    objects: [ ...manifests... ]   # pods without schedulerName get "volcano"
    expect:
      bound: {ns/pod: node}        # exact; {} when omitted
      pipelined: {ns/pod: node}    # exact; {} when omitted
      evicted: [ns/pod]            # exact (as a set); [] when omitted
      podgroup_phase: {ns/pg: Inqueue}   # only the listed PodGroups are checked
      events:                      # each must be present
        - {kind: Pod, name: p1, reason: FailedScheduling, message_contains: "Insufficient cpu"}
      absent_events: [...]         # each must NOT be present (same matching)
      podgroup_conditions: {ns/pg: [{type: Unschedulable, reason: GangTimeout}]}  # each present
      pod_condition_reasons: {ns/pod: GangTimeout}  # exact, when given
      claims: {ns/pod: {ns/claim: [driver/pool/device]}}  # DRA claim writes of bound pods,
                                   # exact when given ([]: the claim was allocated before)
      ungated: [ns/pod]            # pods whose queue-admission gate goes; exact, [] when omitted
      volume_bindings: {ns/pod: {node: n1, static: {pv: ns/claim}, provision: [ns/claim]}}  # exact, when given
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import yaml

from tidesched.framework.decisions import Decisions
from tidesched.framework.features import parse_feature_gates
from tidesched.model.loader import Manifest
from tidesched.model.objects import parse_time
from tidesched.scheduler import config_from_text, schedule_manifests

SCENARIO_DIR = Path(__file__).parent / "scenarios"


def iter_scenarios() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(SCENARIO_DIR.glob("*.yaml")):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if not doc:
                continue
            name = doc.get("name") or f"{path.stem}#{i}"
            yield f"{path.stem}::{name}", doc


def run_scenario(doc: dict[str, Any]) -> Decisions:
    cfg = doc["scheduler_config"]
    text = cfg if isinstance(cfg, str) else yaml.safe_dump(cfg)
    config = config_from_text(text, "<scenario config>")
    manifests = []
    for i, obj in enumerate(doc.get("objects") or []):
        if obj.get("kind") == "Pod":
            obj.setdefault("spec", {}).setdefault("schedulerName", "volcano")
        manifests.append(Manifest(f"objects[{i}]", obj))
    now = parse_time(doc["now"], "now") if doc.get("now") else 0.0
    features = parse_feature_gates(doc.get("feature_gates"))
    ignored = doc.get("ignored_provisioners") or ()
    _ssn, decisions = schedule_manifests(manifests, config, now=now, features=features, ignored_provisioners=ignored)
    return decisions


def _event_matches(expected: dict[str, Any], event: dict[str, str]) -> bool:
    for key in ("kind", "namespace", "name", "type", "reason", "message"):
        if key in expected and event.get(key) != expected[key]:
            return False
    contains = expected.get("message_contains")
    if contains is not None and contains not in event.get("message", ""):
        return False
    return True


def check_expectations(doc: dict[str, Any], decisions: Decisions) -> list[str]:
    expect = doc.get("expect") or {}
    out = decisions.to_json()
    problems: list[str] = []
    for key in ("bound", "pipelined"):
        want = expect.get(key) or {}
        if out[key] != want:
            problems.append(f"{key}: expected {want}, got {out[key]}")
    if sorted(decisions.ungated) != sorted(expect.get("ungated") or []):
        problems.append(f"ungated: expected {sorted(expect.get('ungated') or [])}, got {sorted(decisions.ungated)}")
    want_evicted = sorted(expect.get("evicted") or [])
    if sorted(out["evicted"]) != want_evicted:
        problems.append(f"evicted: expected {want_evicted}, got {sorted(out['evicted'])}")
    for pg, phase in (expect.get("podgroup_phase") or {}).items():
        if out["podgroups"].get(pg) != phase:
            problems.append(f"podgroup {pg}: expected phase {phase}, got {out['podgroups'].get(pg)}")
    for pg, conds in (expect.get("podgroup_conditions") or {}).items():
        have = decisions.podgroup_conditions.get(pg, [])
        for want_c in conds:
            if not any(all(h.get(k) == v for k, v in want_c.items()) for h in have):
                problems.append(f"podgroup {pg}: no condition like {want_c}; conditions were {have}")
    if "pod_condition_reasons" in expect and decisions.pod_condition_reasons != (expect["pod_condition_reasons"] or {}):
        problems.append(
            f"pod_condition_reasons: expected {expect['pod_condition_reasons']}, got {decisions.pod_condition_reasons}"
        )
    if "claims" in expect and out.get("claims", {}) != (expect["claims"] or {}):
        problems.append(f"claims: expected {expect['claims']}, got {out.get('claims', {})}")
    if "volume_bindings" in expect and out.get("volume_bindings", {}) != (expect["volume_bindings"] or {}):
        problems.append(f"volume_bindings: expected {expect['volume_bindings']}, got {out.get('volume_bindings', {})}")
    for ev in expect.get("events") or []:
        if not any(_event_matches(ev, e) for e in out["events"]):
            problems.append(f"missing event {ev}; events were: {out['events']}")
    for ev in expect.get("absent_events") or []:
        if any(_event_matches(ev, e) for e in out["events"]):
            problems.append(f"unexpected event matching {ev}")
    return problems
