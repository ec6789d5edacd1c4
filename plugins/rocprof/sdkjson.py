"""rocprofv3 JSON (``--output-format json``): the rocprofiler-sdk tool's own schema, not a
Chrome trace. One object per profiled process under ``rocprofiler-sdk-tool``, with the
records in ``buffer_records`` by kind and the names they refer to beside them: agents,
kernel symbols, ``strings.buffer_records`` (the kind and operation names, indexed by the
records' numeric kind and operation) and ``strings.marker_api`` (marker messages by
correlation id).

Records become Arrow struct arrays in one call each and are read column-wise. Ids are the
internal correlation ids and agents are numbered by their node id, as in the CSV output.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.rocprof.columns import (
    OutOfRange,
    api_events,
    copy_direction,
    duration,
    grid_columns,
    signed_bytes,
)
from tracekit.plugins.rocprof.lookup import lookup

Columns = dict[str, Any]
TOP_KEY = "rocprofiler-sdk-tool"
API_RECORDS = ("hip_api", "hsa_api", "marker_api", "rccl_api", "rocdecode_api",
               "rocjpeg_api")


def is_sdk_json(head: bytes) -> bool:
    """Whether the start of a file looks like rocprofv3's JSON output."""
    return head.lstrip()[:1] == b"{" and f'"{TOP_KEY}"'.encode() in head[:4096]


class BadRecord(ValueError):
    """A record value no trace can hold: ``path`` of record ``row`` (of the record list
    named by ``where``, which the caller fills in) is ``value``."""

    def __init__(self, row: int, path: tuple[str, ...], value: Any, what: str) -> None:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
        super().__init__(f"{shown} {what}")
        self.row, self.path = row, path
        self.where = ""

    def location(self) -> str:
        """Where the value is: ``buffer_records.kernel_dispatch[3].start_timestamp``."""
        return f"{self.where}[{self.row}]" + "".join(f".{p}" for p in self.path)


_INT64 = 1 << 63


def _field(records: pa.StructArray, *path: str) -> pa.Array:
    """A nested field as int64 (all null when no record has it); a value that is not an
    integer of 64 bits raises BadRecord."""
    t = records.type
    for depth, name in enumerate(path):
        if (pa.types.is_struct(t) and t.get_field_index(name) < 0) or pa.types.is_null(t):
            return pa.nulls(len(records), pa.int64())  # absent: an older schema
        if not pa.types.is_struct(t):  # present, and not the object the schema has
            values = pc.struct_field(records, list(path[:depth]))
            first = pc.index(pc.is_valid(values), True).as_py()
            raise BadRecord(first, path[:depth], values[first].as_py(), "is not an object")
        t = t.field(name).type
    values = pc.struct_field(records, list(path))
    if values.type == pa.int64():
        return values
    if pa.types.is_null(values.type):
        return values.cast(pa.int64())
    if pa.types.is_integer(values.type) or pa.types.is_floating(values.type):
        try:
            return values.cast(pa.int64())  # safe: fails on fractions and overflow
        except pa.ArrowInvalid:
            pass
        for row, value in enumerate(values.to_pylist()):
            if value is not None and not _is_int64(value):
                raise BadRecord(row, path, value, "is not an integer of 64 bits") from None
    first = pc.index(pc.is_valid(values), True).as_py()
    raise BadRecord(first, path, values[first].as_py(), "is not an integer")


def _is_int64(value: float) -> bool:
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return False
    return -_INT64 <= value < _INT64


