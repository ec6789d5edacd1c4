"""The library API: sniff and read inputs, write outputs, run analyzers."""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from tracekit.builder import TraceBuilder
from tracekit.captures import join_captures as join_process_captures
from tracekit.captures import untraced_note
from tracekit.defaults import default_analyzers, default_candidates, trace_kind
from tracekit.errors import (
    AnalysisError,
    EmptyOutputError,
    FormatDetectionError,
    OptionError,
    ReaderCrashError,
    TracekitError,
    TraceReadError,
    TraceWriteError,
    UsageError,
)
from tracekit.inputs import STDIN, Expanded, Source, expand
from tracekit.interfaces import Analyzer, DirectoryWriter, Reader, Writer, WriteResult
from tracekit.memory import release_free_memory
from tracekit.model import EVENTS_SCHEMA, Trace, concat_traces
from tracekit.options import addressed_key, parse_options
from tracekit.outputs import (
    STDIO,
    open_output,
    open_output_directory,
    preflight,
    resolve_output,
    same_file,
)
from tracekit.progress import NO_PROGRESS, Progress
from tracekit.registry import Registry, load_registry
from tracekit.report import Report, format_ns
from tracekit.window import source_spans

_default_registry: Registry | None = None
#: ``Trace.metadata`` key: per run folder read, its files that were not read, with why.
SKIPPED_FILES = "skipped_files"


def default_registry(*, spare_pandas: bool = False) -> Registry:
    """Return the process-wide registry, loading plugins on first use (``spare_pandas``: see
    ``load_registry``; the ``tracekit`` command asks for it)."""
    global _default_registry
    if _default_registry is None:
        _default_registry = load_registry(spare_pandas=spare_pandas)
    return _default_registry


def sniff(source: Source, registry: Registry | None = None) -> list[tuple[float, str]]:
    """Return (weight, reader name) for every reader, best first."""
    registry = registry or default_registry()
    weights = []
    for name, cls in registry.readers.items():
        if ("reader", name) in registry.conflicts:
            continue
        if source.is_stream and not cls.reads_streams:
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
        if source.is_stream and (file_only := _file_only_reader(source, registry)):
            # Usage, as when --from names that reader: the input is fine, not how it came.
            raise UsageError(
                f"{source.path}: this looks like {file_only.description}, which tracekit "
                f"reads from a file only (its reader '{file_only.name}' seeks): save the "
                "stream to a file and give that")
        if source.is_dir and not any(p.is_file() for p in source.path.rglob("*")):
            raise FormatDetectionError(f"{source.path}: the directory holds no files")
        what = "directory" if source.is_dir else "stream" if source.is_stream else "file"
        hint = (" (from a stream only formats that are read front to back: "
                f"{', '.join(_stream_readers(registry))})" if source.is_stream else "")
        raise FormatDetectionError(f"{source.path}: no reader recognises this {what}{hint}; "
                                   "pass --from FORMAT (see 'tracekit formats')")
    if len(ranked) > 1 and ranked[1][0] == ranked[0][0]:
        tied = ", ".join(f"{n} ({w:.2f})" for w, n in ranked if w == ranked[0][0])
        raise FormatDetectionError(f"{source.path}: several readers recognise this file "
                                   f"equally well: {tied}; pass --from FORMAT")
    return registry.readers[ranked[0][1]]


def _file_only_reader(source: Source, registry: Registry) -> type[Reader] | None:
    """The reader that cannot read streams but recognises the stream's head best, if any."""
    best: tuple[float, str] | None = None
    for name, cls in registry.readers.items():
        if cls.reads_streams or ("reader", name) in registry.conflicts:
            continue
        try:
            weight = float(cls.sniff(source))
        except Exception:  # a reader's sniff must not take the others down
            continue
        if weight > 0 and (best is None or weight > best[0]):
            best = (weight, name)
    return registry.readers[best[1]] if best else None


def _stream_readers(registry: Registry) -> list[str]:
    return sorted(n for n, c in registry.readers.items() if c.reads_streams)


