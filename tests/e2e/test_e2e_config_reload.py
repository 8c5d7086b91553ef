"""Scenario 9: ``--scheduler-conf`` replaced on disk takes effect; an invalid one is refused and the
last good one kept (CONF-3)."""

from __future__ import annotations

import os

from cluster import bound, create_node, replicaset_pods, wait_until

SPREAD = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
"""
PACK = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: binpack
    arguments:
      binpack.weight: 10
"""
BROKEN = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: no-such-plugin
"""


def replace_config(path, text: str) -> None:
    """Swap the file atomically, as the kubelet swaps a ConfigMap volume's ..data link."""
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_config_replaced_on_disk_is_used_and_a_bad_one_refused(e2e) -> None:
    api, ns = e2e.api, e2e.ns
    create_node(api, "node-a", cpu="8", memory="32Gi")
    create_node(api, "node-b", cpu="8", memory="32Gi")
    sched = e2e.scheduler(SPREAD)
    spread = replicaset_pods(api, ns, "spread", 2, cpu="1", memory="1Gi")
    placed = wait_until(lambda: (b := bound(api, ns)) and set(spread) <= set(b) and b, 30, "spread pods to bind")
    assert {placed[p] for p in spread} == {"node-a", "node-b"}, "least-requested scoring spreads two pods"

    replace_config(sched.conf, PACK)
    wait_until(lambda: sched.metric("tidesched_config_reloads_total", result="applied") == 1, 30, "the new config")
    packed = replicaset_pods(api, ns, "pack", 3, cpu="1", memory="1Gi")
    placed = wait_until(lambda: (b := bound(api, ns)) and set(packed) <= set(b) and b, 30, "packed pods to bind")
    assert len({placed[p] for p in packed}) == 1, f"binpack puts them together: {placed}"

    replace_config(sched.conf, BROKEN)
    wait_until(lambda: sched.metric("tidesched_config_reloads_total", result="rejected") == 1, 30, "the refusal")
    assert "no-such-plugin" in sched.text()
    more = replicaset_pods(api, ns, "after", 2, cpu="1", memory="1Gi")
    placed = wait_until(lambda: (b := bound(api, ns)) and set(more) <= set(b) and b, 30, "pods after the bad config")
    target = {placed[p] for p in packed}
    assert {placed[p] for p in more} == target, "the last good config (binpack) still decides"
    assert sched.metric("tidesched_config_reloads_total", result="applied") == 1
