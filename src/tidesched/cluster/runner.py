"""``tidesched run``: the Kubernetes world around the pure scheduling core (RUN-3, RUN-4).

Every ``--schedule-period`` the loop takes the objects the informers changed (with the binder's
and evictor's overlays) into its incremental cluster cache, opens one session of the core on it
with the current config and hands the decisions to the binder, evictor, status writer and event
recorder, which apply them on their own threads. Nothing here decides anything about scheduling.

* the first session runs only after every informer's first full list (K8S-1); before it, the
  leader creates the ``root`` and ``default`` queues if missing, as vc-scheduler does;
* with ``--leader-elect`` only the leader schedules; losing the lease stops scheduling at once,
  drops binds not yet sent, and ``run`` exits 1 so the pod restarts clean (as kube-scheduler);
* SIGTERM: stop the loop, drain in-flight binds/evictions, release the lease, exit 0;
* the config file is re-read when it changes; a bad new config is refused, logged and counted
  (``tidesched_config_reloads_total{result="rejected"}``), and the last good one stays (CONF-3).
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidesched.explain import quota
from tidesched.framework.arguments import ConfigError
from tidesched.framework.config import SchedulerConfig
from tidesched.framework.decisions import Decisions
from tidesched.framework.features import QUEUE_ADMISSION, FeatureGates
from tidesched.framework.usage_source import usage_source_conf
from tidesched.cluster import webview
from tidesched.cluster.api import Kube, TokenBucket, connect
from tidesched.cluster.binder import Binder
from tidesched.cluster.default_queues import ensure_default_queues
from tidesched.cluster.evictor import Evictor
from tidesched.cluster.gate_remover import GateRemover
from tidesched.cluster.leader import LeaderElector
from tidesched.cluster.metrics_source import NodeUsageCollector
from tidesched.cluster.server import HttpServer, ListenError, Metrics, routes_for
from tidesched.cluster.status import EventRecorder, StatusBatch, StatusWriter
from tidesched.cluster.store import POD, ClusterStore, Informer, start_informers
from tidesched.cluster.volcano_session import read_session
from tidesched.model.cache import ClusterCache
from tidesched.model.fields import parse_time
from tidesched.model.problems import ObjectError
from tidesched.model.volumes import VolumePlan
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME
from tidesched.scheduler import collector_paused, config_from_file, open_session, run_actions

log = logging.getLogger("tidesched.cluster.runner")

# The longest a PodGroup moved out of Pending waits for its status write before it counts as
# work again (the writer goes through a mass submission's groups one by one).
ENQUEUE_HOLD = 60.0

@dataclass
class RunOptions:
    kubeconfig: str | None = None
    host: str | None = None  # a plain API URL instead of a kubeconfig (kubectl proxy, fault-injection tests)
    scheduler_conf: str | None = None
    scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME,)
    # vc-scheduler's --ignored-provisioners: their volumes do not count against attach limits
    ignored_provisioners: tuple[str, ...] = ()
    schedule_period: float = 1.0
    # With nothing pending, sessions (status refresh only) at most this often; None: a period,
    # 10 × the last session's duration, ≥ 1 s.
    idle_session_interval: float | None = None
    leader_elect: bool = False
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    lock_namespace: str = "volcano-system"
    lock_name: str = "vc-scheduler"  # Volcano's: the two never schedule at once when both elect
    identity: str | None = None
    kube_api_qps: float = 2000.0
    kube_api_burst: int = 2000
    enable_metrics: bool = False
    listen_address: str = ":8080"
    enable_healthz: bool = False
    healthz_address: str = ":11251"
    bind_workers: int = 64  # calls in flight (see --bind-workers)
    api_http2: bool = False  # the call loop over one HTTP/2 connection (see --api-http2)
    eviction_mode: str = "evict"
    eviction_grace_period: int | None = None
    event_interval: float = 600.0
    watch_timeout: int = 300
    drain_timeout: float = 10.0
    # A session is seconds of pure Python; with the default 5 ms GIL switch interval the bind
    # workers and watches queue behind it (the convoy effect) and binds/s drops by half or more.
    switch_interval: float | None = 0.0005
    # --feature-gates (SchedulingGatesQueueAdmission: the gate remover below works), and the
    # gate remover's workers (--gate-removal-worker-num).
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    gate_removal_workers: int = 5
    informer_options: dict[str, Any] = field(default_factory=dict)
    component_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # tests tune retries


def _file_signature(path: str | None) -> tuple[int, int, int] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)  # follows the ConfigMap's ..data symlink swap
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class Runner:
    """One scheduler instance. ``run()`` blocks until ``stop()`` or leadership loss."""

    def __init__(self, options: RunOptions, *, connection: Any = None) -> None:
        self.options = options
        # A bad config at start is an error for the caller (exit 2 with the message).
        self.config: SchedulerConfig = config_from_file(options.scheduler_conf)
        for w in self.config.warnings:
            log.warning("scheduler config: %s", w)
        for note in options.feature_gates.notes():
            log.warning("%s", note)
        if options.feature_gates.enabled(QUEUE_ADMISSION):
            log.info("feature gate %s on: admitted pods lose Volcano's queue-admission gate", QUEUE_ADMISSION)
        self._conf_sig = _file_signature(options.scheduler_conf)
        self.metrics = Metrics()
        if connection is None:
            connection = connect(
                options.kubeconfig,
                host=options.host,
                pool_size=options.bind_workers + 16,
                http2=options.api_http2,
            )
        base = Kube(connection)
        # kube-scheduler's split: scheduling traffic, events and the lease each get a bucket.
        self.kube = base.with_limiter(TokenBucket(options.kube_api_qps, options.kube_api_burst))
        self.event_kube = base.with_limiter(TokenBucket(options.kube_api_qps, options.kube_api_burst))
        self.lease_kube = base.with_limiter(None)
        self.store = ClusterStore(scheduler_names=frozenset(options.scheduler_names))
        # Parsed objects and session infos, kept up to date from the store's changes by the
        # scheduling loop alone (the informer threads only touch the store).
        self.cache = ClusterCache(options.scheduler_names, ignored_provisioners=options.ignored_provisioners)
        co = options.component_options
        self.recorder = EventRecorder(
            self.event_kube,
            self.store,
            interval=options.event_interval,
            instance=options.identity or "",
            **co.get("recorder", {}),
        )
        self.binder = Binder(
            self.kube,
            self.store,
            self.recorder,
            workers=options.bind_workers,
            on_result=self._bind_result,
            may_send=self.leading,
            **co.get("binder", {}),
        )
        self.evictor = Evictor(
            self.kube,
            self.store,
            self.recorder,
            mode=options.eviction_mode,
            grace_period=options.eviction_grace_period,
            on_result=self.metrics.evict_result,
            may_send=self.leading,
            **co.get("evictor", {}),
        )
        self.status = StatusWriter(self.kube, self.store, binds_in_flight=self.binder.pending, **co.get("status", {}))
        self.gate_remover = GateRemover(
            self.kube,
            self.store,
            workers=options.gate_removal_workers,
            may_send=self.leading,
            **co.get("gate_remover", {}),
        )
        # Nodes' measured load for the usage and rescheduling plugins (the config's `metrics`).
        self.usage = NodeUsageCollector(
            usage_source_conf(self.config.metrics, self.config.source),
            lambda: sorted(str((n.get("metadata") or {}).get("name")) for n in self.store.items("Node")),
            kube=self.kube,
        )
        self.elector: LeaderElector | None = None
        if options.leader_elect:
            self.elector = LeaderElector(
                self.lease_kube,
                options.lock_namespace,
                options.lock_name,
                identity=options.identity,
                lease_duration=options.lease_duration,
                renew_deadline=options.renew_deadline,
                retry_period=options.retry_period,
                on_started=self._on_started,
                on_stopped=self._on_lost,
                **co.get("elector", {}),
            )
        self.informers: list[Informer] = []
        self.servers: list[HttpServer] = []
        self.report: quota.QuotaReport | None = None
        self.view = webview.LiveView()  # the web view's latest state, built on this loop
        self.last_decisions: Decisions | None = None
        self.sessions = 0
        self.loops = 0  # turns of the scheduling loop, with or without a session
        self.stop_event = threading.Event()
        self._created = self._last_loop = time.monotonic()
        self._session_at = -1e18
        self._session_version = -1
        self._session_seconds = 0.0
        self._started = False
        self._queues_checked = False  # root and default made if missing (cluster.default_queues)

    # -- state ----------------------------------------------------------------------------

    def leading(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def ready(self) -> bool:
        return self.store.synced() and self.leading()

    def healthy(self) -> bool:
        return time.monotonic() - self._last_loop < max(30.0, 10 * self.options.schedule_period)

    def _on_started(self) -> None:
        self.metrics.leader.set(1)

    def _on_lost(self) -> None:
        # Stop at once: nothing more leaves this process; the new leader re-derives everything.
        self.metrics.leader.set(0)
        dropped = self.binder.cancel_queued() + self.evictor.cancel_queued() + self.gate_remover.cancel_queued()
        log.error("leadership lost: scheduling stopped, %d queued writes dropped", dropped)
        self.stop_event.set()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        o = self.options
        # Listen first: an address that cannot be used (ListenError) stops the start before any
        # thread runs.
        routes = routes_for(self.metrics, healthy=self.healthy, ready=self.ready, report=lambda: self.report)
        routes.update(webview.routes(self.view))
        try:
            if o.enable_metrics:
                self.servers.append(HttpServer(o.listen_address, routes))
            if o.enable_healthz and not (o.enable_metrics and o.healthz_address == o.listen_address):
                self.servers.append(HttpServer(o.healthz_address, routes))
        except ListenError:
            for srv in self.servers:
                srv.close()
            self.servers.clear()
            raise
        self._saved_switch_interval = sys.getswitchinterval()
        if o.switch_interval:
            sys.setswitchinterval(o.switch_interval)
        for c in (self.recorder, self.binder, self.evictor, self.status, self.gate_remover):
            c.start()
        self.usage.start()
        self.informers = start_informers(
            self.kube,
            self.store,
            watch_timeout=o.watch_timeout,
            on_event=self.metrics.informer_event,
            **o.informer_options,
        )
        for s in self.servers:
            s.start()
        if self.elector is not None:
            self.elector.start()
        else:
            self.metrics.leader.set(1)  # without election this instance is the one that schedules

    def stop(self) -> None:
        self.stop_event.set()

    def run(self) -> int:
        """The scheduling loop; 0 after stop(), 1 after losing the lease."""
        self.start()
        period = self.options.schedule_period
        try:
            while not self.stop_event.is_set():
                t0 = time.monotonic()
                self._last_loop = t0
                synced = self.store.synced()
                self.metrics.ready.set(1 if synced and self.leading() else 0)
                if not synced:  # start the first session as soon as the caches are whole
                    if self._wait_synced(period):
                        log.info("informers synced %.2fs after start", time.monotonic() - self._created)
                        # The first lists are the bulk of what this process will ever hold, and
                        # long-lived: out of the cyclic collector's sight, its sweeps stop walking
                        # them (hundreds of ms each at 10,000 pods). They are still freed when
                        # dropped; only a reference cycle among them would now outlive its use.
                        gc.freeze()
                    continue
                if synced and self.leading():
                    if not self._queues_checked:
                        self._queues_checked = True
                        ensure_default_queues(self.kube, self.store)
                    reloaded = self.reload_config()
                    if reloaded or self.session_due():
                        try:
                            self.run_once()
                        except Exception:  # noqa: BLE001 - REL-1: one bad session must not end the scheduler
                            log.exception("session failed")
                self.loops += 1
                self.stop_event.wait(max(0.0, period - (time.monotonic() - t0)))
        finally:
            self.shutdown()
        return 1 if self.elector is not None and self.elector.lost.is_set() else 0

    def _wait_synced(self, timeout: float) -> bool:
        """Wait for the informers' first lists, parsing each page into the cache as it comes:
        the parse overlaps the API server producing the next page instead of delaying the
        first session."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                for kind, key, obj in self.store.take_listed():
                    self.cache.preparse(kind, key, obj)
            except Exception:  # noqa: BLE001 - only a head start: the fill parses it again
                log.exception("parsing listed objects ahead of the sync failed")
            left = deadline - time.monotonic()
            if self.store.wait_synced(min(left, 0.05), self.stop_event) or left <= 0 or self.stop_event.is_set():
                break
        if not self.store.synced():
            return False
        self.store.take_listed()  # what is left, the first session's fill parses
        return True

    def shutdown(self) -> None:
        o = self.options
        if not self.binder.drain(o.drain_timeout):
            log.warning("shutdown: %d binds still in flight", self.binder.pending())
        self.evictor.drain(o.drain_timeout)
        self.gate_remover.drain(min(2.0, o.drain_timeout))
        self.status.flush(min(2.0, o.drain_timeout))
        self.recorder.flush(min(2.0, o.drain_timeout))
        if self.elector is not None:
            self.elector.release()
        for inf in self.informers:
            inf.stop()
        self.usage.stop()
        for c in (self.binder, self.evictor, self.status, self.recorder, self.gate_remover):
            c.stop(timeout=1.0)
        for s in self.servers:
            s.stop()
        if self._started:
            sys.setswitchinterval(self._saved_switch_interval)

    # -- one cycle ------------------------------------------------------------------------

    def reload_config(self) -> bool:
        """CONF-3: take a changed config file if it is valid; otherwise keep the last good one."""
        path = self.options.scheduler_conf
        sig = _file_signature(path)
        if path is None or sig == self._conf_sig or sig is None:
            return False
        self._conf_sig = sig
        try:
            new = config_from_file(Path(path))
        except ConfigError as exc:
            self.metrics.config_reloads.labels("rejected").inc()
            log.error("new scheduler config %s refused, keeping the last good one: %s", path, exc)
            return False
        self.config = new
        self.usage.configure(usage_source_conf(new.metrics, new.source))
        self.metrics.config_reloads.labels("applied").inc()
        log.info("scheduler config %s reloaded: actions %s", path, ", ".join(new.actions))
        for w in new.warnings:
            log.warning("scheduler config: %s", w)
        return True

    def session_due(self) -> bool:
        """Every period while something waits for a node or for enqueue. With nothing to place,
        only when the cluster changed and at most every ``idle_session_interval``: such a session
        can only restate PodGroup phases and queue usage, and while thousands of binds are in
        flight each one would cost a full snapshot."""
        if self.store.has_work():
            return True
        if self.store.version == self._session_version:
            return False
        idle = self.options.idle_session_interval
        if idle is None:
            # A period (at least 1 s), and at least ten times the last session: status refreshes
            # never take more than a tenth of the CPU from the binds they wait for, and a
            # PodGroup whose pods were bound reads Running about when vc-scheduler's would (its
            # next session, a period later).
            idle = max(1.0, self.options.schedule_period, 10 * self._session_seconds)
        return time.monotonic() - self._session_at >= idle

    def run_once(self) -> Decisions:
        """One session over the current cache; decisions are queued for the writers."""
        # The cyclic collector stays off until the session is released: a sweep while it is alive
        # walks everything it allocated (about 200,000 objects at 5,000 pods, 50-90 ms of the
        # first session's binds waiting for the GIL); once released, a few thousand remain.
        with collector_paused():
            return self._session()

    def _session(self) -> Decisions:
        self._session_at = time.monotonic()
        self._session_version = self.store.version
        self.store.expire()
        t0 = time.perf_counter()
        observed = self.options.enable_metrics  # Volcano's families are read only when served
        dispatched_at: list[float] = []
        for kind, key, obj in self.store.take_changes():
            new_pod = observed and kind == POD and obj is not None and key not in self.cache.records[POD]
            self.cache.update(kind, key, obj)
            if new_pod:
                self._observe_watched(key)
        t_open = time.perf_counter()
        snapshot, state = self.cache.open()
        snapshot.node_usage = self.usage.current()
        ssn = open_session(
            snapshot,
            self.config,
            scheduler_names=self.options.scheduler_names,
            uid=str(uuid.uuid4()),
            now=time.time(),
            state=state,
            features=self.options.feature_gates,
        )
        open_seconds = time.perf_counter() - t_open

        # Binds start as the session dispatches them (Volcano's cache binds while the
        # session goes on), so the first pods bind before a long first session ends.
        def dispatch(key: str, node: str) -> None:
            self._dispatch(key, node, ssn.bind_annotations.get(key), ssn.volume_bindings.get(key),
                           ssn.claim_writes.get(key))
            dispatched_at.append(time.time())

        ssn.on_dispatch = dispatch
        decisions = run_actions(ssn, on_action=self._observe_action)
        e2e_seconds = time.perf_counter() - t_open
        if observed:
            self.metrics.volcano.session(
                read_session(ssn, decisions, dispatched_at),
                open_seconds=open_seconds,
                e2e_seconds=e2e_seconds,
                plugin_open=ssn.plugin_open_seconds,
                plugin_close=ssn.plugin_close_seconds,
            )
        report = quota.report(ssn)  # at close: as the cluster will be once the binds land
        self._session_seconds = time.perf_counter() - t0
        self.metrics.session_duration.observe(self._session_seconds)
        self.metrics.sessions.inc()
        self.sessions += 1
        self.report = report
        self.metrics.report = report
        self.last_decisions = decisions
        try:
            if not self.leading() or self.stop_event.is_set():
                return decisions  # lost the lease (or stopping) while deciding: apply nothing
            self.apply(decisions, report)
            if self.options.enable_metrics:  # the web view is served on the metrics address
                try:
                    self.view.record(ssn, decisions, report, session=self.sessions, seconds=self._session_seconds)
                except Exception:  # noqa: BLE001 - a view is never worth a scheduling loop
                    log.exception("web view not updated")
            return decisions
        finally:
            ssn.release()  # freed now, not left to the cyclic collector (Session.release)

    def _dispatch(
        self,
        key: str,
        node: str,
        annotations: dict[str, str] | None = None,
        volumes: VolumePlan | None = None,
        claims: Any = None,
    ) -> None:
        if self.leading() and not self.stop_event.is_set():
            self.binder.submit(
                {key: node}, {key: annotations} if annotations else None, {key: volumes} if volumes else None,
                {key: claims} if claims else None,
            )

    def _observe_action(self, name: str, seconds: float) -> None:
        self.metrics.action_duration.labels(name).observe(seconds)
        self.metrics.volcano.action(name, seconds)

    def _observe_watched(self, key: str) -> None:
        """A pod new to the cache: one of ours without a node is Volcano's "Watched" stage."""
        pod = self.cache.records[POD].get(key)
        if pod is not None and not pod.node_name and pod.scheduler_name in self.cache.ours:
            self.metrics.volcano.watched(pod.meta.creation)

    def _bind_result(self, what: str, seconds: float, key: str) -> None:
        """The binder's answer for one pod (on the binder's thread)."""
        creation = None
        if what == "bound":
            pod = self.store.get(POD, key)
            try:
                creation = parse_time(((pod or {}).get("metadata") or {}).get("creationTimestamp"), "metadata") or None
            except ObjectError:
                creation = None  # a pod without a readable creation time is not timed
        self.metrics.bind_result(what, seconds, creation)

    def apply(self, d: Decisions, report: quota.QuotaReport) -> None:
        """Hand the decisions to the writers; returns at once (K8S-2: off the session path)."""
        queued = self.binder.submit(d.bound, d.bind_annotations, d.volume_bindings, d.claim_writes)
        evicting = self.evictor.submit(d.evicted, d.eviction_reasons)
        if d.ungated:
            self.gate_remover.submit(d.ungated)
        # PodGroups this session moved on are no reason for the next one while their status
        # write is on its way (ClusterStore.assume_enqueued); first, so the write cannot beat it.
        self.store.assume_enqueued((k for k, phase in d.podgroups.items() if phase != "Pending"), ENQUEUE_HOLD)
        self.status.submit(StatusBatch(d, report.card_allocated()))
        self.recorder.record_all(d.events)
        unschedulable = sum(1 for e in d.events if e.kind == "Pod" and e.reason == "FailedScheduling")
        self.metrics.pods_unschedulable.set(unschedulable)
        self.metrics.pods_pipelined.set(len(d.pipelined))
        for e in d.events:
            if e.kind == "Object":
                log.warning("%s: %s", e.reason, e.message)
        log.debug(
            "session %d: %.3fs, %d binds queued, %d evictions queued, %d pending, %d events",
            self.sessions,
            self._session_seconds,
            queued,
            evicting,
            unschedulable,
            len(d.events),
        )
