"""Reader for Intel VTune Profiler CSV reports (``vtune -report ... -format csv``).

VTune reports are tables, not timelines (formats.md section 3): hotspots and hw-events rows
grouped by function, module, process, thread or package, and top-down trees, become untimed
aggregate rows (``ts_ns`` null, the report's CPU time or event count as ``value``); the
timeline report's bins become counters; the summary report goes into the metadata.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson
import tracekit
from tracekit.builder import TraceBuilder
from tracekit.errors import TraceReadError
from tracekit.inputs import Source
from tracekit.plugins.vtune.values import numeric_columns, parse_number
from tracekit.stacks import CallSites

GROUPINGS = ("Function", "Function Stack", "Module", "Process", "Thread", "Package",
             "Source File", "Computing Task", "Process/Thread", "Function (Full)", "Core",
             "Call Stack", "Source Line", "Basic Block", "Source Function")
METRIC_HINTS = ("CPU Time", "Hardware Event Count", "Memory Bound", "Instructions Retired",
                "Clockticks", "Computing Task:")
DELIMITERS = (",", "\t", ";")


@dataclass
class Report:
    """A report's lines once progress lines are set aside."""

    kind: str  # grouped, tree, summary, timeline
    delimiter: str
    header: list[str]
    lines: list[tuple[int, str]]  # (line number, text)


def _delimiter(line: str) -> str:
    return max(DELIMITERS, key=lambda d: len(next(csv.reader([line], delimiter=d))))


def _kind(header: list[str]) -> str | None:
    first = header[0].strip()
    if first == "Hierarchy Level":
        return "summary"
    if first == "timeBin":
        return "timeline"
    if first in ("Function Stack", "Call Stack"):
        return "tree"
    if first in GROUPINGS or any(h.startswith(METRIC_HINTS) for h in header[1:]):
        return "grouped"
    return None


def split(text: str) -> tuple[Report | None, int]:
    """The report in ``text`` (None when the first line is no VTune header) and how many
    ``vtune:`` progress lines were mixed in (stdout captures have them)."""
    lines, progress = [], 0
    for no, line in enumerate(text.splitlines(), 1):
        if line.startswith("vtune:"):
            progress += 1
        elif line.strip():
            lines.append((no, line))
    if not lines:
        return None, progress
    delimiter = _delimiter(lines[0][1])
    header = next(csv.reader([lines[0][1]], delimiter=delimiter))
    kind = _kind(header) if len(header) >= 2 else None
    if kind is None:
        return None, progress
    return Report(kind, delimiter, header, lines[1:]), progress


