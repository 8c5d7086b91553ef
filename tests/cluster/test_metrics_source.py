"""Metrics sources and the node usage collector (cluster/metrics_source.py): Volcano's source
interface with a source the test controls, the collector feeding sessions, and the prometheus,
elasticsearch and prometheus_adaptor sources against small servers run by the test."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from builders import node, pod, podgroup, queue
from tidesched.cluster.metrics_source import (
    ElasticsearchSource,
    MetricsSourceError,
    NodeUsageCollector,
    PrometheusAdaptorSource,
    PrometheusSource,
)
from tidesched.framework.arguments import ConfigError
from tidesched.framework.usage_source import UsageSourceConf, usage_source_conf
from tidesched.model.node_usage import NODE_METRICS_PERIOD, NodeMetrics
from tidesched.model.snapshot import build_snapshot
from tidesched.scheduler import config_from_text, open_session, run_actions

NOW = 1_800_000_000.0


class ControlledSource:
    """A metrics source whose answers the test sets (Volcano's MetricsClient interface)."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[float, float]] = {}
        self.fail: Exception | None = None
        self.asked: list[list[str]] = []

    def nodes_metrics_avg(self, nodes: Sequence[str]) -> dict[str, NodeMetrics]:
        self.asked.append(list(nodes))
        if self.fail is not None:
            raise self.fail
        return {n: NodeMetrics(NOW, *self.answers.get(n, (0.0, 0.0))) for n in nodes}


def _collector(source: ControlledSource, nodes: list[str]) -> NodeUsageCollector:
    conf = UsageSourceConf(type="prometheus", address="http://unused")
    return NodeUsageCollector(conf, lambda: nodes, factory=lambda c, k: source)


def test_collector_keeps_the_last_answer_and_survives_failures() -> None:
    src = ControlledSource()
    col = _collector(src, ["n1", "n2"])
    src.answers = {"n1": (90.0, 10.0), "n2": (20.0, 30.0)}
    assert col.poll()
    got = col.current()
    assert got["n1"].cpu_avg == {NODE_METRICS_PERIOD: 90.0} and got["n2"].mem_avg == {NODE_METRICS_PERIOD: 30.0}
    assert got["n1"].metrics_time == NOW and src.asked == [["n1", "n2"]]
    src.fail = MetricsSourceError("down")
    assert not col.poll()
    assert col.current() is got and col.errors == 1  # a failed poll keeps the last answer
    col.configure(UsageSourceConf())  # a reloaded config without a source: no usage
    assert col.current() == {} and not col.poll()


def test_collector_thread_polls_and_stops() -> None:
    src = ControlledSource()
    src.answers = {"n1": (50.0, 50.0)}
    col = _collector(src, ["n1"])
    col.start()
    try:
        for _ in range(200):
            if col.current():
                break
            threading.Event().wait(0.01)
        assert "n1" in col.current()
    finally:
        col.stop()
    assert col._thread is not None and not col._thread.is_alive()


def test_collected_usage_decides_where_a_pod_goes() -> None:
    """The source the test controls → the collector → a session with the usage plugin."""
    src = ControlledSource()
    col = _collector(src, ["n1", "n2"])
    objs = [node("n1"), node("n2"), queue("q"), podgroup("pg", 1, queue="q"), pod("p", "pg")]
    cfg = config_from_text(yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [{"name": "usage"}]}]}))

    def place() -> dict[str, str]:
        snap = build_snapshot(objs)
        snap.node_usage = col.current()
        return run_actions(open_session(snap, cfg, now=NOW + 60)).bound

    src.answers = {"n1": (90.0, 20.0), "n2": (30.0, 30.0)}
    col.poll()
    assert place() == {"ns/p": "n2"}  # n1 is above 80 % cpu
    src.answers = {"n1": (10.0, 10.0), "n2": (85.0, 30.0)}
    col.poll()
    assert place() == {"ns/p": "n1"}


# -- the metrics section of the config --------------------------------------------------------


def test_usage_source_conf() -> None:
    c = usage_source_conf({"type": "elasticsearch", "address": "http://es:9200", "interval": "1m",
                           "elasticsearch.index": "nodes-*", "tls.insecureSkipVerify": "true"})
    assert (c.type, c.interval, c.es_index, c.es_hostname_field, c.insecure_skip_verify) == (
        "elasticsearch", 60.0, "nodes-*", "host.hostname", True)
    assert not usage_source_conf({}).enabled
    assert usage_source_conf({"type": "prometheus", "address": "x", "interval": "0s"}).interval == 30.0


@pytest.mark.parametrize("metrics, match", [
    ({"type": "graphite", "address": "x"}, "unknown metrics source 'graphite'"),
    ({"type": "prometheus"}, "needs an address"),
    ({"type": "prometheus", "address": "x", "interval": "often"}, "expected a duration"),
])
def test_bad_metrics_section_is_refused_at_load(metrics: dict, match: str) -> None:
    text = yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [{"name": "usage"}]}], "metrics": metrics})
    with pytest.raises(ConfigError, match=match):
        config_from_text(text)


# -- sources against small servers -------------------------------------------------------------


