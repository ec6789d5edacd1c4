"""Safe HTML from trace data: escaping, embedded JSON, sortable tables and findings.

Every string that comes from a trace (kernel, function, file and device names) passes
through :func:`text` (page text), :func:`plot_text` (labels drawn by the plotting library)
or :func:`script_json` (data inside a ``<script>`` element), so that a kernel named
``<script>alert(1)</script>``, or one holding quotes, newlines or ANSI escapes, shows as text.
"""

from __future__ import annotations

import html
import math
from typing import Any

import orjson
import pyarrow as pa
from tracekit import Finding
from tracekit.toolkit import format_bytes, format_evidence, format_ns

#: Rows of one table on the page; the rest is counted under it (all of them: --format json).
MAX_ROWS = 200
#: Rows laid out when the page opens; the others wait, inert, in a ``<template>`` (neither
#: styled nor laid out) until "show all" or a sort asks for them.
SHOWN_ROWS = 25
# C0 control characters and DEL as their Unicode "control pictures" (ESC -> U+241B): a
# newline or an ANSI escape in a name is shown, not obeyed or dropped.
_CONTROLS = {c: 0x2400 + c for c in range(0x20)} | {0x7F: 0x2421}
_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                  "\u2028": "\\u2028", "\u2029": "\\u2029"}


def visible(value: object) -> str:
    """``value`` as a string with its control characters made visible."""
    return str(value).translate(_CONTROLS)


def text(value: object) -> str:
    """``value`` escaped for HTML text or a quoted attribute."""
    return html.escape(visible(value), quote=True)


def plot_text(value: object) -> str:
    """``value`` for a label, legend or hover text that the plotting library draws.

    Plotly reads a few HTML-like tags (``<b>``, ``<br>``, ``<a href>``) in its labels and
    turns entities back into characters, so escaping makes every name literal text.
    """
    return html.escape(visible(value), quote=False)


def script_json(value: Any) -> str:
    """``value`` as JSON that can sit inside a ``<script>`` element: no ``</script>``, no
    ``<!--`` and no line separators can end it early (JSON.parse reads them back)."""
    out = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    for char, escaped in _SCRIPT_UNSAFE.items():
        out = out.replace(char, escaped)
    return out


def unit_of(field: pa.Field) -> str:
    """The unit a report table declares for a column (``ns``, ``bytes``, ``%``), or ''."""
    return (field.metadata or {}).get(b"unit", b"").decode()


def display(value: Any, unit: str = "") -> str:
    """A cell's value as people read it: durations and sizes in human units."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        if unit == "ns":
            return format_ns(value)
        if unit == "bytes":
            return format_bytes(value)
        if unit == "%":
            return f"{value:.1f}"
        if isinstance(value, int):
            return f"{value:,}"
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"
    return visible(value)


def _is_text(field: pa.Field) -> bool:
    return pa.types.is_string(field.type) or pa.types.is_large_string(field.type) \
        or pa.types.is_dictionary(field.type)


def table_html(table: pa.Table, source: str, max_rows: int = MAX_ROWS) -> str:
    """A report table as a sortable HTML table (click a heading), at most ``max_rows`` rows.

    Numeric cells carry their raw value in ``data-v`` so that sorting is by number, not by
    the text shown; ``source`` (analyzer and table) is printed under the table.
    """
    units = [unit_of(f) for f in table.schema]
    numeric = [not _is_text(f) for f in table.schema]
    heads = []
    for field, unit, num in zip(table.schema, units, numeric, strict=True):
        label = field.name.replace("_pct", " %")
        if unit and unit not in ("%", "ns", "bytes"):  # those cells say their own unit
            label += f" ({unit})"
        heads.append(f'<th class="{"num" if num else "txt"}" scope="col">{text(label)}</th>')
    body = []
    for row in table.slice(0, max_rows).to_pylist():
        cells = []
        for value, unit, num in zip(row.values(), units, numeric, strict=True):
            shown = text(display(value, unit))
            if num:
                raw = "" if value is None or (isinstance(value, float) and math.isnan(value)) \
                    else repr(float(value))
                cells.append(f'<td class="num" data-v="{raw}">{shown}</td>')
            else:
                cells.append(f'<td class="txt" title="{shown}">{shown}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = table.num_rows - max_rows
    foot = f"{more:,} more rows: tracekit analyze --format json has them all. " \
        if more > 0 else ""
    rows, held = "".join(body[:SHOWN_ROWS]), "".join(body[SHOWN_ROWS:])
    button = ""
    if held:
        rows += f"<template>{held}</template>"
        button = (f'<button type="button" class="more">show all {len(body):,} rows</button> ')
    return (f'<div class="table-wrap"><table class="sortable"><thead><tr>{"".join(heads)}'
            f"</tr></thead><tbody>{rows}</tbody></table></div>"
            f'<p class="source">{button}{text(foot)}{text(source)}</p>')


def findings_html(findings: list[Finding]) -> str:
    """Findings as cards: severity, title, evidence and the fix."""
    cards = []
    for f in findings:
        evidence = "".join(
            f"<li><span class=\"key\">{text(k)}</span> {text(format_evidence(k, v))}</li>"
            for k, v in f.evidence.items())
        fix = f'<p class="fix"><b>fix:</b> {text(f.suggestion)}</p>' if f.suggestion else ""
        cards.append(f'<div class="finding {text(f.severity)}"><p class="title">'
                     f'<span class="sev">{text(f.severity)}</span> {text(f.title)}</p>'
                     + (f'<ul class="evidence">{evidence}</ul>' if evidence else "")
                     + fix + "</div>")
    return "".join(cards)


def notes_html(notes: list[str]) -> str:
    """A report's notes, one line each."""
    return "".join(f'<p class="note">note: {text(n)}</p>' for n in notes)
