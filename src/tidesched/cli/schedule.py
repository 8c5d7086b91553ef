"""``tidesched schedule`` and ``tidesched explain`` (RUN-2): one session over manifests (or a live
cluster's objects), its decisions, or why a pod or a gang waits."""

from __future__ import annotations

import gc
import json
import sys
from typing import Annotated

import typer
from rich.table import Table

from tidesched.cli.common import (
    RUN,
    ConfigOpt,
    FeaturesOpt,
    IgnoredProvisionersOpt,
    KubeconfigOpt,
    NamesOpt,
    NowOpt,
    OptionalPathsArg,
    OutputFormat,
    PathsArg,
    SkipOpt,
    app,
    fail,
    feature_gates,
    out,
    prepare,
    prepare_any,
    session_time,
)
from tidesched.explain.pod import explain_lines
from tidesched.framework.decisions import Decisions
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME
from tidesched.scheduler import collector_paused, run_actions


@app.command()
def schedule(
    paths: PathsArg,
    config: ConfigOpt = None,
    output: Annotated[OutputFormat, typer.Option("--format", "-o", help="Output format.")] = OutputFormat.table,
    scheduler_name: NamesOpt = [DEFAULT_SCHEDULER_NAME],  # noqa: B006 - typer reads the default
    skip_invalid: SkipOpt = False,
    now: NowOpt = None,
    features: FeaturesOpt = None,
    ignored_provisioners: IgnoredProvisionersOpt = None,
) -> None:
    """Run one scheduling session over manifests and print its decisions."""
    gates = feature_gates(features)
    with collector_paused():
        ssn = prepare(paths, config, scheduler_name, skip_invalid, session_time(now), gates, ignored_provisioners)
        decisions = run_actions(ssn)
        if RUN.own_process:
            # The process ends after the output, so nothing the session made needs collecting;
            # frozen, it is not walked by the first sweep once the collector is back on
            # (about 0.4 s after a 20,000-pod session).
            gc.freeze()
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
    for pod in sorted(d.ungated):
        t.add_row(pod, "remove queue-admission gate", "")
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
    pod: Annotated[str, typer.Argument(
        help="The pod (namespace/name), or namespace/podgroup/NAME, or namespace/job/NAME (a Volcano Job).")],
    paths: OptionalPathsArg = None,
    config: ConfigOpt = None,
    scheduler_name: NamesOpt = [DEFAULT_SCHEDULER_NAME],  # noqa: B006
    skip_invalid: SkipOpt = False,
    kubeconfig: KubeconfigOpt = None,
    now: NowOpt = None,
    features: FeaturesOpt = None,
    ignored_provisioners: IgnoredProvisionersOpt = None,
) -> None:
    """Say why a pod would stay pending (or where it would go); with NAMESPACE/podgroup/NAME or
    NAMESPACE/job/NAME (a Volcano Job), why a gang waits: its gang condition, task roles, queue
    quota per card model and the top node reasons of its pending pods."""
    from tidesched.explain.group import TargetError, explain_group, parse_target

    try:
        target = parse_target(pod)
    except TargetError as exc:
        fail(str(exc))
        return
    ssn = prepare_any(paths, config, scheduler_name, skip_invalid, kubeconfig, session_time(now),
                      feature_gates(features), ignored_provisioners)
    if target.kind != "pod":
        try:
            lines = explain_group(ssn, target)
        except TargetError as exc:
            fail(str(exc))
            return
        for line in lines:
            out.print(line, highlight=False, soft_wrap=True)
        return
    pod = f"{target.namespace}/{target.name}"
    task = next((t for t in ssn.tasks.values() if t.key == pod), None)
    decisions = run_actions(ssn)
    if task is None:
        related = [e for e in decisions.events if f"{e.namespace}/{e.name}" == pod]
        msg = "; ".join(e.message for e in related) or "it is not a pod of this scheduler, or it is not in the input"
        fail(f"pod {pod} is not scheduled by this scheduler: {msg}")
        return
    for line in explain_lines(ssn, decisions, pod):
        out.print(line, highlight=False, soft_wrap=True)
