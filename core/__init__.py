"""tracekit: convert and analyze GPU/ML profiler traces.

The public API, re-exported from the modules that implement it.
"""

from __future__ import annotations

from tracekit.builder import TraceBuilder
from tracekit.errors import (
    AnalysisError,
    EmptyOutputError,
    FormatDetectionError,
    LossyConversionWarning,
    OptionError,
    OutputExistsError,
    PluginConflictError,
    PluginContractError,
    PluginError,
    PluginLoadError,
    ReaderCrashError,
    TracekitError,
    TracekitWarning,
    TraceReadError,
    TraceWriteError,
    UnknownFormatError,
    UsageError,
)
from tracekit.hookspecs import hookimpl
from tracekit.inputs import Source
from tracekit.interfaces import (
    Analyzer,
    DefaultFor,
    DirectoryWriter,
    NoOptions,
    Reader,
    TraceKind,
    Writer,
    WriteResult,
)
from tracekit.model import CATEGORIES, EVENTS_SCHEMA, SCHEMA_VERSION, SCHEMAS, ReadLog, Trace
from tracekit.pipeline import analyze, convert, detect_format, read, write
from tracekit.registry import Registry, load_registry
from tracekit.report import Finding, Report

__version__ = "0.1.0"

__all__ = [
    "CATEGORIES",
    "EVENTS_SCHEMA",
    "SCHEMAS",
    "SCHEMA_VERSION",
    "AnalysisError",
    "Analyzer",
    "DefaultFor",
    "DirectoryWriter",
    "EmptyOutputError",
    "Finding",
    "FormatDetectionError",
    "LossyConversionWarning",
    "NoOptions",
    "OptionError",
    "OutputExistsError",
    "PluginConflictError",
    "PluginContractError",
    "PluginError",
    "PluginLoadError",
    "ReadLog",
    "Reader",
    "ReaderCrashError",
    "Registry",
    "Report",
    "Source",
    "Trace",
    "TraceBuilder",
    "TraceKind",
    "TraceReadError",
    "TraceWriteError",
    "TracekitError",
    "TracekitWarning",
    "UnknownFormatError",
    "UsageError",
    "WriteResult",
    "Writer",
    "__version__",
    "analyze",
    "convert",
    "detect_format",
    "hookimpl",
    "load_registry",
    "read",
    "write",
]
