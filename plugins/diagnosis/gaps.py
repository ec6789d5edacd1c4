"""The ``gaps`` analyzer: when each GPU sat idle, for how long, and what the host was doing.

A gap is a hole in the union of a device's activity across all its streams (nsys' gpu_gaps
rule, peers.md section 2: no leading or trailing gap). Each gap is attributed to a cause by
the host call that launched the work ending it (HTA's host-wait / kernel-wait split,
refined):

- ``queued``: that work was launched before the GPU went idle, so the host was not late (a
  cross-stream dependency or launch latency held it); or, where the gap would be ``cpu``,
  its launch call returned within the first half of the gap, so the host was late for less
  than half of it (a dependency or a wait on an event held the work);
- ``sync``: a synchronizing call (device/stream/event synchronize, a synchronous copy,
  ``aten::item``) of the launching process returned inside the gap after blocking the host
  for at least half as long as the gap: the host waited for the GPU to drain, then the GPU
  waited for the host (a short sync followed by long host work is ``cpu``);
- ``launch``: the launching thread was issuing back-to-back launches (the previous launch
  ended at most ``launch_gap_us`` earlier): launch overhead, the kernels are too short;
- ``cpu``: the launching thread spent longer than that between launches: host work;
- ``unknown``: the trace does not say which call launched the work;
- ``communication``: whatever of ``sync``, ``launch``, ``cpu`` or ``unknown`` the above says,
  at least half of the gap is covered by host communication calls of the launching processes
  (``HOST_COMMUNICATION``: MPI's blocking calls, PyTorch's collective ranges): the rank waited
  on an exchange, or on slower ranks, while its GPU sat idle;
- ``startup``: whatever the above says, at least half of the gap is covered by one-time
  initialization calls of the launching process (``STARTUP_CALLS``: context and module
  loading, library handles, JIT compilation, and memory allocation and stream creation calls
  that are the first of their kind in their process or last ``STARTUP_ALLOC_MS`` or more),
  and a kernel's first launch call
  when it lasts ``FIRST_LAUNCH_MS`` or more and ``FIRST_LAUNCH_RATIO`` times the median launch
  call (its code object loaded lazily); and, in a trace without ``ProfilerStep`` ranges, every
  gap before the device's first compute kernel (set-up: allocating, reading and uploading the
  input). The verdict is given on the steady state, without these gaps.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import Finding, Report, Trace
from tracekit.plugins.diagnosis.activity import MEMORY, NO_GPU, READS_COLUMNS, Activity
from tracekit.plugins.diagnosis.timeline import DeviceTimeline, device_timelines
from tracekit.toolkit import (
    COLLECTIVE_RANGE,
    STEP_RANGE,
    STEPS_HELP,
    WINDOW_HELP,
    format_ns,
    percent,
    report_table,
    restrict,
)
from tracekit.toolkit import intervals as iv

#: The category of the gap spans ``convert --annotate`` draws.
GAP_CATEGORY = "analysis.gap"

CAUSES = ("sync", "launch", "cpu", "queued", "unknown", "startup", "communication")
SYNC, LAUNCH, CPU, QUEUED, UNKNOWN, STARTUP, COMMUNICATION = range(7)
# Host calls that wait on an exchange between ranks: MPI's blocking calls (nsys --trace=mpi, or
# NVTX ranges of an MPI wrapper) and PyTorch's collective ranges (the toolkit's rule).
HOST_COMMUNICATION = COLLECTIVE_RANGE
STARTUP_CALLS = (r"^(cu|cuda|hip)(Init|CtxCreate|DevicePrimaryCtxRetain|ModuleLoad|ModuleUnload"
                 r"|LibraryLoad|GetDeviceCount|SetDevice|DeviceReset|GetDeviceProperties"
                 r"|DeviceGetStreamPriorityRange|HostRegister|HostAlloc|FreeHost"
                 r"|StreamBeginCapture|StreamEndCapture|GraphInstantiate)"
                 r"|^(cublas|cublasLt|cudnn|hipblas|hipblasLt|rocblas|miopen|cusparse|cufft"
                 r"|cusolverDn|nccl)(Create|CommInit)|^cudnnFind|^MPI_Init"
                 r"|^nvrtc|^hiprtc|triton/compiler|^TorchDynamo|_inductor/|compile_fx")
STARTUP_ALLOC = r"^(cuda|hip|cu)(Malloc|Free|MemAlloc|MemFree)(Host|Managed|_v2)?$"
# Stream creation: frameworks create their streams once (PyTorch a pool per device and
# priority, libraries a stream per handle); a long one loaded the context or modules lazily.
STARTUP_STREAMS = r"^(cuda|hip|cu)StreamCreate(WithFlags|WithPriority)?(_v2)?$"
STARTUP_ALLOC_MS = 10
# A kernel's code object is loaded on its first launch (CUDA lazy loading, the default since
# CUDA 12.2; HIP loads code objects lazily too): a first launch of a kernel that lasts this long
# and this many times the median launch call of its input is one-time loading.
FIRST_LAUNCH_MS = 1
FIRST_LAUNCH_RATIO = 20
# Kernels that only initialize memory (value-initialized Kokkos views, Kokkos' lock arrays,
# fills by ROCm's blit kernels, PyTorch, Thrust and CUB): set-up, not the first computation.
INIT_KERNELS = (r"ViewValueFunctor|ViewFill<|init_lock_array|rocclr_fill|FillFunctor|__fill::|"
                r"DeviceFill|[Mm]emset")
GRAPH_CAPTURE = r"^(cuda|hip)(StreamBeginCapture|StreamEndCapture|GraphInstantiate)"
BUCKETS = ((0, 10_000, "< 10µs"), (10_000, 100_000, "10–100µs"),
           (100_000, 1_000_000, "100µs–1ms"), (1_000_000, 10_000_000, "1–10ms"),
           (10_000_000, 2**62, "≥ 10ms"))
HOST_CONTEXT = ("host.op", "host.annotation", "host.python", "host.os", "api.runtime",
                "api.driver")


@dataclass
class Gaps:
    """The idle gaps of one device with their causes."""

    timeline: DeviceTimeline
    lo: np.ndarray
    hi: np.ndarray
    cause: np.ndarray
    call: np.ndarray  # index into Activity.calls of the launch that ended the gap, or -1
    next_row: np.ndarray  # events row of the work that ended the gap

    @functools.cached_property
    def dur(self) -> np.ndarray:
        """Length of each gap (ns); computed once, callers index it per gap."""
        return self.hi - self.lo

    def by_cause(self) -> dict[str, int]:
        """Idle ns per cause."""
        return {c: int(self.dur[self.cause == i].sum()) for i, c in enumerate(CAUSES)}


def device_gaps(activity: Activity, timeline: DeviceTimeline, launch_gap_ns: int) -> Gaps:
    """Find and attribute the idle gaps of one device."""
    work, calls = timeline.work, activity.calls
    lo, hi = iv.gaps(timeline.busy)
    first = np.searchsorted(work.start, hi, side="left")  # the work that starts at hi
    call = work.api[first] if len(first) else np.empty(0, np.int64)
    cause = np.full(len(lo), UNKNOWN, dtype=np.int8)
    known = call >= 0
    c = np.where(known, call, 0)
    launched = calls.start[c] if len(calls.start) else np.zeros(len(lo), np.int64)
    # Synchronizing calls of the processes that launch work on this device.
    pids = np.unique(calls.pid[work.api[work.api >= 0]])
    mine = calls.is_sync & (calls.source == work.source_code) & np.isin(calls.pid, pids)
    order = np.argsort(calls.end[mine], kind="stable")
    sync_ends = calls.end[mine][order]
    sync_waits = (calls.end - calls.start)[mine][order]
    last = np.searchsorted(sync_ends, hi, "right") - 1
    returned = (last >= 0) & (sync_ends[np.maximum(last, 0)] > lo) if len(sync_ends) else \
        np.zeros(len(lo), dtype=bool)
    # A sync explains the gap when the host was blocked in it for at least half as long as
    # the gap: without it, the host would have done its work while the GPU was still busy.
    # A short sync followed by long host work is host work (cpu).
    waited = sync_waits[np.maximum(last, 0)] if len(sync_ends) else np.zeros(len(lo))
    synced = returned & (waited * 2 >= hi - lo)
    prev = calls.prev_launch_end[c] if len(calls.start) else np.full(len(lo), -1)
    back_to_back = (prev >= 0) & (launched - prev <= launch_gap_ns)
    # Host work would be the cause, but the launch returned in the gap's first half: the work
    # then waited on the GPU side (a dependency, a queue) for most of the gap.
    returned_early = (calls.end[c] - lo) * 2 <= hi - lo if len(calls.start) else launched <= lo
    cause[known] = np.select(
        [launched <= lo, synced, back_to_back, returned_early],
        [QUEUED, SYNC, LAUNCH, QUEUED], CPU)[known]
    exchange = covered_by(host_calls(activity, HOST_COMMUNICATION), work.source_code, pids,
                          lo, hi)
    if exchange is not None:
        cause[(exchange * 2 >= hi - lo) & (cause != QUEUED)] = COMMUNICATION
    init = covered_by(startup_calls(activity), work.source_code, pids, lo, hi)
    if init is not None:
        cause[init * 2 >= hi - lo] = STARTUP
    if not activity.has_steps:
        # Without steps, what comes before a device's first compute kernel is set-up:
        # allocating, reading, initializing and uploading the input (a steady state computes).
        kernels = np.flatnonzero(work.cls != MEMORY)
        kernels = kernels[~_initializes(activity, work.row[kernels])]
        if len(kernels):
            cause[hi <= work.start[kernels[0]]] = STARTUP
    rows = work.row[first] if len(first) else np.empty(0, np.int64)
    return Gaps(timeline, lo, hi, cause, np.where(known, call, -1), rows)


def _initializes(activity: Activity, rows: np.ndarray) -> np.ndarray:
    """Which of these kernels only initialize memory (``INIT_KERNELS``)."""
    names = activity.events["name"].take(pa.array(rows)).cast(pa.string())
    return pc.match_substring_regex(names, INIT_KERNELS).fill_null(False).to_numpy(
        zero_copy_only=False)


def covered_by(calls: tuple[np.ndarray, ...] | None, source: int, pids: np.ndarray,
               lo: np.ndarray, hi: np.ndarray) -> np.ndarray | None:
    """Per gap ``[lo, hi)``: the ns that ``calls`` (source code, pid, start, end, as
    ``host_calls`` gives them) of input ``source`` cover, counting only the processes
    ``pids`` that launch the device's work (all of the input's where the trace does not say
    which); None where no such call is."""
    if calls is None or not len(lo):
        return None
    sel = calls[0] == source
    if len(pids):
        sel &= np.isin(calls[1], pids)
    if not sel.any():
        return None
    return iv.covered_within(lo, hi, iv.union(calls[2][sel], calls[3][sel]))


def host_calls(activity: Activity, pattern: str) -> tuple[np.ndarray, ...] | None:
    """(source, pid, start, end) of the timed host calls and ranges named as ``pattern``."""
    key = f"host calls {pattern}"
    if key not in activity.cache:
        ev = activity.events
        rows = np.flatnonzero(activity.category.is_in(HOST_CONTEXT)
                              & ev["ts_ns"].is_valid().to_numpy(zero_copy_only=False)
                              & ev["dur_ns"].is_valid().to_numpy(zero_copy_only=False)
                              & activity.name_codes.matches(pattern))
        take = pa.array(rows)
        start = ev["ts_ns"].take(take).to_numpy()
        # Source codes as startup_calls and the device timelines number them.
        source = ev["source"].combine_chunks().indices.to_numpy(zero_copy_only=False)
        activity.cache[key] = None if not len(rows) else (
            source[rows], ev["pid"].take(take).fill_null(-1).to_numpy(), start,
            start + ev["dur_ns"].take(take).to_numpy())
    return activity.cache[key]


def startup_calls(activity: Activity) -> tuple[np.ndarray, ...] | None:
    """(source, pid, start, end) of the one-time initialization calls (``STARTUP_CALLS``)."""
    if "startup" in activity.cache:
        return activity.cache["startup"]
    ev = activity.events
    host = activity.category.is_in(["api.runtime", "api.driver", "host.op", "host.python",
                                    "host.annotation"])
    host &= ev["ts_ns"].is_valid().to_numpy(zero_copy_only=False)
    host &= ev["dur_ns"].is_valid().to_numpy(zero_copy_only=False)
    keep = host & activity.name_codes.matches(STARTUP_CALLS)
    source = ev["source"].combine_chunks().indices.to_numpy(zero_copy_only=False)
    pid = ev["pid"].fill_null(-1).to_numpy()
    ts = ev["ts_ns"].fill_null(0).to_numpy()
    dur = ev["dur_ns"].fill_null(0).to_numpy()
    for pattern in (STARTUP_ALLOC, STARTUP_STREAMS):  # the first of each process, or long
        rows = np.flatnonzero(host & activity.name_codes.matches(pattern))
        if not len(rows):
            continue
        order = rows[np.lexsort((ts[rows], pid[rows], source[rows]))]
        first = np.r_[True, (source[order][1:] != source[order][:-1])
                      | (pid[order][1:] != pid[order][:-1])]
        keep[rows[dur[rows] >= STARTUP_ALLOC_MS * 1_000_000]] = True
        keep[order[first]] = True
    rows = np.union1d(np.flatnonzero(keep), first_launch_loads(activity))
    result = (source[rows], pid[rows], ts[rows], ts[rows] + dur[rows]) if len(rows) else None
    activity.cache["startup"] = result
    return result


def first_launch_loads(activity: Activity) -> np.ndarray:
    """Events rows of launch calls that loaded their kernel: the first launch of a kernel name
    on a device, lasting ``FIRST_LAUNCH_MS`` and ``FIRST_LAUNCH_RATIO`` times the median
    launch call of the input or more."""
    calls = activity.calls
    took = calls.end - calls.start
    kernel = activity.category.equals("gpu.kernel")
    names = activity.name_codes.codes  # equal codes are equal names
    found: list[np.ndarray] = []
    for work in activity.devices:
        linked = (work.api >= 0) & kernel[work.row]
        if not linked.any():
            continue
        api = work.api[linked]  # in start order, so np.unique's first index is the first launch
        _, first = np.unique(names[work.row[linked]], return_index=True)
        launches = calls.is_launch & (calls.source == work.source_code)
        median = float(np.median(took[launches]))
        api = api[first]
        slow = (took[api] >= FIRST_LAUNCH_MS * 1_000_000) & (
            took[api] >= FIRST_LAUNCH_RATIO * median)
        found.append(calls.row[api[slow]])
    return np.concatenate(found) if found else np.empty(0, np.int64)


def launch_gaps_to_copies(activity: Activity, gaps: Gaps) -> tuple[int, int, int, int]:
    """A device's launch gaps (count, ns) and of them those that a host-device copy ends
    (count, ns): the GPU waited for the next copy call, not the next kernel. A device-to-device
    copy (DDP's bucket copies) does not count: it is not batched on the host."""
    if "host_device_copies" not in activity.cache:  # per events row, once per trace
        ev = activity.events
        activity.cache["host_device_copies"] = activity.category.is_in(("gpu.memcpy",)) & \
            pc.fill_null(pc.is_in(ev["copy_kind"].cast(pa.string()),
                                  pa.array(["HtoD", "DtoH"])), False).to_numpy(
                zero_copy_only=False)
    copy = activity.cache["host_device_copies"]
    mine = gaps.cause == CAUSES.index("launch")
    to_copy = mine & (gaps.next_row >= 0) & copy[np.maximum(gaps.next_row, 0)]
    return (int(mine.sum()), int(gaps.dur[mine].sum()), int(to_copy.sum()),
            int(gaps.dur[to_copy].sum()))


def all_gaps(trace: Trace, launch_gap_us: float) -> list[Gaps]:
    """The attributed gaps of every device of ``trace``."""
    activity = Activity.of(trace)
    key = f"gaps {launch_gap_us}"
    if key not in activity.cache:
        activity.cache[key] = [device_gaps(activity, t, int(launch_gap_us * 1000))
                               for t in device_timelines(trace)]
    return activity.cache[key]


@dataclass
class GapContext:
    """What the launching thread did during one gap.

    ``innermost`` is the most specific host range (op, API call, annotation) that covers at
    least half of the gap; ``path`` the ranges that enclose it, outermost first; ``share`` the
    part of the gap it covers. When the thread's recorded ranges together cover less than
    half of the gap, ``innermost`` is ``UNTRACED``, ``share`` the part no range covers, and
    ``between`` the longest stretch no range covers, with the ranges on either side of it
    (the last one before it, and the first one after it or else the op that launched the
    work ending the gap): the host ran code the profiler did not record there.

    When the launching call returned within the first half of the gap, the launching thread
    was not late: the work waited for something else. If another thread of the process ran
    one range over at least half of the gap, that range is the context (``launched_after``
    says when the work was launched): PyTorch launches backward kernels from its autograd
    thread while the main thread runs the optimizer.
    """

    innermost: str
    duration: int
    share: float
    path: list[str]
    between: tuple[str, str, int] | None = None  # before, after, the stretch's ns
    launched_after: int | None = None
    #: In untraced host time, the recorded output calls spread over it (putc, fwrite,
    #: write …): the most frequent, how many in all, and their time within the gap (ns),
    #: where there are OUTPUT_CALLS_MIN.
    output_calls: tuple[str, int, int] | None = None

    @property
    def writing(self) -> bool:
        """Whether the output calls take half the gap or more: the host prints there."""
        return self.output_calls is not None and self.output_calls[2] * 2 >= self.duration

    def describe(self, depth: int = 3) -> str:
        """``aten::addmm (92% of the gap, in a 1.2ms call) in ProfilerStep#3 > DDP.forward``:
        the call's own length beside its share of the gap, which may be far shorter."""
        if self.innermost == NO_HOST_ACTIVITY:
            return NO_HOST_ACTIVITY
        if self.innermost == UNTRACED:
            before, after, stretch = self.between or ("", "", 0)
            return (f"{UNTRACED} ({self.share:.0f}% of the gap in no recorded op"
                    + (f"; the longest stretch {format_ns(stretch)}" if stretch else "")
                    + (f", after {before}" if before else "")
                    + (f", before {after}" if after else "") + ")"
                    + (f", with {self.output_calls[1]:,} output calls spread over it "
                       f"({self.output_calls[0]} …, {format_ns(self.output_calls[2])} of it)"
                       if self.output_calls else ""))
        if self.launched_after is not None:
            when = (f"{format_ns(self.launched_after)} into the gap" if self.launched_after >= 0
                    else f"{format_ns(-self.launched_after)} before the gap")
            return (f"{self.innermost} ({self.share:.0f}% of the gap, in a "
                    f"{format_ns(self.duration)} call) on another thread; the work was launched "
                    f"{when} and waited")
        outer = self.path[-depth:]
        where = (" in " + " > ".join(outer)) if outer else ""
        ellipsis = "… > " if len(self.path) > depth else ""
        if ellipsis:
            where = " in " + ellipsis + " > ".join(outer)
        return f"{self.innermost} ({self.share:.0f}% of the gap, in a " \
            f"{format_ns(self.duration)} call){where}"


#: What a gap's context is called when the launching thread's recorded ranges cover less than
#: half of it (Python between ops, or work the profiler does not see).
UNTRACED = "untraced host time"
#: What it is called when the launching thread recorded nothing at all during the gap.
NO_HOST_ACTIVITY = "no recorded host activity"


class HostRanges:
    """The host ranges a gap's context is read from: timed events of the ``HOST_CONTEXT``
    categories with a source, pid and tid. A process's ranges are gathered on first use (gap
    contexts ask for the few processes that launch work), in events-row order."""

    def __init__(self, activity: Activity) -> None:
        ev = activity.events
        source = ev["source"].combine_chunks()
        keep = activity.category.is_in(HOST_CONTEXT)
        for column in ("ts_ns", "dur_ns", "pid", "tid"):
            keep &= ev[column].is_valid().to_numpy(zero_copy_only=False)
        # Sources by name: a dictionary may hold one name twice; a null name is no source.
        self._codes: dict[str, list[int]] = {}
        for i, name in enumerate(source.dictionary.cast(pa.string()).to_pylist()):
            if name is not None:
                self._codes.setdefault(name, []).append(i)
        self._rows = np.flatnonzero(keep & source.is_valid().to_numpy(zero_copy_only=False))
        self._source = source.indices.fill_null(-1).to_numpy()[self._rows]
        self._pid = ev["pid"].fill_null(0).to_numpy()[self._rows]
        self._ev = ev
        self._processes: dict[tuple[str, int], tuple[np.ndarray, ...]] = {}

    @classmethod
    def of(cls, activity: Activity) -> HostRanges:
        """The host ranges of ``activity``, indexed once."""
        if "host ranges" not in activity.cache:
            activity.cache["host ranges"] = cls(activity)
        return activity.cache["host ranges"]

    def process(self, source: str, pid: int) -> tuple[np.ndarray, ...]:
        """(row, tid, start, end) of the ranges of one process, by events row; then the
        positions of its short ranges by start, their starts, the longest short duration,
        and the positions of its long ranges (see ``during``)."""
        key = (source, pid)
        if key not in self._processes:
            mine = np.isin(self._source, self._codes.get(source, [])) & (self._pid == pid)
            rows = self._rows[mine]
            start = self._ev["ts_ns"].take(rows).to_numpy()
            dur = self._ev["dur_ns"].take(rows).to_numpy()
            # The longest 1% are scanned whole; the others found by start: a range of at most
            # `longest` ns overlaps [lo, hi) only if it starts in (lo - longest, hi).
            cut = int(len(dur) * 0.99)
            longest = int(np.partition(dur, cut)[cut]) if len(dur) > _SCAN_ALL else -1
            short = np.flatnonzero(dur <= longest)
            short = short[np.argsort(start[short], kind="stable")]
            self._processes[key] = (rows, self._ev["tid"].take(rows).to_numpy(), start,
                                    start + dur, short, start[short], longest,
                                    np.flatnonzero(dur > longest))
        return self._processes[key]

    def during(self, source: str, pid: int, lo: int, hi: int,
               tid: int, same: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, start, end) of the ranges of thread ``tid`` (or, ``same`` False, of the
        process's other threads) that overlap ``[lo, hi)``, by events row."""
        rows, tids, start, end, short, short_start, longest, long = self.process(source, pid)
        near = short[np.searchsorted(short_start, lo - longest, "right"):
                     np.searchsorted(short_start, hi, "left")]
        at = np.sort(np.concatenate([near, long]))  # positions in row order
        s, e = start[at], end[at]
        sel = (s < hi) & (e > lo) & ((tids[at] == tid) if same else (tids[at] != tid))
        return rows[at][sel], s[sel], e[sel]


# A process with at most this many host ranges is scanned whole for each gap.
_SCAN_ALL = 4096


def gap_context(trace: Trace, gaps: Gaps, index: int) -> GapContext | None:
    """The host ranges of the launching thread during gap ``index``, innermost first."""
    activity = Activity.of(trace)
    call = int(gaps.call[index])
    if call < 0:
        return None
    calls = activity.calls
    lo, hi = int(gaps.lo[index]), int(gaps.hi[index])
    if (int(calls.end[call]) - lo) * 2 < hi - lo:
        other = _other_thread(activity, lo, hi, call, gaps.timeline.work.source)
        if other is not None:
            return other
    rows, s, e = HostRanges.of(activity).during(gaps.timeline.work.source, int(calls.pid[call]),
                                                lo, hi, int(calls.tid[call]), same=True)
    if not len(rows):
        return GapContext(NO_HOST_ACTIVITY, hi - lo, 0.0, [])
    overlap = np.minimum(e, hi) - np.maximum(s, lo)
    half = overlap * 2 >= hi - lo
    # A step range encloses whatever the step does: it is where the gap is, never what.
    step = _step_ranges(activity)[rows]
    if (half & ~step).any():
        # Ranges that each cover most of the gap are nested: longest is outermost.
        enclosing = np.flatnonzero(half)
        enclosing = enclosing[np.lexsort((s[enclosing], -(e - s)[enclosing]))]
        at = int(np.flatnonzero(~step[enclosing])[-1])
        inner = int(enclosing[at])
        path = [activity.name(int(rows[i])) for i in enclosing[:at]]
        return GapContext(activity.name(int(rows[inner])), int(e[inner] - s[inner]),
                          percent(overlap[inner], hi - lo), path)
    rows, s, e = rows[~step], s[~step], e[~step]
    if not len(rows):
        return GapContext(UNTRACED, hi - lo, 100.0, [], ("", "", hi - lo))
    overlap = overlap[~step]
    ranges = iv.union(np.maximum(s, lo), np.minimum(e, hi))
    covered = iv.covered_within(np.array([lo]), np.array([hi]), ranges)[0]
    if covered * 2 < hi - lo:
        return GapContext(UNTRACED, hi - lo, percent(hi - lo - covered, hi - lo), [],
                          _around_longest_hole(activity, rows, s, e, ranges, lo, hi, call),
                          output_calls=_output_calls(activity, rows, s, e, lo, hi))
    inner = int(np.lexsort((e - s, -overlap))[0])
    return GapContext(activity.name(int(rows[inner])), int(e[inner] - s[inner]),
                      percent(overlap[inner], hi - lo), [])


def _step_ranges(activity: Activity) -> np.ndarray:
    """Per events row: is it a ``ProfilerStep#N`` range (``STEP_RANGE``)?"""
    if "step ranges" not in activity.cache:
        activity.cache["step ranges"] = activity.name_codes.matches(STEP_RANGE)
    return activity.cache["step ranges"]


#: Calls that write a program's output (C stdio and the system calls under it): many of
#: them spread over a gap are the host printing between launches.
OUTPUT_CALLS = re.compile(r"^(f?putc|putchar|f?puts|fwrite|f?printf|vf?printf|fflush|write|"
                          r"writev|_IO_\w*)$")
OUTPUT_CALLS_MIN = 20


def _output_calls(activity: Activity, rows: np.ndarray, s: np.ndarray, e: np.ndarray,
                  lo: int, hi: int) -> tuple[str, int, int] | None:
    """The most frequent output call among ``rows`` (starting at ``s``, ending at ``e``), how
    many output calls there are and their time within ``[lo, hi)``, where there are at least
    ``OUTPUT_CALLS_MIN``."""
    if "output calls" not in activity.cache:  # per row, once per trace
        activity.cache["output calls"] = activity.name_codes.matches(OUTPUT_CALLS.pattern)
    is_output = activity.cache["output calls"][rows]
    if int(is_output.sum()) < OUTPUT_CALLS_MIN:
        return None
    codes = activity.name_codes.codes[rows[is_output]]
    most = activity.name_codes.entries[int(np.bincount(codes).argmax())]
    ns = iv.total(iv.union(np.maximum(s[is_output], lo), np.minimum(e[is_output], hi)))
    return str(most), int(is_output.sum()), ns


def _other_thread(activity: Activity, lo: int, hi: int, call: int,
                  source: str) -> GapContext | None:
    """The innermost range another thread of the launching process ran over at least half
    of the gap (ops, API calls, annotations; the profiler's own range is no host work)."""
    calls = activity.calls
    rows, s, e = HostRanges.of(activity).during(source, int(calls.pid[call]), lo, hi,
                                                int(calls.tid[call]), same=False)
    if not len(rows):
        return None
    overlap = np.minimum(e, hi) - np.maximum(s, lo)
    half = np.flatnonzero(overlap * 2 >= hi - lo)
    if not len(half):
        return None
    nested = half[np.lexsort((s[half], -(e - s)[half]))]  # outermost first
    inner = int(nested[-1])
    return GapContext(activity.name(int(rows[inner])), int(e[inner] - s[inner]),
                      percent(overlap[inner], hi - lo),
                      [activity.name(int(rows[i])) for i in nested[:-1]],
                      launched_after=int(calls.start[call]) - lo)


def _around_longest_hole(activity: Activity, rows: np.ndarray, s: np.ndarray, e: np.ndarray,
                         ranges: iv.IntervalSet, lo: int, hi: int, call: int
                         ) -> tuple[str, str, int]:
    """The ranges on either side of the longest stretch of ``[lo, hi)`` that no range covers
    (``ranges``: their union within it): the last one to end before it, the outermost of a
    tie, and the first to start after it, else the innermost one that encloses the launching
    call (the op that launched the work); and the stretch's length."""
    covered_lo, covered_hi = ranges
    hole_lo = np.r_[lo, covered_hi]
    hole_hi = np.r_[covered_lo, hi]
    longest = int(np.argmax(hole_hi - hole_lo))
    start, end = int(hole_lo[longest]), int(hole_hi[longest])
    ended = np.flatnonzero(e <= start)
    before = ""
    if len(ended):
        last = ended[np.lexsort((-(e - s)[ended], -e[ended]))[0]]
        before = activity.name(int(rows[last]))
    begun = np.flatnonzero(s >= end)
    if len(begun):
        after = activity.name(int(rows[begun[np.lexsort((-(e - s)[begun], s[begun]))[0]]]))
    else:
        c_start, c_end = int(activity.calls.start[call]), int(activity.calls.end[call])
        encloses = np.flatnonzero((s <= c_start) & (e >= c_end)
                                  & (rows != activity.calls.row[call]))
        after = activity.name(int(rows[encloses[np.argmax(s[encloses])]])) \
            if len(encloses) else ""
    return before, after, end - start


def host_ops_during(trace: Trace, gaps: Gaps, index: int) -> dict[str, int]:
    """The framework ops the launching thread ran to completion during gap ``index`` before
    the launching call (so launched none of the work that ended the gap: host computation,
    not the launching op's own overhead): ns of the gap each outermost op (one inside no
    other such op) covers, by name."""
    activity = Activity.of(trace)
    call = int(gaps.call[index])
    if call < 0:
        return {}
    calls = activity.calls
    lo, hi = int(gaps.lo[index]), int(gaps.hi[index])
    rows, s, e = HostRanges.of(activity).during(gaps.timeline.work.source, int(calls.pid[call]),
                                                lo, hi, int(calls.tid[call]), same=True)
    ops = activity.category.equals("host.op")[rows] & (e <= int(calls.start[call]))
    rows, s, e = rows[ops], s[ops], e[ops]
    order = np.lexsort((-(e - s), s))  # by start, the enclosing op before the ones inside
    out: dict[str, int] = {}
    reach = lo
    for i in order.tolist():
        if e[i] <= reach:
            continue  # inside (or the same span as) an op already counted
        name = activity.name(int(rows[i]))
        out[name] = out.get(name, 0) + int(min(e[i], hi) - max(s[i], lo, reach))
        reach = int(e[i])
    return out


def host_context(trace: Trace, gaps: Gaps, index: int) -> str:
    """What the launching thread did during one gap, as one line (see ``GapContext``)."""
    context = gap_context(trace, gaps, index)
    return "-" if context is None else context.describe()


class GapsAnalyzer(tracekit.Analyzer):
    """GPU idle intervals per device: their causes, distribution and the largest ones."""

    name = "gaps"
    event_columns = READS_COLUMNS
    description = "GPU idle gaps per device: causes, distribution, largest with host context"
    tracks: ClassVar[dict[str, str]] = {GAP_CATEGORY: "GPU idle gaps (tracekit)"}

    @dataclass(frozen=True)
    class Options:
        min_gap_us: float = field(default=0.0, metadata={
            "help": "list only gaps at least this long (µs)"})
        top: int = field(default=10, metadata={"help": "how many of the largest gaps to list"})
        launch_gap_us: float = field(default=50.0, metadata={
            "help": "host time between launches up to which a gap counts as launch overhead"})
        utilization_bins: int = field(default=500, metadata={
            "min": 1,
            "help": "convert --annotate: time bins of the GPU busy % counter per device"})
        window: str = field(default="", metadata={
            "help": WINDOW_HELP})
        steps: str = field(default="", metadata={
            "help": STEPS_HELP})

    def analyze(self, trace: Trace) -> Report:
        trace = restrict(trace, self.options.window, self.options.steps)
        report = Report(analyzer=self.name, title="GPU idle gaps")
        per_device = all_gaps(trace, self.options.launch_gap_us)
        if not per_device:
            report.notes.append(NO_GPU)
        report.tables["causes"] = _causes_table(per_device)
        report.table_titles["causes"] = "Idle time by cause (% of the device's span)"
        report.tables["distribution"] = _distribution_table(per_device)
        report.table_titles["distribution"] = "Gap lengths"
        report.tables["largest"] = self._largest(trace, per_device)
        report.table_titles["largest"] = (
            f"Largest gaps (at least {self.options.min_gap_us:g}µs; 'at': since the first "
            "activity)")
        report.findings.extend(gap_findings(per_device))
        return report

    def annotations(self, trace: Trace) -> pa.Table:
        """Each idle gap as a slice on a track of its device, and the device's busy % per
        time bin as a counter (``utilization_bins`` bins over its span)."""
        per_device = all_gaps(trace, self.options.launch_gap_us)
        parts: dict[str, list[Any]] = {k: [] for k in (
            "kind", "category", "name", "ts_ns", "dur_ns", "device", "value", "source", "args")}
        for g in per_device:
            work, n = g.timeline.work, len(g.lo)
            parts["kind"].append(np.full(n, "slice", dtype=object))
            parts["category"].append(np.full(n, GAP_CATEGORY, dtype=object))
            parts["name"].append(np.array([f"GPU idle: {c}" for c in CAUSES],
                                          dtype=object)[g.cause])
            parts["ts_ns"].append(g.lo)
            parts["dur_ns"].append(g.dur)
            parts["value"].append(np.full(n, np.nan))
            parts["args"].append(np.array([f'{{"cause": "{c}"}}' for c in CAUSES],
                                          dtype=object)[g.cause])
            lo, busy = _utilization(g.timeline, self.options.utilization_bins)
            m = len(lo)
            parts["kind"].append(np.full(m, "counter", dtype=object))
            parts["category"].append(np.full(m, "counter.utilization", dtype=object))
            parts["name"].append(np.full(m, "GPU busy (%)", dtype=object))
            parts["ts_ns"].append(lo)
            parts["dur_ns"].append(np.zeros(m, dtype=np.int64))
            parts["value"].append(busy)
            parts["args"].append(np.full(m, None, dtype=object))
            for part in (n, m):
                parts["device"].append(np.full(part, work.device))
                parts["source"].append(np.full(part, work.source, dtype=object))
        columns = {k: np.concatenate(v) if v else [] for k, v in parts.items()}
        table_ = pa.table({k: pa.array(v, from_pandas=True) for k, v in columns.items()})
        is_counter = pc.equal(table_["kind"], "counter")
        return table_.set_column(table_.schema.get_field_index("dur_ns"), "dur_ns",
                                 pc.if_else(is_counter, None, table_["dur_ns"]))

    def _largest(self, trace: Trace, per_device: list[Gaps]) -> pa.Table:
        min_ns = max(int(self.options.min_gap_us * 1000), 1)
        picked = []
        for d, g in enumerate(per_device):
            dur = g.dur
            idx = np.flatnonzero(dur >= min_ns)
            idx = idx[np.argsort(-dur[idx], kind="stable")[: self.options.top]]
            picked.extend((int(dur[i]), d, int(i)) for i in idx)
        picked.sort(key=lambda x: (-x[0], x[1], x[2]))
        rows: dict[str, list[Any]] = {k: [] for k in
                                      ("device", "at", "dur", "cause", "next", "host")}
        activity = Activity.of(trace)
        for dur, d, i in picked[: self.options.top]:
            g = per_device[d]
            rows["device"].append(g.timeline.work.label)
            rows["at"].append(int(g.lo[i]) - g.timeline.start)
            rows["dur"].append(dur)
            rows["cause"].append(CAUSES[g.cause[i]])
            rows["next"].append(activity.name(int(g.next_row[i])))
            rows["host"].append(host_context(trace, g, i))
        return report_table([("device", "str", None, rows["device"]),
                             ("at", "int", "ns", rows["at"]),
                             ("duration", "int", "ns", rows["dur"]),
                             ("cause", "str", None, rows["cause"]),
                             ("host_during_gap", "str", None, rows["host"]),
                             ("next_gpu_work", "str", None, rows["next"])])


def _utilization(timeline: DeviceTimeline, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Bin starts over the span (and its end) with the busy % of each bin (0 at the end)."""
    edges = np.unique(np.linspace(timeline.start, timeline.end, max(bins, 1) + 1)
                      .round().astype(np.int64))
    lo, hi = edges[:-1], edges[1:]
    busy = iv.covered_within(lo, hi, timeline.busy) * 100.0 / np.maximum(hi - lo, 1)
    return np.r_[lo, timeline.end], np.r_[np.round(busy, 2), 0.0]


def _causes_table(per_device: list[Gaps]) -> pa.Table:
    cols: dict[str, list[Any]] = {k: [] for k in ("device", "cause", "count", "total", "pct")}
    for g in per_device:
        for i, cause in enumerate(CAUSES):
            sel = g.cause == i
            if not sel.any():
                continue
            cols["device"].append(g.timeline.work.label)
            cols["cause"].append(cause)
            cols["count"].append(int(sel.sum()))
            cols["total"].append(int(g.dur[sel].sum()))
            cols["pct"].append(percent(g.dur[sel].sum(), g.timeline.span))
    return report_table([("device", "str", None, cols["device"]),
                         ("cause", "str", None, cols["cause"]),
                         ("count", "int", None, cols["count"]),
                         ("total", "int", "ns", cols["total"]),
                         ("span_pct", "float", "%", cols["pct"])])


def _distribution_table(per_device: list[Gaps]) -> pa.Table:
    cols: dict[str, list[Any]] = {k: [] for k in ("device", "bucket", "count", "total", "pct")}
    for g in per_device:
        idle = int(g.dur.sum())
        for lo, hi, label in BUCKETS:
            sel = (g.dur >= lo) & (g.dur < hi)
            cols["device"].append(g.timeline.work.label)
            cols["bucket"].append(label)
            cols["count"].append(int(sel.sum()))
            cols["total"].append(int(g.dur[sel].sum()))
            cols["pct"].append(percent(g.dur[sel].sum(), idle))
    return report_table([("device", "str", None, cols["device"]),
                         ("length", "str", None, cols["bucket"]),
                         ("count", "int", None, cols["count"]),
                         ("total", "int", "ns", cols["total"]),
                         ("idle_pct", "float", "%", cols["pct"])])


def gap_findings(per_device: list[Gaps], min_idle_pct: float = 10.0) -> list[Finding]:
    """A finding per device whose GPU is idle for a large share of its span, start-up left
    out (one-time initialization: the verdict is on the steady state), and one on the
    start-up gaps where they take that share themselves."""
    findings = []
    startup = CAUSES.index("startup")
    for g in per_device:
        label, span = g.timeline.work.label, g.timeline.span
        early = g.cause == startup
        startup_ns = int(g.dur[early].sum())
        if span and percent(startup_ns, span) < 1.0:
            # Under 1% of the span start-up is not told apart (as in the verdict): its
            # gaps count with the others (mi210: three of 1 ns).
            early, startup_ns = np.zeros(len(g.dur), dtype=bool), 0
        if span and percent(startup_ns, span) >= min_idle_pct:
            findings.append(Finding(
                severity="info",
                title=f"{label}: start-up gaps take {percent(startup_ns, span)}% of its span, "
                      "left out of its idle share",
                evidence={"startup_ns": startup_ns, "span_ns": span,
                          "startup_gaps": int(early.sum())},
                suggestion="one-time initialization: see 'tracekit analyze -a bottleneck' for "
                           "what it holds, and cut it off with -O window=START:END",
                cost_ns=startup_ns))
        steady_span, idle = span - startup_ns, int(g.dur[~early].sum())
        if steady_span <= 0 or percent(idle, steady_span) < min_idle_pct:
            continue
        causes = sorted(((c, ns) for c, ns in g.by_cause().items() if c != "startup"),
                        key=lambda kv: -kv[1])
        top, top_ns = causes[0]
        findings.append(Finding(
            severity="warning" if percent(idle, steady_span) < 30 else "critical",
            title=f"{label} is idle {percent(idle, steady_span)}% of its active span"
                  + (" after start-up" if startup_ns else ""),
            evidence={"idle_ns": idle, "span_ns": steady_span, "gaps": int((~early).sum()),
                      "largest_gap_ns": int(g.dur[~early].max()) if (~early).any() else 0,
                      "top_cause": top, "top_cause_ns": top_ns,
                      **({"startup_ns": startup_ns} if startup_ns else {})},
            suggestion=f"most idle time is '{top}' ({format_ns(top_ns)}); "
                       "see 'tracekit analyze -a bottleneck' for the fix",
            cost_ns=idle))
    return findings
