"""Kineto trace events to tracekit event columns: events grouped by phase, each group to a
table, then flows, devices and processes over the whole."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from tracekit import Source, TraceBuilder
from tracekit.plugins.kineto.context import Context, Events
from tracekit.plugins.kineto.devices import (
    device_columns,
    devices_and_processes,
    grids_in_blocks,
)
from tracekit.plugins.kineto.events import dictionary
from tracekit.plugins.kineto.fields import texts
from tracekit.plugins.kineto.flows import bind_flows
from tracekit.plugins.kineto.instants import counters, instants
from tracekit.plugins.kineto.metadata import metadata_events, top_metadata
from tracekit.plugins.kineto.slices import slices
from tracekit.toolkit import any_true, equals, fields, release_free_memory

# Columns every kind of row has while converting (a trace may hold only instants).
_WORK_COLUMNS = {"dur_ns": pa.int64(), "correlation": pa.int64(), "_tid": pa.int64(),
                 "_arg_device": pa.int64(), "_arg_stream": pa.int64()}


def convert(top: dict[str, Any], events: Events, out: TraceBuilder, source: Source,
            memory_counters: bool) -> None:
    """Convert every event of one document, then link flows, devices and processes."""
    ctx = Context(top, out, source, memory_counters)
    phases = events.field("ph")
    codes = dictionary(phases if isinstance(phases, pa.Array) else texts(phases)[0])
    index = codes.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    by_phase: dict[str | None, np.ndarray] = {
        p: np.flatnonzero(index == i) for i, p in enumerate(codes.dictionary.to_pylist())}
    if codes.null_count:
        by_phase[None] = np.flatnonzero(index < 0)
    empty = np.array([], dtype=np.int64)
    flow_rows = np.concatenate([by_phase.pop(p) for p in ("s", "f", "t") if p in by_phase]
                               or [empty])
    # Each phase's events apart; the whole is let go (the typed decode's columns are freed).
    group = {p: events.take(idx) for p, idx in by_phase.items() if len(idx)}
    flows = events.take(flow_rows, args=False)  # flows have no args to read
    events.release()
    release_free_memory()  # what the decode freed
    metadata_events(ctx, group.pop("M", events.take(empty)))
    tables = []
    if "X" in group:
        tables.append(slices(ctx, group.pop("X")))
    if "C" in group and _has(group["C"].field("cat"), "counter.memory"):
        # Written by tracekit: the memory counters are in the file already.
        ctx.memory_counters = False
    for ph in ("i", "I"):
        if ph in group:
            tables.extend(instants(ctx, group.pop(ph), ph))
    if "C" in group:
        tables.append(counters(ctx, group.pop("C")))
    for ph, evs in group.items():
        cats = evs.field("cat")
        cats = cats if isinstance(cats, pa.Array) else texts(cats)[0]
        if ph is None:
            ctx.count("(no ph)", cats, None, "skipped: no phase ('ph')")
        else:
            ctx.count(ph[:20], cats, None, f"skipped: phase '{ph[:20]}' is not supported")
    # The decoded columns are free now (but for the args text the slices keep): hand their
    # memory back before the work over the whole table.
    del group, phases, codes, index, by_phase
    release_free_memory()
    tables = [t for t in tables if t.num_rows]
    table = pa.concat_tables(tables, promote_options="permissive") if tables else None
    if table is None:
        if len(flows):
            kinds = [f"{p}:{c}" for p, c in zip(_values(flows.field("ph")),
                                                _values(flows.field("cat")), strict=True)]
            ctx.count(None, kinds, None, "skipped: flow endpoint matches no slice")
        devices_and_processes(ctx, None)
        top_metadata(ctx)
        return
    for name, type_ in _WORK_COLUMNS.items():
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, type_))
    table = bind_flows(ctx, table, flows)
    del flows  # a copy: its memory back too
    release_free_memory()
    table = device_columns(ctx, table)
    table = grids_in_blocks(ctx, table)
    table = table.drop_columns([name for name in table.column_names if name.startswith("_")])
    if isinstance(top.get("tracekit"), dict):
        # Written by tracekit: the typed columns Kineto has no field for are args keys named
        # as the column (tracekit.fields); the file lists which.
        table, bad = fields.restore(table, top["tracekit"].get("args_columns") or ())
        for column, n in bad.items():
            out.note(f"args.{column}", "kept in args: the tool's own key, not a value of "
                     "the column", n)
    devices_and_processes(ctx, table)
    # A table, not columns: the builder takes it chunk by chunk, as it is (the args are the
    # decoded text's chunks), where columns would be combined, a copy of each.
    out.add_events(table)
    top_metadata(ctx)


def _has(values: list[Any] | pa.Array, text: str) -> bool:
    """Whether any of the values is ``text``."""
    if isinstance(values, pa.Array):
        return any_true(equals(values, text))
    return text in texts(values)[0]


def _values(values: list[Any] | pa.Array) -> list[Any]:
    """Text values as Python strings (numbers as their text, other values None)."""
    return values.to_pylist() if isinstance(values, pa.Array) else texts(values)[0]
