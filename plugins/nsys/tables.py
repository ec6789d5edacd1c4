"""Nsight Systems tables to tracekit event columns, one vectorized function per table."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.nsys.db import (
    ExportDatabase,
    col,
    decode_pid,
    decode_tid,
    label_array,
    table_args,
    valid_id,
)

# Names a kernel can go by, the option's choice first.
KERNEL_NAMES = ("demangledName", "shortName", "mangledName")

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
OSRT = "OSRT_API"
OSRT_NEEDS = ("start", "end", "nameId")

# nsys's own numbering, for exports without ENUM tables (2021): not CUPTI's (formats.md 1.6).
NSYS_MEM_KIND = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed",
                 5: "Device Static", 6: "Managed Static", 7: "Unknown"}
NSYS_COPY_KIND = {0: ("Unknown", "Unknown"), 1: ("HtoD", "Host-to-Device"),
                  2: ("DtoH", "Device-to-Host"), 3: ("HtoA", "Host-to-Array"),
                  4: ("AtoH", "Array-to-Host"), 5: ("AtoA", "Array-to-Array"),
                  6: ("AtoD", "Array-to-Device"), 7: ("DtoA", "Device-to-Array"),
                  8: ("DtoD", "Device-to-Device"), 9: ("HtoH", "Host-to-Host"),
                  10: ("PtoP", "Peer-to-Peer"), 11: ("HtoD", "Unified Host-to-Device"),
                  12: ("DtoH", "Unified Device-to-Host"), 13: ("DtoD", "Unified Device-to-Device")}
SYNC_TYPES = {0: "Unknown", 1: "Event sync", 2: "Stream wait sync", 3: "Stream sync",
              4: "Context sync"}
RUNTIME_CLASS, DRIVER_CLASS, BACKTRACE_CLASS = 0, 1, 67
NVTX_RANGES = (59, 60, 70, 71)
NVTX_MARK = 34
_VERSION_SUFFIX = re.compile(r"_v\d+$")
DRIVER_NAME = "^cu[A-Z]"  # CUDA driver API names, for runtime tables without eventClass

Columns = dict[str, Any]


def _timing(t: pa.Table) -> Columns:
    start = col(t, "start")
    return {"ts_ns": start, "dur_ns": pc.subtract(col(t, "end"), start)}


def _constant(n: int, value: str) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), [value])


def _device(t: pa.Table, category: str) -> Columns:
    n = t.num_rows
    return {"kind": _constant(n, "slice"), "category": _constant(n, category), **_timing(t),
            "pid": decode_pid(col(t, "globalPid")), "device": col(t, "deviceId", pa.int32()),
            "stream": valid_id(col(t, "streamId")),
            "correlation": col(t, "correlationId")}


def kernels(db: ExportDatabase, short_names: bool) -> Iterator[Columns]:
    """CUPTI_ACTIVITY_KIND_KERNEL to gpu.kernel slices, a batch at a time."""
    db.require(KERNEL, "start", "end")
    for t in db.batches(f"SELECT * FROM {KERNEL}"):
        yield _kernels(db, t, short_names)


def _kernels(db: ExportDatabase, t: pa.Table, short_names: bool) -> Columns:
    out = _device(t, "gpu.kernel")
    order = ("shortName", "demangledName", "mangledName") if short_names else KERNEL_NAMES
    present = [c for c in order if c in t.column_names] or [order[0]]
    name = db.names(col(t, present[0]))
    for other in present[1:]:
        if not name.null_count:
            break
        # Same dictionary (StringIds): coalescing the indices coalesces the names.
        before = name.null_count
        name = pa.DictionaryArray.from_arrays(
            pc.coalesce(name.indices, db.names(col(t, other)).indices), name.dictionary)
        db.note(KERNEL, f"warning: {present[0]} missing (NULL or not in StringIds), "
                f"named by {other}", before - name.null_count)
    out["name"] = name
    for axis in "XYZ":
        out[f"grid_{axis.lower()}"] = col(t, f"grid{axis}", pa.int32())
        out[f"block_{axis.lower()}"] = col(t, f"block{axis}", pa.int32())
    out["registers"] = col(t, "registersPerThread", pa.int32())
    out["shared_mem_bytes"] = pc.add(pc.fill_null(col(t, "staticSharedMemory"), 0),
                                     pc.fill_null(col(t, "dynamicSharedMemory"), 0))
    out["args"] = table_args(t, ("contextId", "greenContextId", "staticSharedMemory",
                                 "dynamicSharedMemory", "localMemoryPerThread",
                                 "localMemoryTotal", "gridId", "launchType", "cacheConfig",
                                 "sharedMemoryExecuted", "graphNodeId", "graphId"))
    return out


def memcpys(db: ExportDatabase) -> Iterator[Columns]:
    """CUPTI_ACTIVITY_KIND_MEMCPY to gpu.memcpy slices named as nsys stats names them."""
    db.require(MEMCPY, "start", "end")
    enum = db.enum("ENUM_CUDA_MEMCPY_OPER")
    short, label = {}, {}
    for code, (default_short, default_label) in NSYS_COPY_KIND.items():
        name, lab = enum.get(code, (None, None))
        short[code] = _copy_short(name) or default_short
        label[code] = f"[CUDA memcpy {lab or default_label}]"
    for code, (name, lab) in enum.items():
        short.setdefault(code, _copy_short(name) or "Unknown")
        label.setdefault(code, f"[CUDA memcpy {lab or name}]")
    mem = _mem_kinds(db)
    for t in db.batches(f"SELECT * FROM {MEMCPY}"):
        out = _device(t, "gpu.memcpy")
        kind = col(t, "copyKind")
        out["name"] = label_array(kind, label)
        out["copy_kind"] = label_array(kind, short)
        out["src_kind"] = label_array(col(t, "srcKind"), mem)
        out["dst_kind"] = label_array(col(t, "dstKind"), mem)
        out["bytes"] = col(t, "bytes")
        out["args"] = table_args(t, ("contextId", "srcDeviceId", "dstDeviceId",
                                     "srcContextId", "dstContextId", "migrationCause",
                                     "graphNodeId", "copyCount"))
        yield out


def memsets(db: ExportDatabase) -> Iterator[Columns]:
    """CUPTI_ACTIVITY_KIND_MEMSET to gpu.memset slices."""
    db.require(MEMSET, "start", "end")
    mem = _mem_kinds(db)
    for t in db.batches(f"SELECT * FROM {MEMSET}"):
        out = _device(t, "gpu.memset")
        out["name"] = _constant(t.num_rows, "[CUDA memset]")
        out["bytes"] = col(t, "bytes")
        out["dst_kind"] = label_array(col(t, "memKind"), mem)
        out["args"] = table_args(t, ("contextId", "value", "graphNodeId"))
        yield out


#: The wait a synchronizing runtime call makes, by the call's name (version suffix off).
SYNC_BY_CALL = ((re.compile(r"^cu(da)?(Device|Ctx|Thread)Synchronize$"), "Context sync"),
                (re.compile(r"^cu(da)?StreamSynchronize$"), "Stream sync"),
                (re.compile(r"^cu(da)?StreamWaitEvent$"), "Stream wait sync"),
                (re.compile(r"^cu(da)?EventSynchronize$"), "Event sync"))


def syncs(db: ExportDatabase) -> Iterator[Columns]:
    """CUPTI_ACTIVITY_KIND_SYNCHRONIZATION to gpu.sync slices named by their type: by the
    runtime call that made the wait, where the export holds it, since the recorded
    ``syncType`` does not always say what the call waited on (every cudaDeviceSynchronize
    of the 2021 and 2024 fixtures is type 1, "Event sync" in the export's own enum)."""
    db.require(SYNC, "start", "end")
    enum = db.enum("ENUM_CUPTI_SYNC_TYPE")
    labels = {k: (enum.get(k, (None, None))[1] or v) for k, v in SYNC_TYPES.items()}
    labels.update({k: lab or name for k, (name, lab) in enum.items()})
    devices = context_devices(db)
    for t in db.batches(_sync_query(db)):
        out = _device(t, "gpu.sync")
        if devices and {"globalPid", "contextId"} <= set(t.column_names):
            out["device"] = _device_of_context(db, t, out["device"], devices)
        out["name"] = _sync_names(db, t, label_array(col(t, "syncType"), labels))
        out["args"] = table_args(t, ("contextId", "eventId", "syncType"),
                                 lambda table, c: valid_id(col(table, c)))
        yield out


def _sync_query(db: ExportDatabase) -> str:
    """The synchronization rows, each with the nameId of the runtime call of its process and
    correlation (``_call``) where the tables have the columns to find it."""
    if not ({"correlationId", "globalPid"} <= set(db.columns(SYNC)) and
            {"correlationId", "globalTid", "nameId"} <= set(db.columns(RUNTIME))):
        return f"SELECT * FROM {SYNC}"
    # One call per (correlation, process), so the join adds no row; only the correlations
    # of waits are grouped, and the join searches them by an automatic index.
    return (f"WITH calls AS (SELECT correlationId AS c, globalTid >> 24 AS p, "
            f"min(nameId) AS name FROM {RUNTIME} WHERE correlationId IN "
            f"(SELECT correlationId FROM {SYNC}) GROUP BY 1, 2) "
            f"SELECT s.*, calls.name AS _call FROM {SYNC} s LEFT JOIN calls "
            "ON calls.c = s.correlationId AND calls.p = s.globalPid >> 24")


def _sync_names(db: ExportDatabase, t: pa.Table, by_type: pa.DictionaryArray) -> pa.Array:
    """Each wait's name: what its runtime call waits on (``SYNC_BY_CALL``), else the label
    of its ``syncType``; the rows whose type said otherwise are counted."""
    if "_call" not in t.column_names:
        return by_type
    calls = db.names(col(t, "_call")).cast(pa.string())
    codes = pc.fill_null(calls, "").dictionary_encode()
    waits = [next((label for pattern, label in SYNC_BY_CALL
                   if pattern.match(_VERSION_SUFFIX.sub("", name))), None)
             for name in codes.dictionary.to_pylist()]
    by_call = pa.array(waits, pa.string()).take(codes.indices)
    typed = by_type.cast(pa.string())
    differs = pc.sum(pc.fill_null(pc.not_equal(by_call, typed), False)).as_py() or 0
    if differs:
        db.note(f"derived from {SYNC}", "named by the runtime call that made the wait (its "
                "syncType said another kind)", differs)
    return pc.coalesce(by_call, typed).dictionary_encode()


def context_devices(db: ExportDatabase) -> dict[tuple[int, int], int]:
    """(globalPid, contextId) of each synchronization record to the device its context's
    kernels, copies or memsets ran on.

    CUPTI's synchronization records carry a deviceId that is not always the context's: in
    a two-process, two-GPU export every wait says device 0 while the second process's
    context runs all its work on device 1. A context is bound to one device, so its work
    tells which (the first row found: no scan of the whole table)."""
    need = {"globalPid", "contextId", "deviceId"}
    if not need <= set(db.columns(SYNC)):
        return {}
    tables = [t for t in (KERNEL, MEMCPY, MEMSET)
              if t in db.tables and need <= set(db.columns(t))]
    out: dict[tuple[int, int], int] = {}
    for pid, context in db.scalar_rows(f"SELECT DISTINCT globalPid, contextId FROM {SYNC}"):
        if not isinstance(pid, int) or not isinstance(context, int):
            continue
        for table in tables:
            found = db.scalar_rows(f"SELECT deviceId FROM {table} WHERE globalPid = {pid} "
                                   f"AND contextId = {context} LIMIT 1")
            if found and isinstance(found[0][0], int):
                out[(pid, context)] = found[0][0]
                break
    return out


def _device_of_context(db: ExportDatabase, t: pa.Table, device: pa.Array,
                       devices: dict[tuple[int, int], int]) -> pa.Array:
    """``device`` with each row's context's device where its work names one; the rows
    changed are counted in the read log."""
    pid = col(t, "globalPid").fill_null(-1).to_numpy(zero_copy_only=False)
    context = col(t, "contextId").fill_null(-1).to_numpy(zero_copy_only=False)
    before = device.fill_null(-1).to_numpy(zero_copy_only=False)
    after = before.copy()
    for (p, c), d in devices.items():
        after[(pid == p) & (context == c)] = d
    db.note(f"derived from {SYNC}", "device taken from its context's kernels and copies "
            "(the record's deviceId differed)", int((after != before).sum()))
    return pa.array(after, pa.int32(), mask=after == -1)


def runtime(db: ExportDatabase) -> Iterator[tuple[Columns, int]]:
    """CUPTI_ACTIVITY_KIND_RUNTIME to api.runtime / api.driver slices, a batch at a time.

    Rows of the backtrace event class repeat an API call that has its own row (same thread
    and correlation id); they are left out and their number returned with each batch.
    Exports without ``eventClass`` (nsys 2019-2020) tell driver calls by name: ``cu`` and a
    capital (cuLaunchKernel, cuMemAlloc_v2), which cudaMalloc, cublasSgemm ... are not.
    """
    db.require(RUNTIME, "start", "end", "nameId")
    stripped = None  # the StringIds names without _v2 ..., the same for every batch
    for t in db.batches(f"SELECT * FROM {RUNTIME}"):
        names = db.names(col(t, "nameId"))
        if stripped is None:
            stripped = pa.array([_VERSION_SUFFIX.sub("", v) if v is not None else None
                                 for v in names.dictionary.to_pylist()], type=pa.string())
        yield _runtime(t, names, stripped)


def _runtime(t: pa.Table, names: pa.DictionaryArray,
             stripped: pa.Array) -> tuple[Columns, int]:
    event_class = col(t, "eventClass")
    carrier = pc.fill_null(pc.equal(event_class, BACKTRACE_CLASS), False)
    carriers = pc.sum(carrier).as_py() or 0
    if carriers:
        keep = pc.invert(carrier)
        t, names = t.filter(keep), names.filter(keep)
        event_class = col(t, "eventClass")
    n = t.num_rows
    if "eventClass" in t.column_names:
        is_driver = pc.fill_null(pc.equal(event_class, DRIVER_CLASS), False)
    else:
        driver_name = pc.fill_null(pc.match_substring_regex(stripped, DRIVER_NAME), False)
        is_driver = pc.fill_null(pc.take(driver_name, names.indices), False)
    category = pa.DictionaryArray.from_arrays(pc.cast(is_driver, pa.int32()),
                                              ["api.runtime", "api.driver"])
    gtid = col(t, "globalTid")
    out = {"kind": _constant(n, "slice"), "category": category, **_timing(t),
           "name": pa.DictionaryArray.from_arrays(names.indices, stripped),
           "pid": decode_pid(gtid), "tid": decode_tid(gtid),
           "correlation": col(t, "correlationId"),
           "args": table_args(t, ("eventClass", "returnValue"))}
    return out, carriers


CUBLAS = "CUBLAS_EVENTS"
CUDNN = "CUDNN_EVENTS"
LIBRARY_TABLES = (CUBLAS, CUDNN)


def library_calls(db: ExportDatabase, table: str) -> Iterator[Columns]:
    """CUBLAS_EVENTS / CUDNN_EVENTS (start, end, eventClass, globalTid, nameId) to api.runtime
    slices on the calling thread, as the runtime's calls are (and rocprof's library APIs), named
    from StringIds with the ``_v2`` suffix removed; eventClass in args."""
    db.require(table, "start", "end", "nameId")
    wanted = [c for c in ("start", "end", "eventClass", "globalTid", "nameId")
              if c in db.columns(table)]
    stripped = None
    for t in db.batches(f"SELECT {', '.join(wanted)} FROM {table}"):
        names = db.names(col(t, "nameId"))
        if stripped is None:
            stripped = pa.array([_VERSION_SUFFIX.sub("", v) if v is not None else None
                                 for v in names.dictionary.to_pylist()], type=pa.string())
        gtid = col(t, "globalTid")
        n = t.num_rows
        yield {"kind": _constant(n, "slice"), "category": _constant(n, "api.runtime"),
               **_timing(t), "name": pa.DictionaryArray.from_arrays(names.indices, stripped),
               "pid": decode_pid(gtid), "tid": decode_tid(gtid),
               "args": table_args(t, ("eventClass",))}


def nvtx(db: ExportDatabase) -> Iterator[tuple[Columns, dict[str, Any]]]:
    """NVTX_EVENTS: ranges to host.annotation slices, marks to instants; the rest counted
    (per batch)."""
    db.require(NVTX, "start", "eventType")
    wanted = ("start", "end", "eventType", "text", "textId", "globalTid", "rangeId",
              "category", "domainId", "color", "endGlobalTid")  # not the binary payloads
    present = [c for c in wanted if c in db.columns(NVTX)]
    for t in db.batches(f"SELECT {', '.join(present)} FROM {NVTX}"):
        yield _nvtx(db, t)


def _nvtx(db: ExportDatabase, t: pa.Table) -> tuple[Columns, dict[str, Any]]:
    event_type = col(t, "eventType")
    text = col(t, "text", pa.string())
    text_id = db.names(col(t, "textId")).cast(pa.string()) if "textId" in t.column_names \
        else pa.nulls(t.num_rows, pa.string())
    name = pc.coalesce(text, text_id)
    is_range = pc.fill_null(pc.is_in(event_type, pa.array(NVTX_RANGES, pa.int64())), False)
    is_mark = pc.fill_null(pc.equal(event_type, NVTX_MARK), False)
    ended = pc.is_valid(col(t, "end"))
    keep = pc.or_(pc.and_(is_range, ended), is_mark)
    counts = {
        "ranges": pc.sum(pc.and_(is_range, ended)).as_py() or 0,
        "unterminated": pc.sum(pc.and_(is_range, pc.invert(ended))).as_py() or 0,
        "marks": pc.sum(is_mark).as_py() or 0,
    }
    types = pc.value_counts(pc.filter(event_type, pc.invert(pc.or_(is_range, is_mark))))
    counts["other"] = {int(v["values"]): int(v["counts"]) for v in types.to_pylist()
                       if v["values"] is not None}
    t, name, is_mark = t.filter(keep), name.filter(keep), is_mark.filter(keep)
    gtid = col(t, "globalTid")
    timing = _timing(t)
    out = {"kind": pc.if_else(is_mark, "instant", "slice").dictionary_encode(),
           "category": _constant(t.num_rows, "host.annotation"),
           "name": name.dictionary_encode(), "ts_ns": timing["ts_ns"],
           "dur_ns": pc.if_else(is_mark, pa.scalar(None, pa.int64()), timing["dur_ns"]),
           "pid": decode_pid(gtid), "tid": decode_tid(gtid),
           "args": table_args(t, ("eventType", "rangeId", "category", "domainId", "color",
                                  "endGlobalTid"))}
    return out, counts


def osrt(db: ExportDatabase, tree: Any = None) -> Iterator[Columns]:
    """OSRT_API to host.os slices; with the call-chain ``tree`` of OSRT_CALLCHAINS, each
    call that has a callchainId gets its stack."""
    wanted = ["start", "end", "globalTid", "nameId", "returnValue", "nestingLevel",
              "callchainId"]
    db.require(OSRT, *OSRT_NEEDS)
    present = [c for c in wanted if c in db.columns(OSRT)]
    for t in db.batches(f"SELECT {', '.join(present)} FROM {OSRT}"):
        yield _osrt(db, t, tree)


def _osrt(db: ExportDatabase, t: pa.Table, tree: Any) -> Columns:
    gtid = col(t, "globalTid")
    n = t.num_rows
    out = {"kind": _constant(n, "slice"), "category": _constant(n, "host.os"), **_timing(t),
           "name": db.names(col(t, "nameId")), "pid": decode_pid(gtid),
           "tid": decode_tid(gtid),
           "args": table_args(t, ("returnValue", "nestingLevel"))}
    if tree is not None and "callchainId" in t.column_names:
        chain = col(t, "callchainId")
        found, leaf, _ = tree.lookup(chain.fill_null(-1).to_numpy(zero_copy_only=False))
        found &= chain.is_valid().to_numpy(zero_copy_only=False)
        out["stack_id"] = pa.array(leaf, mask=~found)
    return out


def _copy_short(enum_name: str | None) -> str | None:
    if not enum_name:
        return None
    tail = enum_name.rsplit("_", 1)[-1].upper()  # CUDA_MEMCPY_KIND_HTOD -> HTOD
    return {"HTOD": "HtoD", "DTOH": "DtoH", "DTOD": "DtoD", "HTOH": "HtoH", "PTOP": "PtoP",
            "HTOA": "HtoA", "ATOH": "AtoH", "ATOA": "AtoA", "ATOD": "AtoD",
            "DTOA": "DtoA"}.get(tail, tail.title())


def _mem_kinds(db: ExportDatabase) -> dict[int, str | None]:
    enum = db.enum("ENUM_CUDA_MEM_KIND")
    if not enum:
        return dict(NSYS_MEM_KIND)
    return {k: lab or _pretty_kind(name) for k, (name, lab) in enum.items()}


def _pretty_kind(name: str | None) -> str | None:
    """CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC -> 'Device Static' (enum tables without labels)."""
    if not name:
        return name
    return name.rsplit("_KIND_", 1)[-1].replace("_", " ").title()


MEMORY_USAGE = "CUDA_GPU_MEMORY_USAGE_EVENTS"


def memory_usage(db: ExportDatabase) -> tuple[Columns, Columns]:
    """CUDA_GPU_MEMORY_USAGE_EVENTS: each allocation or free as a host.memory instant (bytes
    negative for a free), and a running 'GPU n memory allocated' counter per process and
    device, summed in time order."""
    db.require(MEMORY_USAGE, "start", "bytes")
    t = db.arrow(f"SELECT * FROM {MEMORY_USAGE} ORDER BY start")
    n = t.num_rows
    operation = col(t, "memoryOperationType")  # 0 allocation, 1 deallocation (nsys enum)
    free = pc.fill_null(pc.equal(operation, 1), False)
    size = col(t, "bytes")
    signed = pc.if_else(free, pc.negate(size), size)
    pid = decode_pid(col(t, "globalPid"))
    device = col(t, "deviceId")
    name = pc.if_else(free, "cudaFree (memory usage)", "cudaMalloc (memory usage)")
    instants = {"kind": _constant(n, "instant"), "category": _constant(n, "host.memory"),
                "name": name.dictionary_encode(), "ts_ns": col(t, "start"), "pid": pid,
                "bytes": signed, "correlation": col(t, "correlationId"),
                "args": table_args(t, ("deviceId", "contextId", "address", "memKind"))}
    # Running total per (pid, device): cumulative sum within each group, in time order.
    keys = np.stack([pid.fill_null(-1).to_numpy(zero_copy_only=False),
                     device.fill_null(-1).to_numpy(zero_copy_only=False)])
    order = np.lexsort((np.arange(n), keys[1], keys[0]))
    values = signed.fill_null(0).to_numpy(zero_copy_only=False)[order]
    group_start = np.r_[True, np.any(keys[:, order][:, 1:] != keys[:, order][:, :-1], axis=0)] \
        if n else np.array([], dtype=bool)
    running = np.cumsum(values)
    offsets = np.maximum.accumulate(np.where(group_start, running - values, 0)) if n else running
    total = np.empty(n, dtype=np.float64)
    total[order] = running - offsets
    labels = pa.array([f"GPU {d} memory allocated" for d in keys[1]], type=pa.string())
    counters = {"kind": _constant(n, "counter"), "category": _constant(n, "counter.memory"),
                "name": labels.dictionary_encode(), "ts_ns": col(t, "start"), "pid": pid,
                "value": pa.array(total)}
    return instants, counters
