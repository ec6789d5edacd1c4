"""TraceBuilder: what a reader fills, column-wise, and what core checks against the schema."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from tracekit.errors import PluginContractError
from tracekit.model import (
    EVENTS_SCHEMA,
    SCHEMA_VERSION,
    SCHEMAS,
    ReadLog,
    Trace,
    events_from_batches,
)
from tracekit.progress import NO_PROGRESS, Progress

ColumnData = pa.Array | pa.ChunkedArray | np.ndarray | Sequence[Any]


def null_column(type_: pa.DataType, n: int) -> pa.Array:
    """An all-null column of ``n`` rows. Fixed-width ones share one zeroed buffer: most event
    columns are null for most readers (a CPU sample has no grid, stream or bytes), and a
    buffer per column would cost 8 bytes a row for each of them."""
    if not (pa.types.is_integer(type_) or pa.types.is_floating(type_)):
        return pa.nulls(n, type_)
    zeros = _zeros(n)
    return pa.Array.from_buffers(type_, n, [zeros, zeros], null_count=n)


_zero_buffers: dict[int, pa.Buffer] = {}


def _zeros(n: int) -> pa.Buffer:
    """A zeroed buffer big enough for ``n`` 8-byte values (validity bitmaps use its start)."""
    buf = _zero_buffers.get(n)
    if buf is None:
        if len(_zero_buffers) > 8:
            _zero_buffers.clear()
        buf = _zero_buffers[n] = pa.allocate_buffer(8 * max(n, 1), resizable=False)
        np.frombuffer(buf, dtype=np.uint8)[:] = 0
    return buf


class TraceBuilder:
    """Collects what a reader produces for one input (its ``source``).

    Readers add events in column batches with :meth:`add_events` (never one Python object per
    event through the pipeline), side tables with :meth:`add_process` and friends, facts about
    the run in :attr:`metadata`, and account for every input record with :meth:`note`.
    """

    def __init__(self, source: str, reader: str = "?",
                 progress: Progress = NO_PROGRESS,
                 sink: Callable[[pa.RecordBatch], None] | None = None,
                 table_sink: Callable[[str, pa.Table], None] | None = None) -> None:
        self.source = source
        self.reader = reader
        #: Where the reader reports how far it got (``progress.update(done, total)``).
        self.progress = progress
        self.metadata: dict[str, Any] = {}
        self.log = ReadLog()
        self._adopted: Trace | None = None  # a whole trace taken as it is (adopt)
        self._batches: list[pa.RecordBatch] = []
        # Streaming (see Reader.streams_events): each batch goes to the sink as it is added,
        # and the trace built holds no events.
        self._sink = sink
        self._table_sink = table_sink  # side-table rows too, as they are added (add_table)
        #: Event rows added so far (those given to the sink included).
        self.rows = 0
        self._bulk: dict[str, list[pa.Table]] = {}
        self._rows: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {
            "processes": {}, "threads": {}, "devices": {}, "stacks": {}, "frames": {},
        }

    # -- events -------------------------------------------------------------------------
    def add_events(self, columns: Mapping[str, ColumnData] | pa.RecordBatch | pa.Table) -> None:
        """Add event rows given as columns; absent columns (or None) are null, ``source`` is
        filled in.

        Raises PluginContractError naming the reader when a column is not in the schema or
        cannot be converted to its type.
        """
        if isinstance(columns, pa.Table):
            for batch in columns.to_batches():
                self.add_events(batch)
            return
        if isinstance(columns, pa.RecordBatch):
            columns = {name: columns.column(name) for name in columns.schema.names}
        unknown = set(columns) - set(EVENTS_SCHEMA.names)
        if unknown:
            raise PluginContractError(
                f"reader '{self.reader}' produced columns not in the event schema: "
                f"{', '.join(sorted(unknown))}")
        lengths = {len(v) for v in columns.values() if v is not None}
        if len(lengths) > 1:
            raise PluginContractError(f"reader '{self.reader}' produced columns of unequal length")
        n = lengths.pop() if lengths else 0
        if n == 0:
            return
        arrays = []
        for f in EVENTS_SCHEMA:
            if f.name == "source":
                arrays.append(pa.DictionaryArray.from_arrays(
                    pa.array(np.zeros(n, dtype=np.int32)), pa.array([self.source])))
                continue
            data = columns.get(f.name)
            arrays.append(self._column(f, data, n))
        batch = pa.RecordBatch.from_arrays(arrays, schema=EVENTS_SCHEMA)
        self.rows += n
        if self._sink is not None:
            self._sink(batch)
        else:
            self._batches.append(batch)

    def _column(self, f: pa.Field, data: ColumnData | None, n: int) -> pa.Array:
        if data is None:
            return null_column(f.type, n)
        try:
            if isinstance(data, pa.ChunkedArray):
                data = data.combine_chunks()
            arr = data if isinstance(data, pa.Array) else pa.array(data, from_pandas=True)
            if pa.types.is_dictionary(f.type) and not pa.types.is_dictionary(arr.type):
                arr = arr.cast(pa.string()).dictionary_encode()
            if arr.type != f.type:
                arr = arr.cast(f.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise PluginContractError(
                f"reader '{self.reader}': column '{f.name}' does not fit {f.type}: {exc}") from exc
        if not f.nullable and arr.null_count:
            raise PluginContractError(
                f"reader '{self.reader}': column '{f.name}' has {arr.null_count} nulls")
        return arr

    # -- side tables ----------------------------------------------------------------------
    def add_process(self, pid: int, *, name: str | None = None, host: str | None = None,
                    rank: int | None = None) -> None:
        """Add or complete the row of process ``pid`` (later non-null values win)."""
        self._upsert("processes", (pid,), {"pid": pid, "name": name, "host": host, "rank": rank})

    def add_thread(self, pid: int, tid: int, *, name: str | None = None) -> None:
        """Add or complete the row of thread ``tid`` of process ``pid``."""
        self._upsert("threads", (pid, tid), {"pid": pid, "tid": tid, "name": name})

    def add_device(self, device: int, **fields: Any) -> None:
        """Add or complete the row of ``device``; fields are the devices table's columns."""
        self._upsert("devices", (device,), {"device": device, **fields})

    def add_frame(self, frame_id: int, name: str, **fields: Any) -> None:
        """Add a frame (see the frames table)."""
        self._upsert("frames", (frame_id,), {"frame_id": frame_id, "name": name, **fields})

    def add_stack(self, stack_id: int, frame_id: int, parent_id: int | None) -> None:
        """Add a call site: ``frame_id`` called from stack ``parent_id``."""
        self._upsert("stacks", (stack_id,),
                     {"stack_id": stack_id, "parent_id": parent_id, "frame_id": frame_id})

    def add_table(self, name: str, table: pa.Table) -> None:
        """Add many rows of a side table (stacks, frames ...) at once, column-wise."""
        schema = SCHEMAS[name]
        columns = {}
        for f in schema:
            if f.name == "source":
                columns[f.name] = pa.array([self.source] * table.num_rows, type=pa.string())
            elif f.name in table.column_names:
                columns[f.name] = table[f.name].cast(f.type)
            else:
                columns[f.name] = pa.nulls(table.num_rows, f.type)
        rows = pa.table(columns, schema=schema)
        self._bulk.setdefault(name, []).append(rows)
        if self._table_sink is not None and rows.num_rows:
            self._table_sink(name, rows)

    def _upsert(self, table: str, key: tuple[Any, ...], values: dict[str, Any]) -> None:
        allowed = set(SCHEMAS[table].names)
        bad = set(values) - allowed
        if bad:
            raise PluginContractError(
                f"reader '{self.reader}': {table} has no column {', '.join(sorted(bad))}")
        row = self._rows[table].setdefault(key, {})
        for k, v in values.items():
            if v is not None or k not in row:
                row[k] = v

    # -- accounting ------------------------------------------------------------------------
    def note(self, input_kind: str, outcome: str, count: int = 1) -> None:
        """Account for ``count`` input records of ``input_kind`` (see ReadLog)."""
        self.log.note(self.source, input_kind, outcome, count)

    def adopt(self, trace: Trace) -> None:
        """Take a whole Trace as read, sources and account included (for readers of formats
        that store the event model itself, such as tracekit's Parquet datasets)."""
        if self._sink is not None:
            raise PluginContractError(f"reader '{self.reader}' streams its events "
                                      "(streams_events) and cannot adopt a whole trace")
        for name in ("events", "processes", "threads", "devices", "stacks", "frames"):
            table = trace.table(name)
            if not table.schema.equals(SCHEMAS[name]):
                raise PluginContractError(
                    f"reader '{self.reader}': the {name} table does not follow the schema")
        self._adopted = trace

    # -- result ----------------------------------------------------------------------------
    def build(self) -> Trace:
        """Return the Trace of everything added so far (streaming to a sink: all but the
        events, which the sink took)."""
        if self._adopted is not None:
            return self._adopted
        events = events_from_batches(self._batches)
        tables = {}
        for name, rows in self._rows.items():
            schema = SCHEMAS[name]
            records = list(rows.values())
            if "source" in schema.names:
                for r in records:
                    r["source"] = self.source
            try:
                tables[name] = pa.concat_tables([pa.Table.from_pylist(records, schema=schema),
                                                 *self._bulk.get(name, [])])
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise PluginContractError(f"reader '{self.reader}': bad {name} row: {exc}") from exc
        metadata = {"schema_version": SCHEMA_VERSION,
                    "sources": {self.source: {"reader": self.reader, **self.metadata}}}
        return Trace(events=events, metadata=metadata, log=self.log, **tables)
