"""The ``tracekit`` command line (typer)."""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core
from tracekit import __version__
from tracekit.errors import TracekitError

if TYPE_CHECKING:
    from tracekit.progress import Progress

# The built-in commands. Anything else on the command line may be a plugin's command: only
# then are the plugins loaded before parsing (see main), so --version and --help import
# neither the plugins nor pyarrow.
COMMANDS = ("convert", "analyze", "info", "formats", "plugins")


class _Terminated(BaseException):
    """Raised by the SIGTERM handler so that outputs being written are cleaned up."""


def _terminate(signum: int, frame: Any) -> None:
    raise _Terminated


class _Group(typer.core.TyperGroup):
    """Turns every TracekitError, plugin commands' included, into one line and an exit code;
    SIGINT and SIGTERM unwind (removing temporary outputs) and exit 130 and 143."""

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
        except _Terminated:
            typer.echo("error: terminated", err=True)
            raise typer.Exit(143) from None
        except BrokenPipeError:
            # The reader of our standard output went away (``| head``): stop quietly.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(141) from None


app = typer.Typer(
    cls=_Group,
    name="tracekit",
    help="Convert GPU/ML profiler traces to Perfetto and find what a workload is bound by.",
    epilog="Plugins may add commands of their own: 'tracekit plugins' lists them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rendering with rich would double the start-up time
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


Inputs = Annotated[list[Path], typer.Argument(
    help="Input trace files or folders; - reads standard input.", show_default=False)]
FromOpt = Annotated[str | None, typer.Option("--from", help="Input format (default: detect).")]
OptionsOpt = Annotated[list[str], typer.Option(
    "-O", "--option", help="Component option key=value (repeatable; see 'tracekit formats').")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress and no summary.")]
ForceOpt = Annotated[bool, typer.Option("--force", "-f", help="Replace an existing output.")]


def _progress(quiet: bool) -> Progress:
    from tracekit.progress import Progress

    return Progress(enabled=False) if quiet else Progress()


def _say(quiet: bool, message: str) -> None:
    if not quiet:
        typer.echo(message, err=True)


@app.command()
def convert(
    inputs: Inputs,
    output: Annotated[Path, typer.Option("-o", "--output",
                                         help="Output file; - writes standard output.")],
    from_: FromOpt = None,
    to: Annotated[str | None, typer.Option("--to", help="Output format (default: from the "
                                           "output's extension).")] = None,
    option: OptionsOpt = [],  # noqa: B006 - typer reads the default
    annotate_: Annotated[bool, typer.Option(
        "--annotate", help="Add what the analyzers found as extra tracks (GPU idle gaps, "
        "GPU busy %).")] = False,
    force: ForceOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Convert traces to another format (Perfetto by default for .pftrace)."""
    from tracekit.pipeline import convert as run_convert
    from tracekit.pipeline import default_registry

    started = time.monotonic()
    with _progress(quiet) as progress:
        trace, result = run_convert(inputs, output, from_=from_, to=to, options=option,
                                    annotations=annotate_, force=force,
                                    registry=default_registry(), progress=progress)
    if quiet:
        return
    written = ", ".join(f"{n:,} {what}" for what, n in result.written.items()) or "nothing"
    where = "standard output" if str(output) == "-" else str(output)
    _say(quiet, f"wrote {where} in {time.monotonic() - started:.1f}s: {written}")
    for (source, kind, outcome), n in sorted(trace.log.notices().items()):
        if outcome.startswith("warning"):
            _say(quiet, f"warning: {source}: {kind}: {outcome.removeprefix('warning: ')}")
        else:
            _say(quiet, f"warning: {source}: {n:,} {kind} records {outcome}")
    for reason, n in sorted(result.skipped.items()):
        _say(quiet, f"warning: {n:,} events not written: {reason}")


class OutputFormat(StrEnum):
    text = "text"
    json = "json"


@app.command()
def analyze(
    inputs: Inputs,
    analyzer: Annotated[list[str], typer.Option(
        "-a", "--analyzer", help="Analyzer to run (repeatable; default: the verdict, and for a "
        "trace without GPU work a CPU report).")] = [],  # noqa: B006
    format: Annotated[OutputFormat, typer.Option("--format",
                                                 help="Report format.")] = OutputFormat.text,
    output: Annotated[Path | None, typer.Option("-o", "--output",
                                                help="Write the report to a file.")] = None,
    from_: FromOpt = None,
    option: OptionsOpt = [],  # noqa: B006
    force: ForceOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Analyze traces and report what they show."""
    from tracekit.defaults import default_candidates
    from tracekit.outputs import check_not_input, open_output, preflight
    from tracekit.pipeline import analyze as run_analyzers
    from tracekit.pipeline import default_registry, read, route_options
    from tracekit.report import render_text, reports_to_json

    registry = default_registry()
    chosen = [registry.get("analyzer", n) for n in analyzer] if analyzer \
        else default_candidates(registry)
    reader_cls = registry.get("reader", from_) if from_ else None
    reader_opts, analyzer_opts = route_options(option, reader_cls, chosen)
    if output is not None:
        check_not_input(preflight(output, force=force), list(inputs))
    with _progress(quiet) as progress:
        progress.phase("reading")
        trace = read(inputs, format=from_, options=reader_opts, registry=registry,
                     progress=progress)
        progress.phase("analyzing")
        reports = run_analyzers(trace, analyzer or None, options=analyzer_opts,
                                registry=registry)
    if format is OutputFormat.json:
        data = reports_to_json(reports, [str(p) for p in inputs])
    else:
        data = render_text(reports).encode()
    with open_output(output if output is not None else "-", force=force) as stream:
        stream.write(data)
    if output is not None and str(output) != "-":
        _say(quiet, f"wrote {output}")


@app.command()
def info(inputs: Inputs, from_: FromOpt = None) -> None:
    """Show what an input holds: format, time span, events per category, devices, processes."""
    import pyarrow.compute as pc
    from tracekit.inputs import Source
    from tracekit.pipeline import default_registry, read, sniff

    registry = default_registry()
    for path in inputs:
        sniffed = from_ is None and str(path) != "-"
        ranked = sniff(Source(path), registry) if sniffed else []
        trace = read(path, format=from_, registry=registry)
        ev = trace.events
        meta = trace.metadata.get("sources", {}).get(trace.sources[0], {}) \
            if trace.sources else {}
        typer.echo(f"{path}")
        if ranked:
            typer.echo(f"  format     {ranked[0][1]} (confidence {ranked[0][0]:.2f})")
        else:
            typer.echo(f"  format     {meta.get('reader') or from_}")
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
    from tracekit.pipeline import default_registry

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
    from tracekit.pipeline import default_registry

    registry = default_registry()
    if not _commands_registered:  # learn the plugins' commands on an app of their own
        registry.register_commands(typer.Typer())
    shown = [p for p in registry.plugins if all_ or not p.builtin]
    if json:
        doc = [{"name": p.name, "distribution": p.dist, "version": p.version, "value": p.value,
                "status": p.status, "error": p.error,
                "components": [f"{k} {n}" for k, n in p.components],
                "commands": p.commands} for p in shown]
        typer.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        return
    if not shown:
        typer.echo("no third-party plugins installed (--all lists the built-in ones)")
    for p in shown:
        comps = ", ".join([*(f"{k} {n}" for k, n in p.components),
                           *(f"command {c}" for c in p.commands)]) or "-"
        typer.echo(f"{p.name:<16} {p.dist} {p.version:<8} {p.status:<8} {comps}")
        if p.error:
            typer.echo(f"{'':<16} error: {p.error}")


_commands_registered = False


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code."""
    global _commands_registered
    args = sys.argv[1:] if argv is None else list(argv)
    if not _commands_registered and _may_be_plugin_command(args):
        from tracekit.pipeline import default_registry

        try:
            registry = default_registry()
        except TracekitError as exc:
            typer.echo(f"error: {exc}", err=True)
            return exc.exit_code
        for error in registry.register_commands(app):
            typer.echo(f"warning: {error}", err=True)
        _commands_registered = True
    previous = _on_sigterm(_terminate)
    try:
        app(args=args, prog_name="tracekit")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        _on_sigterm(previous)
    return 0


def _may_be_plugin_command(args: list[str]) -> bool:
    """Whether the command named in ``args`` is not a built-in one (options come first)."""
    command = next((a for a in args if not a.startswith("-")), None)
    return command is not None and command not in COMMANDS


def _on_sigterm(handler: Any) -> Any:
    """Install ``handler`` for SIGTERM where that is possible (the main thread only)."""
    try:
        return signal.signal(signal.SIGTERM, handler)
    except (ValueError, TypeError):  # not the main thread, or no previous Python handler
        return None