def _diagnose(records: list[Any]) -> BadRecord | None:
    """Why Arrow could not read ``records`` as one struct array: a record that is no
    object, an integer beyond 64 bits, or a field whose values are of different JSON
    types (an object in one record, a number in another)."""
    seen: dict[tuple[str, ...], tuple[str, int]] = {}

    def walk(value: Any, row: int, path: tuple[str, ...], depth: int) -> BadRecord | None:
        if isinstance(value, bool):
            kind = "true/false"
        elif isinstance(value, int | float):
            if isinstance(value, int) and not -_INT64 <= value < _INT64:
                return BadRecord(row, path, value, "is beyond 64 bits")
            kind = "a number"
        elif isinstance(value, str):
            kind = "text"
        elif isinstance(value, list):
            kind = "a list"
        elif isinstance(value, dict):
            kind = "an object"
        else:
            return None
        first = seen.setdefault(path, (kind, row))
        if first[0] != kind:
            return BadRecord(row, path, value, f"is {kind} where record {first[1]} has "
                             f"{first[0]}")
        if isinstance(value, dict) and depth < 16:
            for key, item in value.items():
                if (bad := walk(item, row, (*path, str(key)), depth + 1)) is not None:
                    return bad
        return None

    for row, record in enumerate(records):
        if not isinstance(record, dict):
            return BadRecord(row, (), record, "is not a record object")
        if (bad := walk(record, row, (), 0)) is not None:
            return bad
    return None


def _records(records: list[Any]) -> pa.StructArray:
    """A record list as one struct array (one call); BadRecord says why not."""
    try:
        array = pa.array(records)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as exc:
        bad = _diagnose(records)
        if bad is None:
            raise BadRecord(0, (), "records", f"cannot be read: {exc}") from None
        raise bad from None
    if not pa.types.is_struct(array.type):
        bad = _diagnose(records)
        raise bad if bad is not None else BadRecord(0, (), records[0], "is not a record "
                                                    "object")
    return array


def _int_or_none(value: Any, bits: int = 64) -> int | None:
    """A descriptive integer (pid, node id, kernel id): None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if -(1 << (bits - 1)) <= value < 1 << (bits - 1) else None


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class Process:
    """One process's names: operations by (kind, operation), kernels, agents, markers.

    Entries of the name tables that are not of the schema's types are left out and
    counted in ``damaged``."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.damaged = 0
        self.meta = _dict(doc.get("metadata"))
        self.pid = _int_or_none(self.meta.get("pid")) or None
        self.bad_pid = self.pid is None and self.meta.get("pid") not in (None, 0)
        strings = _dict(doc.get("strings"))
        kinds = _dicts(strings.get("buffer_records"))
        self.kind_names = pa.array([str(k.get("kind", "")) for k in kinds], pa.string())
        ops = [[str(op) for op in k["operations"]] if isinstance(k.get("operations"), list)
               else [] for k in kinds]
        self.op_keys = pa.array([i * 100_000 + j for i, names in enumerate(ops)
                                 for j in range(min(len(names), 100_000))], pa.int64())
        self.op_names = pa.array([n for names in ops for n in names[:100_000]], pa.string())
        symbols = _dicts(doc.get("kernel_symbols"))
        ids = [_int_or_none(s.get("kernel_id", i)) for i, s in enumerate(symbols)]
        self.damaged += sum(i is None for i in ids)
        self.kernel_ids = pa.array(ids, pa.int64())
        self.kernel_names = pa.array([_text_or_none(s.get("formatted_kernel_name"))
                                      or _text_or_none(s.get("kernel_name")) or ""
                                      for s in symbols], pa.string())
        agents = _dicts(doc.get("agents"))
        handles = [_int_or_none(_dict(a.get("id")).get("handle")) for a in agents]
        nodes = [_int_or_none(a.get("node_id"), 32) for a in agents]
        self.damaged += sum(h is None for h in handles) + sum(
            n is None for n in nodes)
        self.agent_handles = pa.array(handles, pa.int64())
        self.agent_index = pa.array(nodes, pa.int64())
        self.agent_is_gpu = pa.array([a.get("type") == 2 for a in agents], pa.bool_())
        self.gpus = [{"device": node, "name": _text_or_none(a.get("product_name")),
                      "compute_capability": _text_or_none(a.get("name")),
                      "sm_count": _int_or_none(a.get("cu_count"), 32)}
                     for a, node in zip(agents, nodes, strict=True)
                     if a.get("type") == 2 and node is not None]
        markers = [(m.get("key"), m.get("value")) for m in _dicts(strings.get("marker_api"))]
        good = [(k, v) for k, v in markers if _int_or_none(k) is not None]
        self.damaged += len(markers) - len(good)
        self.marker_ids = pa.array([k for k, _ in good], pa.int64())
        self.marker_text = pa.array([v if isinstance(v, str) else str(v) for _, v in good],
                                    pa.string())

    def kind_name(self, kind: pa.Array) -> pa.Array:
        inside = pc.and_(pc.greater_equal(kind, 0), pc.less(kind, len(self.kind_names)))
        return self.kind_names.take(pc.if_else(inside, kind, pa.scalar(None, pa.int64())))

    def op_name(self, kind: pa.Array, op: pa.Array) -> pa.Array:
        inside = pc.and_(pc.and_(pc.greater_equal(kind, 0), pc.less(kind, 1 << 40)),
                         pc.and_(pc.greater_equal(op, 0), pc.less(op, 100_000)))
        key = pc.if_else(inside, pc.add(pc.multiply(kind, 100_000), op),
                         pa.scalar(None, pa.int64()))
        return self.op_names.take(pc.index_in(key, value_set=self.op_keys))

    def agent(self, handle: pa.Array) -> pa.Array:
        return lookup(self.agent_handles, self.agent_index, handle)

    def is_gpu(self, handle: pa.Array) -> pa.Array:
        pos = pc.index_in(handle, value_set=self.agent_handles)
        return self.agent_is_gpu.take(pos)


