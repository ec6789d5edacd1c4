"""The page: every report's findings, plots and tables in one self-contained HTML file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING

from tracekit import Report, Trace, __version__
from tracekit.plugins.html_report import figures as fig
from tracekit.plugins.html_report.assets import CSS, JS, plotly_js
from tracekit.plugins.html_report.distributions import histogram, kernel_durations, launch_delays
from tracekit.plugins.html_report.flame import flame_graph
from tracekit.plugins.html_report.markup import (
    findings_html,
    notes_html,
    script_json,
    table_html,
    text,
)
from tracekit.plugins.html_report.strip import busy_strip
from tracekit.toolkit import default_analyzers, format_ns, table_subject, trace_kind

if TYPE_CHECKING:
    from tracekit import Registry

SUMMARY_TABLES = ("kernels", "api", "memops_time", "memops_size", "ranges")
CPU_REPORTS = ("cpu", "hotspots")


class Page:
    """Sections in order, with a table of contents; plots numbered as they are added."""

    def __init__(self) -> None:
        self.sections: list[str] = []
        self.toc: list[tuple[str, str]] = []
        self.plots = 0

    def section(self, key: str, title: str, body: str) -> None:
        self.toc.append((key, title))
        self.sections.append(f'<section id="{key}"><h2>{text(title)}</h2>{body}</section>')

    def plot(self, figure: fig.Figure, caption: str) -> str:
        """A plot's placeholder, its data, and a caption naming where the numbers come from."""
        self.plots += 1
        pid = f"plot-{self.plots}"
        # The plot's height reserved: the page does not move while plots draw.
        height = int(figure.get("layout", {}).get("height", 300))
        return (f'<figure><div class="plot" id="{pid}" style="height:{height}px"></div>'
                f'<script type="application/json" id="{pid}-data">{script_json(figure)}</script>'
                f"<figcaption>{text(caption)}</figcaption></figure>")


def _table(report: Report, name: str) -> str:
    table = report.tables.get(name)
    if table is None or not table.num_rows:
        return ""
    title = report.table_titles.get(name, name)
    return (f"<h3>{text(title)}</h3>"
            + table_html(table, f"analyzer {report.analyzer}, table {name}"))


def render_html(trace: Trace | None, reports: Sequence[Report], inputs: Sequence[str], *,
                registry: Registry | None = None, scope: str = "") -> bytes:
    """The HTML page for ``reports`` of ``trace`` read from ``inputs``: one file, plotly.js
    inlined, no network needed to open it.

    What ``tracekit report`` writes, and what ``analyze --format html`` writes for the
    analyzers it ran. Plots of the events themselves (busy strip, distributions, flame
    graph) come from ``trace``; each report adds its own section, and a report this module
    does not know shows its findings and tables. ``scope`` says which part of the trace
    the analyzers looked at (``window 2s:5s``), for the header. ``trace`` None (the reports
    of ``analyze --engine``, made where each input was read) leaves out the plots of events.
    """
    js = plotly_js()
    by_name = {r.analyzer: r for r in reports}
    if registry is None:
        from tracekit.toolkit import default_registry

        registry = default_registry()
    defaults = default_analyzers(trace_kind(trace), registry) if trace is not None else []
    headline = [r for r in reports if r.analyzer in defaults] or list(reports[:1])
    page = Page()
    on_top = {r.analyzer for r in headline}
    _verdict(page, headline, by_name)
    _breakdown(page, by_name)
    _timeline(page, trace, by_name.get("gaps"), on_top)
    if trace is not None:
        _distributions(page, trace)
    _summary(page, by_name.get("summary"))
    _cpu(page, trace, [by_name[n] for n in CPU_REPORTS if n in by_name], on_top)
    _ranks(page, by_name.get("ranks"), on_top)
    _diff(page, by_name.get("diff"), on_top)
    known = {"bottleneck", "breakdown", "gaps", "summary", "ranks", "diff", *CPU_REPORTS}
    for report in reports:
        if report.analyzer not in known:
            body = "" if report.analyzer in on_top else findings_html(report.findings)
            body += "".join(_table(report, n) for n in report.tables) + notes_html(report.notes)
            page.section(f"a-{report.analyzer}", report.title, body)
    return _document(page, trace, inputs, js, scope).encode()


#: Analyzers with a section of their own below the verdict.
OWN_SECTIONS = frozenset({"ranks", "diff"})


