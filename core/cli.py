"""The ``tracekit`` command line (typer)."""

from __future__ import annotations

import sys
import time
import traceback
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
from tracekit import __version__
from tracekit.errors import TracekitError
from tracekit.options import addressed_key
from tracekit.pipeline import (
    analyze as run_analyzers,
)
from tracekit.pipeline import (
    annotate,
    default_registry,
    read,
    sniff,
    split_options,
    write,
    writer_for_path,
)
from tracekit.progress import Progress
from tracekit.report import render_text, reports_to_json

DEFAULT_ANALYZERS = ["bottleneck"]
HOST_ONLY_ANALYZERS = ["summary"]
SAMPLE_ANALYZERS = ["hotspots"]


class _Group(typer.core.TyperGroup):
    """Turns every TracekitError, plugin commands' included, into one line and an exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except TracekitError as exc:
            if (ctx.obj or {}).get("debug"):
                traceback.print_exc()
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("error: interrupted", err=True)
            raise typer.Exit(130) from None


app = typer.Typer(
    cls=_Group,
    name="tracekit",
    help="Convert GPU/ML profiler traces to Perfetto and find what a workload is bound by.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tracekit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    ctx.obj = {"debug": debug}


Inputs = Annotated[list[Path], typer.Argument(help="Input trace files.", show_default=False)]
FromOpt = Annotated[str | None, typer.Option("--from", help="Input format (default: detect).")]
OptionsOpt = Annotated[list[str], typer.Option(
    "-O", "--option", help="Component option key=value (repeatable; see 'tracekit formats').")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress and no summary.")]


def _progress(quiet: bool) -> Progress:
    return Progress(enabled=False) if quiet else Progress()


def _say(quiet: bool, message: str) -> None:
    if not quiet:
        typer.echo(message, err=True)


@app.command()
def convert(
    inputs: Inputs,
    output: Annotated[Path, typer.Option("-o", "--output", help="Output file.")],
    from_: FromOpt = None,
    to: Annotated[str | None, typer.Option("--to", help="Output format (default: from the "
                                           "output's extension).")] = None,
    option: OptionsOpt = [],  # noqa: B006 - typer reads the default
    annotate_: Annotated[bool, typer.Option(
        "--annotate", help="Add what the analyzers found as extra tracks (GPU idle gaps, "
        "GPU busy %).")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Convert traces to another format (Perfetto by default for .pftrace)."""
    registry = default_registry()
    writer_cls = registry.get("writer", to) if to else writer_for_path(output, registry)
    reader_cls = registry.get("reader", from_) if from_ else None
    reader_opts, writer_opts = _route(option, reader_cls, writer_cls)
    started = time.monotonic()
    with _progress(quiet) as progress:
        progress.phase("reading")
        trace = read(inputs, format=from_, options=reader_opts, registry=registry,
                     progress=progress)
        if annotate_:
            progress.phase("annotating")
            trace = annotate(trace, registry)
        progress.phase(f"writing {output.name}")
        result = write(trace, output, format=writer_cls, options=writer_opts,
                       registry=registry, progress=progress)
    if quiet:
        return
    written = ", ".join(f"{n:,} {what}" for what, n in result.written.items()) or "nothing"
    _say(quiet, f"wrote {output} in {time.monotonic() - started:.1f}s: {written}")
    for (source, kind, outcome), n in sorted(trace.log.notices().items()):
        if outcome.startswith("warning"):
            _say(quiet, f"warning: {source}: {kind}: {outcome.removeprefix('warning: ')}")
        else:
            _say(quiet, f"warning: {source}: {n:,} {kind} records {outcome}")
    for reason, n in sorted(result.skipped.items()):
        _say(quiet, f"warning: {n:,} events not written: {reason}")


def _route(pairs: list[str], reader_cls: Any, writer_cls: Any) -> tuple[list[str], list[str]]:
    if reader_cls is not None:
        reader_opts, writer_opts = split_options(pairs, [reader_cls, writer_cls])
        return reader_opts, writer_opts
    # The reader is known only after sniffing: what the writer is not addressed by is the
    # reader's (parse_options checks it against the reader found).
    to_writer = [p for p in pairs if addressed_key(writer_cls, p.partition("=")[0])]
    return [p for p in pairs if p not in to_writer], split_options(to_writer, [writer_cls])[0]


class OutputFormat(StrEnum):
    text = "text"
    json = "json"