def convert(doc: dict[str, Any]) -> tuple[list[tuple[str, int, Columns]], dict[str, int],
                                          list[dict[str, Any]], list[Process]]:
    """Event columns per (record kind, process index); the records set aside by kind; the
    GPUs; the processes. A record value no trace can hold raises BadRecord."""
    parts: list[tuple[str, int, Columns]] = []
    unread: dict[str, int] = {}
    gpus: list[dict[str, Any]] = []  # per process; the builder merges them by device
    processes = []
    for p, proc_doc in enumerate(doc.get(TOP_KEY) or []):
        if not isinstance(proc_doc, dict):
            bad = BadRecord(p, (), proc_doc, "is not a process object")
            bad.where = TOP_KEY
            raise bad
        proc = Process(proc_doc)
        processes.append(proc)
        gpus += proc.gpus
        for kind, records in _dict(proc_doc.get("buffer_records")).items():
            if not records:
                continue
            if not isinstance(records, list):
                bad = BadRecord(p, ("buffer_records", kind), records, "is not a list")
                bad.where = TOP_KEY
                raise bad
            convert_kind = _CONVERT.get(kind) or (_api if kind in API_RECORDS else None)
            if convert_kind is None:
                unread[kind] = unread.get(kind, 0) + len(records)
                continue
            try:
                parts.append((kind, p, convert_kind(_records(records), proc)))
            except BadRecord as bad:
                bad.where = f"{TOP_KEY}[{p}].buffer_records.{kind}"
                raise
        for kind, records in _dict(proc_doc.get("callback_records")).items():
            if records and isinstance(records, list | dict):
                unread[kind] = unread.get(kind, 0) + len(records)
    return parts, unread, gpus, processes


def _common(r: pa.StructArray, proc: Process) -> Columns:
    ts = _field(r, "start_timestamp")
    end = _field(r, "end_timestamp")
    try:
        dur = duration(ts, end, "end_timestamp")
    except OutOfRange as exc:
        raise BadRecord(exc.row, ("end_timestamp",), exc.value, exc.what) from None
    return {"ts_ns": ts, "dur_ns": dur,
            "pid": pa.array([proc.pid] * len(r), pa.int64()),
            "correlation": _field(r, "correlation_id", "internal")}


