"""The ``breakdown`` analyzer: per device, where the time from first to last GPU activity went.

Each instant is counted once, by priority: compute, then exposed communication, then exposed
memory (memcpy/memset), else idle (TraceLens' gpu_timeline; HTA's temporal breakdown merges
communication and memory into "non-compute"). Per ``ProfilerStep#N`` when the trace has them:
the same split inside each step's host range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import Report, Trace
from tracekit.plugins.diagnosis.activity import NO_GPU, READS_COLUMNS, Activity
from tracekit.plugins.diagnosis.timeline import DeviceTimeline, device_timelines
from tracekit.toolkit import (
    STEPS_HELP,
    WINDOW_HELP,
    percent,
    report_table,
    restrict,
    step_ranges,
)

PARTS = ("compute", "communication", "memory", "idle")
LABELS = {"compute": "compute", "communication": "comm", "memory": "mem", "idle": "idle"}


class BreakdownAnalyzer(tracekit.Analyzer):
    """Idle, compute, communication and memory time per device and per step."""

    name = "breakdown"
    event_columns = READS_COLUMNS
    description = "per device (and step): GPU time split into compute, comm, memory, idle"

    @dataclass(frozen=True)
    class Options:
        per_step: bool = field(default=True, metadata={
            "help": "also split each ProfilerStep#N range, when the trace has them"})
        window: str = field(default="", metadata={
            "help": WINDOW_HELP})
        steps: str = field(default="", metadata={
            "help": STEPS_HELP})

    def analyze(self, trace: Trace) -> Report:
        trace = restrict(trace, self.options.window, self.options.steps)
        report = Report(analyzer=self.name, title="GPU time breakdown")
        timelines = device_timelines(trace)
        if not timelines:
            report.notes.append(NO_GPU)
        report.tables["devices"] = devices_table(timelines)
        report.table_titles["devices"] = "Per device, first to last GPU activity"
        if self.options.per_step:
            report.tables["steps"] = steps_table(trace, timelines)
            report.table_titles["steps"] = ("Per step (ProfilerStep#N, to the end of the GPU "
                                            "work it launched)")
        return report


def devices_table(timelines: list[DeviceTimeline], compact: bool = False) -> pa.Table:
    """One row per device: span and each part in ns (unless ``compact``) and % of the span."""
    cols: dict[str, list[Any]] = {k: [] for k in ("device", "span", *PARTS)}
    for tl in timelines:
        cols["device"].append(tl.work.label)
        cols["span"].append(tl.span)
        for part, ns in tl.shares().items():
            cols[part].append(ns)
    spec: list[tuple[str, str, str | None, Any]] = [("device", "str", None, cols["device"]),
                                                     ("span", "int", "ns", cols["span"])]
    if not compact:
        spec.extend((LABELS[part], "int", "ns", cols[part]) for part in PARTS)
    for part in PARTS:
        spec.append((f"{LABELS[part]}_pct", "float", "%",
                     [percent(v, s) for v, s in zip(cols[part], cols["span"], strict=True)]))
    return report_table(spec)


def step_windows(activity: Activity, tl: DeviceTimeline, start: np.ndarray, end: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Each step's window on device ``tl``: from its host range's start (or the end of the
    step before, if later) to the end of its host range or of the GPU work it launched,
    whichever is later. A host that runs ahead of its GPU ends its step ranges long before
    their work runs; the work is the step's by its launching call (by its own start where
    the call is not known). Work with no launching call before the first work with one was
    launched before the recording: the first step's window starts after it. ``start``/``end``:
    the host ranges, sorted by start."""
    work = tl.work
    known = work.api >= 0
    launched = np.where(known, activity.calls.start[np.maximum(work.api, 0)], work.start) \
        if len(activity.calls.start) else work.start
    # Work queued before the recording began is no step's: the first step starts after it.
    before_recording = work.before_recording
    step = np.searchsorted(start, launched, side="right") - 1
    ours = (step >= 0) & (launched < end[np.maximum(step, 0)]) & ~before_recording
    gpu_end = np.full(len(start), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(gpu_end, step[ours], work.end[ours])
    lo, hi = np.empty_like(start), np.empty_like(end)
    before = int(work.end[before_recording].max()) if before_recording.any() else \
        np.iinfo(np.int64).min
    for i in range(len(start)):  # steps: a few to a few thousand
        lo[i] = max(int(start[i]), before)
        hi[i] = max(int(end[i]), int(gpu_end[i]), int(lo[i]))
        before = int(hi[i])
    return lo, hi


def steps_table(trace: Trace, timelines: list[DeviceTimeline]) -> pa.Table:
    """One row per (step, device of the step's input)."""
    spans = step_ranges(trace)
    cols: dict[str, list[Any]] = {k: [] for k in ("step", "device", "dur", "host", *PARTS)}
    pids = trace.events["pid"]
    for tl in timelines:
        mine = spans.filter(pc.equal(spans["source"], tl.work.source))
        if len(set(mine["pid"].to_pylist())) > 1:
            # Ranks merged into one input: a device's steps are those of the process whose
            # work it ran, not every rank's.
            own = set(pids.take(pa.array(tl.work.row, pa.int64())).to_pylist())
            if own & set(mine["pid"].to_pylist()):
                mine = mine.filter(pc.is_in(mine["pid"], value_set=pa.array(
                    sorted(p for p in own if p is not None), mine["pid"].type)))
        if not mine.num_rows:
            continue
        host_lo, host_hi = mine["start"].to_numpy(), mine["end"].to_numpy()
        lo, hi = step_windows(Activity.of(trace), tl, host_lo, host_hi)
        parts = tl.within(lo, hi)
        cols["step"].extend(mine["step"].to_pylist())
        cols["device"].extend([tl.work.label] * mine.num_rows)
        cols["dur"].extend((hi - lo).tolist())
        cols["host"].extend((host_hi - host_lo).tolist())
        for part in PARTS:
            cols[part].extend(parts[part].tolist())
    dur = np.asarray(cols["dur"], dtype=np.int64)
    spec: list[tuple[str, str, str | None, Any]] = [
        ("step", "int", None, cols["step"]), ("device", "str", None, cols["device"]),
        ("duration", "int", "ns", cols["dur"]), ("host_range", "int", "ns", cols["host"])]
    for part in PARTS:
        spec.append((f"{LABELS[part]}_pct", "float", "%",
                     [percent(v, d) for v, d in zip(cols[part], dur.tolist(), strict=True)]))
    return report_table(spec)
