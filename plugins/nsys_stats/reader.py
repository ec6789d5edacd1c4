"""Reader for ``nsys stats --format csv`` range traces: the NVTX push/pop range trace
(``nvtx_pushpop_trace``; ``nvtxpptrace`` in older nsys), one row per range.

The file is read once (a stream will do) and parsed column-wise with ``pyarrow.csv``; every
cell is text first, then checked and cast per column, so a bad cell is reported with its line
and column. Only the error paths go row by row.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import tracekit
from tracekit import Source, TraceBuilder, TraceReadError
from tracekit.toolkit import HEAD_SIZE, decode_text

HEADER = ("Start (ns),End (ns),Duration (ns),DurChild (ns),DurNonChild (ns),Name,PID,TID,Lvl,"
          "NumChild,RangeId,ParentId,RangeStack,NameTree")
COLUMNS = HEADER.split(",")
_HEADER_BYTES = HEADER.encode()
# nsys stats writing to stdout puts a few lines before the report ("Generating SQLite file",
# "Processing [...] with [...]", " ** NVTX Push/Pop Range Trace (nvtx_pushpop_trace):").
PREAMBLE_LINES = 20
_BOM = b"\xef\xbb\xbf"
_INTEGER = r"^\s*-?\d+(?:\.0*)?\s*$"  # a REAL column of SQLite may print as 123.0
_PLAIN_JSON = r'^[^"\\\x00-\x1f]*$'  # text that is a JSON string once quoted
CLOCK = "nsys session ns (0 at session start)"


class NsysStatsReader(tracekit.Reader):
    """``nsys stats`` CSV range traces: NVTX push/pop ranges."""

    name = "nsys-stats"
    description = "nsys stats CSV range traces (nvtx_pushpop_trace)"
    extensions = (".csv",)
    reads_streams = True  # one read_bytes() of the report

    @classmethod
    def sniff(cls, source: Source) -> float:
        at = _header_line(source.head)
        if at is None:
            return 0.0
        return 1.0 if at == 0 else 0.95

    def read(self, source: Source, out: TraceBuilder) -> None:
        raw = source.read_bytes()
        at = _header_line(raw[:HEAD_SIZE])
        if at is None:
            raise TraceReadError(_header_problem(raw), path=source.path, reader=self.name,
                                 location="line 1")
        body, first_line = _body(raw, at)
        del raw
        try:
            table, body, bad_lines = _parse(body, first_line)
            ranges = _Ranges(table, body, first_line)
            columns = ranges.events(out) if table.num_rows else None  # a report may be empty
        except _CellError as exc:
            raise TraceReadError(exc.message, path=source.path, reader=self.name,
                                 location=f"line {exc.line}") from None
        out.metadata.update({"format": "nsys stats CSV (nvtx_pushpop_trace)",
                             "tool": "Nsight Systems (nsys stats)",
                             "report": "nvtx_pushpop_trace", "clock": CLOCK})
        if ranges.domains:
            out.metadata["names"] = "domain-qualified: the domain is in args.domain"
        out.note("nsys output before the header", "skipped: not report data", at)
        out.note("report lines", "warning: not valid UTF-8 (bad bytes read as U+FFFD)",
                 bad_lines)
        if body and not body.endswith((b"\n", b"\r")):
            out.note("report lines", "warning: the last line has no line break (the file may "
                     "be cut short)")
        if columns is not None:
            out.add_events(columns)
        for pid, tid in ranges.threads():
            out.add_process(pid)
            out.add_thread(pid, tid)
        out.note("ranges", "events", table.num_rows)


# -- finding the report ----------------------------------------------------------------------

def _header_line(head: bytes) -> int | None:
    """The index of the header among the first lines of ``head``, or None."""
    if head.startswith(_BOM):
        head = head[len(_BOM):]
    for i, line in enumerate(head.split(b"\n", PREAMBLE_LINES)[:PREAMBLE_LINES]):
        if line.rstrip(b"\r") == _HEADER_BYTES:
            return i
    return None


def _header_problem(raw: bytes) -> str:
    """Why the first line is no push/pop trace header: the first column that differs from
    the report's, when the line has the report's shape, else what the header should be."""
    first = raw.removeprefix(_BOM).split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", "replace")
    try:
        fields = next(csv.reader([first]), [])
    except csv.Error:
        fields = []
    same = sum(a == b for a, b in zip(fields, COLUMNS, strict=False))
    if same * 2 >= len(COLUMNS):
        if len(fields) != len(COLUMNS):
            return (f"the header has {len(fields)} columns where an nsys stats "
                    f"nvtx_pushpop_trace has {len(COLUMNS)}")
        i = next(i for i, (a, b) in enumerate(zip(fields, COLUMNS, strict=True)) if a != b)
        return (f"header column {i + 1} is {fields[i][:40]!r} where an nsys stats "
                f"nvtx_pushpop_trace has {COLUMNS[i]!r} (times must be in ns)")
    return ("not an nsys stats nvtx_pushpop_trace CSV: the header is not "
            "'Start (ns),End (ns),Duration (ns),DurChild (ns),...,RangeStack,NameTree'")


def _body(raw: bytes, at: int) -> tuple[bytes, int]:
    """The bytes after the header at line index ``at``, and the line number they start on."""
    start = len(_BOM) if raw.startswith(_BOM) else 0
    for _ in range(at + 1):
        newline = raw.find(b"\n", start)
        start = newline + 1 if newline >= 0 else len(raw)
    return raw[start:], at + 2


def _parse(body: bytes, first_line: int) -> tuple[pa.Table, bytes, int]:
    """The rows as a table of text columns, the body they were read from and how many of
    its lines had invalid UTF-8 (read as U+FFFD); a row of the wrong width names its line."""
    if not body.strip():  # the header alone: a report without ranges
        return pa.table({c: pa.array([], pa.string()) for c in COLUMNS}), body, 0
    try:
        return _read_csv(body), body, 0
    except pa.ArrowInvalid as exc:
        if "invalid UTF8" not in str(exc):
            raise _csv_problem(body, first_line, exc) from None
    body, bad = _replace_invalid(body)
    try:
        return _read_csv(body), body, bad
    except pa.ArrowInvalid as exc:
        raise _csv_problem(body, first_line, exc) from None


def _read_csv(body: bytes) -> pa.Table:
    options = pacsv.ConvertOptions(column_types=dict.fromkeys(COLUMNS, pa.string()),
                                   strings_can_be_null=False)
    # Only a quoted name can hold a line break; without quotes the parser may split the
    # input into blocks and read them in parallel.
    return pacsv.read_csv(
        pa.BufferReader(body), convert_options=options,
        read_options=pacsv.ReadOptions(column_names=COLUMNS),
        parse_options=pacsv.ParseOptions(newlines_in_values=b'"' in body))


def _replace_invalid(body: bytes) -> tuple[bytes, int]:
    """``body`` with invalid UTF-8 replaced by U+FFFD, and how many lines had some."""
    text, bad = decode_text(body)
    return (text.encode() if bad else body), bad


def _csv_problem(body: bytes, first_line: int, exc: Exception) -> _CellError:
    """The error for rows the CSV parser refused: the first of the wrong width."""
    reader = csv.reader(io.StringIO(body.decode("utf-8", "replace"), newline=""))
    start = 1
    try:
        for fields in reader:
            if fields and len(fields) != len(COLUMNS):
                return _CellError(first_line + start - 1, f"{len(fields)} fields where the "
                                  f"header has {len(COLUMNS)}")
            start = reader.line_num + 1
    except csv.Error as error:
        return _CellError(first_line + start - 1, f"not a CSV line ({error})")
    return _CellError(first_line, f"unreadable CSV: {str(exc).splitlines()[0][:160]}")


def _row_lines(body: bytes) -> list[int]:
    """The line on which each row starts, counted from the first line of ``body`` (a row
    spans lines when a quoted name holds a line break; blank lines hold no row)."""
    lines, start = [], 1
    reader = csv.reader(io.StringIO(body.decode("utf-8", "replace"), newline=""))
    try:
        for fields in reader:
            if fields:
                lines.append(start)
            start = reader.line_num + 1
    except csv.Error:
        pass
    return lines


class _CellError(Exception):
    """A bad line of the report (``line`` counts from the file's first line)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


# -- the ranges ------------------------------------------------------------------------------

class _Ranges:
    """The report's rows, cast column by column; errors name the file's line."""

    def __init__(self, table: pa.Table, body: bytes, first_line: int) -> None:
        self.table = table
        self.body = body
        self.first_line = first_line  # the file line of the body's first line
        self.domains = False
        self._pairs: list[tuple[int, int]] = []

    def line(self, row: int) -> int:
        """The file line on which data row ``row`` starts."""
        lines = _row_lines(self.body)
        return self.first_line - 1 + (lines[row] if row < len(lines) else row + 1)

    def ints(self, column: str, *, nullable: bool = False) -> pa.Array:
        """Column ``column`` as int64 (empty cells null where ``nullable``)."""
        cells = self.table[column].combine_chunks()
        if nullable:
            cells = pc.if_else(pc.equal(cells, ""), pa.scalar(None, pa.string()), cells)
        try:  # the common case: plain integers, cast at once
            return cells.cast(pa.int64())
        except pa.ArrowInvalid:
            pass
        cells = pc.fill_null(cells, "")
        blank = pc.equal(pc.utf8_trim_whitespace(cells), "")
        ok = pc.match_substring_regex(cells, _INTEGER)
        if nullable:
            ok = pc.or_(ok, blank)
        if not pc.all(ok).as_py():
            self.fail(column, int(pc.index(ok, False).as_py()), "is not an integer")
        digits = pc.replace_substring_regex(pc.utf8_trim_whitespace(cells), r"\.0*$", "")
        if nullable:
            digits = pc.if_else(blank, pa.scalar(None, pa.string()), digits)
        try:
            return digits.cast(pa.int64())
        except pa.ArrowInvalid:  # beyond 64 bits
            big = next(i for i, v in enumerate(digits.to_pylist())
                       if v is not None and not -(1 << 63) <= int(v) < 1 << 63)
            self.fail(column, big, "is out of the 64-bit integer range")
            raise

    def fail(self, column: str, row: int, what: str) -> None:
        """Raise the error for the cell of ``column`` in data row ``row``."""
        cell = self.table[column][row].as_py()
        if len(cell) > 40:
            cell = cell[:40] + "…"
        raise _CellError(self.line(row), f"{column} {what}: {cell!r}")

    def events(self, out: TraceBuilder) -> dict[str, Any]:
        """The event columns of the ranges, with everything else the report has in args."""
        start, end, dur = self.ints("Start (ns)"), self.ints("End (ns)"), \
            self.ints("Duration (ns)")
        negative = pc.less(dur, 0)
        if pc.any(negative).as_py():
            self.fail("Duration (ns)", int(pc.index(negative, True).as_py()), "is negative")
        mismatch = pc.sum(pc.not_equal(pc.subtract(end, start), dur)).as_py() or 0
        out.note("ranges", "warning: End is not Start + Duration (dur_ns is Duration)",
                 mismatch)
        pid, tid = self.ints("PID"), self.ints("TID")
        pairs = pa.table({"pid": pid, "tid": tid}).group_by(
            ["pid", "tid"], use_threads=False).aggregate([])
        self._pairs = sorted(zip(pairs["pid"].to_pylist(), pairs["tid"].to_pylist(),
                                 strict=True))
        level = self.ints("Lvl")
        raw_names = self.table["Name"].combine_chunks()
        names, domain = self._names(raw_names)
        derived_tree = pc.binary_join_element_wise(
            pc.binary_repeat("--", level), raw_names, "") if len(level) else raw_names
        tree = self.table["NameTree"].combine_chunks()
        tree = pc.if_else(pc.equal(tree, derived_tree), pa.scalar(None, pa.string()), tree)
        args = _json_objects({
            "RangeId": _text(self.ints("RangeId")),
            "ParentId": _text(self.ints("ParentId", nullable=True)),
            "Lvl": _text(level),
            "NumChild": _text(self.ints("NumChild")),
            "DurChild": _text(self.ints("DurChild (ns)")),
            "DurNonChild": _text(self.ints("DurNonChild (ns)")),
            "RangeStack": _json_strings(self.table["RangeStack"].combine_chunks()),
            "NameTree": _json_strings(tree),
            "domain": _json_strings(domain) if domain is not None else None,
        })
        n = self.table.num_rows
        return {"kind": pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), ["slice"]),
                "category": pa.DictionaryArray.from_arrays(np.zeros(n, np.int32),
                                                           ["host.annotation"]),
                "name": names, "ts_ns": start, "dur_ns": dur,
                "pid": pid, "tid": tid, "args": args}

    def _names(self, names: pa.Array) -> tuple[pa.DictionaryArray, pa.Array | None]:
        """Range names (dictionary-encoded) and their NVTX domains. Newer nsys writes
        ``domain:name`` (``:name`` in the default domain); older ones the name alone. Names
        are split only when every one has a colon and some start with one: a name of an older
        report may hold a colon of its own, and one that starts with it is the new form's
        empty default domain."""
        encoded = names.dictionary_encode()  # a few distinct names in many rows
        distinct = encoded.dictionary
        if not len(names) or not pc.all(pc.match_substring(distinct, ":")).as_py() or \
                not pc.any(pc.starts_with(distinct, ":")).as_py():
            return encoded, None
        self.domains = True
        parts = pc.split_pattern(distinct, ":", max_splits=1)
        return (pc.take(pc.list_element(parts, 1), encoded.indices).dictionary_encode(),
                pc.take(pc.list_element(parts, 0), encoded.indices))

    def threads(self) -> list[tuple[int, int]]:
        """The (pid, tid) pairs the ranges are on."""
        return self._pairs


