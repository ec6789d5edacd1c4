"""MPI calls traced by ``nsys profile --trace=mpi``: the four MPI event tables as host.op
slices on the calling thread, and MPI_RANKS as the rank of each process.

The tables (NVIDIA's SQLite schema reference): every one has ``start, end, globalTid, textId``
(``textId`` is the StringIds id of the MPI function's name, ``MPI_Allreduce``; ``end`` may be
NULL). Then, by table:

* ``MPI_P2P_EVENTS``: ``commHandle, tag, remoteRank, size, requestHandle`` (sends and
  receives: ``size`` the message's bytes, ``remoteRank`` the destination or source);
* ``MPI_COLLECTIVES_EVENTS``: ``commHandle, rootRank, size, recvSize, requestHandle``
  (``size`` the bytes sent, ``recvSize`` those received);
* ``MPI_START_WAIT_EVENTS``: ``requestHandle`` (``MPI_Wait*``, ``MPI_Start*``);
* ``MPI_OTHER_EVENTS``: nothing more;
* ``MPI_RANKS``: ``globalTid, rank``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow.compute as pc
from tracekit.plugins.nsys.db import ExportDatabase, col, decode_pid, decode_tid, table_args
from tracekit.plugins.nsys.tables import Columns, _constant, _timing
from tracekit.toolkit import int_or_none

P2P = "MPI_P2P_EVENTS"
COLLECTIVES = "MPI_COLLECTIVES_EVENTS"
START_WAIT = "MPI_START_WAIT_EVENTS"
OTHER = "MPI_OTHER_EVENTS"
RANKS = "MPI_RANKS"
#: Each MPI event table and the columns of its own kept in ``args``; ``size`` (the bytes
#: sent) is the event's ``bytes``.
EVENT_TABLES: dict[str, tuple[str, ...]] = {
    P2P: ("commHandle", "tag", "remoteRank", "requestHandle"),
    COLLECTIVES: ("commHandle", "rootRank", "recvSize", "requestHandle"),
    START_WAIT: ("requestHandle",),
    OTHER: (),
}
NEEDS = ("start", "end", "textId")


def calls(db: ExportDatabase, table: str) -> Iterator[tuple[Columns, int]]:
    """One MPI event table to host.op slices on the calling thread, named from StringIds
    (as nsys shows them: ``MPI_Allreduce``), with ``bytes`` from ``size`` and the table's
    other columns in ``args``. Yields the columns of a batch and how many of its rows had no
    end (left out)."""
    db.require(table, *NEEDS)
    have = set(db.columns(table))
    keep = EVENT_TABLES[table]
    wanted = [c for c in ("start", "end", "globalTid", "textId", "size", *keep) if c in have]
    for t in db.batches(f"SELECT {', '.join(wanted)} FROM {table}"):
        ended = pc.is_valid(col(t, "end"))
        open_ = t.num_rows - (pc.sum(ended).as_py() or 0)
        if open_:
            t = t.filter(ended)
        gtid = col(t, "globalTid")
        n = t.num_rows
        out = {"kind": _constant(n, "slice"), "category": _constant(n, "host.op"),
               **_timing(t), "name": db.names(col(t, "textId")), "pid": decode_pid(gtid),
               "tid": decode_tid(gtid)}
        if "size" in t.column_names:
            out["bytes"] = col(t, "size")
        if keep:
            out["args"] = table_args(t, keep)
        yield out, open_


def process_ranks(db: ExportDatabase) -> tuple[dict[int, int], int]:
    """MPI_RANKS as {pid: rank}: the threads' ranks (globalTid) by process. Returns the
    ranks and how many rows were left out: a row whose globalTid or rank is not an integer,
    or one of a process that MPI_RANKS gives two ranks (all its rows)."""
    seen: dict[int, set[int]] = {}
    rows: dict[int, int] = {}
    bad = 0
    for gtid, rank in db.scalar_rows(f"SELECT globalTid, rank FROM {RANKS}"):
        gtid, rank = int_or_none(gtid), int_or_none(rank, 32)
        if gtid is None or rank is None or rank < 0:
            bad += 1
            continue
        pid = (gtid >> 24) & 0xFFFFFF
        seen.setdefault(pid, set()).add(rank)
        rows[pid] = rows.get(pid, 0) + 1
    ranks = {pid: next(iter(r)) for pid, r in seen.items() if len(r) == 1}
    bad += sum(rows[pid] for pid in seen if pid not in ranks)
    return ranks, bad
