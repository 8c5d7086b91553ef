"""Volcano v1.15.1's ``volcano_*`` metrics (issue 32): each family has vc-scheduler's name, type,
label names, unit and buckets (facts read from v1.15.1's ``pkg/scheduler/metrics``), and a known
session gives true values (the queue plugins' accounting, gang's verdicts, drf's shares, the
dispatches and preemptions the session made)."""

from __future__ import annotations

import math
import re
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import node, pod, podgroup, queue
from cluster_helpers import bound_nodes, fake_api, http_get, make_runner, wait
from prometheus_client.parser import text_string_to_metric_families
from vgpu_builders import vgpu_config, vgpu_node, vgpu_pod

from tidesched.cluster.server import Metrics
from tidesched.cluster.volcano_metrics import BARE_COUNTERS, FAMILIES, VolcanoMetrics
from tidesched.cluster.volcano_session import read_session
from tidesched.scheduler import config_from_text, schedule_manifests

# name -> (type, label names, ExponentialBucketsRange(min, max, count) or None), as v1.15.1
# declares them: pkg/scheduler/metrics/{metrics,job,queue}.go (Subsystem "volcano").
GO_FACTS: dict[str, tuple[str, tuple[str, ...], tuple[float, float, int] | None]] = {
    "volcano_e2e_scheduling_latency_milliseconds": ("histogram", (), (1, 5000, 20)),
    "volcano_open_session_duration_milliseconds": ("histogram", (), (1, 5000, 20)),
    "volcano_e2e_job_scheduling_latency_milliseconds": ("histogram", (), (100, 120000, 30)),
    "volcano_e2e_job_scheduling_duration": ("gauge", ("job_name", "queue", "job_namespace"), None),
    "volcano_e2e_job_scheduling_start_time": ("gauge", ("job_name", "queue", "job_namespace"), None),
    "volcano_e2e_job_scheduling_last_time": ("gauge", ("job_name", "queue", "job_namespace"), None),
    "volcano_plugin_scheduling_latency_milliseconds": ("histogram", ("plugin", "OnSession"), (0.1, 100, 15)),
    "volcano_action_scheduling_latency_milliseconds": ("histogram", ("action",), (1, 2000, 20)),
    "volcano_task_scheduling_latency_milliseconds": ("histogram", ("stage",), (50, 60000, 30)),
    "volcano_scheduling_stage_duration_milliseconds": ("histogram", ("stage",), (0.1, 500, 20)),
    "volcano_schedule_attempts_total": ("counter", ("result",), None),
    "volcano_pod_preemption_victims": ("gauge", (), None),
    "volcano_total_preemption_attempts": ("counter", (), None),
    "volcano_unschedule_task_count": ("gauge", ("job_id",), None),
    "volcano_unschedule_job_count": ("gauge", (), None),
    "volcano_job_share": ("gauge", ("job_ns", "job_id"), None),
    "volcano_job_retry_counts": ("counter", ("job_id",), None),
    "volcano_queue_share": ("gauge", ("queue_name",), None),
    "volcano_queue_weight": ("gauge", ("queue_name",), None),
    "volcano_queue_overused": ("gauge", ("queue_name",), None),
    # pkg/scheduler/api/devices/nvidia/vgpu/metrics.go
    **{f"volcano_vgpu_device_{n}": ("gauge", ("devID", "NodeName"), None)
       for n in ("shared_number", "allocated_memory", "allocated_cores", "memory_limit")},
    **{f"volcano_vgpu_device_{n}_allocation_for_a_certain_pod": ("gauge", ("devID", "NodeName", "podName"), None)
       for n in ("memory", "core")},
    **{
        f"volcano_queue_{kind}_{unit}": ("gauge", ("queue_name", "resource") if unit == "scalar_resources" else ("queue_name",), None)
        for kind in ("allocated", "request", "deserved", "capacity", "real_capacity")
        for unit in ("milli_cpu", "memory_bytes", "scalar_resources")
    },
}
# Registered by v1.15.1 but never given a value there, so vc-scheduler's /metrics never shows them.
NEVER_SET = {"volcano_namespace_share", "volcano_namespace_weight", "volcano_namespace_weighted_share"}


def go_buckets(lo: float, hi: float, count: int) -> list[float]:
    """prometheus.ExponentialBucketsRange, up to the last digits Go's math.Pow rounds differently."""
    growth = math.pow(hi / lo, 1.0 / (count - 1))
    return [lo * math.pow(growth, i) for i in range(count)]