def _text(values: pa.Array) -> pa.Array:
    return values.cast(pa.string())


def _json_strings(values: pa.Array) -> pa.Array:
    """Each text as a JSON string (null stays null). Text without quotes, backslashes or
    control characters is only quoted; the rest goes through orjson."""
    quoted = pc.binary_join_element_wise('"', values, '"', "")
    plain = pc.fill_null(pc.match_substring_regex(values, _PLAIN_JSON), True)
    if pc.all(plain).as_py():
        return quoted
    odd = np.flatnonzero(~plain.to_numpy(zero_copy_only=False))
    escaped = quoted.to_pylist()
    for i in odd:  # only the rows that need escaping
        value = values[int(i)].as_py()
        escaped[i] = None if value is None else orjson.dumps(value).decode()
    return pa.array(escaped, pa.string())


def _json_objects(members: dict[str, pa.Array | None]) -> pa.Array:
    """Per row a JSON object of the members' JSON texts, joined in one pass; null members
    are left out. The first member must have no nulls."""
    pieces: list[pa.Array | str] = []
    for key, values in members.items():
        if values is None or values.null_count == len(values):
            continue
        prefix = f'{"{" if not pieces else ","}"{key}":'
        if values.null_count:
            pieces.append(pc.fill_null(pc.binary_join_element_wise(prefix, values, ""), ""))
        else:
            pieces += [prefix, values]
    return pc.binary_join_element_wise(*pieces, "}", "")
