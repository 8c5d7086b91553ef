"""The command-line side of Kubernetes mode: ``tidesched run``, and the live-cluster reads of
``tidesched quota`` / ``tidesched explain --kubeconfig``.

``run`` parses its flags with argparse in Go's style (``--flag``, ``--flag=true|false``,
``-v=3``) because an operator switching from vc-scheduler keeps the Deployment's argument list:
vc-scheduler's flags are accepted with the same names; ``--logtostderr``,
``--node-worker-threads`` and stray positional arguments (the chart's ``2>&1``) are accepted and
ignored, and the rest of vc-scheduler v1.15.1's flags are taken or refused as ``vc_flags`` says.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Any, Sequence

from tidesched.framework.arguments import ConfigError
from tidesched.framework.config import SchedulerConfig
from tidesched.framework.features import FeatureGates, parse_feature_gates
from tidesched.framework.session import Session
from tidesched.cluster.api import Kube, connect
from tidesched.cluster.runner import Runner, RunOptions
from tidesched.cluster.server import ListenError
from tidesched.cluster.store import list_once
from tidesched.cluster import vc_flags
from tidesched.explain.quota import QuotaReport, report
from tidesched.model.durations import parse_flag_duration
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME, ClusterSnapshot, build_snapshot
from tidesched.scheduler import CONFIG_KEY, CONFIG_MAPS, open_session

log = logging.getLogger("tidesched.cluster")


def _bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    v = text.strip().lstrip("=").lower()
    if v in ("1", "t", "true", "yes", "y", "on"):
        return True
    if v in ("0", "f", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _duration(text: str) -> float:
    try:
        return parse_flag_duration(text.lstrip("="))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _int(text: str) -> int:
    return int(text.lstrip("="))


def _feature_gates(text: str) -> FeatureGates:
    try:
        return parse_feature_gates(text.lstrip("="))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tidesched run",
        description="Schedule a real cluster through the Kubernetes API: every pod whose "
        "spec.schedulerName is one of --scheduler-name is scheduled by tidesched's core.",
    )
    flag: dict[str, Any] = {"nargs": "?", "const": True, "type": _bool, "metavar": "BOOL"}
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    p.add_argument("--master", dest="host", help="API server URL, overriding the kubeconfig's")
    p.add_argument("--scheduler-conf", help="Volcano scheduler config; reloaded when the file changes")
    p.add_argument(
        "--scheduler-name",
        action="append",
        default=None,
        help=f"schedulerName served (repeatable; default {DEFAULT_SCHEDULER_NAME})",
    )
    p.add_argument("--schedule-period", type=_duration, default=1.0, help="period between sessions (1s)")
    p.add_argument(
        "--ignored-provisioners",
        action="append",
        default=None,
        help="provisioners whose volumes do not count against nodes' attach limits (comma-separated, "
        "repeatable; rancher.io/local-path and hostpath.csi.k8s.io always; docs/volumes.md)",
    )
    p.add_argument("--leader-elect", default=False, **flag, help="elect a leader on a Lease (false)")
    p.add_argument("--leader-elect-lease-duration", type=_duration, default=15.0, metavar="DURATION")
    p.add_argument("--leader-elect-renew-deadline", type=_duration, default=10.0, metavar="DURATION")
    p.add_argument("--leader-elect-retry-period", type=_duration, default=2.0, metavar="DURATION")
    p.add_argument(
        "--lock-object-namespace",
        "--leader-elect-resource-namespace",
        dest="lock_namespace",
        default="volcano-system",
        help="namespace of the Lease (volcano-system)",
    )
    p.add_argument(
        "--leader-elect-resource-name",
        dest="lock_name",
        default="vc-scheduler",
        help="name of the Lease (vc-scheduler, shared with Volcano on purpose)",
    )
    p.add_argument("--kube-api-qps", type=float, default=2000.0, help="API requests per second (2000)")
    p.add_argument("--kube-api-burst", type=_int, default=2000, help="API request burst (2000)")
    p.add_argument("--enable-metrics", default=False, **flag, help="serve /metrics and /api/v1/queues")
    p.add_argument("--listen-address", default=":8080", help="metrics address (:8080)")
    p.add_argument("--enable-healthz", default=False, **flag, help="serve /healthz and /readyz")
    p.add_argument("--healthz-address", default=":11251", help="health address (:11251)")
    # 64, not 16: while a long first session holds the GIL, the call loop gets it back only every
    # few tens of ms, and each turn can start at most this many calls (benchmarks/results/
    # 2026-11-28-kube-throughput-v115.md: +2 to +14 % pods/s on 1,000 x 5,000).
    p.add_argument("--bind-workers", type=_int, default=64, help="concurrent binding calls (64)")
    # HTTP/1.1 by default: with 64 bindings in flight, a keep-alive connection per call costs the
    # API server and etcd less CPU than one multiplexed HTTP/2 connection (curl.py's docstring).
    p.add_argument("--api-http2", default=False, **flag,
                   help="send API calls as HTTP/2 streams over one connection (default: keep-alive HTTP/1.1 "
                        "connections, one per call in flight)")
    p.add_argument(
        "--eviction-mode",
        choices=("evict", "delete"),
        default="evict",
        help="Eviction API honouring PodDisruptionBudgets, or DELETE (evict)",
    )
    p.add_argument(
        "--eviction-grace-period",
        type=_int,
        default=None,
        help="grace period seconds for evictions/deletes (default: the pod's)",
    )
    p.add_argument(
        "--event-aggregation-interval",
        type=_duration,
        default=600.0,
        metavar="DURATION",
        help="a repeated event is rewritten at most this often (10m)",
    )
    p.add_argument(
        "--feature-gates",
        type=_feature_gates,
        default=FeatureGates(),
        metavar="NAME=BOOL,...",
        help="Volcano's feature gates; tidesched acts on SchedulingGatesQueueAdmission (default off)",
    )
    p.add_argument(
        "--gate-removal-worker-num",
        type=_int,
        default=5,
        help="concurrent scheduling-gate removals (5; with SchedulingGatesQueueAdmission)",
    )
    p.add_argument("-v", "--v", dest="verbosity", type=_int, default=2, help="log verbosity (klog-like)")
    # Accepted for vc-scheduler compatibility, ignored.
    p.add_argument("--logtostderr", default=True, **flag, help=argparse.SUPPRESS)
    p.add_argument("--node-worker-threads", type=_int, default=None, help=argparse.SUPPRESS)
    vc_flags.add_flags(p, _bool, _int)
    p.add_argument("ignored", nargs="*", help=argparse.SUPPRESS)
    return p


def options_from_args(args: argparse.Namespace) -> RunOptions:
    return RunOptions(
        kubeconfig=args.kubeconfig,
        host=args.host,
        scheduler_conf=args.scheduler_conf,
        scheduler_names=tuple(args.scheduler_name or [DEFAULT_SCHEDULER_NAME]),
        ignored_provisioners=tuple(
            p.strip() for v in args.ignored_provisioners or () for p in v.lstrip("=").split(",") if p.strip()
        ),
        schedule_period=args.schedule_period,
        leader_elect=args.leader_elect,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        lock_namespace=args.lock_namespace,
        lock_name=args.lock_name,
        kube_api_qps=args.kube_api_qps,
        kube_api_burst=args.kube_api_burst,
        enable_metrics=args.enable_metrics,
        listen_address=args.listen_address,
        enable_healthz=args.enable_healthz,
        healthz_address=args.healthz_address,
        bind_workers=args.bind_workers,
        api_http2=args.api_http2,
        eviction_mode=args.eviction_mode,
        eviction_grace_period=args.eviction_grace_period,
        event_interval=args.event_aggregation_interval,
        feature_gates=args.feature_gates,
        gate_removal_workers=args.gate_removal_worker_num,
    )


def setup_logging(verbosity: int) -> None:
    level = logging.DEBUG if verbosity >= 4 else logging.INFO if verbosity >= 1 else logging.WARNING
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname).1s %(name)s] %(message)s"
    )


def run_main(argv: Sequence[str]) -> int:
    """``tidesched run``: 0 after SIGTERM/SIGINT, 1 after losing the lease, 2 on bad flags/config."""
    parser = run_parser()
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:  # --help (0) or a bad flag (2)
        return int(exc.code or 0)
    setup_logging(args.verbosity)
    if args.ignored:
        log.info("ignoring positional arguments %s", args.ignored)
    notes, errors = vc_flags.check(args)
    for note in notes:
        log.info("%s", note)
    if errors:
        for e in errors:
            print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        runner = Runner(options_from_args(args))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - kubeconfig/in-cluster problems: say so, no traceback
        print(f"error: cannot reach the Kubernetes API: {exc}", file=sys.stderr)
        return 2

    def _terminate(signum: int, _frame: Any) -> None:
        log.info("signal %d: draining binds, releasing the lease", signum)
        runner.stop()

    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _terminate)
    try:
        return runner.run()
    except ListenError as exc:  # --listen-address / --healthz-address unusable: say so, exit 2
        print(f"error: {exc}", file=sys.stderr)
        return 2


# -- live reads for `quota` and `explain` --------------------------------------------------


def live_snapshot(
    kubeconfig: str | None,
    scheduler_names: Sequence[str],
    *,
    host: str | None = None,
    context: str | None = None,
) -> ClusterSnapshot:
    """The cluster's objects, listed once (no watch), as a snapshot; the same objects ``run``'s
    informers would hold."""
    kube = Kube(connect(kubeconfig, host=host, context=context, pool_size=4))
    try:
        return build_snapshot(list_once(kube), scheduler_names=scheduler_names, strict_kinds=False)
    finally:
        kube.conn.close()


def quota_report(
    snapshot: ClusterSnapshot, config: SchedulerConfig, scheduler_names: Sequence[str]
) -> tuple[Session, QuotaReport]:
    """OBS-2: a session opened and closed without actions, i.e. the cluster as it is, read with
    the scheduler's own rules."""
    ssn = open_session(snapshot, config, scheduler_names=scheduler_names)
    ssn.close()
    return ssn, report(ssn)


