"""``-O window=START:END`` and ``-O steps=A:B``: the analysis of a part of a trace.

``window`` times are durations since the first timed event of the trace, with a unit (``ns``,
``us``/``µs``, ``ms``, ``s``; none means ns); either end may be left out (``2s:``, ``:500ms``).
``steps`` names ``ProfilerStep#N`` numbers, inclusive (``3:5``, ``4``); the window is from the
start of the first to the end of the last, of each process where several have those steps
(ranks, whose clocks and paces differ). Events that overlap the window are kept whole;
events with no time (metadata) are kept.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.columns import equals, starts_with
from tracekit.errors import OptionError
from tracekit.model import Trace

#: PyTorch's step ranges, ``ProfilerStep#N`` (a regular expression for ``matches``).
STEP_RANGE = r"^ProfilerStep#(\d+)$"
STEP_NAME = re.compile(STEP_RANGE)
#: ``-O`` help of the options ``restrict`` takes, for analyzers that offer them.
WINDOW_HELP = "analyze only START:END (times since the first event: 2s:5s, :500ms)"
STEPS_HELP = "analyze only ProfilerStep#A..B (A:B, or N)"
WINDOW_KEY = "window_ns"  # metadata: the bounds restrict cut the trace to

_UNITS = {"": 1, "ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ns|us|µs|ms|s)?\s*$")


def parse_time(text: str, option: str) -> int:
    """``1.5ms`` as ns."""
    m = _TIME.match(text)
    if not m:
        raise OptionError(f"option '{option}': '{text}' is not a time such as 250ms or 1.5s")
    return round(float(m.group(1)) * _UNITS[m.group(2) or ""])


def _bounds(text: str, option: str) -> tuple[str, str]:
    if ":" not in text:
        return text, text
    lo, _, hi = text.partition(":")
    return lo.strip(), hi.strip()


def step_ranges(trace: Trace) -> pa.Table:
    """PyTorch's ``ProfilerStep#N`` ranges: source, step number, start and end (ns), pid,
    by start."""
    ev = trace.events
    is_step = pc.and_(starts_with(ev["name"], "ProfilerStep#"),
                      equals(ev["category"], "host.annotation"))
    rows = ev.filter(pc.and_(is_step, ev["ts_ns"].is_valid()))
    names = rows["name"].combine_chunks().cast(pa.string()) if rows.num_rows else \
        pa.array([], pa.string())
    numbers = [int(m.group(1)) if (m := STEP_NAME.match(n)) else -1
               for n in names.to_pylist()]
    start = rows["ts_ns"].to_numpy()
    sources = rows["source"].combine_chunks().cast(pa.string()) if rows.num_rows else \
        pa.array([], pa.string())
    table = pa.table({
        "source": sources, "step": pa.array(numbers, pa.int64()),
        "start": start, "end": start + rows["dur_ns"].fill_null(0).to_numpy(),
        "pid": rows["pid"]})
    table = table.filter(pc.greater_equal(table["step"], 0))
    return table.sort_by([("source", "ascending"), ("start", "ascending")])


def restrict(trace: Trace, window: str = "", steps: str = "") -> Trace:
    """``trace`` cut to the events that overlap a time window (``window``: START:END, times
    since the first timed event with a unit) or a range of ``ProfilerStep#N`` (``steps``:
    A:B or N); events with no time are kept, events overlapping the window kept whole."""
    if not window and not steps:
        return trace
    if window and steps:
        raise OptionError("give either window= or steps=, not both")
    ev = trace.events
    timed = ev.filter(ev["ts_ns"].is_valid())
    if not timed.num_rows:
        return trace
    if window:
        lo_text, hi_text = _bounds(window, "window")
        origin = pc.min(timed["ts_ns"]).as_py()
        lo = origin + parse_time(lo_text, "window") if lo_text else None
        hi = origin + parse_time(hi_text, "window") if hi_text else None
        if lo is not None and hi is not None and hi <= lo:
            raise OptionError(f"option 'window': '{window}' ends before it starts")
        last = pc.max(pc.add(timed["ts_ns"], timed["dur_ns"].fill_null(0))).as_py()
        if lo is not None and lo >= last:
            raise OptionError(f"option 'window': '{window}' starts after the trace ends (it "
                              f"spans {_seconds(last - origin)} from its first event)")
    else:
        lo_text, hi_text = _bounds(steps, "steps")
        try:
            first = int(lo_text) if lo_text else None
            last = int(hi_text) if hi_text else None
        except ValueError:
            raise OptionError(f"option 'steps': '{steps}' is not a step range such as 3:5"
                              ) from None
        table = step_ranges(trace)
        numbers = table["step"].to_numpy()
        if not len(numbers):
            raise OptionError("option 'steps': this trace has no ProfilerStep#N ranges; use "
                              "window=START:END")
        first = int(numbers.min()) if first is None else first
        last = int(numbers.max()) if last is None else last
        chosen = table.filter(pc.and_(pc.greater_equal(table["step"], first),
                                      pc.less_equal(table["step"], last)))
        if not chosen.num_rows:
            have = f"{numbers.min()}..{numbers.max()}"
            raise OptionError(f"option 'steps': no ProfilerStep#N in {steps} (steps in this "
                              f"trace: {have})")
        lo, hi = pc.min(chosen["start"]).as_py(), pc.max(chosen["end"]).as_py()
        if len(set(zip(chosen["source"].to_pylist(), chosen["pid"].to_pylist(),
                       strict=True))) > 1:
            # Ranks: each process's own steps A..B (their clocks and paces differ).
            row_lo, row_hi = _process_bounds(ev, chosen, lo, hi)
            return _cut(trace, row_lo, row_hi, [lo, hi])
    return _cut(trace, lo, hi, [lo, hi])


def _cut(trace: Trace, lo: int | np.ndarray | None, hi: int | np.ndarray | None,
         bounds: list[int | None]) -> Trace:
    """``trace`` with the timed rows that overlap ``[lo, hi)`` (per row, or one for all;
    None: open) kept whole, and the untimed rows; ``bounds`` recorded as its window."""
    ev = trace.events
    timed = ev["ts_ns"].is_valid().to_numpy(zero_copy_only=False)
    ts = ev["ts_ns"].fill_null(0).to_numpy(zero_copy_only=False)
    end = ts + ev["dur_ns"].fill_null(0).to_numpy(zero_copy_only=False)
    inside = timed.copy()
    if hi is not None:
        inside &= ts < hi
    if lo is not None:
        inside &= (end > lo) | (ts >= lo)
    metadata = {**trace.metadata, WINDOW_KEY: bounds}
    return dataclasses.replace(trace, events=ev.filter(pa.array(~timed | inside)),
                               metadata=metadata)


def _process_bounds(ev: pa.Table, chosen: pa.Table, lo: int, hi: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the span of its process's ``chosen`` steps; for rows of a process with none
    of them (a GPU's own rows, a named track), of its input's, else of all (``lo``, ``hi``)."""
    pid = ev["pid"].fill_null(-1).to_numpy(zero_copy_only=False)
    row_lo = np.full(ev.num_rows, lo, dtype=np.int64)
    row_hi = np.full(ev.num_rows, hi, dtype=np.int64)
    c_source = np.asarray(chosen["source"].to_pylist(), dtype=object)
    c_pid = chosen["pid"].fill_null(-1).to_numpy(zero_copy_only=False)
    c_lo, c_hi = chosen["start"].to_numpy(), chosen["end"].to_numpy()
    for s in dict.fromkeys(c_source.tolist()):  # an input's span, then each process's own
        mine = c_source == s
        rows = equals(ev["source"], s).to_numpy(zero_copy_only=False)
        row_lo[rows], row_hi[rows] = c_lo[mine].min(), c_hi[mine].max()
        for p in np.unique(c_pid[mine]).tolist():
            theirs = mine & (c_pid == p)
            rows_p = rows & (pid == p)
            row_lo[rows_p], row_hi[rows_p] = c_lo[theirs].min(), c_hi[theirs].max()
    return row_lo, row_hi


