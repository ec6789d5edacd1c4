"""``tracekit analyze --format html``: the HTML report as a report format."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracekit import ReportFormat

if TYPE_CHECKING:
    from tracekit import Registry, Report, Trace


class HtmlFormat(ReportFormat):
    """The page ``tracekit report`` writes, for the analyzers ``analyze`` ran: a plain
    ``analyze --format html`` runs what ``tracekit report`` runs, and writes the same page."""

    name = "html"
    description = ("The HTML report: verdict, plots and sortable tables in one "
                   "self-contained file (plotly.js inlined; needs tracekit[html]).")
    extensions = (".html", ".htm")
    media_type = "text/html; charset=utf-8"

    def __init__(self, options: Any = None) -> None:
        from tracekit.plugins.html_report.assets import check_plotly

        check_plotly()  # before anything is read
        super().__init__(options)

    def analyzers(self, trace: Trace, registry: Registry) -> list[str] | None:
        from tracekit.plugins.html_report.command import report_analyzers

        return report_analyzers(trace, registry)

    def render(self, reports: list[Report], inputs: list[str], *, trace: Trace | None = None,
               analyzer_options: tuple[str, ...] = ()) -> bytes:
        from tracekit.plugins.html_report.command import render_scoped

        return render_scoped(trace, reports, inputs, analyzer_options)