# -- the live read of `simulate --from-cluster` ----------------------------------------------




def find_config_map(kube: Kube, refs: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
    """The first of the ConfigMaps ``ns/name`` that exists, with its name; None when none does.
    A ConfigMap that may not be read raises ``PermissionError`` naming it."""
    from kubernetes.client.exceptions import ApiException

    for ref in refs:
        ns, _, name = ref.partition("/")
        try:
            return ref, kube.get(f"/api/v1/namespaces/{ns}/configmaps/{name}")
        except ApiException as exc:
            if exc.status == 404:
                continue
            if exc.status in (401, 403):
                raise PermissionError(
                    f"ConfigMap {ref} may not be read with these credentials ({exc.status} {exc.reason}): "
                    "use a kubeconfig that may get it, or give the config with --config FILE"
                ) from None
            raise
    return None


def read_cluster(
    kubeconfig: str | None, *, config_maps: Sequence[str] = (), host: str | None = None, context: str | None = None
) -> tuple[list[dict[str, Any]], tuple[str, dict[str, Any]] | None, str]:
    """The cluster's objects (the lists ``quota`` makes), the first of ``config_maps`` that
    exists with its name (None when none does), and the API server's URL. Read-only."""
    kube = Kube(connect(kubeconfig, host=host, context=context, pool_size=4))
    try:
        objects = list_once(kube)
        found = find_config_map(kube, config_maps) if config_maps else None
        return objects, found, kube.conn.host
    finally:
        kube.conn.close()


def live_config_text(kubeconfig: str, config_maps: Sequence[str] = CONFIG_MAPS) -> tuple[str | None, str]:
    """``explain``/``quota --kubeconfig`` without ``--config``: the scheduler config text where
    the cluster keeps it and a description of where that was; (None, why) when the cluster
    keeps none, and the default ``run`` uses applies."""
    kube = Kube(connect(kubeconfig, pool_size=1))
    try:
        found = find_config_map(kube, config_maps)
    finally:
        kube.conn.close()
    if found is None:
        return None, "no ConfigMap " + " or ".join(config_maps)
    ref, cm = found
    data = cm.get("data") or {}
    if not isinstance(data, dict):
        raise ValueError(f"ConfigMap {ref}: data is not a mapping")
    if CONFIG_KEY in data:
        return str(data[CONFIG_KEY]), f"ConfigMap {ref}"
    if len(data) == 1:  # the chart's and Volcano's use CONFIG_KEY; a hand-made one may not
        return str(next(iter(data.values()))), f"ConfigMap {ref}"
    raise ValueError(f"ConfigMap {ref}: no key {CONFIG_KEY!r} (it has {', '.join(sorted(data)) or 'none'})")