def test_families_are_volcanos() -> None:
    assert {f.name for f in FAMILIES} == set(GO_FACTS)
    assert not NEVER_SET & {f.name for f in FAMILIES}
    for f in FAMILIES:
        kind, labels, buckets = GO_FACTS[f.name]
        assert (f.kind, f.labels) == (kind, labels), f.name
        if buckets is None:
            assert not f.buckets, f.name
            continue
        assert [float(b) for b in f.buckets] == pytest.approx(go_buckets(*buckets), rel=1e-13), f.name
        assert float(f.buckets[0]) == buckets[0] and f.buckets[0] == f"{buckets[0]:g}"  # Go prints "1", not "1.0"


def _scrape(m: Metrics) -> dict[str, Any]:
    text = m.render().decode()
    return {f.name: f for f in text_string_to_metric_families(text)} | {"__text__": text}


def _types(text: str) -> dict[str, str]:
    return dict(re.findall(r"^# TYPE (volcano_\w+) (\w+)$", text, re.M))


def test_a_fresh_scheduler_exports_what_a_fresh_vc_scheduler_does() -> None:
    text = Metrics().render().decode()
    # Families without labels exist from the start (Go's client exports them at 0); the others
    # once something set them.
    assert _types(text) == {
        "volcano_e2e_scheduling_latency_milliseconds": "histogram",
        "volcano_open_session_duration_milliseconds": "histogram",
        "volcano_e2e_job_scheduling_latency_milliseconds": "histogram",
        "volcano_pod_preemption_victims": "gauge",
        "volcano_unschedule_job_count": "gauge",
        "volcano_total_preemption_attempts": "counter",
    }
    assert "\nvolcano_total_preemption_attempts 0.0\n" in text  # the bare name Volcano's dashboards query
    assert 'volcano_e2e_scheduling_latency_milliseconds_bucket{le="1"} 0.0' in text
    assert 'volcano_e2e_scheduling_latency_milliseconds_bucket{le="4999.999999999997"} 0.0' in text
    assert "volcano_e2e_scheduling_latency_milliseconds_created" not in text


NODES = [node("n1", cpu="8", memory="16Gi", nvidia_com__gpu="4"), node("n2", cpu="4", memory="8Gi")]
SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
T0 = 1_800_000_000  # the PodGroups' creation, seconds since the epoch


def _created(obj: dict[str, Any], at: float) -> dict[str, Any]:
    obj["metadata"]["creationTimestamp"] = f"{datetime.fromtimestamp(at, timezone.utc):%Y-%m-%dT%H:%M:%SZ}"
    return obj


def _session(objects: list[dict[str, Any]], config: str, dispatch_delay: float = 2.5) -> tuple[Metrics, Any]:
    ssn, decisions = schedule_manifests(objects, config_from_text(config), now=T0 + 10)
    m = Metrics()
    reading = read_session(ssn, decisions, [T0 + dispatch_delay] * len(ssn.bound_tasks))
    m.volcano.session(reading, open_seconds=0.004, e2e_seconds=0.25,
                      plugin_open=ssn.plugin_open_seconds, plugin_close=ssn.plugin_close_seconds)
    return m, decisions


PROPORTION = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def _gang(name: str, queue_name: str, n: int, created: float, **requests: str) -> list[dict[str, Any]]:
    pg = _created(podgroup(name, min_member=n, queue=queue_name, phase="Inqueue"), created)
    extra = {k.replace("__", "/").replace("_", "."): v for k, v in requests.items() if k not in ("cpu", "memory")}
    pods = [
        _created(pod(f"{name}-{i}", group=name, cpu=requests["cpu"], memory=requests["memory"], extra_requests=extra), created)
        for i in range(n)
    ]
    return [pg, *pods]


