"""What a plain ``tracekit analyze`` runs: the analyzers that declare themselves a default
(``Analyzer.default_for``) for the kind of trace core finds in the events."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow.compute as pc
from tracekit.columns import any_true, equals, is_in, starts_with
from tracekit.interfaces import Analyzer, TraceKind

if TYPE_CHECKING:
    import pyarrow as pa
    from tracekit.model import Trace
    from tracekit.registry import Registry

#: Categories of work a device executes (schema categories); timed ones make a GPU timeline.
GPU_WORK = ("gpu.kernel", "gpu.memcpy", "gpu.memset", "gpu.graph")
#: The event columns ``timed_gpu_work`` reads.
GPU_WORK_COLUMNS = frozenset({"kind", "category", "ts_ns", "device"})


def timed_gpu_work(events: pa.Table) -> pa.ChunkedArray:
    """Which events are timed GPU work: kernel, copy, memset or graph slices with a timestamp
    and a device."""
    work = pc.and_(is_in(events["category"], GPU_WORK), equals(events["kind"], "slice"))
    return pc.and_(work, pc.and_(pc.is_valid(events["ts_ns"]), pc.is_valid(events["device"])))


def has_gpu_work(trace: Trace) -> bool:
    """Whether ``trace`` holds timed GPU work (a GPU timeline, of one rank or several)."""
    return any_true(timed_gpu_work(trace.events))


def trace_kind(trace: Trace) -> TraceKind:
    """The kind of ``trace``: the first of :class:`TraceKind` that fits its events."""
    events = trace.events
    if not events.num_rows:
        return TraceKind.HOST_ONLY
    work = timed_gpu_work(events)
    if any_true(work):
        timed = events.select(["source", "pid"]).filter(work)
        ranks = len(pc.unique(timed["source"]).drop_null()) > 1 or \
            len(pc.unique(timed["pid"]).drop_null()) > 1
        return TraceKind.GPU_RANKS if ranks else TraceKind.GPU_TIMELINE
    if any_true(equals(events["kind"], "sample")):
        return TraceKind.CPU_SAMPLES
    if any_true(starts_with(events["category"], "gpu.")):
        return TraceKind.GPU_AGGREGATES
    return TraceKind.HOST_ONLY


def default_analyzers(kind: TraceKind, registry: Registry) -> list[str]:
    """Names of the analyzers a plain ``analyze`` runs on a trace of ``kind``: per slot, the
    installed ones of the highest rank declared for ``kind``; slots in order, names sorted."""
    slots: dict[int, dict[str, int]] = {}
    for name, cls in registry.analyzers.items():
        if ("analyzer", name) in registry.conflicts:
            continue
        for declared in cls.default_for:
            if kind in declared.kinds:
                ranks = slots.setdefault(declared.slot, {})
                ranks[name] = max(declared.rank, ranks.get(name, declared.rank))
    chosen = []
    for slot in sorted(slots):
        top = max(slots[slot].values())
        chosen += sorted(n for n, rank in slots[slot].items() if rank == top and n not in chosen)
    return chosen


def default_candidates(registry: Registry) -> list[type[Analyzer]]:
    """Every analyzer that a plain ``analyze`` may run, whatever the trace (to route ``-O``
    options before the trace is read)."""
    return [cls for name, cls in sorted(registry.analyzers.items())
            if cls.default_for and ("analyzer", name) not in registry.conflicts]
