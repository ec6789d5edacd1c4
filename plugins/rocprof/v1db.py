"""rocprof v1 ``results.db``: the SQLite file rocprof v1 writes beside results.json, one
table per section (formats.md 2.1).

HIP and HSA hold the API calls, OPS the device ops (kernels, barriers), COPY the copies and
fills, rocTX the markers and ranges, KERN the kernel dispatches of runs without ops tracing.
``Index`` is the correlation id: a call and the ops it launched share it. The ``pid``
column of the section tables is the section's track id, not a process: the process is in
the ops' ``proc-id``, and the calls take it from the ops they launched.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.rocprof.columns import OutOfRange, duration, json_text
from tracekit.plugins.rocprof.lookup import lookup
from tracekit.plugins.rocprof.v1 import copy_kind_of, size_of_calls, work_categories
from tracekit.toolkit import SqliteInput
from tracekit.toolkit import sqlite_column as column

Columns = dict[str, Any]
HOST_TABLES = {"HIP": "api.runtime", "HSA": "api.driver", "rocTX": "host.annotation"}
DEVICE_TABLES = {"OPS": "gpu.kernel", "COPY": "gpu.memcpy", "KERN": "gpu.kernel"}
TABLES = (*HOST_TABLES, *DEVICE_TABLES)


def is_v1_db(tables: set[str]) -> bool:
    """Whether an SQLite file's tables are rocprof v1's."""
    return bool({"HIP", "OPS", "COPY", "KERN", "rocTX", "HSA"} & tables) and \
        not any(t.startswith("rocpd_") for t in tables) and "StringIds" not in tables


def _int(table: pa.Table, *names: str) -> pa.Array:
    """The first of ``names`` the table has, as int64 (all null if none)."""
    return column(table, next((n for n in names if n in table.column_names), names[0]))


def _text(table: pa.Table, name: str) -> pa.Array:
    return column(table, name, pa.string())


def read(db: SqliteInput) -> tuple[list[tuple[str, Columns]], dict[str, int]]:
    """Event columns per table, and the rows of tables with rows that are not read."""
    parts: list[tuple[str, Columns]] = []
    for table in TABLES:
        if table not in db.tables or not db.count(table):
            continue
        rows = db.arrow(f'SELECT * FROM "{table}"')
        try:
            parts.append((table, _host(table, rows) if table in HOST_TABLES
                          else _device(table, rows)))
        except OutOfRange as exc:
            exc.where = f"table {table}, row {exc.row + 1}"
            raise
    _link(parts)
    unread = {t: n for t in sorted(db.tables - set(TABLES))
              if not t.startswith("sqlite_") and (n := db.count(t))}
    return parts, unread


def _span(rows: pa.Table) -> tuple[pa.Array, pa.Array]:
    ts = _int(rows, "BeginNs")
    return ts, duration(ts, _int(rows, "EndNs"), "EndNs")


def _host(table: str, rows: pa.Table) -> Columns:
    n = rows.num_rows
    ts, dur = _span(rows)
    name = _text(rows, "Name")
    if table == "rocTX":  # messages are stored with their quotes
        name = pc.replace_substring_regex(name, r'^"(.*)"$', r"\1")
        instant = pc.fill_null(pc.less_equal(dur, 1), False)  # marks are 1 ns ranges
        kind = pc.if_else(instant, "instant", "slice")
        dur = pc.if_else(instant, pa.scalar(None, pa.int64()), dur)
        correlation = pa.nulls(n, pa.int64())
        args = pa.nulls(n, pa.string())
    else:
        kind = pa.array(["slice"] * n)
        correlation = _int(rows, "Index")
        call_args = _text(rows, "args")
        args = pc.if_else(pc.is_valid(call_args), pc.binary_join_element_wise(
            '{"args":"', json_text(call_args), '"}', ""), pa.scalar(None, pa.string()))
    return {"kind": kind, "category": [HOST_TABLES[table]] * n, "name": name, "ts_ns": ts,
            "dur_ns": dur, "pid": pa.nulls(n, pa.int64()), "tid": _int(rows, "tid"),
            "correlation": correlation, "args": args}


def _device(table: str, rows: pa.Table) -> Columns:
    n = rows.num_rows
    ts, dur = _span(rows)
    name = _text(rows, "Name") if "Name" in rows.column_names else _text(rows, "KernelName")
    return {"kind": ["slice"] * n, "category": work_categories(name, DEVICE_TABLES[table]),
            "name": name, "ts_ns": ts, "dur_ns": dur,
            "pid": _int(rows, "proc-id") if table != "KERN" else _int(rows, "pid"),
            "device": _int(rows, "dev-id", "gpu-id"),
            "stream": _int(rows, "queue-id"),
            "correlation": _int(rows, "Index") if table != "KERN" else pa.nulls(n, pa.int64()),
            "copy_kind": copy_kind_of(name)}


def _link(parts: list[tuple[str, Columns]]) -> None:
    """Calls take the process of the ops they launched (by Index), and the other calls and
    markers of their thread that process; copies and fills take their size from the
    call's ``sizeBytes`` argument."""
    work = [c for t, c in parts if t in DEVICE_TABLES]
    calls = [c for t, c in parts if t in ("HIP", "HSA")]
    if not work:
        return
    work_corr = pa.concat_arrays([pa.array(c["correlation"]) for c in work])
    work_pid = pa.concat_arrays([pa.array(c["pid"]) for c in work])
    for c in calls:
        c["pid"] = lookup(work_corr, work_pid, c["correlation"])
    if calls:
        tids = pa.concat_arrays([c["tid"] for c in calls])
        pids = pa.concat_arrays([c["pid"] for c in calls])
        for t, c in parts:
            if t in HOST_TABLES:
                c["pid"] = pc.coalesce(c["pid"], lookup(tids, pids, c["tid"]))
        call_corr = pa.concat_arrays([c["correlation"] for c in calls])
        sizes = pa.concat_arrays([size_of_calls(c["args"]) for c in calls])
        for c in work:
            # A call done as several ops (a memset in two fills) gives its size to the first.
            moves = pc.and_(pc.is_in(pa.array(c["category"]), pa.array(["gpu.memcpy",
                                                                         "gpu.memset"])),
                            pa.array(_first_of_each(c["correlation"], c["ts_ns"])))
            c["bytes"] = pc.if_else(moves, lookup(call_corr, sizes, c["correlation"]),
                                    pa.scalar(None, pa.int64()))


def _first_of_each(key: pa.Array, ts: pa.Array) -> np.ndarray:
    """Per row, whether it is the earliest of the rows sharing its key."""
    k = pc.fill_null(key, -1).to_numpy(zero_copy_only=False)
    t = pc.fill_null(ts, 0).to_numpy(zero_copy_only=False)
    order = np.lexsort((t, k))
    first = np.zeros(len(k), bool)
    sorted_k = k[order]
    first[order] = np.r_[True, sorted_k[1:] != sorted_k[:-1]] if len(k) else first
    return first
