"""tracekit's own dataset format: one Parquet file per table of the event model.

``tracekit convert trace.json.gz -o trace.parquet`` writes a directory::

    trace.parquet/
        events.parquet  processes.parquet  threads.parquet  devices.parquet
        stacks.parquet  frames.parquet     tracekit.json

``tracekit.json`` holds the schema version, the trace metadata and the read account. Every
tracekit command reads the directory back, identical to what was written, without parsing the
original input again; DuckDB, pandas and polars read the Parquet files directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import tracekit
from tracekit.builder import TraceBuilder
from tracekit.errors import TraceReadError
from tracekit.inputs import Source
from tracekit.model import SCHEMA_VERSION, SCHEMAS, TABLE_NAMES, ReadLog, Trace

MANIFEST = "tracekit.json"
FORMAT = "tracekit-parquet"


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

    def write(self, trace: Trace, stream: Any) -> tracekit.WriteResult:
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
        try:
            manifest = orjson.loads((source.path / MANIFEST).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return 0.0
        return 1.0 if isinstance(manifest, dict) and manifest.get("format") == FORMAT else 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        if not source.is_dir:
            raise TraceReadError("a tracekit Parquet dataset is a directory", path=source.path)
        try:
            manifest = orjson.loads((source.path / MANIFEST).read_bytes())
        except OSError as exc:
            raise TraceReadError(f"no {MANIFEST}: not a tracekit Parquet dataset",
                                 path=source.path) from exc
        except orjson.JSONDecodeError as exc:
            raise TraceReadError(f"{MANIFEST} is not valid JSON: {exc}", path=source.path) from exc
        if str(manifest.get("schema_version")) != SCHEMA_VERSION:
            raise TraceReadError(f"written with event model v{manifest.get('schema_version')}, "
                                 f"this tracekit reads v{SCHEMA_VERSION}", path=source.path)
        tables = {}
        for name in TABLE_NAMES:
            path = source.path / f"{name}.parquet"
            try:
                table = pq.read_table(path, schema=SCHEMAS[name])
            except FileNotFoundError as exc:
                raise TraceReadError(f"{name}.parquet is missing", path=source.path) from exc
            except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as exc:
                raise TraceReadError(f"{name}.parquet: {exc}", path=source.path) from exc
            tables[name] = table.combine_chunks() if name != "events" else \
                table.unify_dictionaries().combine_chunks()
        log = ReadLog()
        for entry in manifest.get("read_log", []):
            log.note(entry["source"], entry["input"], entry["outcome"], entry["count"])
        out.adopt(Trace(metadata=manifest.get("metadata", {}), log=log, **tables))


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    register(ParquetReader)


@tracekit.hookimpl
def register_writers(register: Any) -> None:
    register(ParquetWriter)
