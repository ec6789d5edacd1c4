"""Instant events (``ph: i``/``I``), the memory counters derived from ``[memory]`` instants,
and counter events (``ph: C``)."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from itertools import compress

import numpy as np
import pyarrow as pa
from tracekit.plugins.kineto.categories import map_category
from tracekit.plugins.kineto.context import (
    NO_TS,
    Args,
    Context,
    Events,
    constant,
    numbers,
    scatter,
)
from tracekit.plugins.kineto.fields import ints


def instants(ctx: Context, evs: Events, ph: str) -> list[pa.Table]:
    """The instant rows of ``evs`` (phase ``ph``), and the memory counter rows they imply."""
    cats = _texts(ctx.cats(evs, ph))
    ts, ok = ctx.times(evs.times("ts"), ctx.base_ns)
    if not ok.all():
        ctx.count(ph, cats, ~ok, NO_TS)
        evs, cats, ts = evs.where(ok), list(compress(cats, ok)), ts[ok]
    ctx.count(ph, cats, None, "events")
    name_col, args = ctx.fields(evs, ph)
    name_text = name_col.dictionary.to_pylist()
    name_idx = name_col.indices.to_numpy(zero_copy_only=False)
    # The category depends on the name only for "[memory]": map per distinct pair.
    pairs = Counter(zip(cats, (name_text[i] for i in name_idx), strict=True))
    mapped = {p: map_category(*p) for p in pairs}
    categories = [mapped[p] for p in zip(cats, (name_text[i] for i in name_idx),
                                              strict=True)]
    is_mem = np.array([c == "host.memory" for c in categories], dtype=bool)
    pid = ctx.ids(evs.field("pid"), "pid", ph)
    tid = ctx.ids(evs.field("tid"), "tid", ph)
    mem_arr, bad = ints(args.take(np.flatnonzero(is_mem)).get("Bytes"))
    if bad:
        ctx.warn(f"{ph}:[memory]", "args.Bytes is not an integer in range (null)", bad)
    table = pa.table({
        "kind": constant(len(evs), "instant"),
        "category": pa.array(categories, type=pa.string()).dictionary_encode(),
        "name": name_col,
        "ts_ns": pa.array(ts, type=pa.int64()),
        "_pid": pid,
        "_tid": tid,
        "bytes": scatter(len(evs), np.flatnonzero(is_mem), mem_arr, pa.int64()),
        "args": ctx.args_column(args, ph),
    })
    tables = [table]
    if ctx.memory_counters and is_mem.any():
        tables.append(memory_counters(ctx, args, is_mem, ts, pid))
    return tables


def memory_counters(ctx: Context, args: Args, is_mem: np.ndarray, ts: np.ndarray,
                    pid: np.ndarray) -> pa.Table:
    """'<device> memory allocated' and '... reserved' counter rows from [memory] events'
    running totals, in event order (allocated, then reserved, per event)."""
    rows = np.flatnonzero(is_mem)
    margs = args.take(rows)
    places = []
    for key in ("Device Type", "Device Id"):
        values, bad = ints(margs.get(key))
        if bad:
            ctx.warn("i:[memory]", f"args.{key} is not an integer (device unknown)", bad)
        places.append(values.to_pylist())
    places = list(zip(*places, strict=True))
    label = {p: "CPU" if p[0] in (0, None) else f"GPU {'?' if p[1] is None else p[1]}"
             for p in set(places)}
    names_, values, valid = [], [], []
    for key, what in (("Total Allocated", "allocated"), ("Total Reserved", "reserved")):
        given = margs.get(key)
        number, has = numbers(given)
        present = len(given) - given.null_count if isinstance(given, pa.Array) else \
            sum(1 for v in given if v is not None)
        if present > int(has.sum()):
            ctx.warn("i:[memory]", f"args.{key} is not a finite number (no counter "
                     "row)", present - int(has.sum()))
        names_.append(pa.array([f"{label[p]} memory {what}" for p in places],
                               type=pa.string()).to_numpy(zero_copy_only=False))
        values.append(number)
        valid.append(has)
    # Interleave the two series row by row, then keep the values present.
    keep = np.stack(valid, axis=1).ravel()
    count = int(keep.sum())
    ctx.out.note("derived from [memory] events", "counter rows (allocated, reserved)", count)
    return pa.table({
        "kind": constant(count, "counter"),
        "category": constant(count, "counter.memory"),
        "name": pa.array(np.stack(names_, axis=1).ravel()[keep],
                         type=pa.string()).dictionary_encode(),
        "ts_ns": pa.array(np.repeat(ts[rows], 2)[keep], type=pa.int64()),
        "_pid": pa.array(np.repeat(pid[rows], 2)[keep], type=pa.int64()),
        "value": pa.array(np.stack(values, axis=1).ravel()[keep], type=pa.float64()),
    })


def counters(ctx: Context, evs: Events) -> pa.Table:
    """One counter row per finite numeric series in each C event's args."""
    cats = _texts(ctx.cats(evs, "C"))
    ts, ok = ctx.times(evs.times("ts"), ctx.base_ns)
    if not ok.all():
        ctx.count("C", cats, ~ok, NO_TS)
        evs, cats, ts = evs.where(ok), list(compress(cats, ok)), ts[ok]
    name_col, args = ctx.fields(evs, "C")
    event_names = name_col.to_pylist()
    names_, values, idx = [], [], []
    empty = np.zeros(len(evs), dtype=bool)
    not_finite = 0
    for i, series in enumerate(args.dicts()):
        numeric = {k: v for k, v in series.items()
                   if type(v) in (int, float, Decimal)} if series else {}
        kept = 0
        for key, value in numeric.items():
            number = float(value)
            if not np.isfinite(number):
                not_finite += 1
                continue
            name = event_names[i]
            names_.append(name if len(numeric) == 1 else f"{name} {key}")
            values.append(number)
            idx.append(i)
            kept += 1
        empty[i] = not kept
    if not_finite:
        ctx.warn("C", "a series value is NaN, infinite or too large (no row)", not_finite)
    ctx.count("C", cats, empty, "skipped: no finite numeric series in args")
    ctx.count("C", cats, ~empty, "counter rows (one per series)")
    rows = np.array(idx, dtype=np.int64)
    mapped = {c: map_category(c) for c in set(cats)}
    cat_of = [mapped[cats[i]] for i in idx]
    cat_of = [c if c.startswith("counter.") else "counter.trace" for c in cat_of]
    pids = ctx.ids(evs.field("pid"), "pid", "C")
    return pa.table({
        "kind": constant(len(idx), "counter"),
        "category": pa.array(cat_of, type=pa.string()).dictionary_encode(),
        "name": pa.array(names_, type=pa.string()).dictionary_encode(),
        "ts_ns": pa.array(ts[rows], type=pa.int64()),
        "_pid": pa.array(pids[rows], type=pa.int64()),
        "value": pa.array(values, type=pa.float64()),
    })


def _texts(values: list[str | None] | pa.Array) -> list[str | None]:
    return values.to_pylist() if isinstance(values, pa.Array) else values
