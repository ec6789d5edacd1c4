"""Read "name,start_us,dur_us,tid" CSV files into tracekit: a complete third-party reader."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tracekit
from tracekit import TraceReadError

HEADER = b"name,start_us,dur_us,tid"


class CsvTraceReader(tracekit.Reader):
    name = "csvtrace"
    description = "name,start_us,dur_us,tid CSV spans"
    extensions = (".csv",)

    @dataclass(frozen=True)
    class Options:
        pid: int = 0

    @classmethod
    def sniff(cls, source: tracekit.Source) -> float:
        return 1.0 if source.head.startswith(HEADER) else 0.0

    def read(self, source: tracekit.Source, out: tracekit.TraceBuilder) -> None:
        names, starts, durs, tids = [], [], [], []
        with source.open() as stream:
            rows = csv.DictReader(io.TextIOWrapper(stream, encoding="utf-8"))
            for line, row in enumerate(rows, start=2):
                try:
                    starts.append(round(float(row["start_us"]) * 1000))
                    durs.append(round(float(row["dur_us"]) * 1000))
                    tids.append(int(row["tid"]))
                    names.append(row["name"])
                except (TypeError, ValueError) as exc:
                    raise TraceReadError(str(exc), path=source.path,
                                         location=f"line {line}") from exc
        n = len(names)
        out.add_events({"kind": ["slice"] * n, "category": ["host.annotation"] * n,
                        "name": names, "ts_ns": starts, "dur_ns": durs,
                        "pid": [self.options.pid] * n, "tid": tids})
        out.note("csv row", "events", n)
        out.metadata["format"] = "csvtrace"


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    register(CsvTraceReader)


@tracekit.hookimpl
def register_commands(app: Any) -> None:
    @app.command("csvtrace-total")
    def csvtrace_total(path: Path) -> None:
        """Print how many spans a CSV trace holds and their total duration."""
        trace = tracekit.read(path, format="csvtrace")
        total_us = sum(trace.events["dur_ns"].to_pylist()) / 1000
        print(f"{trace.events.num_rows} spans, {total_us:g} us")
