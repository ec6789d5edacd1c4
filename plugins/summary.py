"""The ``summary`` analyzer: nsys-stats-style tables for every input format.

Implements the definitions of ``nsys stats`` (cuda_gpu_kern_sum, cuda_api_sum,
cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum, nvtx_sum, osrt_sum): per name, the count, total,
% of the table's total (not of wall time), mean, median, min, max and sample standard
deviation.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import Report, Trace
from tracekit.toolkit import (
    aggregate_rows,
    equals,
    factorize,
    grouped_stats,
    is_in,
    report_table,
)
from tracekit.toolkit import intervals as iv

_TABLES = (
    # (table, title, category filter, value column, unit)
    ("kernels", "GPU kernels (cf. nsys cuda_gpu_kern_sum)", ("gpu.kernel",), "dur_ns", "ns"),
    ("api", "Runtime and driver API calls (cf. nsys cuda_api_sum)", ("api.runtime", "api.driver"),
     "dur_ns", "ns"),
    ("memops_time", "Memory operations by time (cf. nsys cuda_gpu_mem_time_sum)",
     ("gpu.memcpy", "gpu.memset"), "dur_ns", "ns"),
    ("memops_size", "Memory operations by size (cf. nsys cuda_gpu_mem_size_sum)",
     ("gpu.memcpy", "gpu.memset"), "bytes", "bytes"),
    ("ranges", "Annotation ranges (cf. nsys nvtx_sum)", ("host.annotation",), "dur_ns", "ns"),
    ("os", "OS runtime calls (cf. nsys osrt_sum)", ("host.os",), "dur_ns", "ns"),
)


class SummaryAnalyzer(tracekit.Analyzer):
    """Count, total and distribution per kernel, API call, memory operation and range."""

    name = "summary"
    description = "per kernel, API call, memcpy/memset kind and range: count, total, %, stats"
    # Beside the verdict where a GPU trace has no timeline, or (where no CPU report is
    # installed) no GPU work; in place of the verdict where no verdict is installed.
    default_for = (
        tracekit.DefaultFor((tracekit.TraceKind.GPU_RANKS, tracekit.TraceKind.GPU_TIMELINE),
                            slot=0, rank=0),
        tracekit.DefaultFor((tracekit.TraceKind.GPU_AGGREGATES, tracekit.TraceKind.CPU_SAMPLES,
                             tracekit.TraceKind.HOST_ONLY), slot=1, rank=0),
    )

    @dataclass(frozen=True)
    class Options:
        limit: int = field(default=0, metadata={"help": "rows per table (0 = all)"})

    def analyze(self, trace: Trace) -> Report:
        events = trace.events.filter(equals(trace.events["kind"], "slice"))
        report = Report(analyzer=self.name, title="Summary")
        untimed_tabled = aggregates = 0
        for table, title, cats, column, unit in _TABLES:
            rows = events.filter(is_in(events["category"], cats))
            keys = _memop_names(rows) if table.startswith("memops") else rows["name"]
            if table == "ranges":
                nested = _nested_example(rows)
                if nested:
                    report.notes.append(f"ranges nest ({nested[0]} inside {nested[1]}): a "
                                        "range's time% is of the table's total, not of the run")
                keys, counted_calls = _without_call_counters(keys)
                if counted_calls:
                    report.notes.append(
                        f"{counted_calls:,} ranges named with emit_nvtx's per-call counters "
                        "(', op_id = N', ', seq = N', ', sizes = [...]') are grouped by their "
                        "op's name; nsys nvtx_sum keeps a row per call")
            result = self._table(keys, rows[column], rows["count"], unit)
            if column == "dur_ns":
                result = _stated_spread(result, keys, rows)
            if self.options.limit:
                result = result.slice(0, self.options.limit)
            report.tables[table] = result
            report.table_titles[table] = title
            if table == "memops_size" and (unsized := rows[column].null_count):
                report.notes.append(
                    f"{unsized:,} memory operation{'s' if unsized != 1 else ''} with no size "
                    "recorded (the later parts of a call done in several, or a tool that "
                    "gave none) count in the table by time, not by size")
            if table != "memops_size":  # the same rows as memops_time
                # Untimed rows the table counts: those with a value (a stats file's totals),
                # not per-dispatch counter rows without a duration.
                counted = pc.and_(pc.is_null(rows["ts_ns"]), pc.is_valid(rows[column]))
                untimed_tabled += int(pc.sum(counted).as_py() or 0)
                aggregates += int(pc.sum(pc.greater(rows["count"], 1)).as_py() or 0)
        # Samples are the CPU report's: the summary tables are of slices.
        samples = trace.events.select(["ts_ns", "dur_ns", "source"]).filter(
            equals(trace.events["kind"], "sample"))
        if samples.num_rows:
            rows = "report rows of CPU time or event counts (a profiler's totals)" \
                if aggregate_rows(samples, trace) else "CPU sample rows"
            report.notes.append(f"{samples.num_rows:,} {rows} are not in these tables: "
                                "'tracekit analyze -a cpu' (or -a hotspots) ranks them")
        untimed = trace.events["ts_ns"].null_count - untimed_tabled - \
            samples["ts_ns"].null_count
        if untimed:
            report.notes.append(f"{untimed:,} untimed aggregate rows are not in these tables")
        if aggregates:
            report.notes.append(
                f"{aggregates:,} rows are totals of several calls (a stats file): their count, "
                "total and mean are exact; the median is not known, nor min, max and stddev "
                "where the file does not state them (-)")
        return report

    @staticmethod
    def _table(keys: Any, values: Any, occurrences: Any, unit: str) -> pa.Table:
        s = grouped_stats(keys, values, occurrences)
        total = float(np.sum(s["total"])) if len(s["total"]) else 0.0
        pct = (np.asarray(s["total"], dtype=float) * 100 / total) if total else \
            np.zeros(len(s["total"]))
        return report_table([
            ("time_pct" if unit == "ns" else "size_pct", "float", "%", np.round(pct, 1)),
            ("total", "int", unit, s["total"]), ("count", "int", None, s["count"]),
            ("mean", "float", unit, s["mean"]), ("median", "float", unit, s["median"]),
            ("min", "int", unit, s["min"]), ("max", "int", unit, s["max"]),
            ("stddev", "float", unit, s["stddev"]), ("name", "str", None, s["key"])])


def _nested_example(rows: pa.Table) -> tuple[str, str] | None:
    """A range that starts inside another on its thread, and the longest-reaching range it
    starts in (the first such range in time), or None where no two ranges of a thread nest."""
    rows = rows.filter(pc.and_(pc.is_valid(rows["ts_ns"]), pc.is_valid(rows["dur_ns"])))
    if rows.num_rows < 2:
        return None
    thread, _ = factorize(rows["source"].cast(pa.string()).to_numpy(zero_copy_only=False),
                          rows["pid"].fill_null(-1).to_numpy(zero_copy_only=False),
                          rows["tid"].fill_null(-1).to_numpy(zero_copy_only=False))
    thread = thread.reshape(-1)
    start = rows["ts_ns"].to_numpy()
    end = start + rows["dur_ns"].to_numpy()
    inside = np.flatnonzero(iv.starts_inside(thread, start, end))
    if not len(inside):
        return None
    i = int(inside[np.argmin(start[inside])])
    earlier = np.flatnonzero((thread == thread[i]) & (start <= start[i]) & (end > start[i]))
    earlier = earlier[earlier != i]
    outer = int(earlier[np.argmax(end[earlier])])
    names = rows["name"].cast(pa.string())
    return str(names[i].as_py()), str(names[outer].as_py())


#: The per-call counters that torch.autograd.profiler.emit_nvtx (and record_shapes) append
#: to range names ("aten::view, op_id = 314290"): a name per call, not the op's.
RANGE_COUNTERS = r", (seq|op_id|sizes|input_op_ids) = .*$"


def _without_call_counters(names: pa.ChunkedArray) -> tuple[pa.Array, int]:
    """Range names without emit_nvtx's per-call counters (once per distinct name), and how
    many rows had them."""
    column = names.combine_chunks() if isinstance(names, pa.ChunkedArray) else names
    if not len(column):
        return column, 0
    if not pa.types.is_dictionary(column.type):
        column = column.cast(pa.string()).dictionary_encode()
    dictionary = column.dictionary.cast(pa.string())
    stripped = pc.replace_substring_regex(dictionary, RANGE_COUNTERS, "")
    changed = pc.not_equal(stripped, dictionary).fill_null(False)
    if not pc.any(changed).as_py():
        return column, 0
    recoded = stripped.dictionary_encode()  # names that became equal share a code
    rows = int(pc.sum(pc.take(changed, column.indices)).as_py() or 0)
    return pa.DictionaryArray.from_arrays(recoded.indices.take(column.indices),
                                          recoded.dictionary), rows


def _stated_spread(result: pa.Table, keys: Any, rows: pa.Table) -> pa.Table:
    """Fill min, max and stddev of a name that one aggregate row totals from what its stats
    file states (rocprofv3's MinNs, MaxNs, StdDev, kept in the row's args)."""
    aggregate = pc.greater(rows["count"], 1)
    if not pc.any(aggregate).as_py():
        return result
    names = pc.cast(keys, pa.string()).to_pylist()
    rows_of = Counter(names)
    stated: dict[str, dict[str, Any]] = {}
    for name, args in zip(pc.filter(keys, aggregate).cast(pa.string()).to_pylist(),
                          rows["args"].filter(aggregate).to_pylist(), strict=True):
        try:
            fields = orjson.loads(args) if args and rows_of[name] == 1 else {}
        except orjson.JSONDecodeError:
            fields = {}
        if isinstance(fields, dict):
            stated[name] = {k.lower(): v for k, v in fields.items()}
    columns = {c: result[c].to_pylist() for c in ("min", "max", "stddev")}
    for i, name in enumerate(result["name"].to_pylist()):
        spread = stated.get(name, {})
        for column, key, cast in (("min", "minns", int), ("max", "maxns", int),
                                  ("stddev", "stddev", float)):
            value = _number(spread.get(key))
            if columns[column][i] is None and value is not None:
                columns[column][i] = cast(value)
    for column, values in columns.items():
        at = result.schema.get_field_index(column)
        field_ = result.schema.field(at)
        result = result.set_column(at, field_, pa.array(values, field_.type))
    return result


def _number(value: Any) -> float | None:
    """A stats file's number, written as a number or as text (rocprof's CSV cells)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _memop_names(rows: pa.Table) -> pa.Array:
    """Operation label: 'memcpy HtoD', 'memset', else the event's name."""
    kind = rows["copy_kind"].cast(pa.string())
    is_set = equals(rows["category"], "gpu.memset")
    label = pc.if_else(pc.is_valid(kind), pc.binary_join_element_wise("memcpy", kind, " "),
                       rows["name"].cast(pa.string()))
    return pc.if_else(is_set, pa.scalar("memset"), label)


@tracekit.hookimpl
def register_analyzers(register: Any) -> None:
    register(SummaryAnalyzer)
