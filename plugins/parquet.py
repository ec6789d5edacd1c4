"""tracekit's own dataset format: one Parquet file per table of the event model.

``tracekit convert trace.json.gz -o trace.parquet`` writes a directory::

    trace.parquet/
        events.parquet  processes.parquet  threads.parquet  devices.parquet
        stacks.parquet  frames.parquet     tracekit.json

``tracekit.json`` holds the schema version, the trace metadata and the read account. Every
tracekit command reads the directory back, identical to what was written, without parsing the
original input again; DuckDB, pandas and polars read the Parquet files directly. A damaged
dataset (a manifest of the wrong shape, a table file truncated, missing or of other columns,
rows that point at stacks or frames that do not exist) gives one TraceReadError naming the file;
a nullable column dropped by another tool is read as null, with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import tracekit
from tracekit.builder import TraceBuilder
from tracekit.errors import EmptyOutputError, TraceReadError
from tracekit.inputs import Source
from tracekit.model import SCHEMA_VERSION, SCHEMAS, TABLE_NAMES, ReadLog, Trace

MANIFEST = "tracekit.json"
FORMAT = "tracekit-parquet"
KINDS = ("slice", "instant", "counter", "sample")
_FILES = frozenset({MANIFEST, *(f"{name}.parquet" for name in TABLE_NAMES)})


class ParquetWriter(tracekit.DirectoryWriter):
    """A directory of Parquet files, one per table, plus tracekit.json."""

    name = "parquet"
    description = "tracekit dataset: one Parquet file per table of the event model"
    extensions = (".parquet",)

    @dataclass(frozen=True)
    class Options:
        compression: str = field(default="zstd", metadata={
            "help": "Parquet codec: zstd, snappy, gzip, lz4 or none"})
        row_group_size: int = field(default=1_000_000, metadata={"help": "rows per row group"})

    @classmethod
    def owns(cls, directory: Path) -> bool:
        """True for a tracekit dataset (only its table files and a tracekit.json of this
        format) and for an empty directory: replacing either destroys nothing of the user's."""
        try:
            entries = list(directory.iterdir())
        except OSError:
            return False
        if not entries:
            return True
        if any(e.name not in _FILES or e.is_symlink() or not e.is_file() for e in entries):
            return False
        return _is_dataset(directory)

    def write(self, trace: Trace, stream: Any) -> tracekit.WriteResult:
        if not any(trace.table(name).num_rows for name in TABLE_NAMES):
            raise EmptyOutputError("nothing to write: the input has no events")
        directory = Path(stream)
        result = tracekit.WriteResult()
        for name in TABLE_NAMES:
            table = trace.table(name)
            pq.write_table(table, directory / f"{name}.parquet",
                           compression=self.options.compression,
                           row_group_size=self.options.row_group_size)
            result.written[f"{name} rows"] = table.num_rows
        manifest = {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "tables": list(TABLE_NAMES),
            "metadata": trace.metadata,
            "read_log": [{"source": s, "input": k, "outcome": o, "count": n}
                         for (s, k, o), n in sorted(trace.log.outcomes.items())],
        }
        (directory / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        return result


class ParquetReader(tracekit.Reader):
    """Reads a directory written by the parquet writer back into the same Trace."""

    name = "parquet"
    description = "tracekit dataset written by the parquet writer (a directory)"
    extensions = (".parquet",)

    @classmethod
    def sniff(cls, source: Source) -> float:
        if not source.is_dir:
            return 0.0
        if _is_dataset(source.path):
            return 1.0
        # A damaged manifest beside the events table: still ours, and read() says what is wrong.
        paths = (source.path / MANIFEST, source.path / "events.parquet")
        return 0.5 if all(p.is_file() for p in paths) else 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        if not source.is_dir:
            raise TraceReadError("a tracekit Parquet dataset is a directory", path=source.path)
        manifest = _Manifest(source.path)
        metadata = manifest.metadata()
        log = manifest.read_log()
        tables = {}
        for name in TABLE_NAMES:
            tables[name], absent = _read_table(source.path, name)
            for column in absent:
                log.note(source.name, f"{name}.parquet",
                         f"warning: column {column!r} is absent; read as empty (null)")
        _check_references(source.path, tables, set(metadata["sources"]))
        out.adopt(Trace(metadata=metadata, log=log, **tables))


def _is_dataset(directory: Path) -> bool:
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


class _Manifest:
    """tracekit.json, checked key by key: every problem is a TraceReadError naming it."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / MANIFEST
        try:
            data = self.path.read_bytes()
        except FileNotFoundError as exc:
            raise TraceReadError(f"no {MANIFEST}: not a tracekit Parquet dataset",
                                 path=directory) from exc
        except OSError as exc:
            raise self.error(f"cannot be read ({exc.strerror or type(exc).__name__})") from exc
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
        return TraceReadError(f"{MANIFEST} {message}", path=self.path.parent)

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


def _read_table(directory: Path, name: str) -> tuple[pa.Table, list[str]]:
    """One table file, in exactly the model's schema, and the nullable columns it lacks (read
    as null). A missing or unreadable file, a missing column that cannot be null, an unknown
    column, a type that does not convert losslessly or nulls where the model has none give a
    TraceReadError."""
    path = directory / f"{name}.parquet"
    schema = SCHEMAS[name]

    def error(message: str) -> TraceReadError:
        return TraceReadError(f"{path.name} {message}", path=directory)

    if not path.exists():
        raise error("is missing")
    if not path.is_file():
        raise error("is not a file")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise error(f"is not a readable Parquet file ({first[:120]})") from exc
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


def _convert(column: pa.ChunkedArray, f: pa.Field, error: Any) -> pa.ChunkedArray:
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


def _check_references(directory: Path, tables: dict[str, pa.Table], sources: set[str]) -> None:
    """What the writers rely on: known kinds, inputs named in the manifest, and stack and frame
    ids that exist, are unique and form a tree (no cycle)."""
    events, stacks, frames = tables["events"], tables["stacks"], tables["frames"]

    def error(table: str, message: str) -> TraceReadError:
        return TraceReadError(f"{table}.parquet {message}", path=directory)

    unknown = [k for k in _used(events["kind"]) if k not in KINDS]
    if unknown:
        raise error("events", f"has events of unknown kind {unknown[0][:20]!r} "
                    f"(known: {', '.join(KINDS)})")
    stray = [s for s in _used(events["source"]) if s not in sources]
    if stray:
        raise error("events", f"has events of input {stray[0][:40]!r}, which {MANIFEST} does not "
                    "name")
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
                        f"{target_name}.parquet")
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
