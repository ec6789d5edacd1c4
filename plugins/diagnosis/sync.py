"""The ``sync`` analyzer: time the host spends waiting for the device.

Counts what nsys' expert rules cuda_api_sync, cuda_memcpy_sync and cuda_memcpy_async flag
(peers.md section 2): device/stream/event synchronize calls and synchronous copies and
memsets (CUDA, driver and HIP names), framework ops that read a device value on the host
(``aten::item``, ``aten::_local_scalar_dense``), device-side waits (``gpu.sync`` rows), and
asynchronous copies from pageable host memory, which the driver turns into synchronous ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import Finding, Report, Trace
from tracekit.plugins.diagnosis.activity import (
    MEMORY,
    PROGRAM_CATEGORIES,
    READS_COLUMNS,
    Activity,
    HostCalls,
    host_reads,
    sync_api_calls,
)
from tracekit.plugins.diagnosis.gaps import CAUSES as GAP_CAUSES
from tracekit.plugins.diagnosis.gaps import Gaps, all_gaps
from tracekit.plugins.diagnosis.launch import LAUNCH_GAP_US
from tracekit.plugins.diagnosis.program import Program, classify
from tracekit.toolkit import (
    factorize,
    format_bytes,
    format_ns,
    grouped_stats,
    is_in,
    percent,
    report_table,
    source_spans,
)
from tracekit.toolkit import intervals as iv

# Pageable asynchronous copies taking less than this (and under 1% of the wall time) are
# no warning: a few bytes read back do not need pinned buffers.
PAGEABLE_MATTERS_NS = 1_000_000
# This many synchronizing calls or fewer are waits for results, not a per-step habit.
FEW_SYNCS = 10


@dataclass
class PageableCopies:
    """Copies with a pageable host side, per copy kind."""

    kind: list[str]
    count: list[int]
    asynchronous: list[int]
    bytes: list[int]
    time: list[int]


class SyncAnalyzer(tracekit.Analyzer):
    """Synchronizing calls, device-side waits and pageable async copies."""

    name = "sync"
    event_columns = READS_COLUMNS
    description = "host time in synchronizing calls, device waits, pageable async copies"

    @dataclass(frozen=True)
    class Options:
        min_share_pct: float = field(default=5.0, metadata={
            "help": "report a finding when sync calls take at least this % of the wall time"})

    def analyze(self, trace: Trace) -> Report:
        activity = Activity.of(trace)
        report = Report(analyzer=self.name, title="Synchronization")
        wall, processes = wall_time(trace)
        calls = activity.calls
        sync = np.flatnonzero(calls.is_sync)
        nested = nested_calls(calls, sync)
        report.tables["calls"] = _stats_table(activity, calls.row[sync], wall, nested)
        report.table_titles["calls"] = "Synchronizing host calls (% of the wall time)"
        if nested.any():
            report.notes.append(f"{int(nested.sum()):,} of these calls run inside another "
                                "on their thread (inside_another): rows overlap, their wall% "
                                "do not add up")
        ev = trace.events
        device_waits = np.flatnonzero(pc.equal(ev["category"].cast(pa.string()), "gpu.sync")
                                      .to_numpy(zero_copy_only=False))
        report.tables["device_waits"] = _stats_table(activity, device_waits, wall)
        report.table_titles["device_waits"] = "Device-side waits (gpu.sync)"
        copies = pageable_copies(activity)
        report.tables["pageable"] = report_table([
                   ("copy_kind", "str", None, copies.kind), ("count", "int", None, copies.count),
                   ("async_calls", "int", None, copies.asynchronous),
                   ("bytes", "int", "bytes", copies.bytes), ("time", "int", "ns", copies.time)])
        report.table_titles["pageable"] = "Copies to or from pageable host memory"
        left_out = int((calls.is_sync & ~calls.is_op & ~activity.in_steps).sum())
        if left_out:
            report.notes.append(f"{left_out:,} synchronizing call{'s' if left_out != 1 else ''}"
                                " outside the ProfilerStep ranges (set-up, the profiler's own "
                                f"stop) {'are' if left_out != 1 else 'is'} in the table, not "
                                "the findings")
        reads = host_reads(activity)
        op_reads = _op_count(activity, "aten::_local_scalar_dense")
        if op_reads > reads:
            report.notes.append(f"{op_reads - reads:,} of the aten::_local_scalar_dense calls "
                                "read a CPU tensor or run outside the steps (no GPU call in "
                                "them): in the table, not the findings' host_reads")
        set_up = set_up_wait_ns(activity)
        report.findings.extend(sync_findings(activity, wall, copies, self.options.min_share_pct,
                                             classify(trace), set_up, processes,
                                             all_gaps(trace, LAUNCH_GAP_US)))
        if set_up >= 1_000_000:  # the context's creation: seconds at times
            report.notes.append(f"{format_ns(set_up)} of waits before the first GPU work "
                                "(set-up) are in the table, not the findings")
        return report


def _op_count(activity: Activity, name: str) -> int:
    """How many synchronizing ops named ``name`` the trace holds."""
    calls = activity.calls
    names = activity.events["name"].take(pa.array(calls.row[calls.is_op])).cast(pa.string())
    return int(pc.sum(pc.equal(names, name)).as_py() or 0)


#: The categories of a host process's own calls: each process that makes them waits on its
#: own, so a trace of several such processes has that many walls.
HOST_CALL_CATEGORIES = ("api.runtime", "api.driver", "host.op")


def wall_time(trace: Trace) -> tuple[int, int]:
    """Sum over inputs of the first start to the last end (ns) of the program's own traced
    activity (``PROGRAM_CATEGORIES``; every timed event where there is none of it), times
    the number of the input's processes that make host calls (``HOST_CALL_CATEGORIES``; at
    least one): two processes each waiting half the time wait 50 %, not 100 %. Returns the
    wall and the number of process walls it sums."""
    ev = trace.events.filter(trace.events["ts_ns"].is_valid())
    if not ev.num_rows:
        return 0, 0
    own = ev.filter(is_in(ev["category"], PROGRAM_CATEGORIES))
    calls = own.filter(is_in(own["category"], HOST_CALL_CATEGORIES))
    processes = pa.table({"source": calls["source"].cast(pa.string()), "pid": calls["pid"]}) \
        .group_by("source", use_threads=False).aggregate([("pid", "count_distinct")])
    per_source = dict(zip(processes["source"].to_pylist(),
                          processes["pid_count_distinct"].to_pylist(), strict=True))
    spans = source_spans(own if own.num_rows else ev)
    return (sum((end - start) * max(1, per_source.get(source, 1))
                for source, (start, end) in spans.items()),
            sum(max(1, per_source.get(source, 1)) for source in spans))


def nested_calls(calls: HostCalls, which: np.ndarray) -> np.ndarray:
    """For the host calls at positions ``which``: whether each starts inside another of them
    on the same thread (``aten::item`` around ``aten::_local_scalar_dense`` around the
    runtime's copy)."""
    keys, _ = factorize(calls.source[which].astype(np.int64), calls.pid[which], calls.tid[which])
    return iv.starts_inside(keys.reshape(-1), calls.start[which], calls.end[which])


def _stats_table(activity: Activity, rows: np.ndarray, wall: int,
                 nested: np.ndarray | None = None) -> pa.Table:
    ev = activity.events.take(pa.array(rows, pa.int64()))
    s = grouped_stats(ev["name"], ev["dur_ns"])
    columns = [("name", "str", None, s["key"]), ("count", "int", None, s["count"]),
               ("total", "int", "ns", s["total"]), ("mean", "float", "ns", s["mean"]),
               ("max", "int", "ns", s["max"]),
               ("wall_pct", "float", "%", [percent(t, wall) for t in np.asarray(s["total"])])]
    if nested is not None:
        per_name = grouped_stats(ev["name"], pa.array(nested.astype(np.int64)))
        inside = dict(zip(per_name["key"], np.asarray(per_name["total"]).tolist(),
                          strict=True))
        columns.append(("inside_another", "int", None, [inside.get(k, 0) for k in s["key"]]))
    return report_table(columns)


def pageable_copies(activity: Activity) -> PageableCopies:
    """Copies whose source or destination is pageable memory, per copy kind."""
    memory = [(w.row[w.cls == MEMORY], w.api[w.cls == MEMORY]) for w in activity.devices]
    rows = np.concatenate([r for r, _ in memory]) if memory else np.empty(0, np.int64)
    api = np.concatenate([a for _, a in memory]) if memory else np.empty(0, np.int64)
    ev = activity.events.take(pa.array(rows, pa.int64()))  # only the memory operations
    pageable = pc.or_(pc.equal(ev["src_kind"].cast(pa.string()), "Pageable"),
                      pc.equal(ev["dst_kind"].cast(pa.string()), "Pageable"))
    keep = pageable.fill_null(False).to_numpy(zero_copy_only=False)
    ev, api = ev.filter(pa.array(keep)), api[keep]
    is_async = np.zeros(len(api), dtype=bool)
    launched = api >= 0
    if launched.any():
        names = activity.events["name"].take(pa.array(activity.calls.row[api[launched]]))
        is_async[launched] = pc.match_substring(names.cast(pa.string()), "Async") \
            .to_numpy(zero_copy_only=False)
    kind = ev["copy_kind"].cast(pa.string()).fill_null("?").to_numpy(zero_copy_only=False)
    kinds, code = np.unique(kind.astype(str), return_inverse=True)
    code = code.reshape(-1)

    def per_kind(values: np.ndarray) -> list[int]:
        return np.bincount(code, weights=values, minlength=len(kinds)).astype(np.int64).tolist()

    count = per_kind(np.ones(len(code)))
    asynchronous = per_kind(is_async.astype(float))
    size = per_kind(ev["bytes"].fill_null(0).to_numpy().astype(float))
    time = per_kind(ev["dur_ns"].fill_null(0).to_numpy().astype(float))
    order = sorted(range(len(kinds)), key=lambda i: -time[i])
    return PageableCopies([str(kinds[i]) for i in order], [count[i] for i in order],
                          [asynchronous[i] for i in order], [size[i] for i in order],
                          [time[i] for i in order])


def set_up_wait_ns(activity: Activity) -> int:
    """The part of the synchronizing API calls' time before the first GPU work: set-up (the
    first call that needs the context pays for it, seconds at times), not a habit of the
    loop."""
    calls = activity.calls
    api = sync_api_calls(activity)
    if activity.first_work_ns is None or not api.any():
        return 0
    waited = (calls.end - calls.start)[api]
    return int(np.clip(activity.first_work_ns - calls.start[api], 0, waited).sum())


#: Framework ops whose output size depends on the data: they read it back from the device,
#: and the host waits (``x[mask]`` runs aten::nonzero).
SHAPE_FROM_DATA = (r"^aten::(nonzero|masked_select|unique|_unique2|unique_consecutive|"
                   r"unique_dim|repeat_interleave|bincount|histc|nonzero_numpy)$")
#: Ops that read one value back (``.item()``), and ops that copy (a blocking ``.to()``).
READ_OPS = r"^aten::(_local_scalar_dense|item)$"
COPY_OPS = r"^aten::(copy_|to|_to_copy)$"


def sync_sources(activity: Activity, api: np.ndarray) -> dict[str, int]:
    """Per kind, how many of the synchronizing API calls ``api`` (a mask over
    ``Activity.calls``) run inside a framework op of that kind on their thread: "shape"
    (an op whose output size comes from the data, ``SHAPE_FROM_DATA``), "read"
    (``.item()``), "copy" (a blocking copy), else "explicit" (no such op around it)."""
    calls = activity.calls
    at = np.flatnonzero(api)
    if not len(at):
        return {}
    ev = activity.events
    kind = np.full(len(at), "explicit", dtype=object)
    is_op = activity.category.is_in(("host.op",))
    timed = ev["ts_ns"].is_valid().to_numpy(zero_copy_only=False) & \
        ev["dur_ns"].is_valid().to_numpy(zero_copy_only=False)
    for label, pattern in (("copy", COPY_OPS), ("read", READ_OPS), ("shape", SHAPE_FROM_DATA)):
        rows = np.flatnonzero(is_op & timed & activity.name_codes.matches(pattern))
        if not len(rows):
            continue
        start = ev["ts_ns"].take(pa.array(rows)).to_numpy()
        end = start + ev["dur_ns"].take(pa.array(rows)).to_numpy()
        source = ev["source"].take(pa.array(rows)).combine_chunks().indices.to_numpy(
            zero_copy_only=False)
        pid = ev["pid"].take(pa.array(rows)).fill_null(-1).to_numpy()
        tid = ev["tid"].take(pa.array(rows)).fill_null(-1).to_numpy()
        thread, _ = factorize(np.concatenate([source, calls.source[at]]).astype(np.int64),
                              np.concatenate([pid, calls.pid[at]]),
                              np.concatenate([tid, calls.tid[at]]))
        inside = iv.covered_by_group(thread[len(rows):], calls.start[at], thread[:len(rows)],
                                     start, end)
        kind[inside] = label  # later labels are more specific
    labels, counts = np.unique(kind.astype(str), return_counts=True)
    return dict(zip(labels.tolist(), counts.tolist(), strict=True))


#: The PyTorch fix for synchronizing calls, by what they run inside (``sync_sources``).
_TORCH_SYNC_FIX = {
    "shape": "keep shapes static: an op whose output size depends on the data (boolean-mask "
             "indexing x[mask] runs aten::nonzero; unique, masked_select, repeat_interleave) "
             "reads that size back and waits; use torch.where(mask, x, 0) or (x * mask).sum(), "
             "or give the size (repeat_interleave(output_size=), torch.nonzero_static)",
    "read": "remove per-step host reads of device values (.item(), .cpu(), printing a "
            "tensor); keep metrics on the device and read them every N steps",
    "copy": "no blocking copies in the step: .to(device, non_blocking=True) from pinned memory "
            "(pin_memory=True); a copy from pageable memory waits however it is called",
    "explicit": "drop explicit synchronize calls (torch.cuda.synchronize()) from the step; "
                "wait on events only where the host needs a result",
}


#: A kind of native synchronizing call gets its fix when it takes this share of the waits.
NATIVE_KIND_SHARE = 0.2
#: Native synchronizing calls by kind (name patterns), for the CUDA/HIP fix.
NATIVE_SYNC_KINDS = (("copy", r"^(cuda|hip|cu)Mem(cpy|set)"),
                     ("event", r"^(cuda|hip)EventSynchronize|^cuEventSynchronize"),
                     ("device", r"."))


def native_sync_kinds(activity: Activity, api: np.ndarray) -> dict[str, int]:
    """Per kind of the synchronizing API calls ``api`` (a mask over ``Activity.calls``), their
    time (ns): "copy" (synchronous copies and memsets), "event" (event waits), "device"
    (device, stream, context and signal waits)."""
    calls = activity.calls
    rows = calls.row[np.flatnonzero(api)]
    took = (calls.end - calls.start)[api]
    left = np.ones(len(rows), dtype=bool)
    out = {}
    for kind, pattern in NATIVE_SYNC_KINDS:
        hit = left & activity.name_codes.matches(pattern)[rows]
        left &= ~hit
        if hit.any():
            out[kind] = int(took[hit].sum())
    return out


def _native_sync_fix(kind: str, prefix: str) -> str:
    """The CUDA/HIP fix for synchronizing calls of ``kind`` (``native_sync_kinds``)."""
    return {
        "copy": f"copy with {prefix}MemcpyAsync on a stream from pinned memory "
                f"({prefix}HostAlloc) and wait once, where the host needs the data",
        "event": "the host blocks on each event until the GPU reaches it: where the events "
                 f"time kernels, read {prefix}EventElapsedTime after the loop, not after each "
                 "launch; otherwise queue the next work before waiting",
        "device": "wait for the result the host needs, not for the whole device or stream: "
                  f"{prefix}EventRecord after the work, then {prefix}EventSynchronize where "
                  f"the host reads it ({prefix}StreamWaitEvent between streams)",
    }[kind]


#: The causes of the gaps a wait can be charged with (``gaps.CAUSES``): the host waited for
#: the GPU to drain, then relaunched (sync), or launched short work one after another.
WAIT_GAPS = ("sync", "launch")


def gpu_idle_after_waits(activity: Activity, gaps: list[Gaps], api: np.ndarray) -> int:
    """GPU idle time (ns) in the gaps of cause ``WAIT_GAPS`` in which a synchronizing call
    ``api`` (a mask over ``Activity.calls``) of the process that ends the gap returns: what
    the GPU waits for while the host, released, gets to its next launch."""
    calls = activity.calls
    at = np.flatnonzero(api)
    idle = 0
    # Only gaps the host's relaunch ends: where host work fills the gap after the wait
    # (cause cpu), or one-time set-up does (startup), that work is the cost, not the wait.
    waits = np.isin(np.arange(len(GAP_CAUSES)), [GAP_CAUSES.index(c) for c in WAIT_GAPS])
    for g in gaps:
        ended = np.flatnonzero((g.call >= 0) & waits[g.cause])
        if not len(ended) or not len(at):
            continue
        launch = g.call[ended]
        process, _ = factorize(np.concatenate([calls.source[launch], calls.source[at]])
                               .astype(np.int64), np.concatenate([calls.pid[launch],
                                                                  calls.pid[at]]))
        process = process.reshape(-1)
        holds = iv.holds_by_group(process[:len(ended)], g.lo[ended], g.hi[ended],
                                  process[len(ended):], calls.end[at])
        idle += int(g.dur[ended[holds]].sum())
    return idle


def sync_findings(activity: Activity, wall: int, copies: PageableCopies,
                  min_share_pct: float = 5.0, program: Program | None = None,
                  set_up_ns: int | None = None, processes: int = 1,
                  gaps: list[Gaps] | None = None) -> list[Finding]:
    """Findings for heavy synchronization and for pageable async copies, worded for the
    program (PyTorch or the CUDA/HIP runtime). ``set_up_ns``: ``set_up_wait_ns(activity)``,
    where the caller has it already; ``processes``: how many processes' walls ``wall`` sums
    (``wall_time``); ``gaps``: the devices' idle gaps (``all_gaps``), for what the waits
    cost the GPU.

    The host's waits cost the GPU only where it idles after them, until the released host
    launches again (``gpu_idle_after_waits``): under ``min_share_pct`` of the GPUs' time,
    the GPU stayed busy through the waits and the finding is information.

    At most ``FEW_SYNCS`` synchronizing calls, in a trace without steps and without host
    reads of device values (``.item()``), are the host waiting for results it needs (a copy
    back at the end of a run): the GPU work they wait for is the critical path, and removing
    the waits would not shorten it; that is information, not a warning.
    """
    program = program or Program()
    findings = []
    calls = activity.calls
    api = sync_api_calls(activity)
    set_up_ns = set_up_wait_ns(activity) if set_up_ns is None else set_up_ns
    api_time = int((calls.end - calls.start)[api].sum()) - set_up_ns
    span = sum(g.timeline.span for g in gaps or [])
    idle_after = gpu_idle_after_waits(activity, gaps, api) if gaps and api.any() else 0
    # Short waits can still cost the GPU much: it idles after each until the next launch.
    if wall and (percent(api_time, wall) >= min_share_pct
                 or (span and percent(idle_after, span) >= min_share_pct)):
        top = grouped_stats(activity.events["name"].take(pa.array(calls.row[api])),
                            pa.array((calls.end - calls.start)[api]))
        count, reads = int(api.sum()), host_reads(activity)
        sources = sync_sources(activity, api)
        few = count <= FEW_SYNCS and not reads and not activity.has_steps
        busy_through = bool(span) and percent(idle_after, span) < min_share_pct
        if few:
            suggestion = (f"{count} wait{'s' if count != 1 else ''} for results the host "
                          "needs: the GPU work they wait for is the critical path ('tracekit "
                          "analyze' for what bounds it); overlap only independent host work "
                          "with it")
        elif program.pytorch:
            suggestion = "; ".join(_TORCH_SYNC_FIX[k] for k, _ in sorted(
                sources.items(), key=lambda kv: -kv[1]) if k in _TORCH_SYNC_FIX)
        else:
            prefix = "hip" if program.api == "HIP" else "cuda"
            kinds = native_sync_kinds(activity, api)
            waited = sum(kinds.values()) or 1
            suggestion = "; ".join(_native_sync_fix(k, prefix) for k, ns in sorted(
                kinds.items(), key=lambda kv: -kv[1]) if ns >= NATIVE_KIND_SHARE * waited)
        if busy_through and not few:
            suggestion = ("the waits cost the GPU little: it idles "
                          f"{format_ns(idle_after)} in the gaps they end in; where the host "
                          "has other work to queue meanwhile, " + suggestion)
        findings.append(Finding(
            severity="info" if few or busy_through else "warning",
            title=f"the host waits for the GPU {percent(api_time, wall)}% of the wall time"
                  + (f" of its {processes} processes" if processes > 1 else "")
                  + (f" in {count} call{'s' if count != 1 else ''}" if few else "")
                  + (f"; the GPU idles {percent(idle_after, span)}% of its time after the "
                     "waits" if span and not few else ""),
            evidence={"sync_calls": count, "sync_ns": api_time,
                      "wall_ns": wall, **({"processes": processes} if processes > 1 else {}),
                      **({"gpu_idle_after_ns": idle_after,
                          "gpu_idle_after_pct": percent(idle_after, span)} if span else {}),
                      "top_call": top["key"][0] if top["key"] else "-",
                      "host_reads": reads,
                      "inside": ", ".join(f"{k} {n:,}" for k, n in sorted(
                          sources.items(), key=lambda kv: -kv[1])),
                      **({"set_up_sync_ns": set_up_ns} if set_up_ns else {})},
            suggestion=suggestion,
            cost_ns=api_time))
    async_pageable = sum(copies.asynchronous)
    if async_pageable:
        i = int(np.argmax(copies.asynchronous))
        # A few small copies (a scalar read back) cost nothing to speak of: information.
        small = sum(copies.time) < PAGEABLE_MATTERS_NS and (
            not wall or percent(sum(copies.time), wall) < 1)
        findings.append(Finding(
            severity="info" if small else "warning",
            title=f"{async_pageable:,} asynchronous copies use pageable host memory "
                  "(they run synchronously)",
            evidence={"copies": async_pageable, "bytes": sum(copies.bytes),
                      "time_ns": sum(copies.time), "main_kind": copies.kind[i]},
            suggestion=("nothing to gain at this size; if these copies grow, " if small
                        else "") +
                       f"pin the host buffers ({format_bytes(sum(copies.bytes))} in "
                       f"{format_ns(sum(copies.time))}): " + (
                           ("tensor.pin_memory() or one pinned staging buffer reused"
                            if program.mode == "inference" else
                            "DataLoader(pin_memory=True) or tensor.pin_memory()")
                           + ", then .to(device, non_blocking=True)" if program.pytorch else
                           "hipHostMalloc or hipHostRegister" if program.api == "HIP" else
                           "cudaHostAlloc or cudaHostRegister"),
            cost_ns=sum(copies.time)))
    return findings
