"""The ``summary`` analyzer: nsys-stats-style tables for every input format.

Implements the definitions of ``nsys stats`` (cuda_gpu_kern_sum, cuda_api_sum,
cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum, nvtx_sum): per name, the count, total, % of the
table's total (not of wall time), mean, median, min, max and sample standard deviation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import Report, Trace
from tracekit.toolkit import equals, grouped_stats, is_in, report_table

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
        for table, title, cats, column, unit in _TABLES:
            rows = events.filter(is_in(events["category"], cats))
            keys = _memop_names(rows) if table.startswith("memops") else rows["name"]
            result = self._table(keys, rows[column], unit)
            if self.options.limit:
                result = result.slice(0, self.options.limit)
            report.tables[table] = result
            report.table_titles[table] = title
        untimed = pc.sum(pc.is_null(trace.events["ts_ns"])).as_py() or 0
        if untimed:
            report.notes.append(f"{untimed:,} untimed aggregate rows are not in these tables")
        return report

    @staticmethod
    def _table(keys: Any, values: Any, unit: str) -> pa.Table:
        s = grouped_stats(keys, values)
        total = float(np.sum(s["total"])) if len(s["total"]) else 0.0
        pct = (np.asarray(s["total"], dtype=float) * 100 / total) if total else \
            np.zeros(len(s["total"]))
        return report_table([
            ("time_pct" if unit == "ns" else "size_pct", "float", "%", np.round(pct, 1)),
            ("total", "int", unit, s["total"]), ("count", "int", None, s["count"]),
            ("mean", "float", unit, s["mean"]), ("median", "float", unit, s["median"]),
            ("min", "int", unit, s["min"]), ("max", "int", unit, s["max"]),
            ("stddev", "float", unit, s["stddev"]), ("name", "str", None, s["key"])])


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
