"""Reader for rocprof's SQLite outputs: rocpd databases (rocprofv3's default from ROCm 7)
and rocprof v1's results.db."""

from __future__ import annotations

import tracekit
from tracekit import Source, TraceBuilder, TraceReadError
from tracekit.plugins.rocprof import agents, rocpd, v1db
from tracekit.plugins.rocprof.columns import OutOfRange, finish
from tracekit.plugins.rocprof.side import CLOCK, SeenIds, add_side_tables
from tracekit.toolkit import SQLITE_MAGIC, SqliteInput, table_names


class RocprofDatabaseReader(tracekit.Reader):
    """rocpd SQLite (rocprofv3) and rocprof v1 results.db."""

    name = "rocprof-db"
    description = "AMD rocprof SQLite: rocpd databases (rocprofv3) and rocprof v1 results.db"
    extensions = (".db",)
    # rocpd views leave a fetched batch at a time (a v1 results.db: a table at a time).
    streams_events = True

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
        seen = SeenIds()  # what each batch names: the batches leave as they are read
        try:
            views, unread = rocpd.read(db)
            for view, batches, table_rows in views:
                written = 0
                for columns in batches:
                    _add(db, out, view, columns, "view", written)
                    seen.update(columns)
                    written += len(columns["category"])
                out.note(view, "events", written)
                if written != table_rows:
                    out.note(view, "skipped: left out by the view's joins",
                             table_rows - written)
        except OutOfRange as exc:
            raise TraceReadError(exc.message(), path=db.path, location=exc.where) from None
        for table, rows in unread.items():
            out.note(table, "skipped: tracekit does not read this table", rows)
        side, bad = rocpd.side_tables(db)
        for p in side["processes"]:
            out.add_process(**p)
        for t in side["threads"]:
            out.add_thread(**t)
        for view, n in bad.items():
            out.note(view, "skipped: rows whose id is not an integer", n)
        seen.add_to(out)
        for d in side["devices"]:
            out.add_device(vendor="amd", kind="gpu", **d)
        version = None
        try:
            version = dict((tag, value) for tag, value in db.scalar_rows(
                "SELECT tag, value FROM rocpd_metadata")).get("schema_version")
        except TraceReadError as exc:
            out.note("rocpd_metadata", f"warning: not read ({exc.message})")
        except TypeError:  # a tag that cannot be a key (a blob)
            out.note("rocpd_metadata", "warning: not read (tags that are not text)")
        _note_replaced(db, out)
        out.metadata.update({"format": "rocpd SQLite", "tool": "rocprofv3", "clock": CLOCK,
                             "schema_version": version if isinstance(version, str | int)
                             else None})

    @staticmethod
    def _read_v1(db: SqliteInput, out: TraceBuilder) -> None:
        try:
            parts, unread = v1db.read(db)
        except OutOfRange as exc:
            raise TraceReadError(exc.message(), path=db.path, location=exc.where) from None
        for table, columns in parts:
            _add(db, out, table, columns, "table")
            out.note(table, "events", len(columns["category"]))
        for table, rows in unread.items():
            out.note(table, "skipped: tracekit does not read this table", rows)
        add_side_tables([c for _, c in parts], out)
        gpus, found_in = agents.beside([db.path])
        agents.add(out, gpus, found_in or "", agents.used_devices([c for _, c in parts]))
        _note_replaced(db, out)
        out.metadata.update({"format": "rocprof v1 results.db", "tool": "rocprof",
                             "clock": CLOCK})


def _add(db: SqliteInput, out: TraceBuilder, table: str, columns: dict, what: str,
         first_row: int = 0) -> None:
    """Add the events of one table (or view), or of a batch of its rows starting at
    ``first_row``, made to fit the model."""
    try:
        warnings = finish(columns)
    except OutOfRange as exc:
        raise TraceReadError(exc.message(), path=db.path,
                             location=f"{what} {table}, row {first_row + exc.row + 1}") from None
    for text, n in warnings:
        out.note(table, text, n)
    out.add_events(columns)


def _note_replaced(db: SqliteInput, out: TraceBuilder) -> None:
    """Warn of the strings whose invalid UTF-8 the database module replaced."""
    for table, n in sorted(db.replaced.items()):
        out.note(table, "warning: text with invalid UTF-8, replaced with U+FFFD", n)
