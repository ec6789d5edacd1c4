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

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.rocprof.columns import (
    api_events,
    copy_direction,
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


def _field(records: pa.StructArray, *path: str) -> pa.Array:
    """A nested field as int64 (all null when no record has it)."""
    t = records.type
    for name in path:
        if not pa.types.is_struct(t) or t.get_field_index(name) < 0:
            return pa.nulls(len(records), pa.int64())
        t = t.field(name).type
    return pc.struct_field(records, list(path)).cast(pa.int64())


class Process:
    """One process's names: operations by (kind, operation), kernels, agents, markers."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.pid = int((doc.get("metadata") or {}).get("pid") or 0) or None
        strings = doc.get("strings") or {}
        kinds = strings.get("buffer_records") or []
        self.kind_names = pa.array([str(k.get("kind", "")) for k in kinds], pa.string())
        self.op_keys = pa.array([i * 100_000 + j for i, k in enumerate(kinds)
                                 for j in range(len(k.get("operations") or []))], pa.int64())
        self.op_names = pa.array([str(op) for k in kinds for op in k.get("operations") or []],
                                 pa.string())
        symbols = doc.get("kernel_symbols") or []
        self.kernel_ids = pa.array([int(s.get("kernel_id", i)) for i, s in enumerate(symbols)],
                                   pa.int64())
        self.kernel_names = pa.array([s.get("formatted_kernel_name") or s.get("kernel_name")
                                      or "" for s in symbols], pa.string())
        agents = doc.get("agents") or []
        self.agent_handles = pa.array([int((a.get("id") or {}).get("handle", -1))
                                       for a in agents], pa.int64())
        self.agent_index = pa.array([a.get("node_id") for a in agents], pa.int64())
        self.agent_is_gpu = pa.array([a.get("type") == 2 for a in agents], pa.bool_())
        self.gpus = [{"device": int(a["node_id"]), "name": a.get("product_name") or None,
                      "compute_capability": a.get("name") or None,
                      "sm_count": a.get("cu_count")}
                     for a in agents if a.get("type") == 2 and a.get("node_id") is not None]
        markers = strings.get("marker_api") or []
        self.marker_ids = pa.array([int(m["key"]) for m in markers], pa.int64())
        self.marker_text = pa.array([str(m["value"]) for m in markers], pa.string())

    def kind_name(self, kind: pa.Array) -> pa.Array:
        return self.kind_names.take(pc.if_else(pc.less(kind, len(self.kind_names)), kind,
                                               pa.scalar(None, pa.int64())))

    def op_name(self, kind: pa.Array, op: pa.Array) -> pa.Array:
        key = pc.add(pc.multiply(kind, 100_000), op)
        return self.op_names.take(pc.index_in(key, value_set=self.op_keys))

    def agent(self, handle: pa.Array) -> pa.Array:
        return lookup(self.agent_handles, self.agent_index, handle)

    def is_gpu(self, handle: pa.Array) -> pa.Array:
        pos = pc.index_in(handle, value_set=self.agent_handles)
        return self.agent_is_gpu.take(pos)


def convert(doc: dict[str, Any]) -> tuple[list[tuple[str, Columns]], dict[str, int],
                                          list[dict[str, Any]]]:
    """Event columns per (process, record kind); the records set aside by kind; the GPUs."""
    parts: list[tuple[str, Columns]] = []
    unread: dict[str, int] = {}
    gpus: dict[int, dict[str, Any]] = {}
    for proc_doc in doc.get(TOP_KEY) or []:
        proc = Process(proc_doc)
        gpus.update({g["device"]: g for g in proc.gpus})
        for kind, records in (proc_doc.get("buffer_records") or {}).items():
            if not records:
                continue
            convert_kind = _CONVERT.get(kind) or (_api if kind in API_RECORDS else None)
            if convert_kind is None:
                unread[kind] = unread.get(kind, 0) + len(records)
                continue
            array = pa.array(records)
            if not pa.types.is_struct(array.type):
                raise ValueError(f"buffer_records.{kind} holds {array.type} values, "
                                 "not record objects")
            parts.append((kind, convert_kind(array, proc)))
        for kind, records in (proc_doc.get("callback_records") or {}).items():
            if records:
                unread[kind] = unread.get(kind, 0) + len(records)
    return parts, unread, list(gpus.values())


def _common(r: pa.StructArray, proc: Process) -> Columns:
    ts = _field(r, "start_timestamp")
    return {"ts_ns": ts, "dur_ns": pc.subtract(_field(r, "end_timestamp"), ts),
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
