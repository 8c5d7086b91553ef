"""Single-file HTML report for a simulation result (SPEC SIM-3).

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

import html
import io
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

# Points per series on the page: a panel is a few hundred pixels wide, and a 149-day trace with
# twenty card models must still give a page of about a megabyte that opens at once.
MAX_POINTS = 600
MAX_CARD_PANELS = 24
MAX_QUEUE_PANELS = 40
MAX_TABLE_ROWS = 25
MAX_VIOLATIONS_SHOWN = 50

_FIG_WIDTH_IN = 12.0
_SERVICE_COLOURS = {"inference": "#1f77b4", "training": "#ff7f0e", "unknown": "#8c8c8c"}
_EVICTION_WORDS = ("evict", "preempt", "reclaim")

# rcParams applied only while drawing (rc_context), so the host process's settings are untouched.
_RC: dict[str, Any] = {
    "svg.hashsalt": "tidesched-report",
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica"],
    "font.size": 9.0,
    "axes.titlesize": 9.5,
    "axes.labelsize": 8.5,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "legend.fontsize": 7.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e4e4e4",
    "grid.linewidth": 0.6,
    "path.simplify": True,
    "figure.dpi": 72.0,
}


# --------------------------------------------------------------------------- small helpers


def _num(value: Any, default: float = 0.0) -> float:
    """A finite float from whatever the result holds (None, str, int), else ``default``."""
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond floats
        return default
    return out if math.isfinite(out) else default


def _floats(values: list[Any], missing: float) -> np.ndarray:
    """``[_num(v, missing) for v in values]`` as an array: numpy converts the common case (ints,
    floats, None) in one call; anything it cannot read goes through ``_num`` one by one."""
    try:
        arr = np.array(values, dtype=float)
    except (TypeError, ValueError, OverflowError):
        arr = None
    if arr is None or arr.ndim != 1 or len(arr) != len(values):
        return np.array([_num(v, missing) for v in values], dtype=float)
    bad = ~np.isfinite(arr)
    if bad.any():
        arr[bad] = missing
    return arr


def _opt_num(value: Any) -> float | None:
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, without the ABC check
        return value
    return value if isinstance(value, Mapping) else {}


def _seq(value: Any) -> Sequence[Any]:
    return value if isinstance(value, (list, tuple)) else ()


def _esc(value: Any) -> str:
    """HTML-escape user text; also break ``://`` so a message can never read as a live link."""
    return html.escape(str(value), quote=True).replace("://", ":&#47;&#47;")


def _label(value: Any) -> str:
    """Text for matplotlib: a ``$`` would start mathtext, and a leading ``_`` hides legend entries."""
    s = str(value).replace("$", r"\$")
    return " " + s if s.startswith("_") else s


def _fmt_count(value: Any) -> str:
    v = _opt_num(value)
    if v is None:
        return "—"
    return f"{int(v):,}" if v == int(v) else f"{v:,.2f}"


def _fmt_number(v: float) -> str:
    if v == int(v):
        return f"{int(v):,}"
    return f"{v:,.1f}" if abs(v) >= 10 else f"{v:,.2f}"


def _fmt_duration(value: Any) -> str:
    """Seconds → a short human duration (``42 s``, ``3.5 min``, ``2.1 h``, ``1.5 d``)."""
    v = _opt_num(value)
    if v is None:
        return "—"
    a = abs(v)
    if a < 120:
        return f"{v:.1f} s" if v != int(v) else f"{int(v)} s"
    if a < 7200:
        return f"{v / 60:.1f} min"
    if a < 172800:
        return f"{v / 3600:.1f} h"
    return f"{v / 86400:.1f} d"


def _time_unit(span: float) -> tuple[float, str]:
    """Divisor and name of the unit that keeps a time axis readable."""
    if span <= 600:
        return 1.0, "s"
    if span <= 3 * 3600:
        return 60.0, "min"
    if span <= 3 * 86400:
        return 3600.0, "h"
    return 86400.0, "d"


