"""HTTP endpoints and Prometheus metrics of ``tidesched run`` (OBS-1, OBS-2).

* ``/metrics`` — Prometheus text format (``--enable-metrics``, ``--listen-address``);
* ``/healthz`` — the process and its scheduling loop are alive;
* ``/readyz`` — every informer has synced and, with ``--leader-elect``, we are the leader;
* ``GET /api/v1/queues`` — per queue × resource (card model): quota, used, inqueue, pending from
  the latest session (``explain.quota.QuotaReport``), for an upper quota service.

Metric names carry the ``tidesched_`` prefix; per-queue and cluster gauges are produced from the
latest report at scrape time, so a deleted queue disappears instead of leaving stale series.
Beside them, Volcano's own ``volcano_*`` families (``volcano_metrics``), so that dashboards and
alerts made for vc-scheduler keep working.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from tidesched.cluster.volcano_metrics import VolcanoMetrics
from tidesched.explain.quota import QuotaReport

log = logging.getLogger("tidesched.cluster.server")

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    """The scheduler's metrics on a private registry (several schedulers may live in one test)."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.session_duration = Histogram(
            "tidesched_session_duration_seconds",
            "Duration of one scheduling session (snapshot to decisions).",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.action_duration = Histogram(
            "tidesched_action_duration_seconds",
            "Duration of one action.",
            ["action"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.sessions = Counter("tidesched_sessions", "Scheduling sessions run.", registry=r)
        self.pods_bound = Counter("tidesched_pods_bound", "Pods bound to nodes.", registry=r)
        self.bind_errors = Counter(
            "tidesched_bind_errors", "Bindings that failed and were forgotten.", registry=r
        )
        self.bind_duration = Histogram(
            "tidesched_bind_duration_seconds",
            "Latency of a binding, retries included.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.pods_evicted = Counter(
            "tidesched_pods_evicted", "Pods evicted (or deleted) as victims.", registry=r
        )
        self.eviction_errors = Counter(
            "tidesched_eviction_errors", "Evictions given up.", ["reason"], registry=r
        )
        self.pods_unschedulable = Gauge(
            "tidesched_pods_unschedulable", "Pods left pending by the latest session.", registry=r
        )
        self.pods_pipelined = Gauge(
            "tidesched_pods_pipelined", "Pods pipelined by the latest session.", registry=r
        )
        self.config_reloads = Counter(
            "tidesched_config_reloads", "Scheduler config reloads.", ["result"], registry=r
        )
        self.informer_events = Counter(
            "tidesched_informer_events", "Informer relists, errors, watches.", ["kind", "event"], registry=r
        )
        self.leader = Gauge("tidesched_leader", "1 while this instance is the leader.", registry=r)
        self.ready = Gauge("tidesched_ready", "1 once caches synced (and leading).", registry=r)
        self.report: QuotaReport | None = None
        r.register(_ReportCollector(self))
        self.volcano = VolcanoMetrics()
        r.register(self.volcano)

    def bind_result(self, what: str, seconds: float, pod_creation: float | None = None) -> None:
        """A binding answered; ``pod_creation`` (seconds since the epoch), when known, times
        the pod's way to Bound for Volcano's task latency."""
        if what == "bound":
            self.pods_bound.inc()
            self.volcano.bound(pod_creation, seconds)
        else:
            self.bind_errors.inc()
            self.volcano.bind_failed()
        self.bind_duration.observe(seconds)

    def evict_result(self, what: str) -> None:
        if what == "evicted":
            self.pods_evicted.inc()
        else:
            self.eviction_errors.labels(what).inc()

    def informer_event(self, kind: str, event: str) -> None:
        self.informer_events.labels(kind, event).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry) + self.volcano.render_bare_counters().encode()


class _ReportCollector:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        rep = self.metrics.report
        if rep is None:
            return []
        fams = {
            f: GaugeMetricFamily(
                f"tidesched_queue_{f if f != 'used' else 'allocated'}",
                f"Per queue and resource (card model): {f} (natural units).",
                labels=["queue", "resource"],
            )
            for f in ("quota", "used", "inqueue", "pending")
        }
        for queue, per_res in sorted(rep.queues.items()):
            for res, u in sorted(per_res.items()):
                for f, fam in fams.items():
                    v = getattr(u, f)
                    if v is not None:
                        fam.add_metric([queue, res], float(v))
        cluster = GaugeMetricFamily(
            "tidesched_cluster_allocatable",
            "Allocatable of Ready nodes per resource (card model with capacity-card).",
            labels=["resource"],
        )
        for res, v in sorted(rep.cluster.items()):
            cluster.add_metric([res], v)
        services = GaugeMetricFamily(
            "tidesched_service_allocated",
            "Allocated per service type (inference = online, training = offline).",
            labels=["service_type", "resource"],
        )
        for stype, totals in sorted(rep.services.items()):
            for res, amount in sorted(totals.items()):
                services.add_metric([stype, res], amount)
        return [*fams.values(), cluster, services]


Route = Callable[[], tuple[int, str, bytes]]


class ListenError(ValueError):
    """A listen address that cannot be used; the message names the address."""


def parse_address(address: str) -> tuple[str, int]:
    """``:8080`` → all interfaces (as Go's net.Listen); ``127.0.0.1:0`` → an ephemeral port on
    loopback only; ``[::1]:8080`` → IPv6 loopback."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ListenError(f"listen address {address!r}: expected HOST:PORT or :PORT")
    return (host.strip("[]") or "0.0.0.0", int(port))


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


# Methods a read-only endpoint answers; every other one gets 405 (RFC 9110: with Allow).
READ_METHODS = ("GET", "HEAD")


class HttpServer:
    """A tiny threaded HTTP server for a fixed set of read-only routes: GET and HEAD are
    answered, every other method is refused with 405. It listens on exactly the address given
    (a host of "" or 0.0.0.0 means every interface, as the vc-scheduler flags)."""

    def __init__(self, address: str, routes: dict[str, Route]) -> None:
        self.routes = routes
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, with_body: bool) -> None:
                route = outer.routes.get(self.path.split("?", 1)[0])
                try:
                    code, ctype, body = route() if route else (404, "text/plain", b"not found\n")
                except Exception as exc:  # noqa: BLE001
                    log.exception("handler for %s failed", self.path)
                    code, ctype, body = 500, "text/plain", f"{exc}\n".encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if with_body:
                    self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                self._answer(True)

            def do_HEAD(self) -> None:  # noqa: N802
                self._answer(False)

            def _refuse(self) -> None:
                # Nothing here changes state: any other method is refused, its body unread.
                body = f"method {self.command} not allowed: this endpoint is read-only\n".encode()
                self.close_connection = True
                self.send_response(405)
                self.send_header("Allow", ", ".join(READ_METHODS))
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def __getattr__(self, name: str) -> Any:
                # The stdlib looks up do_<METHOD> and answers 501 when it is missing; every
                # method but GET and HEAD (POST, PUT, DELETE, PATCH, made-up ones) is a 405.
                if name.startswith("do_"):
                    return self._refuse
                raise AttributeError(name)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        host, port = parse_address(address)
        server_class = _Server6 if ":" in host else _Server
        try:
            self.httpd = server_class((host, port), Handler)
        except (OSError, OverflowError) as exc:
            raise ListenError(f"cannot listen on {address!r}: {exc}") from None
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, args=(0.1,), name=f"http-{address}", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def bound_address(self) -> tuple[str, int]:
        """The host and port the socket is bound to."""
        host, port = self.httpd.socket.getsockname()[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def close(self) -> None:
        """Release the socket of a server that was never started."""
        self.httpd.server_close()


def text(code: int, body: str) -> tuple[int, str, bytes]:
    return code, "text/plain; charset=utf-8", body.encode()


def routes_for(
    metrics: Metrics,
    *,
    healthy: Callable[[], bool],
    ready: Callable[[], bool],
    report: Callable[[], QuotaReport | None],
) -> dict[str, Route]:
    def quota() -> tuple[int, str, bytes]:
        rep = report()
        if rep is None:
            return 503, "application/json", b'{"error": "no session has run yet"}\n'
        return 200, "application/json", json.dumps(rep.to_json(), indent=1).encode()

    return {
        "/metrics": lambda: (200, CONTENT_TYPE_LATEST, metrics.render()),
        "/healthz": lambda: text(200, "ok\n") if healthy() else text(500, "scheduling loop stalled\n"),
        "/readyz": lambda: text(200, "ok\n") if ready() else text(503, "not ready\n"),
        "/api/v1/queues": quota,
    }
