"""``tidesched simulate`` (RUN-1): a scenario, a trace (``--trace``), a chaos seed (``--chaos``)
or a what-if over the live cluster or a dump (``--from-cluster``, ``--from-dump``) over
simulated time; writes ``result.json`` and ``report.html``, exit 1 if an invariant broke."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from tidesched.cli.common import app, err, fail, out
from tidesched.framework.arguments import ConfigError


def _trace_scenario(
    trace: Path, pods: str | None, compression: float, fill: bool, limit: int | None, seed: int,
    config: Path | None, gpu_sharing: str = "vgpu",
) -> Any:
    """The scenario of ``simulate --trace``: the pod list found as given, in the trace directory or
    in its csv/ directory."""
    from tidesched.sim import ScenarioError
    from tidesched.sim.trace import TraceError, trace_scenario

    if not (trace / "csv").is_dir():
        fail(f"{trace}: not a trace directory (no csv/ in it)")
    source = trace
    if pods is not None:
        found = [p for p in (trace / pods, trace / "csv" / pods, Path(pods)) if p.is_file()]
        if not found:
            fail(f"pod list {pods!r} not found in {trace}, {trace / 'csv'} or as a path")
        source = found[0]
    if compression <= 0:
        fail(f"--compression must be positive, got {compression}")
    try:
        sc, _summary = trace_scenario(
            source, fill=fill, time_compression=compression, limit=limit, seed=seed, config_path=config,
            name=f"trace {trace.name}" + (f" ({Path(pods).name})" if pods else ""), gpu_sharing=gpu_sharing,
        )
    except (TraceError, ScenarioError, ConfigError, OSError) as exc:
        fail(str(exc))
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
    gpu_sharing: Annotated[
        str, typer.Option("--gpu-sharing", help="How the trace shares GPUs: vgpu (per-device, Volcano deviceshare) "
                                                "mps (whole nodes of MPS replicas) or dra (DRA devices and ResourceClaims).")
    ] = "vgpu",
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
    topology: Annotated[
        Optional[str],
        typer.Option("--topology", help="Put the nodes (GPU nodes, if any) in a generated fat-tree of HyperNodes: "
                                        "NODESxLEAVES, nodes per leaf x leaves per spine (e.g. 4x2)."),
    ] = None,
    gang_topology: Annotated[
        Optional[str],
        typer.Option("--gang-topology", help="Give every gang this network-topology constraint: hard:TIER, "
                                             "soft[:TIER] or none (needs network-topology-aware in the config)."),
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
        fail("--add, --for and --kubeconfig apply to --from-cluster / --from-dump only")
    chaos_doc = None
    if whatif is not None:
        if chaos is not None:
            fail("--chaos generates its own cluster; give it without --from-cluster / --from-dump")
            return
    elif chaos is not None:
        trace_options = pods or limit or fill or compression != 1.0 or gpu_sharing != "vgpu"
        if scenario is not None or trace is not None or config is not None or trace_options:
            fail("--chaos generates its own scenario and config; give no scenario, --trace or --config (nor trace options) with it")
            return
        if not 0 < chaos_hours <= 24 * 366:
            fail(f"--chaos-hours must be positive (at most a year), got {chaos_hours}")
            return
        from tidesched.sim.chaos import dump_document, generate, to_scenario

        chaos_doc = generate(chaos, hours=chaos_hours).doc
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "scenario.yaml").write_text(
                dump_document(chaos_doc, f"Chaos scenario of generator seed {chaos}."), encoding="utf-8"
            )
        except OSError as exc:
            fail(f"cannot write {out_dir / 'scenario.yaml'}: {exc}")
        sc = to_scenario(chaos_doc, str(out_dir / "scenario.yaml"))
    elif trace is not None:
        if scenario is not None:
            fail("give a scenario or --trace, not both")
            return
        sc = _trace_scenario(trace, pods, compression, fill, limit, seed, config, gpu_sharing)
    else:
        if pods is not None or limit is not None or fill or compression != 1.0 or gpu_sharing != "vgpu":
            fail("--pods, --limit, --fill, --compression and --gpu-sharing apply to --trace only")
            return
        path = scenario if scenario is not None else bundled_example()
        try:
            sc = load_scenario(path, config)
        except (ScenarioError, ConfigError) as exc:
            fail(str(exc))
            return
    if topology is not None or gang_topology is not None:
        from tidesched.sim.topology import add_fat_tree, constrain_gangs, parse_constraint, parse_shape

        try:
            if topology is not None:
                add_fat_tree(sc, *parse_shape(topology))
            if gang_topology is not None:
                constrain_gangs(sc, parse_constraint(gang_topology))
        except ScenarioError as exc:
            fail(str(exc))
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
        fail(f"cannot write {out_dir / 'result.json'}: {exc}")
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
    from tidesched.sim.whatif import WhatIfError, scenario_of
    from tidesched.sim.whatif import from_cluster as read_live
    from tidesched.sim.whatif import from_dump as read_dump

    if from_cluster and from_dump is not None:
        fail("give --from-cluster or --from-dump, not both")
    if scenario is not None or trace is not None:
        fail("--from-cluster / --from-dump start from the cluster: give no scenario or --trace")
    if kubeconfig is not None and not from_cluster:
        fail("--kubeconfig applies to --from-cluster")
    if config_map is not None and "/" not in config_map:
        fail(f"--config-map: expected NAMESPACE/NAME, got {config_map!r}")
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
        fail(str(exc))
        raise
    except OSError as exc:
        fail(f"cannot read {exc.filename or from_dump}: {exc.strerror or exc}")
        raise
    except Exception as exc:  # noqa: BLE001 - unreachable cluster, bad kubeconfig: one line, no traceback
        fail(f"cannot read the cluster: {exc}")
        raise
    return (w, prepared), prepared[0]


def _whatif_run(whatif: Any, sc: Any, seed: int, progress: Any) -> Any:
    from tidesched.sim.whatif import run_whatif

    w, prepared = whatif
    return run_whatif(w, seed=seed, progress=progress, prepared=prepared)


def _chaos_reproducer(chaos: int, doc: Any, sim: Any, out_dir: Path, seed: int, shrink: bool) -> None:
    """A failed --chaos run: shrink the scenario while the same invariant fails; write it."""
    from tidesched.sim.chaos import ChaosOutcome, Generated, first_rule, write_reproducer
    from tidesched.sim.chaos import shrink as shrink_doc

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
        fail(f"cannot write {out_dir / 'reproduce.yaml'}: {exc}")
        return
    again = f"tidesched simulate {path}" + (f" --seed {seed}" if seed else "")
    out.print(f"wrote {path}; reproduce with: {again}", highlight=False)
