"""What the CPU was doing in the GPU's idle gaps, from CPU samples recorded with the trace
(nsys ``--sample=cpu``, perf merged in): the samples of each gap's launching thread taken
while the gap lasted, by leaf function. Where the trace holds them, they name the host code
no recorded range covers, instead of a fix that asks for a sampling run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import Trace
from tracekit.plugins.diagnosis.activity import Activity
from tracekit.plugins.diagnosis.gaps import Gaps
from tracekit.toolkit import equals, grouped_stats, percent
from tracekit.toolkit import intervals as iv

#: Leaf functions named, at most.
TOP = 3
#: Fewer samples in the gaps name nothing (4 samples of nsys' own injection library in
#: mordred's gaps say nothing of the program).
MIN_SAMPLES = 20


@dataclass(frozen=True)
class GapSamples:
    """The samples taken in the gaps, and their heaviest leaf functions with their share."""

    samples: int
    functions: list[tuple[str, float]]

    def describe(self) -> str:
        """``main 55%, std::abs(double) 9% of 1,234 CPU samples``."""
        names = ", ".join(f"{name} {pct:.0f}%" for name, pct in self.functions)
        return f"{names} of {self.samples:,} CPU samples"


def samples_in_gaps(trace: Trace, activity: Activity, gaps: list[Gaps],
                    cause: int) -> GapSamples | None:
    """The CPU samples of the launching threads taken during the gaps of ``cause`` (an index
    of ``gaps.CAUSES``); None where the trace has fewer than ``MIN_SAMPLES`` there."""
    ev = trace.events
    is_sample = equals(ev["category"], "cpu.sample").to_numpy(zero_copy_only=False) & \
        ev["ts_ns"].is_valid().to_numpy(zero_copy_only=False)
    if not is_sample.any():
        return None
    rows = np.flatnonzero(is_sample)
    take = pa.array(rows)
    ts = ev["ts_ns"].take(take).to_numpy()
    pid = ev["pid"].take(take).fill_null(-1).to_numpy()
    tid = ev["tid"].take(take).fill_null(-1).to_numpy()
    source = ev["source"].take(take).cast(pa.string()).fill_null("").to_numpy(
        zero_copy_only=False)
    calls = activity.calls
    windows: dict[tuple[str, int, int], tuple[list[np.ndarray], list[np.ndarray]]] = {}
    for g in gaps:
        sel = np.flatnonzero((g.cause == cause) & (g.call >= 0))
        for c, lo, hi in zip(g.call[sel].tolist(), g.lo[sel], g.hi[sel], strict=True):
            key = (g.timeline.work.source, int(calls.pid[c]), int(calls.tid[c]))
            los, his = windows.setdefault(key, ([], []))
            los.append(lo)
            his.append(hi)
    inside = np.zeros(len(rows), dtype=bool)
    for (src, p, t), (los, his) in windows.items():
        mine = np.flatnonzero((source == src) & (pid == p) & (tid == t))
        inside[mine] = iv.covered(ts[mine], iv.union(np.array(los), np.array(his)))
    if inside.sum() < MIN_SAMPLES:
        return None
    picked = pa.array(rows[inside])
    weights = pc.fill_null(ev["value"].take(picked), 1.0)
    s = grouped_stats(ev["name"].take(picked), weights)
    total = float(np.sum(s["total"]))
    return GapSamples(int(inside.sum()), [(str(name), percent(w, total)) for name, w
                                          in zip(s["key"][:TOP], s["total"][:TOP], strict=True)])
