"""Plotly figures (plain dicts, drawn by plotly.js in the page) from analyzer report tables."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from tracekit import Report
from tracekit.plugins.html_report.markup import plot_text
from tracekit.toolkit import short_name

Figure = dict[str, Any]

COLORS = {
    "compute": "#4c78a8", "communication": "#f58518", "memory": "#54a24b",
    "transfer": "#54a24b", "idle": "#bab0ac", "sync": "#e45756", "launch": "#b279a2",
    "cpu": "#ff9da6", "queued": "#9d755d", "unknown": "#d8d8d8", "startup": "#79706e",
    "idle-other": "#bab0ac", "other": "#bab0ac",
}
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}
MS = 1e6
MAX_BARS = 60  # steps drawn as bars; more are drawn as stacked areas


def layout(height: int, **extra: Any) -> dict[str, Any]:
    """The layout every figure shares: compact margins, legend on top."""
    base = {"height": height, "margin": {"l": 10, "r": 10, "t": 40, "b": 40},
            "font": FONT, "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom",
                                     "x": 0, "traceorder": "normal"},
            "paper_bgcolor": "white", "plot_bgcolor": "white", "hoverlabel": {"align": "left"}}
    base.update(extra)
    for key, axis in base.items():  # labels (device and kernel names) get the room they need
        if key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            axis.setdefault("automargin", True)
    base.setdefault("xaxis", {"automargin": True})
    base.setdefault("yaxis", {"automargin": True})
    return base


def _col(table: pa.Table, name: str) -> list[Any]:
    return table[name].to_pylist() if name in table.column_names else [0] * table.num_rows


def causes_figure(causes: pa.Table) -> Figure:
    """The bottleneck's causes: time per cause, largest first, % of the span as text."""
    rows = sorted(zip(_col(causes, "cause"), _col(causes, "time"), _col(causes, "span_pct"),
                      strict=True), key=lambda r: r[1])
    return {"data": [{
        "type": "bar", "orientation": "h", "y": [plot_text(c) for c, _, _ in rows],
        "x": [t / MS for _, t, _ in rows], "text": [f"{p:.1f}%" for _, _, p in rows],
        "textposition": "auto", "marker": {"color": [COLORS.get(c, "#888") for c, _, _ in rows]},
        "hovertemplate": "%{y}: %{x:.3f} ms (%{text} of the span)<extra></extra>"}],
        "layout": layout(60 + 26 * len(rows), showlegend=False,
                         xaxis={"title": {"text": "ms"}, "zeroline": False})}


def breakdown_figure(devices: pa.Table, idle_causes: dict[str, dict[str, int]]) -> Figure:
    """Per device, stacked: compute, exposed communication, exposed memory, idle by cause
    (the ``gaps`` analyzer's causes where given; what they leave is ``idle (other)``)."""
    labels = _col(devices, "device")
    parts = [("compute", _col(devices, "compute")), ("communication", _col(devices, "comm")),
             ("memory", _col(devices, "mem"))]
    idle = _col(devices, "idle")
    causes = sorted({c for per in idle_causes.values() for c in per})
    for cause in causes:
        parts.append((f"idle: {cause}", [idle_causes.get(d, {}).get(cause, 0) for d in labels]))
    rest = [max(i - sum(idle_causes.get(d, {}).values()), 0) for d, i in
            zip(labels, idle, strict=True)]
    if any(rest):
        parts.append(("idle" if not causes else "idle: other", rest))
    spans = _col(devices, "span")
    data = []
    for name, values in parts:
        key = name.removeprefix("idle: ") if name.startswith("idle: ") else name
        data.append({"type": "bar", "orientation": "h", "name": name,
                     "y": [plot_text(d) for d in labels], "x": [v / MS for v in values],
                     "customdata": [round(100 * v / s, 1) if s else 0.0
                                    for v, s in zip(values, spans, strict=True)],
                     "marker": {"color": COLORS.get(key, COLORS["idle"])},
                     "hovertemplate": f"{name}: %{{x:.3f}} ms (%{{customdata}}% of the span)"
                                      "<extra>%{y}</extra>"})
    return {"data": data, "layout": layout(110 + 34 * len(labels), barmode="stack",
                                           xaxis={"title": {"text": "ms"}},
                                           yaxis={"autorange": "reversed"})}


