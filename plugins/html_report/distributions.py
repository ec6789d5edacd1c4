"""Launch delay and kernel duration distributions, binned with numpy on a log scale.

Kernel duration: every timed ``gpu.kernel`` slice. Launch delay: the ``launch`` analyzer's
definition (HTA's): kernel start on the device minus the end of the host call that launched
it, for kernels with a known launching call outside graph launches. Bins are quarter
decades (1, 1.78, 3.16, 5.62, 10 ...); zero lands in its own bin, negative delays (clocks of
host and device that disagree) in one more.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import Trace
from tracekit.plugins.diagnosis import Activity, launch_stats
from tracekit.plugins.html_report.figures import COLORS, Figure, layout
from tracekit.toolkit import equals, format_ns, percent, report_table

PER_DECADE = 4
TINY_NS = 10_000  # the launch analyzer's default tiny_us


@dataclass
class Histogram:
    """One distribution: its figure and the counts behind it."""

    figure: Figure
    table: pa.Table
    values: int


def kernel_durations(trace: Trace) -> np.ndarray:
    """Durations (ns) of every timed kernel."""
    ev = trace.events
    keep = pc.and_(equals(ev["category"], "gpu.kernel"), equals(ev["kind"], "slice"))
    keep = pc.and_(keep, pc.and_(pc.is_valid(ev["ts_ns"]), pc.is_valid(ev["dur_ns"])))
    return ev["dur_ns"].filter(keep).to_numpy()


def launch_delays(trace: Trace) -> np.ndarray:
    """Launch delays (ns) of every device's kernels, as the ``launch`` analyzer counts them."""
    activity = Activity.of(trace)
    delays = [launch_stats(activity, work, TINY_NS).delay for work in activity.devices]
    return np.concatenate(delays) if delays else np.empty(0, dtype=np.int64)


def histogram(values: np.ndarray, what: str, color: str = COLORS["compute"]) -> Histogram | None:
    """``values`` (ns) in log bins as a bar chart and a table (None when there are none)."""
    values = np.asarray(values, dtype=np.int64)
    if not len(values):
        return None
    negative = int((values < 0).sum())
    zero = int((values == 0).sum())
    positive = values[values > 0]
    labels, counts, lows, highs = [], [], [], []
    if negative:
        labels.append("< 0")
        counts.append(negative)
        lows.append(int(values.min()))
        highs.append(0)
    if zero:
        labels.append("= 0")
        counts.append(zero)
        lows.append(0)
        highs.append(0)
    if len(positive):
        first = int(np.floor(np.log10(positive.min()) * PER_DECADE))
        last = int(np.floor(np.log10(positive.max()) * PER_DECADE)) + 1
        edges = 10.0 ** (np.arange(first, last + 1) / PER_DECADE)
        # Values sit on the edges exactly (1000 ns = 10**3): count a value in the bin it opens.
        index = np.clip(np.searchsorted(edges, positive, side="right") - 1, 0, len(edges) - 2)
        binned = np.bincount(index, minlength=len(edges) - 1)
        for k, count in enumerate(binned.tolist()):
            labels.append(f"≥ {format_ns(edges[k])}")
            counts.append(count)
            lows.append(round(edges[k]))
            highs.append(round(edges[k + 1]))
    total = len(values)
    pct = [percent(c, total) for c in counts]
    ranges = [f"{format_ns(lo)} to {format_ns(hi)}" if lo != hi else format_ns(lo)
              for lo, hi in zip(lows, highs, strict=True)]
    figure = {"data": [{"type": "bar", "x": labels, "y": counts,
                        "customdata": list(zip(ranges, pct, strict=True)),
                        "marker": {"color": color},
                        "hovertemplate": f"{what} %{{customdata[0]}}: %{{y}} kernels "
                                         "(%{customdata[1]}%)<extra></extra>"}],
              "layout": layout(320, showlegend=False,
                               xaxis={"type": "category", "automargin": True,
                                      "title": {"text": f"{what} (bins by lower edge)",
                                                "standoff": 8}},
                               yaxis={"title": {"text": "kernels"}, "automargin": True})}
    table = report_table([("from", "int", "ns", lows), ("to", "int", "ns", highs),
                          ("count", "int", None, counts), ("share_pct", "float", "%", pct)])
    return Histogram(figure, table, total)
