"""rocprof CSV files: which kind each is (by its header, case-insensitively), and their
columns read with pyarrow.csv, column-wise, every cell first as text."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from tracekit import TraceReadError

# (kind, columns that must all be present, columns that must be absent), lower-cased:
# rocprofv3 (v3_*), rocprofv2's file plugin (v2_*, unquoted, a blank line after the header)
# and rocprof v1 (formats.md 2.1-2.3).
KINDS: tuple[tuple[str, set[str], set[str]], ...] = (
    ("v3_kernel", {"kind", "agent_id", "kernel_name", "correlation_id", "start_timestamp"},
     set()),
    ("v3_memcpy", {"kind", "direction", "correlation_id", "start_timestamp"}, set()),
    ("v3_memory", {"kind", "operation", "allocation_size", "start_timestamp"}, set()),
    ("v3_scratch", {"kind", "operation", "agent_id", "queue_id", "start_timestamp"}, set()),
    ("v3_counters", {"counter_name", "counter_value", "dispatch_id"}, set()),
    ("v3_api", {"domain", "function", "process_id", "start_timestamp"}, set()),
    ("v2_api", {"domain", "function", "correlation_id", "start_timestamp"}, {"process_id"}),
    ("v2_kernel", {"dispatch_id", "gpu_id", "kernel_name", "start_timestamp"}, set()),
    ("v2_ops", {"domain", "operation", "start_timestamp", "stop_timestamp"}, set()),
    ("v2_roctx", {"domain", "roctx_id", "message", "timestamp"}, set()),
    ("stats", {"name", "calls", "totaldurationns"}, set()),
    ("v3_agents", {"node_id", "agent_type", "product_name"}, set()),
    ("v1_kernels", {"index", "kernelname", "gpu-id"}, set()),
)


_LABEL_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_ "
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


@dataclass
class CsvFile:
    """One rocprof CSV: its kind, header and cells (all text, lower-cased names).

    ``replaced`` counts the cells whose invalid UTF-8 was replaced with U+FFFD, the first of
    them on line ``replaced_line``.
    """

    path: Path
    kind: str
    table: pa.Table
    replaced: int = 0
    replaced_line: int | None = None
    labels: dict[str, str] = field(default_factory=dict)  # lower-cased name -> as written
    _columns: dict[str, pa.Array] = field(default_factory=dict, repr=False)

    def text(self, name: str) -> pa.Array | None:
        """Column ``name`` (case-insensitive) as text, or None when the file has none."""
        if name not in self.table.column_names:
            return None
        if name not in self._columns:
            self._columns[name] = self.table[name].combine_chunks()
        return self._columns[name]

    def ints(self, name: str, bits: int = 64) -> pa.Array | None:
        """Column ``name`` as int64: ``None``/empty cells are null; ``Agent 1`` is 1. A cell
        that is no integer, or does not fit ``bits`` bits, is an error naming its line."""
        col = self.text(name)
        if col is None:
            return None
        values = None
        for cells in (col, pc.utf8_ltrim(col, _LABEL_CHARS)):  # 12, then "Agent 12"
            try:
                values = cells.cast(pa.int64())
                break
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        if values is None:
            values = self._parse_ints(name, col)
        if bits < 64 and len(values):
            limit = 1 << (bits - 1)
            out = pc.fill_null(pc.or_(pc.less(values, -limit), pc.greater_equal(values, limit)),
                               False)
            if pc.any(out).as_py():
                self.fail(name, pc.index(out, True).as_py(),
                          f"is out of range (a {bits}-bit field)")
        return values

    def _parse_ints(self, name: str, col: pa.Array) -> pa.Array:
        """The slow path of ``ints``: labelled, padded and blank cells, and the errors."""
        digits = pc.extract_regex(col, r"^\s*(?:[A-Za-z_ ]*?)(?P<n>-?\d+)\s*$")
        values = pc.struct_field(digits, "n")
        blank = pc.or_(pc.is_in(pc.utf8_trim_whitespace(col), pa.array(["", "None"])),
                       pc.is_null(col))
        bad = pc.and_(pc.is_null(values), pc.invert(blank))
        if pc.any(bad).as_py():
            self.fail(name, pc.index(bad, True).as_py(), "is not an integer")
        try:
            return values.cast(pa.int64())
        except pa.ArrowInvalid:  # digits beyond 64 bits
            big = next(i for i, v in enumerate(values.to_pylist())
                       if v is not None and not -(1 << 63) <= int(v) < 1 << 63)
            self.fail(name, big, "is out of the 64-bit integer range")
            raise

    def fail(self, name: str, row: int, what: str) -> None:
        """Raise the error for the cell of column ``name`` in data row ``row``."""
        cell = self.text(name)[row].as_py() if self.text(name) is not None else None
        if isinstance(cell, str) and len(cell) > 40:
            cell = cell[:40] + "…"
        raise TraceReadError(f"column {self.labels.get(name, name)} {what}: {cell!r}",
                             path=self.path, location=f"line {self.line_of(row)}")

    def line_of(self, row: int) -> int:
        """The line of the file that holds data row ``row`` (blank lines are no rows)."""
        seen = -1
        for number, line in enumerate(_lines(self.path)[1:], 2):
            if line:
                seen += 1
                if seen == row:
                    return number
        return row + 2


def kind_of(header: list[str]) -> str | None:
    """The kind of a rocprof CSV from its header, or None."""
    names = {h.strip().lower() for h in header}
    for kind, needed, absent in KINDS:
        if needed <= names and not absent & names:
            return kind
    return None


_SPELLING = {"beginns": "BeginNs", "endns": "EndNs", "kernelname": "KernelName",
             "totaldurationns": "TotalDurationNs", "gpu-id": "gpu-id", "index": "Index",
             "gpu_id": "GPU_ID", "roctx_id": "ROCTX_ID"}


def missing_columns(header: list[str]) -> str:
    """For a header no kind matches: the columns the closest kind lacks, as rocprof
    spells them (``Start_Timestamp``), or "" when no kind is close."""
    names = {h.strip().lower() for h in header}
    best = min(KINDS, key=lambda k: len(k[1] - names))
    lacking = sorted(best[1] - names)
    if len(lacking) * 2 > len(best[1]):
        return ""
    return ", ".join(spelling(n) for n in lacking)


def spelling(name: str) -> str:
    """A lower-cased column name as rocprof writes it (``Start_Timestamp``, ``BeginNs``)."""
    return _SPELLING.get(name, "_".join(w.capitalize() for w in name.split("_")))


def header_of(text: str) -> list[str]:
    """The first line's fields."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines:
        return []
    try:
        return next(csv.reader([lines[0]]), [])
    except csv.Error:
        return []


