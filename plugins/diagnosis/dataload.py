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
from tracekit import Trace
from tracekit.plugins.diagnosis.activity import Activity
from tracekit.plugins.diagnosis.gaps import CAUSES as GAP_CAUSES
from tracekit.plugins.diagnosis.gaps import Gaps, covered_by, host_calls
from tracekit.toolkit import DATA_LOADING_RANGE

#: The GPU waiting for data loading at least this % of the steady state is input-bound.
INPUT_BOUND_PCT = 20.0


def data_loading_wait(trace: Trace, activity: Activity, per_device: list[Gaps]) -> int:
    """ns of steady-state GPU idle time (gaps not of start-up, over all devices) during which
    the processes that launch the device's work ran a data-loading range."""
    loading = host_calls(activity, DATA_LOADING_RANGE)
    startup = GAP_CAUSES.index("startup")
    waited = 0
    for g in per_device:
        work = g.timeline.work
        pids = np.unique(activity.calls.pid[work.api[work.api >= 0]])
        sel = g.cause != startup
        covered = covered_by(loading, work.source_code, pids, g.lo[sel], g.hi[sel]) \
            if len(pids) else None  # no launch linked: no process to wait for
        if covered is not None:
            waited += int(covered.sum())
    return waited
