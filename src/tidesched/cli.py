"""Command line: ``tidesched schedule`` and ``tidesched explain`` (RUN-2).

Bad input (unreadable YAML, unknown kinds, invalid objects, a bad scheduler config) ends with
a message naming the file/object/field and exit code 2 — never a traceback.
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from tidesched.framework.config import ConfigError
from tidesched.framework.session import Decisions, FitErrors, Session
from tidesched.model.loader import InputError, load_paths
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME, UnknownKindError, build_snapshot
from tidesched.model.status import TaskStatus
from tidesched.scheduler import config_from_file, open_session

app = typer.Typer(add_completion=False, no_args_is_help=True, help="tidesched: a Volcano-compatible batch scheduler.")
out = Console()
err = Console(stderr=True)


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


def _fail(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(2)


def _prepare(paths: list[Path], config: Optional[Path], scheduler_names: list[str], skip_invalid: bool) -> Session:
    try:
        cfg = config_from_file(config)
        manifests = load_paths(paths)
        snapshot = build_snapshot(manifests, scheduler_names=scheduler_names)
    except (ConfigError, InputError, UnknownKindError) as exc:
        _fail(str(exc))
        raise  # unreachable; keeps type checkers calm
    if snapshot.problems and not skip_invalid:
        _fail(
            "invalid objects (use --skip-invalid to schedule without them):\n  "
            + "\n  ".join(p.message for p in snapshot.problems)
        )
    for w in cfg.warnings:
        err.print(f"[yellow]warning:[/] {w}", highlight=False)
    return open_session(snapshot, cfg, scheduler_names=scheduler_names)


PathsArg = Annotated[list[Path], typer.Argument(help="YAML/JSON manifest files or directories.")]
ConfigOpt = Annotated[
    Optional[Path], typer.Option("--config", "-c", help="Volcano scheduler config (default: Volcano's built-in).")
]
NamesOpt = Annotated[
    list[str], typer.Option("--scheduler-name", help="schedulerName(s) this scheduler serves.")
]
SkipOpt = Annotated[bool, typer.Option("--skip-invalid", help="Skip malformed objects instead of failing.")]


@app.command()
def schedule(
    paths: PathsArg,
    config: ConfigOpt = None,
    output: Annotated[OutputFormat, typer.Option("--format", "-o", help="Output format.")] = OutputFormat.table,
    scheduler_name: NamesOpt = [DEFAULT_SCHEDULER_NAME],  # noqa: B006 - typer reads the default
    skip_invalid: SkipOpt = False,
) -> None:
    """Run one scheduling session over manifests and print its decisions."""
    ssn = _prepare(paths, config, scheduler_name, skip_invalid)
    decisions = ssn.run()
    if output == OutputFormat.json:
        sys.stdout.write(json.dumps(decisions.to_json(), indent=2, sort_keys=False) + "\n")
    else:
        _print_table(decisions)


def _print_table(d: Decisions) -> None:
    t = Table(title="Decisions", show_lines=False)
    t.add_column("pod")
    t.add_column("decision")
    t.add_column("node")
    for pod, node in sorted(d.bound.items()):
        t.add_row(pod, "bind", node)
    for pod, node in sorted(d.pipelined.items()):
        t.add_row(pod, "pipeline", node)
    for pod in sorted(d.evicted):
        t.add_row(pod, "evict", "")
    out.print(t)
    pg = Table(title="PodGroups")
    pg.add_column("podgroup")
    pg.add_column("phase")
    for name, phase in sorted(d.podgroups.items()):
        pg.add_row(name, phase)
    out.print(pg)
    if d.events:
        ev = Table(title="Events")
        for col in ("object", "type", "reason", "message"):
            ev.add_column(col, overflow="fold")
        for e in d.events:
            ev.add_row(f"{e.kind} {e.namespace + '/' if e.namespace else ''}{e.name}", e.type, e.reason, e.message)
        out.print(ev)
    out.print(f"{len(d.bound)} bound, {len(d.pipelined)} pipelined, {len(d.evicted)} evicted", highlight=False)


@app.command()
def explain(
    pod: Annotated[str, typer.Argument(help="The pod, as namespace/name.")],
    paths: PathsArg,
    config: ConfigOpt = None,
    scheduler_name: NamesOpt = [DEFAULT_SCHEDULER_NAME],  # noqa: B006
    skip_invalid: SkipOpt = False,
) -> None:
    """Say why a pod would stay pending (or where it would go)."""
    if "/" not in pod:
        pod = f"default/{pod}"
    ssn = _prepare(paths, config, scheduler_name, skip_invalid)
    task = next((t for t in ssn.tasks.values() if t.key == pod), None)
    decisions = ssn.run()
    if task is None:
        related = [e for e in decisions.events if f"{e.namespace}/{e.name}" == pod]
        msg = "; ".join(e.message for e in related) or "it is not a pod of this scheduler, or it is not in the input"
        _fail(f"pod {pod} is not scheduled by this scheduler: {msg}")
        return
    for line in explain_lines(ssn, decisions, pod):
        out.print(line, highlight=False, soft_wrap=True)


def explain_lines(ssn: Session, decisions: Decisions, pod: str) -> list[str]:
    """Human explanation for one pod from the session's structured reasons."""
    task = next(t for t in ssn.tasks.values() if t.key == pod)
    job = ssn.jobs[task.job]
    lines: list[str] = []
    if pod in decisions.bound:
        return [f"{pod} would be bound to node {decisions.bound[pod]}."]
    if pod in decisions.pipelined:
        return [f"{pod} would be pipelined onto node {decisions.pipelined[pod]} (waiting for resources being released)."]
    if task.status not in (TaskStatus.PENDING, TaskStatus.ALLOCATED):
        return [f"{pod} is {task.status.label()} on node {task.node_name or '-'}; nothing to schedule."]
    lines.append(f"{pod} stays pending.")
    lines.append(
        f"PodGroup {job.uid} (queue {job.queue}, phase {decisions.podgroups.get(job.uid)}): "
        f"{job.ready_task_num()} of minMember {job.min_available} tasks ready."
    )
    fe = job.fit_errors.get(task.uid)
    if isinstance(fe, FitErrors):
        lines.append("Nodes: " + fe.error())
    elif fe:
        lines.append(f"Gang: {fe}")
    for e in decisions.events:
        if (e.kind == "Pod" and f"{e.namespace}/{e.name}" == pod) or (
            e.kind == "PodGroup" and f"{e.namespace}/{e.name}" == job.uid
        ) or (e.kind == "Queue" and e.name == job.queue):
            lines.append(f"{e.kind} event {e.reason}: {e.message}")
    return lines


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
