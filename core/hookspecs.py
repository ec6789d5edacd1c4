"""The hooks a tracekit plugin implements: one registration hook per component kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import typer
    from tracekit.interfaces import Analyzer, Reader, ReportFormat, Writer

PROJECT = "tracekit"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_readers(register: Callable[[type[Reader]], None]) -> None:
    """Register Reader subclasses: call ``register(cls)`` once per class."""


@hookspec
def register_writers(register: Callable[[type[Writer]], None]) -> None:
    """Register Writer subclasses: call ``register(cls)`` once per class."""


@hookspec
def register_analyzers(register: Callable[[type[Analyzer]], None]) -> None:
    """Register Analyzer subclasses: call ``register(cls)`` once per class."""


@hookspec
def register_report_formats(register: Callable[[type[ReportFormat]], None]) -> None:
    """Register ReportFormat subclasses (``analyze --format NAME``): ``register(cls)`` once
    per class."""


@hookspec
def register_commands(app: typer.Typer) -> None:
    """Add sub-commands to the ``tracekit`` CLI with ``@app.command()``."""
