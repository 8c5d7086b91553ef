"""Nodes' measured usage for ``tidesched run``: the metrics sources of Volcano v1.15.1
(``pkg/scheduler/metrics/source``) and the collector that polls one on its own thread.

A :class:`MetricsSource` answers, for a list of node names, each node's CPU and memory use in
percent and when it was measured (Volcano's ``MetricsClient.NodesMetricsAvg``). The sources,
chosen by the config's ``metrics.type`` (``framework/usage_source.py``):

* ``prometheus`` — Prometheus's HTTP query API at ``metrics.address``, Volcano's two PromQL
  queries per node (node-exporter's ``node_cpu_seconds_total`` and ``node_memory_*`` averaged
  over 10 minutes, by ``instance`` = the node's name); a query without data leaves 0.
* ``elasticsearch`` — one ``_search`` per node on ``metrics.address`` in
  ``elasticsearch.index``: the average of metricbeat's ``host.cpu.usage`` and
  ``system.memory.actual.used.pct`` over the last 10 minutes for the documents whose
  ``elasticsearch.hostnameFieldName`` is the node's name, × 100.
* ``prometheus_adaptor`` — the custom metrics API of the cluster
  (``custom.metrics.k8s.io``: ``node_cpu_usage_avg``, ``node_memory_usage_avg`` for nodes, as
  prometheus-adapter rules name them), × 100, with the value's timestamp; the scheduler's
  ServiceAccount then needs ``get`` on that API group (not in the default ClusterRole).

:class:`NodeUsageCollector` asks the source every ``metrics.interval`` (default 30 s) for the
nodes the informers hold and keeps the last answer; a session reads it (``current``) and never
waits for the source. A failed or slow poll (60 s at most, as Volcano's context) keeps the last
answer and is logged. Reports older than five minutes are ignored by the plugins themselves.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol
from urllib.parse import quote

import orjson
import urllib3

from tidesched.framework.usage_source import ELASTICSEARCH, PROMETHEUS, PROMETHEUS_ADAPTOR, UsageSourceConf
from tidesched.model.fields import parse_time
from tidesched.model.node_usage import NODE_METRICS_PERIOD, NodeMetrics, NodeUsage
from tidesched.model.problems import ObjectError
from tidesched.model.quantity import QuantityError, parse_quantity

log = logging.getLogger("tidesched.cluster.metrics_source")

POLL_TIMEOUT = 60.0  # Volcano: context.WithTimeout(60 s) around one poll
MAX_BODY = 1 << 20  # Volcano's elasticsearch client reads at most 1 MB
CPU_METRIC, MEMORY_METRIC = "node_cpu_usage_avg", "node_memory_usage_avg"  # prometheus-adapter rules


class MetricsSourceError(RuntimeError):
    """A source could not answer (unreachable, refused, malformed)."""


class MetricsSource(Protocol):
    """Volcano's MetricsClient: every named node's usage, or MetricsSourceError."""

    def nodes_metrics_avg(self, nodes: Sequence[str]) -> dict[str, NodeMetrics]: ...


def _pool(conf: UsageSourceConf) -> urllib3.PoolManager:
    return urllib3.PoolManager(
        cert_reqs="CERT_NONE" if conf.insecure_skip_verify else "CERT_REQUIRED",
        timeout=urllib3.Timeout(total=POLL_TIMEOUT),
        retries=False,
    )


def _request(http: urllib3.PoolManager, method: str, url: str, **kw: Any) -> urllib3.BaseHTTPResponse:
    try:
        return http.request(method, url, **kw)
    except urllib3.exceptions.ProtocolError:
        # A kept-alive connection the server had closed: once more, on a new one.
        return http.request(method, url, **kw)


def _json(resp: urllib3.BaseHTTPResponse, what: str) -> Any:
    if resp.status != 200:
        raise MetricsSourceError(f"{what}: HTTP {resp.status}")
    body = resp.data
    if len(body) > MAX_BODY:
        raise MetricsSourceError(f"{what}: answer larger than {MAX_BODY} bytes")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MetricsSourceError(f"{what}: not JSON ({exc})") from None


class PrometheusSource:
    """Prometheus's query API, Volcano's queries (PrometheusMetricsClient)."""

    def __init__(self, conf: UsageSourceConf, clock: Callable[[], float] = time.time) -> None:
        self.address = conf.address.rstrip("/")
        self.http = _pool(conf)
        self.clock = clock

    @staticmethod
    def queries(node: str) -> tuple[str, str]:
        cpu = (f'avg_over_time(clamp_min(100 - (avg by (instance) (rate(node_cpu_seconds_total{{mode="idle",'
               f'instance="{node}"}}[5m])) * 100), 0)[{NODE_METRICS_PERIOD}:30s])')
        mem = (f'100*avg_over_time(((1-node_memory_MemAvailable_bytes{{instance="{node}"}}'
               f'/node_memory_MemTotal_bytes{{instance="{node}"}}))[{NODE_METRICS_PERIOD}:30s])')
        return cpu, mem

    def _first_value(self, query: str, at: float) -> float | None:
        try:
            resp = _request(self.http, "GET", f"{self.address}/api/v1/query", fields={"query": query, "time": f"{at:.3f}"})
        except urllib3.exceptions.HTTPError as exc:
            raise MetricsSourceError(f"prometheus {self.address}: {exc}") from None
        body = _json(resp, f"prometheus {self.address}")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict) or data.get("resultType") != "vector" or not data.get("result"):
            return None  # Volcano: no data, or not a vector: the value stays 0
        try:
            return float(data["result"][0]["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            return None

    def nodes_metrics_avg(self, nodes: Sequence[str]) -> dict[str, NodeMetrics]:
        out = {}
        for node in nodes:
            at = self.clock()
            cpu_q, mem_q = self.queries(node)
            cpu, mem = self._first_value(cpu_q, at), self._first_value(mem_q, at)
            out[node] = NodeMetrics(self.clock(), cpu or 0.0, mem or 0.0)
        return out


class ElasticsearchSource:
    """Elasticsearch's search API over metricbeat documents (ElasticsearchMetricsClient)."""

    CPU_FIELD, MEM_FIELD = "host.cpu.usage", "system.memory.actual.used.pct"

    def __init__(self, conf: UsageSourceConf, clock: Callable[[], float] = time.time) -> None:
        self.address = conf.address.rstrip("/")
        self.index = conf.es_index
        self.hostname_field = conf.es_hostname_field
        self.headers = {"Content-Type": "application/json"}
        if conf.es_username or conf.es_password:
            token = base64.b64encode(f"{conf.es_username}:{conf.es_password}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"
        self.http = _pool(conf)
        self.clock = clock

    def query(self, node: str) -> dict[str, Any]:
        return {
            "size": 0,
            "query": {"bool": {"must": [
                {"range": {"@timestamp": {"gte": "now-" + NODE_METRICS_PERIOD, "lt": "now"}}},
                {"term": {self.hostname_field: node}},
            ]}},
            "aggs": {"cpu": {"avg": {"field": self.CPU_FIELD}}, "mem": {"avg": {"field": self.MEM_FIELD}}},
        }

    def nodes_metrics_avg(self, nodes: Sequence[str]) -> dict[str, NodeMetrics]:
        out = {}
        url = f"{self.address}/{quote(self.index, safe='*,-_.')}/_search"
        for node in nodes:
            try:
                resp = _request(self.http, "POST", url, body=orjson.dumps(self.query(node)), headers=self.headers)
            except urllib3.exceptions.HTTPError as exc:
                raise MetricsSourceError(f"elasticsearch {self.address}: {exc}") from None
            body = _json(resp, f"elasticsearch {self.address}")
            aggs = body.get("aggregations") if isinstance(body, dict) else None
            aggs = aggs if isinstance(aggs, dict) else {}
            # Go decodes a missing or null average as 0.
            cpu = _number((aggs.get("cpu") or {}).get("value"))
            mem = _number((aggs.get("mem") or {}).get("value"))
            out[node] = NodeMetrics(self.clock(), cpu * 100, mem * 100)
        return out


def _number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


class PrometheusAdaptorSource:
    """The cluster's custom metrics API (KMetricsClient): one list per metric for all nodes."""

    VERSIONS = ("v1beta2", "v1beta1")

    def __init__(self, kube: Any) -> None:
        self.kube = kube

    def _values(self, metric: str) -> list[dict[str, Any]]:
        last: Exception | None = None
        for version in self.VERSIONS:
            try:
                body = self.kube.get(f"/apis/custom.metrics.k8s.io/{version}/nodes/%2A/{metric}")
                return [i for i in body.get("items") or [] if isinstance(i, dict)]
            except Exception as exc:  # noqa: BLE001 - any failure: the next version, then an error
                last = exc
        raise MetricsSourceError(f"custom metrics API, {metric}: {last}")

    def nodes_metrics_avg(self, nodes: Sequence[str]) -> dict[str, NodeMetrics]:
        found: dict[str, dict[str, float]] = {n: {"time": 0.0, "cpu": 0.0, "memory": 0.0} for n in nodes}
        for metric, field in ((CPU_METRIC, "cpu"), (MEMORY_METRIC, "memory")):
            for item in self._values(metric):
                name = (item.get("describedObject") or {}).get("name")
                if name not in found:
                    continue  # a node the informers do not hold (Volcano logs it)
                try:
                    found[name][field] = float(parse_quantity(item.get("value"))) * 100
                except QuantityError:
                    continue
                found[name]["time"] = _timestamp(item.get("timestamp"))
        return {n: NodeMetrics(v["time"], v["cpu"], v["memory"]) for n, v in found.items()}


def _timestamp(value: Any) -> float:
    try:
        return parse_time(value, "timestamp")
    except ObjectError:
        return 0.0


def make_source(conf: UsageSourceConf, kube: Any = None) -> MetricsSource | None:
    """The source the config names, None without one."""
    if conf.type == PROMETHEUS:
        return PrometheusSource(conf)
    if conf.type == ELASTICSEARCH:
        return ElasticsearchSource(conf)
    if conf.type == PROMETHEUS_ADAPTOR:
        return PrometheusAdaptorSource(kube)
    return None


class NodeUsageCollector:
    """Polls a metrics source on its own thread and keeps the last usage per node."""

    def __init__(
        self,
        conf: UsageSourceConf,
        nodes: Callable[[], Sequence[str]],
        *,
        kube: Any = None,
        factory: Callable[[UsageSourceConf, Any], MetricsSource | None] = make_source,
    ) -> None:
        self.nodes = nodes
        self.kube = kube
        self.factory = factory
        self.polls = 0
        self.errors = 0
        self._usage: dict[str, NodeUsage] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.configure(conf)

    def configure(self, conf: UsageSourceConf) -> None:
        """Take a (re)loaded config's source; polls at once when it changed."""
        if getattr(self, "conf", None) == conf:
            return
        self.conf = conf
        self.source = self.factory(conf, self.kube) if conf.enabled else None
        if self.source is None:
            with self._lock:
                self._usage = {}
        self._wake.set()

    def current(self) -> dict[str, NodeUsage]:
        with self._lock:
            return self._usage

    def poll(self) -> bool:
        """Ask the source once; keep its answer, or (on failure) the last one."""
        source = self.source
        if source is None:
            return False
        self.polls += 1
        try:
            answer = source.nodes_metrics_avg(list(self.nodes()))
        except Exception as exc:  # noqa: BLE001 - a source never stops the scheduler
            self.errors += 1
            log.warning("node usage from %s not updated: %s", self.conf.type, exc)
            return False
        usage = {name: NodeUsage.from_metrics(m) for name, m in answer.items()}
        with self._lock:
            self._usage = usage
        return True

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="node-usage", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            self.poll()
            self._wake.wait(self.conf.interval)

    def stop(self, timeout: float = 1.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
