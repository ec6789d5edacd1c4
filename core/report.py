"""Analyzer results: Report and Finding, and core's report formats (text for terminals, JSON,
one table as CSV); plugins add more as ``ReportFormat`` components."""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
from tracekit.errors import UnknownFormatError
from tracekit.interfaces import ReportFormat

if TYPE_CHECKING:
    from tracekit.model import Trace
    from tracekit.registry import Registry

REPORT_FORMAT_VERSION = 1
SEVERITIES = ("info", "warning", "critical")


@dataclass
class Finding:
    """One diagnosis: what is wrong, the numbers that show it, and what to do about it."""

    severity: str
    title: str
    evidence: dict[str, Any] = field(default_factory=dict)
    suggestion: str = ""
    cost_ns: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the finding as a JSON-ready dict."""
        return {"severity": self.severity, "title": self.title, "evidence": self.evidence,
                "suggestion": self.suggestion, "cost_ns": self.cost_ns}


@dataclass
class Report:
    """What an analyzer returns: named Arrow tables, findings and notes.

    Column units live in each field's metadata (``unit``: ``ns``, ``bytes``, ``%``).
    """

    analyzer: str
    title: str
    tables: dict[str, pa.Table] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    table_titles: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Return the report as a JSON-ready dict (see schemas/report.schema.json)."""
        tables = {}
        for name, table in self.tables.items():
            columns = [{"name": f.name, "type": _json_type(f.type), "unit": _unit(f)}
                       for f in table.schema]
            rows = [list(r.values()) for r in table.to_pylist()]
            tables[name] = {"title": self.table_titles.get(name, name), "columns": columns,
                            "rows": [[_clean(v) for v in row] for row in rows]}
        return {"analyzer": self.analyzer, "title": self.title, "tables": tables,
                "findings": [f.to_json() for f in self.findings], "notes": list(self.notes)}


_TYPES = {"int": pa.int64(), "float": pa.float64(), "str": pa.string()}


def report_table(columns: list[tuple[str, str, str | None, Any]]) -> pa.Table:
    """A report table from ``(name, type, unit, values)``; type is int, float or str, and
    the unit (``ns``, ``bytes``, ``%``) goes into the field's metadata for rendering."""
    fields, arrays = [], []
    for name, kind, unit, values in columns:
        type_ = _TYPES[kind]
        fields.append(pa.field(name, type_, metadata={"unit": unit} if unit else None))
        arrays.append(pa.array(values.tolist() if hasattr(values, "tolist") else list(values),
                               type_))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def percent(part: float, whole: float) -> float:
    """``part`` as a percentage of ``whole``, rounded to 0.1 (0 when whole is 0)."""
    return round(100.0 * part / whole, 1) if whole else 0.0


def short_name(name: str, limit: int = 48) -> str:
    """``name`` cut to ``limit`` characters (kernel names run to thousands)."""
    return name if len(name) <= limit else name[: limit - 1] + "…"