def test_a_known_session_with_proportion() -> None:
    objects = [
        *NODES,
        queue("qa", weight=2), queue("qc", weight=1),
        # a1 (2 × 1 CPU, 1Gi, 1 GPU) fits; b1 (3 × 4 CPU) finds room for 2 of 3 and stays whole.
        *_gang("a1", "qa", 2, T0, cpu="1", memory="1Gi", nvidia_com__gpu="1"),
        *_gang("b1", "qa", 3, T0 + 1, cpu="4", memory="1Gi"),
    ]
    m, decisions = _session(objects, PROPORTION)
    assert sorted(decisions.bound) == ["ns/a1-0", "ns/a1-1"]
    got = _scrape(m)

    def value(name: str, **labels: str) -> float:
        family = re.sub(r"_(total|count|sum|bucket)$", "", name)
        fam = got[family if family in got else name]
        hits = [s.value for s in fam.samples if s.name == name and s.labels == labels]
        assert len(hits) == 1, (name, labels, fam.samples)
        return hits[0]

    gi = 1024**3
    # qa: allocated = a1's two pods; request = a1 + b1; one queue with jobs deserves its whole
    # request where the cluster has it (cpu 14 asked, 12 there): proportion's water-filling.
    assert value("volcano_queue_allocated_milli_cpu", queue_name="qa") == 2000
    assert value("volcano_queue_allocated_memory_bytes", queue_name="qa") == 2 * gi
    assert value("volcano_queue_allocated_scalar_resources", queue_name="qa", resource="nvidia.com/gpu") == 2000
    assert value("volcano_queue_request_milli_cpu", queue_name="qa") == 14000
    assert value("volcano_queue_request_memory_bytes", queue_name="qa") == 5 * gi
    assert value("volcano_queue_deserved_milli_cpu", queue_name="qa") == 12000
    assert value("volcano_queue_deserved_memory_bytes", queue_name="qa") == 5 * gi
    assert value("volcano_queue_deserved_scalar_resources", queue_name="qa", resource="nvidia.com/gpu") == 2000
    assert value("volcano_queue_weight", queue_name="qa") == 2
    assert value("volcano_queue_share", queue_name="qa") == 1.0  # 2 of 2 deserved GPUs
    assert value("volcano_queue_overused", queue_name="qa") == 0  # cpu and memory below deserved
    # qc has no jobs: allocated and request 0 (its GPU series too, once shown), nothing else.
    assert value("volcano_queue_allocated_milli_cpu", queue_name="qc") == 0
    assert value("volcano_queue_request_memory_bytes", queue_name="qc") == 0
    assert not [s for f in ("volcano_queue_deserved_milli_cpu", "volcano_queue_share", "volcano_queue_weight",
                            "volcano_queue_overused") for s in got[f].samples if s.labels["queue_name"] == "qc"]
    assert "volcano_queue_capacity_milli_cpu" not in got  # proportion never sets it in Volcano
    # gang: b1 lacks 3 tasks, a1 none; one job left unscheduled, retried once.
    assert value("volcano_unschedule_task_count", job_id="b1") == 3
    assert value("volcano_unschedule_task_count", job_id="a1") == 0
    assert value("volcano_unschedule_job_count") == 1
    assert '\nvolcano_job_retry_counts{job_id="b1"} 1.0\n' in got["__text__"]  # bare name, as Go writes it
    assert "volcano_job_retry_counts{job_id=\"a1\"}" not in got["__text__"]
    # drf: a1 holds 2 of 4 GPUs, its dominant share.
    assert value("volcano_job_share", job_ns="ns", job_id="a1") == 0.5
    assert value("volcano_job_share", job_ns="ns", job_id="b1") == 0
    # a1's tasks were assumed 2.5 s after its PodGroup was made; b1 never was.
    assert value("volcano_e2e_job_scheduling_duration", job_name="a1", queue="qa", job_namespace="ns") == 2500
    assert value("volcano_e2e_job_scheduling_last_time", job_name="a1", queue="qa", job_namespace="ns") == T0 + 2
    assert value("volcano_e2e_job_scheduling_start_time", job_name="b1", queue="qa", job_namespace="ns") == T0 + 1
    assert value("volcano_e2e_job_scheduling_latency_milliseconds_count") == 2
    assert value("volcano_e2e_job_scheduling_latency_milliseconds_bucket", le="2400.6156197697555") == 0
    assert value("volcano_e2e_job_scheduling_latency_milliseconds_bucket", le="3065.4997934107178") == 2
    assert value("volcano_task_scheduling_latency_milliseconds_sum", stage="Assumed") == 5000
    # the session's timings, in milliseconds; every plugin's open and close.
    assert value("volcano_e2e_scheduling_latency_milliseconds_sum") == 250
    assert value("volcano_open_session_duration_milliseconds_sum") == 4
    for plugin in ("priority", "gang", "conformance", "drf", "predicates", "proportion", "nodeorder"):
        for phase in ("OnSessionOpen", "OnSessionClose"):
            assert value("volcano_plugin_scheduling_latency_milliseconds_count", plugin=plugin, OnSession=phase) == 1
    assert value("volcano_schedule_attempts_total", result="scheduled") == 2
    assert value("volcano_schedule_attempts_total", result="unschedulable") == 3
    # Every family is declared as Volcano declares it.
    for name, kind in _types(got["__text__"]).items():
        assert GO_FACTS[name][0] == kind, name


