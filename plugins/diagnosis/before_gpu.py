"""The host time a trace holds before its first GPU work and after its last: the GPU timeline
runs from the first GPU work to the end of the last, so seconds of set-up before it (a lazy
CUDA context created by the first ``.to('cuda')``, a model loaded from disk) and of teardown
after it (modules unloaded, memory freed) are in no cause. Where they are a large part of the
trace, a finding says how long, and which runtime calls took most of it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import Finding, Trace
from tracekit.plugins.diagnosis.activity import PROGRAM_CATEGORIES, Activity
from tracekit.plugins.diagnosis.program import classify
from tracekit.toolkit import format_ns, grouped_stats, is_in, matches, percent, time_span
from tracekit.toolkit import intervals as iv

#: Host time before the first GPU work is told at this length or more, ...
MIN_NS = 1_000_000_000
#: ... and when it is at least this share of the trace's host-and-GPU span.
MIN_PCT = 25.0


#: OS calls in which a thread waits without running (nsys' OS runtime trace): host time in
#: them after the last GPU work is no work of the program.
OS_WAITS = (r"^(pthread_cond_(timed|clock)?wait|pthread_join|sem_(timed|clock)?wait|poll|ppoll"
            r"|epoll_p?wait|select|pselect6?|futex|nanosleep|clock_nanosleep|usleep|sleep"
            r"|waitpid|wait4|sigtimedwait|sigwaitinfo)$")
#: Host time after the last GPU work is told at this length or more (teardown is short
#: unless something is wrong or the program goes on without the GPU), and from ``MIN_PCT``.
MIN_AFTER_NS = 100_000_000


def _program_span(trace: Trace, activity: Activity) -> tuple[int, int] | None:
    """First start and last end of the program's own activity and its OS calls: not the
    profiler's range, its messages (nsys logs some from before the session starts) or what
    it samples. Computed once per trace, over the two time columns only."""
    if "program_span" not in activity.cache:
        ev = trace.events
        mine = is_in(ev["category"], (*PROGRAM_CATEGORIES, "host.os"))
        activity.cache["program_span"] = time_span(pa.table({
            "ts_ns": ev["ts_ns"].filter(mine), "dur_ns": ev["dur_ns"].filter(mine)}))
    return activity.cache["program_span"]


def before_first_gpu(trace: Trace, activity: Activity) -> Finding | None:
    """The finding on the host time before the first GPU work, where it is long."""
    calls, first_gpu = activity.calls, activity.first_work_ns
    if first_gpu is None or not len(calls.start):
        return None
    span = _program_span(trace, activity)
    if span is None:
        return None
    first, last = span
    before = first_gpu - first
    if before < MIN_NS or percent(before, last - first) < MIN_PCT:
        return None
    early = np.flatnonzero((calls.start < first_gpu) & ~calls.is_op)
    evidence: dict[str, object] = {"before_first_gpu_ns": before, "trace_ns": last - first,
                                   "share_pct": percent(before, last - first)}
    title = (f"before the first GPU work: {format_ns(before)} of host time "
             f"({percent(before, last - first)}% of the {format_ns(last - first)} trace; the "
             "GPU timeline starts after it)")
    in_calls = 0
    if len(early):
        dur = np.minimum(calls.end[early], first_gpu) - calls.start[early]
        longest = int(early[int(np.argmax(dur))])
        name = activity.name(int(calls.row[longest]))
        evidence["longest_call"] = name
        evidence["longest_call_ns"] = int(dur.max())
        # Runtime calls of several threads overlap: their union, not their sum.
        in_calls = iv.total(iv.union(calls.start[early], calls.start[early] + dur))
        evidence["in_runtime_calls_ns"] = in_calls
        title += f"; the longest runtime call: {name} {format_ns(int(dur.max()))}"
    in_call = in_calls * 2 >= before
    hip = classify(trace).api == "HIP"
    fix = ("runtime calls take most of it: creating the GPU context (done by the first "
           "call that needs one) or large pinned or device allocations; "
           + ("" if hip else "keep the GPU in persistence mode (nvidia-smi -pm 1) for a fast "
              "context, ")
           + "allocate once (a pool), and initialize the GPU before the part you profile"
           if in_call else
           "the program's own set-up (reading and preparing data, building the model): "
           "start recording after it, or cut it off with -O window=START:END")
    return Finding("warning" if before * 2 >= last - first else "info", title, evidence, fix)


def after_last_gpu(trace: Trace, activity: Activity) -> Finding | None:
    """The finding on the host time after the last GPU work ends, where it is long: which
    runtime calls take most of it (teardown: modules unloaded, memory freed), or the
    program's own work after its GPU part."""
    calls, last_gpu = activity.calls, activity.last_work_ns
    span = _program_span(trace, activity)
    if last_gpu is None or span is None:
        return None
    first, last = span
    after = last - last_gpu
    if after < MIN_AFTER_NS or percent(after, last - first) < MIN_PCT:
        return None
    evidence: dict[str, object] = {"after_last_gpu_ns": after, "trace_ns": last - first,
                                   "share_pct": percent(after, last - first)}
    title = (f"after the last GPU work: {format_ns(after)} of host time "
             f"({percent(after, last - first)}% of the {format_ns(last - first)} trace; the "
             "GPU timeline ends before it)")
    late = np.flatnonzero((calls.end > last_gpu) & ~calls.is_op)
    in_calls = 0
    if len(late):
        start = np.maximum(calls.start[late], last_gpu)
        dur = calls.end[late] - start
        stats = grouped_stats(activity.events["name"].take(pa.array(calls.row[late])),
                              pa.array(dur))
        name, count, total = stats["key"][0], int(stats["count"][0]), int(stats["total"][0])
        in_calls = iv.total(iv.union(start, calls.end[late]))
        evidence.update({"top_call": name, "top_call_count": count, "top_call_ns": total,
                         "in_runtime_calls_ns": in_calls})
    waiting = _os_waits_after(trace, last_gpu, last)
    if in_calls * 2 >= after:
        title += f"; most of it in {count:,} {name} call{'s' if count != 1 else ''}, " \
                 f"{format_ns(total)}"
    elif waiting and waiting[0] * 2 >= after:
        evidence.update({"in_os_waits_ns": waiting[0], "os_waits": waiting[1]})
        title += f"; its threads wait in {waiting[1]} most of it"
        return Finding("info", title, evidence,
                       "nothing runs: the threads wait in OS calls after the GPU part (the "
                       "program idles, or waits on I/O or another process); leave it out of "
                       "the recording (-O window=START:END), and see what they wait for if "
                       "the run should have ended")
    fix = ("runtime calls take most of it: teardown (modules unloaded, memory and the context "
           "freed), which the GPU timeline leaves out; stop recording before it, or cut it "
           "off with -O window=START:END, for a trace of the work itself"
           if in_calls * 2 >= after else
           "the program's own work after its last GPU work (writing results, evaluation on "
           "the host): not in the GPU timeline; cut it off with -O window=START:END")
    return Finding("info", title, evidence, fix)


def _os_waits_after(trace: Trace, start: int, end: int) -> tuple[int, str] | None:
    """The union (ns) of the OS calls in which threads wait (``OS_WAITS``) between ``start``
    and ``end``, and their names, most time first; None where the trace holds none."""
    ev = trace.events
    os_calls = ev.select(["name", "ts_ns", "dur_ns"]).filter(is_in(ev["category"], ("host.os",)))
    if not os_calls.num_rows:
        return None
    os_calls = os_calls.filter(pc.and_(matches(os_calls["name"], OS_WAITS),
                                       pc.and_(pc.is_valid(os_calls["ts_ns"]),
                                               pc.is_valid(os_calls["dur_ns"]))))
    if not os_calls.num_rows:
        return None
    lo = np.maximum(os_calls["ts_ns"].to_numpy(), start)
    hi = np.minimum(os_calls["ts_ns"].to_numpy() + os_calls["dur_ns"].to_numpy(), end)
    keep = hi > lo
    if not keep.any():
        return None
    stats = grouped_stats(os_calls["name"].filter(pa.array(keep)), pa.array((hi - lo)[keep]))
    names = ", ".join(stats["key"][:2])
    return iv.total(iv.union(lo[keep], hi[keep])), names
