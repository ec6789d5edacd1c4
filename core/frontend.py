"""What the built-in commands do, as library calls that return what the command prints:
``tracekit.cli`` only parses arguments and prints."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracekit.errors import TracekitError, UsageError
from tracekit.progress import NO_PROGRESS, Progress

if TYPE_CHECKING:
    from tracekit.interfaces import Analyzer, ReportFormat, WriteResult
    from tracekit.model import Trace
    from tracekit.registry import Registry
    from tracekit.report import Report


@dataclasses.dataclass
class Analysis:
    """What ``tracekit analyze`` made: the reports, and the bytes of the chosen format."""

    reports: list[Report]
    data: bytes
    #: The events the reports were made from; None for a run analyzed per input (--engine).
    trace: Trace | None = None

    def notices(self) -> list[str]:
        """What the readers skipped or warned of (none known for a run analyzed per input)."""
        from tracekit.overview import read_notice_lines

        return read_notice_lines(self.trace) if self.trace is not None else []

    def write(self, output: str | Path | None, *, force: bool = False) -> list[str]:
        """Write the report to ``output`` (None or ``-``: standard output) under the rules
        of ``tracekit.outputs``; return what the command says about it."""
        from tracekit.outputs import write_bytes

        write_bytes(output if output is not None else "-", self.data, force=force)
        return [] if output is None or str(output) == "-" else [f"wrote {output}"]


def report_format_for(name: str, table: str | None = None,
                      registry: Registry | None = None) -> ReportFormat:
    """The report format ``name`` (core's or a plugin's), ready to render; ``table`` picks
    the table of a format that writes one (``--table``). Raises a one-line UsageError."""
    from tracekit.pipeline import default_registry
    from tracekit.report import report_format

    cls = report_format(name, registry or default_registry())
    fields = {f.name for f in dataclasses.fields(cls.Options)}
    if table is not None and "table" not in fields:
        raise UsageError(f"--table picks the table of a format that writes one; the {name} "
                         "format writes every table")
    return cls(cls.Options(table=table) if "table" in fields else None)


def report_format_of_output(output: str | Path | None, registry: Registry) -> str | None:
    """The report format whose extension ends ``output``'s name (``report.json``: json);
    None for standard output or a name no format claims."""
    from tracekit.report import report_formats

    if output is None or str(output) == "-":
        return None
    name = Path(output).name.lower()
    return next((n for n, cls in report_formats(registry).items()
                 if any(name.endswith(ext) for ext in cls.extensions)), None)


def analyze_report(inputs: Sequence[str | Path], analyzers: Sequence[str] = (), *,
                   format: str | None = None, table: str | None = None, from_: str | None = None,
                   options: Sequence[str] = (), output: str | Path | None = None,
                   force: bool = False, engine: str | None = None, jobs: int | None = None,
                   scheduler: str | None = None, registry: Registry | None = None,
                   progress: Progress = NO_PROGRESS) -> Analysis:
    """Read ``inputs``, run the analyzers and render the reports as ``format`` (None: the
    format whose extension ends ``output``, else text): what ``tracekit analyze`` does
    before it writes.

    Without ``analyzers``, what runs is the defaults for the trace, or what the format asks
    for (``ReportFormat.analyzers``). With ``engine``, ``jobs`` or ``scheduler``, or for a
    large run, each input is analyzed in a task of its own (``tracekit.engine.plan`` and
    ``analyze_planned``). The format and ``output`` (where the report will go) are checked
    before anything is read.
    """
    from tracekit.engine import analyze_planned
    from tracekit.interfaces import ReportFormat
    from tracekit.outputs import preflight
    from tracekit.pipeline import analyze, default_registry, read, route_options
    from tracekit.report import report_formats

    registry = registry or default_registry()
    fmt = report_format_for(format or report_format_of_output(output, registry) or "text",
                            table, registry)
    given = [str(p) for p in inputs]
    if force:  # `analyze trace -f json`: -f is --force, and the format became an input
        names = report_formats(registry)
        mistaken = [p for p in given if p in names and not Path(p).exists()]
        if mistaken:
            raise UsageError(f"{mistaken[0]}: no such file; -f is --force (replace an "
                             f"output): for the report format pass --format {mistaken[0]}")
    if output is not None:
        preflight(output, force=force, inputs=list(inputs))
    reports = analyze_planned(inputs, analyzers, from_=from_, options=options, engine=engine,
                              jobs=jobs, scheduler=scheduler, registry=registry,
                              progress=progress)
    if reports is not None:  # analyzed one input per task: no process holds the events
        return Analysis(reports, fmt.render(reports, given, analyzer_options=tuple(options)))
    chooses = type(fmt).analyzers is not ReportFormat.analyzers and not analyzers
    consumers = _consumers(registry, analyzers, every=chooses)
    reader_cls = registry.get("reader", from_) if from_ else None
    reader_opts, analyzer_opts = route_options(list(options), reader_cls, consumers)
    progress.phase("reading")
    named = [registry.get("analyzer", n) for n in analyzers]
    trace = read(list(inputs), format=from_, options=reader_opts, registry=registry,
                 progress=progress, join_captures=not any(c.compares_inputs for c in named))
    names = list(analyzers) or (fmt.analyzers(trace, registry) if chooses else None) or None
    trace = _only_columns_read(trace, names, fmt, registry)
    progress.phase("analyzing")
    reports = analyze(trace, names, options=analyzer_opts, registry=registry)
    data = fmt.render(reports, given, trace=trace, analyzer_options=tuple(analyzer_opts))
    return Analysis(reports, data, trace)


def _only_columns_read(trace: Trace, names: Sequence[str] | None, fmt: ReportFormat,
                       registry: Registry) -> Trace:
    """``trace`` without the event columns that neither the analyzers to run nor the report
    format read, when each declares what it reads (``event_columns``): the args text of
    every event is most of a trace's memory, and no built-in verdict reads it."""
    from tracekit.defaults import default_analyzers, trace_kind

    chosen = list(names or default_analyzers(trace_kind(trace), registry))
    wanted = [registry.get("analyzer", n).event_columns for n in chosen]
    wanted.append(type(fmt).event_columns)
    if not chosen or any(w is None for w in wanted):
        return trace
    keep = frozenset().union(*wanted)
    unread = [c for c in trace.events.column_names if c not in keep]
    if not unread:
        return trace
    pruned = dataclasses.replace(trace, events=trace.events.drop_columns(unread))
    pruned.cache.update(trace.cache)
    return pruned


