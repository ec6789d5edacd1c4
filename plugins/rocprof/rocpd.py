"""rocpd SQLite, the ROCm 7 default output of rocprofv3 (``--output-format rocpd``).

The tables carry the run's GUID in their names (``rocpd_region_<guid>``); the database also
defines views over them, joined with processes, threads, agents and strings, and tracekit
reads those views: ``regions`` (API calls and markers), ``kernels``, ``memory_copies`` and
``memory_allocations`` (scratch included). The views' inner joins can leave a row out, so
every view is counted against the table it reads and the difference reported.

The internal correlation id (the one the CSV output writes) is the event's ``stack_id``;
``corr_id`` holds the external one. Agents are numbered by ``absolute_index``, as the CSV
output's ``Agent_Id`` is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.rocprof.columns import (
    OutOfRange,
    api_events,
    duration,
    grid_columns,
    signed_bytes,
)
from tracekit.toolkit import SqliteInput
from tracekit.toolkit import sqlite_column as column

Columns = dict[str, Any]
# view read -> the table view whose rows it should cover
VIEWS = {"regions": "rocpd_region", "kernels": "rocpd_kernel_dispatch",
         "memory_copies": "rocpd_memory_copy", "memory_allocations": "rocpd_memory_allocate"}
# Tables whose rows become events only through the views above, or are descriptions.
DESCRIPTIVE = ("rocpd_metadata", "rocpd_string", "rocpd_info_", "rocpd_event", "rocpd_arg",
               "rocpd_track", "sqlite_")


def is_rocpd(tables: set[str]) -> bool:
    """Whether an SQLite file is a rocpd database."""
    return "rocpd_metadata" in tables and "rocpd_kernel_dispatch" in tables


def _int(t: pa.Table, name: str) -> pa.Array:
    return column(t, name)


def _text(t: pa.Table, name: str) -> pa.Array:
    return column(t, name, pa.string())


def read(db: SqliteInput) -> tuple[list[tuple[str, Iterator[Columns], int]], dict[str, int]]:
    """(view, its event columns a batch of rows at a time, rows of its table) for each view
    with rows, and the rows of other tables that are not read. Each batch is fetched and
    converted as it is iterated (OutOfRange then, naming its row in the view)."""
    out = []
    for view, table in VIEWS.items():
        rows = db.count(table)
        if not rows or view not in db.tables:
            continue
        # Kernels take the sizes of the calls that launched them, read first.
        convert = functools.partial(_kernels, sizes=_CallSizes.of(db)) \
            if view == "kernels" else CONVERT[view]
        out.append((view, _batches(db, view, convert), rows))
    unread = {}
    for table in ("rocpd_pmc_event", "rocpd_sample"):
        if table in db.tables and (n := db.count(table)):
            unread[table] = n
    return out, unread


def _batches(db: SqliteInput, view: str, convert: Callable[[pa.Table], Columns]
             ) -> Iterator[Columns]:
    """The event columns of ``view``, a fetched batch of rows at a time."""
    before = 0
    for t in db.batches(f'SELECT * FROM "{view}"'):
        try:
            yield convert(t)
        except OutOfRange as exc:
            exc.row += before
            exc.where = f"view {view}, row {exc.row + 1}"
            raise
        before += t.num_rows


def _regions(t: pa.Table) -> Columns:
    """API calls and markers: see ``api_events``."""
    return api_events(_text(t, "category"), _text(t, "name"), _int(t, "start"),
                      _int(t, "end"), _int(t, "pid"), _int(t, "tid"), _int(t, "stack_id"))


class _CallSizes:
    """The ``sizeBytes`` argument of each call that has one (hipMemset, hipMemcpy …), by the
    call's stack id, which the device work it launched carries: the bytes of the fills and
    copies the runtime runs as kernels (``__amd_rocclr_fillBufferAligned``). Each size is
    given to the first kernel of its call only, across batches."""

    def __init__(self, stacks: np.ndarray, sizes: np.ndarray) -> None:
        order = np.argsort(stacks)
        self.stacks, self.sizes = stacks[order], sizes[order]
        self.given = np.zeros(len(stacks), dtype=bool)

    @classmethod
    def of(cls, db: SqliteInput) -> _CallSizes:
        pairs = []
        if {"rocpd_arg", "rocpd_event"} <= db.tables:
            for stack, value in db.scalar_rows(
                    "SELECT E.stack_id, A.value FROM rocpd_arg A JOIN rocpd_event E "
                    "ON E.id = A.event_id AND E.guid = A.guid WHERE A.name = 'sizeBytes'"):
                size = _id(int(value)) if isinstance(value, str) and value.isdigit() else None
                if _id(stack) is not None and size is not None:
                    pairs.append((stack, size))
        stacks, sizes = zip(*pairs, strict=True) if pairs else ((), ())
        return cls(np.array(stacks, dtype=np.int64), np.array(sizes, dtype=np.int64))

    def bytes_of(self, stack: pa.Array) -> pa.Array:
        """Per kernel of a batch (by its stack id), the size of the call that launched it,
        where that call has one and no earlier kernel took it."""
        out = np.zeros(len(stack), dtype=np.int64)
        take = np.zeros(len(stack), dtype=bool)
        if len(self.stacks):
            ids = stack.fill_null(-1).to_numpy(zero_copy_only=False)
            at = np.minimum(np.searchsorted(self.stacks, ids), len(self.stacks) - 1)
            rows = np.flatnonzero(self.stacks[at] == ids)
            calls, first = np.unique(at[rows], return_index=True)
            fresh = ~self.given[calls]
            rows, calls = rows[first[fresh]], calls[fresh]
            self.given[calls] = True
            out[rows], take[rows] = self.sizes[calls], True
        return pa.array(out, mask=~take)


def _kernels(t: pa.Table, sizes: _CallSizes) -> Columns:
    """Kernel dispatches; one launched by a call with a ``sizeBytes`` argument (``sizes``)
    takes it as its bytes, the first one only where the call ran several."""
    n = t.num_rows
    grid = [_int(t, f"grid_{a}") for a in "xyz"]
    args = pc.binary_join_element_wise(
        '{"dispatch_id":', _int(t, "dispatch_id").cast(pa.string()),
        ',"kernel_id":', _int(t, "kernel_id").cast(pa.string()),
        ',"queue_id":', _int(t, "queue_id").cast(pa.string()),
        ',"grid_size":[', pc.binary_join_element_wise(*[g.cast(pa.string()) for g in grid],
                                                      ","), "]}", "")
    return {"kind": ["slice"] * n, "category": ["gpu.kernel"] * n, "name": _text(t, "name"),
            "ts_ns": _int(t, "start"), "dur_ns": duration(_int(t, "start"), _int(t, "end")),
            "pid": _int(t, "pid"), "device": _int(t, "agent_abs_index"),
            "stream": _int(t, "stream_id"), "correlation": _int(t, "stack_id"),
            **grid_columns(grid, [_int(t, f"workgroup_{a}") for a in "xyz"]),
            "registers": _int(t, "vgpr_count"),
            "shared_mem_bytes": _int(t, "lds_size"), "args": args,
            "bytes": sizes.bytes_of(_int(t, "stack_id"))}


def _copy_kind(src: pa.Array, dst: pa.Array) -> pa.Array:
    pair = pc.binary_join_element_wise(pc.fill_null(src, "?"), pc.fill_null(dst, "?"), ">")
    kinds = {"CPU>GPU": "HtoD", "GPU>CPU": "DtoH", "GPU>GPU": "DtoD", "CPU>CPU": "HtoH"}
    keys = pa.array(list(kinds))
    return pa.array(list(kinds.values())).take(pc.index_in(pair, value_set=keys))


def _memory_copies(t: pa.Table) -> Columns:
    n = t.num_rows
    to_device = pc.equal(_text(t, "dst_agent_type"), "GPU")
    device = pc.if_else(to_device, _int(t, "dst_agent_abs_index"),
                        _int(t, "src_agent_abs_index"))
    return {"kind": ["slice"] * n, "category": ["gpu.memcpy"] * n, "name": _text(t, "name"),
            "ts_ns": _int(t, "start"), "dur_ns": duration(_int(t, "start"), _int(t, "end")),
            "pid": _int(t, "pid"), "device": device, "stream": _int(t, "stream_id"),
            "correlation": _int(t, "stack_id"), "bytes": _int(t, "size"),
            "copy_kind": _copy_kind(_text(t, "src_agent_type"), _text(t, "dst_agent_type"))}


def _memory_allocations(t: pa.Table) -> Columns:
    """Allocations and frees (real, virtual and scratch memory) as host.memory slices on
    the calling thread; a free's bytes are negative."""
    n = t.num_rows
    kind = _text(t, "type")
    name = pc.binary_join_element_wise(pc.fill_null(_text(t, "level"), ""),
                                       pc.fill_null(kind, ""), " ")
    return {"kind": ["slice"] * n, "category": ["host.memory"] * n,
            "name": pc.utf8_trim_whitespace(name), "ts_ns": _int(t, "start"),
            "dur_ns": duration(_int(t, "start"), _int(t, "end")), "pid": _int(t, "pid"),
            "tid": _int(t, "tid"), "correlation": _int(t, "stack_id"),
            "bytes": signed_bytes(kind, _int(t, "size")),
            "args": pc.binary_join_element_wise(
                '{"agent":', pc.fill_null(_int(t, "agent_abs_index").cast(pa.string()),
                                          "null"),
                ',"address":', pc.fill_null(_int(t, "address").cast(pa.string()), "null"),
                "}", "")}


