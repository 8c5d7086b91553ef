"""The figures of the simulation report (``sim/report.py``), drawn with matplotlib as inline SVG:
the result's time series reduced to at most ``MAX_POINTS`` buckets (levels keep the bucket
maximum, per-step counts are summed), card utilisation per model, queue usage against quota,
pending pods and the eviction timeline, GPU allocation and fragmentation, wait times. Same
series, byte-identical SVG (fixed hash salt, no dates, per-figure id prefixes)."""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tidesched.model.durations import format_human


def esc(value: Any) -> str:
    """HTML-escape user text; also break ``://`` so a message can never read as a live link."""
    return html.escape(str(value), quote=True).replace("://", ":&#47;&#47;")


def _label(value: Any) -> str:
    """Text for matplotlib: a ``$`` would start mathtext, and a leading ``_`` hides legend entries."""
    s = str(value).replace("$", r"\$")
    return " " + s if s.startswith("_") else s


def fmt_count(value: Any) -> str:
    v = opt_num(value)
    if v is None:
        return "—"
    return f"{int(v):,}" if v == int(v) else f"{v:,.2f}"


def _fmt_number(v: float) -> str:
    if v == int(v):
        return f"{int(v):,}"
    return f"{v:,.1f}" if abs(v) >= 10 else f"{v:,.2f}"


def fmt_duration(value: Any) -> str:
    """A result's seconds (any JSON value) as a short human duration."""
    return format_human(opt_num(value))


def _names_under(mappings: list[Any]) -> list[str]:
    """The keys of every mapping in the list (first appearance order), as strings."""
    seen: dict[Any, None] = {}
    for m in mappings:
        if type(m) is dict or isinstance(m, Mapping):
            seen.update(dict.fromkeys(m))
    return list(dict.fromkeys(str(k) for k in seen))


# Points per series on the page: a panel is a few hundred pixels wide, and a 149-day trace with
# twenty card models must still give a page of about a megabyte that opens at once.
MAX_POINTS = 600


MAX_CARD_PANELS = 24


MAX_QUEUE_PANELS = 40


_FIG_WIDTH_IN = 12.0


_SERVICE_COLOURS = {"inference": "#1f77b4", "training": "#ff7f0e", "unknown": "#8c8c8c"}


