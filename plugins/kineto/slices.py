"""Complete events (``ph: X``) to slice rows, with the typed columns of kernels and copies."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.kineto.categories import AUTOGRAD_KEY, DEVICE_CATEGORIES, map_category
from tracekit.plugins.kineto.context import (
    NO_TS,
    Args,
    Context,
    Events,
    constant,
    rows_of,
    scatter,
)
from tracekit.plugins.kineto.events import dictionary, where
from tracekit.plugins.kineto.fields import INT32, compact, ints
from tracekit.plugins.kineto.timestamps import INT64_MAX, us_to_ns
from tracekit.toolkit import equals, is_in

_MEMCPY_NAME = re.compile(r"Memcpy\s+(\w+)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.IGNORECASE)
_MEMSET_NAME = re.compile(r"Memset\s*\((\w+)\)", re.IGNORECASE)


def slices(ctx: Context, xs: Events) -> pa.Table:
    """The slice rows of the X events ``xs``; those without a usable time are counted."""
    cats = ctx.cats(xs, "X")
    ts, ts_ok = ctx.times(xs.times("ts"), ctx.base_ns)
    dur, dur_ok = us_to_ns(xs.times("dur"))
    negative = dur < 0
    if negative.any():
        ctx.warn("X", "negative dur (clamped to 0, as Kineto does since 2022)",
                 int(negative.sum()))
        dur = np.where(negative, 0, dur)
    end_ok = ts <= INT64_MAX - dur  # dur >= 0 here: no overflow
    keep = ts_ok & dur_ok & end_ok
    if not keep.all():
        ctx.count("X", cats, ~ts_ok, NO_TS)
        ctx.count("X", cats, ts_ok & ~dur_ok, "skipped: no usable dur (missing, not a "
                  "number, or out of range)")
        ctx.count("X", cats, ts_ok & dur_ok & ~end_ok, "skipped: ts + dur beyond the "
                  "int64 ns range")
        xs, cats = xs.where(keep), where(cats, keep)
        ts, dur = ts[keep], dur[keep]
    ctx.count("X", cats, None, "events")
    name_col, args = ctx.fields(xs, "X")
    cat_dict = compact(dictionary(cats))
    mapped = [map_category(c) for c in cat_dict.dictionary.to_pylist()]
    # A missing cat is a null index: "other", like an unknown one.
    category = _steps_as_ranges(pa.DictionaryArray.from_arrays(
        cat_dict.indices.fill_null(len(mapped)), pa.array([*mapped, "other"])), name_col, ctx)
    n = len(xs)
    columns: dict[str, pa.Array] = {
        "kind": constant(n, "slice"),
        "category": category,
        "name": name_col,
        "ts_ns": pa.array(ts),
        "dur_ns": pa.array(dur),
        "_pid": pa.array(ctx.ids(xs.field("pid"), "pid", "X")),
        "_tid": pa.array(ctx.ids(xs.field("tid"), "tid", "X")),
        "correlation": ctx.arg_ints(args, "correlation", "X"),
        "args": ctx.args_column(args, "X"),
    }
    columns.update(_typed_gpu_columns(ctx, n, category, name_col, args))
    recorded, _ = ints(args.get(AUTOGRAD_KEY))
    numbered = recorded.filter(pc.and_(recorded.is_valid(), equals(category, "host.op")))
    ctx.autograd_ops += len(numbered)
    # Distinct numbers are autograd nodes: all ops numbered 0 recorded none (no input
    # required grad), however many ran with grad mode on.
    ctx.autograd_nodes += int(pc.count_distinct(numbered).as_py() or 0)
    return pa.table(columns)


def _steps_as_ranges(category: pa.DictionaryArray, names: pa.Array,
                     ctx: Context) -> pa.DictionaryArray:
    """``ProfilerStep#N`` as the range it is (``host.annotation``): traces before 2021-11
    wrote it with cat ``Operator``, which would make it an op, holding as self time every
    gap between the step's ops, and not a step to window or split by."""
    values = category.dictionary.to_pylist()
    if "host.op" not in values:
        return category
    if pa.types.is_dictionary(names.type):
        steps = pc.starts_with(names.dictionary.cast(pa.string()), "ProfilerStep#")
        is_step = pc.fill_null(pc.take(steps, names.indices), False).to_numpy(
            zero_copy_only=False)
    else:
        is_step = pc.fill_null(pc.starts_with(names.cast(pa.string()), "ProfilerStep#"),
                               False).to_numpy(zero_copy_only=False)
    index = category.indices.to_numpy(zero_copy_only=False).copy()
    move = is_step & (index == values.index("host.op"))
    if not move.any():
        return category
    if "host.annotation" not in values:
        values.append("host.annotation")
    index[move] = values.index("host.annotation")
    ctx.out.note("derived from X:Operator", "ProfilerStep#N ranges read as ranges "
                 "(host.annotation), not ops", int(move.sum()))
    return pa.DictionaryArray.from_arrays(pa.array(index, category.indices.type),
                                          pa.array(values))


