"""Read-only access to SQLite inputs (Nsight Systems exports, rocprof databases): schema
facts and small results via sqlite3, bulk rows straight into Arrow via the ADBC SQLite
driver (no Python object per row). The file's bytes and mtime never change.

SQLite is dynamically typed: a damaged export can hold text, a blob or a fraction in an
INTEGER column. The rules, the same for every reader built on this module:

* Text always comes back valid UTF-8: invalid bytes become U+FFFD and are counted per
  table in ``SqliteInput.replaced`` (readers report them as warnings). Blobs are read as
  text the same way; tracekit reads no binary payloads.
* :func:`column` converts a result column to the type a reader needs. A value that is not
  of that type (text, a blob, a fraction, a number out of range) is an error naming the
  file, table and column: ``table KERNEL: column start: 3 values are not integers (first:
  'abc')``. NULL is an absent value, never an error.
* SQLite errors become one line naming the table read, never the query.
"""

from __future__ import annotations

import gzip
import re
import sqlite3
import zlib
from collections import Counter
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.errors import TraceReadError

SQLITE_MAGIC = b"SQLite format 3\x00"
# Rows per batch of SqliteInput.batches: large enough that per-batch work is negligible,
# small enough that a batch of a wide table stays in the tens of MiB.
BATCH_ROWS = 131_072
# Schema metadata keys of the tables arrow() returns: where a bad value came from.
PATH_KEY, TABLE_KEY = b"tracekit.sqlite.path", b"tracekit.sqlite.table"
_FROM = re.compile(r'\bFROM\s+"?(\w+)"?', re.IGNORECASE)
# ADBC status codes (IO:, INVALID_ARGUMENT: ...), the driver's name and its verbs.
_DRIVER_PREFIX = re.compile(r"^(\[SQLite\]\s*|[A-Z][A-Z_]+:\s*|"
                            r"Failed to (step|prepare|execute) query:\s*)+")
_DAMAGED = ("malformed", "not a database", "disk i/o error", "corrupt")


def read_only_uri(path: Path) -> str:
    """A URI that opens ``path`` read-only and immutable: no journal, no lock, no write."""
    return f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"


def reason(exc: BaseException) -> str:
    """An SQLite or driver error as a short reason: no query text, no driver prefixes, and
    a hint when the file itself is damaged."""
    text = str(exc).split("\nquery:", 1)[0].split("\n", 1)[0]
    text = _DRIVER_PREFIX.sub("", text.strip()) or type(exc).__name__
    if any(word in text.lower() for word in _DAMAGED):
        text += " (the file is damaged or truncated)"
    return text


def check_sqlite_file(path: Path) -> None:
    """Raise a TraceReadError naming what ``path`` is when it is no SQLite file: gzip data
    (SQLite is read in place, so it must be uncompressed), or anything else."""
    try:
        with path.open("rb") as f:
            magic = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise TraceReadError(f"cannot open: {exc.strerror or exc}", path=path) from exc
    if gzipped_sqlite(path):
        raise TraceReadError("gzip-compressed: an SQLite database is read in place, so "
                             "uncompress it first (gunzip)", path=path)
    if magic and magic != SQLITE_MAGIC:
        raise TraceReadError("not an SQLite file (it does not start with 'SQLite format 3')",
                             path=path)


def gzipped_sqlite(path: Path) -> bool:
    """Whether ``path`` is an SQLite file compressed with gzip (SQLite reads files in place:
    it must be uncompressed first)."""
    try:
        with path.open("rb") as raw:
            if raw.read(2) != b"\x1f\x8b":
                return False
        with gzip.open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except (OSError, EOFError, zlib.error):
        return False


