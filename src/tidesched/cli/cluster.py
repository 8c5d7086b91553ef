"""``tidesched run`` (RUN-3: schedule a real cluster, flags as vc-scheduler's) and ``tidesched
quota`` (OBS-2: per queue and card model, by the scheduler's own rules)."""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated

import typer
from rich.table import Table

from tidesched.cli.common import (
    ConfigOpt,
    KubeconfigOpt,
    NamesOpt,
    OptionalPathsArg,
    OutputFormat,
    SkipOpt,
    app,
    out,
    prepare_any,
)
from tidesched.model.quantity import format_natural
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME


@app.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
def run(ctx: typer.Context) -> None:
    """Schedule a real cluster through the Kubernetes API (flags as vc-scheduler's; run --help)."""
    from tidesched.cluster.commands import run_main

    raise typer.Exit(run_main(ctx.args))


@app.command()
def quota(
    paths: OptionalPathsArg = None,
    kubeconfig: KubeconfigOpt = None,
    config: ConfigOpt = None,
    output: Annotated[OutputFormat, typer.Option("--format", "-o", help="Output format.")] = OutputFormat.table,
    scheduler_name: NamesOpt = [DEFAULT_SCHEDULER_NAME],  # noqa: B006
    skip_invalid: SkipOpt = False,
) -> None:
    """Per queue and card model: quota, used, inqueue, pending, by the scheduler's own rules (OBS-2)."""
    from tidesched.explain.quota import report

    ssn = prepare_any(paths, config, scheduler_name, skip_invalid, kubeconfig, time.time())
    ssn.close()  # no actions: the cluster as it is
    rep = report(ssn)
    if output == OutputFormat.json:
        sys.stdout.write(json.dumps(rep.to_json(), indent=2) + "\n")
        return
    t = Table(title=f"Queue quota and usage ({rep.source})")
    for col in ("queue", "resource", "quota", "used", "inqueue", "pending"):
        t.add_column(col, justify="left" if col in ("queue", "resource") else "right")
    for q, per_res in sorted(rep.queues.items()):
        for res, u in per_res.items():
            t.add_row(q, res, format_natural(res, u.quota), format_natural(res, u.used),
                      format_natural(res, u.inqueue), format_natural(res, u.pending))
    out.print(t)

