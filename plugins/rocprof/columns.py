"""Event columns that every rocprof format builds the same way, whether the rows came from
CSV, JSON or SQLite: API records by domain, grid sizes, copy directions, allocation sizes,
and JSON text for args."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import TraceReadError

Columns = dict[str, Any]
_NULL_INT = pa.scalar(None, pa.int64())
# Event columns the model keeps in 32 bits.
INT32_COLUMNS = ("device", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                 "registers")
UNNAMED = "<unnamed>"


class OutOfRange(ValueError):
    """A value that does not fit the model: ``column`` of row ``row`` is ``value``."""

    def __init__(self, column: str, row: int, value: Any, what: str) -> None:
        super().__init__(f"{column} {value!r} {what}")
        self.column, self.row, self.value, self.what = column, row, value, what
        self.where: str | None = None  # the table or view, set by the reader that knows

    def message(self) -> str:
        """The error for a TraceReadError, without its location."""
        value = self.value if not isinstance(self.value, str) or len(self.value) < 40 \
            else self.value[:40] + "…"
        return f"{self.column} {value!r} {self.what}"


def duration(start: pa.Array, end: pa.Array, end_name: str = "end") -> pa.Array:
    """``end - start`` per row; a difference beyond 64 bits raises OutOfRange."""
    try:
        return pc.subtract_checked(end, start)
    except pa.ArrowInvalid:
        for row, (s, e) in enumerate(zip(start.to_pylist(), end.to_pylist(), strict=True)):
            if s is not None and e is not None and not -(1 << 63) <= e - s < 1 << 63:
                raise OutOfRange(end_name, row, e,
                                 f"minus the start {s} overflows 64 bits") from None
        raise


def add_finished(out: Any, columns: Columns, *, path: Any, row_label: str, kind: str) -> None:
    """``finish`` the columns, note its warnings under ``kind`` and add them to the builder
    ``out``; a value out of range is a TraceReadError at ``<row_label><row number>``."""
    try:
        warnings = finish(columns)
    except OutOfRange as exc:
        raise TraceReadError(exc.message(), path=path,
                             location=f"{row_label}{exc.row + 1}") from None
    for text, n in warnings:
        out.note(kind, text, n)
    out.add_events(columns)


def finish(columns: Columns) -> list[tuple[str, int]]:
    """Make event columns fit the model, in place: a null name becomes ``<unnamed>``, a
    negative duration (the end before the start) is left empty, each counted in the
    ``(warning, count)`` pairs returned. A value too large for a 32-bit column raises
    OutOfRange."""
    notes = []
    name = columns.get("name")
    if name is not None:
        name = pa.array(name) if not isinstance(name, pa.Array | pa.ChunkedArray) else name
        name = name.cast(pa.string()) if name.type != pa.string() else name
        if name.null_count:
            notes.append((f"warning: rows without a name (named {UNNAMED})", name.null_count))
            name = pc.fill_null(name, UNNAMED)
        columns["name"] = name
    dur = columns.get("dur_ns")
    if dur is not None:
        dur = pa.array(dur, pa.int64()) if not isinstance(dur, pa.Array) else dur
        negative = pc.fill_null(pc.less(dur, 0), False)
        if n := pc.sum(negative).as_py():
            notes.append(("warning: rows that end before they start (duration left empty)", n))
            dur = pc.if_else(negative, _NULL_INT, dur)
        columns["dur_ns"] = dur
    for column in INT32_COLUMNS:
        values = columns.get(column)
        if values is None:
            continue
        values = pa.array(values) if not isinstance(values, pa.Array) else values
        if not pa.types.is_integer(values.type) or not len(values):
            continue
        out = pc.fill_null(pc.or_(pc.less(values, -(1 << 31)),
                                  pc.greater_equal(values, 1 << 31)), False)
        if pc.any(out).as_py():
            row = pc.index(out, True).as_py()
            raise OutOfRange(column, row, values[row].as_py(), "does not fit 32 bits")
    return notes

_DIRECTION = {"HOST_TO_DEVICE": "HtoD", "DEVICE_TO_HOST": "DtoH", "DEVICE_TO_DEVICE": "DtoD",
              "HOST_TO_HOST": "HtoH"}


def api_events(domain: pa.Array, name: pa.Array, ts: pa.Array, end: pa.Array,
               pid: pa.Array, tid: pa.Array | None, correlation: pa.Array,
               end_name: str = "end") -> Columns:
    """API records of rocprofv3 (CSV, JSON or rocpd) by their domain: HIP and the other
    runtimes' calls as api.runtime, HSA as api.driver, markers as annotation ranges (or
    instants where start equals end, which is how marks are written)."""
    domain = pc.utf8_upper(pc.fill_null(domain, ""))
    dur = duration(ts, end, end_name)
    marker = pc.starts_with(domain, "MARKER").to_numpy(zero_copy_only=False)
    hsa = pc.starts_with(domain, "HSA").to_numpy(zero_copy_only=False)
    instant = marker & (pc.fill_null(pc.equal(dur, 0), False).to_numpy(zero_copy_only=False))
    category = np.where(marker, "host.annotation", np.where(hsa, "api.driver", "api.runtime"))
    return {"kind": np.where(instant, "instant", "slice").tolist(),
            "category": category.tolist(), "name": name, "ts_ns": ts,
            "dur_ns": pc.if_else(pa.array(instant), None, dur), "pid": pid, "tid": tid,
            "correlation": pc.if_else(pa.array(marker), None, correlation),
            "args": pc.binary_join_element_wise('{"domain":"', domain, '"}', "")}


def blocks(grid: pa.Array | None, workgroup: pa.Array | None) -> pa.Array | None:
    """Workgroups per grid: ROCm gives grid sizes in work-items, the model in blocks."""
    if grid is None or workgroup is None:
        return None
    size = pc.if_else(pc.greater(workgroup, 0), workgroup, _NULL_INT)
    whole = pc.divide(grid, size)  # ceil without grid + size - 1, which can overflow
    rest = pc.not_equal(pc.subtract(grid, pc.multiply(whole, size)), 0)
    return pc.add(whole, rest.cast(pa.int64()))


def grid_columns(grid: list[pa.Array | None], workgroup: list[pa.Array | None]) -> Columns:
    """grid_x/y/z (in workgroups) and block_x/y/z from per-axis work-item sizes."""
    return {**{f"grid_{a}": blocks(g, w) for a, g, w in zip("xyz", grid, workgroup,
                                                            strict=True)},
            **{f"block_{a}": w for a, w in zip("xyz", workgroup, strict=True)}}


def copy_direction(direction: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(copy_kind, name) of copies from their direction (``MEMORY_COPY_HOST_TO_DEVICE`` or
    ``HOST_TO_DEVICE``): HtoD and "Memcpy HtoD"; an unknown direction titled as written."""
    plain = pc.replace_substring(pc.utf8_upper(pc.fill_null(direction, "")), "MEMORY_COPY_", "")
    codes = plain.dictionary_encode()  # map the few distinct values, then spread them
    labels = [_DIRECTION.get(d, d.title() if d else None) for d in codes.dictionary.to_pylist()]
    kinds = pa.array(labels, pa.string()).take(codes.indices)
    names = pa.array([f"Memcpy {k}" if k else "Memcpy" for k in labels],
                     pa.string()).take(codes.indices)
    return kinds, names


def signed_bytes(operation: pa.Array, size: pa.Array) -> pa.Array:
    """Allocation sizes with a free's (``…FREE``, ``RECLAIM``) negative, as the model has."""
    freed = pc.fill_null(pc.match_substring_regex(operation, "FREE|RECLAIM"), False)
    return pc.if_else(freed, pc.negate(size), size)


def json_text(cells: pa.Array) -> pa.Array:
    """Cells escaped to sit inside a JSON string, where any needs it."""
    if pc.any(pc.match_substring_regex(cells, r'["\\\x00-\x1f]')).as_py():
        for raw, escaped in (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\t", "\\t"),
                             ("\r", "\\r")):
            cells = pc.replace_substring(cells, raw, escaped)
    return cells
