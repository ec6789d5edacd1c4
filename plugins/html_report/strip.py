"""Busy and idle over time per device: the activity binned, the largest gaps marked.

The strip never draws one element per event: each device's compute, exposed communication
and exposed memory time is summed into ``BINS`` equal bins over the span of all devices
(first to last GPU activity), from the ``breakdown`` split (``device_timelines``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from tracekit import Report, Trace
from tracekit.plugins.diagnosis import DeviceTimeline, device_timelines
from tracekit.plugins.html_report.figures import COLORS, MS, Figure, layout
from tracekit.plugins.html_report.markup import plot_text
from tracekit.toolkit import format_ns, report_table, short_name
from tracekit.toolkit import intervals as iv

BINS = 400
MAX_DEVICES = 32  # strips drawn; the others are counted under the plot
LABEL_PX, PLOT_PX, TOP_PX, BOTTOM_PX = 20, 80, 40, 50


@dataclass
class Strip:
    """The strip's figure, the gaps it marks (as a table), and how it was binned."""

    figure: Figure
    marked: pa.Table
    bin_ns: float
    bins: int
    devices: int
    shown: int


def _parts(tl: DeviceTimeline) -> list[tuple[str, iv.IntervalSet]]:
    return [("compute", tl.compute), ("communication", tl.exposed_communication),
            ("memory", tl.exposed_memory)]


def busy_strip(trace: Trace, gaps: Report | None, bins: int = BINS) -> Strip | None:
    """The strip of every device of ``trace`` (None without GPU activity); the largest gaps
    of the ``gaps`` report, when given, are numbered on it with their host context."""
    timelines = [tl for tl in device_timelines(trace) if tl.span > 0]
    if not timelines:
        return None
    shown = timelines[:MAX_DEVICES]
    t0 = min(tl.start for tl in timelines)
    t1 = max(tl.end for tl in timelines)
    edges = np.unique(np.linspace(t0, t1, bins + 1).round().astype(np.int64))
    lo, hi = edges[:-1], edges[1:]
    width = np.maximum(hi - lo, 1)
    mid = ((lo + hi) / 2 - t0) / MS
    n = len(shown)
    # Each strip: a line for the device's name above a plot of PLOT_PX, in pixels of the
    # whole figure, so that the layout holds for one device or thirty-two.
    height = TOP_PX + n * (LABEL_PX + PLOT_PX) + BOTTOM_PX
    plot_area = height - TOP_PX - BOTTOM_PX
    data: list[dict[str, Any]] = []
    axes: dict[str, Any] = {}
    notes = []
    for i, tl in enumerate(shown):
        axis = "y" if i == 0 else f"y{i + 1}"
        top = 1 - (i * (LABEL_PX + PLOT_PX) + LABEL_PX) / plot_area
        axes["yaxis" if i == 0 else f"yaxis{i + 1}"] = {
            "domain": [max(top - PLOT_PX / plot_area, 0), top], "range": [0, 112],
            "fixedrange": True, "tickvals": [0, 50, 100], "ticksuffix": "%"}
        notes.append({"text": plot_text(tl.work.label), "xref": "paper", "yref": "paper",
                      "x": 0, "y": top, "xanchor": "left", "yanchor": "bottom",
                      "showarrow": False, "font": {"size": 12}})
        for name, part in _parts(tl):
            pct = np.round(iv.covered_within(lo, hi, part) * 100.0 / width, 1)
            data.append({"type": "scatter", "mode": "lines", "name": name, "x": mid,
                         "y": pct, "yaxis": axis, "stackgroup": f"s{i}", "legendgroup": name,
                         "showlegend": i == 0, "line": {"width": 0, "color": COLORS[name]},
                         "fillcolor": COLORS[name],
                         "hovertemplate": f"{name}: %{{y}}%<extra>{plot_text(tl.work.label)}"
                                          "</extra>"})
    marked = _marked(gaps, {tl.work.label: (i, tl) for i, tl in enumerate(shown)}, t0)
    if marked is not None and marked[0].num_rows:
        xs, ys, axes_of, labels, hover = marked[1]
        for axis in sorted(set(axes_of)):
            pick = [k for k, a in enumerate(axes_of) if a == axis]
            data.append({"type": "scatter", "mode": "markers+text", "name": "largest gaps",
                         "x": [xs[k] for k in pick], "y": [ys[k] for k in pick],
                         "yaxis": axis, "text": [labels[k] for k in pick],
                         "textposition": "top center", "legendgroup": "gaps",
                         "cliponaxis": False,
                         "showlegend": axis == min(axes_of),
                         "marker": {"symbol": "triangle-down", "size": 10, "color": "#d62728"},
                         "hovertext": [hover[k] for k in pick], "hoverinfo": "text"})
    bin_ns = float((t1 - t0) / max(len(lo), 1))
    fig = {"data": data, "layout": layout(
        height, margin={"l": 10, "r": 10, "t": TOP_PX, "b": BOTTOM_PX}, annotations=notes,
        xaxis={"title": {"text": "ms since the first GPU activity"},
               "anchor": "y" if n == 1 else f"y{n}"}, **axes)}
    table = marked[0] if marked is not None else report_table([])
    return Strip(fig, table, bin_ns, len(lo), len(timelines), n)


def _marked(gaps: Report | None, shown: dict[str, tuple[int, DeviceTimeline]], t0: int,
            ) -> tuple[pa.Table, tuple[list[Any], ...]] | None:
    """The gaps report's largest gaps on the shown devices, numbered, as a table and as
    marker coordinates (at the middle of the gap, on top of its device's strip)."""
    largest = gaps.tables.get("largest") if gaps is not None else None
    if largest is None:
        return None
    rows = [r for r in largest.to_pylist() if r.get("device") in shown]
    xs, ys, axes, labels, hover = [], [], [], [], []
    for number, row in enumerate(rows, start=1):
        i, tl = shown[row["device"]]
        start = tl.start + row["at"] - t0
        xs.append((start + row["duration"] / 2) / MS)
        ys.append(100)
        axes.append("y" if i == 0 else f"y{i + 1}")
        labels.append(str(number))
        hover.append("<br>".join(plot_text(part) for part in (
            f"gap {number}: {format_ns(row['duration'])} {row['cause']} at {format_ns(start)}",
            f"host: {short_name(row.get('host_during_gap') or '-', 100)}",
            f"next: {short_name(row.get('next_gpu_work') or '-', 100)}")))
    table = report_table([
        ("gap", "int", None, list(range(1, len(rows) + 1))),
        ("device", "str", None, [r["device"] for r in rows]),
        ("at", "int", "ns", [shown[r["device"]][1].start + r["at"] - t0 for r in rows]),
        ("duration", "int", "ns", [r["duration"] for r in rows]),
        ("cause", "str", None, [r["cause"] for r in rows]),
        ("host_during_gap", "str", None, [r.get("host_during_gap") or "" for r in rows]),
        ("next_gpu_work", "str", None, [r.get("next_gpu_work") or "" for r in rows])])
    return table, (xs, ys, axes, labels, hover)
