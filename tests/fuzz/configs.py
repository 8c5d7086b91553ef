"""Hypothesis strategies for scheduler configs (Volcano YAML, framework/config.py): valid
documents with plugin and action arguments, then corrupted as data (fields deleted or
wrong-typed at any depth) or as text (cut short, characters inserted, keys duplicated)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from objects import _parent, _paths, nasty_values

DATA = Path(__file__).resolve().parents[1] / "data" / "config"

_EXTRA = [
    """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
    arguments: {predicate.GPUSharingEnable: false}
  - name: proportion
  - name: nodeorder
    arguments: {leastrequested.weight: 1, mostrequested.weight: 0, nodeaffinity.weight: 2, balancedresource.weight: 1}
  - name: binpack
    arguments: {binpack.weight: 10, binpack.cpu: 2, binpack.memory: 1, binpack.resources: nvidia.com/gpu, binpack.resources.nvidia.com/gpu: 5}
configurations:
- name: preempt
  arguments: {enableTopologyAwarePreemption: true}
- name: reclaim
  arguments: {enableGangSafeReclaim: true}
""",
    """
actions: "enqueue, allocate, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
    arguments: {overcommit-factor: 1.5}
  - name: predicates
  - name: capacity
    enableHierarchy: true
  - name: nodeorder
""",
]


def valid_config_texts() -> list[str]:
    texts = [p.read_text(encoding="utf-8") for p in sorted(DATA.glob("*.conf"))]
    return texts + _EXTRA


@st.composite
def corrupted_configs(draw: Any) -> str:
    """A config text that may or may not be valid."""
    text = draw(st.sampled_from(valid_config_texts()))
    how = draw(st.sampled_from(["data", "data", "data", "text"]))
    if how == "data":
        doc = yaml.safe_load(text)
        for _ in range(draw(st.integers(1, 3))):
            paths = _paths(doc)
            if not paths:
                break
            path = draw(st.sampled_from(paths))
            parent = _parent(doc, path)
            if draw(st.integers(0, 3)) == 0:
                del parent[path[-1]]
            else:
                parent[path[-1]] = copy.deepcopy(draw(nasty_values()))
        try:
            return yaml.safe_dump(doc, allow_unicode=True)
        except yaml.YAMLError:  # a value YAML cannot represent: use the original text
            return text
    op = draw(st.sampled_from(["cut", "insert", "duplicate", "indent"]))
    if op == "cut":
        return text[: draw(st.integers(0, len(text)))]
    lines = text.splitlines()
    i = draw(st.integers(0, max(len(lines) - 1, 0)))
    if op == "insert":
        junk = draw(st.one_of(st.sampled_from(["\t", ":", "- ", "{", "[", "&a", "*a", "!!python/object:os.system", "<<: *a", "%YAML 1.1", "\x00", "名前"]),
                              st.text(max_size=10)))
        lines.insert(i, junk)
    elif op == "duplicate" and lines:
        lines.insert(i, lines[i])
    elif lines:
        lines[i] = "  " + lines[i]
    return "\n".join(lines) + "\n"
