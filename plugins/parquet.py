"""tracekit's own dataset format: the events as Parquet that other tools read as they are.

``tracekit convert trace.json.gz -o trace.parquet`` writes a directory holding one file::

    trace.parquet/
        events.parquet

and ``tracekit convert r0.json r1.json -o run.parquet`` (several inputs: the ranks of a run,
numbered by ``tracekit.toolkit.input_ranks``) one such file per rank, hive-style::

    run.parquet/
        rank=0/events.parquet
        rank=1/events.parquet

An events file's rows are the events. Its footer (the Parquet key-value metadata) carries the
rest of the trace: ``tracekit``, the manifest (format, schema version, trace metadata, read
account); ``tracekit.processes``, ``tracekit.threads``, ``tracekit.devices``,
``tracekit.stacks`` and ``tracekit.frames``, the side tables (Arrow IPC streams,
zstd-compressed, base64); and ``pandas``, so that pandas keeps nullable integers as
``Int64``/``Int32``. With nothing but event rows in the directory, pandas, polars, pyarrow and
DuckDB given the directory read exactly the events, and each events file reads back alone. So a
run is one table with a ``rank`` column to them, and each rank's file is a whole trace of that
rank (its own processes, devices, stacks and manifest in its footer): a rank can be read,
copied or analyzed without the others.

Every tracekit command reads the dataset back, identical to what was written (a run: its ranks
in rank order), without parsing the original input again. Datasets of the previous layout (one
Parquet file per table and a ``tracekit.json``) are read too. A damaged dataset (a manifest of
the wrong shape, a file truncated or of other columns, a side table that does not decode, rows
that point at stacks or frames that do not exist) gives one TraceReadError naming the file; a
nullable column dropped by another tool is read as null, with a warning.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import (
    EVENTS_SCHEMA,
    SCHEMA_VERSION,
    SCHEMAS,
    EmptyOutputError,
    OptionError,
    ReadLog,
    Source,
    Trace,
    TraceBuilder,
    TraceReadError,
)
from tracekit.toolkit import TABLE_NAMES, fields, rank_traces

FORMAT = "tracekit-parquet"
EVENTS = "events.parquet"
KEY = "tracekit"  # the manifest, in the events file's footer
SIDE_TABLES = tuple(name for name in TABLE_NAMES if name != "events")
KINDS = ("slice", "instant", "counter", "sample")
# The previous layout: one file per table and this manifest beside them.
MANIFEST = "tracekit.json"
_OLD_FILES = frozenset({MANIFEST, *(f"{name}.parquet" for name in TABLE_NAMES)})
# A run: one folder per rank; names starting with "." or "_" are not data (as pyarrow, Spark and
# DuckDB treat them in hive-partitioned datasets).
RANK_DIR = re.compile(r"rank=(\d+)")
_NOT_DATA = (".", "_")
# Footer values may be megabytes (large stack tables); pyarrow's default limits are lower.
_FOOTER_LIMITS = {"thrift_string_size_limit": 2**31 - 1, "thrift_container_size_limit": 2**31 - 1}


def side_key(name: str) -> str:
    """The footer key of the side table ``name``."""
    return f"{KEY}.{name}"


#: The codecs pyarrow writes Parquet with (checked before anything is read).
CODECS = ("zstd", "snappy", "gzip", "brotli", "lz4", "none")


class ParquetWriter(tracekit.DirectoryWriter):
    """A directory holding events.parquet: the events as rows, the rest in its footer."""

    name = "parquet"
    description = "tracekit dataset: the events as Parquet, the other tables in its footer"
    extensions = (".parquet",)
    native_columns = frozenset(fields.TYPED_COLUMNS)  # the events table as it is
    event_counts = ("events rows",)
    takes_batches = True  # one input: a row group at a time (batch_sink)

    @dataclass(frozen=True)
    class Options:
        compression: str = field(default="zstd", metadata={
            "help": "Parquet codec: zstd, snappy, gzip, brotli, lz4 or none"})
        row_group_size: int = field(default=131_072, metadata={
            "min": 1,
            "help": "rows per row group (what a streamed conversion holds at most)"})

        def __post_init__(self) -> None:
            if self.compression.lower() not in CODECS:
                raise OptionError(f"writer 'parquet': compression must be one of "
                                  f"{', '.join(CODECS)}, not {self.compression!r}")
            if self.row_group_size < 1:
                raise OptionError("writer 'parquet': row_group_size must be at least 1, "
                                  f"not {self.row_group_size}")

    @classmethod
    def owns(cls, directory: Path) -> bool:
        """True for a tracekit dataset of this layout (only an events.parquet with a tracekit
        manifest, or only rank=N folders each holding one), or of the previous one (only its
        table files and a tracekit.json of this format), and for an empty directory: replacing
        these destroys nothing of the user's."""
        try:
            entries = list(directory.iterdir())
        except OSError:
            return False
        if not entries:
            return True
        if all(e.is_dir() and not e.is_symlink() and RANK_DIR.fullmatch(e.name)
               for e in entries):
            return all(cls.owns(e) and (e / EVENTS).is_file() for e in entries)
        if any(e.is_symlink() or not e.is_file() for e in entries):
            return False
        names = {e.name for e in entries}
        if names == {EVENTS}:
            return _has_manifest(directory / EVENTS)
        return names <= _OLD_FILES and _is_old_dataset(directory)

    def write(self, trace: Trace, stream: Any) -> tracekit.WriteResult:
        if not any(trace.table(name).num_rows for name in TABLE_NAMES):
            raise EmptyOutputError("nothing to write: the input has no events")
        result = tracekit.WriteResult()
        if len(trace.sources) < 2:
            self._write_file(trace, Path(stream) / EVENTS)
        else:
            for i, (rank, part) in enumerate(rank_traces(trace)):
                folder = Path(stream) / f"rank={rank.rank}"
                folder.mkdir()
                self._write_file(part, folder / EVENTS)
                self.progress.update(i + 1, len(trace.sources))
            result.written["rank folders"] = len(trace.sources)
        for name in TABLE_NAMES:
            result.written[f"{name} rows"] = trace.table(name).num_rows
        return result

    def _write_file(self, trace: Trace, path: Path) -> None:
        """One events file: the trace's events as rows, the rest in its footer."""
        import pyarrow.parquet as pq
        events = trace.events
        schema = _file_schema(events.schema)
        with pq.ParquetWriter(path, schema, compression=self.options.compression) as writer:
            writer.write_table(events.replace_schema_metadata(schema.metadata),
                               row_group_size=self.options.row_group_size)
            writer.add_key_value_metadata(_footer_of(trace))

    def batch_sink(self, stream: Any) -> tracekit.BatchSink:
        return _EventsFileSink(Path(stream) / EVENTS, self.options.compression,
                               self.options.row_group_size)