class VtuneCsvReader(tracekit.Reader):
    """VTune CSV reports: hotspots, hw-events, top-down, summary, timeline."""

    name = "vtune"
    description = "Intel VTune Profiler CSV reports (hotspots, hw-events, top-down, summary)"
    extensions = (".csv",)

    @classmethod
    def sniff(cls, source: Source) -> float:
        head = source.head
        if not head or b"\0" in head:
            return 0.0
        report, _ = split("\n".join(head.decode("utf-8", "replace").splitlines()[:40]))
        return 0.85 if report is not None else 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        raw = source.read_bytes()
        if b"\0" in raw[:4096]:
            raise TraceReadError("binary data, not a VTune CSV report", path=source.path)
        report, progress = split(raw.decode("utf-8", "replace"))
        if report is None:
            raise TraceReadError("line 1: not a VTune CSV report header (expected a grouping "
                                 "such as Function, Function Stack, Hierarchy Level or "
                                 "timeBin, then metric columns)", path=source.path)
        out.metadata.update({"format": f"VTune CSV ({report.kind})", "tool": "Intel VTune",
                             "clock": "none: rows are untimed aggregates" if report.kind in
                             ("grouped", "tree") else "seconds from collection start",
                             "columns": report.header,
                             "delimiter": {",": "comma", "\t": "tab", ";": "semicolon"}[
                                 report.delimiter]})
        out.note("vtune progress lines", "skipped: progress output, not report data", progress)
        if report.kind == "summary":
            self._summary(report, out)
        elif report.kind == "timeline":
            self._timeline(report, out, source)
        else:
            self._aggregates(report, out, source)

    # -- grouped tables and top-down trees ------------------------------------------------
    def _aggregates(self, report: Report, out: TraceBuilder, source: Source) -> None:
        header, width = report.header, len(report.header)
        depths, rows = [], []
        for no, line in report.lines:
            text = line
            depth = 0
            if report.kind == "tree":  # depth is the indentation; the quote comes after it
                depth = len(line) - len(line.lstrip(" "))
                text = line.lstrip(" ")
            fields = next(csv.reader([text], delimiter=report.delimiter))
            if len(fields) != width:
                raise TraceReadError(f"line {no}: {len(fields)} fields where the header has "
                                     f"{width}", path=source.path, reader=self.name)
            depths.append(depth)
            rows.append(fields)
        numeric = numeric_columns(rows, width, report.delimiter)
        metric = _primary_metric(header, numeric)
        module_col = header.index("Module") if "Module" in header else None
        is_time = metric is not None and "Time" in header[metric]
        sites = CallSites()
        path: list[int] = []
        total_row = report.kind == "tree" and _has_total(rows)
        cols: dict[str, list[Any]] = {k: [] for k in
                                      ("name", "value", "dur_ns", "stack_id", "args")}
        for depth, fields in zip(depths, rows, strict=True):
            name = fields[0].strip()
            module = fields[module_col].strip() if module_col is not None else None
            value = parse_number(fields[metric], report.delimiter) if metric is not None \
                else None
            stack = None
            if report.kind == "tree" and not (depth == 0 and name == "Total"):
                level = max(depth - (1 if total_row else 0), 0)
                del path[level:]
                stack = sites.site(path[-1] if path else None, (name, module))
                path.append(stack)
            elif report.kind == "grouped" and header[0] in ("Function", "Source Function"):
                stack = sites.site(None, (name, module))
            cols["name"].append(name)
            cols["value"].append(value)
            cols["dur_ns"].append(round(value * 1e9) if is_time and value is not None
                                  else None)
            cols["stack_id"].append(stack)
            cols["args"].append(orjson.dumps({
                "report": report.kind, "group_by": header[0],
                "values": {h: parse_number(f, report.delimiter)
                           for h, f, num in zip(header, fields, numeric, strict=True) if num},
                "raw": dict(zip(header, fields, strict=True))}).decode())
        n = len(rows)
        out.add_events({"kind": ["sample"] * n, "category": ["cpu.sample"] * n,
                        "ts_ns": [None] * n, **cols})
        frames, stacks = sites.tables()
        out.add_table("frames", frames)
        out.add_table("stacks", stacks)
        out.metadata["metric"] = header[metric] if metric is not None else None
        out.note("report rows", "events", n)

    # -- timeline bins and the summary ---------------------------------------------------
    def _timeline(self, report: Report, out: TraceBuilder, source: Source) -> None:
        header = report.header
        cols: dict[str, list[Any]] = {k: [] for k in ("name", "ts_ns", "value")}
        for no, line in report.lines:
            fields = next(csv.reader([line], delimiter=report.delimiter))
            if len(fields) != len(header):
                raise TraceReadError(f"line {no}: {len(fields)} fields where the header has "
                                     f"{len(header)}", path=source.path, reader=self.name)
            try:
                start = int(Decimal(fields[1].strip()) * 1_000_000_000)
            except InvalidOperation:
                raise TraceReadError(f"line {no}: bin start {fields[1]!r} is not a number",
                                     path=source.path, reader=self.name) from None
            for h, cell in zip(header[3:], fields[3:], strict=True):
                cols["name"].append(h)
                cols["ts_ns"].append(start)
                cols["value"].append(parse_number(cell, report.delimiter))
        n = len(cols["name"])
        out.add_events({"kind": ["counter"] * n, "category": ["counter.vtune"] * n, **cols})
        out.note("timeline bins", "events", len(report.lines))

    def _summary(self, report: Report, out: TraceBuilder) -> None:
        entries = []
        for _, line in report.lines:
            fields = next(csv.reader([line], delimiter=report.delimiter))
            level = fields[0].strip()
            entries.append({"level": int(level) if level.isdigit() else level,
                            "metric": fields[1].strip() if len(fields) > 1 else "",
                            "values": [f.strip() for f in fields[2:]]})
        out.metadata["summary"] = entries
        out.note("summary rows", "metadata", len(entries))


def _has_total(rows: list[list[str]]) -> bool:
    return bool(rows) and rows[0][0].strip() == "Total"


def _primary_metric(header: list[str], numeric: list[bool]) -> int | None:
    """The column that weighs a row: CPU time first, then clockticks, then any number."""
    preferences = ("CPU Time", "CPU Time:Self", "CPU Time: Self",
                   "Hardware Event Count:CPU_CLK_UNHALTED.THREAD")
    for want in preferences:
        if want in header and numeric[header.index(want)]:
            return header.index(want)
    for i, h in enumerate(header):
        if numeric[i] and h.startswith(("CPU Time", "Hardware Event Count")):
            return i
    return next((i for i in range(1, len(header)) if numeric[i]), None)


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    register(VtuneCsvReader)
