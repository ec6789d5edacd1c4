"""rocprof CSV files: which kind each is (by its header, case-insensitively), and their
columns read with pyarrow.csv, column-wise, every cell first as text."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from tracekit.errors import TraceReadError

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


@dataclass
class CsvFile:
    """One rocprof CSV: its kind, header and cells (all text, lower-cased names)."""

    path: Path
    kind: str
    table: pa.Table
    _columns: dict[str, pa.Array] = field(default_factory=dict, repr=False)

    def text(self, name: str) -> pa.Array | None:
        """Column ``name`` (case-insensitive) as text, or None when the file has none."""
        if name not in self.table.column_names:
            return None
        if name not in self._columns:
            self._columns[name] = self.table[name].combine_chunks()
        return self._columns[name]

    def ints(self, name: str, line_of: int = 2) -> pa.Array | None:
        """Column ``name`` as int64: ``None``/empty cells are null; ``Agent 1`` is 1."""
        col = self.text(name)
        if col is None:
            return None
        for cells in (col, pc.utf8_ltrim(col, _LABEL_CHARS)):  # 12, then "Agent 12"
            try:
                return cells.cast(pa.int64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        digits = pc.extract_regex(col, r"^\s*(?:[A-Za-z_ ]*?)(?P<n>-?\d+)\s*$")
        values = pc.struct_field(digits, "n")
        blank = pc.or_(pc.is_in(pc.utf8_trim_whitespace(col), pa.array(["", "None"])),
                       pc.is_null(col))
        bad = pc.and_(pc.is_null(values), pc.invert(blank))
        if pc.any(bad).as_py():
            row = pc.index(bad, True).as_py()
            raise TraceReadError(f"line {row + line_of}: column '{name}' is not an integer: "
                                 f"{col[row].as_py()!r}", path=self.path)
        return values.cast(pa.int64())


def kind_of(header: list[str]) -> str | None:
    """The kind of a rocprof CSV from its header, or None."""
    names = {h.strip().lower() for h in header}
    for kind, needed, absent in KINDS:
        if needed <= names and not absent & names:
            return kind
    return None


def header_of(text: str) -> list[str]:
    """The first line's fields."""
    first = text.split("\n", 1)[0]
    return next(csv.reader([first]), [])


def read_csv(path: Path) -> CsvFile | None:
    """Read one file, or None when it is no rocprof CSV."""
    with open(path, "rb") as fh:
        head = fh.read(65536)
    header = header_of(head.decode("utf-8", "replace"))
    kind = kind_of(header)
    if kind is None:
        return None
    names = [h.strip().lower() for h in header]
    if len(set(names)) != len(names):
        raise TraceReadError("line 1: repeated column names in the header", path=path)
    if kind == "stats":  # v1 quotes names by hand without escaping inner quotes
        return CsvFile(path, kind, _lenient_stats(path.read_bytes(), names, path))
    options = pacsv.ConvertOptions(column_types={n: pa.string() for n in names},
                                   strings_can_be_null=True, null_values=[""])
    try:  # from the path: the file's bytes are never held beside the table
        table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(
            column_names=names, skip_rows=1), convert_options=options,
            parse_options=pacsv.ParseOptions(newlines_in_values=False))
    except pa.ArrowInvalid as exc:
        raise TraceReadError(_first_bad_line(path, len(names)) or _line_error(str(exc)),
                             path=path) from None
    return CsvFile(path, kind, table)


def _first_bad_line(path: Path, width: int) -> str | None:
    """'line N: k fields where the header has m' for the first row of the wrong width."""
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.reader(fh)
        next(reader, None)
        for row in reader:
            if row and len(row) != width:
                return f"line {reader.line_num}: {len(row)} fields where the header has {width}"
    return None


def _line_error(message: str) -> str:
    """pyarrow's CSV error as one line that names the line of the file."""
    m = re.search(r"Expected (\d+) columns, got (\d+)", message)
    row = re.search(r"row (\d+)", message) or re.search(r": (.*)$", message)
    if m:
        return f"{m.group(2)} fields where the header has {m.group(1)}" + (
            f" (near: {row.group(1)[:80]})" if row else "")
    return f"unreadable CSV: {message.splitlines()[0][:160]}"


def _lenient_stats(raw: bytes, names: list[str], path: Path) -> pa.Table:
    """v1 stats files quote names by hand without escaping inner quotes: the last four
    fields are numbers, so the name is everything before them."""
    rows = []
    for no, line in enumerate(raw.decode("utf-8", "replace").splitlines()[1:], 2):
        if not line.strip():
            continue
        parts = line.rsplit(",", len(names) - 1)
        if len(parts) != len(names):
            raise TraceReadError(f"line {no}: {len(parts)} fields where the header has "
                                 f"{len(names)}", path=path)
        parts[0] = parts[0].strip()
        if len(parts[0]) >= 2 and parts[0][0] == parts[0][-1] == '"':
            parts[0] = parts[0][1:-1]
        rows.append(parts)
    return pa.table({n: pa.array([r[i] for r in rows], pa.string())
                     for i, n in enumerate(names)})
