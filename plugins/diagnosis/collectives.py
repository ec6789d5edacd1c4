"""Which collective each communication kernel performs.

A kernel's name says it for most NCCL and RCCL kernels (``ncclDevKernel_AllReduce_…``), but
not always: some NCCL versions run all-reduces, all-gathers and all-to-alls alike as
``ncclKernel_SendRecv_…`` (HTA's sampled ranks). The host names the collective it launched:
the innermost collective range (``c10d::allreduce_``, ``nccl:all_reduce``, RCCL, HCCL) around
the kernel's launching call, on the launching thread, says which, where it says any."""

from __future__ import annotations

import numpy as np
from tracekit.plugins.diagnosis.activity import Activity
from tracekit.plugins.diagnosis.advice import collective_kind
from tracekit.plugins.diagnosis.gaps import HostRanges
from tracekit.plugins.diagnosis.program import NAMED_COLLECTIVE
from tracekit.plugins.diagnosis.timeline import DeviceTimeline


def kernel_kinds(activity: Activity, timeline: DeviceTimeline,
                 positions: np.ndarray) -> np.ndarray:
    """The collective kind of the work at ``positions`` of the timeline's work: the innermost
    host collective range around its launching call, else its own name (one per distinct
    name)."""
    work, calls = timeline.work, activity.calls
    codes = activity.name_codes.codes[work.row[positions]]
    distinct, inverse = np.unique(codes, return_inverse=True)
    by_name = np.array([collective_kind(str(activity.name_codes.entries[c])) for c in distinct],
                       dtype=object)
    kinds = by_name[inverse.reshape(-1)]
    api = work.api[positions]
    launched = np.flatnonzero(api >= 0)
    if not len(launched):
        return kinds
    host = HostRanges.of(activity)
    if "collective_rows" not in activity.cache:
        # Per events row, once per distinct name: a collective range's name (RE2 syntax).
        activity.cache["collective_rows"] = activity.name_codes.matches(
            NAMED_COLLECTIVE.pattern)
    collective_rows = activity.cache["collective_rows"]
    threads = np.stack([calls.pid[api[launched]], calls.tid[api[launched]]], axis=1)
    for pid, tid in np.unique(threads, axis=0).tolist():
        mine = launched[(threads[:, 0] == pid) & (threads[:, 1] == tid)]
        at = calls.start[api[mine]]
        r_rows, r_tids, r_start, r_end, *_ = host.process(work.source, pid)
        on = np.flatnonzero((r_tids == tid) & collective_rows[r_rows])
        named = [(int(r_start[i]), int(r_end[i]), collective_kind(activity.name(int(r_rows[i]))))
                 for i in on]
        named = [r for r in named if r[2] != "other"]
        if not named:
            continue
        order = np.argsort(at, kind="stable")
        sorted_at = at[order]
        labels = sorted({k for _, _, k in named})
        found = np.full(len(mine), -1)
        # Ranges by start: a later (inner) range overwrites the one around it.
        for start, end, kind in sorted(named):
            lo = np.searchsorted(sorted_at, start, side="left")
            hi = np.searchsorted(sorted_at, end, side="right")
            found[order[lo:hi]] = labels.index(kind)
        hit = found >= 0
        kinds[mine[hit]] = np.array(labels, dtype=object)[found[hit]]
    return kinds
