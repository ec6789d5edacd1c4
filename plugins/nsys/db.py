"""An Nsight Systems SQLite export: its string table, enums and column helpers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import TraceReadError
from tracekit.toolkit import SqliteInput, int_or_none, text_or_none
from tracekit.toolkit import sqlite_column as col

UNKNOWN_NAME = "[unknown]"


class MissingColumn(TraceReadError):
    """``table`` lacks ``column``, which the reader cannot do without. Fails the read for the
    core tables; the reader skips an optional table that raises it, counted."""

    def __init__(self, table: str, column: str, path: Path) -> None:
        super().__init__(f"column {column} is missing (not an nsys export this reader knows, "
                         "or a damaged one)", path=path, location=f"table {table}")
        self.table, self.column = table, column


class ExportDatabase(SqliteInput):
    """One Nsight Systems export, opened read-only, with its string table.

    ``notes`` collects (table, outcome) counts met while converting (warnings, skipped
    rows); the reader passes them on to the trace's read log. ``rows_read`` counts the
    rows fetched in batches so far, and ``on_rows`` is called with it after each batch.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.notes: Counter[tuple[str, str]] = Counter()
        self.rows_read = 0
        self.on_rows: Callable[[int], None] = lambda rows: None

    def batches(self, query: str, **options: Any) -> Iterator[pa.Table]:
        """The rows of ``query`` in Arrow batches (see SqliteInput.batches), counted."""
        for part in super().batches(query, **options):
            self.rows_read += part.num_rows
            self.on_rows(self.rows_read)
            yield part

    def size(self, table: str) -> int:
        """About how many rows ``table`` holds (its largest rowid: no scan), for progress;
        0 when unknown."""
        try:
            value = self.scalar_rows(f'SELECT max(rowid) FROM "{table}"')[0][0]
        except TraceReadError:  # a view, or a table without rowid: no estimate
            return 0
        return value if isinstance(value, int) and value > 0 else 0

    def note(self, table: str, outcome: str, count: int = 1) -> None:
        """Count ``count`` rows of ``table`` with ``outcome`` (nothing when 0)."""
        if count:
            self.notes[(table, outcome)] += count

    def require(self, table: str, *columns: str) -> None:
        """MissingColumn when ``table`` lacks a column the reader cannot do without."""
        have = set(self.columns(table))
        for name in columns:
            if name not in have:
                raise MissingColumn(table, name, self.path)

    @cached_property
    def strings(self) -> pa.Table:
        """StringIds as (id, value), sorted by id; rows without an id are left out."""
        self.require("StringIds", "id", "value")
        table = self.arrow("SELECT id, value FROM StringIds WHERE id IS NOT NULL ORDER BY id")
        return pa.table({"id": col(table, "id"), "value": col(table, "value", pa.string())})

    def names(self, ids: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
        """StringIds references to a dictionary array of their strings; NULL ids, ids not
        in StringIds and NULL strings are null."""
        ids = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
        values = self.strings["value"].combine_chunks()
        position = pc.index_in(ids.cast(pa.int64()), value_set=self.strings["id"])
        if values.null_count:
            known = pc.is_valid(pc.take(values, pc.fill_null(position, 0))) if len(values) \
                else pa.nulls(len(position), pa.bool_())
            position = pc.if_else(pc.fill_null(known, False), position,
                                  pa.scalar(None, position.type))
            values = pc.fill_null(values, "")  # no longer referenced; Arrow cannot unify nulls
        return pa.DictionaryArray.from_arrays(position.cast(pa.int32()), values)

    def enum(self, table: str) -> dict[int, tuple[str | None, str | None]]:
        """An ENUM_* table as {id: (name, label)}; {} when the export has none. Rows whose
        id is not an integer are left out with a warning."""
        cols = self.columns(table)
        if "id" not in cols:
            return {}
        name = "name" if "name" in cols else "NULL"
        label = "label" if "label" in cols else "NULL"
        out = {}
        for code, *texts in self.scalar_rows(f'SELECT id, {name}, {label} FROM "{table}"'):
            if (key := int_or_none(code)) is None:
                self.note(table, "warning: row ignored: id is not an integer")
                continue
            out[key] = (text_or_none(texts[0]), text_or_none(texts[1]))
        return out


def fill_names(names: pa.Array, placeholder: str = UNKNOWN_NAME) -> tuple[pa.Array, int]:
    """Null names replaced by ``placeholder``; returns the names and how many were null."""
    missing = names.null_count
    if not missing:
        return names, 0
    if pa.types.is_dictionary(names.type):
        dictionary = pa.concat_arrays([pc.fill_null(names.dictionary.cast(pa.string()), ""),
                                       pa.array([placeholder], pa.string())])
        indices = pc.fill_null(names.indices, pa.scalar(len(dictionary) - 1,
                                                        names.indices.type))
        return pa.DictionaryArray.from_arrays(indices, dictionary), missing
    return pc.fill_null(names.cast(pa.string()), placeholder), missing


INT64 = pa.int64()


def decode_pid(global_id: pa.Array) -> pa.Array:
    """Process id from a globalTid/globalPid: bits 24-47 (the VM and HW bytes masked)."""
    return pc.bit_wise_and(pc.shift_right(global_id, 24), 0xFFFFFF)


def decode_tid(global_tid: pa.Array) -> pa.Array:
    """Thread id from a globalTid: bits 0-23."""
    return pc.bit_wise_and(global_tid, 0xFFFFFF)


def valid_id(values: pa.Array) -> pa.Array:
    """Null out CUPTI's 'invalid' sentinels (all ones as uint32 or int64 -1)."""
    arr = values.cast(pa.int64())
    bad = pc.or_(pc.equal(arr, 0xFFFFFFFF), pc.equal(arr, -1))
    return pc.if_else(pc.fill_null(bad, False), pa.scalar(None, pa.int64()), arr)


def label_array(codes: pa.Array, mapping: dict[int, str | None]) -> pa.DictionaryArray:
    """Integer codes to a dictionary of labels (unknown codes become null)."""
    keys = sorted(mapping)
    values = pa.array([mapping[k] for k in keys], type=pa.string())
    position = pc.index_in(codes.cast(pa.int64()), value_set=pa.array(keys, type=pa.int64()))
    position = pc.if_else(pc.is_valid(pc.take(values, pc.fill_null(position, 0)))
                          if len(keys) else pa.nulls(len(codes), pa.bool_()),
                          position, pa.scalar(None, pa.int32()))
    return pa.DictionaryArray.from_arrays(position.cast(pa.int32()),
                                          values if len(keys) else pa.array([], pa.string()))


def numeric_json(columns: dict[str, pa.Array]) -> pa.Array:
    """Per row a JSON object of numeric columns, built with Arrow string kernels; null
    members are left out, and a row with none is null."""
    if not columns:
        raise ValueError("no columns")
    n = len(next(iter(columns.values())))
    # A column of nulls adds nothing; columns without nulls (the usual case) are joined in
    # one pass with their keys, with no member strings built and no leading comma to cut.
    columns = {k: v for k, v in columns.items() if v.null_count < len(v)}
    if not columns:
        return pa.nulls(n, pa.string())
    if not any(v.null_count for v in columns.values()):
        pieces: list[pa.Array | str] = []
        for i, (key, values) in enumerate(columns.items()):
            pieces += [("{" if i == 0 else ",") + f'"{key}":', values.cast(pa.string())]
        return pc.binary_join_element_wise(*pieces, "}", "")
    members = [pc.fill_null(pc.binary_join_element_wise(f',"{key}":', values.cast(pa.string()),
                                                        ""), "")
               for key, values in columns.items()]
    body = pc.binary_join_element_wise(*members, "") if len(members) > 1 else members[0]
    obj = pc.binary_join_element_wise("{", pc.utf8_slice_codeunits(body, 1), "}", "")
    return pc.if_else(pc.equal(body, ""), pa.scalar(None, pa.string()), obj)


def table_args(table: pa.Table, names: tuple[str, ...],
               convert: Callable[[pa.Table, str], pa.Array] | None = None) -> pa.Array | None:
    """``args`` of the rows: a JSON object of those numeric columns in ``names`` that this
    export has (their set varies by schema version); None when it has none of them."""
    present = [c for c in names if c in table.column_names]
    if not present:
        return None
    convert = convert or col
    return numeric_json({c: convert(table, c) for c in present})


def np_int(values: pa.Array, fill: int = 0) -> np.ndarray:
    """An int64 numpy view of an Arrow column, nulls as ``fill``."""
    return values.cast(pa.int64()).fill_null(fill).to_numpy(zero_copy_only=False)
