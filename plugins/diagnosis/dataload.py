"""How long the GPU waits for data loading: the input-bound rule.

A training step whose GPU sits idle while the launching process loads the next batch is
input-bound, whatever the rest of the step is bound by: the idle time goes away entirely when
loading overlaps the step (loader workers, prefetching), and every speed-up of the GPU work
makes it a larger share. The rule follows two profilers that classify steps this way:
TensorFlow's input-pipeline analyzer calls a step "highly input-bound" when over 20 % of it
waits for input, and PyTorch's TensorBoard plugin recommends DataLoader workers when over 5 %
of the step time is in the DataLoader. tracekit counts only the waiting that idles the GPU:
steady-state idle gaps while the launching processes run a data-loading range.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from tracekit import Trace
from tracekit.plugins.diagnosis.activity import Activity
from tracekit.plugins.diagnosis.gaps import CAUSES as GAP_CAUSES
from tracekit.plugins.diagnosis.gaps import HOST_CONTEXT, Gaps
from tracekit.toolkit import DATA_LOADING_RANGE
from tracekit.toolkit import intervals as iv

#: The GPU waiting for data loading at least this % of the steady state is input-bound.
INPUT_BOUND_PCT = 20.0


def data_loading_wait(trace: Trace, activity: Activity, per_device: list[Gaps]) -> int:
    """ns of steady-state GPU idle time (gaps not of start-up, over all devices) during which
    the processes that launch the device's work ran a data-loading range."""
    ev = trace.events
    rows = np.flatnonzero(activity.category.is_in(HOST_CONTEXT)
                          & activity.name_codes.matches(DATA_LOADING_RANGE))
    if not len(rows):
        return 0
    take = pa.array(rows)
    start = ev["ts_ns"].take(take).to_numpy()
    end = start + ev["dur_ns"].take(take).fill_null(0).to_numpy()
    pid = ev["pid"].take(take).fill_null(-1).to_numpy()
    source = ev["source"].take(take).cast(pa.string()).to_numpy(zero_copy_only=False)
    startup = GAP_CAUSES.index("startup")
    waited = 0
    for g in per_device:
        work = g.timeline.work
        pids = np.unique(activity.calls.pid[work.api[work.api >= 0]])
        mine = (source == work.source) & np.isin(pid, pids)
        sel = g.cause != startup
        if mine.any() and sel.any():
            ranges = iv.union(start[mine], end[mine])
            waited += int(iv.covered_within(g.lo[sel], g.hi[sel], ranges).sum())
    return waited