@app.command()
def analyze(
    inputs: Inputs,
    analyzer: Annotated[list[str], typer.Option(
        "-a", "--analyzer", help="Analyzer to run (repeatable; default: bottleneck).")] = [],  # noqa: B006
    format: Annotated[OutputFormat, typer.Option("--format", "-f",
                                                 help="Report format.")] = OutputFormat.text,
    output: Annotated[Path | None, typer.Option("-o", "--output",
                                                help="Write the report to a file.")] = None,
    from_: FromOpt = None,
    option: OptionsOpt = [],  # noqa: B006
    quiet: QuietOpt = False,
) -> None:
    """Analyze traces and report what they show."""
    registry = default_registry()
    names = analyzer or DEFAULT_ANALYZERS
    with _progress(quiet) as progress:
        progress.phase("reading")
        trace = read(inputs, format=from_, registry=registry, progress=progress)
        progress.phase("analyzing")
        reports = run_analyzers(trace, names, options=option, registry=registry)
        if not analyzer and _nothing_to_diagnose(reports):
            # A host-only trace has no verdict to give; its summary (and, with CPU samples,
            # its hotspots) is what there is to show.
            extra = HOST_ONLY_ANALYZERS + (SAMPLE_ANALYZERS if _has_samples(trace) else [])
            reports += run_analyzers(trace, extra, registry=registry)
    if format is OutputFormat.json:
        data = reports_to_json(reports, [str(p) for p in inputs])
    else:
        data = render_text(reports).encode()
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    from tracekit.atomic import atomic_output

    with atomic_output(output) as stream:
        stream.write(data)
    _say(quiet, f"wrote {output}")


def _has_samples(trace: Any) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    return bool(pc.any(pc.equal(trace.events["kind"].cast(pa.string()), "sample")).as_py())


def _nothing_to_diagnose(reports: list[Any]) -> bool:
    return any(f.evidence.get("verdict") == "none" for r in reports for f in r.findings)


@app.command()
def info(inputs: Inputs, from_: FromOpt = None) -> None:
    """Show what an input holds: format, time span, events per category, devices, processes."""
    import pyarrow.compute as pc
    from tracekit.inputs import Source

    registry = default_registry()
    for path in inputs:
        ranked = sniff(Source(path), registry) if from_ is None else [(1.0, from_)]
        trace = read(path, format=from_, registry=registry)
        ev = trace.events
        typer.echo(f"{path}")
        typer.echo(f"  format     {ranked[0][1]} (confidence {ranked[0][0]:.2f})")
        meta = trace.metadata["sources"][trace.sources[0]]
        for key in ("tool", "tool_version", "clock"):
            if meta.get(key):
                typer.echo(f"  {key:<10} {meta[key]}")
        timed = ev.filter(pc.is_valid(ev["ts_ns"]))
        if timed.num_rows:
            start = pc.min(timed["ts_ns"]).as_py()
            end = pc.max(pc.add(timed["ts_ns"], pc.fill_null(timed["dur_ns"], 0))).as_py()
            typer.echo(f"  time span  {(end - start) / 1e6:,.3f} ms "
                       f"(from {start:,} to {end:,} ns)")
        typer.echo(f"  events     {ev.num_rows:,}")
        counts = ev.group_by(["category", "kind"]).aggregate([("name", "count")])
        for row in sorted(counts.to_pylist(), key=lambda r: (r["category"], r["kind"])):
            typer.echo(f"    {row['category']:<18} {row['kind']:<8} {row['name_count']:>10,}")
        for d in trace.devices.to_pylist():
            typer.echo(f"  device {d['device']}: {d['name'] or '?'}")
        for p in trace.processes.to_pylist():
            rank = f" rank {p['rank']}" if p["rank"] is not None else ""
            typer.echo(f"  process {p['pid']}: {p['name'] or '?'}{rank}")
        typer.echo("  input records:")
        for (_, kind, outcome), n in sorted(trace.log.outcomes.items()):
            typer.echo(f"    {kind:<28} {n:>10,}  {outcome}")


@app.command()
def formats() -> None:
    """List the readers, writers and analyzers, with their options."""
    from tracekit.options import describe_options

    registry = default_registry()
    for kind, comps in registry.components.items():
        for name, cls in sorted(comps.items()):
            exts = f" [{', '.join(cls.extensions)}]" if getattr(cls, "extensions", ()) else ""
            typer.echo(f"{kind:<9} {name:<14} {cls.description}{exts}")
            for opt, typ, default, help_ in describe_options(cls):
                typer.echo(f"{'':<25}-O {opt}={typ} (default {default!r}) {help_}")


@app.command()
def plugins(
    all_: Annotated[bool, typer.Option("--all", help="Include the built-in plugins.")] = False,
    json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List installed plugins, their components and any load errors."""
    import orjson

    registry = default_registry()
    shown = [p for p in registry.plugins if all_ or not p.builtin]
    if json:
        doc = [{"name": p.name, "distribution": p.dist, "version": p.version, "value": p.value,
                "status": p.status, "error": p.error,
                "components": [f"{k} {n}" for k, n in p.components]} for p in shown]
        typer.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        return
    if not shown:
        typer.echo("no third-party plugins installed (--all lists the built-in ones)")
    for p in shown:
        comps = ", ".join(f"{k} {n}" for k, n in p.components) or "-"
        typer.echo(f"{p.name:<16} {p.dist} {p.version:<8} {p.status:<8} {comps}")
        if p.error:
            typer.echo(f"{'':<16} error: {p.error}")


_commands_registered = False


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code."""
    global _commands_registered
    try:
        registry = default_registry()
    except TracekitError as exc:
        typer.echo(f"error: {exc}", err=True)
        return exc.exit_code
    if not _commands_registered:
        for error in registry.register_commands(app):
            typer.echo(f"warning: {error}", err=True)
        _commands_registered = True
    try:
        app(args=argv, prog_name="tracekit")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
