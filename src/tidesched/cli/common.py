"""What every command shares: the typer ``app`` the commands register on, the consoles, the one
way to fail (a message naming the file/object/field and exit code 2, never a traceback), the
option types, and reading the input of one session from manifests or a live cluster."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from tidesched.framework.features import FeatureGates, parse_feature_gates
from tidesched.framework.arguments import ConfigError
from tidesched.framework.session import Session
from tidesched.model.loader import InputError, load_paths
from tidesched.model.snapshot import UnknownKindError, build_snapshot
from tidesched.scheduler import config_from_file, open_session

app = typer.Typer(add_completion=False, no_args_is_help=True, help="tidesched: a Volcano-compatible batch scheduler.")
out = Console()
err = Console(stderr=True)


@dataclass
class _Run:
    # Set by main(): the command owns its process (it is not called in-process by a test).
    own_process: bool = False


RUN = _Run()


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


def fail(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(2)


def session_time(now: Optional[str]) -> float:
    """``--now`` (RFC 3339, with its zone) as seconds since the epoch; the current time when
    not given."""
    if now is None:
        return time.time()
    try:
        when = datetime.fromisoformat(now.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        fail(f"--now: {now!r} is not an RFC 3339 time (e.g. 2026-01-31T12:00:00Z)")
        raise
    if when.tzinfo is None:
        fail(f"--now: {now!r} has no time zone (end it with Z or an offset such as +08:00)")
    return when.timestamp()


def feature_gates(text: Optional[str]) -> FeatureGates:
    """``--feature-gates``; a bad item ends the command naming it."""
    try:
        gates = parse_feature_gates(text)
    except ValueError as exc:
        fail(f"--feature-gates: {exc}")
        raise
    for note in gates.notes():
        err.print(f"[yellow]warning:[/] {note}", highlight=False)
    return gates


def prepare(paths: list[Path], config: Optional[Path], scheduler_names: list[str], skip_invalid: bool,
            now: float = 0.0, features: FeatureGates | None = None,
            ignored_provisioners: Optional[list[str]] = None) -> Session:
    try:
        cfg = config_from_file(config)
        manifests = load_paths(paths)
        snapshot = build_snapshot(manifests, scheduler_names=scheduler_names,
                                  ignored_provisioners=provisioner_list(ignored_provisioners))
    except (ConfigError, InputError, UnknownKindError) as exc:
        fail(str(exc))
        raise  # unreachable; keeps type checkers calm
    if snapshot.problems and not skip_invalid:
        fail(
            "invalid objects (use --skip-invalid to schedule without them):\n  "
            + "\n  ".join(p.message for p in snapshot.problems)
        )
    for w in cfg.warnings:
        err.print(f"[yellow]warning:[/] {w}", highlight=False)
    return open_session(snapshot, cfg, scheduler_names=scheduler_names, now=now, features=features)


PathsArg = Annotated[list[Path], typer.Argument(help="YAML/JSON manifest files or directories.")]
ConfigOpt = Annotated[
    Optional[Path], typer.Option("--config", "-c", help="Volcano scheduler config (default: Volcano's built-in).")
]
NamesOpt = Annotated[
    list[str], typer.Option("--scheduler-name", help="schedulerName(s) this scheduler serves.")
]
SkipOpt = Annotated[bool, typer.Option("--skip-invalid", help="Skip malformed objects instead of failing.")]
NowOpt = Annotated[
    Optional[str],
    typer.Option("--now", help="The session's time, RFC 3339 (default: the current time); gang timeouts count to it."),
]
OptionalPathsArg = Annotated[
    Optional[list[Path]], typer.Argument(help="YAML/JSON manifest files or directories (or use --kubeconfig).")
]
FeaturesOpt = Annotated[
    Optional[str],
    typer.Option("--feature-gates", help="As vc-scheduler's flag, e.g. SchedulingGatesQueueAdmission=true."),
]
KubeconfigOpt = Annotated[
    Optional[Path], typer.Option("--kubeconfig", help="Read the objects from a live cluster instead of files.")
]
IgnoredProvisionersOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--ignored-provisioners",
        help="Provisioners whose volumes do not count against nodes' attach limits, as vc-scheduler's "
        "flag (comma-separated, repeatable; docs/volumes.md).",
    ),
]


def provisioner_list(values: Optional[list[str]]) -> list[str]:
    """``--ignored-provisioners`` as Go's string-slice flag reads it: repeatable, comma-separated."""
    return [p.strip() for v in values or () for p in v.split(",") if p.strip()]


def prepare_any(paths: Optional[list[Path]], config: Optional[Path], scheduler_names: list[str],
                skip_invalid: bool, kubeconfig: Optional[Path], now: float = 0.0,
                features: FeatureGates | None = None,
                ignored_provisioners: Optional[list[str]] = None) -> Session:
    """``prepare`` over manifests, or over a live cluster's objects with ``--kubeconfig``."""
    if kubeconfig is None:
        if not paths:
            fail("give manifest files/directories, or --kubeconfig for a live cluster")
        return prepare(paths or [], config, scheduler_names, skip_invalid, now, features, ignored_provisioners)
    from tidesched.cluster.commands import live_config_text, live_snapshot
    from tidesched.scheduler import config_from_text

    try:
        if config is not None:
            cfg = config_from_file(config)
        else:
            # The config the cluster's scheduler reads: tidesched's ConfigMap, else Volcano's,
            # else the default run uses. Said on stderr, so stdout stays the report.
            text, where = live_config_text(str(kubeconfig))
            if text is None:
                cfg = config_from_file(None)
                err.print(f"scheduler config: the default tidesched run uses (Volcano's built-in; {where})",
                          highlight=False)
            else:
                cfg = config_from_text(text, where)
                err.print(f"scheduler config: {where}", highlight=False)
        snapshot = live_snapshot(str(kubeconfig), scheduler_names)
    except ConfigError as exc:
        fail(str(exc))
        raise
    except Exception as exc:  # noqa: BLE001 - unreachable cluster, bad kubeconfig: one line, no traceback
        fail(f"cannot read the cluster: {exc}")
        raise
    for p in snapshot.problems:
        err.print(f"[yellow]warning:[/] {p.message}", highlight=False)
    snapshot.ignored_provisioners = frozenset(provisioner_list(ignored_provisioners))
    return open_session(snapshot, cfg, scheduler_names=scheduler_names, now=now, features=features)
