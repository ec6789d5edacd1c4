"""The ``tracekit`` command line (typer)."""

from __future__ import annotations

import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from tracekit import __version__
from tracekit.errors import TracekitError
from tracekit.exits import OneLineErrors, run

if TYPE_CHECKING:
    from tracekit.progress import Progress

app = typer.Typer(
    cls=OneLineErrors,
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

    return Progress(enabled=False if quiet else None)  # None: on a terminal only


def _echo(lines: list[str], err: bool = False) -> None:
    for line in lines:
        typer.echo(line, err=err)


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
    from tracekit.overview import conversion_lines
    from tracekit.pipeline import convert as run_convert

    started = time.monotonic()
    with _progress(quiet) as progress:
        trace, result = run_convert(inputs, output, from_=from_, to=to, options=option,
                                    annotations=annotate_, force=force, progress=progress)
    if not quiet:
        written = ", ".join(f"{n:,} {what}" for what, n in result.written.items()) or "nothing"
        where = "standard output" if str(output) == "-" else str(output)
        _echo([f"wrote {where} in {time.monotonic() - started:.1f}s: {written}",
               *conversion_lines(trace, result)], err=True)


class OutputFormat(StrEnum):
    text = "text"
    json = "json"
    csv = "csv"


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
    engine: Annotated[str | None, typer.Option(
        "--engine", help="Analyze each input in its own task, on 'local' processes or 'dask' "
        "(a local Dask cluster): for runs of many ranks (default analyzer: ranks).")] = None,
    jobs: Annotated[int | None, typer.Option(
        "--jobs", "-j", help="Tasks at once with --engine (default: one per CPU).")] = None,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", help="A running Dask scheduler to use (tcp://host:8786).")] = None,
    table: Annotated[str | None, typer.Option(
        "--table", help="With --format csv: the report table to write (e.g. kernels).")] = None,
) -> None:
    """Analyze traces and report what they show."""
    from tracekit.outputs import open_output
    from tracekit.pipeline import analyze_inputs
    from tracekit.report import render

    with _progress(quiet) as progress:
        if engine or jobs or scheduler:
            reports = _analyze_run(inputs, analyzer, from_, option, output, force,
                                   engine or "local", jobs, scheduler, progress)
        else:
            _, reports = analyze_inputs(inputs, analyzer, from_=from_, options=option,
                                        output=output, force=force, progress=progress)
    data = render(reports, format.value, [str(p) for p in inputs], table=table)
    with open_output(output if output is not None else "-", force=force) as stream:
        stream.write(data)
    if output is not None and str(output) != "-" and not quiet:
        typer.echo(f"wrote {output}", err=True)


def _analyze_run(inputs: list[Path], names: list[str], from_: str | None,
                 options: list[str], output: Path | None, force: bool, engine: str,
                 jobs: int | None, scheduler: str | None, progress: Any) -> list[Any]:
    """``analyze --engine``: one task per input, only the analyzers that combine inputs."""
    from tracekit.engine import analyze_run, combining_defaults
    from tracekit.outputs import check_not_input, preflight

    if output is not None:
        check_not_input(preflight(output, force=force), list(inputs))
    progress.phase(f"analyzing {len(inputs)} inputs")
    return analyze_run(inputs, names or combining_defaults(), from_=from_, options=options,
                       engine=engine, jobs=jobs, scheduler=scheduler)


@app.command()
def info(inputs: Inputs, from_: FromOpt = None) -> None:
    """Show what an input holds: format, time span, events per category, devices, processes."""
    from tracekit.overview import describe

    for path in inputs:
        _echo(describe(path, format=from_).lines())


@app.command()
def formats() -> None:
    """List the readers, writers and analyzers, with their options."""
    from tracekit.overview import components

    for component in components():
        _echo(component.lines())


@app.command()
def plugins(
    all_: Annotated[bool, typer.Option("--all", help="Include the built-in plugins.")] = False,
    json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List installed plugins, their components, the commands they add and load errors."""
    import orjson
    from tracekit.overview import plugin_json, plugin_lines
    from tracekit.overview import plugins as installed

    shown = installed(builtin=all_)
    if json:
        typer.echo(orjson.dumps([plugin_json(p) for p in shown],
                                option=orjson.OPT_INDENT_2).decode())
        return
    if not shown:
        typer.echo("no third-party plugins installed (--all lists the built-in ones)")
    for p in shown:
        _echo(plugin_lines(p))


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code."""
    global _plugin_commands
    args = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in args if not a.startswith("-")), None)
    builtin = {c.callback.__name__ for c in app.registered_commands if c.callback}
    if command is not None and command not in builtin and not _plugin_commands:
        # Perhaps a plugin's command: only then are the plugins loaded before the command
        # line is parsed, so that --version and --help import neither them nor pyarrow.
        from tracekit.pipeline import default_registry

        try:
            errors = default_registry().register_commands(app)
        except TracekitError as exc:
            typer.echo(f"error: {exc}", err=True)
            return exc.exit_code
        _echo([f"warning: {error}" for error in errors], err=True)
        _plugin_commands = True
    return run(app, args)


_plugin_commands = False  # whether the plugins added their commands to ``app``