def _typed_gpu_columns(ctx: Context, n: int, category: pa.DictionaryArray,
                       names: pa.DictionaryArray, args: Args) -> dict[str, pa.Array]:
    """Grid, block, registers and shared memory of kernels; bytes and memory kinds of copies;
    the tool's own device and stream ids of device rows."""
    is_kernel = equals(category, "gpu.kernel").to_numpy()
    is_copy = is_in(category, ["gpu.memcpy", "gpu.memset"]).to_numpy()
    cols: dict[str, pa.Array] = {}
    kidx = np.flatnonzero(is_kernel)
    kargs = rows_of(args, is_kernel)
    for key in ("grid", "block"):
        axes, odd = kargs.dims(key)
        if odd:
            ctx.warn("X:kernel", f"args.{key} is not a list (null)", odd)
        for axis, pos in (("x", 0), ("y", 1), ("z", 2)):
            cols[f"{key}_{axis}"] = scatter(n, kidx, _checked(
                ctx, axes[pos], f"args.{key}[{pos}]", INT32), pa.int32())
    cols["registers"] = scatter(n, kidx, ctx.arg_ints(
        kargs, "registers per thread", "X:kernel", INT32), pa.int32())
    cols["shared_mem_bytes"] = scatter(n, kidx, ctx.arg_ints(
        kargs, "shared memory", "X:kernel"), pa.int64())
    cidx = np.flatnonzero(is_copy)
    cols["bytes"] = scatter(n, cidx, ctx.arg_ints(
        rows_of(args, is_copy), "bytes", "X:gpu_memcpy"), pa.int64())
    copy_kind, src, dst = copy_kinds(names, cidx, n)
    cols["copy_kind"], cols["src_kind"], cols["dst_kind"] = copy_kind, src, dst
    # The tool's own device and stream ids of device rows (see devices.device_columns).
    is_device = is_in(category, sorted(DEVICE_CATEGORIES)).to_numpy()
    didx = np.flatnonzero(is_device)
    dargs = rows_of(args, is_device)
    cols["_arg_device"] = scatter(n, didx, ctx.arg_ints(
        dargs, "device", "X:device work", INT32), pa.int64())
    cols["_arg_stream"] = scatter(n, didx, ctx.arg_ints(
        dargs, "stream", "X:device work"), pa.int64())
    return cols


def _checked(ctx: Context, values: list[Any] | pa.Array, what: str,
             bounds: tuple[int, int]) -> pa.Array:
    arr, bad = ints(values, bounds)
    if bad:
        ctx.warn("X:kernel", f"{what} is not an integer in range (null)", bad)
    return arr


def copy_kinds(names: pa.ChunkedArray | pa.DictionaryArray, idx: np.ndarray,
               n: int) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Parse 'Memcpy HtoD (Pinned -> Device)' and 'Memset (Device)', once per distinct name."""
    if len(idx) == 0:
        empty = pa.nulls(n, pa.string()).dictionary_encode()
        return empty, empty, empty
    names = names.combine_chunks() if isinstance(names, pa.ChunkedArray) else names
    codes = names.indices.to_numpy(zero_copy_only=False)
    used = np.unique(codes[idx])
    values = names.dictionary.take(pa.array(used)).to_pylist()
    parsed = []
    for name in values:
        m = _MEMCPY_NAME.search(name or "")
        if m:
            parsed.append((m.group(1), m.group(2), m.group(3)))
        else:
            s = _MEMSET_NAME.search(name or "")
            parsed.append((None, None, s.group(1) if s else None))
    remap = np.zeros(len(names.dictionary), dtype=np.int32)
    remap[used] = np.arange(len(used), dtype=np.int32)
    out = []
    for k in range(3):
        distinct = sorted({p[k] for p in parsed if p[k] is not None})
        position = {v: i for i, v in enumerate(distinct)}
        entry_code = np.array([position.get(p[k], -1) for p in parsed], dtype=np.int32)
        row_code = np.full(n, -1, dtype=np.int32)
        row_code[idx] = entry_code[remap[codes[idx]]]
        out.append(pa.DictionaryArray.from_arrays(
            pa.array(np.maximum(row_code, 0), mask=row_code < 0), pa.array(distinct,
                                                                          type=pa.string())))
    return out[0], out[1], out[2]
