"""Reader for Intel VTune Profiler CSV reports (``vtune -report ... -format csv``).

VTune reports are tables, not timelines (formats.md section 3): hotspots and hw-events rows
grouped by function, module, process, thread or package, and top-down trees, become untimed
aggregate rows (``ts_ns`` null, the report's CPU time or event count as ``value``; a tree with
only an inclusive column gets self values from its nesting); GPU computing-task reports
become untimed ``gpu.kernel`` totals; the timeline report's bins become counters; the summary
report goes into the metadata.
"""

from __future__ import annotations

import codecs
import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson
import tracekit
from tracekit import Source, TraceBuilder, TraceReadError
from tracekit.plugins.vtune import header as header_of
from tracekit.plugins.vtune.header import CsvLineError, split_line
from tracekit.plugins.vtune.values import is_pseudo, numeric_columns, parse_number
from tracekit.toolkit import CallSites, decode_text

INT64_MAX = 2**63 - 1
TASK_TIME = "Computing Task:Total Time"
TASK_COUNT = "Computing Task:Instance Count"


@dataclass
class Report:
    """A report's lines once progress lines are set aside."""

    kind: str  # grouped, tree, summary, timeline
    delimiter: str
    header: list[str]
    lines: list[tuple[int, str]]  # (line number, text)
    problem: str | None = None  # why a header that looks like VTune's cannot be read


def decode(raw: bytes) -> tuple[str, int]:
    """The text of a report and how many of its lines are not valid UTF-8.

    Byte-order marks are honoured (VTune on Windows, or an editor, may add one; UTF-16 is
    unambiguous with its BOM). Invalid bytes become U+FFFD: names in another code page stay
    readable, and the reader counts the lines concerned.
    """
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return raw.decode("utf-16", "replace"), 0
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    return decode_text(raw)


def split(text: str, partial: bool = False) -> tuple[Report | None, int]:
    """The report in ``text`` (None when the first line is no VTune header) and how many
    ``vtune:`` progress lines were mixed in (stdout captures have them). ``partial``: the
    text is a head whose last line may be cut."""
    lines, progress = [], 0
    # Only CR and LF end lines (str.splitlines also splits at \x1c, \x85, U+2028 ...).
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    for no, line in enumerate(text.split("\n"), 1):
        if line.startswith("vtune:"):
            progress += 1
        elif line.strip():
            lines.append((no, line))
    if not lines:
        return None, progress
    try:
        found = header_of.find(lines, partial)
    except CsvLineError:
        return None, progress
    if found is None:
        return None, progress
    if isinstance(found, str):
        return Report("unreadable", "", [], lines[1:], found), progress
    delimiter, header, kind = found
    return Report(kind, delimiter, header, lines[1:]), progress