class _EventsFileSink(tracekit.BatchSink):
    """One events file written a row group at a time as the batches come: memory holds at
    most a row group of events, and the file is the one ``ParquetWriter.write`` writes."""

    def __init__(self, path: Path, compression: str, row_group_size: int) -> None:
        import pyarrow.parquet as pq
        self._schema = _file_schema(EVENTS_SCHEMA)
        self._file = pq.ParquetWriter(path, self._schema, compression=compression)
        self._size = max(row_group_size, 1)
        self._held: list[pa.RecordBatch] = []
        self._held_rows = 0
        self.rows = 0

    def add_events(self, batch: pa.RecordBatch) -> None:
        self._held.append(batch)
        self._held_rows += batch.num_rows
        self.rows += batch.num_rows
        while self._held_rows >= self._size:
            self._flush(self._size)

    def _flush(self, rows: int) -> None:
        """Write the first ``rows`` held rows as one row group; keep the rest."""
        held = pa.Table.from_batches(self._held, schema=EVENTS_SCHEMA)
        self._file.write_table(held.slice(0, rows).replace_schema_metadata(
            self._schema.metadata), row_group_size=rows)
        rest = held.slice(rows)
        self._held, self._held_rows = rest.to_batches(), rest.num_rows

    def abort(self) -> None:
        self._file.close()

    def close(self, trace: Trace) -> tracekit.WriteResult:
        try:
            if self._held_rows:
                self._flush(self._held_rows)
            if not self.rows and not any(trace.table(name).num_rows for name in SIDE_TABLES):
                raise EmptyOutputError("nothing to write: the input has no events")
            self._file.add_key_value_metadata(_footer_of(trace))
        finally:
            self._file.close()
        result = tracekit.WriteResult()
        result.written["events rows"] = self.rows
        for name in SIDE_TABLES:
            result.written[f"{name} rows"] = trace.table(name).num_rows
        return result


