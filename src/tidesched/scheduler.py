"""The scheduling core's entry points: one session over a snapshot with a config.

``tidesched schedule``, the scenario tests, the simulator and the Kubernetes mode all call
:func:`run_session`, so they make the very same decisions (RUN-4).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Sequence

from tidesched.actions import ACTIONS, ARGUMENT_CHECKS, load_all as load_actions
from tidesched.framework.config import SchedulerConfig, default_config, load_config, load_config_file
from tidesched.framework.session import Decisions, Session
from tidesched.model.loader import Manifest
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME, ClusterSnapshot, build_snapshot
from tidesched.model.state import SessionState
from tidesched.plugins import load_all as load_plugins


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
    load_actions()
    return sorted(ACTIONS)


def known_plugins() -> list[str]:
    return sorted(load_plugins())


def validate_arguments(config: SchedulerConfig) -> SchedulerConfig:
    """Read every plugin's and action's arguments once, so that a bad one is refused when
    the config is loaded, with its line and field, rather than in a session (CONF-3)."""
    plugins = load_plugins()
    for tier in config.tiers:
        for opt in tier.plugins:
            args = opt.args
            try:
                plugins[opt.name].validate_arguments(args)
            except Exception as exc:  # noqa: BLE001 - REL-1: a message with file and field, no traceback
                raise args.locate(exc) from None
    for name in config.actions:
        check = ARGUMENT_CHECKS.get(name)
        if check is not None:
            args = config.action_arguments(name)
            try:
                check(args)
            except Exception as exc:  # noqa: BLE001
                raise args.locate(exc) from None
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
) -> Session:
    """A session over ``snapshot``; with ``state`` (a cache's infos for that snapshot) it opens
    on those instead of building them."""
    load_actions()
    load_plugins()
    return Session(snapshot, config, scheduler_names=scheduler_names, uid=uid, now=now, state=state)


def run_session(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    *,
    scheduler_names: Sequence[str] = (DEFAULT_SCHEDULER_NAME,),
    uid: str = "session",
    now: float = 0.0,
    state: SessionState | None = None,
) -> Decisions:
    ssn = open_session(snapshot, config, scheduler_names=scheduler_names, uid=uid, now=now, state=state)
    decisions = ssn.run()
    ssn.release()  # nothing but the decisions is kept: freed at once, not by the cyclic collector
    return decisions


def schedule_manifests(
    manifests: Iterable[Manifest],
    config: SchedulerConfig,
    *,
    scheduler_names: Sequence[str] = (DEFAULT_SCHEDULER_NAME,),
    now: float = 0.0,
) -> tuple[Session, Decisions]:
    """What ``tidesched schedule`` does after loading its inputs (``now``: the session's time,
    seconds since the epoch)."""
    snapshot = build_snapshot(manifests, scheduler_names=scheduler_names)
    ssn = open_session(snapshot, config, scheduler_names=scheduler_names, now=now)
    return ssn, ssn.run()
