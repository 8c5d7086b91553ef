"""Command line: ``tidesched schedule`` and ``tidesched explain`` (RUN-2).

Bad input (unreadable YAML, unknown kinds, invalid objects, a bad scheduler config) ends with
a message naming the file/object/field and exit code 2 — never a traceback.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from tidesched.explain.pod import explain_lines
from tidesched.framework.arguments import ConfigError
from tidesched.framework.decisions import Decisions
from tidesched.framework.session import Session
from tidesched.model.loader import InputError, load_paths
from tidesched.model.snapshot import DEFAULT_SCHEDULER_NAME, UnknownKindError, build_snapshot
from tidesched.scheduler import collector_paused, config_from_file, open_session, run_actions, tune_gc

app = typer.Typer(add_completion=False, no_args_is_help=True, help="tidesched: a Volcano-compatible batch scheduler.")
out = Console()
err = Console(stderr=True)


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


def _fail(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(2)


def _session_time(now: Optional[str]) -> float:
    """``--now`` (RFC 3339, with its zone) as seconds since the epoch; the current time when
    not given."""
    if now is None:
        return time.time()
    try:
        when = datetime.fromisoformat(now.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        _fail(f"--now: {now!r} is not an RFC 3339 time (e.g. 2026-01-31T12:00:00Z)")
        raise
    if when.tzinfo is None:
        _fail(f"--now: {now!r} has no time zone (end it with Z or an offset such as +08:00)")
    return when.timestamp()


def _prepare(paths: list[Path], config: Optional[Path], scheduler_names: list[str], skip_invalid: bool,
             now: float = 0.0) -> Session:
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
    return open_session(snapshot, cfg, scheduler_names=scheduler_names, now=now)


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
KubeconfigOpt = Annotated[
    Optional[Path], typer.Option("--kubeconfig", help="Read the objects from a live cluster instead of files.")
]


@app.command()
def schedule(
    paths: PathsArg,
    config: ConfigOpt = None,
    output: Annotated[OutputFormat, typer.Option("--format", "-o", help="Output format.")] = OutputFormat.table,
    scheduler_name: NamesOpt = [DEFAULT_SCHEDULER_NAME],  # noqa: B006 - typer reads the default
    skip_invalid: SkipOpt = False,
    now: NowOpt = None,
) -> None:
    """Run one scheduling session over manifests and print its decisions."""
    with collector_paused():
        ssn = _prepare(paths, config, scheduler_name, skip_invalid, _session_time(now))
        decisions = run_actions(ssn)
        if _own_process:
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
) -> None:
    """Say why a pod would stay pending (or where it would go); with NAMESPACE/podgroup/NAME or
    NAMESPACE/job/NAME (a Volcano Job), why a gang waits: its gang condition, task roles, queue
    quota per card model and the top node reasons of its pending pods."""
    from tidesched.explain.group import TargetError, explain_group, parse_target

    try:
        target = parse_target(pod)
    except TargetError as exc:
        _fail(str(exc))
        return
    ssn = _prepare_any(paths, config, scheduler_name, skip_invalid, kubeconfig, _session_time(now))
    if target.kind != "pod":
        try:
            lines = explain_group(ssn, target)
        except TargetError as exc:
            _fail(str(exc))
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
        _fail(f"pod {pod} is not scheduled by this scheduler: {msg}")
        return
    for line in explain_lines(ssn, decisions, pod):
        out.print(line, highlight=False, soft_wrap=True)


# -- Kubernetes mode (issue 6): run, quota, explain --kubeconfig -----------------------------


def _prepare_any(paths: Optional[list[Path]], config: Optional[Path], scheduler_names: list[str],
                 skip_invalid: bool, kubeconfig: Optional[Path], now: float = 0.0) -> Session:
    """``_prepare`` over manifests, or over a live cluster's objects with ``--kubeconfig``."""
    if kubeconfig is None:
        if not paths:
            _fail("give manifest files/directories, or --kubeconfig for a live cluster")
        return _prepare(paths or [], config, scheduler_names, skip_invalid, now)
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
        _fail(str(exc))
        raise
    except Exception as exc:  # noqa: BLE001 - unreachable cluster, bad kubeconfig: one line, no traceback
        _fail(f"cannot read the cluster: {exc}")
        raise
    for p in snapshot.problems:
        err.print(f"[yellow]warning:[/] {p.message}", highlight=False)
    return open_session(snapshot, cfg, scheduler_names=scheduler_names, now=now)


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

    ssn = _prepare_any(paths, config, scheduler_name, skip_invalid, kubeconfig, time.time())
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
            t.add_row(q, res, "-" if u.quota is None else _amount(res, u.quota), _amount(res, u.used),
                      _amount(res, u.inqueue), _amount(res, u.pending))
    out.print(t)


