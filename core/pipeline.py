"""The library API: sniff and read inputs, write outputs, run analyzers."""

from __future__ import annotations

import dataclasses
import gzip
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from tracekit.atomic import atomic_directory, atomic_output
from tracekit.builder import TraceBuilder
from tracekit.errors import (
    AnalysisError,
    FormatDetectionError,
    OptionError,
    ReaderCrashError,
    TracekitError,
    TraceReadError,
    TraceWriteError,
    UsageError,
)
from tracekit.inputs import Source
from tracekit.interfaces import Analyzer, DirectoryWriter, Reader, Writer, WriteResult
from tracekit.model import EVENTS_SCHEMA, Trace, concat_traces
from tracekit.options import addressed_key, parse_options
from tracekit.progress import NO_PROGRESS, Progress
from tracekit.registry import Registry, load_registry
from tracekit.report import Report

_default_registry: Registry | None = None


def default_registry() -> Registry:
    """Return the process-wide registry, loading plugins on first use."""
    global _default_registry
    if _default_registry is None:
        _default_registry = load_registry()
    return _default_registry


def sniff(source: Source, registry: Registry | None = None) -> list[tuple[float, str]]:
    """Return (weight, reader name) for every reader, best first."""
    registry = registry or default_registry()
    weights = []
    for name, cls in registry.readers.items():
        if ("reader", name) in registry.conflicts:
            continue
        try:
            weight = float(cls.sniff(source))
        except Exception:  # a reader's sniff must not take the others down
            weight = 0.0
        weights.append((weight, name))
    return sorted(weights, key=lambda wn: (-wn[0], wn[1]))


def detect_format(source: Source, registry: Registry | None = None) -> type[Reader]:
    """Return the reader class that recognises ``source`` best."""
    registry = registry or default_registry()
    ranked = sniff(source, registry)
    if not ranked or ranked[0][0] <= 0:
        what = "directory" if source.is_dir else "file"
        raise FormatDetectionError(f"{source.path}: no reader recognises this {what}; "
                                   "pass --from FORMAT (see 'tracekit formats')")
    if len(ranked) > 1 and ranked[1][0] == ranked[0][0]:
        tied = ", ".join(f"{n} ({w:.2f})" for w, n in ranked if w == ranked[0][0])
        raise FormatDetectionError(f"{source.path}: several readers recognise this file "
                                   f"equally well: {tied}; pass --from FORMAT")
    return registry.readers[ranked[0][1]]


def split_options(pairs: Sequence[str], components: Sequence[type[Any]]) -> list[list[str]]:
    """Route ``key=value`` pairs to the components that declare each key.

    ``reader.key=value`` (or ``writer.``/``analyzer.``/``<name>.``) picks one explicitly.
    """
    routed: list[list[str]] = [[] for _ in components]
    for pair in pairs:
        key, _, value = pair.partition("=")
        addressed = [(i, a) for i, c in enumerate(components)
                     if (a := addressed_key(c, key)) is not None]
        explicit = [(i, a) for i, a in addressed if a[1]]
        chosen = explicit or addressed
        targets = [i for i, _ in chosen]
        if chosen:
            key = chosen[0][1][0]
        if not targets:
            valid = sorted({f"{c.kind}.{f.name}" for c in components
                            for f in dataclasses.fields(c.Options)})
            raise OptionError(f"unknown option '{key}' (valid: {', '.join(valid) or 'none'})")
        if len(targets) > 1:
            raise OptionError(f"option '{key}' is ambiguous; write "
                              + " or ".join(f"{components[i].kind}.{key}" for i in targets))
        routed[targets[0]].append(f"{key}={value}")
    return routed


def _resolve(registry: Registry, kind: str, format: str | type[Any] | None,
             default: Callable[[], type[Any]]) -> type[Any]:
    """A component class from a name, a class, or (None) the default lookup."""
    if format is None:
        return default()
    if isinstance(format, str):
        return registry.get(kind, format)
    return format


def _options(cls: type[Any], options: Iterable[str] | Any) -> Any:
    """Options given as an Options instance, or as key=value strings to parse."""
    return options if dataclasses.is_dataclass(options) else parse_options(cls, options)


def read_one(path: str | Path, *, format: str | type[Reader] | None = None,
             options: Iterable[str] | Any = (), registry: Registry | None = None,
             progress: Progress = NO_PROGRESS) -> Trace:
    """Read one input file into a Trace."""
    registry = registry or default_registry()
    source = Source(path)
    reader_cls = _resolve(registry, "reader", format, lambda: detect_format(source, registry))
    reader = reader_cls(_options(reader_cls, options))
    out = TraceBuilder(source.name, reader_cls.name)
    out.progress = progress  # type: ignore[attr-defined]
    try:
        reader.read(source, out)
        return out.build()
    except TracekitError:
        raise
    except MemoryError as exc:
        raise TraceReadError("out of memory while reading", path=path,
                             reader=reader_cls.name) from exc
    except Exception as exc:  # a reader bug on odd input must still give one clear line
        raise ReaderCrashError(f"reader '{reader_cls.name}' failed: {type(exc).__name__}: "
                               f"{exc}", path=path, reader=reader_cls.name) from exc


