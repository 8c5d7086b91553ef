"""The scheduling core's entry points: one session over a snapshot with a config.

``tidesched schedule``, the scenario tests, the simulator and the Kubernetes mode all call
:func:`run_session`, so they make the very same decisions (RUN-4).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Sequence

from tidesched.framework.arguments import Arguments
from tidesched.framework.config import SchedulerConfig, default_config, load_config, load_config_file
from tidesched.framework.decisions import Decisions
from tidesched.framework.features import FeatureGates
from tidesched.framework.plugin import Plugin
from tidesched.framework.session import Session
from tidesched.framework.usage_source import usage_source_conf
from tidesched.framework import predicate_cache
from tidesched.model.loader import Manifest
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME, ClusterSnapshot, build_snapshot
from tidesched.model.state import SessionState

# The registries, by the names a config uses. Volcano's framework keeps them and
# actions/factory.go and plugins/factory.go fill them; here the scheduler owns them and the
# framework never imports an action or a plugin. Filled on first use (``load_registries``).
ACTIONS: dict[str, Callable[[Session], None]] = {}
# Per action, a function that reads (and so validates) every argument of its
# ``configurations`` entry; run when a config is loaded (CONF-3), not only in a session.
ARGUMENT_CHECKS: dict[str, Callable[[Arguments], object]] = {}
PLUGINS: dict[str, type[Plugin]] = {}
_loaded = False


def load_registries() -> None:
    """Import every action and plugin module once per process and register them (a test may
    add its own plugins to ``PLUGINS`` before or after)."""
    global _loaded
    if _loaded:
        return
    from tidesched.actions import allocate, backfill, enqueue, gangpreempt, gangreclaim, preempt, shuffle
    from tidesched.actions.gang_evict import GangEvictOptions
    from tidesched.actions.reclaim import action as reclaim
    from tidesched.plugins import (
        bestfit,
        binpack,
        capacity,
        capacity_card,
        cardprotect,
        cdp,
        conformance,
        deviceshare,
        dotprod,
        drf,
        extender,
        fgd,
        gang,
        gpuclustering,
        gpupacking,
        network_topology_aware,
        nodegroup,
        nodeorder,
        numa_aware,
        overcommit,
        pdb,
        predicates,
        priority,
        proportion,
        random_node,
        rescheduling,
        resource_strategy_fit,
        resourcequota,
        sla,
        task_topology,
        tdm,
        usage,
    )

    ACTIONS.update({"enqueue": enqueue.execute, "allocate": allocate.execute, "backfill": backfill.execute,
                    "preempt": preempt.execute, "reclaim": reclaim.execute})
    ACTIONS.update({"shuffle": shuffle.execute, "gangpreempt": gangpreempt.execute,
                    "gangreclaim": gangreclaim.execute})
    ARGUMENT_CHECKS.update({"gangpreempt": GangEvictOptions.from_arguments,
                            "gangreclaim": GangEvictOptions.from_arguments})
    ARGUMENT_CHECKS.update({"preempt": preempt.PreemptOptions.from_arguments, "reclaim": reclaim.gang_safe})
    ARGUMENT_CHECKS["allocate"] = predicate_cache.check_arguments
    for cls in (
        priority.PriorityPlugin, gang.GangPlugin, conformance.ConformancePlugin, predicates.PredicatesPlugin,
        nodeorder.NodeOrderPlugin, binpack.BinpackPlugin, drf.DrfPlugin, proportion.ProportionPlugin,
        overcommit.OvercommitPlugin, capacity.CapacityPlugin, capacity_card.CapacityCardPlugin,
        nodegroup.NodeGroupPlugin, cardprotect.CardProtectPlugin, sla.SlaPlugin,
        deviceshare.DeviceSharePlugin, network_topology_aware.NetworkTopologyAwarePlugin,
        pdb.PdbPlugin, cdp.CdpPlugin, tdm.TdmPlugin, task_topology.TaskTopologyPlugin,
        # Volcano v1.15.1's further plugins
        resource_strategy_fit.ResourceStrategyFitPlugin, resourcequota.ResourceQuotaPlugin, usage.UsagePlugin,
        rescheduling.ReschedulingPlugin, numa_aware.NumaAwarePlugin, extender.ExtenderPlugin,
        # the FGD paper's GPU placement policies (plugins/gpu_policy.py)
        fgd.FgdPlugin, random_node.RandomPlugin, dotprod.DotProdPlugin, gpuclustering.GpuClusteringPlugin,
        gpupacking.GpuPackingPlugin, bestfit.BestFitPlugin,
    ):
        assert cls.name and PLUGINS.get(cls.name, cls) is cls, cls.name
        PLUGINS[cls.name] = cls
    _loaded = True


def tune_gc() -> None:
    """Collect cyclic garbage less often. A scheduler holds hundreds of thousands of long-lived
    objects (parsed records, infos) and allocates as many per session; with the default
    thresholds the collector walks that heap over and over, and a cache fill or a session
    open spends about 40% of its time in it. Cycles still go, just in fewer, larger sweeps.
    The command line calls this; library users may."""
    gc.set_threshold(50_000, 20, 100)


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while a session's input is taken in and decided. Parsing
    and a session make few reference cycles, yet every sweep walks all that they allocate
    (about 0.3 s of a 20,000-pod ``schedule``, and 0.13 s before a 10,000-pod first session's
    first bind). The collector is back on afterwards and takes what the session left."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def known_actions() -> list[str]:
    load_registries()
    return sorted(ACTIONS)


def known_plugins() -> list[str]:
    load_registries()
    return sorted(PLUGINS)


def validate_arguments(config: SchedulerConfig) -> SchedulerConfig:
    """Read every plugin's and action's arguments once, so that a bad one is refused when
    the config is loaded, with its line and field, rather than in a session (CONF-3)."""
    load_registries()
    for tier in config.tiers:
        for opt in tier.plugins:
            args = opt.args
            try:
                PLUGINS[opt.name].validate_arguments(args)
                notes = PLUGINS[opt.name].unhonoured(args)
            except Exception as exc:  # noqa: BLE001 - REL-1: a message with file and field, no traceback
                raise args.locate(exc) from None
            config.warnings.extend(f"plugin {opt.name}: not honoured yet: {note}" for note in notes)
    usage_source_conf(config.metrics, config.source)  # the metrics source (CONF-3)
    for name in config.actions:
        check = ARGUMENT_CHECKS.get(name)
        if check is not None:
            args = config.action_arguments(name)
            try:
                checked = check(args)
            except Exception as exc:  # noqa: BLE001
                raise args.locate(exc) from None
            config.warnings.extend(getattr(checked, "warnings", ()))
    return config


# Where a cluster keeps the scheduler config, in the order looked at when none is named:
# tidesched's ConfigMap (deploy/, the Helm chart's default release), then Volcano's (its Helm
# chart's), which a tidesched replacing vc-scheduler reads; and the key both charts use.
CONFIG_MAPS = ("volcano-system/tidesched-scheduler-configmap", "volcano-system/volcano-scheduler-configmap")
CONFIG_KEY = "volcano-scheduler.conf"


def config_from_text(text: str, source: str = "<config>") -> SchedulerConfig:
    config = load_config(text, source, known_actions=known_actions(), known_plugins=known_plugins())
    return validate_arguments(config)


def config_from_file(path: str | Path | None) -> SchedulerConfig:
    """The scheduler config in ``path``, or Volcano's built-in default when None."""
    if path is None:
        return default_config(known_actions=known_actions(), known_plugins=known_plugins())
    config = load_config_file(path, known_actions=known_actions(), known_plugins=known_plugins())
    return validate_arguments(config)