class _Server:
    def __init__(self, answer: Any) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                outer.requests.append({"method": self.command, "path": self.path, "body": body,
                                       "headers": dict(self.headers)})
                status, payload = answer(self.path, body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _reply

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "_Server":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[type[_Server]]:
    yield _Server


def test_prometheus_source(server: type[_Server]) -> None:
    def answer(path: str, body: bytes) -> tuple[int, Any]:
        query = parse_qs(urlparse(path).query)["query"][0]
        if 'instance="n2"' in query:
            return 200, {"status": "success", "data": {"resultType": "vector", "result": []}}  # no data
        value = "42.5" if "node_cpu_seconds_total" in query else "61"
        return 200, {"status": "success", "data": {"resultType": "vector",
                                                   "result": [{"metric": {"instance": "n1"}, "value": [NOW, value]}]}}

    with server(answer) as srv:
        got = PrometheusSource(UsageSourceConf(type="prometheus", address=srv.url + "/"), clock=lambda: NOW).nodes_metrics_avg(["n1", "n2"])
    assert got == {"n1": NodeMetrics(NOW, 42.5, 61.0), "n2": NodeMetrics(NOW, 0.0, 0.0)}
    queries = [parse_qs(urlparse(r["path"]).query)["query"][0] for r in srv.requests]
    assert all(urlparse(r["path"]).path == "/api/v1/query" for r in srv.requests)
    assert queries[0] == ('avg_over_time(clamp_min(100 - (avg by (instance) (rate(node_cpu_seconds_total'
                          '{mode="idle",instance="n1"}[5m])) * 100), 0)[10m:30s])')
    assert queries[1] == ('100*avg_over_time(((1-node_memory_MemAvailable_bytes{instance="n1"}'
                          '/node_memory_MemTotal_bytes{instance="n1"}))[10m:30s])')


def test_prometheus_source_error(server: type[_Server]) -> None:
    with server(lambda p, b: (503, {"status": "error"})) as srv:
        with pytest.raises(MetricsSourceError, match="HTTP 503"):
            PrometheusSource(UsageSourceConf(type="prometheus", address=srv.url)).nodes_metrics_avg(["n1"])
    with pytest.raises(MetricsSourceError):  # nothing listens there any more
        PrometheusSource(UsageSourceConf(type="prometheus", address=srv.url)).nodes_metrics_avg(["n1"])


def test_elasticsearch_source(server: type[_Server]) -> None:
    def answer(path: str, body: bytes) -> tuple[int, Any]:
        host = json.loads(body)["query"]["bool"]["must"][1]["term"]["host.name"]
        if host == "n2":
            return 200, {"aggregations": {"cpu": {"value": None}, "mem": {"value": None}}}
        return 200, {"aggregations": {"cpu": {"value": 0.25}, "mem": {"value": 0.5}}}

    with server(answer) as srv:
        conf = usage_source_conf({"type": "elasticsearch", "address": srv.url, "elasticsearch.index": "beats-*",
                                  "elasticsearch.hostnameFieldName": "host.name",
                                  "elasticsearch.username": "u", "elasticsearch.password": "p"})
        got = ElasticsearchSource(conf, clock=lambda: NOW).nodes_metrics_avg(["n1", "n2"])
    assert got == {"n1": NodeMetrics(NOW, 25.0, 50.0), "n2": NodeMetrics(NOW, 0.0, 0.0)}
    req = srv.requests[0]
    assert req["method"] == "POST" and req["path"] == "/beats-*/_search"
    assert req["headers"]["Authorization"] == "Basic dTpw"
    body = json.loads(req["body"])
    assert body["aggs"] == {"cpu": {"avg": {"field": "host.cpu.usage"}}, "mem": {"avg": {"field": "system.memory.actual.used.pct"}}}
    assert body["query"]["bool"]["must"][0] == {"range": {"@timestamp": {"gte": "now-10m", "lt": "now"}}}


def test_prometheus_adaptor_source() -> None:
    class Kube:
        def __init__(self) -> None:
            self.paths: list[str] = []

        def get(self, path: str) -> dict[str, Any]:
            self.paths.append(path)
            if "v1beta2" in path:
                raise RuntimeError("404")  # an adapter serving v1beta1 only
            value = "350m" if path.endswith("node_cpu_usage_avg") else "0.5"
            return {"items": [
                {"describedObject": {"kind": "Node", "name": "n1"}, "timestamp": "2027-01-15T08:00:00Z", "value": value},
                {"describedObject": {"kind": "Node", "name": "gone"}, "timestamp": "2027-01-15T08:00:00Z", "value": "1"},
            ]}

    kube = Kube()
    got = PrometheusAdaptorSource(kube).nodes_metrics_avg(["n1", "n2"])
    assert got["n1"].cpu == pytest.approx(35.0) and got["n1"].memory == pytest.approx(50.0)
    assert got["n1"].metrics_time > 0 and got["n2"] == NodeMetrics(0.0, 0.0, 0.0)
    assert kube.paths[:2] == ["/apis/custom.metrics.k8s.io/v1beta2/nodes/%2A/node_cpu_usage_avg",
                              "/apis/custom.metrics.k8s.io/v1beta1/nodes/%2A/node_cpu_usage_avg"]