def _kernels(r: pa.StructArray, proc: Process) -> Columns:
    n = len(r)
    info = ("dispatch_info",)
    grid = [_field(r, *info, "grid_size", a) for a in "xyz"]
    kernel = _field(r, *info, "kernel_id")
    name = proc.kernel_names.take(pc.index_in(kernel, value_set=proc.kernel_ids))
    args = pc.binary_join_element_wise(
        '{"dispatch_id":', _field(r, *info, "dispatch_id").cast(pa.string()),
        ',"kernel_id":', kernel.cast(pa.string()),
        ',"queue_id":', _field(r, *info, "queue_id", "handle").cast(pa.string()),
        ',"thread_id":', _field(r, "thread_id").cast(pa.string()),
        ',"grid_size":[', pc.binary_join_element_wise(*[g.cast(pa.string()) for g in grid],
                                                      ","), "]}", "")
    stream = _field(r, "stream_id", "handle")
    if stream.null_count == n:
        stream = _field(r, *info, "queue_id", "handle")
    return {"kind": ["slice"] * n, "category": ["gpu.kernel"] * n,
            "name": pc.fill_null(name, "<unknown kernel>"), **_common(r, proc),
            "device": proc.agent(_field(r, *info, "agent_id", "handle")), "stream": stream,
            **grid_columns(grid, [_field(r, *info, "workgroup_size", a) for a in "xyz"]),
            "shared_mem_bytes": _field(r, *info, "group_segment_size"),
            "args": args}


def _api(r: pa.StructArray, proc: Process) -> Columns:
    kind, op = _field(r, "kind"), _field(r, "operation")
    common = _common(r, proc)
    name = proc.op_name(kind, op)
    if len(proc.marker_ids):
        message = proc.marker_text.take(pc.index_in(common["correlation"],
                                                    value_set=proc.marker_ids))
        name = pc.if_else(pc.is_valid(message), message, name)
    end = pc.add(common["ts_ns"], common["dur_ns"])
    return api_events(proc.kind_name(kind), pc.fill_null(name, "<unknown operation>"),
                      common["ts_ns"], end, common["pid"], _field(r, "thread_id"),
                      common["correlation"])


def _memory_copies(r: pa.StructArray, proc: Process) -> Columns:
    n = len(r)
    kinds, names = copy_direction(proc.op_name(_field(r, "kind"), _field(r, "operation")))
    src = _field(r, "src_agent_id", "handle")
    dst = _field(r, "dst_agent_id", "handle")
    device = pc.if_else(pc.fill_null(proc.is_gpu(dst), False), proc.agent(dst),
                        proc.agent(src))
    common = _common(r, proc)
    return {"kind": ["slice"] * n, "category": ["gpu.memcpy"] * n, "name": names, **common,
            "correlation": pc.if_else(pc.equal(common["correlation"], 0),
                                      pa.scalar(None, pa.int64()), common["correlation"]),
            "device": device, "stream": _field(r, "stream_id", "handle"),
            "bytes": _field(r, "bytes"), "copy_kind": kinds}


def _memory(r: pa.StructArray, proc: Process) -> Columns:
    """Allocations, frees and scratch memory operations as host.memory slices on the calling
    thread (a free's bytes negative)."""
    n = len(r)
    name = pc.fill_null(proc.op_name(_field(r, "kind"), _field(r, "operation")), "")
    return {"kind": ["slice"] * n, "category": ["host.memory"] * n, "name": name,
            **_common(r, proc), "tid": _field(r, "thread_id"),
            "bytes": signed_bytes(name, _field(r, "allocation_size")),
            "args": pc.binary_join_element_wise(
                '{"agent":', pc.fill_null(proc.agent(_field(r, "agent_id", "handle"))
                                          .cast(pa.string()), "null"), "}", "")}


_CONVERT = {"kernel_dispatch": _kernels, "memory_copy": _memory_copies,
            "memory_allocation": _memory, "scratch_memory": _memory}