def read_csv(path: Path) -> CsvFile | None:
    """Read one file, or None when it is no rocprof CSV."""
    with open(path, "rb") as fh:
        head = fh.read(65536)
    if head.startswith(_UTF16_BOMS):
        raise TraceReadError("UTF-16 text: rocprof writes UTF-8 (convert the file first)",
                             path=path, location="line 1")
    header = header_of(head.decode("utf-8", "replace"))
    kind = kind_of(header)
    if kind is None:
        return None
    names = [h.strip().lower() or f"column {i + 1}" for i, h in enumerate(header)]
    if len(set(names)) != len(names):
        raise TraceReadError("repeated column names in the header", path=path,
                             location="line 1")
    if kind == "stats":  # v1 quotes names by hand without escaping inner quotes
        table, replaced, first = _lenient_stats(path.read_bytes(), names, path)
        return CsvFile(path, kind, table, replaced, first,
                       dict(zip(names, (h.strip() for h in header), strict=True)))
    f = None
    for cell_type in (pa.string(), pa.binary()):  # binary only for invalid UTF-8
        options = pacsv.ConvertOptions(column_types={n: cell_type for n in names},
                                       strings_can_be_null=True, null_values=[""])
        try:  # from the path: the file's bytes are never held beside the table
            table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(
                column_names=names, skip_rows=1), convert_options=options,
                parse_options=pacsv.ParseOptions(newlines_in_values=False))
        except pa.ArrowInvalid as exc:
            if "invalid UTF8" in str(exc) and cell_type == pa.string():
                continue
            if "Could not skip initial" not in str(exc):
                message, where = _parse_error(path, str(exc), len(names))
                raise TraceReadError(message, **where) from None
            table = pa.table({n: pa.array([], cell_type) for n in names})  # a header alone
        f = _as_text(path, kind, table) if cell_type == pa.binary() else \
            CsvFile(path, kind, table)
        break
    f.labels = dict(zip(names, (h.strip() or n for h, n in zip(header, names, strict=True)),
                        strict=True))
    return f


