"""Event columns that every rocprof format builds the same way, whether the rows came from
CSV, JSON or SQLite: API records by domain, grid sizes, copy directions, allocation sizes,
and JSON text for args."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Columns = dict[str, Any]
_NULL_INT = pa.scalar(None, pa.int64())
_DIRECTION = {"HOST_TO_DEVICE": "HtoD", "DEVICE_TO_HOST": "DtoH", "DEVICE_TO_DEVICE": "DtoD",
              "HOST_TO_HOST": "HtoH"}


def api_events(domain: pa.Array, name: pa.Array, ts: pa.Array, end: pa.Array,
               pid: pa.Array, tid: pa.Array | None, correlation: pa.Array) -> Columns:
    """API records of rocprofv3 (CSV, JSON or rocpd) by their domain: HIP and the other
    runtimes' calls as api.runtime, HSA as api.driver, markers as annotation ranges (or
    instants where start equals end, which is how marks are written)."""
    domain = pc.utf8_upper(pc.fill_null(domain, ""))
    dur = pc.subtract(end, ts)
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
    return pc.divide(pc.add(grid, pc.subtract(size, 1)), size)


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
