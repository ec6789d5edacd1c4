"""The HTML report: ``tracekit report TRACE... -o report.html``, a page people look at.

One self-contained file (plotly.js inlined, nothing fetched when it opens) with the verdict
and findings on top, the GPU time breakdown per device and per step, a busy/idle strip per
device with the largest gaps marked, launch delay and kernel duration distributions, the
summary tables (sortable), a flame graph of CPU samples, and the comparison of ranks and of
two runs. See docs/report.md.

``analyze --format html`` is :class:`HtmlFormat`, a report format. For other front ends:
:func:`render_html` makes the page from a trace and the reports run on it, and
:func:`report_table_csv` writes one report table as CSV.
"""

from __future__ import annotations

from typing import Any

import tracekit
from tracekit.plugins.html_report.command import build_report, report, report_analyzers
from tracekit.plugins.html_report.format import HtmlFormat
from tracekit.plugins.html_report.page import render_html
from tracekit.plugins.html_report.tables import report_table_csv, reports_table_csv

__all__ = ["HtmlFormat", "build_report", "render_html", "report_analyzers", "report_table_csv",
           "reports_table_csv"]


@tracekit.hookimpl
def register_commands(app: Any) -> None:
    app.command("report")(report)


@tracekit.hookimpl
def register_report_formats(register: Any) -> None:
    register(HtmlFormat)
