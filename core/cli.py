"""The ``tracekit`` command line (typer)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from tracekit import __version__
from tracekit.exits import OneLineErrors, run

if TYPE_CHECKING:
    from tracekit.progress import Progress

app = typer.Typer(
    cls=OneLineErrors,
    name="tracekit",
    help="Convert GPU/ML profiler traces to Perfetto and find what a workload is bound by.",
    # Plugins' commands are not listed here: that would load every plugin (a second) for help.
    epilog="Plugins add commands of their own, such as 'tracekit report' (an HTML report, "
           "built in): 'tracekit plugins --all' lists them.",
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


def _start(warn: bool = True) -> None:
    """What every built-in command that reads traces or plugins does first: load the plugins,
    sparing pyarrow its pandas import when all of them are tracekit's own, and (``warn``) say
    on stderr which plugins failed to load."""
    from tracekit.pipeline import default_registry

    registry = default_registry(spare_pandas=True)
    for plugin in registry.plugins if warn else ():
        if plugin.error:  # its components are missing: a default analyzer may be one of them
            typer.echo(f"tracekit: warning: plugin '{plugin.name}' failed to load: "
                       f"{plugin.error} ('tracekit plugins' lists the plugins; "
                       "TRACEKIT_DISABLE_PLUGINS skips one)", err=True)


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
    _start()
    from tracekit.frontend import convert_summary
    from tracekit.pipeline import convert as run_convert

    started = time.monotonic()
    with _progress(quiet) as progress:
        trace, result = run_convert(inputs, output, from_=from_, to=to, options=option,
                                    annotations=annotate_, force=force, progress=progress,
                                    stream=True)
    if not quiet:
        _echo(convert_summary(trace, result, output, time.monotonic() - started), err=True)
        if (named := _extension_disagrees(output, to)) is not None:
            _echo([f"warning: {output}: written as {to} (--to), though its name says "
                   f"{named}"], err=True)


def _extension_disagrees(output: Path, to: str | None) -> str | None:
    """The writer an output's extension names where --to chose another; None otherwise."""
    from tracekit.errors import UsageError
    from tracekit.pipeline import default_registry, writer_for_path

    if to is None or str(output) == "-":
        return None
    try:
        named = writer_for_path(output, default_registry())
    except UsageError:  # a name that says no format
        return None
    return None if named is default_registry().get("writer", to) else named.name


@app.command()
def analyze(
    inputs: Inputs,
    analyzer: Annotated[list[str], typer.Option(
        "-a", "--analyzer", help="Analyzer to run (repeatable; default: the verdict, and for a "
        "trace without GPU work a CPU report).")] = [],  # noqa: B006
    format: Annotated[str | None, typer.Option(
        "--format", help="Report format: text, json, csv (one table), or one a plugin adds "
        "('tracekit formats' lists them); default: the one -o's extension names (.json, "
        ".csv, .html), else text.", show_default=False)] = None,
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
        "--jobs", "-j", min=1, help="Tasks at once with --engine (default: one per CPU).")
    ] = None,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", help="A running Dask scheduler to use (tcp://host:8786).")] = None,
    table: Annotated[str | None, typer.Option(
        "--table", help="With --format csv: the report table to write (e.g. kernels).")] = None,
) -> None:
    """Analyze traces and report what they show."""
    _start()
    from tracekit.frontend import analyze_report

    with _progress(quiet) as progress:
        done = analyze_report(inputs, analyzer, format=format, table=table, from_=from_,
                              options=option, output=output, force=force, engine=engine,
                              jobs=jobs, scheduler=scheduler, progress=progress)
    said = done.write(output, force=force)
    _echo([] if quiet else [*done.notices(), *said], err=True)


@app.command()
def info(inputs: Inputs, from_: FromOpt = None) -> None:
    """Show what an input holds: format, time span, events per category, devices, processes."""
    _start()
    from tracekit.overview import describe
    from tracekit.pipeline import expand_inputs

    run = expand_inputs(inputs, format=from_)  # a run folder: each trace in it
    _echo([line for path in run.paths for line in describe(path, format=from_).lines()])
    _echo(run.notes(), err=True)


@app.command()
def formats() -> None:
    """List the readers, writers and analyzers, with their options."""
    _start()
    from tracekit.overview import components

    _echo([line for component in components() for line in component.lines()])


@app.command()
def plugins(
    all_: Annotated[bool, typer.Option("--all", help="Include the built-in plugins.")] = False,
    json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List installed plugins, their components, the commands they add and load errors."""
    _start(warn=False)  # the listing gives the errors
    from tracekit.frontend import plugins_listing

    _echo(plugins_listing(all_, json))


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in args if not a.startswith("-")), None)
    if command is not None and command not in _BUILTIN:
        # Perhaps a plugin's command: only then are the plugins loaded before the command
        # line is parsed, so that --version and --help import neither them nor pyarrow.
        from tracekit.frontend import plugin_commands

        lines, code = plugin_commands(app)
        _echo(lines, err=True)
        if code:
            return code
    return run(app, args)


_BUILTIN = {c.callback.__name__ for c in app.registered_commands if c.callback}