def _file_schema(schema: pa.Schema) -> pa.Schema:
    """The events file's schema: the events' with the ``pandas`` entry, where pyarrow's
    to_pandas finds it (the large footer entries are added apart, so that the stored Arrow
    schema does not repeat them)."""
    return schema.with_metadata({**(schema.metadata or {}),
                                 b"pandas": _pandas_metadata(schema)})


def _footer_of(trace: Trace) -> dict[str | bytes, bytes]:
    """The events file's footer entries: the manifest (format, schema version, metadata,
    read account) and each side table."""
    manifest = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "tables": list(TABLE_NAMES),
        "metadata": trace.metadata,
        "read_log": [{"source": s, "input": k, "outcome": o, "count": n}
                     for (s, k, o), n in sorted(trace.log.outcomes.items())],
    }
    footer: dict[str | bytes, bytes] = {KEY: orjson.dumps(manifest)}
    for name in SIDE_TABLES:
        footer[side_key(name)] = _encode(trace.table(name))
    return footer


class ParquetReader(tracekit.Reader):
    """Reads a dataset written by the parquet writer (or its events.parquet alone) back into
    the same Trace; also datasets of the previous layout."""

    name = "parquet"
    description = "tracekit dataset written by the parquet writer (or its events.parquet)"
    extensions = (".parquet",)
    reads_columns = True

    @dataclass(frozen=True)
    class Options:
        columns: str = field(default="", metadata={
            "help": "read only these event columns (comma-separated), the others as empty: "
                    "for analyses that need a few"})

    @classmethod
    def parts(cls, source: Source) -> list[Path]:
        """A run dataset's rank=N folders, each a whole dataset of one rank."""
        if not source.is_dir or (source.path / EVENTS).exists() or \
                (source.path / MANIFEST).exists():
            return []
        return [folder for _, folder in _rank_folders(source.path)]

    @classmethod
    def sniff(cls, source: Source) -> float:
        path = source.path
        if source.is_dir:
            if (path / MANIFEST).is_file():
                if _is_old_dataset(path):
                    return 1.0
                # A damaged manifest beside the events: still ours; read() says what is wrong.
                return 0.5 if (path / EVENTS).is_file() else 0.0
            if (path / EVENTS).is_file():
                return 1.0 if _has_manifest(path / EVENTS) else 0.5
            parts = _rank_folders(path)
            if parts:  # a run: ours when its first rank's file is
                return 1.0 if _has_manifest(parts[0][1] / EVENTS) else 0.5
            return 0.0
        if source.is_stream or source.compression or not source.head.startswith(b"PAR1"):
            return 0.0
        return 1.0 if _has_manifest(path) else 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        if source.is_stream:
            raise TraceReadError("a tracekit Parquet dataset cannot be read from a stream",
                                 path=source.path)
        columns = _columns(self.options.columns, source.path)
        if not source.is_dir:
            trace = _read_events_file(source.path, source.path, source.name, columns)
        elif (source.path / MANIFEST).exists():
            trace = _read_old_layout(source.path, source.name)
        elif not (source.path / EVENTS).exists() and _rank_folders(source.path):
            trace = _read_run(source.path, source.name, columns)
        else:
            trace = _read_events_file(source.path / EVENTS, source.path, source.name, columns)
        out.adopt(trace)


