"""The event model as Arrow: schemas built from ``tracekit.schemas`` and the ``Trace`` container."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from tracekit.schemas import event_model

SCHEMA_VERSION = str(event_model()["version"])
TABLE_NAMES = tuple(event_model()["tables"])

_TYPES: dict[str, pa.DataType] = {
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "string": pa.string(),
    "dictionary<string>": pa.dictionary(pa.int32(), pa.string()),
}


def _build_schema(table: str) -> pa.Schema:
    spec = event_model()["tables"][table]
    fields = []
    for col in spec["columns"]:
        meta = {"doc": col["doc"]}
        if col["unit"]:
            meta["unit"] = col["unit"]
        fields.append(pa.field(col["name"], _TYPES[col["type"]], col["nullable"], metadata=meta))
    return pa.schema(fields, metadata={"tracekit.schema_version": SCHEMA_VERSION, "table": table})


SCHEMAS: dict[str, pa.Schema] = {name: _build_schema(name) for name in TABLE_NAMES}
EVENTS_SCHEMA = SCHEMAS["events"]
CATEGORIES: dict[str, str] = dict(event_model()["categories"])
#: Ids (pid, tid, stream) at or below this are synthetic: a reader gave them to a name that is
#: not a number; writers show them by name (schema ``conventions.synthetic_id_max``).
SYNTHETIC_ID_MAX: int = int(event_model()["conventions"]["synthetic_id_max"]["value"])


def empty_table(table: str) -> pa.Table:
    """Return an empty table with the schema of ``table``."""
    return SCHEMAS[table].empty_table()


def events_from_batches(batches: list[pa.RecordBatch]) -> pa.Table:
    """The events table of ``batches`` (of ``EVENTS_SCHEMA``), their dictionaries unified
    but their chunks kept: combining them would copy every column at once, doubling the peak
    memory of a large read; consumers combine the columns they need."""
    if not batches:
        return EVENTS_SCHEMA.empty_table()
    return pa.Table.from_batches(batches, schema=EVENTS_SCHEMA).unify_dictionaries()


@dataclass
class ReadLog:
    """What a reader saw in its input and what became of it, so nothing is dropped silently.

    ``outcomes[(source, input_kind, outcome)]`` counts input records; ``outcome`` is
    ``"events"`` for records that became event rows, a phrase such as ``"process and thread
    names"`` for records folded into another table, or ``"skipped: <reason>"``.
    """

    outcomes: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def note(self, source: str, input_kind: str, outcome: str, count: int = 1) -> None:
        """Record that ``count`` records of ``input_kind`` had ``outcome``."""
        if count:
            self.outcomes[(source, input_kind, outcome)] += count

    def skipped(self) -> dict[tuple[str, str, str], int]:
        """Return the counts of records that were not represented at all."""
        return {k: v for k, v in self.outcomes.items() if k[2].startswith("skipped")}

    def notices(self) -> dict[tuple[str, str, str], int]:
        """Counts a user must be told about: skipped records and reader warnings."""
        return {k: v for k, v in self.outcomes.items()
                if k[2].startswith(("skipped", "warning"))}

    def merge(self, other: ReadLog) -> None:
        """Add ``other``'s counts to this log."""
        self.outcomes.update(other.outcomes)


@dataclass
class Trace:
    """A trace in the tracekit event model: Arrow tables plus metadata.

    ``metadata["sources"]`` maps each source name to what its reader recorded (format,
    tool version, clock ...). ``log`` says how the input records were represented.
    ``cache`` holds what components compute from the trace once and share.
    """

    events: pa.Table
    processes: pa.Table = field(default_factory=lambda: empty_table("processes"))
    threads: pa.Table = field(default_factory=lambda: empty_table("threads"))
    devices: pa.Table = field(default_factory=lambda: empty_table("devices"))
    stacks: pa.Table = field(default_factory=lambda: empty_table("stacks"))
    frames: pa.Table = field(default_factory=lambda: empty_table("frames"))
    metadata: dict[str, Any] = field(default_factory=dict)
    log: ReadLog = field(default_factory=ReadLog)
    #: What components derive from this trace and share, by a key of their own (an analyzer
    #: plugin's activity index, say). Never copied: ``dataclasses.replace`` starts a new one.
    cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False,
                                  compare=False)

    def table(self, name: str) -> pa.Table:
        """Return the model table called ``name``."""
        if name not in TABLE_NAMES:
            raise KeyError(name)
        return getattr(self, name)

    @property
    def sources(self) -> list[str]:
        """Names of the inputs this trace was read from, in order (none if the metadata does
        not name them as an object)."""
        sources = self.metadata.get("sources") if isinstance(self.metadata, dict) else None
        return list(sources) if isinstance(sources, dict) else []


def concat_traces(traces: list[Trace]) -> Trace:
    """Combine traces read from several inputs into one (each row keeps its ``source``).

    Stack and frame ids are renumbered so that the inputs' trees stay apart.
    """
    if len(traces) == 1:
        return traces[0]
    stacks, frames, events = [], [], []
    offset = 0
    for t in traces:
        ev = t.events
        if offset and t.stacks.num_rows:
            ev = _shift(ev, "stack_id", offset)
            stacks.append(_shift(_shift(_shift(t.stacks, "stack_id", offset),
                                        "parent_id", offset), "frame_id", offset))
            frames.append(_shift(t.frames, "frame_id", offset))
        else:
            stacks.append(t.stacks)
            frames.append(t.frames)
        events.append(ev)
        if t.stacks.num_rows or t.frames.num_rows:
            top = max(_max(t.stacks, "stack_id"), _max(t.frames, "frame_id"))
            offset += top + 1
    log = ReadLog()
    metadata: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "sources": {}}
    for t in traces:
        log.merge(t.log)
        metadata["sources"].update(t.metadata.get("sources", {}))
    return Trace(
        events=pa.concat_tables(events, promote_options="permissive").unify_dictionaries(),
        processes=pa.concat_tables([t.processes for t in traces]),
        threads=pa.concat_tables([t.threads for t in traces]),
        devices=pa.concat_tables([t.devices for t in traces]),
        stacks=pa.concat_tables(stacks),
        frames=pa.concat_tables(frames),
        metadata=metadata,
        log=log,
    )


def _max(table: pa.Table, column: str) -> int:
    value = pc.max(table[column]).as_py() if table.num_rows else None
    return int(value) if value is not None else 0


def _shift(table: pa.Table, column: str, by: int) -> pa.Table:
    idx = table.schema.get_field_index(column)
    shifted = pc.add(table[column], pa.scalar(by, pa.int64()))
    return table.set_column(idx, table.schema.field(idx), shifted)