def _verdict(page: Page, headline: list[Report], by_name: dict[str, Report]) -> None:
    body = []
    for report in headline:
        findings = report.findings
        if not findings and report.analyzer in OWN_SECTIONS and report.analyzer in by_name:
            continue  # nothing to put on top: its title and notes are in its own section
        program = next((f for f in findings if f.title.startswith("program: ")), None)
        body.append(f'<p class="verdict">{text(report.title)}</p>')
        if program is not None:
            body.append(f'<p class="program">{text(program.title)}</p>')
        cards = findings_html([f for f in findings if f is not program])
        causes = report.tables.get("causes") if report.analyzer == "bottleneck" else None
        if causes is not None and causes.num_rows:
            # The findings beside the plot of the time they cost.
            body.append(f'<div class="beside"><div>{cards}</div><div>'
                        + page.plot(fig.causes_figure(causes), "Where the GPU timeline went: "
                                    "analyzer bottleneck, table causes")
                        + table_html(causes, "analyzer bottleneck, table causes")
                        + "</div></div>")
        else:
            body.append(cards)
        # Tables go to the report's own section, below; the verdict's per-device split is
        # the breakdown's, shown here only without it.
        if report.analyzer == "bottleneck" and "breakdown" not in by_name:
            body.append(_table(report, "devices"))
        body.append(notes_html(report.notes))
    if body:
        page.section("verdict", "Verdict and findings", "".join(body))


def _breakdown(page: Page, by_name: dict[str, Report]) -> None:
    report = by_name.get("breakdown")
    if report is None:
        return
    body = [notes_html(report.notes)]
    devices = report.tables.get("devices")
    if devices is not None and devices.num_rows:
        causes = fig.idle_by_cause(by_name.get("gaps"))
        source = "analyzer breakdown, table devices" + (
            "; idle split by cause: analyzer gaps, table causes" if causes else "")
        body.append(page.plot(fig.breakdown_figure(devices, causes),
                              f"GPU time per device, first to last activity: {source}"))
        body.append(_table(report, "devices"))
        if causes:
            body.append(_table(by_name["gaps"], "causes"))
    steps = report.tables.get("steps")
    if steps is not None and steps.num_rows:
        body.append(page.plot(fig.steps_figure(steps), "Per step: analyzer breakdown, "
                              "table steps"))
        body.append(_table(report, "steps"))
    page.section("breakdown", report.title, "".join(body))


def _findings(report: Report, on_top: set[str]) -> str:
    """A report's findings, unless the verdict section shows them already."""
    return "" if report.analyzer in on_top else findings_html(report.findings)


def _timeline(page: Page, trace: Trace | None, gaps: Report | None, on_top: set[str]) -> None:
    strip = busy_strip(trace, gaps) if trace is not None else None
    if strip is None:
        return
    caption = (f"Busy share per bin, {strip.bins} bins of {format_ns(strip.bin_ns)} each over "
               "all devices' span (compute, then exposed communication and memory, as the "
               "breakdown analyzer splits them)")
    if strip.shown < strip.devices:
        caption += f"; the first {strip.shown} of {strip.devices} devices"
    if strip.marked.num_rows:
        caption += "; numbered: the largest gaps, from analyzer gaps, table largest"
    body = [page.plot(strip.figure, caption)]
    if strip.marked.num_rows:
        body.append("<h3>Largest gaps (numbered on the strip)</h3>"
                    + table_html(strip.marked, "analyzer gaps, table largest ('at': since the "
                                 "first GPU activity of any device)"))
    if gaps is not None:
        body.append(_findings(gaps, on_top))
        body.append(_table(gaps, "distribution"))
        body.append(notes_html(gaps.notes))
    elif strip.marked.num_rows == 0:
        body.append('<p class="note">run the gaps analyzer (tracekit report does) to mark '
                    "the largest gaps</p>")
    page.section("timeline", "GPU busy and idle over time", "".join(body))


def _distributions(page: Page, trace: Trace) -> None:
    body = []
    for values, what, source in (
            (launch_delays(trace), "launch delay",
             "kernel start minus the end of its launch call, as the launch analyzer "
             "defines it (graph launches left out)"),
            (kernel_durations(trace), "kernel duration", "every timed GPU kernel")):
        hist = histogram(values, what)
        if hist is None:
            continue
        body.append(f"<h3>{text(what.capitalize())} ({hist.values:,} kernels)</h3>")
        body.append(page.plot(hist.figure, f"{what.capitalize()}: {source}; quarter-decade "
                              "bins, from the events"))
        body.append(table_html(hist.table, f"{what} histogram, from the events"))
    if body:
        page.section("distributions", "Launch delay and kernel duration", "".join(body))


