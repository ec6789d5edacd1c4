"""The host time a trace holds before its first GPU work: the GPU timeline starts at the
first GPU work, so seconds of set-up before it (a lazy CUDA context created by the first
``.to('cuda')``, a model loaded from disk) are in no cause. Where they are a large part of
the trace, a finding says how long, and which runtime call took most of it."""

from __future__ import annotations

import numpy as np
from tracekit import Finding, Trace
from tracekit.plugins.diagnosis.activity import PROGRAM_CATEGORIES, Activity
from tracekit.plugins.diagnosis.program import classify
from tracekit.toolkit import format_ns, is_in, percent, time_span
from tracekit.toolkit import intervals as iv

#: Host time before the first GPU work is told at this length or more, ...
MIN_NS = 1_000_000_000
#: ... and when it is at least this share of the trace's host-and-GPU span.
MIN_PCT = 25.0


def before_first_gpu(trace: Trace, activity: Activity) -> Finding | None:
    """The finding on the host time before the first GPU work, where it is long."""
    calls, first_gpu = activity.calls, activity.first_work_ns
    if first_gpu is None or not len(calls.start):
        return None
    ev = trace.events
    # The program's own activity and its OS calls: not the profiler's range, its messages
    # (nsys logs some from before the session starts) or what it samples.
    span = time_span(ev.filter(is_in(ev["category"], (*PROGRAM_CATEGORIES, "host.os"))))
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