def _amount(resource: str, value: float) -> str:
    if resource == "memory":
        from tidesched.model.quantity import format_memory

        return format_memory(round(value))
    return f"{value:g}"


# -- Simulator (issue 5): simulate ------------------------------------------------------------


def _trace_scenario(
    trace: Path, pods: str | None, compression: float, fill: bool, limit: int | None, seed: int,
    config: Path | None,
) -> Any:
    """The scenario of ``simulate --trace``: the pod list found as given, in the trace directory or
    in its csv/ directory."""
    from tidesched.sim import ScenarioError
    from tidesched.sim.trace import TraceError, trace_scenario

    if not (trace / "csv").is_dir():
        _fail(f"{trace}: not a trace directory (no csv/ in it)")
    source = trace
    if pods is not None:
        found = [p for p in (trace / pods, trace / "csv" / pods, Path(pods)) if p.is_file()]
        if not found:
            _fail(f"pod list {pods!r} not found in {trace}, {trace / 'csv'} or as a path")
        source = found[0]
    if compression <= 0:
        _fail(f"--compression must be positive, got {compression}")
    try:
        sc, _summary = trace_scenario(
            source, fill=fill, time_compression=compression, limit=limit, seed=seed, config_path=config,
            name=f"trace {trace.name}" + (f" ({Path(pods).name})" if pods else ""),
        )
    except (TraceError, ScenarioError, ConfigError, OSError) as exc:
        _fail(str(exc))
    return sc


