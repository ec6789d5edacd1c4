"""Report tables as CSV, for spreadsheets and scripts (``nsys stats -f csv -r NAME`` style)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from typing import Any

from tracekit import OptionError, Report
from tracekit.plugins.html_report.markup import unit_of


def _header(name: str, unit: str) -> str:
    """The column name with its unit, where the name does not say it: ``total_ns``."""
    if not unit or unit == "%" or name.endswith(f"_{unit}"):
        return name
    return f"{name}_{unit}"


def _cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
        return ""
    return value


def report_table_csv(report: Report, table_name: str | None = None) -> bytes:
    """One table of ``report`` as CSV (UTF-8, ``\\n`` line ends, a header row).

    Values are raw, as the analyzer computed them: durations in ns, sizes in bytes, shares
    in %; the unit goes into the header (``total_ns``). Names are written as the trace has
    them (quoted where they hold commas, quotes or line breaks). ``table_name`` None picks
    the report's only table. An unknown name raises :class:`OptionError` listing the tables.

    Examples
    --------
    >>> from tracekit import Report
    >>> from tracekit.toolkit import report_table
    >>> r = Report("summary", "Summary", tables={"kernels": report_table(
    ...     [("total", "int", "ns", [1500]), ("name", "str", None, ["gemm, fp16"])])})
    >>> report_table_csv(r, "kernels").decode()
    'total_ns,name\\n1500,"gemm, fp16"\\n'
    """
    if table_name is None:
        if len(report.tables) != 1:
            raise OptionError(f"analyzer '{report.analyzer}' has {len(report.tables)} tables: "
                              f"pick one with table_name= ({', '.join(report.tables)})")
        table_name = next(iter(report.tables))
    table = report.tables.get(table_name)
    if table is None:
        raise OptionError(f"analyzer '{report.analyzer}': no table '{table_name}' "
                          f"(tables: {', '.join(report.tables) or 'none'})")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([_header(f.name, unit_of(f)) for f in table.schema])
    columns = [table[name].to_pylist() for name in table.column_names]
    for row in zip(*columns, strict=True):
        writer.writerow([_cell(v) for v in row])
    return out.getvalue().encode()


def reports_table_csv(reports: Sequence[Report], table_name: str | None = None) -> bytes:
    """The table called ``table_name`` of the first report that has one, as CSV (see
    :func:`report_table_csv`); None picks the only table of all the reports."""
    if table_name is None:
        holders = [(r, n) for r in reports for n in r.tables]
        if len(holders) != 1:
            names = ", ".join(f"{r.analyzer}:{n}" for r, n in holders) or "none"
            raise OptionError(f"a CSV holds one table: pick it with table_name= "
                              f"({names})")
        return report_table_csv(*holders[0])
    for report in reports:
        if table_name in report.tables:
            return report_table_csv(report, table_name)
    names = ", ".join(sorted({n for r in reports for n in r.tables})) or "none"
    raise OptionError(f"no report has a table '{table_name}' (tables: {names})")
