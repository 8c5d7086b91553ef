"""Volcano v1.15.1's scheduler metrics (``volcano_*``) beside tidesched's own (issue 32, OBS-1).

A team that switches from vc-scheduler keeps its Prometheus queries, its alerts and the Grafana
dashboards of Volcano's Helm chart: each family in :data:`FAMILIES` has the name, type, label
names, unit (milliseconds; milli-CPU, bytes and milli-units of other resources) and histogram
buckets that vc-scheduler v1.15.1 exports (``pkg/scheduler/metrics``), and a series exists
when vc-scheduler's would (a family without labels from the start, one with labels once
something set it). The values come from what the scheduling loop knows anyway: the session's
timings, its plugins' accounting (``volcano_session``), its dispatches and the binder's answers.
``docs/operations.md`` lists where a value means something else than in Volcano, and why.

Two of Volcano's counters have no ``_total`` suffix, which the Python client adds to every
counter it writes; :meth:`VolcanoMetrics.render_bare_counters` writes those two as Go's client
does. Everything else is produced by a collector on the scheduler's registry at scrape time.
"""

from __future__ import annotations

import bisect
import math
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from tidesched.cluster.volcano_session import QUEUE_RESOURCE_KINDS, JobRef, SessionReading
from tidesched.model.resource import Resource

GAUGE, COUNTER, HISTOGRAM = "gauge", "counter", "histogram"

# Bucket upper bounds as vc-scheduler v1.15.1 writes them in ``le``: Go's
# prometheus.ExponentialBucketsRange(min, max, count), whose math.Pow rounds the last digits
# differently from C's, so the bounds are kept as Go printed them (read from a running
# vc-scheduler v1.15.1's /metrics). Identical text keeps series from both schedulers one series.
_SESSION_MS = (  # ExponentialBucketsRange(1, 5000, 20)
    "1", "1.5656065579430964", "2.45112389427443", "3.8374956432070686", "6.008008345083047",
    "9.406177265238869", "14.726372811633231", "23.055705848607904", "36.09616427458753",
    "56.51239150488555", "88.47617074509654", "138.51887314021627", "216.86605618721043",
    "339.5269197619527", "531.5655721775325", "832.2225457779193", "1302.933075338009",
    "2039.8805673101535", "3193.65039360146", "4999.999999999997",
)
_JOB_MS = (  # ExponentialBucketsRange(100, 120000, 30)
    "100", "127.6964028795552", "163.06371308377672", "208.22649600982146", "265.8977452466826",
    "339.54185601785707", "433.582736405282", "553.6695578962887", "707.0161092726969",
    "902.8341393202192", "1152.886719880512", "1472.1948705635073", "1879.9398930869224",
    "2400.6156197697555", "3065.4997934107178", "3914.532966465682", "4998.717787711021",
    "6383.182805007454", "8151.09483122081", "10408.654894770323", "13291.477888768455",
    "16972.739153488765", "21673.57736913502", "27676.378675702752", "35341.74001619669",
    "45130.13071572749", "57629.55353882527", "73590.86686462727", "93972.88983401153",
    "119999.99999999991",
)
_PLUGIN_MS = (  # ExponentialBucketsRange(0.1, 100, 15)
    "0.1", "0.16378937069540644", "0.2682695795279726", "0.4393970560760792", "0.7196856730011522",
    "1.1787686347935875", "1.9306977288832508", "3.1622776601683804", "5.1794746792312125",
    "8.483428982440724", "13.894954943731381", "22.758459260747898", "37.27593720314942",
    "61.054022965853314", "100.00000000000006",
)
_ACTION_MS = (  # ExponentialBucketsRange(1, 2000, 20)
    "1", "1.4918955578206108", "2.2257523554448713", "3.3205900518969647", "4.953973547768393",
    "7.390811129476477", "11.026318292757086", "16.45011528008044", "24.541853911988955",
    "36.6138828319787", "54.624089151593346", "81.49343595525913", "121.57969509318953",
    "181.38420703071378", "270.60629272793585", "403.71632603911144", "602.3025934374076",
    "898.5725636131018", "1340.5764160338647", "1999.9999999999977",
)
_TASK_MS = (  # ExponentialBucketsRange(50, 60000, 30)
    "50", "63.8482014397776", "81.53185654188836", "104.11324800491073", "132.9488726233413",
    "169.77092800892854", "216.791368202641", "276.83477894814433", "353.50805463634845",
    "451.4170696601096", "576.443359940256", "736.0974352817536", "939.9699465434612",
    "1200.3078098848778", "1532.7498967053589", "1957.266483232841", "2499.3588938555104",
    "3191.591402503727", "4075.547415610405", "5204.327447385162", "6645.738944384228",
    "8486.369576744382", "10836.78868456751", "13838.189337851376", "17670.870008098344",
    "22565.065357863747", "28814.776769412634", "36795.433432313635", "46986.44491700576",
    "59999.999999999956",
)
_STAGE_MS = (  # ExponentialBucketsRange(0.1, 500, 20)
    "0.1", "0.15656065579430967", "0.245112389427443", "0.3837495643207069", "0.6008008345083047",
    "0.9406177265238869", "1.4726372811633233", "2.3055705848607904", "3.609616427458753",
    "5.651239150488555", "8.847617074509655", "13.851887314021628", "21.686605618721046",
    "33.95269197619527", "53.15655721775326", "83.22225457779194", "130.2933075338009",
    "203.98805673101538", "319.36503936014606", "499.9999999999998",
)