@app.command("simulate")
def simulate_cmd(
    scenario: Annotated[
        Optional[Path],
        typer.Argument(help="Scenario file, a directory holding scenario.yaml, or manifests "
                            "(default: the bundled tidal-day example)."),
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", help="Directory for result.json and report.html.")
    ] = Path("tidesched-report"),
    seed: Annotated[int, typer.Option("--seed", help="Seed of the simulator's random choices.")] = 0,
    config: Annotated[
        Optional[Path],
        typer.Option("--config", "-c", help="Volcano scheduler config (overrides the scenario's)."),
    ] = None,
    progress: Annotated[
        Optional[bool],
        typer.Option("--progress/--no-progress", help="Progress bar (default: on a terminal)."),
    ] = None,
    trace: Annotated[
        Optional[Path],
        typer.Option("--trace", help="Replay a trace directory in the Alibaba GPU v2023 layout (csv/) instead of a scenario."),
    ] = None,
    pods: Annotated[
        Optional[str],
        typer.Option("--pods", help="The trace's pod list (default: openb_pod_list_default.csv); in DIR, DIR/csv or a path."),
    ] = None,
    compression: Annotated[
        float, typer.Option("--compression", help="Divide the trace's arrival gaps and run times by this.")
    ] = 1.0,
    fill: Annotated[
        bool, typer.Option("--fill/--no-fill", help="Submit every trace pod at t=0 (as FGD does) instead of at its arrival time.")
    ] = False,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Only the first N pods of the trace.")] = None,
    from_cluster: Annotated[
        bool, typer.Option("--from-cluster", help="What-if: start from the live cluster (read once, read-only).")
    ] = False,
    kubeconfig: Annotated[
        Optional[Path], typer.Option("--kubeconfig", help="With --from-cluster: the kubeconfig (default: in-cluster).")
    ] = None,
    from_dump: Annotated[
        Optional[Path],
        typer.Option("--from-dump", help="What-if: start from a dump (kubectl get nodes,pods,... -A -o yaml)."),
    ] = None,
    add: Annotated[
        Optional[list[Path]], typer.Option("--add", help="What-if: manifests submitted at t=0 (repeatable).")
    ] = None,
    for_: Annotated[
        Optional[str], typer.Option("--for", help="What-if: simulate this long (30m, 8h; default: until quiet).")
    ] = None,
    default_runtime: Annotated[
        str, typer.Option("--default-runtime", help="What-if: run time of pods without sim.tidesched.io/duration.")
    ] = "1h",
    config_map: Annotated[
        Optional[str],
        typer.Option("--config-map", help="What-if: the scheduler's ConfigMap, NAMESPACE/NAME (default: "
                                          "tidesched's, else Volcano's volcano-scheduler-configmap, else the "
                                          "default run uses)."),
    ] = None,
    chaos: Annotated[
        Optional[int],
        typer.Option("--chaos", help="Run the chaos scenario of this generator seed (random cluster, workload and "
                                     "faults); a failure is shrunk and written to OUT/reproduce.yaml."),
    ] = None,
    chaos_hours: Annotated[float, typer.Option("--chaos-hours", help="Simulated hours of a --chaos run.")] = 24.0,
    shrink: Annotated[
        bool, typer.Option("--shrink/--no-shrink", help="Shrink a failing --chaos scenario before writing it.")
    ] = True,
) -> None:
    """Simulate a scenario (or a trace) over time; write result.json and report.html; exit 1 if an
    invariant broke. With --from-cluster or --from-dump: what happens to the cluster if the --add
    manifests are submitted now."""
    import os

    from tidesched.sim import ScenarioError, bundled_example, load_scenario, result_json, run, summary_lines

    whatif: Any = None
    if from_cluster or from_dump is not None:
        whatif, sc = _whatif_input(from_cluster, from_dump, kubeconfig, add, for_, default_runtime, config,
                                   config_map, scenario, trace)
    elif add or for_ is not None or kubeconfig is not None:
        _fail("--add, --for and --kubeconfig apply to --from-cluster / --from-dump only")
    chaos_doc = None
    if whatif is not None:
        if chaos is not None:
            _fail("--chaos generates its own cluster; give it without --from-cluster / --from-dump")
            return
    elif chaos is not None:
        if scenario is not None or trace is not None or config is not None or pods or limit or fill or compression != 1.0:
            _fail("--chaos generates its own scenario and config; give no scenario, --trace or --config (nor trace options) with it")
            return
        if not 0 < chaos_hours <= 24 * 366:
            _fail(f"--chaos-hours must be positive (at most a year), got {chaos_hours}")
            return
        from tidesched.sim.chaos import dump_document, generate, to_scenario

        chaos_doc = generate(chaos, hours=chaos_hours).doc
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "scenario.yaml").write_text(
                dump_document(chaos_doc, f"Chaos scenario of generator seed {chaos}."), encoding="utf-8"
            )
        except OSError as exc:
            _fail(f"cannot write {out_dir / 'scenario.yaml'}: {exc}")
        sc = to_scenario(chaos_doc, str(out_dir / "scenario.yaml"))
    elif trace is not None:
        if scenario is not None:
            _fail("give a scenario or --trace, not both")
            return
        sc = _trace_scenario(trace, pods, compression, fill, limit, seed, config)
    else:
        if pods is not None or limit is not None or fill or compression != 1.0:
            _fail("--pods, --limit, --fill and --compression apply to --trace only")
            return
        path = scenario if scenario is not None else bundled_example()
        try:
            sc = load_scenario(path, config)
        except (ScenarioError, ConfigError) as exc:
            _fail(str(exc))
            return
    for w in sc.warnings:
        err.print(f"[yellow]warning:[/] {w}", highlight=False)
    show = progress if progress is not None else (out.is_terminal and not os.environ.get("CI"))
    if show:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn(f"simulating {sc.name}"), BarColumn(), TextColumn("{task.description}"),
                      TimeElapsedColumn(), console=out, transient=True) as bar:
            total = sc.duration or None
            task = bar.add_task("", total=total)

            def tick(t: float, end: float | None) -> None:
                when = f"t={t / 86400:.1f}d" if t >= 2 * 86400 else f"t={t / 3600:.2f}h"
                bar.update(task, completed=t if end else None, description=when)

            sim = run(sc, seed=seed, progress=tick) if whatif is None else _whatif_run(whatif, sc, seed, tick)
    else:
        sim = run(sc, seed=seed) if whatif is None else _whatif_run(whatif, sc, seed, None)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "result.json").write_text(result_json(sim.result), encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot write {out_dir / 'result.json'}: {exc}")
    wrote = [str(out_dir / "result.json")]
    report_error = ""
    try:
        from tidesched.sim.report import render_html
    except ImportError:
        render_html = None  # type: ignore[assignment]
        report_error = "HTML report not written: tidesched.sim.report is not available"
    if render_html is not None:
        try:
            (out_dir / "report.html").write_text(render_html(sim.result), encoding="utf-8")
            wrote.append(str(out_dir / "report.html"))
        except Exception as exc:  # noqa: BLE001 - the JSON result is still useful; say why
            report_error = f"HTML report not written: {type(exc).__name__}: {exc}"
    for line in summary_lines(sim):
        out.print(line, highlight=False, soft_wrap=True)
    if whatif is not None:
        from tidesched.sim.whatif import summary_lines as whatif_lines

        for line in whatif_lines(sim.result):
            out.print(line, highlight=False, soft_wrap=True)
    out.print("wrote " + ", ".join(wrote), highlight=False)
    if report_error:
        err.print(f"[yellow]warning:[/] {report_error}", highlight=False)
    if sim.failed and chaos_doc is not None:
        _chaos_reproducer(chaos, chaos_doc, sim, out_dir, seed, shrink)
    if sim.failed:
        err.print("[bold red]invariant violated[/] — see the list above and result.json", highlight=False)
        raise typer.Exit(1)


def _whatif_input(from_cluster: bool, from_dump: Optional[Path], kubeconfig: Optional[Path],
                  add: Optional[list[Path]], for_: Optional[str], default_runtime: str, config: Optional[Path],
                  config_map: Optional[str], scenario: Optional[Path], trace: Optional[Path]) -> tuple[Any, Any]:
    """``simulate --from-cluster / --from-dump``: the what-if's input and its scenario."""
    from tidesched.sim.vocabulary import ScenarioError, parse_duration
    from tidesched.sim.whatif import WhatIfError, from_cluster as read_live, from_dump as read_dump, scenario_of

    if from_cluster and from_dump is not None:
        _fail("give --from-cluster or --from-dump, not both")
    if scenario is not None or trace is not None:
        _fail("--from-cluster / --from-dump start from the cluster: give no scenario or --trace")
    if kubeconfig is not None and not from_cluster:
        _fail("--kubeconfig applies to --from-cluster")
    if config_map is not None and "/" not in config_map:
        _fail(f"--config-map: expected NAMESPACE/NAME, got {config_map!r}")
    try:
        options = {
            "horizon": parse_duration(for_, "--for") if for_ is not None else None,
            "default_runtime": parse_duration(default_runtime, "--default-runtime"),
        }
        if from_cluster:
            from tidesched.cluster.commands import read_cluster

            w = read_live(read_cluster, kubeconfig, add or [], config_path=config, config_map=config_map, **options)
        else:
            w = read_dump(from_dump, add or [], config_path=config, config_map=config_map, **options)  # type: ignore[arg-type]
        prepared = scenario_of(w)
    except (ScenarioError, WhatIfError, PermissionError) as exc:
        _fail(str(exc))
        raise
    except OSError as exc:
        _fail(f"cannot read {exc.filename or from_dump}: {exc.strerror or exc}")
        raise
    except Exception as exc:  # noqa: BLE001 - unreachable cluster, bad kubeconfig: one line, no traceback
        _fail(f"cannot read the cluster: {exc}")
        raise
    return (w, prepared), prepared[0]


def _whatif_run(whatif: Any, sc: Any, seed: int, progress: Any) -> Any:
    from tidesched.sim.whatif import run_whatif

    w, prepared = whatif
    return run_whatif(w, seed=seed, progress=progress, prepared=prepared)


def _chaos_reproducer(chaos: int, doc: Any, sim: Any, out_dir: Path, seed: int, shrink: bool) -> None:
    """A failed --chaos run: shrink the scenario while the same invariant fails; write it."""
    from tidesched.sim.chaos import ChaosOutcome, Generated, first_rule, shrink as shrink_doc, write_reproducer

    outcome = ChaosOutcome(Generated(chaos, doc), sim)
    rule = first_rule(sim) or ""
    if shrink:
        out.print(f"shrinking the scenario while {rule!r} still fails…", highlight=False)
        outcome.shrunk = shrink_doc(doc, rule, seed=seed)
        s = outcome.shrunk
        out.print(
            f"shrunk from {s.objects_before} objects and {s.events_before} events to {s.objects} objects and "
            f"{s.events} events ({s.runs} runs, {s.seconds:.1f}s)",
            highlight=False,
        )
    try:
        path = write_reproducer(outcome, out_dir / "reproduce.yaml", seed)
    except OSError as exc:
        _fail(f"cannot write {out_dir / 'reproduce.yaml'}: {exc}")
        return
    again = f"tidesched simulate {path}" + (f" --seed {seed}" if seed else "")
    out.print(f"wrote {path}; reproduce with: {again}", highlight=False)


_own_process = False  # set by main(): the command owns its process (not called in-process)


def main() -> None:
    global _own_process
    _own_process = True
    tune_gc()
    try:
        app()
    finally:
        # At exit the interpreter runs the cyclic collector over every object still alive:
        # after a session over 20,000 pods that walk costs about 0.6 s and frees nothing the
        # OS does not take back anyway. Frozen objects are out of the collector's sight.
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    main()
