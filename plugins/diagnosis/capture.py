"""Graph capture seen from the host: the launches made between a stream's begin- and
end-capture calls are recorded into a graph, not run; the graph runs when it is launched
(replayed). A trace of a capture with no replay shows host time and almost no GPU work, which
says nothing of the steady state."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tracekit.plugins.diagnosis.activity import Activity
from tracekit.toolkit import format_ns

BEGIN = r"^(cuda|hip)StreamBeginCapture"
END = r"^(cuda|hip)StreamEndCapture"
REPLAY = r"^(cuda|hip|cu)GraphLaunch"
# Kernel launches (runtime and driver, HIP's module and extension launches), not graph ones.
LAUNCH = r"^(cuda|hip|cu)(Ext)?(Module)?Launch(Cooperative)?Kernel|^cudaLaunch(Device|Host)?$"


@dataclass(frozen=True)
class Capture:
    """The host time spent capturing, what was captured, and how often a graph was replayed."""

    windows: int  # begin/end-capture pairs
    ns: int  # their time on the host, summed
    launches: int  # kernel launches made inside them (recorded, not run)
    replays: int  # graph launches anywhere in the trace
    begin_name: str
    end_name: str


def graph_capture(activity: Activity) -> Capture | None:
    """The trace's graph captures, paired per thread (each begin with the first end after
    it); None where it has none."""
    calls, names = activity.calls, activity.name_codes
    begin = names.matches(BEGIN)[calls.row]
    end = names.matches(END)[calls.row]
    if not begin.any() or not end.any():
        return None
    launch = names.matches(LAUNCH)[calls.row]
    thread = np.stack([calls.source.astype(np.int64), calls.pid, calls.tid], axis=1)
    windows = ns = launches = 0
    for key in np.unique(thread[begin], axis=0):
        mine = (thread == key).all(axis=1)
        starts = np.sort(calls.start[begin & mine])
        stops = np.sort(calls.end[end & mine])
        at = calls.start[launch & mine]
        for s in starts:
            after = stops[stops > s]
            if not len(after):
                continue
            windows += 1
            ns += int(after[0] - s)
            launches += int(((at >= s) & (at <= after[0])).sum())
    if not windows:
        return None
    first = int(np.flatnonzero(begin)[0])
    last = int(np.flatnonzero(end)[0])
    return Capture(windows, ns, launches, int(names.matches(REPLAY)[calls.row].sum()),
                   str(names.entries[names.codes[calls.row[first]]]),
                   str(names.entries[names.codes[calls.row[last]]]))


def capture_fix(capture: Capture) -> str:
    """What a start-up that is mostly graph capture calls for."""
    text = (f"this is graph capture: {format_ns(capture.ns)} of host time between "
            f"{capture.begin_name} and {capture.end_name}, where {capture.launches:,} kernel "
            "launches were recorded into a graph, not run")
    if not capture.replays:
        return text + ("; the trace holds no replay of it (graph launch): record steps that "
                       "replay the graph to judge the steady state")
    return text + ("; judge the steps that replay it: cut the trace after the capture with "
                   "-O window=START:END")