def read(paths: str | Path | Sequence[str | Path], *, format: str | type[Reader] | None = None,
         options: Iterable[str] = (), registry: Registry | None = None,
         progress: Progress = NO_PROGRESS) -> Trace:
    """Read one or several inputs into one Trace; each row keeps its ``source``.

    Examples
    --------
    >>> trace = read("fixtures/torch-cpu/mlp_cpu.pt.trace.json.gz")  # doctest: +SKIP
    >>> trace.events.num_rows  # doctest: +SKIP
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    options = list(options)
    traces = [read_one(p, format=format, options=options, registry=registry, progress=progress)
              for p in paths]
    names = [s for t in traces for s in t.sources]
    if len(set(names)) != len(names):
        raise UsageError("two inputs have the same file name; rename one so that their "
                         "events stay apart")
    return concat_traces(traces)


def writer_for_path(path: str | Path, registry: Registry | None = None) -> type[Writer]:
    """Return the writer whose extension matches ``path`` (longest match wins)."""
    registry = registry or default_registry()
    name = Path(path).name.lower()
    best: tuple[int, type[Writer]] | None = None
    for cls in registry.writers.values():
        for ext in cls.extensions:
            if name.endswith(ext) and (best is None or len(ext) > best[0]):
                best = (len(ext), cls)
    if best is None:
        known = ", ".join(f"{n} ({', '.join(c.extensions)})" for n, c in registry.writers.items())
        raise UsageError(f"cannot tell the output format from '{Path(path).name}'; "
                         f"pass --to FORMAT (known: {known})")
    return best[1]


def write(trace: Trace, path: str | Path, *, format: str | type[Writer] | None = None,
          options: Iterable[str] | Any = (), registry: Registry | None = None,
          progress: Progress = NO_PROGRESS) -> WriteResult:
    """Write ``trace`` to ``path`` atomically; return what was written and skipped."""
    registry = registry or default_registry()
    writer_cls = _resolve(registry, "writer", format, lambda: writer_for_path(path, registry))
    writer = writer_cls(_options(writer_cls, options))
    writer.progress = progress  # type: ignore[attr-defined]
    try:
        if isinstance(writer, DirectoryWriter):
            with atomic_directory(path) as directory:
                return writer.write(trace, directory)
        with atomic_output(path) as stream:
            if str(path).lower().endswith(".gz"):
                with gzip.GzipFile(fileobj=stream, mode="wb", compresslevel=6, mtime=0) as gz:
                    return writer.write(trace, gz)
            return writer.write(trace, stream)
    except TracekitError:
        raise
    except OSError as exc:
        raise TraceWriteError(f"{path}: {exc.strerror or exc}") from exc
    except Exception as exc:
        raise TraceWriteError(f"{path}: writer '{writer_cls.name}' failed: "
                              f"{type(exc).__name__}: {exc}") from exc


def annotate(trace: Trace, registry: Registry | None = None) -> Trace:
    """``trace`` with the annotation rows of every analyzer that provides them (each with
    its default options): what ``convert --annotate`` draws on the timeline."""
    registry = registry or default_registry()
    tables = [trace.events]
    for cls in registry.analyzers.values():
        if cls.annotations is Analyzer.annotations:
            continue
        try:
            rows = cls(cls.Options()).annotations(trace)
        except TracekitError:
            raise
        except Exception as exc:
            raise AnalysisError(f"analyzer '{cls.name}' failed to annotate: "
                                f"{type(exc).__name__}: {exc}") from exc
        if rows is not None and rows.num_rows:
            tables.append(_conform(rows, cls.name))
    if len(tables) == 1:
        return trace
    events = pa.concat_tables(tables, promote_options="permissive").unify_dictionaries()
    return dataclasses.replace(trace, events=events.combine_chunks())


def _conform(rows: pa.Table, analyzer: str) -> pa.Table:
    """Annotation rows with every column of the event schema, in its types."""
    unknown = set(rows.column_names) - set(EVENTS_SCHEMA.names)
    if unknown:
        raise AnalysisError(f"analyzer '{analyzer}' annotated with columns not in the event "
                            f"schema: {', '.join(sorted(unknown))}")
    columns = [rows[f.name].cast(f.type) if f.name in rows.column_names
               else pa.nulls(rows.num_rows, f.type) for f in EVENTS_SCHEMA]
    return pa.Table.from_arrays(columns, schema=EVENTS_SCHEMA)


def analyze(trace: Trace, names: str | Sequence[str], *, options: Iterable[str] = (),
            registry: Registry | None = None) -> list[Report]:
    """Run the named analyzers on ``trace``; ``options`` are routed by key."""
    registry = registry or default_registry()
    if isinstance(names, str):
        names = [names]
    classes: list[type[Analyzer]] = [registry.get("analyzer", n) for n in names]
    routed = split_options(list(options), classes) if options else [[] for _ in classes]
    reports = []
    for cls, opts in zip(classes, routed, strict=True):
        analyzer = cls(parse_options(cls, opts))
        try:
            reports.append(analyzer.analyze(trace))
        except TracekitError:
            raise
        except Exception as exc:
            raise AnalysisError(f"analyzer '{cls.name}' failed: {type(exc).__name__}: {exc}") \
                from exc
    return reports
