"""Kineto trace events to tracekit event columns: events grouped by phase, each group to a
table, then flows, devices and processes over the whole."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from tracekit.builder import TraceBuilder
from tracekit.fields import restore
from tracekit.inputs import Source
from tracekit.plugins.kineto.context import Context
from tracekit.plugins.kineto.devices import device_columns, devices_and_processes
from tracekit.plugins.kineto.fields import texts
from tracekit.plugins.kineto.flows import bind_flows
from tracekit.plugins.kineto.instants import counters, instants
from tracekit.plugins.kineto.metadata import metadata_events, top_metadata
from tracekit.plugins.kineto.slices import slices

# Columns every kind of row has while converting (a trace may hold only instants).
_WORK_COLUMNS = {"dur_ns": pa.int64(), "correlation": pa.int64(), "_tid": pa.int64(),
                 "_arg_device": pa.int64(), "_arg_stream": pa.int64()}


def convert(top: dict[str, Any], raw_events: list[Any], out: TraceBuilder, source: Source,
            memory_counters: bool) -> None:
    """Convert every event of one document, then link flows, devices and processes."""
    ctx = Context(top, out, source, memory_counters)
    events = [e for e in raw_events if type(e) is dict]
    if len(events) != len(raw_events):
        out.note("non-object entries", "skipped: not a JSON object",
                 len(raw_events) - len(events))
    phases, _ = texts([e.get("ph") for e in events])
    codes = pa.array(phases, type=pa.string()).dictionary_encode()
    index = codes.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    by_phase: dict[str | None, np.ndarray] = {
        p: np.flatnonzero(index == i) for i, p in enumerate(codes.dictionary.to_pylist())}
    if codes.null_count:
        by_phase[None] = np.flatnonzero(index < 0)
    metadata_events(ctx, events, by_phase.pop("M", np.array([], dtype=np.int64)))
    tables = []
    if "X" in by_phase:
        tables.append(slices(ctx, [events[i] for i in by_phase.pop("X")]))
    if "C" in by_phase and any(events[i].get("cat") == "counter.memory"
                               for i in by_phase["C"]):
        # Written by tracekit: the memory counters are in the file already.
        ctx.memory_counters = False
    for ph in ("i", "I"):
        if ph in by_phase:
            tables.extend(instants(ctx, [events[i] for i in by_phase.pop(ph)], ph))
    if "C" in by_phase:
        tables.append(counters(ctx, [events[i] for i in by_phase.pop("C")]))
    flows = [events[i] for p in ("s", "f", "t") if p in by_phase for i in by_phase.pop(p)]
    for ph, idx in by_phase.items():
        cats, _ = texts([events[i].get("cat") for i in idx])
        if ph is None:
            ctx.count("(no ph)", cats, None, "skipped: no phase ('ph')")
        else:
            ctx.count(ph[:20], cats, None, f"skipped: phase '{ph[:20]}' is not supported")
    tables = [t for t in tables if t.num_rows]
    table = pa.concat_tables(tables, promote_options="permissive") if tables else None
    if table is None:
        if flows:
            kinds = [f"{e.get('ph')}:{c}" for e, c in zip(
                flows, texts([e.get("cat") for e in flows])[0], strict=True)]
            ctx.count(None, kinds, None, "skipped: flow endpoint matches no slice")
        devices_and_processes(ctx, None)
        top_metadata(ctx)
        return
    for name, type_ in _WORK_COLUMNS.items():
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, type_))
    table = bind_flows(ctx, table, flows)
    table = device_columns(ctx, table)
    if isinstance(top.get("tracekit"), dict):
        # Written by tracekit: the typed columns Kineto has no field for are args keys named
        # as the column (tracekit.fields); the file lists which.
        table, bad = restore(table, top["tracekit"].get("args_columns") or ())
        for column, n in bad.items():
            out.note(f"args.{column}", "kept in args: the tool's own key, not a value of "
                     "the column", n)
    devices_and_processes(ctx, table)
    out.add_events({name: table[name] for name in table.column_names
                    if not name.startswith("_")})
    top_metadata(ctx)