def _as_text(path: Path, kind: str, table: pa.Table) -> CsvFile:
    """The cells as UTF-8 text; cells with invalid UTF-8 have it replaced, and are counted."""
    columns, replaced, first_row = [], 0, None
    for column in table.columns:
        cells = column.combine_chunks()
        try:
            columns.append(cells.cast(pa.string()))
            continue
        except pa.ArrowInvalid:
            pass
        decoded = []
        for row, value in enumerate(cells.to_pylist()):  # only in damaged files
            if value is None:
                decoded.append(None)
                continue
            try:
                decoded.append(value.decode("utf-8"))
            except UnicodeDecodeError:
                decoded.append(value.decode("utf-8", "replace"))
                replaced += 1
                first_row = row if first_row is None else min(first_row, row)
        columns.append(pa.array(decoded, pa.string()))
    f = CsvFile(path, kind, pa.Table.from_arrays(columns, names=table.column_names), replaced)
    if first_row is not None:
        f.replaced_line = f.line_of(first_row)
    return f


def _lines(path: Path) -> list[bytes]:
    """The file's lines as pyarrow splits them (at \\n, \\r\\n and a lone \\r)."""
    return re.split(rb"\r\n|\r|\n", path.read_bytes())


_WIDTH = re.compile(r"Expected (\d+) columns, got (\d+): (.*?)(?: \.\.\.)?$", re.DOTALL)


def _parse_error(path: Path, message: str, width: int) -> tuple[str, dict[str, Any]]:
    """pyarrow's parse error as (message, TraceReadError keywords) naming the line: the
    line that starts as the row pyarrow shows, else the first of the wrong width."""
    m = _WIDTH.search(message)
    if m:
        want, got, text = int(m.group(1)), int(m.group(2)), m.group(3)
        for number, line in enumerate(_lines(path)[1:], 2):
            if text and line.decode("utf-8", "replace").startswith(text):
                return (f"{got} fields where the header has {want}",
                        {"path": path, "location": f"line {number}"})
    found = _first_bad_width(path, width)
    if found:
        return (f"{found[1]} fields where the header has {width}",
                {"path": path, "location": f"line {found[0]}"})
    return f"unreadable CSV: {message.splitlines()[0][:160]}", {"path": path}


def _first_bad_width(path: Path, width: int) -> tuple[int, int] | None:
    """(line, fields) of the first row whose field count is not ``width`` (for rows whose
    text pyarrow could not show)."""
    for number, line in enumerate(_lines(path)[1:], 2):
        if not line:
            continue
        try:
            fields = next(csv.reader([line.decode("utf-8", "replace")]), [])
        except csv.Error:
            return number, 0
        if len(fields) != width:
            return number, len(fields)
    return None


def _lenient_stats(raw: bytes, names: list[str], path: Path) -> tuple[pa.Table, int, int | None]:
    """v1 stats files quote names by hand without escaping inner quotes: the last fields are
    numbers, so the name is everything before them. Returns the table, the number of lines
    with invalid UTF-8 and the first of them."""
    rows = []
    replaced, first = 0, None
    for no, line_bytes in enumerate(raw.splitlines()[1:], 2):
        try:
            line = line_bytes.decode("utf-8")
        except UnicodeDecodeError:
            line = line_bytes.decode("utf-8", "replace")
            replaced += 1
            first = first or no
        if not line.strip():
            continue
        parts = line.rsplit(",", len(names) - 1)
        if len(parts) != len(names):
            raise TraceReadError(f"{len(parts)} fields where the header has {len(names)}",
                                 path=path, location=f"line {no}")
        parts[0] = parts[0].strip()
        if len(parts[0]) >= 2 and parts[0][0] == parts[0][-1] == '"':
            parts[0] = parts[0][1:-1]
        rows.append(parts)
    table = pa.table({n: pa.array([r[i] for r in rows], pa.string())
                      for i, n in enumerate(names)})
    return table, replaced, first