def split_options(pairs: Sequence[str], components: Sequence[type[Any]]) -> list[list[str]]:
    """Route ``key=value`` pairs to the components that declare each key.

    ``<name>.key=value`` (or ``reader.``/``writer.``/``analyzer.`` where only one component
    is of that kind) picks one explicitly. A key that several components declare with the
    same meaning (the same type and help, as the toolkit's ``WINDOW_HELP``) goes to each of
    them; one that means different things is ambiguous, answered with the ``<name>.``
    spellings, which always work.
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
            valid = sorted({f"{c.name}.{f.name}" for c in components
                            for f in dataclasses.fields(c.Options)})
            raise OptionError(f"unknown option '{key}' (valid: {', '.join(valid) or 'none'})")
        if len(targets) > 1 and len({_meaning(components[i], key) for i in targets}) > 1:
            raise OptionError(f"option '{key}' is ambiguous; write "
                              + " or ".join(f"{components[i].name}.{key}" for i in targets))
        for i in targets:
            routed[i].append(f"{key}={value}")
    return routed


def _meaning(component: type[Any], key: str) -> tuple[str, str]:
    """What option ``key`` of ``component`` is: its type and help."""
    found = next(f for f in dataclasses.fields(component.Options) if f.name == key)
    return str(found.type), str(found.metadata.get("help", ""))


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


def read_one(path: str | Path | Source, *, format: str | type[Reader] | None = None,
             options: Iterable[str] | Any = (), registry: Registry | None = None,
             progress: Progress = NO_PROGRESS, name: str | None = None,
             sink: Callable[[pa.RecordBatch], None] | None = None,
             table_sink: Callable[[str, pa.Table], None] | None = None) -> Trace:
    """Read one input (a file, a directory, or ``"-"`` for standard input) into a Trace whose
    rows carry ``name`` (default: the file name) as their ``source``; with ``sink``, each
    batch of events goes to it as the reader adds it, and the Trace holds none (and with
    ``table_sink``, the side-table rows a reader adds in bulk, as it adds them)."""
    registry = registry or default_registry()
    source = path if isinstance(path, Source) else Source(path)
    where = source.path if isinstance(path, Source) else path
    reader_cls = _resolve(registry, "reader", format, lambda: detect_format(source, registry))
    if source.is_stream and not reader_cls.reads_streams:
        raise UsageError(f"{source.path}: the {reader_cls.name} reader needs a file it can "
                         "open by name; save the input to a file first (readers of streams: "
                         f"{', '.join(_stream_readers(registry))})")
    reader = reader_cls(_options(reader_cls, options))
    out = TraceBuilder(name or source.name, reader_cls.name, progress=progress, sink=sink,
                       table_sink=table_sink)
    try:
        reader.read(source, out)
        return out.build()
    except TracekitError:
        raise
    except MemoryError as exc:
        raise TraceReadError("out of memory while reading", path=where,
                             reader=reader_cls.name) from exc
    except Exception as exc:  # a reader bug on odd input must still give one clear line
        raise ReaderCrashError(f"reader '{reader_cls.name}' failed: {type(exc).__name__}: "
                               f"{exc}", path=where, reader=reader_cls.name) from exc


def read(paths: str | Path | Sequence[str | Path], *, format: str | type[Reader] | None = None,
         options: Iterable[str] = (), registry: Registry | None = None,
         progress: Progress = NO_PROGRESS, join_captures: bool = True) -> Trace:
    """Read one or several inputs into one Trace; each row keeps its ``source``.

    A folder that no reader takes as one input is a run: the traces inside it are read
    (see ``expand_inputs``); its files that are not traces are counted in ``trace.log``.
    Inputs that are captures of one process at different times are read as that one process
    unless ``join_captures`` is False (``tracekit.captures``).

    Examples
    --------
    >>> trace = read("fixtures/torch-cpu/mlp_cpu.pt.trace.json.gz")  # doctest: +SKIP
    >>> trace.events.num_rows  # doctest: +SKIP
    """
    run = expand_inputs(paths, format=format, registry=registry)
    options = list(options)
    traces = [read_one(p, format=format, options=options, registry=registry, progress=progress,
                       name=n) for p, n in zip(run.paths, source_names(run.paths), strict=True)]
    names = [s for t in traces for s in t.sources]
    if len(set(names)) != len(names):
        repeated = sorted({n for n in names if names.count(n) > 1})
        raise UsageError(f"two inputs hold a source named {repeated[0]!r}; read them "
                         "separately so that their events stay apart")
    # Files of one process captured at different times (a profiler schedule's cycles) are
    # that one process, not ranks: see tracekit.captures.
    trace = concat_traces(traces)
    _note_unrelated_clocks(trace)
    if join_captures:
        trace = join_process_captures(trace)
    if run.skipped:
        for folder, files in run.skipped.items():
            for name, why in files:
                trace.log.note(folder, "file", f"skipped: {name} ({why})")
        # for the reports' notes (see analyze)
        trace.metadata[SKIPPED_FILES] = {k: [list(f) for f in v] for k, v in run.skipped.items()}
    return trace


#: Inputs whose times lie further apart than this, one after the other, were recorded on
#: unrelated clocks (another run, or a tool's own epoch): their times do not line up.
UNRELATED_CLOCKS_NS = 3600 * 10**9


def _note_unrelated_clocks(trace: Trace) -> None:
    """Warn, on each input that starts more than ``UNRELATED_CLOCKS_NS`` after the inputs
    before it end, that its times do not line up with theirs."""
    if len(trace.sources) < 2 or not trace.events.num_rows:
        return
    end = None
    for (_, before), (source, (start, _)) in itertools.pairwise(
            source_spans(trace.events).items()):
        end = before[1] if end is None else max(end, before[1])
        apart = start - end
        if apart > UNRELATED_CLOCKS_NS:
            days = apart / 86_400e9
            far = format_ns(apart) if days < 1 else (f"{days:,.1f} days" if days < 730
                                                     else f"{days / 365.25:,.1f} years")
            trace.log.note(source, "clock", f"warning: starts {far} after "
                           f"the inputs before it end: recorded on an unrelated clock (another "
                           "run, or a tool's own epoch), so its times do not line up with "
                           "theirs")


def expand_inputs(paths: str | Path | Sequence[str | Path], *,
                  format: str | type[Reader] | None = None,
                  registry: Registry | None = None) -> Expanded:
    """The inputs to read for ``paths``: each folder that no reader takes as one input (an
    nsys or rocprof output folder is one) is a run, replaced by the trace files inside it,
    recursively and in natural order; files there that no reader recognises (``format``'s
    reader, when given) are left out and listed in ``skipped``. A path that does not exist
    but holds ``*``, ``?`` or ``[`` is expanded as a glob pattern. ``read``, ``convert``,
    ``analyze_inputs`` and ``tracekit.engine.analyze_run`` all take their inputs through it.
    """
    registry = registry or default_registry()
    if isinstance(paths, (str, Path)):
        paths = [paths]
    named = _resolve(registry, "reader", format, lambda: None) if format else None

    def recognises(source: Source) -> bool:
        if named is not None:
            try:
                return float(named.sniff(source)) > 0
            except Exception:  # as in sniff(): a reader's sniff must not take the read down
                return False
        ranked = sniff(source, registry)
        return bool(ranked) and ranked[0][0] > 0

    return expand(paths, recognises)


def source_names(paths: Sequence[str | Path]) -> list[str]:
    """A distinct name per input: its file name, or as many trailing folders as it takes to
    tell inputs of the same file name apart (``rank0/trace.json``, ``rank1/trace.json``).

    Raises UsageError when two paths are the same input, or when ``-`` is given twice.
    """
    given = [os.fspath(p) for p in paths]
    if given.count(STDIN) > 1:
        raise UsageError("'-' (standard input) is given more than once")
    parts = [("stdin",) if g == STDIN else Path(os.path.abspath(g)).parts for g in given]
    for i, a in enumerate(given):
        for b in given[i + 1:]:
            if a != STDIN and b != STDIN and (a == b or same_file(a, b)):
                raise UsageError(f"{a} and {b} are the same input")
    names = []
    for mine in parts:
        depth = 1
        while depth < len(mine) and any(
                other is not mine and other[-depth:] == mine[-depth:] for other in parts):
            depth += 1
        names.append("/".join(mine[-depth:]).lstrip("/") or mine[-1])
    return names


def writer_for_path(path: str | Path, registry: Registry | None = None) -> type[Writer]:
    """Return the writer whose extension matches ``path`` (longest match wins), or, for a
    name ending in ``.gz``, the file writer whose extension ends the rest of it."""
    registry = registry or default_registry()
    name = Path(path).name.lower()
    best: tuple[int, type[Writer]] | None = None
    # A name ending in .gz is any file writer's output, gzip-compressed (see ``write``).
    for candidate in (name, name[:-3] if name.endswith(".gz") else None):
        for cls in registry.writers.values() if candidate and best is None else ():
            if candidate != name and issubclass(cls, DirectoryWriter):
                continue
            for ext in cls.extensions:
                if candidate.endswith(ext) and (best is None or len(ext) > best[0]):
                    best = (len(ext), cls)
    if best is None:
        known = ", ".join(f"{n} ({', '.join(c.extensions)})" for n, c in registry.writers.items()
                          if c.extensions)
        what = " (an existing directory)" if Path(path).is_dir() else ""
        raise UsageError(f"cannot tell the output format from '{Path(path).name}'{what}; "
                         f"name the file with an extension or pass --to FORMAT (known: {known})")
    return best[1]


def write(trace: Trace, path: str | Path, *, format: str | type[Writer] | None = None,
          options: Iterable[str] | Any = (), registry: Registry | None = None,
          progress: Progress = NO_PROGRESS, force: bool = False) -> WriteResult:
    """Write ``trace`` to ``path``; return what was written and skipped.

    ``path`` is a file (written to a temporary file and renamed into place; an existing one is
    replaced only with ``force``), ``"-"`` for standard output, a character device or a FIFO
    (streamed into), or a directory for directory writers. See ``tracekit.outputs``. Raises
    EmptyOutputError, leaving nothing behind, when the writer has nothing to write.
    """
    registry = registry or default_registry()
    if os.fspath(path) == STDIO and format is None:
        raise UsageError("-o - writes to standard output: pass --to FORMAT")
    writer_cls = _resolve(registry, "writer", format, lambda: writer_for_path(path, registry))
    writer = writer_cls(_options(writer_cls, options), progress=progress)
    release_free_memory()  # what reading freed, before the writer's own working set
    with _write_errors(path, writer_cls, lambda: trace), \
            _output(path, writer_cls, force) as target:
        return writer.write(trace, target)


@contextlib.contextmanager
def _output(path: str | Path, writer_cls: type[Writer], force: bool) -> Iterator[Any]:
    """The output a writer writes into: a fresh directory for directory writers, else a
    stream (gzip-compressed for a ``.gz`` file); see ``tracekit.outputs``."""
    if issubclass(writer_cls, DirectoryWriter):
        with open_output_directory(path, force=force, owns=writer_cls.owns) as directory:
            yield directory
        return
    compress = (os.fspath(path).lower().endswith(".gz")
                and resolve_output(path).kind in ("new", "file"))
    with open_output(path, force=force) as stream:
        if compress:
            with gzip.GzipFile(fileobj=stream, mode="wb", compresslevel=6, mtime=0) as gz:
                yield gz
        else:
            yield stream


@contextlib.contextmanager
def _write_errors(path: str | Path, writer_cls: type[Writer],
                  trace: Callable[[], Trace | None]) -> Iterator[None]:
    """What writing raises as one error naming the output (``trace``: the trace being
    written, once there is one, for the readers' warnings an empty output quotes)."""
    try:
        yield
    except EmptyOutputError as exc:
        where = "standard output" if os.fspath(path) == STDIO else os.fspath(path)
        read = trace()
        why = str(exc) if read is None else _with_reader_warnings(str(exc), read)
        raise EmptyOutputError(f"{where}: {why}") from None
    except TracekitError:
        raise
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise TraceWriteError(f"{path}: {exc.strerror or exc}") from exc
    except Exception as exc:
        raise TraceWriteError(f"{path}: writer '{writer_cls.name}' failed: "
                              f"{type(exc).__name__}: {exc}") from exc


def _with_reader_warnings(message: str, trace: Trace) -> str:
    """An empty-output message followed by what the readers warned of (often the why)."""
    warnings = [f"{source}: {outcome.removeprefix('warning: ')}"
                for (source, _, outcome) in trace.log.notices() if outcome.startswith("warning")]
    return "; ".join([message, *warnings[:2]])


def route_options(pairs: Sequence[str], reader_cls: type[Reader] | None,
                  consumers: Sequence[type[Any]]) -> tuple[list[str], list[str]]:
    """Split ``-O`` pairs into the reader's and those of ``consumers`` (the writer, or the
    analyzers). With no reader class yet (it is known only after sniffing), every pair no
    consumer declares goes to the reader, which checks it when it is found."""
    if reader_cls is not None:
        routed = split_options(pairs, [reader_cls, *consumers])
        return routed[0], [p for group in routed[1:] for p in group]
    for pair in pairs:
        if "=" not in pair:
            raise OptionError(f"option '{pair}' is not of the form key=value")
    mine = [p for p in pairs if any(addressed_key(c, p.partition("=")[0]) for c in consumers)]
    rest = [p for p in pairs if p not in mine]
    readers = default_registry().readers.values() if rest else ()
    for pair in rest:
        key = pair.partition("=")[0]
        if not any(addressed_key(r, key) for r in readers):
            valid = sorted({f"{c.name}.{f.name}" for c in consumers
                            for f in dataclasses.fields(c.Options)})
            kinds = sorted({f"{c.kind} {c.name}" for c in consumers})
            raise OptionError(f"unknown option '{key}': no reader takes it, nor "
                              f"{', '.join(kinds) or 'anything else'} (valid: "
                              f"{', '.join(valid) or 'none'}; readers': 'tracekit formats')")
    return rest, mine


def convert(inputs: str | Path | Sequence[str | Path], output: str | Path, *,
            from_: str | None = None, to: str | None = None, options: Sequence[str] = (),
            annotations: bool = False, force: bool = False, registry: Registry | None = None,
            progress: Progress = NO_PROGRESS, stream: bool = False) -> tuple[Trace, WriteResult]:
    """Read ``inputs``, add the analyzers' annotation tracks if asked, and write ``output``:
    what ``tracekit convert`` does. The output is checked before anything is read (see
    ``tracekit.outputs``); return the trace read and what was written.

    With ``stream`` (what the command asks for), one input whose reader ``streams_events``
    going to a writer that ``takes_batches`` is written batch by batch as it is read, so that
    memory follows the batch and not the trace; the trace returned then holds no events.
    """
    registry = registry or default_registry()
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    if os.fspath(output) == STDIO and to is None:
        raise UsageError("-o - writes to standard output: pass --to FORMAT")
    writer_cls = registry.get("writer", to) if to else writer_for_path(output, registry)
    reader_cls = registry.get("reader", from_) if from_ else None
    reader_opts, writer_opts = route_options(list(options), reader_cls, [writer_cls])
    directory = issubclass(writer_cls, DirectoryWriter)
    target = preflight(output, force=force, inputs=list(inputs), directory=directory,
                       owns=writer_cls.owns if directory else lambda _: False)
    # Parsed now, so that a bad value is reported before anything is read.
    writer_options = _options(writer_cls, split_options(writer_opts, [writer_cls])[0])
    # Streamed only into an output replaced when the write succeeds, or by a writer that
    # writes at the end: what was written to standard output or a FIFO before a read error
    # could not be taken back.
    one = _one_input(inputs, reader_cls, registry) \
        if stream and not annotations and writer_cls.takes_batches \
        and (not target.is_stream or writer_cls.writes_at_close) else None
    if one is not None and one.reader.streams_events:
        return _convert_streaming(one, output, reader_opts, writer_cls, writer_options,
                                  force=force, registry=registry, progress=progress)
    progress.phase("reading")
    if one is not None:  # opened already: standard input can be opened only once
        trace = join_process_captures(read_one(one.source, format=one.reader,
                                               options=reader_opts, registry=registry,
                                               progress=progress, name=one.name))
    else:
        trace = read(inputs, format=from_, options=reader_opts, registry=registry,
                     progress=progress)
    if annotations:
        progress.phase("annotating")
        trace = annotate(trace, registry)
    progress.phase(f"writing {Path(output).name}")
    result = write(trace, output, format=writer_cls, options=writer_options,
                   registry=registry, progress=progress, force=force)
    return trace, result


@dataclasses.dataclass(frozen=True)
class _OneInput:
    """The one input of a conversion, opened, with its reader and its source name."""

    source: Source
    reader: type[Reader]
    name: str


def _one_input(inputs: Sequence[str | Path], reader_cls: type[Reader] | None,
               registry: Registry) -> _OneInput | None:
    """The one input, opened (standard input can be opened only once), its reader and its
    name as ``read`` names it, when ``inputs`` are one input, not a run folder; None
    otherwise."""
    if len(inputs) != 1:
        return None
    run = expand_inputs(inputs, format=reader_cls, registry=registry)
    if len(run.paths) != 1 or run.skipped or os.fspath(run.paths[0]) != os.fspath(inputs[0]):
        return None
    source = Source(run.paths[0])
    chosen = reader_cls or detect_format(source, registry)
    return _OneInput(source, chosen, source_names(run.paths)[0])


class _SinkFailed(TracekitError):
    """The writer failed on a batch: carried through the reader, raised again as it was."""


def _convert_streaming(one: _OneInput, output: str | Path, reader_options: list[str],
                       writer_cls: type[Writer], writer_options: Any, *, force: bool,
                       registry: Registry, progress: Progress) -> tuple[Trace, WriteResult]:
    """``convert`` of one input, each batch written as the reader adds it."""
    writer = writer_cls(_options(writer_cls, writer_options), progress=progress)
    read_trace: list[Trace] = []
    with _write_errors(output, writer_cls, lambda: read_trace[0] if read_trace else None), \
            _output(output, writer_cls, force) as target:
        sink = writer.batch_sink(target)
        failure: list[Exception] = []

        def guarded(write: Callable[..., None]) -> Callable[..., None]:
            def call(*args: Any) -> None:
                try:
                    write(*args)
                except Exception as exc:  # the writer's: not to be taken for the reader's
                    failure.append(exc)
                    raise _SinkFailed(str(exc)) from exc
            return call

        progress.phase("reading")
        try:
            trace = read_one(one.source, format=one.reader, options=reader_options,
                             registry=registry, progress=progress, name=one.name,
                             sink=guarded(sink.add_events), table_sink=guarded(sink.add_table))
            if failure:  # a reader that caught the writer's error must not go on
                raise failure[0]
            read_trace.append(trace)
            progress.phase(f"writing {Path(output).name}")
            result = sink.close(trace)
        except _SinkFailed:
            sink.abort()
            raise failure[0] from None
        except BaseException:
            sink.abort()
            raise
    return trace, result


def analyze_inputs(inputs: str | Path | Sequence[str | Path],
                   names: Sequence[str] | None = None, *, from_: str | None = None,
                   options: Sequence[str] = (), output: str | Path | None = None,
                   force: bool = False, registry: Registry | None = None,
                   progress: Progress = NO_PROGRESS) -> tuple[Trace, list[Report]]:
    """Read ``inputs`` and run the named analyzers (None: the defaults for the trace):
    what ``tracekit analyze`` does before it prints. ``options`` go to the analyzer that
    declares each key, the others to the reader; ``output``, where the report will go, is
    checked before anything is read. Return the trace and the reports.
    """
    registry = registry or default_registry()
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    consumers = [registry.get("analyzer", n) for n in names] if names \
        else default_candidates(registry)
    reader_cls = registry.get("reader", from_) if from_ else None
    reader_opts, analyzer_opts = route_options(list(options), reader_cls, consumers)
    if output is not None:
        preflight(output, force=force, inputs=list(inputs))
    progress.phase("reading")
    trace = read(inputs, format=from_, options=reader_opts, registry=registry,
                 progress=progress,
                 join_captures=not any(c.compares_inputs for c in consumers if names))
    progress.phase("analyzing")
    return trace, analyze(trace, names or None, options=analyzer_opts, registry=registry)


def annotate(trace: Trace, registry: Registry | None = None) -> Trace:
    """``trace`` with the annotation rows of every analyzer that provides them (each with
    its default options): what ``convert --annotate`` draws on the timeline."""
    registry = registry or default_registry()
    tables = [trace.events]
    tracks: dict[str, str] = dict(trace.metadata.get("annotation_tracks", {}))
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
            tracks.update(cls.tracks)
    if len(tables) == 1:
        return trace
    events = pa.concat_tables(tables, promote_options="permissive").unify_dictionaries()
    # Writers read the track titles from here (the analyzers' ``tracks`` declarations).
    metadata = {**trace.metadata, "annotation_tracks": tracks}
    return dataclasses.replace(trace, events=events.combine_chunks(), metadata=metadata)


def _conform(rows: pa.Table, analyzer: str) -> pa.Table:
    """Annotation rows with every column of the event schema, in its types."""
    unknown = set(rows.column_names) - set(EVENTS_SCHEMA.names)
    if unknown:
        raise AnalysisError(f"analyzer '{analyzer}' annotated with columns not in the event "
                            f"schema: {', '.join(sorted(unknown))}")
    columns = [rows[f.name].cast(f.type) if f.name in rows.column_names
               else pa.nulls(rows.num_rows, f.type) for f in EVENTS_SCHEMA]
    return pa.Table.from_arrays(columns, schema=EVENTS_SCHEMA)


def analyze(trace: Trace, names: str | Sequence[str] | None = None, *,
            options: Iterable[str] = (), registry: Registry | None = None) -> list[Report]:
    """Run the named analyzers on ``trace``; ``options`` are routed by key.

    ``names`` None runs the defaults for the kind of trace (see ``tracekit.defaults``): the
    verdict and, for a trace without GPU work, a CPU report or the summary.
    """
    registry = registry or default_registry()
    if names is None:
        kind = trace_kind(trace)
        names = default_analyzers(kind, registry)
        if not names:
            raise UsageError(f"no installed analyzer is a default for this trace ({kind}); "
                             "pass -a NAME (see 'tracekit formats')")
    elif isinstance(names, str):
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
        scope = [p for p in opts if p.partition("=")[0] in ("window", "steps")
                 and p.partition("=")[2]]
        if scope:  # the toolkit's restrict: say what part of the trace the report is of
            reports[-1].notes.append(
                f"analyzed only {', '.join(scope)}: the events that overlap it, kept whole")
    skipped = trace.metadata.get(SKIPPED_FILES)
    if reports and skipped:  # the files of a run folder that were not read
        reports[0].notes.extend(Expanded(skipped={k: [tuple(f) for f in v]
                                                  for k, v in skipped.items()}).notes())
    untraced = untraced_note(trace)
    if untraced and reports:  # the spans run across the time between captures: said once
        reports[0].notes.append(untraced)
    return reports
