"""``tracekit report TRACE... -o report.html``: read, run the analyzers a page needs, write it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from tracekit import Registry, Report, Trace

#: Beside the defaults for the trace (the verdict, or the CPU report), what the page shows:
#: for a GPU timeline, for several inputs or GPUs, for two inputs, and for the rest.
TIMELINE = ("breakdown", "gaps", "summary")
SEVERAL = ("ranks",)
TWO = ("diff",)
OTHER = ("summary",)


def report_analyzers(trace: Trace, registry: Registry) -> list[str]:
    """The analyzers ``tracekit report`` runs on ``trace``: a plain ``analyze``'s defaults,
    then for timed GPU work the breakdown, gaps and summary, ``ranks`` for several inputs or
    GPUs and ``diff`` for two inputs; for CPU samples nothing more (the flame graph is drawn
    from the events); for anything else the summary. Analyzers not installed are left out."""
    from tracekit.plugins.diagnosis import device_timelines
    from tracekit.toolkit import default_analyzers, trace_kind

    kind = trace_kind(trace)
    names = default_analyzers(kind, registry)
    timelines = device_timelines(trace)
    extra: tuple[str, ...] = ()
    if timelines:
        extra = TIMELINE
        if len(trace.sources) > 1 or len(timelines) > 1:
            extra += SEVERAL
        if len(trace.sources) == 2:
            extra += TWO
    elif str(kind) != "cpu-samples":
        extra = OTHER
    return names + [n for n in extra if n in registry.analyzers and n not in names]


def route(pairs: Sequence[str], classes: Sequence[type[Any]]) -> tuple[list[str],
                                                                        dict[str, list[str]]]:
    """Split ``-O`` pairs between the reader and the analyzers: a plain key (or
    ``analyzer.key``) goes to every analyzer that declares it, so that ``window=2s:5s``
    windows the whole page; ``NAME.key`` to analyzer NAME; anything else to the reader."""
    per: dict[str, list[str]] = {c.name: [] for c in classes}
    reader: list[str] = []
    for pair in pairs:
        key, _, value = pair.partition("=")
        prefix, dot, bare = key.partition(".")
        if dot and prefix in per:
            per[prefix].append(pair)
            continue
        if dot and prefix != "analyzer":
            reader.append(pair)
            continue
        name = (bare if dot else key).replace("-", "_")
        targets = [c.name for c in classes
                   if name in {f.name for f in dataclasses.fields(c.Options)}]
        for target in targets:
            per[target].append(f"{name}={value}")
        if not targets:
            reader.append(pair)
    return reader, per


def build_report(inputs: Sequence[Path], *, analyzers: Sequence[str] = (),
                 from_: str | None = None, options: Sequence[str] = (),
                 output: Path | None = None, force: bool = False,
                 registry: Registry | None = None,
                 progress: Any = None) -> tuple[Trace, list[Report], bytes]:
    """Read ``inputs``, run :func:`report_analyzers` (and ``analyzers``), render the page.

    ``output``, where the page will go, is checked before anything is read (exists without
    ``force``, or is one of the inputs). Return the trace, the reports and the page.
    """
    import tracekit
    from tracekit import OptionError
    from tracekit.plugins.html_report.assets import check_plotly
    from tracekit.toolkit import NO_PROGRESS, default_registry, preflight

    check_plotly()
    progress = progress or NO_PROGRESS
    registry = registry or default_registry()
    asked = [registry.get("analyzer", n) for n in analyzers]
    reader_cls = registry.get("reader", from_) if from_ else None
    reader_opts, per = route(options, sorted(registry.analyzers.values(), key=lambda c: c.name))
    if output is not None:
        preflight(output, force=force, inputs=list(inputs))
    progress.phase("reading")
    # A comparison (diff) keeps its inputs apart, even captures of one process.
    trace = tracekit.read(list(inputs), format=reader_cls or from_, options=reader_opts,
                          registry=registry, progress=progress,
                          join_captures=not any(c.compares_inputs for c in asked))
    names = report_analyzers(trace, registry)
    names += [c.name for c in asked if c.name not in names]
    unused = [p for n, pairs in per.items() if n not in names for p in pairs
              if not any(p in per[m] for m in names)]
    if unused:
        raise OptionError(f"option {unused[0].partition('=')[0]!r}: no analyzer of this report "
                          f"takes it (it runs {', '.join(names)})")
    progress.phase("analyzing")
    reports = [r for n in names for r in tracekit.analyze(trace, n, options=per.get(n, []),
                                                          registry=registry)]
    progress.phase("writing the page")
    page = render_scoped(trace, reports, [str(p) for p in inputs], options, registry)
    return trace, reports, page


def render_scoped(trace: Trace | None, reports: Sequence[Report], inputs: Sequence[str],
                  options: Sequence[str], registry: Registry | None = None) -> bytes:
    """:func:`render_html`, the plots drawn from the events cut to the window or steps that
    ``options`` (``-O window=2s:5s``, ``-O bottleneck.steps=3:5``) gave the analyzers, so
    that they show what the analyzers saw; the header names the window."""
    from tracekit.plugins.html_report.page import render_html

    scope = {k.rpartition(".")[2]: v for k, v in (p.partition("=")[::2] for p in options)
             if k.rpartition(".")[2] in ("window", "steps") and v}
    view = trace
    if scope and trace is not None:
        from tracekit.toolkit import restrict

        view = restrict(trace, scope.get("window", ""), scope.get("steps", ""))
    return render_html(view, reports, inputs, registry=registry,
                       scope=", ".join(f"{k} {v}" for k, v in scope.items()))


def report(
    inputs: Annotated[list[Path], typer.Argument(
        help="Input trace files or folders; several inputs are compared (ranks, diff).",
        show_default=False)],
    output: Annotated[Path, typer.Option("-o", "--output",
                                         help="The HTML file to write; - writes standard "
                                              "output.")],
    analyzer: Annotated[list[str], typer.Option(
        "-a", "--analyzer", help="Another analyzer to add to the page (repeatable).")] = [],  # noqa: B006
    from_: Annotated[str | None, typer.Option("--from",
                                              help="Input format (default: detect).")] = None,
    option: Annotated[list[str], typer.Option(
        "-O", "--option", help="Option key=value for the reader or the analyzers (repeatable; "
        "window=START:END windows every analyzer that has it).")] = [],  # noqa: B006
    force: Annotated[bool, typer.Option("--force", "-f",
                                        help="Replace an existing output.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress, no summary.")] = False,
) -> None:
    """Write an HTML report with plots: verdict, breakdown, timeline, top kernels, flame graph.

    One self-contained file (plotly.js inlined): it opens offline in any browser.
    """
    from tracekit.toolkit import Progress, write_bytes

    started = time.monotonic()
    with Progress(enabled=False if quiet else None) as progress:
        _, reports, page = build_report(inputs, analyzers=analyzer, from_=from_,
                                        options=option, output=output, force=force,
                                        progress=progress)
    write_bytes(output, page, force=force)
    if not quiet and str(output) != "-":
        typer.echo(f"wrote {output} in {time.monotonic() - started:.1f}s: {len(page) / 1e6:.1f} "
                   f"MB, {len(reports)} reports ({', '.join(r.analyzer for r in reports)})",
                   err=True)