def steps_figure(steps: pa.Table) -> Figure:
    """Per step (and device), stacked % of the step: compute, comm, memory, idle; bars, or
    for more than ``MAX_BARS`` steps stacked areas (four shapes instead of a bar each).

    Steps are placed in table order and labelled by number: a trace may repeat a number
    (step counters restarted), which a category axis would merge into one.
    """
    several = len(set(_col(steps, "device"))) > 1
    labels = [plot_text(f"#{s} {d}" if several else f"#{s}")
              for s, d in zip(_col(steps, "step"), _col(steps, "device"), strict=True)]
    hover = [[label, round(d / MS, 3)] for label, d in
             zip(labels, _col(steps, "duration"), strict=True)]
    n = steps.num_rows
    x = list(range(n))
    bars = n <= MAX_BARS
    ticks = x if bars else x[:: max(n // 12, 1)]
    data = []
    for name, column in (("compute", "compute_pct"), ("communication", "comm_pct"),
                         ("memory", "mem_pct"), ("idle", "idle_pct")):
        shape = {"type": "bar", "marker": {"color": COLORS[name]}} if bars else {
            "type": "scatter", "mode": "lines", "stackgroup": "steps",
            "line": {"width": 0, "color": COLORS[name]}, "fillcolor": COLORS[name]}
        data.append({**shape, "name": name, "x": x, "y": _col(steps, column),
                     "customdata": hover,
                     "hovertemplate": f"{name}: %{{y:.1f}}% of %{{customdata[1]}} ms"
                                      "<extra>step %{customdata[0]}</extra>"})
    return {"data": data, "layout": layout(
        320, barmode="stack", hovermode="x unified" if not bars else "closest",
        xaxis={"title": {"text": "step" if bars else f"{n} steps in trace order"},
               "tickvals": ticks, "ticktext": [labels[i] for i in ticks]},
        yaxis={"title": {"text": "% of the step"}, "range": [0, 100]})}


def ranks_figure(ranks: pa.Table) -> Figure:
    """Per rank, stacked % of its span: compute, comm, memory, idle."""
    x = [f"rank {r}" for r in _col(ranks, "rank")]
    devices = [plot_text(d) for d in _col(ranks, "device")]
    data = []
    for name in ("compute", "communication", "memory", "idle"):
        data.append({"type": "bar", "name": name, "x": x, "y": _col(ranks, f"{name}_pct"),
                     "customdata": devices, "marker": {"color": COLORS[name]},
                     "hovertemplate": f"{name}: %{{y:.1f}}%<extra>%{{customdata}}</extra>"})
    return {"data": data, "layout": layout(300, barmode="stack",
                                           xaxis={"type": "category"},
                                           yaxis={"title": {"text": "% of the rank's span"},
                                                  "range": [0, 100]})}


def lateness_figure(skew: pa.Table) -> Figure:
    """Per rank, its total lateness at the matched collectives."""
    return {"data": [{
        "type": "bar", "x": [f"rank {r}" for r in _col(skew, "rank")],
        "y": [v / MS for v in _col(skew, "lateness")], "customdata": _col(skew, "last_at"),
        "marker": {"color": COLORS["sync"]},
        "hovertemplate": "%{x}: %{y:.3f} ms late in all, last at %{customdata} collectives"
                         "<extra></extra>"}],
        "layout": layout(260, showlegend=False, xaxis={"type": "category"},
                         yaxis={"title": {"text": "lateness (ms)"}})}


def diff_figure(kernels: pa.Table, labels: tuple[str, str], top: int = 15) -> Figure:
    """The kernels whose time changed most, baseline and candidate side by side."""
    rows = kernels.slice(0, top)
    names = [plot_text(short_name(str(n), 60)) for n in _col(rows, "name")][::-1]
    full = [plot_text(n) for n in _col(rows, "name")][::-1]
    data = []
    for column, label, color in (("time_a", labels[0], COLORS["idle"]),
                                 ("time_b", labels[1], COLORS["compute"])):
        data.append({"type": "bar", "orientation": "h", "name": plot_text(label),
                     "y": names, "x": [v / MS for v in _col(rows, column)][::-1],
                     "customdata": full, "marker": {"color": color},
                     "hovertemplate": "%{x:.3f} ms<extra>%{customdata}</extra>"})
    return {"data": data, "layout": layout(90 + 30 * rows.num_rows, barmode="group",
                                           xaxis={"title": {"text": "ms"}})}


def idle_by_cause(gaps: Report | None) -> dict[str, dict[str, int]]:
    """Device label -> idle cause -> ns, from the ``gaps`` report's causes table."""
    out: dict[str, dict[str, int]] = {}
    table = gaps.tables.get("causes") if gaps is not None else None
    if table is None:
        return out
    for device, cause, total in zip(_col(table, "device"), _col(table, "cause"),
                                    _col(table, "total"), strict=True):
        out.setdefault(device, {})[cause] = total
    return out