CAPACITY = PROPORTION.replace("- name: proportion", "- name: capacity")


def test_a_known_session_with_capacity_flat() -> None:
    objects = [
        *NODES,
        queue("qa", weight=1, deserved={"cpu": "4", "memory": "4Gi"}, capability={"cpu": "6"}),
        queue("qb", weight=1, capability={"cpu": "2", "memory": "2Gi"}),  # no jobs, a capability
        queue("qc", weight=1),  # no jobs, no capability
        *_gang("a1", "qa", 2, T0, cpu="1", memory="1Gi"),
    ]
    m, decisions = _session(objects, CAPACITY)
    assert sorted(decisions.bound) == ["ns/a1-0", "ns/a1-1"]
    got = _scrape(m)

    def series(name: str) -> dict[str, float]:
        return {s.labels["queue_name"]: s.value for s in got[name].samples} if name in got else {}

    assert series("volcano_queue_allocated_milli_cpu") == {"qa": 2000, "qb": 0, "qc": 0, "default": 0}
    assert series("volcano_queue_request_milli_cpu")["qa"] == 2000
    assert series("volcano_queue_deserved_milli_cpu")["qa"] == 4000
    assert series("volcano_queue_deserved_memory_bytes")["qa"] == 4 * 1024**3
    # capacity: qa (jobs; memory not limited: Volcano's MaxFloat64), qb (its spec); qc has none.
    assert series("volcano_queue_capacity_milli_cpu") == {"qa": 6000, "qb": 2000}
    assert series("volcano_queue_capacity_memory_bytes") == {"qa": 1.7976931348623157e308, "qb": 2 * 1024**3}
    # real capacity: the capability within the cluster (12 CPUs, 24Gi), for every queue.
    assert series("volcano_queue_real_capacity_milli_cpu") == {"qa": 6000, "qb": 2000, "qc": 12000, "default": 12000}
    assert series("volcano_queue_real_capacity_memory_bytes")["qa"] == 24 * 1024**3
    # share (max allocated/deserved: 2 of 4 CPUs) and overused only for queues with jobs.
    assert series("volcano_queue_share") == {"qa": 0.5}
    assert series("volcano_queue_overused") == {"qa": 0}
    assert "volcano_queue_weight" not in got


def test_preemption_counts_victims_per_preemptor_and_node() -> None:
    # Volcano's own case (preempt_test.go, "preempt enough tasks to fit large task of different
    # job"), as ported to tests/scenarios/preempt.yaml: two victims for one preemptor on n1.
    case = next(d for d in yaml.safe_load_all((SCENARIOS / "preempt.yaml").read_text())
                if d and d["name"] == "preempt-enough-tasks-for-a-large-task")
    for obj in case["objects"]:
        if obj["kind"] == "Pod":
            obj["spec"]["schedulerName"] = "volcano"  # as the scenario harness does
    m, decisions = _session(case["objects"], case["scheduler_config"])
    assert sorted(decisions.evicted) == case["expect"]["evicted"] == ["c1/preemptee1", "c1/preemptee2"]
    text = m.render().decode()
    assert "\nvolcano_total_preemption_attempts 1.0\n" in text
    assert "\nvolcano_pod_preemption_victims 2.0\n" in text


