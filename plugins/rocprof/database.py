"""Reader for rocprof's SQLite outputs: rocpd databases (rocprofv3's default from ROCm 7)
and rocprof v1's results.db."""

from __future__ import annotations

import tracekit
from tracekit.builder import TraceBuilder
from tracekit.errors import TraceReadError
from tracekit.inputs import Source
from tracekit.plugins.rocprof import rocpd, v1db
from tracekit.plugins.rocprof.side import CLOCK, add_side_tables
from tracekit.sqlite import SQLITE_MAGIC, SqliteInput, table_names


class RocprofDatabaseReader(tracekit.Reader):
    """rocpd SQLite (rocprofv3) and rocprof v1 results.db."""

    name = "rocprof-db"
    description = "AMD rocprof SQLite: rocpd databases (rocprofv3) and rocprof v1 results.db"
    extensions = (".db",)

    @classmethod
    def sniff(cls, source: Source) -> float:
        if source.is_dir or not source.head.startswith(SQLITE_MAGIC):
            return 0.0
        tables = table_names(source.path) or set()
        return 0.95 if rocpd.is_rocpd(tables) or v1db.is_v1_db(tables) else 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        with SqliteInput(source.path) as db:
            if rocpd.is_rocpd(db.tables):
                self._read_rocpd(db, out)
            elif v1db.is_v1_db(db.tables):
                self._read_v1(db, out)
            else:
                raise TraceReadError("not a rocprof database: no rocpd_* views and none of "
                                     "rocprof v1's HIP, HSA, OPS, COPY, KERN, rocTX tables",
                                     path=source.path)

    @staticmethod
    def _read_rocpd(db: SqliteInput, out: TraceBuilder) -> None:
        parts, unread = rocpd.read(db)
        for view, columns, table_rows in parts:
            out.add_events(columns)
            written = len(columns["category"])
            out.note(view, "events", written)
            if written != table_rows:
                out.note(view, "skipped: left out by the view's joins", table_rows - written)
        for table, rows in unread.items():
            out.note(table, "skipped: table not read yet", rows)
        side = rocpd.side_tables(db)
        for p in side["processes"]:
            out.add_process(**p)
        for t in side["threads"]:
            out.add_thread(**t)
        add_side_tables([c for _, c, _ in parts], out)
        for d in side["devices"]:
            out.add_device(vendor="amd", kind="gpu", **d)
        version = dict(db.scalar_rows("SELECT tag, value FROM rocpd_metadata"))
        out.metadata.update({"format": "rocpd SQLite", "tool": "rocprofv3", "clock": CLOCK,
                             "schema_version": version.get("schema_version")})

    @staticmethod
    def _read_v1(db: SqliteInput, out: TraceBuilder) -> None:
        parts, unread = v1db.read(db)
        for table, columns in parts:
            out.add_events(columns)
            out.note(table, "events", len(columns["category"]))
        for table, rows in unread.items():
            out.note(table, "skipped: table not read yet", rows)
        add_side_tables([c for _, c in parts], out)
        out.metadata.update({"format": "rocprof v1 results.db", "tool": "rocprof",
                             "clock": CLOCK})