def _consumers(registry: Registry, names: Sequence[str], every: bool) -> list[type[Analyzer]]:
    """The analyzers ``-O`` pairs may go to (the others go to the reader): those named, or
    the defaults that may run, or (``every``, the format chooses) every analyzer."""
    from tracekit.defaults import default_candidates

    if names:
        return [registry.get("analyzer", n) for n in names]
    if every:
        return [c for n, c in sorted(registry.analyzers.items())
                if ("analyzer", n) not in registry.conflicts]
    return default_candidates(registry)


def convert_summary(trace: Trace, result: WriteResult, output: str | Path,
                    seconds: float) -> list[str]:
    """What ``tracekit convert`` says on stderr once it wrote: what, where and how fast, then
    what the readers skipped or warned of and the events the writer could not represent."""
    from tracekit.overview import conversion_lines

    written = ", ".join(f"{n:,} {what}" for what, n in result.written.items()) or "nothing"
    where = "standard output" if str(output) == "-" else str(output)
    return [f"wrote {where} in {seconds:.1f}s: {written}", *conversion_lines(trace, result)]


def plugin_commands(app: Any) -> tuple[list[str], int]:
    """Load the plugins and let them add their commands to the typer ``app`` (once per
    ``app``); return a warning line per plugin whose commands failed, and 0, or where the
    plugins could not be loaded the error line and its exit code."""
    from tracekit.pipeline import default_registry

    if app in _extended:
        return [], 0
    try:
        errors = default_registry().register_commands(app)
    except TracekitError as exc:
        return [f"error: {exc}"], exc.exit_code
    _extended.append(app)
    return [f"warning: {error}" for error in errors], 0


_extended: list[Any] = []  # the typer apps the plugins added their commands to


def plugins_listing(builtin: bool, as_json: bool) -> list[str]:
    """What ``tracekit plugins`` prints: a line per plugin (and its error), or JSON."""
    import orjson
    from tracekit.overview import plugin_json, plugin_lines, plugins

    shown = plugins(builtin=builtin)
    if as_json:
        return [orjson.dumps([plugin_json(p) for p in shown],
                             option=orjson.OPT_INDENT_2).decode()]
    if not shown:
        return ["no third-party plugins installed (--all lists the built-in ones)"]
    return [line for p in shown for line in plugin_lines(p)]
