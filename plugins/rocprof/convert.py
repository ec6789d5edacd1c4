"""rocprof CSV columns to event columns, one file kind at a time (formats.md section 2)."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.rocprof.columns import (
    api_events,
    copy_direction,
    duration,
    grid_columns,
    json_text,
    signed_bytes,
)
from tracekit.plugins.rocprof.files import CsvFile
from tracekit.plugins.rocprof.v1 import copy_kind_of, work_categories

Columns = dict[str, Any]
# rocprofv3 writes <pid>_<trace>.csv, rocprofv2 <trace>_<pid>.csv.
PID_IN_NAME = re.compile(r"^(\d+)_|^(?:results|hip_api_trace|hsa_api_trace|hcc_ops_trace|"
                         r"async_copy_trace|roctx_trace|pcs_trace)_(\d+)\.csv$")
V1_KNOWN = {"index", "kernelname", "gpu-id", "queue-id", "queue-index", "pid", "tid", "grd",
            "wgr", "lds", "scr", "arch_vgpr", "accum_vgpr", "vgpr", "sgpr", "fbar", "wave_size",
            "sig", "obj", "dispatchns", "beginns", "endns", "completens", "durationns"}


def _first(f: CsvFile, *names: str, bits: int = 64) -> pa.Array | None:
    for name in names:
        values = f.ints(name, bits)
        if values is not None:
            return values
    return None


def _const(n: int, value: str) -> list[str]:
    return [value] * n


def _span(f: CsvFile, start: str, end: str) -> tuple[pa.Array, pa.Array]:
    ts, stop = f.ints(start), f.ints(end)
    return ts, duration(ts, stop, end)


def _text(f: CsvFile, name: str) -> pa.Array:
    """Column ``name`` as text, all null when the file has none."""
    values = f.text(name)
    return values if values is not None else pa.nulls(f.table.num_rows, pa.string())


def _i32(f: CsvFile, name: str) -> pa.Array | None:
    """A column the model keeps in 32 bits (devices, workgroup sizes, registers)."""
    return f.ints(name, 32)


def _json_rows(f: CsvFile, names: list[str]) -> pa.Array | None:
    """Per row a JSON object of the text cells of ``names`` (those the file has)."""
    present = [n for n in names if n in f.table.column_names]
    if not present:
        return None
    pieces: list[pa.Array | str] = []
    for i, n in enumerate(present):
        pieces += ["{" if i == 0 else ",", f'"{n}":"', json_text(pc.fill_null(f.text(n), "")),
                   '"']
    # One kernel call for the whole object: far faster than joining column by column.
    return pc.binary_join_element_wise(*pieces, "}", "")


def file_pid(f: CsvFile) -> int | None:
    """The pid in a rocprofv3 file name (``<pid>_kernel_trace.csv``), if any."""
    m = PID_IN_NAME.match(f.path.name)
    return int(m.group(1) or m.group(2)) if m else None


def _pids(f: CsvFile, column: str = "process_id") -> pa.Array:
    """The pid column, or the pid in the file name for every row."""
    pid = f.ints(column)
    return pid if pid is not None else pa.array([file_pid(f)] * f.table.num_rows, pa.int64())


def v3_kernels(f: CsvFile) -> Columns:
    n = f.table.num_rows
    ts, dur = _span(f, "start_timestamp", "end_timestamp")
    return {"kind": _const(n, "slice"), "category": _const(n, "gpu.kernel"),
            "name": f.text("kernel_name"), "ts_ns": ts, "dur_ns": dur, "pid": _pids(f),
            "tid": f.ints("thread_id"), "device": _i32(f, "agent_id"),
            "stream": _first(f, "stream_id", "queue_id"),
            "correlation": f.ints("correlation_id"),
            **grid_columns([f.ints(f"grid_size_{a}") for a in "xyz"],
                           [_i32(f, f"workgroup_size_{a}") for a in "xyz"]),
            "registers": _i32(f, "vgpr_count"), "_dispatch": f.ints("dispatch_id"),
            "shared_mem_bytes": _first(f, "lds_block_size", "group_segment_size"),
            "args": _json_rows(f, ["dispatch_id", "kernel_id", "queue_id", "grid_size_x",
                                   "grid_size_y", "grid_size_z", "scratch_size",
                                   "private_segment_size", "accum_vgpr_count", "sgpr_count"])}


def v3_api(f: CsvFile) -> Columns:
    """``*_api_trace.csv`` (v3, and v2's without process or thread columns): see
    ``api_events``."""
    return api_events(f.text("domain"), f.text("function"), f.ints("start_timestamp"),
                      f.ints("end_timestamp"), _pids(f), f.ints("thread_id"),
                      f.ints("correlation_id"), "end_timestamp")


def v3_memcpys(f: CsvFile) -> Columns:
    n = f.table.num_rows
    ts, dur = _span(f, "start_timestamp", "end_timestamp")
    kinds, names = copy_direction(f.text("direction"))
    src, dst = _i32(f, "source_agent_id"), _i32(f, "destination_agent_id")
    device = pc.if_else(pc.fill_null(pc.equal(kinds, "HtoD"), False), dst, src)
    correlation = f.ints("correlation_id")
    return {"kind": _const(n, "slice"), "category": _const(n, "gpu.memcpy"),
            "name": names, "ts_ns": ts,
            "dur_ns": dur, "device": device, "stream": f.ints("stream_id"),
            "pid": _pids(f),
            "correlation": pc.if_else(pc.equal(correlation, 0), None, correlation),
            "copy_kind": kinds, "args": _json_rows(f, ["direction", "source_agent_id",
                                                       "destination_agent_id"])}


# Stats files by name: rocprofv3 <prefix>_<domain>_stats.csv, v1 results[.<domain>]_stats.csv.
_STATS_CATEGORY = (("domain_stats", None), ("hip", "api.runtime"), ("hsa", "api.driver"),
                   ("rccl", "api.runtime"), ("rocdecode", "api.runtime"),
                   ("rocjpeg", "api.runtime"), ("marker", "host.annotation"),
                   ("copy", "gpu.memcpy"), ("memory_allocation", "host.memory"),
                   ("scratch", "host.memory"), ("kernel", "gpu.kernel"))


def stats_category(f: CsvFile) -> str | None:
    """The category a stats file totals, by its name (v1's ``results.stats.csv`` totals
    kernels); None for rocprofv3's ``domain_stats``, whose rows are whole domains."""
    lower = f.path.name.lower()
    return next((c for key, c in _STATS_CATEGORY if key in lower), "gpu.kernel")


def stats(f: CsvFile) -> Columns:
    """``*stats.csv``: untimed aggregates (count and total per name)."""
    n = f.table.num_rows
    return {"kind": _const(n, "slice"), "category": _const(n, stats_category(f) or "other"),
            "name": f.text("name"), "ts_ns": pa.nulls(n, pa.int64()),
            "dur_ns": f.ints("totaldurationns"), "count": f.ints("calls"),
            "args": _json_rows(f, ["averagens", "percentage", "minns", "maxns", "stddev"])}


def v1_kernels(f: CsvFile) -> Columns:
    """``results.csv``: one row per dispatch; without BeginNs/EndNs (counter-only runs) the
    rows are untimed. Columns tracekit has no place for (counters) stay in args."""
    n = f.table.num_rows
    timed = "beginns" in f.table.column_names and "endns" in f.table.column_names
    ts, dur = _span(f, "beginns", "endns") if timed else (pa.nulls(n, pa.int64()),
                                                          pa.nulls(n, pa.int64()))
    extra = [c for c in f.table.column_names if c not in V1_KNOWN]
    return {"kind": _const(n, "slice"), "category": _const(n, "gpu.kernel"),
            "name": f.text("kernelname"), "ts_ns": ts, "dur_ns": dur, "pid": f.ints("pid"),
            "tid": f.ints("tid"), "device": _i32(f, "gpu-id"), "stream": f.ints("queue-id"),
            **grid_columns([f.ints("grd"), None, None], [_i32(f, "wgr"), None, None]),
            "shared_mem_bytes": f.ints("lds"),
            "registers": _first(f, "arch_vgpr", "vgpr", bits=32),
            "args": _json_rows(f, ["index", "grd", "queue-index", "sgpr", "scr", "sig", "obj",
                                   *extra])}


_NUMBER = r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$"
_NULL_TEXT = pa.scalar(None, pa.string())


def counter_objects(names: pa.Array, values: pa.Array, keys: pa.Table) -> tuple[pa.Array,
                                                                               pa.Array]:
    """Long counter rows pivoted by the columns of ``keys``: (the first row of each key, in
    file order; per key a JSON object {counter: value}, numbers as numbers and anything
    else as text)."""
    cells = pc.utf8_trim_whitespace(values)
    numeric = pc.fill_null(pc.match_substring_regex(cells, _NUMBER), False)
    floats = pc.if_else(numeric, cells, _NULL_TEXT).cast(pa.float64())
    finite = pc.fill_null(pc.is_finite(floats), False)
    value_json = pc.if_else(finite, floats.cast(pa.string()), pc.if_else(
        pc.is_valid(values), pc.binary_join_element_wise('"', json_text(values), '"', ""),
        "null"))
    pieces = pc.binary_join_element_wise('"', json_text(pc.fill_null(names, "")), '":',
                                         value_json, "")
    groups = keys.append_column("piece", pieces).append_column(
        "row", pa.array(range(len(pieces)), pa.int64())).group_by(
        keys.column_names, use_threads=False).aggregate([("piece", "list"), ("row", "min")]) \
        .sort_by("row_min")
    objects = pc.binary_join_element_wise("{", pc.binary_join(groups["piece_list"], ","), "}",
                                          "")
    return groups["row_min"].combine_chunks(), objects.combine_chunks()


def v3_counters(f: CsvFile) -> Columns:
    """``counter_collection`` is long: one row per (dispatch, counter). Pivoted per (process,
    dispatch), each dispatch is one gpu.kernel row carrying its counters in
    ``args.counters``; without Start/End timestamps (older files) the rows are untimed.
    ``_dispatch`` and ``_counters`` are for the reader, which moves the counters to the
    run's kernel trace when it has one."""
    t = f.table
    dispatch = f.ints("dispatch_id")
    keys = pa.table({"pid": _pids(f), "dispatch": dispatch})
    rows, counters = counter_objects(_text(f, "counter_name"), _text(f, "counter_value"), keys)
    n = len(rows)

    def take(values: pa.Array | None) -> pa.Array | None:
        return None if values is None else values.take(rows)

    timed = "start_timestamp" in t.column_names and "end_timestamp" in t.column_names
    ts, dur = (take(c) for c in _span(f, "start_timestamp", "end_timestamp")) if timed else \
        (pa.nulls(n, pa.int64()), pa.nulls(n, pa.int64()))
    ids = dispatch.take(rows)
    return {"kind": _const(n, "slice"), "category": _const(n, "gpu.kernel"),
            "name": take(f.text("kernel_name")), "ts_ns": ts, "dur_ns": dur,
            "pid": keys["pid"].combine_chunks().take(rows), "tid": take(f.ints("thread_id")),
            "device": take(_i32(f, "agent_id")), "stream": take(f.ints("queue_id")),
            "correlation": take(f.ints("correlation_id")),
            **grid_columns([take(f.ints("grid_size")), None, None],
                           [take(_i32(f, "workgroup_size")), None, None]),
            "registers": take(_i32(f, "vgpr_count")),
            "shared_mem_bytes": take(f.ints("lds_block_size")),
            "args": pc.binary_join_element_wise(
                '{"dispatch_id":', pc.fill_null(ids.cast(pa.string()), "null"),
                ',"counters":', counters, "}", ""),
            "_dispatch": ids, "_counters": counters}


def v3_memory(f: CsvFile) -> Columns:
    """``memory_allocation_trace``: allocations and frees as host.memory slices of the
    process (the file names no thread); a free's bytes are negative."""
    n = f.table.num_rows
    ts, dur = _span(f, "start_timestamp", "end_timestamp")
    op = pc.fill_null(f.text("operation"), "")
    return {"kind": _const(n, "slice"), "category": _const(n, "host.memory"), "name": op,
            "ts_ns": ts, "dur_ns": dur, "pid": _pids(f), "correlation": f.ints("correlation_id"),
            "bytes": signed_bytes(op, f.ints("allocation_size")),
            "args": _json_rows(f, ["agent_id", "address"])}


def v3_scratch(f: CsvFile) -> Columns:
    """``scratch_memory_trace``: the runtime's scratch allocations, as host.memory slices
    on the calling thread."""
    n = f.table.num_rows
    ts, dur = _span(f, "start_timestamp", "end_timestamp")
    return {"kind": _const(n, "slice"), "category": _const(n, "host.memory"),
            "name": f.text("operation"), "ts_ns": ts, "dur_ns": dur, "pid": _pids(f),
            "tid": f.ints("thread_id"),
            "args": _json_rows(f, ["agent_id", "queue_id", "alloc_flags"])}


V2_KERNEL_KNOWN = {"dispatch_id", "gpu_id", "queue_id", "pid", "tid", "grid_size",
                   "workgroup_size", "lds_per_workgroup", "scratch_per_workitem", "arch_vgpr",
                   "accum_vgpr", "sgpr", "wave_size", "kernel_name", "start_timestamp",
                   "end_timestamp", "correlation_id"}


def v2_kernels(f: CsvFile) -> Columns:
    """rocprofv2 kernel dispatches; counter columns (and XCC_Index) stay in args."""
    n = f.table.num_rows
    ts, dur = _span(f, "start_timestamp", "end_timestamp")
    extra = [c for c in f.table.column_names if c not in V2_KERNEL_KNOWN]
    return {"kind": _const(n, "slice"), "category": _const(n, "gpu.kernel"),
            "name": f.text("kernel_name"), "ts_ns": ts, "dur_ns": dur, "pid": _pids(f, "pid"),
            "tid": f.ints("tid"), "device": _i32(f, "gpu_id"), "stream": f.ints("queue_id"),
            "correlation": f.ints("correlation_id"),
            **grid_columns([f.ints("grid_size"), None, None],
                           [_i32(f, "workgroup_size"), None, None]),
            "shared_mem_bytes": f.ints("lds_per_workgroup"),
            "registers": _i32(f, "arch_vgpr"),
            "args": _json_rows(f, ["dispatch_id", "grid_size", "scratch_per_workitem",
                                   "accum_vgpr", "sgpr", "wave_size", *extra])}


def v2_ops(f: CsvFile) -> Columns:
    """rocprofv2 device ops (``hcc_ops_trace``: kernels, copies, fills, barriers; and
    ``async_copy_trace``: HSA copies). Their end is ``Stop_Timestamp``, and no column says
    which device ran them: they are placed on device 0, which the reader reports."""
    n = f.table.num_rows
    ts, dur = _span(f, "start_timestamp", "stop_timestamp")
    op = pc.fill_null(f.text("operation"), "")
    kernel = f.text("kernel_name")
    has_kernel = pc.fill_null(pc.not_equal(kernel, ""), False) if kernel is not None else \
        pa.array([False] * n)
    hsa = pc.starts_with(pc.utf8_upper(pc.fill_null(f.text("domain"), "")), "HSA")
    category = pc.if_else(has_kernel, "gpu.kernel", pc.if_else(
        hsa, work_categories(op, "gpu.memcpy"), work_categories(op, "gpu.kernel")))
    return {"kind": _const(n, "slice"), "category": category,
            "name": pc.if_else(has_kernel, kernel, op), "ts_ns": ts, "dur_ns": dur,
            "pid": _pids(f), "device": pa.array([0] * n, pa.int64()),
            "correlation": f.ints("correlation_id"), "copy_kind": copy_kind_of(op),
            "args": _json_rows(f, ["domain", "operation"])}


def v2_roctx(f: CsvFile) -> Columns:
    """rocprofv2 roctx records carry one timestamp each: a row with a message opens a
    range (or is a mark), a row without one closes the latest open range with the same
    ROCTX_ID. Rows that open and never close are marks (instants); closing rows that match
    nothing are counted by the reader."""
    ts = f.ints("timestamp").to_pylist()
    ids = f.ints("roctx_id").to_pylist() if f.ints("roctx_id") is not None else [None] * len(ts)
    messages = pc.fill_null(f.text("message"), "").to_pylist()
    pid = file_pid(f)
    open_rows: dict[int | None, list[int]] = {}
    end: dict[int, int] = {}
    for row, (t, rid, msg) in enumerate(zip(ts, ids, messages, strict=True)):
        if msg:
            open_rows.setdefault(rid, []).append(row)
        elif open_rows.get(rid):
            end[open_rows[rid].pop()] = t
    starts = [r for r, m in enumerate(messages) if m]
    return {"kind": ["slice" if r in end else "instant" for r in starts],
            "category": _const(len(starts), "host.annotation"),
            "name": [messages[r] for r in starts], "ts_ns": [ts[r] for r in starts],
            "dur_ns": [end[r] - ts[r] if r in end else None for r in starts],
            "pid": [pid] * len(starts),
            "args": [orjson.dumps({"roctx_id": ids[r]}).decode() for r in starts]}


CONVERTERS = {"v3_kernel": v3_kernels, "v3_api": v3_api, "v3_memcpy": v3_memcpys,
              "v3_memory": v3_memory, "v3_scratch": v3_scratch, "stats": stats,
              "v1_kernels": v1_kernels, "v3_counters": v3_counters, "v2_api": v3_api,
              "v2_kernel": v2_kernels, "v2_ops": v2_ops, "v2_roctx": v2_roctx}
