"""Less common Nsight Systems tables: the profiler's own overhead, diagnostics, CUDA graph
executions and GPU metrics (formats.md sections 1.5 and 1.8)."""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.nsys.db import (
    ExportDatabase,
    col,
    decode_pid,
    decode_tid,
    numeric_json,
    table_args,
)
from tracekit.plugins.nsys.tables import Columns, _constant, _device, _timing

OVERHEAD = "PROFILER_OVERHEAD"
CUPTI_OVERHEAD = "CUPTI_ACTIVITY_KIND_OVERHEAD"
DIAGNOSTICS = "DIAGNOSTIC_EVENT"
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
GPU_METRICS = "GPU_METRICS"
SCHED = "SCHED_EVENTS"
GPU_METRIC_NAMES = "TARGET_INFO_GPU_METRICS"


def profiler_overhead(db: ExportDatabase, table: str = OVERHEAD) -> Columns:
    """PROFILER_OVERHEAD (nsys's own) or CUPTI_ACTIVITY_KIND_OVERHEAD (CUPTI's: "Command
    Buffer Full", lazy module loading ...) to host.overhead slices on the thread stalled.
    A CUPTI overhead row names the API call it delayed by correlationId, kept in args (not
    as a correlation: it is no launch)."""
    db.require(table, "start", "end")
    t = db.arrow(f"SELECT * FROM {table}")
    gtid = col(t, "globalTid")
    n = t.num_rows
    return {"kind": _constant(n, "slice"), "category": _constant(n, "host.overhead"),
            **_timing(t), "name": db.names(col(t, "nameId")), "pid": decode_pid(gtid),
            "tid": decode_tid(gtid),
            "args": table_args(t, ("returnValue", "overheadType", "correlationId"))}


def diagnostics(db: ExportDatabase) -> Columns:
    """DIAGNOSTIC_EVENT to host.instant rows named 'nsys diagnostic', the message in args."""
    db.require(DIAGNOSTICS, "timestamp")
    t = db.arrow(f"SELECT * FROM {DIAGNOSTICS}")
    n = t.num_rows
    cols = {c: t[c].to_pylist() if c in t.column_names else [None] * n
            for c in ("text", "severity", "source", "timestampType")}
    args = [orjson.dumps({k: v[i] for k, v in cols.items() if v[i] is not None}).decode()
            for i in range(n)]
    return {"kind": _constant(n, "instant"), "category": _constant(n, "host.instant"),
            "name": _constant(n, "nsys diagnostic"), "ts_ns": col(t, "timestamp"),
            "pid": decode_pid(col(t, "globalPid")), "args": pa.array(args, pa.string())}


def graph_trace(db: ExportDatabase) -> Columns:
    """CUPTI_ACTIVITY_KIND_GRAPH_TRACE (graphs traced whole) to gpu.graph slices on their
    stream, linked to the launching cudaGraphLaunch by correlation id."""
    db.require(GRAPH_TRACE, "start", "end")
    t = db.arrow(f"SELECT * FROM {GRAPH_TRACE}")
    n = t.num_rows
    return {**_device(t, "gpu.graph"), "name": _constant(n, "CUDA graph"),
            "args": table_args(t, ("graphId", "graphExecId", "contextId", "greenContextId"))}


def gpu_metrics(db: ExportDatabase) -> Columns:
    """GPU_METRICS samples to counter.gpu_metrics rows, one counter per metric and GPU type.

    Metric names come from TARGET_INFO_GPU_METRICS by (typeId, metricId), whose ids nsys does
    not promise to keep stable across versions. Which GPU a typeId stands for is not
    documented, so the counter's name carries the type rather than a guessed device.
    """
    names = db.arrow(f"SELECT typeId, metricId, metricName FROM {GPU_METRIC_NAMES}") \
        if {"typeId", "metricId", "metricName"} <= set(db.columns(GPU_METRIC_NAMES)) else None
    db.require(GPU_METRICS, "timestamp", "typeId", "metricId", "value")
    t = db.arrow(f"SELECT timestamp, typeId, metricId, value FROM {GPU_METRICS}")
    n = t.num_rows
    type_id = col(t, "typeId")
    metric = col(t, "metricId")
    label = pc.binary_join_element_wise("metric ", metric.cast(pa.string()), "")
    if names is not None and names.num_rows:
        key = pc.binary_join_element_wise(type_id.cast(pa.string()), metric.cast(pa.string()),
                                          ":")
        known = pc.binary_join_element_wise(col(names, "typeId").cast(pa.string()),
                                            col(names, "metricId").cast(pa.string()), ":")
        position = pc.index_in(key, value_set=known)
        found = pc.take(col(names, "metricName", pa.string()), pc.fill_null(position, 0))
        label = pc.if_else(pc.is_valid(position), found, label)
    counter = pc.binary_join_element_wise(label, " (GPU type ", type_id.cast(pa.string()), ")",
                                          "")
    return {"kind": _constant(n, "counter"), "category": _constant(n, "counter.gpu_metrics"),
            "name": counter.dictionary_encode(), "ts_ns": col(t, "timestamp"),
            "value": col(t, "value", pa.float64())}


def scheduling(db: ExportDatabase) -> tuple[Columns, int]:
    """SCHED_EVENTS (points) to host.sched slices: each sched-in paired with the same
    thread's next sched-out. Returns the columns and how many points had no pair."""
    db.require(SCHED, "start", "isSchedIn", "globalTid")
    t = db.arrow(f"SELECT * FROM {SCHED}")
    gtid = col(t, "globalTid").fill_null(-1).to_numpy(zero_copy_only=False)
    start = col(t, "start").fill_null(0).to_numpy(zero_copy_only=False)
    into = col(t, "isSchedIn").fill_null(0).to_numpy(zero_copy_only=False) == 1
    cpu = col(t, "cpu").fill_null(-1).to_numpy(zero_copy_only=False)
    order = np.lexsort((~into, start, gtid))  # at equal times, an "out" before an "in"
    g, s_, i_, c = gtid[order], start[order], into[order], cpu[order]
    pair = np.flatnonzero(i_[:-1] & ~i_[1:] & (g[:-1] == g[1:])) if len(g) > 1 else \
        np.array([], dtype=np.int64)
    n = len(pair)
    global_tid = pa.array(g[pair])
    cols = {"kind": _constant(n, "slice"), "category": _constant(n, "host.sched"),
            "name": _constant(n, "running"), "ts_ns": pa.array(s_[pair]),
            "dur_ns": pa.array(s_[pair + 1] - s_[pair]), "pid": decode_pid(global_tid),
            "tid": decode_tid(global_tid),
            "args": numeric_json({"cpu": pa.array(c[pair])})}
    return cols, len(g) - 2 * n
