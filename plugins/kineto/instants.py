"""Instant events (``ph: i``/``I``), the memory counters derived from ``[memory]`` instants,
and counter events (``ph: C``)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

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
    cats = ctx.cats(evs, "C")
    ts, ok = ctx.times(evs.times("ts"), ctx.base_ns)
    if not ok.all():
        ctx.count("C", cats, ~ok, NO_TS)
        evs, cats, ts = evs.where(ok), where(cats, ok), ts[ok]
    name_col, args = ctx.fields(evs, "C")
    rows, key, value, numeric, keys, not_finite = _series(args.dicts(), len(evs))
    empty = np.bincount(rows, minlength=len(evs)) == 0
    if not_finite:
        ctx.warn("C", "a series value is NaN, infinite or too large (no row)", not_finite)
    ctx.count("C", cats, empty, "skipped: no finite numeric series in args")
    ctx.count("C", cats, ~empty, "counter rows (one per series)")
    # A series is named by its event, and by its key too where the event has several.
    names_ = name_col.dictionary.cast(pa.string()).to_pylist()
    key = np.where(numeric[rows] == 1, -1, key)
    name = _labels(name_col.indices.to_numpy(zero_copy_only=False)[rows], key,
                   lambda n, k: names_[n] if k < 0 else f"{names_[n]} {keys[k]}")
    cat_codes = dictionary(cats)
    cat_text = [None, *cat_codes.dictionary.cast(pa.string()).to_pylist()]
    category = _labels(cat_codes.indices.fill_null(-1).to_numpy(zero_copy_only=False)[rows]
                       + 1, np.zeros(len(rows), dtype=np.int64),
                       lambda c, _: _counter_category(cat_text[c]))
    pids = ctx.ids(evs.field("pid"), "pid", "C")
    return pa.table({
        "kind": constant(len(rows), "counter"),
        "category": category,
        "name": name,
        "ts_ns": pa.array(ts[rows], type=pa.int64()),
        "_pid": pa.array(pids[rows], type=pa.int64()),
        "value": pa.array(value, type=pa.float64()),
    })


def _counter_category(cat: str | None) -> str:
    mapped = map_category(cat)
    return mapped if mapped.startswith("counter.") else "counter.trace"


_NUMBER = (int, float, Decimal)


def _series(objs: list[dict[str, Any] | None], n: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str], int]:
    """The finite numeric values of the args objects ``objs``, in order (object, then key):
    each one's object, key (into the keys returned) and value; how many numeric values each
    object has; the keys; how many numeric values were not finite. The objects are grouped
    by their keys, and each key of a group is read as one column."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, obj in enumerate(objs):
        if obj:
            groups.setdefault(tuple(obj), []).append(i)
    numeric = np.zeros(n, dtype=np.int64)
    keys: dict[str, int] = {}
    parts: list[tuple[np.ndarray, int, int, np.ndarray]] = []
    not_finite = 0
    for names, members in groups.items():
        at = np.array(members, dtype=np.int64)
        for position, name in enumerate(names):
            values = [objs[i][name] for i in members]  # type: ignore[index]
            if set(map(type, values)) <= {int, float}:
                is_number = np.ones(len(values), dtype=bool)
                number = np.array(values, dtype=np.float64)
            else:
                is_number = np.array([type(v) in _NUMBER for v in values], dtype=bool)
                number = np.array([float(v) if k else 0.0
                                   for v, k in zip(values, is_number, strict=True)],
                                  dtype=np.float64)
            numeric[at[is_number]] += 1
            finite = is_number & np.isfinite(number)
            not_finite += int((is_number & ~finite).sum())
            parts.append((at[finite], position, keys.setdefault(name, len(keys)),
                          number[finite]))
    if not parts:
        none = np.zeros(0, dtype=np.int64)
        return none, none, np.zeros(0), numeric, list(keys), not_finite
    rows = np.concatenate([p[0] for p in parts])
    position = np.concatenate([np.full(len(p[0]), p[1]) for p in parts])
    key = np.concatenate([np.full(len(p[0]), p[2]) for p in parts])
    value = np.concatenate([p[3] for p in parts])
    order = np.lexsort((position, rows))
    return rows[order], key[order], value[order], numeric, list(keys), not_finite


def _labels(major: np.ndarray, minor: np.ndarray, label: Any) -> pa.DictionaryArray:
    """``label(major, minor)`` of each row as a dictionary array in order of first use (as
    ``dictionary_encode`` of the texts gives it), each label made once per distinct pair."""
    width = int(minor.max()) + 2 if len(minor) else 1
    distinct, inverse = np.unique(major.astype(np.int64) * width + minor + 1,
                                  return_inverse=True)
    texts_ = [label(int(c // width), int(c % width) - 1) for c in distinct.tolist()]
    unique = list(dict.fromkeys(texts_))
    position = {text: i for i, text in enumerate(unique)}
    code = np.array([position[t] for t in texts_], dtype=np.int32)[inverse.reshape(-1)]
    return compact(pa.DictionaryArray.from_arrays(pa.array(code, type=pa.int32()),
                                                  pa.array(unique, type=pa.string())))
