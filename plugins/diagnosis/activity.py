"""What the diagnosis analyzers share: GPU work per device, the host calls that launched it,
and the host calls that block on the device. Computed once per trace, column-wise.

Kernel classes extend HTA's definitions (hta/common/types.py, peers.md section 1): a kernel
is communication when its name is a collective library's or a collective's (``COMM_KERNEL``:
NCCL/RCCL/HCCL, NVLS ``multimem_*``, symmetric-memory one/two-shot all-reduce, serving
engines' custom all-reduce, all-to-all dispatch/combine of expert parallelism, NVSHMEM), or
when the call that launched it ran inside a collective's host range (``record_param_comms``,
``c10d::``, ``nccl:*``); memcpy and memset rows, and kernels named like
``Memcpy``/``Memset``/``dma``, are memory; everything else is compute.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import EVENTS_SCHEMA, Trace
from tracekit.toolkit import (
    COLLECTIVE_KERNEL,
    COLLECTIVE_RANGE,
    equals,
    factorize,
    is_in,
    launch_links,
    step_ranges,
)
from tracekit.toolkit import intervals as iv

#: The event columns the diagnosis analyzers read (``Analyzer.event_columns``): all but the
#: args text and the call stacks, so that ``tracekit analyze`` frees those before analysis.
READS_COLUMNS = frozenset(EVENTS_SCHEMA.names) - {"args", "stack_id"}

COMPUTE, COMMUNICATION, MEMORY = 0, 1, 2
CLASS_NAMES = ("compute", "communication", "memory")

# A graph traced whole (nsys --cuda-graph-trace=graph) is one row for all its kernels.
GPU_WORK = ("gpu.kernel", "gpu.memcpy", "gpu.memset", "gpu.graph")
API = ("api.runtime", "api.driver")
# Collective libraries, and collectives by name: one rule with the ranks of a run (the toolkit's
# COLLECTIVE_KERNEL; docs/analyzers/diagnosis.md has the table).
COMM_KERNEL = COLLECTIVE_KERNEL
# ROCm's runtime implements copies and fills with its own blit kernels (__amd_rocclr_*).
COPY_KERNEL = r"(?i)^(hip)?memcpy|^__amd_rocclr_copy(Buffer|Image)"
MEMORY_KERNEL = COPY_KERNEL + r"|^(hip)?memset|^dma|^__amd_rocclr_fill(Buffer|Image)"
# Calls that return only when the device has caught up (nsys' cuda_api_sync and
# cuda_memcpy_sync rules, their HIP twins, and the synchronous copies and memsets).
SYNC_API = (r"^(cuda|hip)(Device|Stream|Event|Ctx|Thread)Synchronize"
            r"|^cu(Ctx|Stream|Event)Synchronize"
            r"|^hsa_signal_wait")
# A synchronous memset returns before the GPU runs it, except on host or managed memory
# (CUDA's "API synchronization behavior"): it waits only where its memset's target says so.
SYNC_MEMSET_API = r"^(cuda|hip)Memset(2D|3D)?$"
HOST_MEMORY_KINDS = ("Pinned", "Pageable", "Managed")
SYNC_COPY_API = r"^(cuda|hip|cu)Memcpy\w*$"  # the ones without "Async" in their name
#: The program's own traced activity, what the wall time spans: its host calls and ranges
#: and its GPU work; not the profiler's diagnostics, OS events or CPU samples, which nsys
#: records from before its session starts to after it ends.
PROGRAM_CATEGORIES = ("api.runtime", "api.driver", "host.op", "host.annotation",
                      "host.python", "gpu.kernel", "gpu.memcpy", "gpu.memset", "gpu.sync",
                      "gpu.graph")
# Framework ops that read a device value on the host, and so synchronize.
SYNC_OPS = ("aten::item", "aten::_local_scalar_dense")
NO_GPU = "no GPU activity in this trace"


class Codes:
    """A dictionary column (category, name) as numpy codes, one per row: equal values have
    equal codes, and a string test runs once per distinct value, then maps through the
    codes (the same answers as ``tracekit.toolkit.is_in``, ``matches`` ...: False for null).
    """

    def __init__(self, column: pa.ChunkedArray) -> None:
        values = column.combine_chunks() if column.num_chunks else pa.array([], pa.string())
        if not pa.types.is_dictionary(values.type):
            values = values.dictionary_encode()
        index: dict[str, int] = {}
        remap = [-1 if v is None else index.setdefault(v, len(index))
                 for v in values.dictionary.cast(pa.string()).to_pylist()]
        remap = np.array([*remap, -1], dtype=np.int64)
        remap[remap < 0] = len(index)
        #: The distinct values; the last, None, is a null value.
        self.entries: list[str | None] = [*index, None]
        #: Per row: the index of its value in ``entries``.
        self.codes = remap[values.indices.fill_null(len(remap) - 1).to_numpy(
            zero_copy_only=False)]
        self._strings = pa.array(self.entries, pa.string())

    def _per_row(self, hit: pa.Array) -> np.ndarray:
        return hit.fill_null(False).to_numpy(zero_copy_only=False)[self.codes]

    def is_in(self, values: Iterable[str]) -> np.ndarray:
        """Per row: is the value one of ``values``?"""
        return self._per_row(pc.is_in(self._strings, pa.array(list(values), pa.string())))

    def equals(self, value: str) -> np.ndarray:
        """Per row: ``value ==``."""
        return self._per_row(pc.equal(self._strings, value))

    def matches(self, pattern: str) -> np.ndarray:
        """Per row: does the value contain a match of ``pattern`` (RE2 syntax)?"""
        return self._per_row(pc.match_substring_regex(self._strings, pattern))

    def starts_with(self, prefix: str) -> np.ndarray:
        """Per row: does the value start with ``prefix``?"""
        return self._per_row(pc.starts_with(self._strings, prefix))


@dataclass
class DeviceWork:
    """The GPU work of one device of one input, sorted by start."""

    source: str
    source_code: int
    device: int
    label: str
    start: np.ndarray
    end: np.ndarray
    cls: np.ndarray
    row: np.ndarray
    api: np.ndarray  # index into Activity.calls, -1 where no launching call is known

    @property
    def span(self) -> int:
        """First work start to last work end (ns); 0 without work."""
        return int(self.end.max() - self.start.min()) if len(self.start) else 0

    @property
    def before_recording(self) -> np.ndarray:
        """Per work: it has no launching call and starts before the first work that has one,
        so it was queued before the profiler began recording (all False where no work has a
        known call: then the trace holds no calls to tell by)."""
        known = self.api >= 0
        if not known.any():
            return np.zeros(len(known), dtype=bool)
        return ~known & (self.start < self.start[known].min())


@dataclass
class HostCalls:
    """Host API calls and synchronizing ops, one entry each."""

    row: np.ndarray
    source: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    start: np.ndarray
    end: np.ndarray
    is_sync: np.ndarray
    is_op: np.ndarray  # a framework op (aten::item ...) rather than an API call
    is_launch: np.ndarray
    prev_launch_end: np.ndarray  # end of the previous launching call on the thread, or -1


@dataclass
class Activity:
    """GPU work per device and host calls, with launch links between them."""

    events: pa.Table
    category: Codes  # of every events row
    name_codes: Codes  # of every events row
    devices: list[DeviceWork]
    calls: HostCalls
    cache: dict[str, Any] = field(default_factory=dict)  # what analyzers derive and share

    @functools.cached_property
    def names(self) -> list[str]:
        """The event name of every events row (materialized on first use)."""
        return np.asarray(self.name_codes.entries, dtype=object)[self.name_codes.codes].tolist()

    @functools.cached_property
    def first_work_ns(self) -> int | None:
        """When the first GPU work of any device starts (None without GPU work)."""
        starts = [int(w.start.min()) for w in self.devices if len(w.start)]
        return min(starts) if starts else None

    @functools.cached_property
    def last_work_ns(self) -> int | None:
        """When the last GPU work of any device ends (None without GPU work)."""
        ends = [int(w.end.max()) for w in self.devices if len(w.end)]
        return max(ends) if ends else None

    @property
    def has_steps(self) -> bool:
        """Whether the trace marks steps (``ProfilerStep#N`` ranges)."""
        if "has_steps" not in self.cache:
            self.cache["has_steps"] = step_ranges(Trace(self.events)).num_rows > 0
        return self.cache["has_steps"]

    @functools.cached_property
    def in_steps(self) -> np.ndarray:
        """Per host call: whether it starts inside a ``ProfilerStep#N`` range of its input
        (every call of an input that marks no steps). Calls outside the steps are set-up, or
        the profiler's own: stopping, it synchronizes the device after the last step."""
        calls = self.calls
        inside = np.ones(len(calls.start), dtype=bool)
        steps = step_ranges(Trace(self.events))
        if not steps.num_rows:
            return inside
        code = {n: i for i, n in enumerate(
            self.events["source"].combine_chunks().dictionary.to_pylist())}
        step_source = np.array([code[n] for n in steps["source"].to_pylist()], dtype=np.int64)
        marked = np.isin(calls.source, step_source)
        inside[marked] = iv.covered_by_group(
            calls.source[marked], calls.start[marked], step_source,
            steps["start"].to_numpy(), steps["end"].to_numpy())
        return inside

    @classmethod
    def of(cls, trace: Trace) -> Activity:
        """The activity of ``trace``, computed on first use and kept on the trace."""
        cached = trace.cache.get("diagnosis.activity")
        if cached is None or cached.events is not trace.events:
            cached = _build(trace)
            trace.cache["diagnosis.activity"] = cached
        return cached

    def name(self, row: int) -> str:
        """The event name of events row ``row``."""
        return self.name_codes.entries[self.name_codes.codes[row]]


def launches_work(events: pa.Table) -> np.ndarray:
    """Per events row: a host row linked (by correlation) to device work, a kernel, copy,
    memset or graph row, and not only to device-side waits (``gpu.sync``)."""
    key, linked, on_device = launch_links(events)
    return _links_to_work(key, linked, on_device, _flag(is_in(events["category"], GPU_WORK)))


def _links_to_work(key: np.ndarray, linked: np.ndarray, on_device: np.ndarray,
                   is_work: np.ndarray) -> np.ndarray:
    # A launch is a call linked to device work, not one linked only to device-side waits
    # (cudaStreamWaitEvent -> "Stream Wait Event").
    work = is_work & on_device & linked
    launches = linked & ~on_device
    rows = np.flatnonzero(launches)
    launches[rows] = _isin(key[rows], key[work])
    return launches


def _isin(values: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """``np.isin`` by sorting and binary search (numpy 2.4's hashing np.isin is ~10x slower
    on 100k+ distinct keys)."""
    if not len(pool):
        return np.zeros(len(values), dtype=bool)
    pool = np.sort(pool)
    at = np.minimum(np.searchsorted(pool, values), len(pool) - 1)
    return pool[at] == values


def _flag(mask: pa.ChunkedArray) -> np.ndarray:
    """A boolean column (no nulls) as a numpy array."""
    return mask.to_numpy()


def _strings(column: pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks().cast(pa.string()) if column.num_chunks else \
        pa.array([], pa.string())


def _is_sync_api(names: Codes) -> np.ndarray:
    sync_copy = names.matches(SYNC_COPY_API) & ~names.matches("Async")
    return names.matches(SYNC_API) | sync_copy


def _build(trace: Trace) -> Activity:
    # String tests run on the distinct categories and names (a few hundred values), never
    # on a string per row.
    events = trace.events
    category, names = Codes(events["category"]), Codes(events["name"])
    is_slice = _flag(equals(events["kind"], "slice"))
    timed = events["ts_ns"].is_valid().to_numpy(zero_copy_only=False)
    ts = events["ts_ns"].fill_null(0).to_numpy()
    end = ts + events["dur_ns"].fill_null(0).to_numpy()
    is_gpu_work = category.is_in(GPU_WORK)
    is_work = is_gpu_work & is_slice & timed & \
        events["device"].is_valid().to_numpy(zero_copy_only=False)
    is_kernel = category.equals("gpu.kernel")
    cls = np.full(events.num_rows, COMPUTE, dtype=np.int8)
    is_memop = category.is_in(["gpu.memcpy", "gpu.memset"])
    cls[is_memop | (is_kernel & names.matches(MEMORY_KERNEL))] = MEMORY
    cls[is_kernel & names.matches(COMM_KERNEL)] = COMMUNICATION

    key, linked, on_device = launch_links(events)
    is_api = category.is_in(API) & ~on_device
    under_collective = _inside_collectives(events, category, names, ts, end,
                                           is_api & linked & is_slice & timed)
    is_sync_op = names.is_in(SYNC_OPS)
    is_call = (is_api | is_sync_op) & is_slice & timed
    call_rows = np.flatnonzero(is_call)
    is_sync = (is_api & _is_sync_api(names)) | is_sync_op
    memset_calls = np.flatnonzero(is_api & linked & names.matches(SYNC_MEMSET_API))
    if len(memset_calls):
        host_target = on_device & linked & category.equals("gpu.memset") & _flag(
            is_in(events["dst_kind"], HOST_MEMORY_KINDS).fill_null(False))
        is_sync[memset_calls] = _isin(key[memset_calls], key[host_target])
    calls = _host_calls(events, call_rows, ts, end, is_sync=is_sync,
                        is_op=is_sync_op,
                        is_launch=is_api & _links_to_work(key, linked, on_device, is_gpu_work))

    # Device row -> launching call: the first call row with the same (source, pid, corr) key.
    launch_pos = np.flatnonzero(calls.is_launch)
    call_keys = key[calls.row[launch_pos]]
    order = np.argsort(call_keys, kind="stable")
    sorted_keys, sorted_pos = call_keys[order], launch_pos[order]

    source_codes = events["source"].combine_chunks().indices.to_numpy(zero_copy_only=False)
    source_names = events["source"].combine_chunks().dictionary.to_pylist()
    device = events["device"].fill_null(-1).to_numpy()
    several = len(np.unique(source_codes[is_work])) > 1
    devices = []
    _, (work_sources, work_devices) = factorize(source_codes[is_work].astype(np.int64),
                                                device[is_work])
    for code, dev in zip(work_sources.tolist(), work_devices.tolist(), strict=True):
        rows = np.flatnonzero(is_work & (source_codes == code) & (device == dev))
        rows = rows[np.argsort(ts[rows], kind="stable")]
        api = np.full(len(rows), -1, dtype=np.int64)
        want = linked[rows] & (len(sorted_keys) > 0)
        if want.any():
            k = key[rows[want]]
            i = np.minimum(np.searchsorted(sorted_keys, k), len(sorted_keys) - 1)
            hit = sorted_keys[i] == k
            api[np.flatnonzero(want)[hit]] = sorted_pos[i[hit]]
        source = source_names[code]
        label = f"{source} GPU {dev}" if several else f"GPU {dev}"
        row_cls = cls[rows]
        launched_in_collective = np.zeros(len(rows), dtype=bool)
        has_api = api >= 0
        launched_in_collective[has_api] = under_collective[calls.row[api[has_api]]]
        row_cls[launched_in_collective & (row_cls == COMPUTE)] = COMMUNICATION
        devices.append(DeviceWork(source, code, dev, label, ts[rows], end[rows], row_cls,
                                  rows, api))
    return Activity(events, category, names, devices, calls)


def _inside_collectives(events: pa.Table, category: Codes, names: Codes, ts: np.ndarray,
                        end: np.ndarray, launches: np.ndarray) -> np.ndarray:
    """For each events row, whether it is a launch made inside a collective's host range on
    the same thread (of the same input and process)."""
    inside = np.zeros(len(ts), dtype=bool)
    is_host = category.is_in(["host.op", "host.annotation"])
    ranges = np.flatnonzero(is_host & names.matches(COLLECTIVE_RANGE))
    if not len(ranges) or not launches.any():
        return inside
    source = events["source"].combine_chunks().indices.to_numpy(zero_copy_only=False)
    pid = events["pid"].fill_null(-1).to_numpy()
    tid = events["tid"].fill_null(-1).to_numpy()
    thread_rows = np.flatnonzero(launches)
    range_keys, (r_src, r_pid, r_tid) = factorize(source[ranges].astype(np.int64),
                                                  pid[ranges], tid[ranges])
    for k in range(len(r_src)):
        mine = ranges[range_keys == k]
        on_thread = thread_rows[(source[thread_rows] == r_src[k]) & (pid[thread_rows] == r_pid[k])
                                & (tid[thread_rows] == r_tid[k])]
        if len(on_thread):
            inside[on_thread] = iv.covered(ts[on_thread], iv.union(ts[mine], end[mine]))
    return inside


def _host_calls(events: pa.Table, rows: np.ndarray, ts: np.ndarray, end: np.ndarray,
                is_sync: np.ndarray, is_op: np.ndarray, is_launch: np.ndarray) -> HostCalls:
    source = events["source"].combine_chunks().indices.to_numpy(zero_copy_only=False)[rows]
    pid = events["pid"].fill_null(-1).to_numpy()[rows]
    tid = events["tid"].fill_null(-1).to_numpy()[rows]
    start, stop = ts[rows], end[rows]
    launch = is_launch[rows]
    # Previous launching call on the same thread: sort launches by (thread, start).
    prev = np.full(len(rows), -1, dtype=np.int64)
    pos = np.flatnonzero(launch)
    order = pos[np.lexsort((start[pos], tid[pos], pid[pos], source[pos]))]
    same = (source[order][1:] == source[order][:-1]) & (pid[order][1:] == pid[order][:-1]) & \
        (tid[order][1:] == tid[order][:-1])
    prev[order[1:][same]] = stop[order[:-1][same]]
    return HostCalls(rows, source, pid, tid, start, stop, is_sync[rows], is_op[rows], launch,
                     prev)


def queued_before(trace: Trace) -> str:
    """What GPU work without a launching call, before the first work with one, is: work
    launched before the window an export was cut to (``metadata["export_window"]`` of a
    source), else work queued before the recording began."""
    windows = [s["export_window"] for s in trace.metadata.get("sources", {}).values()
               if isinstance(s, dict) and s.get("export_window")]
    return (f"launched before the window the export was cut to ({windows[0]})" if windows
            else "queued before the recording began")


def sync_api_calls(activity: Activity) -> np.ndarray:
    """Per host call: a synchronizing API call (not an op) of the program's steps; where the
    trace marks steps, those outside them are left out (``Activity.in_steps``)."""
    calls = activity.calls
    return calls.is_sync & ~calls.is_op & activity.in_steps


def host_reads(activity: Activity) -> int:
    """How many times the host read a device value (``.item()`` and the like) in the steps
    (``Activity.in_steps``): ``aten::_local_scalar_dense`` ops, or ``aten::item`` where the
    trace has only those, that make a GPU API call on their thread (the copy back and its
    wait). A read of a CPU tensor (AdamW's step counter) makes none and is no device read;
    where the trace holds no API call at all, every read counts."""
    calls = activity.calls
    op = np.flatnonzero(calls.is_op & activity.in_steps)
    values = activity.events["name"].take(pa.array(calls.row[op])).cast(
        pa.string()).to_numpy(zero_copy_only=False)
    dense, item = values == "aten::_local_scalar_dense", values == "aten::item"
    reads = op[dense] if dense.sum() >= item.sum() else op[item]
    api = np.flatnonzero(~calls.is_op)
    if not len(reads) or not len(api):
        return len(reads)
    thread, _ = factorize(np.concatenate([calls.source[reads], calls.source[api]]),
                          np.concatenate([calls.pid[reads], calls.pid[api]]),
                          np.concatenate([calls.tid[reads], calls.tid[api]]))
    return int(iv.holds_by_group(thread[:len(reads)], calls.start[reads], calls.end[reads],
                                 thread[len(reads):], calls.start[api]).sum())