class VtuneCsvReader(tracekit.Reader):
    """VTune CSV reports: hotspots, hw-events, top-down, summary, timeline."""

    name = "vtune"
    description = "Intel VTune Profiler CSV reports (hotspots, hw-events, top-down, summary)"
    extensions = (".csv",)
    reads_streams = True

    @classmethod
    def sniff(cls, source: Source) -> float:
        head = source.head
        if len(head) % 2 and head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            head = head[:-1]  # the head may end inside a UTF-16 code unit
        text, _ = decode(head)
        if not text or "\0" in text:
            return 0.0
        report, _ = split("\n".join(text.splitlines()[:40]), partial=True)
        return 0.85 if report is not None else 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        raw = source.read_bytes()  # once: the source may be a stream
        text, bad_lines = decode(raw)
        del raw
        nul = text.find("\0")
        if nul >= 0:
            raise TraceReadError("binary data (a NUL byte), not a VTune CSV report",
                                 path=source.path, location=f"line {_line_of(text, nul)}")
        report, progress = split(text)
        if report is None:
            raise TraceReadError("not a VTune CSV report header (expected a grouping "
                                 "such as Function, Function Stack, Hierarchy Level or "
                                 "timeBin, then metric columns)", path=source.path,
                                 location="line 1")
        if report.problem is not None:
            raise TraceReadError(report.problem, path=source.path, reader=self.name,
                                 location="line 1")
        out.note("report lines", "warning: not valid UTF-8 (bad bytes read as U+FFFD)",
                 bad_lines)
        if not text.endswith(("\n", "\r")):
            out.note("report lines", "warning: the last line has no line break (the file may "
                     "be cut short)")
        out.metadata.update({"format": f"VTune CSV ({report.kind})", "tool": "Intel VTune",
                             "clock": "none: rows are untimed aggregates" if report.kind in
                             ("grouped", "tree") else "seconds from collection start",
                             "columns": report.header,
                             "delimiter": header_of.name(report.delimiter)})
        out.note("vtune progress lines", "skipped: progress output, not report data", progress)
        try:
            if report.kind == "summary":
                self._summary(report, out)
            elif report.kind == "timeline":
                self._timeline(report, out)
            else:
                self._aggregates(report, out)
        except _LineError as exc:
            hint = "" if exc.fields is None else header_of.split_names_hint(
                report.header, report.delimiter, exc.fields)
            raise TraceReadError(exc.message + hint, path=source.path, reader=self.name,
                                 location=f"line {exc.line}") from None

    # -- grouped tables and top-down trees ------------------------------------------------
    def _aggregates(self, report: Report, out: TraceBuilder) -> None:
        header, width = report.header, len(report.header)
        depths, rows, line_numbers = [], [], []
        for no, line in report.lines:
            text = line
            depth = 0
            if report.kind == "tree":  # depth is the indentation; the quote comes after it
                depth = len(line) - len(line.lstrip(" "))
                text = line.lstrip(" ")
            fields = _fields(text, report.delimiter, no, width)
            depths.append(depth)
            rows.append(fields)
            line_numbers.append(no)
        numeric = numeric_columns(rows, width, report.delimiter)
        bad = _BadCells()
        table = [[bad.number(f[i], report.delimiter, no, header[i]) if numeric[i] else None
                  for i in range(width)] for no, f in zip(line_numbers, rows, strict=True)]
        if header[0].strip() == "Computing Task":
            self._tasks(report, rows, table, numeric, bad, out)
            return
        metric = _primary_metric(header, numeric)
        inclusive = None  # the inclusive column self time is derived from, where it is
        if report.kind == "tree" and metric is not None and _is_total(header[metric]):
            twin = _self_twin(header, numeric, metric)
            if twin is None:
                inclusive = metric
            else:
                metric = twin
        module_col = header.index("Module") if "Module" in header else None
        is_time = metric is not None and "Time" in header[metric]
        sites = CallSites()
        path: list[int] = []
        parents: list[int | None] = []  # the row of each tree row's caller
        row_path: list[int] = []
        total_row = report.kind == "tree" and _has_total(rows)
        cols: dict[str, list[Any]] = {k: [] for k in
                                      ("name", "value", "dur_ns", "stack_id", "args")}
        for i, (depth, fields) in enumerate(zip(depths, rows, strict=True)):
            name = fields[0].strip()
            module = fields[module_col].strip() if module_col is not None else None
            stack = None
            parent = None
            if report.kind == "tree" and not (depth == 0 and name == "Total"):
                level = max(depth - (1 if total_row else 0), 0)
                del path[level:]
                del row_path[level:]
                parent = row_path[-1] if row_path else (0 if total_row else None)
                stack = sites.site(path[-1] if path else None, (name, module))
                path.append(stack)
                row_path.append(i)
            elif report.kind == "grouped" and header[0] in ("Function", "Source Function"):
                stack = sites.site(None, (name, module))
            parents.append(parent)
            cols["name"].append(name)
            cols["stack_id"].append(stack)
            cols["args"].append(orjson.dumps(_row_args(report, table[i], numeric,
                                                       fields)).decode())
        values = [numbers[metric] if metric is not None else None for numbers in table]
        if inclusive is not None:
            values = _self_from_totals(values, parents, header[inclusive], out)
        no_dur = 0
        for value in values:
            dur = None
            if is_time and value is not None:
                ns = value * 1e9
                if 0 <= ns < INT64_MAX:
                    dur = round(ns)
                else:  # a negative or astronomically large CPU time is no duration
                    no_dur += 1
            cols["value"].append(value)
            cols["dur_ns"].append(dur)
        bad.note(out, "args.values, the text stays in args.raw")
        if no_dur:
            out.note("report rows", f"warning: {header[metric]} is negative or too large for "
                     "a duration (dur_ns null)", no_dur)
        n = len(rows)
        out.add_events({"kind": ["sample"] * n, "category": ["cpu.sample"] * n,
                        "ts_ns": [None] * n, **cols})
        frames, stacks = sites.tables()
        out.add_table("frames", frames)
        out.add_table("stacks", stacks)
        out.metadata["metric"] = header[metric] if metric is not None else None
        out.metadata["sample_units"] = {"": metric_unit(out.metadata["metric"] or "")}
        # Totals per function (or module, thread...), not samples: a report of event
        # counts has no durations to tell them apart by.
        out.metadata["sample_rows"] = "aggregates"
        out.note("report rows", "events", n)

    def _tasks(self, report: Report, rows: list[list[str]], table: list[list[float | None]],
               numeric: list[bool], bad: _BadCells, out: TraceBuilder) -> None:
        """A GPU report grouped by computing task (``-report hotspots -group-by
        computing-task`` on a gpu-hotspots or gpu-offload result): one untimed ``gpu.kernel``
        aggregate per task, ``dur_ns`` its Total Time (all instances), ``count`` its Instance
        Count. Pseudo-rows (``[Outside any task]``) are no task: category ``other``."""
        header = report.header
        time_col = _column(header, numeric, TASK_TIME)
        count_col = _column(header, numeric, TASK_COUNT)
        cols: dict[str, list[Any]] = {k: [] for k in
                                      ("category", "name", "dur_ns", "count", "args")}
        no_dur = no_count = pseudo = 0
        for fields, numbers in zip(rows, table, strict=True):
            name = fields[0].strip()
            seconds = numbers[time_col] if time_col is not None else None
            dur = None
            if seconds is not None:
                ns = seconds * 1e9
                if 0 <= ns < INT64_MAX:
                    dur = round(ns)
                else:
                    no_dur += 1
            count = numbers[count_col] if count_col is not None else None
            if count is not None and not (count.is_integer() and 0 <= count < INT64_MAX):
                count, no_count = None, no_count + 1
            args = _row_args(report, numbers, numeric, fields)
            category = "gpu.kernel"
            if is_pseudo(name):
                category, pseudo = "other", pseudo + 1
                args["cat"] = "VTune pseudo-task"
            cols["category"].append(category)
            cols["name"].append(name)
            cols["dur_ns"].append(dur)
            cols["count"].append(None if count is None else int(count))
            cols["args"].append(orjson.dumps(args).decode())
        bad.note(out, "args.values, the text stays in args.raw")
        if time_col is None:
            out.note("report rows", f"warning: no {TASK_TIME} column: the tasks have no GPU "
                     "time (dur_ns null)", len(rows))
        if no_dur:
            out.note("report rows", f"warning: {TASK_TIME} is negative or too large for a "
                     "duration (dur_ns null)", no_dur)
        if no_count:
            out.note("report rows", f"warning: {TASK_COUNT} is no whole number (count null)",
                     no_count)
        n = len(rows)
        out.add_events({"kind": ["slice"] * n, "ts_ns": [None] * n, **cols})
        out.metadata["format"] = "VTune CSV (GPU computing tasks)"
        out.metadata["metric"] = header[time_col] if time_col is not None else None
        out.note("report rows", "GPU computing tasks (gpu.kernel totals)", n - pseudo)
        out.note("report rows", "pseudo-tasks such as [Outside any task] (category other)",
                 pseudo)

    # -- timeline bins and the summary ---------------------------------------------------
    def _timeline(self, report: Report, out: TraceBuilder) -> None:
        header = report.header
        cols: dict[str, list[Any]] = {k: [] for k in ("name", "ts_ns", "value")}
        bad = _BadCells()
        for no, line in report.lines:
            fields = _fields(line, report.delimiter, no, len(header))
            try:
                seconds = Decimal(fields[1].strip())
            except InvalidOperation:
                raise _LineError(no, f"{header[1]} is not a number of seconds") from None
            # adjusted() is the decimal exponent: |seconds| < 1e10 before multiplying, so
            # that 1e999999 cannot overflow the decimal context.
            start = int(seconds * 1_000_000_000) if seconds.is_finite() and \
                seconds.adjusted() < 10 else None
            if start is None or abs(start) > INT64_MAX:
                raise _LineError(no, f"{header[1]} is out of range (not a finite number of "
                                 "seconds that fits int64 ns)")
            for h, cell in zip(header[3:], fields[3:], strict=True):
                cols["name"].append(h)
                cols["ts_ns"].append(start)
                cols["value"].append(bad.number(cell, report.delimiter, no, h))
        bad.note(out, "value")
        n = len(cols["name"])
        out.add_events({"kind": ["counter"] * n, "category": ["counter.vtune"] * n, **cols})
        out.note("timeline bins", "events", len(report.lines))

    def _summary(self, report: Report, out: TraceBuilder) -> None:
        entries = []
        for no, line in report.lines:
            fields = _fields(line, report.delimiter, no, None)
            level = fields[0].strip()
            entries.append({"level": int(level) if level.isascii() and level.isdigit()
                            else level,
                            "metric": fields[1].strip() if len(fields) > 1 else "",
                            "values": [f.strip() for f in fields[2:]]})
        out.metadata["summary"] = entries
        out.note("summary rows", "metadata", len(entries))