def open_session(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    *,
    scheduler_names: Sequence[str] = (DEFAULT_SCHEDULER_NAME,),
    uid: str = "session",
    now: float = 0.0,
    state: SessionState | None = None,
    features: FeatureGates | None = None,
) -> Session:
    """A session over ``snapshot``; with ``state`` (a cache's infos for that snapshot) it opens
    on those instead of building them. ``features``: the feature gates (``--feature-gates``)."""
    load_registries()
    return Session(snapshot, config, plugins=PLUGINS, scheduler_names=scheduler_names, uid=uid, now=now, state=state,
                   features=features)


def run_actions(ssn: Session, on_action: Callable[[str, float], None] | None = None) -> Decisions:
    """Run the configured actions over the session in order, then close it. ``on_action``,
    when given, is called after each action with its name and its duration in seconds
    (metrics), so no caller needs its own copy of the loop."""
    load_registries()
    for name in ssn.config.actions:
        t0 = time.perf_counter()
        ACTIONS[name](ssn)
        if on_action is not None:
            on_action(name, time.perf_counter() - t0)
    return ssn.close()


def run_session(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    *,
    scheduler_names: Sequence[str] = (DEFAULT_SCHEDULER_NAME,),
    uid: str = "session",
    now: float = 0.0,
    state: SessionState | None = None,
    features: FeatureGates | None = None,
) -> Decisions:
    ssn = open_session(snapshot, config, scheduler_names=scheduler_names, uid=uid, now=now, state=state,
                       features=features)
    decisions = run_actions(ssn)
    ssn.release()  # nothing but the decisions is kept: freed at once, not by the cyclic collector
    return decisions


def schedule_manifests(
    manifests: Iterable[Manifest],
    config: SchedulerConfig,
    *,
    scheduler_names: Sequence[str] = (DEFAULT_SCHEDULER_NAME,),
    now: float = 0.0,
    features: FeatureGates | None = None,
    ignored_provisioners: Sequence[str] = (),
) -> tuple[Session, Decisions]:
    """What ``tidesched schedule`` does after loading its inputs (``now``: the session's time,
    seconds since the epoch)."""
    snapshot = build_snapshot(
        manifests, scheduler_names=scheduler_names, ignored_provisioners=ignored_provisioners
    )
    ssn = open_session(snapshot, config, scheduler_names=scheduler_names, now=now, features=features)
    return ssn, run_actions(ssn)