# rcParams applied only while drawing (rc_context), so the host process's settings are untouched.
RC: dict[str, Any] = {
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


def number(value: Any, default: float = 0.0) -> float:
    """A finite float from whatever the result holds (None, str, int), else ``default``."""
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond floats
        return default
    return out if math.isfinite(out) else default


def _floats(values: list[Any], missing: float) -> np.ndarray:
    """``[number(v, missing) for v in values]`` as an array: numpy converts the common case (ints,
    floats, None) in one call; anything it cannot read goes through ``number`` one by one."""
    try:
        arr = np.array(values, dtype=float)
    except (TypeError, ValueError, OverflowError):
        arr = None
    if arr is None or arr.ndim != 1 or len(arr) != len(values):
        return np.array([number(v, missing) for v in values], dtype=float)
    bad = ~np.isfinite(arr)
    if bad.any():
        arr[bad] = missing
    return arr


def opt_num(value: Any) -> float | None:
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def mapping_of(value: Any) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, without the ABC check
        return value
    return value if isinstance(value, Mapping) else {}


def seq_of(value: Any) -> Sequence[Any]:
    return value if isinstance(value, (list, tuple)) else ()


def _time_unit(span: float) -> tuple[float, str]:
    """Divisor and name of the unit that keeps a time axis readable."""
    if span <= 600:
        return 1.0, "s"
    if span <= 3 * 3600:
        return 60.0, "min"
    if span <= 3 * 86400:
        return 3600.0, "h"
    return 86400.0, "d"


def palette(n: int) -> list[str]:
    """``n`` distinct colours, in a fixed order (tab10, then tab20 for larger sets)."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    size = 10 if n <= 10 else 20
    out = []
    for i in range(max(n, 0)):
        r, g, b, _a = cmap(i % size)
        out.append(f"#{int(round(r * 255)):02x}{int(round(g * 255)):02x}{int(round(b * 255)):02x}")
    return out


class Series:
    """The steps as numpy columns, reduced to at most ``max_points`` buckets.

    ``level`` keeps each bucket's maximum (peaks stay visible; NaN = missing is ignored) and
    ``count`` sums a bucket (totals are kept).
    """

    def __init__(self, steps: Sequence[Mapping[str, Any]], max_points: int = MAX_POINTS) -> None:
        self.steps = [s for s in steps if isinstance(s, Mapping)]
        t = np.array([number(s.get("t")) for s in self.steps], dtype=float)
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
            hit = [v.get(k) if type(v) is dict else mapping_of(v).get(k) for v in parent]
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


def placeholder(text: str) -> str:
    return f'<p class="empty">{esc(text)}</p>'


def _set_time_axis(ax: Any, series: Series, label: bool = True) -> None:
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


def plot_cards(series: Series, models: list[str], colours: dict[str, str]) -> str:
    if series.n == 0:
        return placeholder("No time steps were recorded, so there is nothing to plot.")
    if not models:
        return placeholder("The cluster has no card models (CPU-only run).")
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
        note = placeholder(f"{len(models) - len(shown)} more card models not shown.")
    return _figure_svg(fig, "cards") + note


MAX_QUEUE_CARD_LINES = 8


def queue_card_resources(series: Series, queue: str) -> tuple[list[str], int]:
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
                first[res] = (i, list(mapping_of(quotas[i])).index(res))
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
    ax: Any, series: Series, queue: str, resources: list[str], colours: dict[str, str], title: str,
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


def plot_queues(series: Series, queues: list[str], colours: dict[str, str]) -> str:
    if series.n == 0:
        return placeholder("No time steps were recorded, so there is nothing to plot.")
    if not queues:
        return placeholder("No queues in this run.")
    shown = queues[:MAX_QUEUE_PANELS]
    picks = {q: queue_card_resources(series, q) for q in shown}
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
        note = placeholder(f"{len(queues) - len(shown)} more queues not shown.")
    return _figure_svg(fig, "queues") + note


def plot_timeline(series: Series, queues: list[str], queue_colours: dict[str, str]) -> str:
    if series.n == 0:
        return placeholder("No time steps were recorded, so there is nothing to plot.")
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


def _gpu_share(series: Series, key: str, of: str) -> np.ndarray:
    """``gpus[key] / gpus[of]`` per step in percent (NaN where a step lacks them), bucketed."""
    num = series.path("gpus", key)
    den = series.path("gpus", of)
    share = np.full(len(num), np.nan)
    ok = ~np.isnan(num) & (np.nan_to_num(den, nan=0.0) > 0)
    share[ok] = num[ok] / den[ok] * 100.0
    return series.level(share)


def plot_gpus(series: Series) -> str:
    """FGD's view of a GPU cluster: allocation against demand, and fragmentation."""
    if series.n == 0 or not any(s.get("gpus") for s in series.steps):
        return placeholder("The cluster has no GPUs, so there is no GPU allocation to plot.")
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


def plot_waits(jobs: Sequence[Mapping[str, Any]]) -> str:
    by_type: dict[str, list[float]] = {}
    never: dict[str, int] = {}
    for j in jobs:
        st = str(j.get("service_type") or "unknown")
        w = opt_num(j.get("wait"))
        if w is None:
            if j.get("started") is None:
                never[st] = never.get(st, 0) + 1
            continue
        by_type.setdefault(st, []).append(max(w, 0.0))
    if not by_type:
        msg = "No job started, so there are no wait times." if jobs else "No jobs in this run."
        if never:
            msg += " Never started: " + ", ".join(f"{n} {t}" for t, n in sorted(never.items())) + "."
        return placeholder(msg)
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
        labels.append(_label(f"{t}: {len(arr)} jobs, median {fmt_duration(float(np.median(arr)))}, "
                             f"p95 {fmt_duration(float(np.percentile(arr, 95)))}"))
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