@dataclass(frozen=True)
class Family:
    name: str
    kind: str
    labels: tuple[str, ...]
    help: str
    buckets: tuple[str, ...] = ()


_JOB_LABELS = ("job_name", "queue", "job_namespace")
_DEVICE_LABELS = ("devID", "NodeName")
_QUEUE_UNITS = (("milli_cpu", "milli-CPU"), ("memory_bytes", "bytes"), ("scalar_resources", "milli-units"))


def _queue_families() -> list[Family]:
    out = []
    for kind in QUEUE_RESOURCE_KINDS:
        words = kind.replace("_", " ")
        for suffix, unit in _QUEUE_UNITS:
            labels = ("queue_name", "resource") if suffix == "scalar_resources" else ("queue_name",)
            out.append(Family(f"volcano_queue_{kind}_{suffix}", GAUGE, labels,
                              f"A queue's {words} resources in {unit}, per its queue plugin."))
    return out


FAMILIES: tuple[Family, ...] = (
    Family("volcano_e2e_scheduling_latency_milliseconds", HISTOGRAM, (),
           "One scheduling session, opened to closed, in milliseconds.", _SESSION_MS),
    Family("volcano_open_session_duration_milliseconds", HISTOGRAM, (),
           "Opening a session (cluster snapshot and plugins' open) in milliseconds.", _SESSION_MS),
    Family("volcano_e2e_job_scheduling_latency_milliseconds", HISTOGRAM, (),
           "PodGroup creation to one of its tasks assumed on a node, in milliseconds.", _JOB_MS),
    Family("volcano_e2e_job_scheduling_duration", GAUGE, _JOB_LABELS,
           "PodGroup creation to its latest task assumed on a node, in milliseconds."),
    Family("volcano_e2e_job_scheduling_start_time", GAUGE, _JOB_LABELS,
           "PodGroup creation time, Unix seconds."),
    Family("volcano_e2e_job_scheduling_last_time", GAUGE, _JOB_LABELS,
           "When a task of the PodGroup was last assumed on a node, Unix seconds."),
    Family("volcano_plugin_scheduling_latency_milliseconds", HISTOGRAM, ("plugin", "OnSession"),
           "A plugin's session open or close, in milliseconds.", _PLUGIN_MS),
    Family("volcano_action_scheduling_latency_milliseconds", HISTOGRAM, ("action",),
           "One action of a session, in milliseconds.", _ACTION_MS),
    Family("volcano_task_scheduling_latency_milliseconds", HISTOGRAM, ("stage",),
           "Pod creation to a scheduling stage (Watched, Assumed, Bound), in milliseconds.", _TASK_MS),
    Family("volcano_scheduling_stage_duration_milliseconds", HISTOGRAM, ("stage",),
           "One per-task scheduling stage (Bind), in milliseconds.", _STAGE_MS),
    Family("volcano_schedule_attempts_total", COUNTER, ("result",),
           "Pods a session tried to place, by result: scheduled, unschedulable, error (bind failed)."),
    Family("volcano_pod_preemption_victims", GAUGE, (),
           "Pods the latest preemption evicted (one preemptor on one node)."),
    Family("volcano_total_preemption_attempts", COUNTER, (),
           "Preemptions that evicted pods (one preemptor on one node), since start."),
    Family("volcano_unschedule_task_count", GAUGE, ("job_id",),
           "Tasks a PodGroup lacks to be ready (gang), per PodGroup name."),
    Family("volcano_unschedule_job_count", GAUGE, (),
           "PodGroups the latest session left not ready (gang)."),
    Family("volcano_job_share", GAUGE, ("job_ns", "job_id"),
           "A PodGroup's dominant resource share (drf)."),
    Family("volcano_job_retry_counts", COUNTER, ("job_id",),
           "Sessions that left the PodGroup not ready (gang), per PodGroup name."),
    *_queue_families(),
    Family("volcano_queue_share", GAUGE, ("queue_name",), "A queue's share, per its queue plugin."),
    Family("volcano_queue_weight", GAUGE, ("queue_name",), "A queue's weight (proportion)."),
    Family("volcano_queue_overused", GAUGE, ("queue_name",), "1 when the queue is overused, per its queue plugin."),
    # Volcano's vGPU device cache (pkg/scheduler/api/devices/nvidia/vgpu/metrics.go)
    Family("volcano_vgpu_device_shared_number", GAUGE, _DEVICE_LABELS, "Pods holding a share of the vGPU device."),
    Family("volcano_vgpu_device_allocated_memory", GAUGE, _DEVICE_LABELS, "vGPU device memory the pods hold, MiB."),
    Family("volcano_vgpu_device_allocated_cores", GAUGE, _DEVICE_LABELS,
           "vGPU device compute the pods hold, percent of the device."),
    Family("volcano_vgpu_device_memory_limit", GAUGE, _DEVICE_LABELS, "The vGPU device's memory, MiB."),
    Family("volcano_vgpu_device_memory_allocation_for_a_certain_pod", GAUGE, (*_DEVICE_LABELS, "podName"),
           "vGPU device memory one pod holds, MiB."),
    Family("volcano_vgpu_device_core_allocation_for_a_certain_pod", GAUGE, (*_DEVICE_LABELS, "podName"),
           "vGPU device compute one pod holds, percent of the device."),
)
BY_NAME = {f.name: f for f in FAMILIES}
# Counters Volcano names without the _total suffix (written by render_bare_counters).
BARE_COUNTERS = ("volcano_job_retry_counts", "volcano_total_preemption_attempts")