class _BadCells:
    """Counts the cells of numeric columns that hold no usable number, and where the first
    of each kind is, for one warning per kind."""

    def __init__(self) -> None:
        self.count = {"text": 0, "range": 0}
        self.first: dict[str, tuple[int, str]] = {}

    def number(self, cell: str, delimiter: str, line: int, column: str) -> float | None:
        value = parse_number(cell, delimiter)
        kind = None
        if value is None and not is_pseudo(cell.strip()):
            kind = "text"
        elif value is not None and not math.isfinite(value):
            kind, value = "range", None
        if kind:
            self.count[kind] += 1
            self.first.setdefault(kind, (line, column))
        return value

    def note(self, out: TraceBuilder, where: str) -> None:
        what = {"text": "text in a numeric column", "range": "a number out of range"}
        for kind, n in self.count.items():
            if n:
                line, column = self.first[kind]
                out.note("report cells", f"warning: {what[kind]} (first at line {line}, "
                         f"{column}): null in {where}", n)


class _LineError(Exception):
    """A problem with one report line; ``read`` turns it into a TraceReadError."""

    def __init__(self, line: int, message: str, fields: int | None = None) -> None:
        super().__init__(message)
        self.line, self.message = line, message
        self.fields = fields  # how many fields the line has, where that is the problem