class SqliteInput:
    """One SQLite file, opened read-only; closes with ``close()`` or as a context manager.

    ``replaced`` counts, per table, the strings whose invalid UTF-8 was replaced.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.replaced: Counter[str] = Counter()
        self._reading = "sqlite_master"
        self._arrow = None
        if path.is_dir():
            raise TraceReadError("is a directory, not an SQLite database", path=path)
        check_sqlite_file(path)
        try:
            self.sql = sqlite3.connect(read_only_uri(path), uri=True)
        except sqlite3.Error as exc:
            raise TraceReadError(f"cannot open as SQLite: {reason(exc)}", path=path) from exc
        self.sql.text_factory = self._decode
        try:
            self.sql.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            self.sql.close()
            raise TraceReadError(f"not a readable SQLite database: {reason(exc)}",
                                 path=path) from exc

    def __enter__(self) -> SqliteInput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close both connections."""
        self.sql.close()
        if self._arrow is not None:
            self._arrow.close()

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode()
        except UnicodeDecodeError:
            self.replaced[self._reading] += 1
            return raw.decode("utf-8", "replace")

    @cached_property
    def tables(self) -> set[str]:
        """Names of the tables and views."""
        rows = self.scalar_rows("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        return {r[0] for r in rows if isinstance(r[0], str)}

    def columns(self, table: str) -> list[str]:
        """Column names of ``table`` (empty when it does not exist)."""
        if table not in self.tables:
            return []
        return [r[1] for r in self.scalar_rows(f'PRAGMA table_info("{table}")', table=table)]

    def count(self, table: str) -> int:
        """Rows in ``table``."""
        return int(self.scalar_rows(f'SELECT count(*) FROM "{table}"')[0][0])

    def scalar_rows(self, query: str, *, table: str | None = None) -> list[tuple]:
        """Small result sets (metadata, enums) as Python rows; ``table`` names what is read in
        errors (default: the first table after FROM)."""
        self._reading = table or _table_of(query)
        try:
            return self.sql.execute(query).fetchall()
        except sqlite3.Error as exc:
            raise TraceReadError(f"cannot read: {reason(exc)}", path=self.path,
                                 location=f"table {self._reading}") from exc

    def _connect_arrow(self) -> None:
        if self._arrow is None:
            # The driver pulls in adbc_driver_manager and polars (~0.3 s): only on first use.
            import adbc_driver_sqlite.dbapi as adbc

            try:
                self._arrow = adbc.connect(read_only_uri(self.path))
            except Exception as exc:  # the driver's own error classes
                raise TraceReadError(f"cannot open as SQLite: {reason(exc)}",
                                     path=self.path) from exc

    def arrow(self, query: str, *, table: str | None = None) -> pa.Table:
        """A query's rows as an Arrow table, built column-wise by the driver; its schema
        metadata names the file and ``table`` for :func:`column`'s errors."""
        parts = list(self.batches(query, table=table))
        if len(parts) == 1:
            return parts[0]
        label = table or _table_of(query)
        if not parts:
            return pa.table({}).replace_schema_metadata({PATH_KEY: str(self.path),
                                                         TABLE_KEY: label})
        # Batches that fell back to sqlite3 can type a column differently: text wins.
        names = parts[0].column_names
        columns = []
        for i in range(len(names)):
            chunks = [p.column(i).combine_chunks() for p in parts]
            if len({c.type for c in chunks}) > 1:
                chunks = [_as_text(c) for c in chunks]
            columns.append(pa.concat_arrays(chunks))
        return pa.Table.from_arrays(columns, names=names).replace_schema_metadata(
            {PATH_KEY: str(self.path), TABLE_KEY: label})

    def batches(self, query: str, *, table: str | None = None,
                rows: int = BATCH_ROWS) -> Iterator[pa.Table]:
        """A query's rows as Arrow tables of at most ``rows`` rows each, in order, built
        column-wise by the driver: memory holds one batch, not the result. Each table's
        schema metadata names the file and ``table`` for :func:`column`'s errors; a query
        without rows yields one empty table (its columns named)."""
        label = table or _table_of(query)
        meta = {PATH_KEY: str(self.path), TABLE_KEY: label}
        self._connect_arrow()
        cursor = self._arrow.cursor()
        done = 0
        yielded = False
        try:
            try:
                cursor.adbc_statement.set_options(
                    **{"adbc.sqlite.query.batch_rows": str(rows)})
                cursor.execute(query)
                reader = cursor.fetch_record_batch()
                for batch in reader:
                    if batch.num_rows == 0 and yielded:
                        continue
                    done += batch.num_rows
                    yielded = True
                    yield self._finish(batch, label, meta)
                if not yielded:
                    yield self._finish(pa.Table.from_batches([], reader.schema), label, meta)
                return
            except TraceReadError:
                raise
            except Exception as exc:  # the driver's own error classes
                if "type mismatch" not in str(exc).lower():
                    raise TraceReadError(f"cannot read rows: {reason(exc)}", path=self.path,
                                         location=f"table {label}") from exc
        finally:
            cursor.close()
        # The driver types a column by its first batch; a column whose later values change
        # type is read on through sqlite3 from where the driver stopped, and column()
        # judges the values.
        for part in self._mixed_types(query, label, skip=done, rows=rows):
            if part.num_rows or not yielded:
                yielded = True
                yield self._finish(part, label, meta)

    def _finish(self, result: pa.Table | pa.RecordBatch, label: str,
                meta: dict[bytes, str]) -> pa.Table:
        columns = [self._text(_whole(result.column(i)), label)
                   for i in range(result.num_columns)]
        return pa.Table.from_arrays(columns, names=result.schema.names) \
            .replace_schema_metadata(meta)

    def _text(self, values: pa.Array, label: str) -> pa.Array:
        """String and binary columns as valid UTF-8 strings, invalid bytes replaced."""
        if pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type):
            try:
                return values.cast(pa.string())
            except pa.ArrowInvalid:
                pass
        elif pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            try:
                values.validate(full=True)
                return values
            except pa.ArrowInvalid:
                pass
        else:
            return values
        raw = values.cast(pa.binary()) if not pa.types.is_binary(values.type) else values
        self._reading = label
        return pa.array([None if v is None else self._decode(v) for v in raw.to_pylist()],
                        pa.string())

    def _mixed_types(self, query: str, label: str, *, skip: int = 0,
                     rows: int = BATCH_ROWS) -> Iterator[pa.Table]:
        """A query's rows through sqlite3, after the first ``skip``, in tables of ``rows``
        rows: a column of integers stays int64, of numbers float64, and one holding any
        text or blob becomes text (numbers as their decimal text, exact)."""
        self.sql.text_factory = bytes  # decoded and counted by _text
        try:
            cursor = self.sql.execute(query)
            while skip > 0:
                skip -= len(cursor.fetchmany(min(skip, rows)))
            names = [d[0] for d in cursor.description]
            first = True
            while True:
                chunk = cursor.fetchmany(rows)
                if not chunk and not first:
                    return
                first = False
                yield pa.Table.from_arrays(_typed(chunk, len(names)), names=names)
                if len(chunk) < rows:
                    return
        except sqlite3.Error as exc:
            raise TraceReadError(f"cannot read rows: {reason(exc)}", path=self.path,
                                 location=f"table {label}") from exc
        finally:
            self.sql.text_factory = self._decode