_ALWAYS = (  # families without labels: exported from the start, as Go's client does
    "volcano_e2e_scheduling_latency_milliseconds",
    "volcano_open_session_duration_milliseconds",
    "volcano_e2e_job_scheduling_latency_milliseconds",
)
_OPEN, _CLOSE = "OnSessionOpen", "OnSessionClose"
WATCHED, ASSUMED, BOUND = "Watched", "Assumed", "Bound"
BIND = "Bind"


class _Histogram:
    """One histogram series: counts per bucket (not yet cumulative), sum, count."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: list[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1  # upper bounds are inclusive
        self.sum += value

    def cumulative(self, les: tuple[str, ...]) -> list[tuple[str, float]]:
        out, total = [], 0
        for le, n in zip((*les, "+Inf"), self.counts):
            total += n
            out.append((le, float(total)))
        return out


class VolcanoMetrics:
    """The state behind the ``volcano_*`` families. The scheduling loop, the binder's thread and
    scrapes share it, under one lock (each update is a handful of dict writes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bounds = {f.name: [float(b) for b in f.buckets] for f in FAMILIES if f.kind == HISTOGRAM}
        self._histograms: dict[str, dict[tuple[str, ...], _Histogram]] = {name: {} for name in self._bounds}
        for name in _ALWAYS:
            self._histogram(name, ())
        # Gauges restated by every session: family -> labels -> value.
        self._gauges: dict[str, dict[tuple[str, ...], float]] = {}
        self._known_scalars: dict[str, set[str]] = {}  # queue -> every scalar it ever showed
        self._job_durations: dict[str, tuple[tuple[str, ...], float, float]] = {}  # key -> labels, ms, last
        self._retries: dict[str, int] = {}
        self._attempts: dict[str, int] = {}
        self._preemption_attempts = 0
        self._preemption_victims = 0
        self._unscheduled_jobs = 0

    def _histogram(self, name: str, labels: tuple[str, ...]) -> _Histogram:
        series = self._histograms[name]
        h = series.get(labels)
        if h is None:
            h = series[labels] = _Histogram(self._bounds[name])
        return h

    # -- observations -------------------------------------------------------------------

    def action(self, name: str, seconds: float) -> None:
        with self._lock:
            self._histogram("volcano_action_scheduling_latency_milliseconds", (name,)).observe(seconds * 1000)

    def watched(self, pod_creation: float, now: float | None = None) -> None:
        """An unbound pod of ours entered the scheduler's cache."""
        self._task_stage(WATCHED, pod_creation, now)

    def bound(self, pod_creation: float | None, bind_seconds: float, now: float | None = None) -> None:
        """The API server accepted a binding (``bind_seconds``: the call, retries included)."""
        with self._lock:
            self._histogram("volcano_scheduling_stage_duration_milliseconds", (BIND,)).observe(bind_seconds * 1000)
        if pod_creation is not None:
            self._task_stage(BOUND, pod_creation, now)

    def bind_failed(self) -> None:
        with self._lock:
            self._attempts["error"] = self._attempts.get("error", 0) + 1

    def _task_stage(self, stage: str, pod_creation: float, now: float | None) -> None:
        ms = max(0.0, (time.time() if now is None else now) - pod_creation) * 1000
        with self._lock:
            self._histogram("volcano_task_scheduling_latency_milliseconds", (stage,)).observe(ms)

    def session(
        self,
        reading: SessionReading,
        *,
        open_seconds: float,
        e2e_seconds: float,
        plugin_open: dict[str, float],
        plugin_close: dict[str, float],
    ) -> None:
        """Everything one session says (timings, queues, jobs, dispatches, preemptions)."""
        with self._lock:
            self._histogram("volcano_e2e_scheduling_latency_milliseconds", ()).observe(e2e_seconds * 1000)
            self._histogram("volcano_open_session_duration_milliseconds", ()).observe(open_seconds * 1000)
            for phase, timings in ((_OPEN, plugin_open), (_CLOSE, plugin_close)):
                for plugin, seconds in timings.items():
                    self._histogram("volcano_plugin_scheduling_latency_milliseconds", (plugin, phase)).observe(
                        seconds * 1000
                    )
            tasks = self._histogram("volcano_task_scheduling_latency_milliseconds", (ASSUMED,)) if reading.assumed else None
            e2e_job = self._histogram("volcano_e2e_job_scheduling_latency_milliseconds", ())
            for a in reading.assumed:
                assert tasks is not None
                tasks.observe(max(0.0, a.at - a.pod_creation) * 1000)
                ms = max(0.0, a.at - a.job.creation) * 1000
                e2e_job.observe(ms)
                self._job_durations[a.job.key] = (_job_labels(a.job), ms, float(int(a.at)))
            self._restate(reading)
            for n in reading.preemption_victims:
                self._preemption_attempts += 1
                self._preemption_victims = n
            for result, n in (("scheduled", reading.scheduled), ("unschedulable", reading.unschedulable)):
                if n:
                    self._attempts[result] = self._attempts.get(result, 0) + n

    def _restate(self, reading: SessionReading) -> None:
        """The gauges each session sets anew, and the per-job state of jobs that are gone."""
        gauges: dict[str, dict[tuple[str, ...], float]] = {}
        for queue in list(self._known_scalars):
            if queue not in reading.queues:
                del self._known_scalars[queue]
        for kind, amounts in reading.queue_resources.items():
            for queue, res in amounts.items():
                self._known_scalars.setdefault(queue, set()).update(res.scalars)
        for kind, amounts in reading.queue_resources.items():
            for queue, res in amounts.items():
                _queue_resource(gauges, kind, queue, res, self._known_scalars[queue])
        for name, values in (("share", reading.queue_share), ("weight", reading.queue_weight),
                             ("overused", reading.queue_overused)):
            gauges[f"volcano_queue_{name}"] = {(q,): v for q, v in values.items()}
        gauges["volcano_e2e_job_scheduling_start_time"] = {_job_labels(j): float(int(j.creation)) for j in reading.jobs}
        present = {j.key for j in reading.jobs}
        names = {j.name for j in reading.jobs}
        for key in [k for k in self._job_durations if k not in present]:
            del self._job_durations[key]
        for name in [n for n in self._retries if n not in names]:
            del self._retries[name]
        if reading.unscheduled_tasks is not None:
            gauges["volcano_unschedule_task_count"] = {(n,): float(c) for n, c in reading.unscheduled_tasks.items()}
            self._unscheduled_jobs = reading.unscheduled_jobs
            for name in reading.retried:
                self._retries[name] = self._retries.get(name, 0) + 1
        if reading.job_share is not None:
            gauges["volcano_job_share"] = {(ns, n): s for (ns, n), s in reading.job_share.items()}
        for family, field_name in (("shared_number", "pods"), ("allocated_memory", "memory"),
                                   ("allocated_cores", "cores"), ("memory_limit", "memory_limit")):
            gauges[f"volcano_vgpu_device_{family}"] = {
                (d.uuid, d.node): float(getattr(d, field_name)) for d in reading.devices
            }
        gauges["volcano_vgpu_device_memory_allocation_for_a_certain_pod"] = {
            key: float(mem) for key, (mem, _) in reading.pod_devices.items()
        }
        gauges["volcano_vgpu_device_core_allocation_for_a_certain_pod"] = {
            key: float(cores) for key, (_, cores) in reading.pod_devices.items()
        }
        self._gauges = gauges

    # -- exposition ---------------------------------------------------------------------

    def collect(self) -> Iterable[Metric]:
        """Every family but the bare counters, sorted by name as Go's registry writes them."""
        out: list[Metric] = []
        with self._lock:
            gauges = dict(self._gauges)
            gauges["volcano_e2e_job_scheduling_duration"] = {l: ms for l, ms, _ in self._job_durations.values()}
            gauges["volcano_e2e_job_scheduling_last_time"] = {l: t for l, _, t in self._job_durations.values()}
            gauges["volcano_pod_preemption_victims"] = {(): float(self._preemption_victims)}
            gauges["volcano_unschedule_job_count"] = {(): float(self._unscheduled_jobs)}
            for f in sorted(FAMILIES, key=lambda f: f.name):
                if f.kind == HISTOGRAM:
                    series = self._histograms[f.name]
                    if series:
                        fam = HistogramMetricFamily(f.name, f.help, labels=f.labels)
                        for labels, h in sorted(series.items()):
                            fam.add_metric(list(labels), h.cumulative(f.buckets), h.sum)
                        out.append(fam)
                elif f.kind == GAUGE and gauges.get(f.name):
                    fam = GaugeMetricFamily(f.name, f.help, labels=f.labels)
                    for labels, v in sorted(gauges[f.name].items()):
                        fam.add_metric(list(labels), v)
                    out.append(fam)
                elif f.name == "volcano_schedule_attempts_total" and self._attempts:
                    fam = CounterMetricFamily(f.name, f.help, labels=f.labels)
                    for result, n in sorted(self._attempts.items()):
                        fam.add_metric([result], float(n))
                    out.append(fam)
        return out

    def render_bare_counters(self) -> str:
        """Volcano's counters named without ``_total``, in the text format as Go's client writes
        them (the Python client would add the suffix and so rename them)."""
        with self._lock:
            retries = sorted(self._retries.items())
            attempts = self._preemption_attempts
        lines = []
        for name, samples in (
            ("volcano_job_retry_counts", [(f'{{job_id="{_escape(n)}"}}', c) for n, c in retries]),
            ("volcano_total_preemption_attempts", [("", attempts)]),
        ):
            if samples:
                lines.append(f"# HELP {name} {BY_NAME[name].help}")
                lines.append(f"# TYPE {name} counter")
                lines.extend(f"{name}{labels} {floatToGoString(v)}" for labels, v in samples)
        return "".join(line + "\n" for line in lines)


def _job_labels(job: JobRef) -> tuple[str, ...]:
    return (job.name, job.queue, job.namespace)  # the order of _JOB_LABELS


def _queue_resource(
    gauges: dict[str, dict[tuple[str, ...], float]], kind: str, queue: str, res: Resource, scalars: set[str]
) -> None:
    """One queue's amounts of one kind. As Volcano, every scalar the queue ever showed in any
    family gets a series in each family the session sets, 0 where this amount lacks it."""
    gauges.setdefault(f"volcano_queue_{kind}_milli_cpu", {})[(queue,)] = _unlimited_as_go(res.milli_cpu)
    gauges.setdefault(f"volcano_queue_{kind}_memory_bytes", {})[(queue,)] = _unlimited_as_go(res.memory)
    per = gauges.setdefault(f"volcano_queue_{kind}_scalar_resources", {})
    for name in scalars:
        per[(queue, name)] = _unlimited_as_go(res.scalars.get(name, 0.0))


def _unlimited_as_go(value: float) -> float:
    """No limit is infinity here and Go's largest float64 in Volcano (math.MaxFloat64)."""
    return sys.float_info.max if value == math.inf else value


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
