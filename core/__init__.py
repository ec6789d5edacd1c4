"""tracekit: convert and analyze GPU/ML profiler traces.

The public API, re-exported from the modules that implement it. The modules load on first use
(``tracekit.Trace`` imports the event model, and pyarrow with it), so that ``import tracekit``
and ``tracekit --version`` stay fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "TraceBuilder": "tracekit.builder",
    "AnalysisError": "tracekit.errors",
    "EmptyOutputError": "tracekit.errors",
    "FormatDetectionError": "tracekit.errors",
    "LossyConversionWarning": "tracekit.errors",
    "OptionError": "tracekit.errors",
    "OutputExistsError": "tracekit.errors",
    "PluginConflictError": "tracekit.errors",
    "PluginContractError": "tracekit.errors",
    "PluginError": "tracekit.errors",
    "PluginLoadError": "tracekit.errors",
    "ReaderCrashError": "tracekit.errors",
    "TracekitError": "tracekit.errors",
    "TracekitWarning": "tracekit.errors",
    "TraceReadError": "tracekit.errors",
    "TraceWriteError": "tracekit.errors",
    "UnknownFormatError": "tracekit.errors",
    "UsageError": "tracekit.errors",
    "hookimpl": "tracekit.hookspecs",
    "Source": "tracekit.inputs",
    "Analyzer": "tracekit.interfaces",
    "BatchSink": "tracekit.interfaces",
    "DefaultFor": "tracekit.interfaces",
    "DirectoryWriter": "tracekit.interfaces",
    "NoOptions": "tracekit.interfaces",
    "Reader": "tracekit.interfaces",
    "ReportFormat": "tracekit.interfaces",
    "TraceKind": "tracekit.interfaces",
    "Writer": "tracekit.interfaces",
    "WholeTraceSink": "tracekit.interfaces",
    "WriteResult": "tracekit.interfaces",
    "CATEGORIES": "tracekit.model",
    "EVENTS_SCHEMA": "tracekit.model",
    "SCHEMA_VERSION": "tracekit.model",
    "SCHEMAS": "tracekit.model",
    "ReadLog": "tracekit.model",
    "Trace": "tracekit.model",
    "analyze": "tracekit.pipeline",
    "analyze_inputs": "tracekit.pipeline",
    "convert": "tracekit.pipeline",
    "detect_format": "tracekit.pipeline",
    "read": "tracekit.pipeline",
    "write": "tracekit.pipeline",
    "Registry": "tracekit.registry",
    "load_registry": "tracekit.registry",
    "describe": "tracekit.overview",
    "Finding": "tracekit.report",
    "Report": "tracekit.report",
}

if TYPE_CHECKING:
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
        BatchSink,
        DefaultFor,
        DirectoryWriter,
        NoOptions,
        Reader,
        ReportFormat,
        TraceKind,
        WholeTraceSink,
        Writer,
        WriteResult,
    )
    from tracekit.model import CATEGORIES, EVENTS_SCHEMA, SCHEMA_VERSION, SCHEMAS, ReadLog, Trace
    from tracekit.overview import describe
    from tracekit.pipeline import analyze, analyze_inputs, convert, detect_format, read, write
    from tracekit.registry import Registry, load_registry
    from tracekit.report import Finding, Report


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tracekit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "CATEGORIES",
    "EVENTS_SCHEMA",
    "SCHEMAS",
    "SCHEMA_VERSION",
    "AnalysisError",
    "Analyzer",
    "BatchSink",
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
    "ReportFormat",
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
    "WholeTraceSink",
    "WriteResult",
    "Writer",
    "__version__",
    "analyze",
    "analyze_inputs",
    "convert",
    "describe",
    "detect_format",
    "hookimpl",
    "load_registry",
    "read",
    "write",
]