def _rank_folders(directory: Path) -> list[tuple[int, Path]]:
    """The rank=N folders of a run, by rank (none when ``directory`` holds none)."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    found = [(int(m.group(1)), e) for e in entries
             if (m := RANK_DIR.fullmatch(e.name)) and e.is_dir()]
    return sorted(found, key=lambda item: item[0])


def _columns(given: str, where: Path) -> set[str] | None:
    """The event columns the ``columns`` option names, and those no event may lack (None:
    every column)."""
    if not given:
        return None
    names = {c.strip() for c in given.split(",") if c.strip()}
    unknown = sorted(names - set(EVENTS_SCHEMA.names))
    if unknown:
        raise tracekit.OptionError(f"option 'columns': {unknown[0]!r} is not an event column "
                                   f"(columns: {', '.join(EVENTS_SCHEMA.names)})")
    return names | _REQUIRED  # what the model cannot hold empty is always read


_REQUIRED = {f.name for f in EVENTS_SCHEMA if not f.nullable}


def _read_run(directory: Path, source_name: str, columns: set[str] | None = None) -> Trace:
    """A run: each rank=N folder's events file read as a whole trace, the ranks in order."""
    def error(message: str) -> TraceReadError:
        return TraceReadError(message, path=directory)

    parts = _rank_folders(directory)
    names = {e.name for _, e in parts}
    for entry in sorted(directory.iterdir()):
        if entry.name not in names and not entry.name.startswith(_NOT_DATA):
            raise error(f"{entry.name[:60]!r} is not a rank=N folder: a run holds only those")
    ranks = [n for n, _ in parts]
    if len(set(ranks)) != len(ranks):
        twice = next(n for n in ranks if ranks.count(n) > 1)
        raise error(f"rank {twice} has two folders "
                    f"({', '.join(e.name for n, e in parts if n == twice)})")
    traces = []
    for _, folder in parts:
        others = sorted(e.name for e in folder.iterdir()
                        if e.name != EVENTS and not e.name.startswith(_NOT_DATA))
        if others:
            raise error(f"{folder.name}/{others[0][:60]} is not part of a tracekit run "
                        f"(a rank folder holds only {EVENTS})")
        traces.append(_read_events_file(folder / EVENTS, folder, source_name, columns))
    return _combine(traces, directory)


def _combine(traces: list[Trace], where: Path) -> Trace:
    """The ranks of a run as one trace. Their stack and frame ids are those of the run, so
    they stay as they are (a stack two ranks share is one row)."""
    sources: dict[str, Any] = {}
    log = ReadLog()
    for trace in traces:
        twice = set(trace.metadata["sources"]) & set(sources)
        if twice:
            raise TraceReadError(f"two ranks hold input {next(iter(twice))[:60]!r}", path=where)
        sources.update(trace.metadata["sources"])
        log.merge(trace.log)
    tables = {}
    for name in TABLE_NAMES:
        table = pa.concat_tables([t.table(name) for t in traces])
        if name == "events":
            table = table.unify_dictionaries().combine_chunks()
        elif name in ("stacks", "frames"):
            key = "stack_id" if name == "stacks" else "frame_id"
            _, first = np.unique(table[key].to_numpy(), return_index=True)
            table = table.take(pa.array(np.sort(first)))
        tables[name] = table
    return Trace(metadata={**traces[0].metadata, "sources": sources}, log=log, **tables)


def _encode(table: pa.Table) -> bytes:
    """A side table as a footer value: an Arrow IPC stream, zstd-compressed, in base64 (some
    Parquet readers take footer values for UTF-8 text)."""
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return base64.b64encode(sink.getvalue().to_pybytes())


def _pandas_metadata(schema: pa.Schema) -> bytes:
    """The ``pandas`` schema entry pyarrow's ``to_pandas`` reads: integer columns become
    pandas' nullable ``Int64``/``Int32`` (not float64 where a column has nulls)."""
    columns = []
    for f in schema:
        kind, numpy_type, meta = "unicode", "object", None
        if pa.types.is_dictionary(f.type):
            kind, numpy_type, meta = "categorical", str(f.type.index_type), {"ordered": False}
        elif pa.types.is_integer(f.type):
            kind, numpy_type = str(f.type), str(f.type).capitalize()
        elif pa.types.is_floating(f.type):
            kind = numpy_type = np.dtype(f.type.to_pandas_dtype()).name
        columns.append({"name": f.name, "field_name": f.name, "pandas_type": kind,
                        "numpy_type": numpy_type, "metadata": meta})
    return orjson.dumps({"index_columns": [], "column_indexes": [], "columns": columns,
                         "creator": {"library": "tracekit", "version": tracekit.__version__}})


def _footer(path: Path) -> dict[bytes, bytes]:
    """The key-value metadata of a Parquet file (OSError or pyarrow's errors if unreadable)."""
    import pyarrow.parquet as pq  # ~35 ms: only when Parquet is read or written
    with pq.ParquetFile(path, **_FOOTER_LIMITS) as file:
        return file.metadata.metadata or {}


