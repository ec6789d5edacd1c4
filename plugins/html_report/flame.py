"""A flame graph (plotly icicle) of the CPU samples: the call tree from the stacks table.

Each node is a call site (a frame reached by one path from the root), sized by the weight of
the samples whose stack passes through it, as the ``hotspots`` and ``cpu`` analyzers weigh
them (the time event, idle samples left out). Only the ``TOP`` heaviest nodes are drawn; a
node's hidden descendants stay in its size, so widths keep adding up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import Trace
from tracekit.plugins.html_report.figures import Figure, layout
from tracekit.plugins.html_report.markup import plot_text
from tracekit.toolkit import (
    StackTree,
    demangle,
    format_ns,
    idle_rows,
    percent,
    report_table,
    sample_events,
    sample_weights,
    sampled_events,
    time_event,
    weight_unit,
)

TOP = 300
# A colour per module (library), as flame graphs colour frames by where their code lives.
PALETTE = ("#e8a33d", "#d96c4f", "#c9b458", "#e58c8a", "#d4a373", "#b5c46a", "#f2c57c",
           "#cc8b65", "#e6b85c", "#d97b66")
TABLE_ROWS = 30


@dataclass
class Flame:
    """The icicle figure, the heaviest nodes as a table, and what was drawn."""

    figure: Figure
    table: pa.Table
    nodes: int
    drawn: int
    unit: str
    event: str | None


def _amount(w: float, unit: str) -> str:
    return format_ns(w) if unit == "ns" else f"{w:,.6g} {unit}"


def flame_graph(trace: Trace, top: int = TOP) -> Flame | None:
    """The icicle of ``trace``'s CPU samples (None without samples or stacks)."""
    event = time_event(sampled_events(trace))
    rows, _ = sample_events(trace, event)
    if not rows.num_rows or not trace.stacks.num_rows:
        return None
    weights = sample_weights(rows, "value")[0].to_numpy(zero_copy_only=False).astype(float)
    idle = idle_rows(trace, rows, StackTree(trace))
    if idle.any():
        rows, weights = rows.filter(pa.array(~idle)), weights[~idle]
    unit = weight_unit(trace, rows, event)
    ids = trace.stacks["stack_id"].to_numpy(zero_copy_only=False)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]

    def position(values: np.ndarray) -> np.ndarray:
        """Row in the stacks table of each stack id, -1 where it has none."""
        at = np.clip(np.searchsorted(sorted_ids, values), 0, max(len(ids) - 1, 0))
        found = sorted_ids[at] == values
        return np.where(found, order[at], -1)

    parent = position(pc.fill_null(trace.stacks["parent_id"], -1).to_numpy())
    sample_stack = position(pc.fill_null(rows["stack_id"], -1).to_numpy())
    stacked = sample_stack >= 0
    self_w = np.bincount(sample_stack[stacked], weights=weights[stacked], minlength=len(ids))
    depth = _depths(parent)
    total = self_w.copy()
    for d in range(int(depth.max()), 0, -1):
        at = np.flatnonzero(depth == d)
        np.add.at(total, parent[at], total[at])
    grand = float(weights.sum())
    if grand <= 0 or not (total > 0).any():
        return None
    # Heaviest first, parents before children (a parent weighs at least its child).
    nonzero = np.flatnonzero(total > 0)
    ranked = nonzero[np.lexsort((depth[nonzero], -total[nonzero]))][:top]
    keep = np.zeros(len(ids), dtype=bool)
    keep[ranked] = True
    while True:  # drop any node whose parent was not kept (only float ties could cause one)
        orphan = ranked[(parent[ranked] >= 0) & ~keep[np.maximum(parent[ranked], 0)]]
        if not len(orphan):
            break
        keep[orphan] = False
        ranked = ranked[keep[ranked]]
    remainder = total.copy()
    child = ranked[parent[ranked] >= 0]
    np.subtract.at(remainder, parent[child], total[child])
    frames = trace.frames
    frame_pos = {f: i for i, f in enumerate(frames["frame_id"].to_pylist())}
    names = frames["name"].to_pylist()
    modules = frames["module"].to_pylist()
    frame_of = trace.stacks["frame_id"].to_pylist()
    # The root's own share: samples without a stack and call trees too light to be drawn.
    elsewhere = max(grand - float(total[ranked[parent[ranked] < 0]].sum()), 0.0)
    labels, node_ids, parents, values, hover = ["all"], ["all"], [""], [elsewhere], [
        f"all samples: {_amount(grand, unit)}<br>not drawn: {_amount(elsewhere, unit)}"]
    colors = ["#eeeeee"]
    palette: dict[str, str] = {}
    rows_out: dict[str, list] = {k: [] for k in ("total_pct", "self_pct", "total", "self",
                                                 "depth", "module", "function")}
    for node in ranked.tolist():
        at = frame_pos.get(frame_of[node])
        name = demangle(names[at]) if at is not None and names[at] else "?"
        module = (modules[at] if at is not None else None) or ""
        labels.append(plot_text(name))
        node_ids.append(f"s{node}")
        parents.append("all" if parent[node] < 0 else f"s{parent[node]}")
        values.append(max(float(remainder[node]), 0.0))
        colors.append(palette.setdefault(module, PALETTE[len(palette) % len(PALETTE)]))
        hover.append("<br>".join(plot_text(part) for part in (
            name, f"module: {module or '-'}",
            f"total: {_amount(total[node], unit)} ({percent(total[node], grand)}%)",
            f"self: {_amount(self_w[node], unit)} ({percent(self_w[node], grand)}%)")))
        if len(rows_out["function"]) < TABLE_ROWS:
            for key, value in (("total_pct", percent(total[node], grand)),
                               ("self_pct", percent(self_w[node], grand)),
                               ("total", float(total[node])), ("self", float(self_w[node])),
                               ("depth", int(depth[node])), ("module", module or "-"),
                               ("function", name)):
                rows_out[key].append(value)
    figure = {"data": [{"type": "icicle", "ids": node_ids, "labels": labels,
                        "parents": parents, "values": values, "branchvalues": "remainder",
                        "hovertext": hover, "hoverinfo": "text", "textinfo": "label",
                        "tiling": {"orientation": "v"}, "marker": {"colors": colors},
                        "maxdepth": 12}],
              "layout": layout(560, margin={"l": 0, "r": 0, "t": 10, "b": 0})}
    kind, cast = ("int", int) if np.all(np.mod(weights, 1) == 0) else ("float", float)
    table = report_table([
        ("total_pct", "float", "%", rows_out["total_pct"]),
        ("self_pct", "float", "%", rows_out["self_pct"]),
        ("total", kind, unit, [cast(v) for v in rows_out["total"]]),
        ("self", kind, unit, [cast(v) for v in rows_out["self"]]),
        ("depth", "int", None, rows_out["depth"]), ("module", "str", None, rows_out["module"]),
        ("function", "str", None, rows_out["function"])])
    return Flame(figure, table, int((total > 0).sum()), len(ranked), unit, event)


def _depths(parent: np.ndarray) -> np.ndarray:
    """Depth of each node (0 at a root), by pointer jumping; a cycle in a damaged stacks
    table stops after as many steps as there are nodes."""
    depth = np.zeros(len(parent), dtype=np.int64)
    up = parent.copy()
    for _ in range(len(parent)):
        alive = up >= 0
        if not alive.any():
            break
        depth[alive] += 1
        up[alive] = parent[up[alive]]
    return depth