def _summary(page: Page, report: Report | None) -> None:
    if report is None:
        return
    body = [_table(report, n) for n in (*SUMMARY_TABLES, *[t for t in report.tables
                                                          if t not in SUMMARY_TABLES])]
    empty = [table_subject(report, n) for n, t in report.tables.items() if not t.num_rows]
    if empty:
        body.append(f'<p class="note">nothing in this trace for: {text(", ".join(empty))}</p>')
    body.append(notes_html(report.notes))
    gpu = any(report.tables[n].num_rows for n in ("kernels", "api", "memops_time")
              if n in report.tables)
    # A trace without GPU work: its summary holds annotation ranges only.
    page.section("summary", "Top kernels, API calls and memory operations" if gpu else
                 "Summary: annotation ranges", "".join(body))


def _cpu(page: Page, trace: Trace | None, reports: list[Report], on_top: set[str]) -> None:
    flame = flame_graph(trace) if trace is not None else None
    body = []
    if flame is not None:
        what = f"'{flame.event}' samples" if flame.event else "samples"
        body.append(page.plot(flame.figure, (
            f"Flame graph of the {what} (root at the top; click a frame to zoom): the "
            f"{flame.drawn} heaviest of {flame.nodes:,} call sites, weight in {flame.unit}, "
            "idle samples left out; from the events' stacks")))
        body.append("<h3>Heaviest call sites</h3>"
                    + table_html(flame.table, "call tree of the samples, from the events"))
    for report in reports:
        body.append(_findings(report, on_top))
        body.extend(_table(report, n) for n in report.tables)
        body.append(notes_html(report.notes))
    if body:
        page.section("cpu", "CPU profile", "".join(body))


def _ranks(page: Page, report: Report | None, on_top: set[str]) -> None:
    if report is None:
        return
    body = [_findings(report, on_top)]
    ranks = report.tables.get("ranks")
    if ranks is not None and ranks.num_rows:
        body.append(page.plot(fig.ranks_figure(ranks), "Per rank: analyzer ranks, table ranks"))
        body.append(_table(report, "ranks"))
    skew = report.tables.get("skew")
    if skew is not None and skew.num_rows:
        body.append(page.plot(fig.lateness_figure(skew), "Lateness at the matched "
                              "collectives: analyzer ranks, table skew"))
        body.append(_table(report, "skew"))
    body.append(notes_html(report.notes))
    page.section("ranks", "Across ranks", "".join(body))


def _diff(page: Page, report: Report | None, on_top: set[str]) -> None:
    if report is None:
        return
    body = [_findings(report, on_top), _table(report, "totals")]
    kernels = report.tables.get("kernels")
    if kernels is not None and kernels.num_rows:
        a, _, b = report.title.removeprefix("Diff: ").partition(" → ")
        body.append(page.plot(fig.diff_figure(kernels, (a or "baseline", b or "candidate")),
                              "Kernels whose time changed most, side by side: analyzer diff, "
                              "table kernels"))
    body.extend(_table(report, n) for n in report.tables if n != "totals")
    body.append(notes_html(report.notes))
    page.section("diff", report.title, "".join(body))


def _document(page: Page, trace: Trace | None, inputs: Sequence[str], js: str,
              scope: str) -> str:
    names = ", ".join(PurePath(i).name for i in inputs)
    if trace is None:
        read = f"{len(inputs):,} inputs, each analyzed where it was read"
        skipped = 0
    else:
        sources = trace.metadata.get("sources", {}) if isinstance(trace.metadata, dict) else {}
        formats = sorted({m.get("format") or m.get("reader") or "?" for m in sources.values()
                          if isinstance(m, dict)})
        read = f"{trace.events.num_rows:,} events; format {', '.join(formats) or '?'}"
        skipped = sum(trace.log.skipped().values())
    meta = (read + (f"; analyzed: {scope}" if scope else "")
            + (f"; {skipped:,} input records skipped while reading" if skipped else "")
            + f"; tracekit {__version__}")
    nav = "".join(f'<a href="#{key}">{text(title)}</a>' for key, title in page.toc)
    title = f"tracekit report: {names}"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>tracekit report</h1>"
        + "".join(f'<p class="inputs">{text(i)}</p>' for i in inputs)
        + f'<p class="meta">{text(meta)}</p><nav>{nav}</nav></header>'
        f'<main>{"".join(page.sections)}</main>'
        f'<footer><p class="meta">Made by tracekit {text(__version__)}; open offline, '
        "nothing is fetched. Plots are drawn by plotly.js, inlined.</p></footer>"
        # plotly.js last: the text and tables can be shown while it compiles.
        f"<script>{js}</script><script>{JS}</script></body></html>\n")