def _seconds(ns: int) -> str:
    """A span as the window's own units take it (``661.2ms``, ``1.5s``)."""
    return f"{ns / 1e9:g}s" if ns >= 1_000_000_000 else f"{ns / 1e6:g}ms"


def time_span(events: pa.Table) -> tuple[int, int] | None:
    """The first start and the last end (ns) of the timed rows of ``events`` (an untimed
    row's ``dur_ns`` counts as 0), or None where no row has a time."""
    start = pc.min(events["ts_ns"]).as_py() if events.num_rows else None
    if start is None:
        return None
    end = pc.max(pc.add(events["ts_ns"], pc.fill_null(events["dur_ns"], 0))).as_py()
    return int(start), int(end)


def source_spans(events: pa.Table) -> dict[str, tuple[int, int]]:
    """Per source (input), the first start and the last end (ns) of its timed rows (an
    untimed row's ``dur_ns`` counts as 0), in order of first start."""
    if not events.num_rows:
        return {}
    spans = pa.table({
        "source": events["source"].cast(pa.string()), "ts": events["ts_ns"],
        "end": pc.add(events["ts_ns"], pc.fill_null(events["dur_ns"], 0))}).group_by(
        "source", use_threads=False).aggregate([("ts", "min"), ("end", "max")])
    rows = sorted((r for r in spans.to_pylist() if r["ts_min"] is not None),
                  key=lambda r: r["ts_min"])
    return {r["source"]: (int(r["ts_min"]), int(r["end_max"])) for r in rows}


def window_of(trace: Trace) -> tuple[int | None, int | None] | None:
    """The bounds (ns; None: open) of the window ``restrict`` cut ``trace`` to, or None for
    a trace it did not cut: for spans measured within the window, since the events that
    overlap it are kept whole."""
    bounds = trace.metadata.get(WINDOW_KEY) if isinstance(trace.metadata, dict) else None
    return (bounds[0], bounds[1]) if isinstance(bounds, list) and len(bounds) == 2 else None