def _typed(rows: list[tuple], width: int) -> list[pa.Array]:
    """sqlite3 rows to one Arrow array per column (see ``_mixed_types``)."""
    arrays = []
    for values in (zip(*rows, strict=True) if rows else [()] * width):
        kinds = {type(v) for v in values if v is not None}
        if kinds <= {int}:
            arrays.append(pa.array(values, pa.int64()))
        elif kinds <= {int, float}:
            arrays.append(pa.array([None if v is None else float(v) for v in values],
                                   pa.float64()))
        else:
            arrays.append(pa.array([v if v is None or isinstance(v, bytes)
                                    else str(v).encode() for v in values], pa.binary()))
    return arrays


def _whole(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _as_text(values: pa.Array) -> pa.Array:
    """A column as text, numbers as their decimal text (to join batches typed apart)."""
    return values if pa.types.is_string(values.type) else values.cast(pa.string())


def _table_of(query: str) -> str:
    found = _FROM.search(query)
    return found.group(1) if found else "?"


INT64 = pa.int64()


def column(table: pa.Table, name: str, type_: pa.DataType = INT64) -> pa.Array:
    """Column ``name`` of a query result as ``type_``; all nulls when the table has none
    (columns come and go between versions of a tool's schema).

    Raises TraceReadError naming the file, table and column when values are not of
    ``type_`` (see the module's rules); strings always convert.
    """
    if name not in table.column_names:
        return pa.nulls(table.num_rows, type_)
    values = table[name].combine_chunks()
    if values.type == type_:
        return values
    if pa.types.is_string(type_) and (pa.types.is_binary(values.type)
                                      or pa.types.is_large_binary(values.type)):
        return pa.array([None if v is None else v.decode("utf-8", "replace")
                         for v in values.to_pylist()], pa.string())
    try:
        return values.cast(type_)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass
    bad = _bad_values(values, type_)
    count = int(bad.sum())
    first = values[int(np.argmax(bad))].as_py() if count else None
    if isinstance(first, bytes):
        first = first.decode("utf-8", "replace")
    if isinstance(first, str) and len(first) > 20:
        first = first[:20] + "…"
    one, many = {pa.int32(): ("a 32-bit integer", "32-bit integers"),
                 pa.int64(): ("an integer", "integers"),
                 pa.float64(): ("a number", "numbers")}.get(type_, (str(type_), str(type_)))
    meta = table.schema.metadata or {}
    path = meta.get(PATH_KEY, b"").decode() or None
    where = meta.get(TABLE_KEY, b"").decode()
    what = f"1 value is not {one}" if count == 1 else f"{count} values are not {many}"
    raise TraceReadError(f"column {name}: {what} (first: {first!r})", path=path,
                         location=f"table {where}" if where else None)


# Text as Arrow casts it (no sign +, no white space); 18 digits always fit int64.
_INTEGER = r"^-?[0-9]{1,18}$"
_NUMBER = (r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$|"
           r"^[+-]?([iI][nN][fF]([iI][nN][iI][tT][yY])?|[nN][aA][nN])$")


def _bad_values(values: pa.Array, type_: pa.DataType) -> np.ndarray:
    """Per row, whether a non-null value does not convert to ``type_`` (the error path,
    vectorized: a damaged column can have millions of rows)."""
    bad = _bad_by_kind(values, type_)
    if bad.any():
        return bad
    # A value that the vectorized rules accept and Arrow does not: find it one by one.
    bad = np.zeros(len(values), dtype=bool)
    for i, value in enumerate(values.to_pylist()):
        try:
            pa.array([value], values.type).cast(type_)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            bad[i] = True
    return bad


def _bad_by_kind(values: pa.Array, type_: pa.DataType) -> np.ndarray:
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        text = values
        if pa.types.is_integer(type_):
            good = pc.fill_null(pc.match_substring_regex(text, _INTEGER), False)
            # Longer digit strings: few, checked exactly.
            long = pc.fill_null(pc.match_substring_regex(text, r"^-?[0-9]{19,}$"), False)
            good_np = good.to_numpy(zero_copy_only=False).copy()
            for i in np.flatnonzero(long.to_numpy(zero_copy_only=False)):
                good_np[i] = -(1 << 63) <= int(text[i].as_py()) < 1 << 63
            parsed = pc.if_else(pa.array(good_np), text, None).cast(pa.int64())
            return valid & ~good_np | _bad_by_kind(parsed, type_)
        if pa.types.is_floating(type_):
            good = pc.fill_null(pc.match_substring_regex(text, _NUMBER), False)
            return valid & ~good.to_numpy(zero_copy_only=False)
    if pa.types.is_floating(values.type) and pa.types.is_integer(type_):
        info = np.iinfo(type_.to_pandas_dtype())
        x = values.fill_null(0).to_numpy(zero_copy_only=False)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(x) & (np.floor(x) == x) & (x >= info.min) & (x < -float(info.min))
        return valid & ~ok
    if pa.types.is_integer(values.type) and pa.types.is_integer(type_):
        info = np.iinfo(type_.to_pandas_dtype())
        x = values.fill_null(0).to_numpy(zero_copy_only=False)
        return valid & ((x < info.min) | (x > info.max))
    if pa.types.is_integer(values.type) and pa.types.is_floating(type_):
        return np.zeros(len(values), dtype=bool)
    return valid  # a blob, a list ...: nothing of it converts


def int_or_none(value: object, bits: int = 64) -> int | None:
    """A scalar from a metadata row as an integer of ``bits`` bits, or None when it is not
    one (text, a blob, a fraction, out of range): descriptive fields are skipped with a
    warning rather than failing the read."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    limit = 1 << (bits - 1)
    return value if -limit <= value < limit else None


def text_or_none(value: object) -> str | None:
    """A scalar from a metadata row as text (numbers as their decimal text)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def table_names(path: Path) -> set[str] | None:
    """The tables and views of an SQLite file, or None when it cannot be opened (for
    sniffing: a reader claims a database by what it holds)."""
    try:
        with SqliteInput(path) as db:
            return db.tables
    except TraceReadError:
        return None