def short_names(names: list[str], limit: int = 48) -> list[str]:
    """``short_name`` of each name, but names that it would make equal stay apart.

    A name that differs from each of its look-alikes within one stretch keeps its start and
    that stretch (``void k<Op(…xx, 1>(f…``): template kernels often differ only deep inside
    their arguments. A name that differs from them in several places (cuBLAS's
    ``…_tilesize64x256x8_…_execute_split_k_kernel``) keeps its start and the fewest of its
    words that no look-alike has (``sm80_xmma_…tilesize64x256x8…split``)."""
    out = [short_name(n, limit) for n in names]
    alike: dict[str, list[int]] = {}
    for i, short in enumerate(out):
        alike.setdefault(short, []).append(i)
    head = limit // 2
    span = limit - head - 2  # between the two ellipses
    for group in alike.values():
        for i in group:
            name = names[i]
            others = [names[j] for j in group if names[j] != name]
            if not others or len(name) <= limit:
                continue
            differ = [_common_prefix(name, m) for m in others]
            if max(differ) - min(differ) < span // 2 or len(others) == 1:
                start = max(head, min(max(differ) - span // 2, len(name) - span))
                out[i] = (name[:head] + "…" + name[start:start + span]
                          + ("…" if start + span < len(name) else ""))
            else:
                out[i] = _distinct_words(name, others, limit)
    return out


_WORD = re.compile(r"[A-Za-z0-9]+")


def _distinct_words(name: str, others: list[str], limit: int) -> str:
    """``name``'s start and, in their order, the fewest of its words that tell it apart from
    each of ``others`` (chosen greedily, the word that most others lack first)."""
    words = list(_WORD.finditer(name))
    other_words = [set(_WORD.findall(o)) for o in others]
    left, chosen = list(range(len(others))), []
    while left:
        lacking = [(sum(w.group() not in other_words[k] for k in left), -n)
                   for n, w in enumerate(words)]
        best = max(range(len(words)), key=lacking.__getitem__, default=None)
        if best is None or lacking[best][0] == 0:
            break  # the others have every word of this one (and more)
        chosen.append(best)
        left = [k for k in left if words[best].group() in other_words[k]]
    if not chosen:
        return short_name(name, limit)
    pieces: list[str] = []
    for n in sorted(chosen):
        if pieces and n - 1 in chosen:  # next to the one before: keep what joins them
            pieces[-1] += name[words[n - 1].end():words[n].end()]
        else:
            pieces.append(words[n].group())
    tail = "…".join(pieces)
    keep = max(8, limit - len(tail) - 1)
    return short_name(name[:keep] + "…" + tail, limit)


def _common_prefix(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` share from their start."""
    pairs = zip(a, b, strict=False)  # up to the shorter
    return next((i for i, (x, y) in enumerate(pairs) if x != y), min(len(a), len(b)))


def reports_to_json(reports: list[Report], inputs: list[str]) -> bytes:
    """Serialize reports as one JSON document."""
    doc = {"tracekit_report": REPORT_FORMAT_VERSION, "inputs": inputs,
           "reports": [r.to_json() for r in reports]}
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"


class TextFormat(ReportFormat):
    """For a terminal: findings first, then each table (see :func:`render_text`)."""

    name = "text"
    event_columns = frozenset()  # renders the reports alone
    description = "Findings, then each table, wrapped to the terminal's width."
    extensions = (".txt",)
    media_type = "text/plain; charset=utf-8"

    def render(self, reports: list[Report], inputs: list[str], *, trace: Trace | None = None,
               analyzer_options: tuple[str, ...] = ()) -> bytes:
        return render_text(reports).encode()


class JsonFormat(ReportFormat):
    """One JSON document (see :func:`reports_to_json` and schemas/report.schema.json)."""

    name = "json"
    event_columns = frozenset()  # renders the reports alone
    description = "Every report, table and finding, following schemas/report.schema.json."
    extensions = (".json",)
    media_type = "application/json"

    def render(self, reports: list[Report], inputs: list[str], *, trace: Trace | None = None,
               analyzer_options: tuple[str, ...] = ()) -> bytes:
        return reports_to_json(reports, inputs)


@dataclass(frozen=True)
class CsvOptions:
    """Options of the CSV format."""

    table: str | None = field(default=None, metadata={
        "help": "the report table to write (may be left out when there is one)"})


class CsvFormat(ReportFormat):
    """One report table for spreadsheets (see :func:`table_csv`)."""

    name = "csv"
    event_columns = frozenset()  # renders the reports alone
    description = "One report table (--table NAME): raw values, units in the headers."
    extensions = (".csv",)
    media_type = "text/csv; charset=utf-8"
    Options = CsvOptions

    def render(self, reports: list[Report], inputs: list[str], *, trace: Trace | None = None,
               analyzer_options: tuple[str, ...] = ()) -> bytes:
        return table_csv(reports, self.options.table)


#: The report formats of core itself, by name: no plugin may take these names.
CORE_FORMATS: dict[str, type[ReportFormat]] = {
    cls.name: cls for cls in (TextFormat, JsonFormat, CsvFormat)}


def report_formats(registry: Registry) -> dict[str, type[ReportFormat]]:
    """Every report format ``analyze --format`` takes: core's, then those plugins added."""
    return {**CORE_FORMATS, **{n: c for n, c in sorted(registry.report_formats.items())
                               if ("report-format", n) not in registry.conflicts}}


def report_format(name: str, registry: Registry) -> type[ReportFormat]:
    """The report format called ``name``; a one-line UsageError names the valid ones."""
    formats = report_formats(registry)
    if name not in formats:
        raise UnknownFormatError(f"no report format '{name}' (formats: "
                                 f"{', '.join(formats)})")
    return formats[name]


def render(reports: list[Report], format: str = "text", inputs: list[str] | None = None,
           table: str | None = None) -> bytes:
    """Reports in one of core's formats: ``text`` (see :func:`render_text`), ``json`` (see
    :func:`reports_to_json`, which names the ``inputs``) or ``csv`` (one table, see
    :func:`table_csv`)."""
    if format not in CORE_FORMATS:
        raise ValueError(f"unknown report format {format!r} ({', '.join(CORE_FORMATS)})")
    options = CsvOptions(table) if format == "csv" else None
    return CORE_FORMATS[format](options).render(reports, inputs or [])


def table_csv(reports: list[Report], name: str | None) -> bytes:
    """One report table as CSV for spreadsheets: raw values (times in ns, sizes in bytes),
    each column's unit in its header (``total [ns]``). ``name`` picks the table; it may be
    left out when the reports hold one table."""
    import io

    import pyarrow.csv as pacsv
    from tracekit.errors import UsageError

    tables = {n: t for r in reversed(reports) for n, t in r.tables.items()}
    if name is None and len(tables) != 1:
        raise UsageError("--format csv writes one table: pick it with --table NAME (here: "
                         f"{', '.join(sorted(tables)) or 'none'})")
    key = name if name is not None else next(iter(tables))
    if key not in tables:
        raise UsageError(f"no table '{key}' in the report (tables: "
                         f"{', '.join(sorted(tables)) or 'none'})")
    chosen = tables[key]
    heads = [f"{f.name} [{_unit(f)}]" if _unit(f) else f.name for f in chosen.schema]
    out = io.BytesIO()
    pacsv.write_csv(chosen.rename_columns(heads), out)
    return out.getvalue()


def table_subject(report: Report, name: str) -> str:
    """What a table of ``report`` lists, for "nothing in this trace for: ...": its title up
    to a parenthesis or a comma ("GPU kernels, largest time change first" -> "GPU kernels"),
    its first letter lower-cased unless the word is an acronym."""
    head = re.split(r" \(|, ", report.table_titles.get(name, name))[0]
    return head[:1].lower() + head[1:] if head[1:2].islower() else head


def render_text(reports: list[Report], width: int | None = None) -> str:
    """Render reports for a terminal: findings first, then each table. Without ``width``,
    the terminal's (``COLUMNS`` where set); where the output is no terminal (a pipe, a file)
    and ``COLUMNS`` is not set, findings wrap at 100 and tables keep names whole, for grep
    and diff."""
    table_width = width
    if width is None:
        width = shutil.get_terminal_size((100, 24)).columns
        to_terminal = "COLUMNS" in os.environ or sys.stdout.isatty()
        table_width = width if to_terminal else UNCUT
    out: list[str] = []
    for report in reports:
        out.append(report.title)
        out.append("=" * min(len(report.title), width))
        for f in report.findings:
            out.extend(textwrap.wrap(f"[{f.severity}] {f.title}", width=width,
                                     subsequent_indent="    "))
            if f.evidence:
                evidence = ", ".join(f"{k}: {format_evidence(k, v)}"
                                     for k, v in f.evidence.items())
                out.extend(textwrap.wrap(evidence, width=width, initial_indent="    ",
                                         subsequent_indent="    "))
            if f.suggestion:
                out.extend(textwrap.wrap(f"fix: {f.suggestion}", width=width,
                                         initial_indent="    ", subsequent_indent="    "))
        empty = []
        for name, table in report.tables.items():
            if table.num_rows == 0:
                empty.append(table_subject(report, name))
                continue
            out.append("")
            out.append(report.table_titles.get(name, name))
            out.append(render_table(table, table_width, table_name=name))
        if empty:
            out.append("")
            out.extend(textwrap.wrap(f"(nothing in this trace for: {', '.join(empty)})",
                                     width=min(width, 100)))
        for note in report.notes:
            out.extend(textwrap.wrap(f"note: {note}", width=width, subsequent_indent="    "))
        out.append("")
    return "\n".join(out)


#: A table width that cuts no name.
UNCUT = 1 << 20


def render_table(table: pa.Table, width: int = 100, max_rows: int = 50,
                 table_name: str | None = None) -> str:
    """Render an Arrow table as aligned columns, durations in human units (µs, ms, s); past
    ``max_rows`` rows, a line says how to get them all (``table_name``: the report's).

    The longest text column (names) is cut to what the terminal leaves, but never below 32
    characters: a kernel name cut shorter says nothing.
    """
    if table.num_rows == 0:
        return "  (none)"
    units = [_unit(f) for f in table.schema]
    heads = [f.name.replace("_pct", "%") for f in table.schema]
    # An id (pid, device, rank) is its digits, never a count with separators.
    ids = [_is_id(f.name) and not pa.types.is_floating(f.type) for f in table.schema]
    rows = [[str(v) if is_id and v is not None else _fmt_unit(v, u)
             for v, u, is_id in zip(r.values(), units, ids, strict=True)]
            for r in table.slice(0, max_rows).to_pylist()]
    numeric = [not (pa.types.is_string(f.type) or pa.types.is_dictionary(f.type))
               for f in table.schema]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    fixed = sum(w for w, num in zip(widths, numeric, strict=True) if num) + 2 * len(heads)
    text_cols = [i for i, num in enumerate(numeric) if not num]
    # Short text columns (status, device) keep their width; the longest one (the name) gets
    # what the terminal leaves, never less than 32 characters (20 beside other text).
    longest = max(text_cols, key=lambda i: widths[i], default=-1)
    share = max(16, (width - fixed) // max(1, len(text_cols)))
    room_of = {i: min(widths[i], share) for i in text_cols if i != longest}
    room_of[longest] = max(32 if len(text_cols) == 1 else 20,
                           width - fixed - sum(room_of.values()))
    last = len(heads) - 1
    if longest >= 0 and rows:  # names cut alike keep the part where they differ
        for r, name in zip(rows, short_names([r[longest] for r in rows], room_of[longest]),
                           strict=True):
            r[longest] = name
    lines = []
    for cells in [heads, *rows]:
        parts = []
        for i, cell in enumerate(cells):
            if numeric[i]:
                parts.append(cell.rjust(widths[i]))
                continue
            room = room_of[i]
            cut = cell if len(cell) <= room else cell[: room - 1] + "…"
            # A text column before others is padded so that the columns after it line up.
            parts.append(cut if i == last else cut.ljust(min(widths[i], room)))
        lines.append("  " + "  ".join(parts).rstrip())
    if table.num_rows > max_rows:
        every = (f"--format csv --table {table_name} or --format json" if table_name
                 else "--format json")
        lines.append(f"  ... {table.num_rows - max_rows} more rows ({every} for all)")
    return "\n".join(lines)


_ID_KEYS = frozenset({"pid", "tid", "device", "stream", "rank"})


def _is_id(key: str) -> bool:
    """Whether an evidence key or column names an id (``pid``, ``late_pid``, ``stack_id``)."""
    return key.rsplit("_", 1)[-1] in _ID_KEYS or key.endswith("_id")


def format_evidence(key: str, v: Any) -> str:
    """An evidence value by the unit its key names: ``*_ns`` as a duration, ``*bytes`` as a
    size, ``*_pct`` as a percentage, an id (``pid``, ``tid``, ``device``, ``stream``,
    ``rank``, ``*_id`` and those names after a prefix: ``late_pid``) as its digits; anything
    else as it is."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if _is_id(key):
            return str(v)
        if key.endswith("_ns"):
            return format_ns(v)
        if key.endswith("bytes"):
            return format_bytes(v)
        if key.endswith("_pct"):
            return f"{v:g}%"
    return _fmt(v)


def _fmt_unit(v: Any, unit: str) -> str:
    if unit == "ns" and isinstance(v, (int, float)) and not isinstance(v, bool):
        return format_ns(v)
    if unit == "bytes" and isinstance(v, (int, float)) and not isinstance(v, bool):
        return format_bytes(v)
    if unit == "%" and isinstance(v, float):
        return f"{v:.1f}"
    return _fmt(v)


def format_ns(ns: float) -> str:
    """1234 -> '1.23µs'; three significant digits, unit chosen by magnitude."""
    if ns != ns:  # nan
        return "-"
    a = abs(ns)
    for limit, div, unit in ((1e3, 1, "ns"), (1e6, 1e3, "µs"), (1e9, 1e6, "ms")):
        if a < limit:
            return f"{ns:.0f}ns" if unit == "ns" else f"{ns / div:.3g}{unit}"
    return f"{ns / 1e9:,.3g}s" if a < 1e12 else f"{ns / 1e9:,.0f}s"


def format_bytes(n: float) -> str:
    """4096 -> '4.1 kB' (decimal units, as nsys prints MB)."""
    a = abs(n)
    for limit, div, unit in ((1e3, 1, "B"), (1e6, 1e3, "kB"), (1e9, 1e6, "MB"),
                             (1e12, 1e9, "GB")):
        if a < limit:
            return f"{n:.0f} B" if unit == "B" else f"{n / div:.3g} {unit}"
    return f"{n / 1e12:,.3g} TB"


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3g}"
    return str(v)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def _unit(f: pa.Field) -> str:
    meta = f.metadata or {}
    return meta.get(b"unit", b"").decode()


def _json_type(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t):
        return "number"
    if pa.types.is_boolean(t):
        return "boolean"
    return "string"