def _fields(line: str, delimiter: str, no: int, width: int | None) -> list[str]:
    """The cells of report line ``no``; ``width`` is the count the header asks for."""
    try:
        fields = split_line(line, delimiter)
    except CsvLineError as exc:
        raise _LineError(no, f"not a CSV line ({exc})") from None
    if width is not None and len(fields) != width:
        raise _LineError(no, f"{len(fields)} fields where the header has {width}",
                         len(fields))
    return fields


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + text.count("\r", 0, offset) - \
        text.count("\r\n", 0, offset) + 1


def _column(header: list[str], numeric: list[bool], want: str) -> int | None:
    """The index of the numeric column ``want`` (its name stripped), or None."""
    return next((i for i, h in enumerate(header) if h.strip() == want and numeric[i]), None)


def _is_total(column: str) -> bool:
    """Whether a column is inclusive: ``CPU Time: Total``, ``CPU Time:Total`` ..."""
    return ":" in column and column.rsplit(":", 1)[1].strip() == "Total"


def _self_twin(header: list[str], numeric: list[bool], total: int) -> int | None:
    """The Self column beside the inclusive column ``total`` (``CPU Time: Self``)."""
    prefix = header[total].rsplit(":", 1)[0]
    return next((i for i, h in enumerate(header) if numeric[i] and ":" in h and
                 h.rsplit(":", 1)[0] == prefix and h.rsplit(":", 1)[1].strip() == "Self"),
                None)


def _row_args(report: Report, numbers: list[float | None], numeric: list[bool],
              fields: list[str]) -> dict[str, Any]:
    """A report row's args: the report kind and grouping, its numbers as read, its text."""
    return {"report": report.kind, "group_by": report.header[0],
            "values": {h: v for h, v, num in zip(report.header, numbers, numeric, strict=True)
                       if num},
            "raw": dict(zip(report.header, fields, strict=True))}


def _self_from_totals(totals: list[float | None], parents: list[int | None], column: str,
                      out: TraceBuilder) -> list[float | None]:
    """Self values of a tree whose only metric is inclusive: each row's total minus its
    children's totals. A row with a child whose total is no number has no self value; a
    difference below zero beyond float rounding (the report rounds each total) is 0."""
    children: list[list[float | None]] = [[] for _ in totals]
    for total, parent in zip(totals, parents, strict=True):
        if parent is not None:
            children[parent].append(total)
    selves: list[float | None] = []
    unknown = negative = 0
    for total, kids in zip(totals, children, strict=True):
        if total is None:
            selves.append(None)
        elif any(k is None for k in kids):
            selves.append(None)
            unknown += 1
        else:
            self_value = math.fsum([total, *(-k for k in kids if k is not None)])
            if self_value < -1e-9 * max(1.0, abs(total)):
                negative += 1
            selves.append(max(self_value, 0.0))
    out.note("report rows", f"self derived: {column} minus the children's {column} (the "
             "report has no Self column)", len(totals))
    if unknown:
        out.note("report rows", f"warning: a child's {column} is no number: no self value "
                 "(value null)", unknown)
    if negative:
        out.note("report rows", f"warning: the children's {column} exceeds the row's: self 0",
                 negative)
    return selves


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


def metric_unit(metric: str) -> str:
    """What one unit of a report row's ``value`` is, from its metric column: ``cycles``,
    ``instructions``, else the metric's own name (``value`` where there is none)."""
    if "CLK_UNHALTED" in metric or metric.lower().endswith("cycles"):
        return "cycles"
    if "INST_RETIRED" in metric or "Instructions" in metric:
        return "instructions"
    return metric.rsplit(":", 1)[-1] or "value"


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    register(VtuneCsvReader)