def test_stages_and_counters_between_sessions() -> None:
    v = VolcanoMetrics()
    v.watched(100.0, now=100.2)
    v.bound(100.0, 0.004, now=101.0)
    v.bind_failed()
    m = Metrics()
    m.volcano = v
    m.registry.register(v)
    got = _scrape(m)
    task = {(s.name, s.labels.get("stage"), s.labels.get("le")): s.value for s in got["volcano_task_scheduling_latency_milliseconds"].samples}
    assert task[("volcano_task_scheduling_latency_milliseconds_sum", "Watched", None)] == pytest.approx(200)
    assert task[("volcano_task_scheduling_latency_milliseconds_sum", "Bound", None)] == pytest.approx(1000)
    stage = {s.name: s.value for s in got["volcano_scheduling_stage_duration_milliseconds"].samples if s.labels.get("stage") == "Bind"}
    assert stage["volcano_scheduling_stage_duration_milliseconds_sum"] == pytest.approx(4)
    assert [s.value for s in got["volcano_schedule_attempts"].samples if s.labels == {"result": "error"}] == [1]


def test_bare_counters_are_the_only_families_written_by_hand() -> None:
    assert set(BARE_COUNTERS) == {n for n, (kind, _, _) in GO_FACTS.items() if kind == "counter" and not n.endswith("_total")}


def test_tidesched_run_serves_them_from_its_sessions_and_binds(tmp_path: Path) -> None:
    """``tidesched run`` against the fake API server: a pod is watched, assumed and bound, and
    /metrics shows each stage, the session's timings and the queue's allocation."""
    with fake_api() as api:
        api.create_many([node("n1"), _created(pod("a"), time.time() - 1)])
        r = make_runner(api, tmp_path, PROPORTION, enable_metrics=True, listen_address="127.0.0.1:0")
        t = threading.Thread(target=r.run, daemon=True)
        t.start()
        try:
            assert wait(lambda: bound_nodes(api)["ns/a"] == "n1", 10)
            port = r.servers[0].port
            assert wait(lambda: 'stage="Bound"' in http_get(port, "/metrics")[1], 10)
            assert wait(lambda: 'queue_name="default"} 1000.0' in http_get(port, "/metrics")[1], 10)
            text = http_get(port, "/metrics")[1]
        finally:
            r.stop()
            t.join(10)
    fams = {f.name: f for f in text_string_to_metric_families(text)}

    def count(name: str, **labels: str) -> float:
        return next(s.value for s in fams[name].samples if s.name == f"{name}_count" and s.labels == labels)

    for stage in ("Watched", "Assumed", "Bound"):
        assert count("volcano_task_scheduling_latency_milliseconds", stage=stage) == 1, stage
    assert count("volcano_scheduling_stage_duration_milliseconds", stage="Bind") == 1
    assert count("volcano_e2e_scheduling_latency_milliseconds") >= 1
    assert count("volcano_action_scheduling_latency_milliseconds", action="allocate") >= 1
    assert count("volcano_plugin_scheduling_latency_milliseconds", plugin="gang", OnSession="OnSessionOpen") >= 1
    assert 'volcano_queue_allocated_milli_cpu{queue_name="default"} 1000.0' in text
    assert "tidesched_pods_bound_total 1.0" in text  # tidesched's own family beside Volcano's


def test_vgpu_devices_as_volcanos_device_cache_shows_them() -> None:
    objects = [
        vgpu_node("g1", gpus=2, memory=16384),
        queue("default", weight=1),
        _created(podgroup("v", phase="Inqueue"), T0),
        vgpu_pod("v-0", group="v", memory=4096, cores=30),
    ]
    m, decisions = _session(objects, vgpu_config())
    assert decisions.bound == {"ns/v-0": "g1"}
    got = _scrape(m)

    def per_device(name: str) -> dict[str, float]:
        return {s.labels["devID"]: s.value for s in got[name].samples if s.labels["NodeName"] == "g1"}

    assert per_device("volcano_vgpu_device_memory_limit") == {"GPU-g1-0": 16384, "GPU-g1-1": 16384}
    held = per_device("volcano_vgpu_device_allocated_memory")
    assert sorted(held.values()) == [0, 4096]  # one device holds the pod, the other nothing
    (dev,) = [d for d, v in held.items() if v]
    assert per_device("volcano_vgpu_device_allocated_cores") == {dev: 30, **{d: 0 for d in held if d != dev}}
    assert per_device("volcano_vgpu_device_shared_number")[dev] == 1
    pods = got["volcano_vgpu_device_memory_allocation_for_a_certain_pod"].samples
    assert [(s.labels, s.value) for s in pods] == [({"devID": dev, "NodeName": "g1", "podName": "v-0"}, 4096)]
    cores = got["volcano_vgpu_device_core_allocation_for_a_certain_pod"].samples
    assert [s.value for s in cores] == [30]
