"""Instant events (``ph: i``/``I``), the memory counters derived from ``[memory]`` instants,
and counter events (``ph: C``)."""

from __future__ import annotations

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
    rows_of,
    scatter,
)
from tracekit.plugins.kineto.events import dictionary, where
from tracekit.plugins.kineto.fields import compact, ints
from tracekit.toolkit import factorize


def instants(ctx: Context, evs: Events, ph: str) -> list[pa.Table]:
    """The instant rows of ``evs`` (phase ``ph``), and the memory counter rows they imply."""
    cats = ctx.cats(evs, ph)
    ts, ok = ctx.times(evs.times("ts"), ctx.base_ns)
    if not ok.all():
        ctx.count(ph, cats, ~ok, NO_TS)
        evs, cats, ts = evs.where(ok), where(cats, ok), ts[ok]
    ctx.count(ph, cats, None, "events")
    name_col, args = ctx.fields(evs, ph)
    category, is_mem = _categories(dictionary(cats), name_col)
    pid = ctx.ids(evs.field("pid"), "pid", ph)
    tid = ctx.ids(evs.field("tid"), "tid", ph)
    mem_args = rows_of(args, is_mem)
    mem_arr, bad = ints(mem_args.get("Bytes"))
    if bad:
        ctx.warn(f"{ph}:[memory]", "args.Bytes is not an integer in range (null)", bad)
    table = pa.table({
        "kind": constant(len(evs), "instant"),
        "category": category,
        "name": name_col,
        "ts_ns": pa.array(ts, type=pa.int64()),
        "_pid": pid,
        "_tid": tid,
        "bytes": scatter(len(evs), np.flatnonzero(is_mem), mem_arr, pa.int64()),
        "args": ctx.args_column(args, ph),
    })
    tables = [table]
    if ctx.memory_counters and is_mem.any():
        tables.append(memory_counters(ctx, mem_args, ts[is_mem], pid[is_mem]))
    return tables


def _categories(cats: pa.DictionaryArray, names: pa.DictionaryArray
                ) -> tuple[pa.DictionaryArray, np.ndarray]:
    """The category of each instant, and which are memory events. The category depends on
    the name only for "[memory]": it is mapped once per distinct (cat, name) pair."""
    width = max(len(names.dictionary), 1)
    cat_code = cats.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64) + 1
    pair = cat_code * width + names.indices.to_numpy(zero_copy_only=False)
    distinct, inverse = np.unique(pair, return_inverse=True)
    cat_text = [None, *cats.dictionary.cast(pa.string()).to_pylist()]
    name_text = names.dictionary.cast(pa.string()).to_pylist()
    mapped = [map_category(cat_text[p // width], name_text[p % width])
              for p in distinct.tolist()]
    labels = list(dict.fromkeys(mapped))
    position = {label: i for i, label in enumerate(labels)}
    code = np.array([position[m] for m in mapped], dtype=np.int32)[inverse.reshape(-1)]
    is_mem = np.array([m == "host.memory" for m in mapped], dtype=bool)[inverse.reshape(-1)]
    # In order of first use, as dictionary_encode of the texts gives them.
    category = compact(pa.DictionaryArray.from_arrays(pa.array(code, type=pa.int32()),
                                                      pa.array(labels, type=pa.string())))
    return category, is_mem


def memory_counters(ctx: Context, margs: Args, ts: np.ndarray, pid: np.ndarray) -> pa.Table:
    """'<device> memory allocated' and '... reserved' counter rows from [memory] events'
    running totals (``margs``, ``ts`` and ``pid`` are theirs), in event order (allocated,
    then reserved, per event)."""
    places = []
    for key in ("Device Type", "Device Id"):
        values, bad = ints(margs.get(key))
        if bad:
            ctx.warn("i:[memory]", f"args.{key} is not an integer (device unknown)", bad)
        places.append((values.is_valid().to_numpy(zero_copy_only=False),
                       values.fill_null(0).to_numpy(zero_copy_only=False)))
    (type_ok, type_), (id_ok, id_) = places
    place, (u_type_ok, u_type, u_id_ok, u_id) = factorize(type_ok, type_, id_ok, id_)
    label = ["CPU" if not t_ok or t == 0 else f"GPU {i if i_ok else '?'}"
             for t_ok, t, i_ok, i in zip(u_type_ok.tolist(), u_type.tolist(),
                                         u_id_ok.tolist(), u_id.tolist(), strict=True)]
    labels = list(dict.fromkeys(label))
    position = {text: i for i, text in enumerate(labels)}
    label_code = np.array([position[text] for text in label], dtype=np.int64)[place]
    values, valid = [], []
    for key in ("Total Allocated", "Total Reserved"):
        given = margs.get(key)
        number, has = numbers(given)
        present = len(given) - given.null_count if isinstance(given, pa.Array) else \
            sum(1 for v in given if v is not None)
        if present > int(has.sum()):
            ctx.warn("i:[memory]", f"args.{key} is not a finite number (no counter "
                     "row)", present - int(has.sum()))
        values.append(number)
        valid.append(has)
    # Interleave the two series row by row, then keep the values present.
    keep = np.stack(valid, axis=1).ravel()
    count = int(keep.sum())
    ctx.out.note("derived from [memory] events", "counter rows (allocated, reserved)", count)
    series = np.stack([label_code * 2, label_code * 2 + 1], axis=1).ravel()[keep]
    texts_ = [f"{text} memory {what}" for text in labels for what in ("allocated", "reserved")]
    name = compact(pa.DictionaryArray.from_arrays(pa.array(series.astype(np.int32)),
                                                  pa.array(texts_, type=pa.string())))
    return pa.table({
        "kind": constant(count, "counter"),
        "category": constant(count, "counter.memory"),
        "name": name,
        "ts_ns": pa.array(np.repeat(ts, 2)[keep], type=pa.int64()),
        "_pid": pa.array(np.repeat(pid, 2)[keep], type=pa.int64()),
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
