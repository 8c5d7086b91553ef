"""``report.html`` of an experiment: per pod list, the GPU allocation against the arrived GPU
demand for each policy (mean over seeds, drawn with matplotlib as inline SVG), and a table of
the allocation at 100 % arrived and at the target (mean, and min–max over seeds), with the
fragmentation and the failed pods at the target."""

from __future__ import annotations

import html
import io
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tidesched.model.gpu_nodes import KINDS
from tidesched.sim.experiment.policies import POLICIES

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}svg{width:100%;height:auto}"""


def _esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _series(results: Sequence[Mapping[str, Any]], key: str, top: int) -> np.ndarray:
    rows = []
    for r in results:
        m = r[key]
        rows.append([np.nan if m.get(str(a)) is None else float(m[str(a)]) for a in range(top + 1)])
    if not rows:
        return np.zeros(top + 1)
    arr = np.array(rows)
    counts = (~np.isnan(arr)).sum(axis=0)
    sums = np.nansum(arr, axis=0)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _svg(fig: Any, prefix: str) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}-{m.group(1)})", svg)
    svg = re.sub(r'xlink:href="#([^"]+)"', lambda m: f'xlink:href="#{prefix}-{m.group(1)}"', svg)
    return svg


def _plot(workload: str, by_policy: Mapping[str, Sequence[Mapping[str, Any]]], top: int, prefix: str) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.2), layout="constrained")
    full, zoom = fig.subplots(1, 2, width_ratios=(1, 1))
    x = np.arange(top + 1)
    series = {name: _series(results, "allocation_by_arrival", top) for name, results in by_policy.items()}
    low = min((float(np.nanmin(v[x >= 70])) for v in series.values() if (x >= 70).any()), default=70.0)
    for ax in (full, zoom):
        ax.plot(x, np.minimum(x, 100), color="#bbb", linestyle=":", label="arrived (up to capacity)")
        for name, values in series.items():
            ax.plot(x, values, label=f"{name} ({len(by_policy[name])} seeds)")
        ax.set_xlabel("arrived GPU demand (% of GPU capacity)")
        ax.grid(alpha=0.3)
    full.set_ylabel("GPU allocation (%)")
    full.set_title(workload)
    full.legend(loc="upper left", fontsize="small")
    zoom.set_xlim(70, top)
    zoom.set_ylim(max(low - 2, 0), 100.5)
    zoom.set_title("from 70 % arrived")
    return _svg(fig, prefix)


def _cell(values: list[float]) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{np.mean(values):.2f} <small>({min(values):.2f}–{max(values):.2f})</small>"


def render(results: Sequence[Mapping[str, Any]]) -> str:
    groups: dict[str, dict[str, list[Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    rank = {name: k for k, name in enumerate(POLICIES)}  # the paper's order, then configs by name
    for r in sorted(results, key=lambda r: (r["workload"], rank.get(r["policy"], len(rank)), r["policy"], r["seed"])):
        groups[r["workload"]][r["policy"]].append(r)
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>tidesched experiment</title>",
             f"<style>{_STYLE}</style></head><body><h1>GPU placement policies: allocation as demand arrives</h1>",
             "<p>Each run places a pod list, tuned to a share of the cluster's GPU capacity and shuffled "
             "(seeded), one pod at a time with no departures (the FGD paper's protocol). Allocation: "
             "milli-GPU allocated ÷ capacity.</p>"]
    for k, (workload, by_policy) in enumerate(groups.items()):
        top = max(int(round(r["inflate"] * 100)) for rs in by_policy.values() for r in rs)
        parts.append(f"<h2>{_esc(workload)}</h2>")
        parts.append(_plot(workload, by_policy, top, f"w{k}"))
        parts.append("<table><tr><th>policy</th><th>runs</th><th>allocation at 100 %</th>"
                     f"<th>allocation at {top} %</th><th>fragmentation at {top} % (% of capacity)</th>"
                     "<th>failed pods</th><th>CPU s / run</th></tr>")
        for name, rs in by_policy.items():
            at100 = [r["allocation_by_arrival"]["100"] for r in rs if r["allocation_by_arrival"].get("100") is not None]
            attop = [r["allocation_by_arrival"][str(top)] for r in rs if r["allocation_by_arrival"].get(str(top)) is not None]
            frag = [r["fragmentation_by_arrival"][str(top)] for r in rs
                    if r["fragmentation_by_arrival"].get(str(top)) is not None]
            failed = {kind: np.mean([r["failed_pods"].get(kind, 0) for r in rs]) for kind in KINDS}
            failed_text = ", ".join(f"{kind} {v:.0f}" for kind, v in failed.items() if v)
            cpu = np.mean([r["cpu_seconds"] for r in rs])
            parts.append(f"<tr><td>{_esc(name)}</td><td>{len(rs)}</td><td>{_cell(at100)}</td><td>{_cell(attop)}</td>"
                         f"<td>{_cell(frag)}</td><td>{_esc(failed_text or 'none')}</td><td>{cpu:.2f}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(path: str | Path, results: Sequence[Mapping[str, Any]]) -> None:
    Path(path).write_text(render(results))