# The views converted a batch at a time alone (kernels also need the calls' sizes).
CONVERT = {"regions": _regions, "memory_copies": _memory_copies,
           "memory_allocations": _memory_allocations}


def _id(value: Any, bits: int = 64) -> int | None:
    """An id from a descriptive row: an integer of ``bits`` bits, else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if -(1 << (bits - 1)) <= value < 1 << (bits - 1) else None


def _label(value: Any) -> str | None:
    """A name from a descriptive row as text (blobs decoded, numbers as written)."""
    if value is None or isinstance(value, str):
        return value or None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace") or None
    return str(value)


def side_tables(db: SqliteInput) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """Processes, threads and GPU agents as rows for the builder, and per view the rows
    left out because their id is not an integer (damage)."""
    rows: dict[str, list[dict[str, Any]]] = {"processes": [], "threads": [], "devices": []}
    bad: dict[str, int] = {}
    if "processes" in db.tables:
        for pid, command, host in db.scalar_rows("SELECT pid, command, hostname FROM processes"):
            if _id(pid) is None:
                bad["processes"] = bad.get("processes", 0) + 1
            else:
                rows["processes"].append({"pid": pid, "name": _label(command),
                                          "host": _label(host)})
    if "threads" in db.tables:
        for pid, tid, name in db.scalar_rows("SELECT pid, tid, name FROM threads"):
            if _id(tid) is None:
                bad["threads"] = bad.get("threads", 0) + 1
            else:
                rows["threads"].append({"pid": _id(pid), "tid": tid, "name": _label(name)})
    if "rocpd_info_agent" in db.tables:
        # extdata is JSON text; damaged text must not stop the read, only lose the CU count
        for index, product, arch, cus in db.scalar_rows(
                "SELECT absolute_index, product_name, name, CASE WHEN json_valid(extdata) "
                "THEN json_extract(extdata, '$.cu_count') END FROM rocpd_info_agent "
                "WHERE type = 'GPU'"):
            if _id(index, 32) is None:
                bad["rocpd_info_agent"] = bad.get("rocpd_info_agent", 0) + 1
            else:
                rows["devices"].append({"device": index, "name": _label(product),
                                        "compute_capability": _label(arch),
                                        "sm_count": _id(cus, 32)})
    return rows, bad