def _palette(n: int) -> list[str]:
    """``n`` distinct colours, in a fixed order (tab10, then tab20 for larger sets)."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    size = 10 if n <= 10 else 20
    out = []
    for i in range(max(n, 0)):
        r, g, b, _a = cmap(i % size)
        out.append(f"#{int(round(r * 255)):02x}{int(round(g * 255)):02x}{int(round(b * 255)):02x}")
    return out


# --------------------------------------------------------------------------- time series


class _Series:
    """The steps as numpy columns, reduced to at most ``max_points`` buckets.

    ``level`` keeps each bucket's maximum (peaks stay visible; NaN = missing is ignored) and
    ``count`` sums a bucket (totals are kept).
    """

    def __init__(self, steps: Sequence[Mapping[str, Any]], max_points: int = MAX_POINTS) -> None:
        self.steps = [s for s in steps if isinstance(s, Mapping)]
        t = np.array([_num(s.get("t")) for s in self.steps], dtype=float)
        order = np.argsort(t, kind="stable")
        if len(t) and np.any(order != np.arange(len(t))):
            self.steps = [self.steps[i] for i in order]
            t = t[order]
        self.n = len(self.steps)
        if self.n > max_points:
            self.starts = np.unique(np.linspace(0, self.n, max_points, endpoint=False).astype(np.int64))
        else:
            self.starts = np.arange(self.n, dtype=np.int64)
        self.t_raw = t
        self.t = t[self.starts] if self.n else t
        span = float(t[-1] - min(0.0, float(t[0]))) if self.n else 0.0
        self.div, self.unit = _time_unit(span)
        self.x = self.t / self.div

        # Values under a key path of every step (see path), kept for the other plots.
        self._raw: dict[tuple[str, ...], list[Any]] = {}
        self._columns: dict[tuple[tuple[str, ...], str], np.ndarray] = {}

    def column(self, get: Callable[[Mapping[str, Any]], Any], missing: float = math.nan) -> np.ndarray:
        return _floats([get(s) for s in self.steps], missing)

    def values(self, *keys: str) -> list[Any]:
        """``step[k1][k2]…`` of every step (None where a level is missing or not a mapping).
        One pass per key level, shared by the paths below it: a 149-day trace records 23,000
        steps and the plots read a few hundred series from them."""
        hit = self._raw.get(keys)
        if hit is None:
            parent = self.values(*keys[:-1]) if len(keys) > 1 else self.steps
            k = keys[-1]
            hit = [v.get(k) if type(v) is dict else _mapping(v).get(k) for v in parent]
            self._raw[keys] = hit
        return hit

    def path(self, *keys: str, missing: float = math.nan) -> np.ndarray:
        """The numbers at ``step[k1][k2]…`` as a column (``missing`` where absent or not a
        finite number), as ``column`` reads them. Do not change the array: it is shared."""
        memo = (keys, repr(missing))
        hit = self._columns.get(memo)
        if hit is None:
            hit = _floats(self.values(*keys), missing)
            self._columns[memo] = hit
        return hit

    def level(self, values: np.ndarray) -> np.ndarray:
        if self.n == 0:
            return values
        if len(self.starts) == self.n:
            return values
        return np.fmax.reduceat(values, self.starts)

    def count(self, values: np.ndarray) -> np.ndarray:
        values = np.nan_to_num(values, nan=0.0)
        if self.n == 0 or len(self.starts) == self.n:
            return values
        return np.add.reduceat(values, self.starts)

    @property
    def xlabel(self) -> str:
        return f"simulated time ({self.unit})"


# --------------------------------------------------------------------------- SVG output

_ID_ATTR = re.compile(r'\bid="([^"]+)"')
_URL_REF = re.compile(r"url\(#([^)]+)\)")
_HREF_REF = re.compile(r'xlink:href="#([^"]+)"')


def _figure_svg(fig: Any, prefix: str) -> str:
    """Serialise a figure to an inline ``<svg>`` element: no XML prolog, no metadata block,
    no namespace URLs (the HTML parser puts inline ``<svg>`` in the SVG namespace itself), and
    ids prefixed so that several figures can live in one page."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    svg = re.sub(r"<!--.*?-->\s*", "", svg, flags=re.S)
    svg = _ID_ATTR.sub(lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    svg = _URL_REF.sub(lambda m: f"url(#{prefix}-{m.group(1)})", svg)
    svg = _HREF_REF.sub(lambda m: f'xlink:href="#{prefix}-{m.group(1)}"', svg)
    # Fixed pt sizes would stop the plot following the page width; the viewBox keeps the aspect.
    svg = re.sub(r'^<svg([^>]*?)\swidth="[^"]*"\sheight="[^"]*"', r'<svg\1 class="plot"', svg, count=1)
    return svg.strip()


def _new_figure(height_in: float) -> Any:
    from matplotlib.figure import Figure

    # Figure() without pyplot: no global figure manager, no GUI backend, nothing to close.
    return Figure(figsize=(_FIG_WIDTH_IN, max(height_in, 1.5)), layout="constrained")


def _placeholder(text: str) -> str:
    return f'<p class="empty">{_esc(text)}</p>'


def _set_time_axis(ax: Any, series: _Series, label: bool = True) -> None:
    if series.n:
        lo = float(series.x[0])
        hi = float(series.t_raw[-1] / series.div)
        if hi <= lo:
            hi = lo + 1.0
        ax.set_xlim(lo, hi)
    if label:
        ax.set_xlabel(series.xlabel)
        # sharex hides tick labels above another row; a panel with an empty cell below needs them.
        ax.tick_params(axis="x", labelbottom=True)


def _grid_shape(n: int, max_cols: int) -> tuple[int, int]:
    cols = min(max_cols, max(n, 1))
    return math.ceil(max(n, 1) / cols), cols


# --------------------------------------------------------------------------- plots


def _plot_cards(series: _Series, models: list[str], colours: dict[str, str]) -> str:
    if series.n == 0:
        return _placeholder("No time steps were recorded, so there is nothing to plot.")
    if not models:
        return _placeholder("The cluster has no card models (CPU-only run).")
    shown = models[:MAX_CARD_PANELS]
    rows, cols = _grid_shape(len(shown), 3)
    fig = _new_figure(2.3 * rows + 0.4)
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
    for i, model in enumerate(shown):
        ax = axes[i // cols][i % cols]
        cap = series.level(series.path("cards", model, "capacity"))
        alloc = series.level(series.path("cards", model, "allocated"))
        cap0 = np.nan_to_num(cap, nan=0.0)
        alloc0 = np.nan_to_num(alloc, nan=0.0)
        ratio = np.divide(alloc0, cap0, out=np.zeros_like(alloc0), where=cap0 > 0)
        peak = float(ratio.max()) if len(ratio) else 0.0
        colour = colours.get(model, "#1f77b4")
        ax.fill_between(series.x, alloc0, step="post", color=colour, alpha=0.35, linewidth=0)
        ax.plot(series.x, alloc0, drawstyle="steps-post", color=colour, linewidth=1.2, label="allocated")
        ax.plot(series.x, cap0, drawstyle="steps-post", color="#222222", linewidth=1.0, linestyle="--",
                label="capacity")
        top = max(float(cap0.max()) if len(cap0) else 0.0, float(alloc0.max()) if len(alloc0) else 0.0)
        ax.set_ylim(0, top * 1.12 if top > 0 else 1.0)
        peak_text = f"peak {peak:.0%} of {_fmt_number(float(cap0.max()) if len(cap0) else 0)}"
        # Long model names (MIG/MPS slices) would run into the next panel: peak on a second line.
        sep = "\n" if len(model) + len(peak_text) > 40 else " — "
        ax.set_title(_label(f"{model}{sep}{peak_text}"), loc="left")
        ax.set_ylabel("slices" if "/" in model else "cards")  # MIG/MPS models count slices
        _set_time_axis(ax, series, label=(i // cols == rows - 1) or (i + cols >= len(shown)))
    for j in range(len(shown), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    note = ""
    if len(models) > len(shown):
        note = _placeholder(f"{len(models) - len(shown)} more card models not shown.")
    return _figure_svg(fig, "cards") + note


MAX_QUEUE_CARD_LINES = 8


def _queue_card_resources(series: _Series, queue: str) -> tuple[list[str], int]:
    """Card resources to draw for ``queue`` and how many more it has a quota for.

    Resources the queue used come first, by peak usage (at most ``MAX_QUEUE_CARD_LINES``); a
    queue that used no card shows a few of its quotas. A cluster of many models would
    otherwise bury the panel in dashed lines."""
    peak: dict[str, float] = {}
    for res in _names_under(series.values("queues", queue, "allocated")):
        if res not in ("cpu", "memory"):
            col = series.path("queues", queue, "allocated", res, missing=0.0)
            if np.any(col > 0):
                peak[res] = float(col.max())
    # Quota names in the order they first appear with a positive value (step, then name order
    # within that step's mapping).
    quotas = series.values("queues", queue, "quota")
    first: dict[str, tuple[int, int]] = {}
    for res in _names_under(quotas):
        if res not in ("cpu", "memory"):
            hit = np.flatnonzero(series.path("queues", queue, "quota", res, missing=0.0) > 0)
            if len(hit):
                i = int(hit[0])
                first[res] = (i, list(_mapping(quotas[i])).index(res))
    quota_only = sorted(first, key=lambda r: first[r])
    used = sorted(peak, key=lambda r: (-peak[r], r))
    rest = [r for r in quota_only if r not in peak]
    if used:
        shown = used[:MAX_QUEUE_CARD_LINES]
    else:
        shown = rest[:4]
    hidden = len(used) + len(rest) - len(shown)
    return shown, hidden


def _plot_queue_panel(
    ax: Any, series: _Series, queue: str, resources: list[str], colours: dict[str, str], title: str,
    unit: str, legend_outside: bool = False, hidden: int = 0,
) -> None:
    """Allocated (solid) against quota (dashed, same colour) for some resources of one queue."""
    peak_alloc = 0.0
    quota_lines: list[tuple[str, np.ndarray, str]] = []
    for res in resources:
        alloc = np.nan_to_num(series.level(series.path("queues", queue, "allocated", res)), nan=0.0)
        quota = series.level(series.path("queues", queue, "quota", res))
        colour = colours.get(res, "#1f77b4")
        ax.plot(series.x, alloc, drawstyle="steps-post", color=colour, linewidth=1.3, label=_label(res))
        if len(resources) == 1:
            ax.fill_between(series.x, alloc, step="post", color=colour, alpha=0.25, linewidth=0)
        peak_alloc = max(peak_alloc, float(alloc.max()) if len(alloc) else 0.0)
        if np.any(~np.isnan(quota)):
            quota_lines.append((res, quota, colour))
    peak_quota = max((float(np.nanmax(q)) for _r, q, _c in quota_lines), default=0.0)
    # A quota far above what the queue ever used would flatten the usage line: leave it off
    # scale and say so instead.
    off_scale = peak_alloc > 0 and peak_quota > 4 * peak_alloc
    high = [m for m in (float(np.nanmax(q)) for _r, q, _c in quota_lines) if off_scale and m > 4 * peak_alloc]
    for _res, quota, colour in quota_lines:
        ax.plot(series.x, quota, drawstyle="steps-post", color=colour, linewidth=1.1, linestyle="--")
    notes = []
    if len(high) == 1:
        notes.append(f"quota {_fmt_number(high[0])} off scale")
    elif high:
        notes.append(f"{len(high)} quotas off scale (up to {_fmt_number(max(high))})")
    if not quota_lines:
        notes.append("no quota")
    if hidden:
        notes.append(f"+{hidden} more card model{'s' if hidden != 1 else ''}")
    top = peak_alloc if off_scale else max(peak_alloc, peak_quota)
    # Head room above the data for the legend (top left, when inside) and the notes (top right).
    legend_rows = 0 if legend_outside else (math.ceil(len(resources) / 2) if len(resources) > 1 else
                                            (1 if unit == "cards" else 0))
    top *= 1.12 + 0.16 * max(legend_rows, 1 if notes else 0)
    ax.set_ylim(0, top if top > 0 else 1.0)
    ax.set_title(_label(title), loc="left")
    if notes:
        ax.text(0.99, 0.97, _label("; ".join(notes)), transform=ax.transAxes, ha="right", va="top",
                fontsize=7, color="#555555")
    ax.set_ylabel(unit)
    if len(resources) > 1 or unit == "cards":
        if legend_outside:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, handlelength=1.2,
                      borderaxespad=0.0)
        else:
            ax.legend(loc="upper left", frameon=False, ncol=2 if len(resources) > 1 else 1,
                      handlelength=1.2, columnspacing=0.8, borderaxespad=0.2)


def _plot_queues(series: _Series, queues: list[str], colours: dict[str, str]) -> str:
    if series.n == 0:
        return _placeholder("No time steps were recorded, so there is nothing to plot.")
    if not queues:
        return _placeholder("No queues in this run.")
    shown = queues[:MAX_QUEUE_PANELS]
    picks = {q: _queue_card_resources(series, q) for q in shown}
    # Few card models: two queues per row, each a (cards, cpu) pair. Many: one queue per row
    # with a wide cards panel and its legend beside it, so the names stay readable.
    many = any(len(r) > 2 or max((len(x) for x in r), default=0) > 24 for r, _h in picks.values())
    per_row = 1 if len(shown) == 1 or many else 2
    rows = math.ceil(len(shown) / per_row)
    fig = _new_figure((2.6 if many else 2.2) * rows + 0.4)
    ratios = [2.2, 1.0] if per_row == 1 else [1.0] * 4
    axes = fig.subplots(rows, 2 * per_row, squeeze=False, sharex=True, width_ratios=ratios)
    for i, queue in enumerate(shown):
        r, c = divmod(i, per_row)
        ax_cards, ax_cpu = axes[r][2 * c], axes[r][2 * c + 1]
        cards, hidden = picks[queue]
        if cards:
            _plot_queue_panel(ax_cards, series, queue, cards, colours, f"{queue} · cards", "cards",
                              legend_outside=many, hidden=hidden)
        else:
            ax_cards.set_title(_label(f"{queue} · cards"), loc="left")
            ax_cards.text(0.5, 0.5, "no card quota or usage", ha="center", va="center",
                          transform=ax_cards.transAxes, color="#777777")
            ax_cards.set_yticks([])
        _plot_queue_panel(ax_cpu, series, queue, ["cpu"], {"cpu": "#2ca02c"}, f"{queue} · cpu", "cores")
        last_row = r == rows - 1 or (i + per_row >= len(shown))
        _set_time_axis(ax_cards, series, label=last_row)
        _set_time_axis(ax_cpu, series, label=last_row)
    for j in range(len(shown), rows * per_row):
        r, c = divmod(j, per_row)
        axes[r][2 * c].set_visible(False)
        axes[r][2 * c + 1].set_visible(False)
    note = ""
    if len(queues) > len(shown):
        note = _placeholder(f"{len(queues) - len(shown)} more queues not shown.")
    return _figure_svg(fig, "queues") + note


def _plot_timeline(series: _Series, queues: list[str], queue_colours: dict[str, str]) -> str:
    if series.n == 0:
        return _placeholder("No time steps were recorded, so there is nothing to plot.")
    fig = _new_figure(5.0)
    ax_p, ax_e = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
    total = np.nan_to_num(series.level(series.path("pending_pods")), nan=0.0)
    running = np.nan_to_num(series.level(series.path("running_pods")), nan=0.0)
    base = np.zeros(len(series.x))
    stacked_any = False
    for q in queues:
        pend = series.path("queues", q, "pending_pods")
        pend = np.nan_to_num(series.level(pend), nan=0.0)
        if not np.any(pend > 0):
            continue
        stacked_any = True
        ax_p.fill_between(series.x, base, base + pend, step="post", color=queue_colours.get(q, "#999999"),
                          alpha=0.55, linewidth=0, label=_label(f"pending · {q}"))
        base = base + pend
    ax_p.plot(series.x, total, drawstyle="steps-post", color="#222222", linewidth=1.1,
              label="pending · all queues")
    if np.any(running > 0):
        ax_p.plot(series.x, running, drawstyle="steps-post", color="#2ca02c", linewidth=1.0,
                  linestyle=":", label="running pods")
    top = max(float(total.max()) if len(total) else 0.0, float(base.max()) if len(base) else 0.0,
              float(running.max()) if len(running) else 0.0)
    ax_p.set_ylim(0, top * 1.12 if top > 0 else 1.0)
    ax_p.set_ylabel("pods")
    ax_p.set_title("Pending pods per queue (stacked) and running pods", loc="left")
    ax_p.legend(loc="upper left", frameon=True, framealpha=0.85, ncol=2 if stacked_any else 1)
    _set_time_axis(ax_p, series, label=False)

    kinds = (("evictions", "#d62728", "o"), ("reclaims", "#9467bd", "^"), ("preemptions", "#8c564b", "s"))
    top_e = 0.0
    width = (float(series.x[-1] - series.x[0]) / max(len(series.x), 1)) if len(series.x) > 1 else 1.0
    for offset, (key, colour, marker) in enumerate(kinds):
        counts = series.count(series.path(key, missing=0.0))
        total_k = float(counts.sum())
        hit = counts > 0
        # Side-by-side stems: the three kinds often fire in the same step.
        xs = series.x[hit] + (offset - 1) * width * 0.25
        if hit.any():
            ax_e.vlines(xs, 0, counts[hit], color=colour, linewidth=1.0)
            top_e = max(top_e, float(counts.max()))
        ax_e.plot(xs, counts[hit], linestyle="none", marker=marker, markersize=4, color=colour,
                  label=f"{key} (total {_fmt_number(total_k)})")
    ax_e.set_ylim(0, top_e * 1.2 if top_e > 0 else 1.0)
    ax_e.set_ylabel("per step" if len(series.starts) == series.n else "per bucket")
    ax_e.set_title("Evictions, reclaims and preemptions", loc="left")
    ax_e.legend(loc="upper left", frameon=True, framealpha=0.85, ncol=3)
    _set_time_axis(ax_e, series, label=True)
    return _figure_svg(fig, "timeline")


def _gpu_share(series: _Series, key: str, of: str) -> np.ndarray:
    """``gpus[key] / gpus[of]`` per step in percent (NaN where a step lacks them), bucketed."""
    num = series.path("gpus", key)
    den = series.path("gpus", of)
    share = np.full(len(num), np.nan)
    ok = ~np.isnan(num) & (np.nan_to_num(den, nan=0.0) > 0)
    share[ok] = num[ok] / den[ok] * 100.0
    return series.level(share)


def _plot_gpus(series: _Series) -> str:
    """FGD's view of a GPU cluster: allocation against demand, and fragmentation."""
    if series.n == 0 or not any(s.get("gpus") for s in series.steps):
        return _placeholder("The cluster has no GPUs, so there is no GPU allocation to plot.")
    fig = _new_figure(4.6)
    ax_a, ax_f = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
    alloc = _gpu_share(series, "allocated", "capacity")
    demand = _gpu_share(series, "demand", "capacity")
    ax_a.fill_between(series.x, np.nan_to_num(alloc), step="post", color="#1f77b4", alpha=0.3, linewidth=0)
    ax_a.plot(series.x, alloc, drawstyle="steps-post", color="#1f77b4", linewidth=1.2,
              label="allocated GPUs")
    ax_a.plot(series.x, demand, drawstyle="steps-post", color="#d62728", linewidth=1.0, linestyle="--",
              label="GPU demand of arrived, unfinished pods")
    top = max(100.0, float(np.nanmax(demand)) if np.any(~np.isnan(demand)) else 0.0)
    ax_a.set_ylim(0, top * 1.08)
    ax_a.set_ylabel("% of GPU capacity")
    ax_a.set_title("GPU allocation rate against arrived GPU demand", loc="left")
    ax_a.legend(loc="upper left", frameon=True, framealpha=0.85, ncol=2)
    _set_time_axis(ax_a, series, label=False)
    frag = _gpu_share(series, "fragmented", "unallocated")
    have = ~np.isnan(frag)
    ax_f.plot(series.x[have], frag[have], drawstyle="steps-post", color="#9467bd", linewidth=1.2)
    ax_f.set_ylim(0, 105)
    ax_f.set_ylabel("% of unallocated")
    ax_f.set_title("Unallocated GPUs stranded by fragmentation (FGD's measure over the arrived workload)",
                   loc="left")
    _set_time_axis(ax_f, series, label=True)
    return _figure_svg(fig, "gpus")


def _plot_waits(jobs: Sequence[Mapping[str, Any]]) -> str:
    by_type: dict[str, list[float]] = {}
    never: dict[str, int] = {}
    for j in jobs:
        st = str(j.get("service_type") or "unknown")
        w = _opt_num(j.get("wait"))
        if w is None:
            if j.get("started") is None:
                never[st] = never.get(st, 0) + 1
            continue
        by_type.setdefault(st, []).append(max(w, 0.0))
    if not by_type:
        msg = "No job started, so there are no wait times." if jobs else "No jobs in this run."
        if never:
            msg += " Never started: " + ", ".join(f"{n} {t}" for t, n in sorted(never.items())) + "."
        return _placeholder(msg)
    order = list(_SERVICE_COLOURS)
    types = sorted(by_type, key=lambda t: (order.index(t) if t in order else len(order), t))
    allw = np.concatenate([np.asarray(by_type[t]) for t in types])
    wmax = float(allw.max())
    p99 = float(np.percentile(allw, 99))
    # A few extreme waits would squash everything else into the first bin: clip the range at
    # the 99th percentile and let the last bin collect the tail.
    upper = p99 if wmax > 3 * p99 > 0 else wmax
    div, unit = _time_unit(upper)
    clipped = upper < wmax
    scaled = np.minimum(allw, upper) / div
    if upper / div <= 40 and np.allclose(scaled, np.round(scaled)):
        # Waits in whole units over a short range (typically whole schedule periods): one bar
        # per value, centred on it, instead of 30 bins that split single values.
        edges = np.arange(-0.5, math.ceil(upper / div) + 1.0, 1.0)
        data = [np.clip(np.asarray(by_type[t]) / div, 0, edges[-1] - 0.5) for t in types]
    else:
        edges = np.linspace(0.0, upper / div if upper > 0 else 1.0, 31)
        data = [np.clip(np.asarray(by_type[t]) / div, 0, edges[-1]) for t in types]
    fig = _new_figure(3.4)
    ax = fig.subplots(1, 1)
    labels = []
    for t in types:
        arr = np.asarray(by_type[t])
        labels.append(_label(f"{t}: {len(arr)} jobs, median {_fmt_duration(float(np.median(arr)))}, "
                             f"p95 {_fmt_duration(float(np.percentile(arr, 95)))}"))
    ax.hist(data, bins=edges, stacked=True, color=[_SERVICE_COLOURS.get(t, "#17becf") for t in types],
            label=labels, edgecolor="white", linewidth=0.4)
    ax.set_xlim(edges[0], edges[-1])
    if edges[0] < 0:  # one bar per whole value: whole-number ticks
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    tail = " — last bin includes the tail" if clipped else ""
    ax.set_xlabel(f"wait from submission to start ({unit}){tail}")
    ax.set_ylabel("jobs")
    title = "Wait-time distribution by service type"
    if never:
        title += " · never started: " + ", ".join(f"{n} {t}" for t, n in sorted(never.items()))
    ax.set_title(_label(title), loc="left")
    ax.legend(loc="upper right", frameon=True, framealpha=0.85)
    return _figure_svg(fig, "waits")


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
    return f'<div class="{cls}"><div class="v">{value}</div><div class="k">{_esc(key)}</div>{extra}</div>'


def _peak_utilisation(result: Mapping[str, Any], series: _Series, models: list[str]) -> dict[str, float]:
    given = _mapping(_mapping(result.get("summary")).get("peak_card_utilisation"))
    if given:
        return {str(k): _num(v) for k, v in given.items()}
    out: dict[str, float] = {}
    for m in models:  # derive it when the summary lacks it
        best = 0.0
        for s in series.steps:
            c = _mapping(_mapping(s.get("cards")).get(m))
            cap = _num(c.get("capacity"))
            if cap > 0:
                best = max(best, _num(c.get("allocated")) / cap)
        out[m] = best
    return out


def _summary_html(result: Mapping[str, Any], series: _Series, models: list[str]) -> str:
    summary = _mapping(result.get("summary"))
    jobs = _seq(result.get("jobs"))
    boxes = [
        _figure_box(_fmt_count(summary.get("pods_bound")), "pods bound"),
        _figure_box(_fmt_count(summary.get("pods_evicted")), "pods evicted"),
        _figure_box(
            _fmt_count(summary.get("jobs_completed"))
            + (f'<small class="of"> / {len(jobs):,}</small>' if jobs else ""),
            "jobs completed" + (" / submitted" if jobs else ""),
        ),
        _figure_box(_esc(_fmt_duration(summary.get("mean_wait"))), "mean wait"),
        _figure_box(_esc(_fmt_duration(summary.get("p95_wait"))), "p95 wait"),
    ]
    for key, label in (("mean_gpu_allocation", "mean GPU allocation"),
                       ("mean_fragmented_share", "of unallocated GPUs stranded by fragmentation")):
        v = _opt_num(summary.get(key))
        if v is not None:
            boxes.append(_figure_box(f"{v:.1%}", label))
    peaks = _peak_utilisation(result, series, models)
    if peaks:
        items = "".join(f"<span>{_esc(m)} <b>{v:.0%}</b></span>" for m, v in peaks.items())
        boxes.append(_figure_box("", "peak card utilisation per model", wide=True,
                                 extra=f'<div class="util">{items}</div>'))
    return '<section class="figures">' + "".join(boxes) + "</section>"


def _invariants(result: Mapping[str, Any]) -> tuple[str, str]:
    """The header badge and, when broken, the violations block."""
    inv = result.get("invariants")
    if not isinstance(inv, Mapping):
        return '<span class="badge none">invariants not checked</span>', ""
    checked = int(_num(inv.get("checked_steps")))
    violations = [v for v in _seq(inv.get("violations")) if isinstance(v, Mapping)]
    if not violations:
        return f'<span class="badge ok">✔ invariants held · {checked:,} steps checked</span>', ""
    plural = "s" if len(violations) != 1 else ""
    badge = f'<span class="badge bad">✘ {len(violations):,} invariant violation{plural}</span>'
    items = "".join(
        f"<li><b>{_esc(v.get('rule', '?'))}</b> at t={_esc(_fmt_duration(v.get('t')))}: "
        f"{_esc(v.get('message', ''))}</li>"
        for v in violations[:MAX_VIOLATIONS_SHOWN]
    )
    extra = len(violations) - MAX_VIOLATIONS_SHOWN
    more = f"<p>… and {extra:,} more.</p>" if extra > 0 else ""
    block = (f'<section class="violations"><h3>Invariant violations '
             f'({len(violations):,} in {checked:,} checked steps)'
             f"</h3><ul>{items}</ul>{more}</section>")
    return badge, block


def _table(headers: Sequence[tuple[str, bool]], rows: Iterable[Sequence[tuple[str, str]]]) -> str:
    head = "".join(f'<th class="n">{_esc(h)}</th>' if num else f"<th>{_esc(h)}</th>" for h, num in headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="{c}">{v}</td>' if c else f"<td>{v}</td>" for v, c in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _jobs_table(jobs: Sequence[Mapping[str, Any]], end: float) -> str:
    if not jobs:
        return _placeholder("No jobs in this run.")

    def waited(j: Mapping[str, Any]) -> tuple[int, float, str]:
        w = _opt_num(j.get("wait"))
        if w is None and j.get("started") is None:
            # Never started: it has waited at least until the end of the run; list these first.
            return (1, end - _num(j.get("submitted")), str(j.get("name", "")))
        return (0, w or 0.0, str(j.get("name", "")))

    ranked = sorted(jobs, key=lambda j: (-waited(j)[0], -waited(j)[1], waited(j)[2]))[:MAX_TABLE_ROWS]
    headers = [("job", False), ("kind", False), ("queue", False), ("service", False), ("submitted", True),
               ("started", True), ("wait", True), ("evictions", True), ("restarts", True), ("phase", False)]
    rows = []
    for j in ranked:
        never, w, _ = waited(j)
        wait = f"≥ {_fmt_duration(w)} (not started)" if never else _fmt_duration(w)
        rows.append([
            (_esc(j.get("name", "")), ""), (_esc(j.get("kind", "")), ""), (_esc(j.get("queue", "")), ""),
            (_esc(j.get("service_type", "")), ""), (_esc(_fmt_duration(j.get("submitted"))), "n"),
            (_esc(_fmt_duration(j.get("started"))), "n"), (_esc(wait), "n"),
            (_esc(_fmt_count(j.get("evictions", 0))), "n"), (_esc(_fmt_count(j.get("restarts", 0))), "n"),
            (_esc(j.get("phase", "")), ""),
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
        return _placeholder("No evictions."), 0
    headers = [("time", True), ("object", False), ("reason", False), ("message", False)]
    rows = []
    for e in ev[:MAX_TABLE_ROWS]:
        obj = f"{e.get('kind', '')} {e.get('namespace', '')}/{e.get('name', '')}".strip()
        rows.append([(_esc(_fmt_duration(e.get("t"))), "n"), (_esc(obj), ""), (_esc(e.get("reason", "")), ""),
                     (_esc(e.get("message", "")), "msg")])
    extra = len(ev) - MAX_TABLE_ROWS
    more = _placeholder(f"… and {extra:,} more evictions.") if extra > 0 else ""
    return _table(headers, rows) + more, len(ev)


def _gang_timeouts_table(result: Mapping[str, Any]) -> tuple[str, int]:
    """PodGroups whose gang timed out (EXT-1): when, and how long they waited for what."""
    rows_in = [g for g in _seq(result.get("gang_timeouts")) if isinstance(g, Mapping)]
    if not rows_in:
        return "", 0
    headers = [("time", True), ("PodGroup", False), ("message", False)]
    rows = [
        [(_esc(_fmt_duration(g.get("t"))), "n"), (_esc(g.get("podgroup", "")), ""), (_esc(g.get("message", "")), "msg")]
        for g in rows_in[:MAX_TABLE_ROWS]
    ]
    return _table(headers, rows), len(rows_in)


def _names_under(mappings: list[Any]) -> list[str]:
    """The keys of every mapping in the list (first appearance order), as strings."""
    seen: dict[Any, None] = {}
    for m in mappings:
        if type(m) is dict or isinstance(m, Mapping):
            seen.update(dict.fromkeys(m))
    return list(dict.fromkeys(str(k) for k in seen))


def _names(value: Any) -> list[str]:
    return [str(x) for x in _seq(value)]


def _discover(series: _Series, key: str) -> list[str]:
    """Names that appear under ``steps[*][key]`` when the top-level list is missing."""
    seen: dict[str, None] = {}
    for s in series.steps:
        for name in _mapping(s.get(key)):
            seen.setdefault(str(name), None)
    return list(seen)


def _whatif_html(result: Mapping[str, Any]) -> str:
    """``simulate --from-cluster / --from-dump``: the new workloads' waits, where their pods go,
    and the evictions (empty for other simulations)."""
    wi = _mapping(result.get("whatif"))
    if not wi:
        return ""
    parts = [
        f"<h2>What if <small>(from {_esc(wi.get('source', ''))}, read {_esc(wi.get('read_at', ''))}, "
        f"config {_esc(wi.get('config', ''))}; running pods without a run time: "
        f"{_esc(_fmt_duration(wi.get('default_runtime')))})</small></h2>"
    ]
    rows = []
    for j in _seq(wi.get("new_workloads")):
        j = _mapping(j)
        start = "does not start" if j.get("started") is None else _fmt_duration(j.get("wait"))
        rows.append([(_esc(f"{j.get('kind', '')} {j.get('name', '')}"), ""), (_esc(j.get("queue", "")), ""),
                     (_esc(start), "n"), (_esc(j.get("phase", "")), "")])
    parts.append(_table([("new workload", False), ("queue", False), ("starts after", True), ("phase", False)], rows)
                 if rows else _placeholder("No new workloads (nothing added with --add)."))
    binds = [_mapping(b) for b in _seq(wi.get("binds")) if _mapping(b).get("new")]
    if binds:
        parts.append(f"<h2>Where the new pods go <small>(first {min(len(binds), MAX_TABLE_ROWS)})</small></h2>")
        parts.append(_table([("time", True), ("pod", False), ("node", False)],
                            [[(_esc(_fmt_duration(b.get("t"))), "n"), (_esc(b.get("pod", "")), ""),
                              (_esc(b.get("node", "")), "")] for b in binds[:MAX_TABLE_ROWS]]))
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

    result = _mapping(result)
    series = _Series(_seq(result.get("steps")))
    models = _names(result.get("card_models")) or _discover(series, "cards")
    queues = _names(result.get("queues")) or _discover(series, "queues")
    jobs = [j for j in _seq(result.get("jobs")) if isinstance(j, Mapping)]
    events = _seq(result.get("events"))
    model_colours = dict(zip(models, _palette(len(models))))
    queue_colours = dict(zip(queues, _palette(len(queues))))
    end = _num(result.get("duration"), float(series.t_raw[-1]) if series.n else 0.0)

    if parallel is None:
        parallel = series.n >= PARALLEL_MIN_STEPS and _can_draw_in_parallel()
    with rc_context(_RC):
        cards_svg, queues_svg, timeline_svg, waits_svg, gpus_svg = _draw_all(
            [
                lambda: _plot_cards(series, models, model_colours),
                lambda: _plot_queues(series, queues, model_colours),
                lambda: _plot_timeline(series, queues, queue_colours),
                lambda: _plot_waits(jobs),
                lambda: _plot_gpus(series),
            ],
            parallel,
        )

    name = str(result.get("scenario") or "unnamed scenario")
    badge, violations = _invariants(result)
    meta = " · ".join(
        part for part in (
            f"seed {_esc(result['seed'])}" if result.get("seed") is not None else "",
            f"simulated {_esc(_fmt_duration(result.get('duration')))}"
            if result.get("duration") is not None else "",
            f"schedule period {_esc(_fmt_duration(result.get('schedule_period')))}"
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
        f"<title>tidesched report · {_esc(name)}</title>",
        f"<style>{_CSS}</style></head><body><main>",
        f'<header><h1>{_esc(name)}</h1>{badge}<span class="meta">{meta}</span></header>',
        _summary_html(result, series, models),
        violations,
        _whatif_html(result),
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
