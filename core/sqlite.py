"""Read-only access to SQLite inputs (Nsight Systems exports, rocprof databases): schema
facts and small results via sqlite3, bulk rows straight into Arrow via the ADBC SQLite
driver (no Python object per row). The file's bytes and mtime never change."""

from __future__ import annotations

import sqlite3
from functools import cached_property
from pathlib import Path
from urllib.parse import quote

import adbc_driver_sqlite.dbapi as adbc
import pyarrow as pa
from tracekit.errors import TraceReadError

SQLITE_MAGIC = b"SQLite format 3\x00"


def read_only_uri(path: Path) -> str:
    """A URI that opens ``path`` read-only and immutable: no journal, no lock, no write."""
    return f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"


class SqliteInput:
    """One SQLite file, opened read-only; closes with ``close()`` or as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.sql = sqlite3.connect(read_only_uri(path), uri=True)
            # Real files hold invalid UTF-8 (e.g. environment values): keep what decodes.
            self.sql.text_factory = lambda b: b.decode("utf-8", "replace")
            self.sql.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as exc:
            raise TraceReadError(f"not a readable SQLite database: {exc}", path=path) from exc
        self._arrow = None

    def __enter__(self) -> SqliteInput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close both connections."""
        self.sql.close()
        if self._arrow is not None:
            self._arrow.close()

    @cached_property
    def tables(self) -> set[str]:
        """Names of the tables and views."""
        rows = self.sql.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        return {r[0] for r in rows}

    def columns(self, table: str) -> list[str]:
        """Column names of ``table`` (empty when it does not exist)."""
        if table not in self.tables:
            return []
        return [r[1] for r in self.sql.execute(f'PRAGMA table_info("{table}")')]

    def count(self, table: str) -> int:
        """Rows in ``table``."""
        return int(self.scalar_rows(f'SELECT count(*) FROM "{table}"')[0][0])

    def scalar_rows(self, query: str) -> list[tuple]:
        """Small result sets (metadata, enums) as Python rows."""
        try:
            return self.sql.execute(query).fetchall()
        except sqlite3.DatabaseError as exc:
            raise TraceReadError(f"query failed: {exc}", path=self.path) from exc

    def arrow(self, query: str) -> pa.Table:
        """A query's rows as an Arrow table, built column-wise by the driver."""
        if self._arrow is None:
            self._arrow = adbc.connect(read_only_uri(self.path))
        cursor = self._arrow.cursor()
        try:
            cursor.execute(query)
            return cursor.fetch_arrow_table()
        except Exception as exc:  # the driver's own error classes
            raise TraceReadError(f"reading rows failed: {exc}", path=self.path) from exc
        finally:
            cursor.close()


INT64 = pa.int64()


def column(table: pa.Table, name: str, type_: pa.DataType = INT64) -> pa.Array:
    """Column ``name`` of a query result as ``type_``; all nulls when the table has none
    (columns come and go between versions of a tool's schema)."""
    if name not in table.column_names:
        return pa.nulls(table.num_rows, type_)
    return table[name].combine_chunks().cast(type_)


def table_names(path: Path) -> set[str] | None:
    """The tables and views of an SQLite file, or None when it cannot be opened (for
    sniffing: a reader claims a database by what it holds)."""
    try:
        with SqliteInput(path) as db:
            return db.tables
    except TraceReadError:
        return None
