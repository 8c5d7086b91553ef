"""Volcano's Grafana dashboards on ``tidesched run`` (issue 32): every ``volcano_*`` metric the
dashboards of Volcano v1.15.1's Helm chart query (``chart/templates/grafana.yaml``, read and parsed
here as PromQL) is on /metrics during a real run, with the labels the queries select and group by
and with values that match what was bound. tidesched's own dashboard (``deploy/``) keeps its
metrics too.

The chart comes from ``VOLCANO_115_ASSETS`` or ``../shared/volcano-1.15`` beside the repository:
skipped where neither has it, a failure under ``CI``. The dashboards' ``kube_*`` series come from
kube-state-metrics, which Volcano's chart deploys beside the scheduler; they are not a
scheduler's to export."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import promql_parser
import pytest

from cluster import GROUP_NAME, create_node, create_podgroup, create_pod, create_queue, bound, gpu_node, wait_until
from controlplane import REPO

CONFIG = """
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: capacity
  - name: nodeorder
  - name: binpack
"""


def grafana_yaml() -> Path:
    env = os.environ.get("VOLCANO_115_ASSETS")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "volcano-1.15")
    for d in candidates:
        path = d / "chart" / "templates" / "grafana.yaml"
        if path.is_file():
            return path
    missing = f"no chart/templates/grafana.yaml in {' or '.join(str(c) for c in candidates)} (Volcano v1.15.1's Helm chart)"
    if os.environ.get("CI"):
        pytest.fail(f"Volcano's dashboards required in CI: {missing}")
    pytest.skip(f"needs Volcano's dashboards: {missing}")


def dashboard_queries(path: Path) -> list[str]:
    """The PromQL of every panel target of every dashboard the chart ships. The file is a Helm
    template: each dashboard is one JSON document, the value of a ConfigMap key ``*.json: |-``."""
    lines = path.read_text().splitlines()
    exprs: list[str] = []
    for i, line in enumerate(lines):
        if not re.match(r"\s+[\w.-]+\.json: \|-$", line):
            continue
        indent = len(line) - len(line.lstrip()) + 1
        block = []
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) < indent:
                break
            block.append(nxt)
        exprs.extend(_targets(json.loads("\n".join(block))))
    return exprs


def _targets(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("expr"), str) and node["expr"].strip():
            yield node["expr"]
        for v in node.values():
            yield from _targets(v)
    elif isinstance(node, list):
        for v in node:
            yield from _targets(v)


def selected(expr: object, grouping: tuple[str, ...] = ()) -> Iterator[tuple[str, dict[str, str], tuple[str, ...]]]:
    """(metric name, label matchers, labels grouped by around it) for every series selector."""
    p = promql_parser
    if isinstance(expr, p.VectorSelector):
        yield expr.name or "", {m.name: m.value for m in expr.matchers.matchers}, grouping
    elif isinstance(expr, p.MatrixSelector):
        yield from selected(expr.vector_selector, grouping)
    elif isinstance(expr, p.Call):
        for arg in expr.args:
            yield from selected(arg, grouping)
    elif isinstance(expr, p.AggregateExpr):
        by = tuple(expr.modifier.labels) if expr.modifier is not None and expr.modifier.type == p.AggModifierType.By else ()
        yield from selected(expr.expr, grouping + by)
    elif isinstance(expr, p.BinaryExpr):
        yield from selected(expr.lhs, grouping)
        yield from selected(expr.rhs, grouping)
    elif isinstance(expr, (p.ParenExpr, p.UnaryExpr, p.SubqueryExpr)):
        yield from selected(expr.expr, grouping)


def scraped(text: str) -> dict[str, list[dict[str, str]]]:
    """Sample name -> the label sets of its series, from the text format."""
    out: dict[str, list[dict[str, str]]] = {}
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? \S+$", line)
        if m:
            out.setdefault(m[1], []).append(dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m[2] or "")))
    return out


def value(series: dict[str, list[dict[str, str]]], text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$", line)
        if m and m[1] == name and dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m[2] or "")) == labels:
            return float(m[3])
    raise AssertionError(f"no {name}{labels} on /metrics; series of {name}: {series.get(name)}")


def test_volcano_dashboards_find_their_metrics(e2e) -> None:
    queries = dashboard_queries(grafana_yaml())
    wanted = [s for q in queries for s in selected(promql_parser.parse(q)) if s[0].startswith("volcano_")]
    assert len(queries) > 50 and len({w[0] for w in wanted}) > 20, "the dashboards were not read whole"

    api = e2e.api
    ns = e2e.namespace("vmetrics")
    start = time.time()
    gpu_node(api, "gpu-1", cards=8)
    create_node(api, "cpu-1", cpu="8", memory="32Gi")
    create_queue(api, "team-a", capability={"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"},
                 deserved={"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "4"})
    sched = e2e.scheduler(CONFIG)
    create_podgroup(api, ns, "train", min_member=2, queue="team-a")
    for i in range(2):
        create_pod(api, ns, f"train-{i}", annotations={GROUP_NAME: "train"}, cpu="1", memory="1Gi", gpus=1)
    create_podgroup(api, ns, "big", min_member=2)  # 2 × 150 CPUs: one would fit, the gang never does
    for i in range(2):
        create_pod(api, ns, f"big-{i}", annotations={GROUP_NAME: "big"}, cpu="150", memory="1Gi")
    wait_until(lambda: {"train-0", "train-1"} <= set(bound(api, ns)), 30, "the gang of two to bind")

    def scrape() -> str:
        return sched.get("/metrics").text

    wait_until(lambda: re.search(r'volcano_task_scheduling_latency_milliseconds_count\{stage="Bound"\} 2\.0', scrape()),
               30, "both binds on /metrics")
    wait_until(lambda: 'volcano_unschedule_task_count{job_id="big"} 2.0' in scrape(), 30, "gang's verdict on big")
    text = scrape()
    series = scraped(text)

    missing = []
    for name, matchers, grouping in wanted:
        if name not in series:
            missing.append(name)
            continue
        have = {k for labels in series[name] for k in labels}
        lacking = (set(matchers) | set(grouping)) - have
        assert not lacking, f"{name}: the dashboards select or group by {sorted(lacking)}, not on /metrics"
        for k, v in matchers.items():  # a literal value a panel selects (not a $variable)
            if "$" not in v:
                assert any(s.get(k) == v for s in series[name]), f"{name}: no series with {k}={v!r}"
    assert not missing, f"queried by Volcano's dashboards, not on /metrics: {sorted(set(missing))}"

    # What the dashboards show is what happened: the gang's 2 × (1 CPU, 1Gi, 1 GPU) in team-a.
    assert value(series, text, "volcano_queue_allocated_milli_cpu", queue_name="team-a") == 2000
    assert value(series, text, "volcano_queue_allocated_memory_bytes", queue_name="team-a") == 2 * 1024**3
    assert value(series, text, "volcano_queue_allocated_scalar_resources", queue_name="team-a", resource="nvidia.com/gpu") == 2000
    assert value(series, text, "volcano_queue_deserved_milli_cpu", queue_name="team-a") == 4000
    assert value(series, text, "volcano_queue_capacity_scalar_resources", queue_name="team-a", resource="nvidia.com/gpu") == 4000
    assert value(series, text, "volcano_queue_real_capacity_milli_cpu", queue_name="team-a") == 16000
    assert value(series, text, "volcano_queue_share", queue_name="team-a") == 0.5  # 2 of 4 CPUs, 2 of 4 GPUs
    assert value(series, text, "volcano_queue_request_milli_cpu", queue_name="default") == 300000  # big's two pods
    took = value(series, text, "volcano_e2e_job_scheduling_duration", job_name="train", queue="team-a", job_namespace=ns)
    # From the PodGroup's creationTimestamp, which the API server keeps in whole seconds: up to 1 s early.
    assert 0 < took < (time.time() - start) * 1000 + 1000
    assert value(series, text, "volcano_e2e_job_scheduling_latency_milliseconds_count") == 2
    assert value(series, text, "volcano_e2e_scheduling_latency_milliseconds_count") >= 1
    assert value(series, text, "volcano_action_scheduling_latency_milliseconds_count", action="allocate") >= 1
    assert value(series, text, "volcano_plugin_scheduling_latency_milliseconds_count",
                 OnSession="OnSessionOpen", plugin="capacity") >= 1
    assert value(series, text, "volcano_job_share", job_ns=ns, job_id="train") > 0
    assert value(series, text, "volcano_unschedule_job_count") == 1
    assert value(series, text, "volcano_total_preemption_attempts") == 0
    assert value(series, text, "volcano_pod_preemption_victims") == 0

    # tidesched's own dashboard: every family it queries is declared on the same /metrics.
    board = json.loads((REPO / "deploy" / "grafana-dashboard.json").read_text())
    ours = {re.sub(r"_(total|bucket|sum|count)$", "", n) for q in _targets(board) for n in re.findall(r"tidesched_\w+", q)}
    declared = set(re.findall(r"^# TYPE (\w+) ", text, re.M))
    declared |= {n.removesuffix("_total") for n in declared}
    assert ours and ours <= declared, ours - declared
