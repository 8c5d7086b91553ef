"""Single-file HTML report for a simulation result (SIM-3).

``render_html(result)`` turns the engine's ``result`` dict (the content of ``result.json``) into
one self-contained HTML page: inline CSS, plots as inline SVG drawn with matplotlib, no scripts
and no external references, so the file can be mailed or attached to a ticket and opened
anywhere.

Layout, top to bottom:

* header: scenario, seed, duration, schedule period, invariant status (green/red);
* summary figures: pods bound/evicted, jobs completed, mean/p95 wait, peak utilisation per
  card model; the list of invariant violations when there are any;
* (a) card utilisation over time, one panel per card model, allocated vs capacity;
* (b) queue usage against quota over time, one pair of small panels per queue (cards, cpu);
* (c) pending pods per queue (stacked) and the preemption / reclaim / eviction timeline;
* (d) wait-time distribution, stacked by service type;
* tables: the jobs with the longest waits, and the evictions.

Determinism: the same ``result`` gives byte-identical HTML. The SVG hash salt is fixed, the SVG
date metadata is dropped, text is emitted as ``<text>`` (``svg.fonttype = none``) and element ids
are prefixed per figure so several inline SVGs never share an id.

Long runs: every time series is reduced to at most ``MAX_POINTS`` buckets before plotting.
Levels (allocated, pending, capacity) keep the bucket maximum so peaks stay visible; per-step
counts (evictions, reclaims, preemptions) are summed so totals are preserved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tidesched.sim.report_plots import (
    RC,
    Series,
    esc,
    fmt_count,
    fmt_duration,
    mapping_of,
    number,
    opt_num,
    palette,
    placeholder,
    plot_cards,
    plot_gpus,
    plot_queues,
    plot_timeline,
    plot_waits,
    seq_of,
)

MAX_TABLE_ROWS = 25
MAX_VIOLATIONS_SHOWN = 50

_EVICTION_WORDS = ("evict", "preempt", "reclaim")


# --------------------------------------------------------------------------- HTML pieces

_CSS = """
:root{--ok:#1a7f37;--bad:#cf222e;--muted:#57606a;--line:#d0d7de;--bg:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI","DejaVu Sans",Arial,sans-serif;color:#1f2328;background:#fff}
main{max-width:1360px;margin:0 auto;padding:20px 24px 40px}
header{display:flex;flex-wrap:wrap;align-items:center;gap:12px 24px;border-bottom:1px solid var(--line);padding-bottom:12px}
header h1{font-size:22px;margin:0}
header .meta{color:var(--muted);font-size:13px}
.badge{display:inline-block;padding:4px 12px;border-radius:14px;font-weight:600;font-size:13px;color:#fff}
.badge.ok{background:var(--ok)}.badge.bad{background:var(--bad)}.badge.none{background:#8c959f}
.figures{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:10px;margin:16px 0;align-items:start}
.fig{background:var(--bg);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.fig .v{font-size:22px;font-weight:600}
.fig .k{color:var(--muted);font-size:12px}
.fig small.of{font-size:13px;color:var(--muted)}
.fig.wide{grid-column:span 2}
.util{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:13px;margin-top:4px}
.util b{font-weight:600}
h2{font-size:17px;margin:26px 0 6px;border-bottom:1px solid var(--line);padding-bottom:4px}
h2 small{color:var(--muted);font-weight:400;font-size:12px}
svg.plot{width:100%;height:auto;display:block}
.empty{color:var(--muted);font-style:italic}
.violations{border:1px solid var(--bad);background:#ffebe9;border-radius:8px;padding:8px 14px;margin:12px 0}
.violations h3{margin:2px 0 6px;color:var(--bad);font-size:15px}
.violations li{font-size:13px}
table{border-collapse:collapse;width:100%;font-size:12.5px}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:var(--bg);font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
td.msg{color:var(--muted)}
.tables{display:grid;grid-template-columns:1fr;gap:8px}
footer{margin-top:28px;color:var(--muted);font-size:12px}
"""


def _figure_box(value: str, key: str, wide: bool = False, extra: str = "") -> str:
    cls = "fig wide" if wide else "fig"
    return f'<div class="{cls}"><div class="v">{value}</div><div class="k">{esc(key)}</div>{extra}</div>'


def _peak_utilisation(result: Mapping[str, Any], series: Series, models: list[str]) -> dict[str, float]:
    given = mapping_of(mapping_of(result.get("summary")).get("peak_card_utilisation"))
    if given:
        return {str(k): number(v) for k, v in given.items()}
    out: dict[str, float] = {}
    for m in models:  # derive it when the summary lacks it
        best = 0.0
        for s in series.steps:
            c = mapping_of(mapping_of(s.get("cards")).get(m))
            cap = number(c.get("capacity"))
            if cap > 0:
                best = max(best, number(c.get("allocated")) / cap)
        out[m] = best
    return out


def _summary_html(result: Mapping[str, Any], series: Series, models: list[str]) -> str:
    summary = mapping_of(result.get("summary"))
    jobs = seq_of(result.get("jobs"))
    boxes = [
        _figure_box(fmt_count(summary.get("pods_bound")), "pods bound"),
        _figure_box(fmt_count(summary.get("pods_evicted")), "pods evicted"),
        _figure_box(
            fmt_count(summary.get("jobs_completed"))
            + (f'<small class="of"> / {len(jobs):,}</small>' if jobs else ""),
            "jobs completed" + (" / submitted" if jobs else ""),
        ),
        _figure_box(esc(fmt_duration(summary.get("mean_wait"))), "mean wait"),
        _figure_box(esc(fmt_duration(summary.get("p95_wait"))), "p95 wait"),
    ]
    for key, label in (("mean_gpu_allocation", "mean GPU allocation"),
                       ("mean_fragmented_share", "of unallocated GPUs stranded by fragmentation")):
        v = opt_num(summary.get(key))
        if v is not None:
            boxes.append(_figure_box(f"{v:.1%}", label))
    peaks = _peak_utilisation(result, series, models)
    if peaks:
        items = "".join(f"<span>{esc(m)} <b>{v:.0%}</b></span>" for m, v in peaks.items())
        boxes.append(_figure_box("", "peak card utilisation per model", wide=True,
                                 extra=f'<div class="util">{items}</div>'))
    return '<section class="figures">' + "".join(boxes) + "</section>"


def _topology_html(result: Mapping[str, Any]) -> str:
    """The HyperNode tree with the gangs first placed in each, and the run's topology figures."""
    tree = (result.get("topology") or {}).get("hypernodes") or []
    figures = (result.get("summary") or {}).get("topology") or {}
    if not tree:
        return ""
    labels = [("gangs_placed", "gangs placed"), ("gangs_within_tier1", "within a tier-1 HyperNode"),
              ("gangs_within_tier2", "within a tier-2 HyperNode"), ("gangs_across", "across"),
              ("gang_mean_wait", "mean wait of gangs (s)"), ("constrained_gang_mean_wait", "of gangs with a constraint (s)"),
              ("free_gpu_fragmentation", "free-GPU scatter over leaves"), ("mean_free_gpus_per_leaf", "mean free GPUs per leaf")]
    figs = ", ".join(f"{esc(label)}: {esc(str(figures.get(key, '–')))}" for key, label in labels)
    rows = [
        [("\u00a0\u00a0" * int(h["depth"]) + esc(h["name"]), ""), (str(h["tier"]), "n"), (str(h["nodes"]), "n"),
         (esc(", ".join(h["gangs"][:8]) + (" …" if len(h["gangs"]) > 8 else "")) or "–", "")]
        for h in tree[:MAX_TABLE_ROWS]
    ]
    return (f"<h2>Network topology <small>({esc(figs)})</small></h2>"
            + _table([("HyperNode", False), ("tier", True), ("nodes", True), ("gangs first placed there", False)], rows))


def _invariants(result: Mapping[str, Any]) -> tuple[str, str]:
    """The header badge and, when broken, the violations block."""
    inv = result.get("invariants")
    if not isinstance(inv, Mapping):
        return '<span class="badge none">invariants not checked</span>', ""
    checked = int(number(inv.get("checked_steps")))
    violations = [v for v in seq_of(inv.get("violations")) if isinstance(v, Mapping)]
    if not violations:
        return f'<span class="badge ok">✔ invariants held · {checked:,} steps checked</span>', ""
    plural = "s" if len(violations) != 1 else ""
    badge = f'<span class="badge bad">✘ {len(violations):,} invariant violation{plural}</span>'
    items = "".join(
        f"<li><b>{esc(v.get('rule', '?'))}</b> at t={esc(fmt_duration(v.get('t')))}: "
        f"{esc(v.get('message', ''))}</li>"
        for v in violations[:MAX_VIOLATIONS_SHOWN]
    )
    extra = len(violations) - MAX_VIOLATIONS_SHOWN
    more = f"<p>… and {extra:,} more.</p>" if extra > 0 else ""
    block = (f'<section class="violations"><h3>Invariant violations '
             f'({len(violations):,} in {checked:,} checked steps)'
             f"</h3><ul>{items}</ul>{more}</section>")
    return badge, block


def _table(headers: Sequence[tuple[str, bool]], rows: Iterable[Sequence[tuple[str, str]]]) -> str:
    head = "".join(f'<th class="n">{esc(h)}</th>' if num else f"<th>{esc(h)}</th>" for h, num in headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="{c}">{v}</td>' if c else f"<td>{v}</td>" for v, c in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _jobs_table(jobs: Sequence[Mapping[str, Any]], end: float) -> str:
    if not jobs:
        return placeholder("No jobs in this run.")

    def waited(j: Mapping[str, Any]) -> tuple[int, float, str]:
        w = opt_num(j.get("wait"))
        if w is None and j.get("started") is None:
            # Never started: it has waited at least until the end of the run; list these first.
            return (1, end - number(j.get("submitted")), str(j.get("name", "")))
        return (0, w or 0.0, str(j.get("name", "")))

    ranked = sorted(jobs, key=lambda j: (-waited(j)[0], -waited(j)[1], waited(j)[2]))[:MAX_TABLE_ROWS]
    headers = [("job", False), ("kind", False), ("queue", False), ("service", False), ("submitted", True),
               ("started", True), ("wait", True), ("evictions", True), ("restarts", True), ("phase", False)]
    rows = []
    for j in ranked:
        never, w, _ = waited(j)
        wait = f"≥ {fmt_duration(w)} (not started)" if never else fmt_duration(w)
        rows.append([
            (esc(j.get("name", "")), ""), (esc(j.get("kind", "")), ""), (esc(j.get("queue", "")), ""),
            (esc(j.get("service_type", "")), ""), (esc(fmt_duration(j.get("submitted"))), "n"),
            (esc(fmt_duration(j.get("started"))), "n"), (esc(wait), "n"),
            (esc(fmt_count(j.get("evictions", 0))), "n"), (esc(fmt_count(j.get("restarts", 0))), "n"),
            (esc(j.get("phase", "")), ""),
        ])
    return _table(headers, rows)


def _eviction_events(events: Sequence[Any]) -> list[Mapping[str, Any]]:
    out = []
    for e in events:
        if not isinstance(e, Mapping):
            continue
        reason = str(e.get("reason", "")).lower()
        if any(w in reason for w in _EVICTION_WORDS):
            out.append(e)
    return out


def _evictions_table(events: Sequence[Any]) -> tuple[str, int]:
    ev = _eviction_events(events)
    if not ev:
        return placeholder("No evictions."), 0
    headers = [("time", True), ("object", False), ("reason", False), ("message", False)]
    rows = []
    for e in ev[:MAX_TABLE_ROWS]:
        obj = f"{e.get('kind', '')} {e.get('namespace', '')}/{e.get('name', '')}".strip()
        rows.append([(esc(fmt_duration(e.get("t"))), "n"), (esc(obj), ""), (esc(e.get("reason", "")), ""),
                     (esc(e.get("message", "")), "msg")])
    extra = len(ev) - MAX_TABLE_ROWS
    more = placeholder(f"… and {extra:,} more evictions.") if extra > 0 else ""
    return _table(headers, rows) + more, len(ev)


def _gang_timeouts_table(result: Mapping[str, Any]) -> tuple[str, int]:
    """PodGroups whose gang timed out (EXT-1): when, and how long they waited for what."""
    rows_in = [g for g in seq_of(result.get("gang_timeouts")) if isinstance(g, Mapping)]
    if not rows_in:
        return "", 0
    headers = [("time", True), ("PodGroup", False), ("message", False)]
    rows = [
        [(esc(fmt_duration(g.get("t"))), "n"), (esc(g.get("podgroup", "")), ""), (esc(g.get("message", "")), "msg")]
        for g in rows_in[:MAX_TABLE_ROWS]
    ]
    return _table(headers, rows), len(rows_in)


def _names(value: Any) -> list[str]:
    return [str(x) for x in seq_of(value)]


def _discover(series: Series, key: str) -> list[str]:
    """Names that appear under ``steps[*][key]`` when the top-level list is missing."""
    seen: dict[str, None] = {}
    for s in series.steps:
        for name in mapping_of(s.get(key)):
            seen.setdefault(str(name), None)
    return list(seen)


def _whatif_html(result: Mapping[str, Any]) -> str:
    """``simulate --from-cluster / --from-dump``: the new workloads' waits, where their pods go,
    and the evictions (empty for other simulations)."""
    wi = mapping_of(result.get("whatif"))
    if not wi:
        return ""
    parts = [
        f"<h2>What if <small>(from {esc(wi.get('source', ''))}, read {esc(wi.get('read_at', ''))}, "
        f"config {esc(wi.get('config', ''))}; running pods without a run time: "
        f"{esc(fmt_duration(wi.get('default_runtime')))})</small></h2>"
    ]
    rows = []
    for j in seq_of(wi.get("new_workloads")):
        j = mapping_of(j)
        start = "does not start" if j.get("started") is None else fmt_duration(j.get("wait"))
        rows.append([(esc(f"{j.get('kind', '')} {j.get('name', '')}"), ""), (esc(j.get("queue", "")), ""),
                     (esc(start), "n"), (esc(j.get("phase", "")), "")])
    parts.append(_table([("new workload", False), ("queue", False), ("starts after", True), ("phase", False)], rows)
                 if rows else placeholder("No new workloads (nothing added with --add)."))
    binds = [mapping_of(b) for b in seq_of(wi.get("binds")) if mapping_of(b).get("new")]
    if binds:
        parts.append(f"<h2>Where the new pods go <small>(first {min(len(binds), MAX_TABLE_ROWS)})</small></h2>")
        parts.append(_table([("time", True), ("pod", False), ("node", False)],
                            [[(esc(fmt_duration(b.get("t"))), "n"), (esc(b.get("pod", "")), ""),
                              (esc(b.get("node", "")), "")] for b in binds[:MAX_TABLE_ROWS]]))
    return "\n".join(parts)


# --------------------------------------------------------------------------- entry point


# Recorded steps from which the figures are drawn in two processes (where the platform can fork
# and has a second core): a 149-day trace's page takes seconds to draw, a short run's a second.
PARALLEL_MIN_STEPS = 2_000

_FORKED: list[Callable[[], str]] = []  # the drawings a forked worker finds (see _draw_all)


def _draw_forked(i: int) -> str:
    return _FORKED[i]()


def _can_draw_in_parallel() -> bool:
    import multiprocessing
    import os

    return (os.cpu_count() or 1) > 1 and "fork" in multiprocessing.get_all_start_methods()


def _draw_all(draws: list[Callable[[], str]], parallel: bool) -> list[str]:
    """Each drawing's output, in order. In parallel the first (the largest figure) is drawn by
    a forked worker, which reads this process's data as it is (nothing is copied or pickled
    but the SVG text coming back), while this process draws the others. A worker that cannot
    start or fails is replaced by drawing here: the page is the same either way."""
    if not parallel or len(draws) < 2:
        return [draw() for draw in draws]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    _FORKED[:] = draws
    try:
        pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"))
        future = pool.submit(_draw_forked, 0)
    except (OSError, RuntimeError, ValueError):
        _FORKED.clear()
        return [draw() for draw in draws]
    try:
        rest = [draw() for draw in draws[1:]]
        try:
            first = future.result()
        except Exception:  # noqa: BLE001 - the worker died or failed: draw it here instead
            first = draws[0]()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _FORKED.clear()
    return [first, *rest]


def render_html(result: Mapping[str, Any], parallel: bool | None = None) -> str:
    """Render ``result`` (the simulator's result dict) as one self-contained HTML page.
    ``parallel``: draw the card figure in a forked worker meanwhile (default: for results of
    at least PARALLEL_MIN_STEPS steps, where the machine can)."""
    from matplotlib import rc_context

    result = mapping_of(result)
    series = Series(seq_of(result.get("steps")))
    models = _names(result.get("card_models")) or _discover(series, "cards")
    queues = _names(result.get("queues")) or _discover(series, "queues")
    jobs = [j for j in seq_of(result.get("jobs")) if isinstance(j, Mapping)]
    events = seq_of(result.get("events"))
    model_colours = dict(zip(models, palette(len(models))))
    queue_colours = dict(zip(queues, palette(len(queues))))
    end = number(result.get("duration"), float(series.t_raw[-1]) if series.n else 0.0)

    if parallel is None:
        parallel = series.n >= PARALLEL_MIN_STEPS and _can_draw_in_parallel()
    with rc_context(RC):
        cards_svg, queues_svg, timeline_svg, waits_svg, gpus_svg = _draw_all(
            [
                lambda: plot_cards(series, models, model_colours),
                lambda: plot_queues(series, queues, model_colours),
                lambda: plot_timeline(series, queues, queue_colours),
                lambda: plot_waits(jobs),
                lambda: plot_gpus(series),
            ],
            parallel,
        )

    name = str(result.get("scenario") or "unnamed scenario")
    badge, violations = _invariants(result)
    meta = " · ".join(
        part for part in (
            f"seed {esc(result['seed'])}" if result.get("seed") is not None else "",
            f"simulated {esc(fmt_duration(result.get('duration')))}"
            if result.get("duration") is not None else "",
            f"schedule period {esc(fmt_duration(result.get('schedule_period')))}"
            if result.get("schedule_period") is not None else "",
            f"{series.n:,} steps",
            f"{len(jobs):,} jobs",
            f"{len(queues):,} queues",
            f"{len(models):,} card models",
        ) if part
    )
    evictions_html, n_evictions = _evictions_table(events)
    timeouts_html, n_timeouts = _gang_timeouts_table(result)
    downsampled = (f" <small>(series reduced from {series.n:,} steps to {len(series.starts):,} buckets; "
                   f"levels show the bucket maximum)</small>" if len(series.starts) < series.n else "")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>tidesched report · {esc(name)}</title>",
        f"<style>{_CSS}</style></head><body><main>",
        f'<header><h1>{esc(name)}</h1>{badge}<span class="meta">{meta}</span></header>',
        _summary_html(result, series, models),
        violations,
        _whatif_html(result),
        _topology_html(result),
        "<h2>Card utilisation per model <small>(filled: allocated · dashed: capacity)</small>"
        f"{downsampled}</h2>",
        cards_svg,
        "<h2>GPU allocation, demand and fragmentation <small>(in GPU equivalents: an MPS or MIG slice "
        "counts as its share of a card)</small></h2>",
        gpus_svg,
        "<h2>Queue usage against quota <small>(solid: allocated · dashed: quota)</small></h2>",
        queues_svg,
        "<h2>Pending pods and disruption timeline</h2>",
        timeline_svg,
        "<h2>Wait times</h2>",
        waits_svg,
        f'<div class="tables"><h2>Longest waits <small>(top {MAX_TABLE_ROWS})</small></h2>',
        _jobs_table(jobs, end),
        f"<h2>Evictions <small>({n_evictions:,} events)</small></h2>",
        evictions_html,
        f"<h2>Gang timeouts <small>({n_timeouts:,} PodGroups)</small></h2>" if n_timeouts else "",
        timeouts_html,
        "</div>",
        "<footer>Generated by tidesched simulate. "
        "Times are simulated time from the start of the run.</footer>",
        "</main></body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"
