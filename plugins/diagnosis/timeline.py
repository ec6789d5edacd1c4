"""Per device: the time from first to last GPU activity, split by priority into compute,
communication, memory and idle, each instant counted once.

The priority (compute, then communication, then memory) is TraceLens' ``gpu_timeline``
definition (peers.md section 3): communication and copies that overlap compute are hidden,
so only their *exposed* parts cost time. HTA's temporal breakdown is the same split with
communication and memory merged into "non-compute".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tracekit import Trace
from tracekit.plugins.diagnosis.activity import (
    COMMUNICATION,
    COMPUTE,
    MEMORY,
    Activity,
    DeviceWork,
)
from tracekit.toolkit import intervals as iv


@dataclass
class DeviceTimeline:
    """One device's busy time, by class, as interval sets."""

    work: DeviceWork
    start: int
    end: int
    compute: iv.IntervalSet
    communication: iv.IntervalSet
    memory: iv.IntervalSet
    busy: iv.IntervalSet
    exposed_communication: iv.IntervalSet
    exposed_memory: iv.IntervalSet

    @property
    def span(self) -> int:
        """First activity start to last activity end (ns)."""
        return self.end - self.start

    @property
    def idle(self) -> int:
        """Time within the span when nothing ran on the device (ns)."""
        return self.span - iv.total(self.busy)

    def shares(self) -> dict[str, int]:
        """ns per part: compute, communication and memory (exposed), idle; they sum to span."""
        return {"compute": iv.total(self.compute),
                "communication": iv.total(self.exposed_communication),
                "memory": iv.total(self.exposed_memory), "idle": self.idle}

    def within(self, lo: np.ndarray, hi: np.ndarray) -> dict[str, np.ndarray]:
        """The same split inside each window ``[lo, hi)`` (idle = the rest of the window)."""
        parts = {"compute": iv.covered_within(lo, hi, self.compute),
                 "communication": iv.covered_within(lo, hi, self.exposed_communication),
                 "memory": iv.covered_within(lo, hi, self.exposed_memory)}
        parts["idle"] = (hi - lo) - iv.covered_within(lo, hi, self.busy)
        return parts


def device_timeline(work: DeviceWork) -> DeviceTimeline:
    """Split one device's activity into its parts."""
    compute = iv.union(work.start[work.cls == COMPUTE], work.end[work.cls == COMPUTE])
    comm = iv.union(work.start[work.cls == COMMUNICATION], work.end[work.cls == COMMUNICATION])
    memory = iv.union(work.start[work.cls == MEMORY], work.end[work.cls == MEMORY])
    busy = iv.union(work.start, work.end)
    start = int(busy[0][0]) if len(busy[0]) else 0
    end = int(busy[1][-1]) if len(busy[0]) else 0
    return DeviceTimeline(work, start, end, compute, comm, memory, busy,
                          iv.minus(comm, compute), iv.minus(memory, compute, comm))


def device_timelines(trace: Trace) -> list[DeviceTimeline]:
    """The timeline of every device of ``trace``, computed once and shared by analyzers."""
    activity = Activity.of(trace)
    if "timelines" not in activity.cache:
        activity.cache["timelines"] = [device_timeline(w) for w in activity.devices]
    return activity.cache["timelines"]