def _has_manifest(path: Path) -> bool:
    """Whether ``path`` is a Parquet file whose footer holds a tracekit manifest."""
    try:
        manifest = orjson.loads(_footer(path)[KEY.encode()])
    except (OSError, pa.ArrowException, ValueError, KeyError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == FORMAT


def _is_old_dataset(directory: Path) -> bool:
    try:
        manifest = orjson.loads((directory / MANIFEST).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == FORMAT


def _what(value: Any) -> str:
    """A JSON value's type in words, for messages (never the value itself)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "a list", str: "a string"}.get(type(value), "a number")


def _is_count(value: Any) -> bool:
    return type(value) is int and 0 <= value < 2**63


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:120] if text else type(exc).__name__


class _Manifest:
    """The manifest, checked key by key: every problem is a TraceReadError naming it by
    ``label`` (``tracekit.json``, or ``events.parquet [manifest]``)."""

    def __init__(self, data: bytes, label: str, where: Path) -> None:
        self.label, self.where = label, where
        try:
            self.data = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise self.error(f"is not valid JSON ({exc.msg} at line {exc.lineno} "
                             f"column {exc.colno})") from exc
        if not isinstance(self.data, dict):
            raise self.error(f"holds {_what(self.data)}, not a JSON object")
        if self.get("format", str) != FORMAT:
            raise self.error(f"format is not {FORMAT!r}")
        if "schema_version" not in self.data:
            raise self.error("has no 'schema_version'")
        version = self.data["schema_version"]
        if type(version) not in (str, int):
            raise self.error(f"'schema_version' is {_what(version)}, not a string")
        if str(version) != SCHEMA_VERSION:
            raise self.error(f"written with event model v{str(version)[:20]}, this tracekit "
                             f"reads v{SCHEMA_VERSION}")
        tables = self.get("tables", list)
        missing = [n for n in TABLE_NAMES if n not in tables]
        if missing:
            raise self.error(f"'tables' does not list {', '.join(missing)}")

    def error(self, message: str) -> TraceReadError:
        return TraceReadError(f"{self.label} {message}", path=self.where)

    def get(self, key: str, kind: type) -> Any:
        """The value of a top-level key, which must be of type ``kind``."""
        if key not in self.data:
            raise self.error(f"has no {key!r}")
        value = self.data[key]
        if type(value) is not kind:
            raise self.error(f"{key!r} is {_what(value)}, not {_what(kind())}")
        return value

    def metadata(self) -> dict[str, Any]:
        """The trace metadata: per source an object of what its reader recorded."""
        metadata = self.get("metadata", dict)
        sources = metadata.get("sources")
        if not isinstance(sources, dict) or not sources:
            raise self.error("'metadata.sources' must be an object naming at least one input, "
                             f"not {_what(sources) if sources != {} else 'an empty one'}")
        for name, meta in sources.items():
            if not isinstance(meta, dict):
                raise self.error(f"'metadata.sources' entry {name[:40]!r} is {_what(meta)}, "
                                 "not an object")
            counts = meta.get("events")
            if counts is not None and not (isinstance(counts, dict)
                                           and all(map(_is_count, counts.values()))):
                raise self.error(f"'metadata.sources' entry {name[:40]!r}: 'events' must map "
                                 "event names to counts")
        return metadata

    def read_log(self) -> ReadLog:
        """The account of the input records, as the readers noted it."""
        log = ReadLog()
        for i, entry in enumerate(self.get("read_log", list)):
            if not (isinstance(entry, dict)
                    and all(type(entry.get(k)) is str for k in ("source", "input", "outcome"))
                    and _is_count(entry.get("count"))):
                raise self.error(f"'read_log' entry {i} is not an object of source, input, "
                                 "outcome (strings) and count (a whole number >= 0)")
            log.note(entry["source"], entry["input"], entry["outcome"], entry["count"])
        return log


def _read_events_file(path: Path, where: Path, source_name: str,
                      columns: set[str] | None = None) -> Trace:
    """A dataset of this layout: the events file at ``path``, with the manifest and the side
    tables from its footer; of the events only ``columns`` when given, the others empty.
    Errors name ``where`` (the input) and the part that is wrong."""
    import pyarrow.parquet as pq
    label = path.name
    labels = {"events": label, "manifest": f"{label} [manifest]",
              **{name: f"{label} [{name}]" for name in SIDE_TABLES}}

    def error(message: str) -> TraceReadError:
        return TraceReadError(f"{label} {message}", path=where)

    if not path.exists():
        raise error("is missing")
    if not path.is_file():
        raise error("is not a file")
    try:
        with pq.ParquetFile(path, **_FOOTER_LIMITS) as file:
            footer = file.metadata.metadata or {}
            events = file.read(columns=None if columns is None else
                               [c for c in file.schema_arrow.names if c in columns])
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise error(f"is not a readable Parquet file ({_first_line(exc)})") from exc
    if KEY.encode() not in footer:
        raise error(f"has no tracekit manifest in its metadata (key {KEY!r}): not a tracekit "
                    "dataset")
    manifest = _Manifest(footer[KEY.encode()], labels["manifest"], where)
    metadata = manifest.metadata()
    log = manifest.read_log()
    raw = {"events": events}
    for name in SIDE_TABLES:
        raw[name] = _decode(footer.get(side_key(name).encode()), name, labels[name], where)
    tables = {}
    for name in TABLE_NAMES:
        tables[name], absent = _conform(raw[name], name, labels[name], where)
        for column in absent:
            if name == "events" and columns is not None and column not in columns:
                continue  # not asked for
            log.note(source_name, labels[name],
                     f"warning: column {column!r} is absent; read as empty (null)")
    _check_references(where, tables, set(metadata["sources"]), labels)
    return Trace(metadata=metadata, log=log, **tables)


def _decode(value: bytes | None, name: str, label: str, where: Path) -> pa.Table:
    """The side table ``name`` from its footer value; damage of any kind is a
    TraceReadError."""
    if value is None:
        raise TraceReadError(f"{label} is missing (no footer key {side_key(name)!r})",
                             path=where)
    try:
        with pa.ipc.open_stream(base64.b64decode(value, validate=True)) as reader:
            table = reader.read_all()
        # IPC reading trusts the buffers; a damaged one must not reach the analyzers.
        table.validate(full=True)
    except (binascii.Error, ValueError, pa.ArrowException) as exc:
        raise TraceReadError(f"{label} is not a readable Arrow table ({_first_line(exc)})",
                             path=where) from exc
    return table


def _read_old_layout(directory: Path, source_name: str) -> Trace:
    """A dataset of the previous layout: tracekit.json and one Parquet file per table."""
    import pyarrow.parquet as pq
    path = directory / MANIFEST
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceReadError(f"{MANIFEST} cannot be read ({exc.strerror or type(exc).__name__})",
                             path=directory) from exc
    manifest = _Manifest(data, MANIFEST, directory)
    metadata = manifest.metadata()
    log = manifest.read_log()
    labels = {"manifest": MANIFEST, **{name: f"{name}.parquet" for name in TABLE_NAMES}}
    tables = {}
    for name in TABLE_NAMES:
        file = directory / labels[name]

        def error(message: str, file: Path = file) -> TraceReadError:
            return TraceReadError(f"{file.name} {message}", path=directory)

        if not file.exists():
            raise error("is missing")
        if not file.is_file():
            raise error("is not a file")
        try:
            table = pq.read_table(file)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise error(f"is not a readable Parquet file ({_first_line(exc)})") from exc
        tables[name], absent = _conform(table, name, labels[name], directory)
        for column in absent:
            log.note(source_name, labels[name],
                     f"warning: column {column!r} is absent; read as empty (null)")
    _check_references(directory, tables, set(metadata["sources"]), labels)
    return Trace(metadata=metadata, log=log, **tables)


def _conform(table: pa.Table, name: str, label: str, where: Path) -> tuple[pa.Table, list[str]]:
    """``table`` in exactly the model's schema for ``name``, and the nullable columns it
    lacks (read as null). A missing column that cannot be null, an unknown column, a type that
    does not convert losslessly or nulls where the model has none give a TraceReadError."""
    schema = SCHEMAS[name]

    def error(message: str) -> TraceReadError:
        return TraceReadError(f"{label} {message}", path=where)

    absent = [f.name for f in schema if f.name not in table.column_names]
    required = [n for n in absent if not schema.field(n).nullable]
    extra = [n for n in table.column_names if n not in schema.names]
    if required or extra:
        what = f"lacks column {required[0]!r}" if required else \
            f"has unknown column {extra[0][:40]!r}"
        raise error(f"{what}: it does not follow event model v{SCHEMA_VERSION}")
    columns = []
    for f in schema:
        if f.name in absent:
            columns.append(pa.chunked_array([pa.nulls(table.num_rows, f.type)]))
            continue
        column = table[f.name]
        if column.type != f.type:
            column = _convert(column, f, error)
        if not f.nullable and column.null_count:
            raise error(f"column {f.name!r} has {column.null_count} nulls; it has none in the "
                        "event model")
        columns.append(column)
    table = pa.Table.from_arrays(columns, schema=schema)
    if name == "events":
        table = table.unify_dictionaries()
    return table.combine_chunks(), absent


def _convert(column: pa.ChunkedArray, f: pa.Field,
             error: Callable[[str], TraceReadError]) -> pa.ChunkedArray:
    """``column`` in ``f``'s type where the conversion loses nothing (int32 to int64, strings
    to dictionary strings, a value that fits the narrower int type); else an error."""
    have, want = column.type, f.type
    stringy = (pa.types.is_string(have) or pa.types.is_large_string(have)
               or (pa.types.is_dictionary(have) and pa.types.is_string(have.value_type)))
    compatible = ((pa.types.is_integer(have) and pa.types.is_integer(want))
                  or (pa.types.is_floating(have) and pa.types.is_floating(want))
                  or (stringy and (pa.types.is_string(want) or pa.types.is_dictionary(want))))
    if not compatible:
        raise error(f"column {f.name!r} is {have}, not {want}")
    try:
        if pa.types.is_dictionary(want):
            return pc.dictionary_encode(column.cast(pa.string())).cast(want)
        return column.cast(want)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise error(f"column {f.name!r} has values that do not fit {want}") from exc


def _check_references(where: Path, tables: dict[str, pa.Table], sources: set[str],
                      labels: dict[str, str]) -> None:
    """What the writers rely on: known kinds, inputs named in the manifest, and stack and frame
    ids that exist, are unique and form a tree (no cycle)."""
    events, stacks, frames = tables["events"], tables["stacks"], tables["frames"]

    def error(table: str, message: str) -> TraceReadError:
        return TraceReadError(f"{labels[table]} {message}", path=where)

    unknown = [k for k in _used(events["kind"]) if k not in KINDS]
    if unknown:
        raise error("events", f"has events of unknown kind {unknown[0][:20]!r} "
                    f"(known: {', '.join(KINDS)})")
    stray = [s for s in _used(events["source"]) if s not in sources]
    if stray:
        raise error("events", f"has events of input {stray[0][:40]!r}, which "
                    f"{labels['manifest']} does not name")
    for table, column in (("stacks", "stack_id"), ("frames", "frame_id")):
        ids = tables[table][column]
        if len(pc.unique(ids)) != len(ids):
            raise error(table, f"has a {column} twice")
    stack_ids = stacks["stack_id"]
    for table, column, target, target_name in (
            ("events", "stack_id", stack_ids, "stacks"),
            ("stacks", "parent_id", stack_ids, "stacks"),
            ("stacks", "frame_id", frames["frame_id"], "frames")):
        values = tables[table][column]
        found = pc.is_in(values, value_set=target.combine_chunks())
        dangling = pc.sum(pc.and_(pc.is_valid(values), pc.invert(found))).as_py() or 0
        if dangling:
            raise error(table, f"has {dangling} rows whose {column} is not in "
                        f"{labels[target_name]}")
    if _has_cycle(stack_ids.to_numpy(), stacks["parent_id"]):
        raise error("stacks", "has a cycle: a stack is its own ancestor")


def _used(column: pa.ChunkedArray) -> list[str]:
    """The distinct values of a dictionary column, from its codes (no string per row)."""
    array = column.combine_chunks()
    return array.dictionary.take(pc.unique(array.indices)).to_pylist()


def _has_cycle(stack_id: np.ndarray, parent_id: pa.ChunkedArray) -> bool:
    """Whether following parent_id from some stack never reaches a root (pointer doubling:
    after k rounds each stack points 2**k levels up; a chain longer than the table loops)."""
    n = len(stack_id)
    if not n:
        return False
    order = np.argsort(stack_id)
    valid = parent_id.is_valid().to_numpy(zero_copy_only=False)
    up = np.full(n, -1, dtype=np.int64)
    up[valid] = order[np.searchsorted(stack_id[order],
                                      parent_id.fill_null(0).to_numpy()[valid])]
    for _ in range(int(np.ceil(np.log2(n))) + 1):
        up = np.where(up >= 0, up[np.maximum(up, 0)], -1)
    return bool((up >= 0).any())


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    register(ParquetReader)


@tracekit.hookimpl
def register_writers(register: Any) -> None:
    register(ParquetWriter)
