"""Perfetto traces: the writer (``writer``) and the reader (``reader``), registered here."""

from __future__ import annotations

from typing import Any

import tracekit
from tracekit.plugins.perfetto.writer import PerfettoWriter

__all__ = ["PerfettoWriter"]


@tracekit.hookimpl
def register_writers(register: Any) -> None:
    register(PerfettoWriter)


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    # The reader class is light: it loads the protobuf runtime on its first Perfetto input
    # (read_trace.py), not on every command.
    from tracekit.plugins.perfetto.reader import PerfettoReader

    register(PerfettoReader)
