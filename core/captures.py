"""Captures of one process at different times, read as that one process.

PyTorch's profiler with ``schedule(..., repeat=N)`` and ``tensorboard_trace_handler`` writes one
file per profiling cycle, all from the same process: the same host, the same pids, the same
rank (or none), at times that do not overlap. Read as a run, such files are not ranks: they are
windows of one process with untraced time between them. ``join_captures`` folds each such group
of inputs into one input (the earliest capture's name), so that every analyzer and writer sees
one process with its captured windows; ``untraced_gaps`` says where the time between them lies.

The rule: inputs are captures of one process when each holds the same non-empty set of real
pids (synthetic negative pids aside), on the same known host (the processes' ``host``, else the
Kineto ``host_name`` in the source metadata), with the same declared rank or none, read by the
same reader, and their time windows (first event start to last event end) do not overlap.
Anything else (different pids, hosts or ranks, overlapping windows, an unknown host) stays as
it was: one rank per input (``tracekit.ranks``).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.model import Trace
from tracekit.window import time_span

#: Where ``join_captures`` records the untraced intervals ``[end, next start]`` (ns, trace
#: clock) of the joined inputs, and the inputs themselves under each joined source's metadata.
UNTRACED = "untraced_between_captures"
CAPTURES = "captures"


@dataclass(frozen=True)
class Window:
    """One input's captured window: its first event's start and its last event's end."""

    source: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Captures:
    """Inputs that are captures of one process at different times, in time order."""

    windows: tuple[Window, ...]
    pids: tuple[int, ...]
    host: str
    rank: int | None
    name: str | None

    @property
    def gaps(self) -> list[tuple[int, int]]:
        """The untraced intervals between consecutive captures (end, next start)."""
        return [(a.end_ns, b.start_ns) for a, b in itertools.pairwise(self.windows)]

    @property
    def untraced_ns(self) -> int:
        """The time between the captures, which nothing recorded."""
        return sum(b - a for a, b in self.gaps)

    def warning(self) -> str:
        """The read log's line about them."""
        pids = ", ".join(str(p) for p in self.pids)
        name = f"{self.name}, " if self.name else ""
        rank = "" if self.rank is None else f", rank {self.rank}"
        return (f"warning: {len(self.windows)} captures of process {pids} ({name}host "
                f"{self.host}{rank}) at "
                f"different times ({', '.join(w.source for w in self.windows)}): read as one "
                f"process; the time between captures was not traced ({self.untraced_ns:,} ns "
                f"in {len(self.gaps)} gap{'s' if len(self.gaps) > 1 else ''})")


def find_captures(trace: Trace) -> list[Captures]:
    """The groups of inputs of ``trace`` that are captures of one process at different times
    (see the module's rule), each in time order; none for a trace of one input."""
    sources = trace.sources
    if len(sources) < 2 or not trace.events.num_rows:
        return []
    windows = _windows(trace)
    meta = trace.metadata.get("sources", {})
    keys: dict[tuple[Any, ...], list[str]] = {}
    names: dict[tuple[Any, ...], str | None] = {}
    for s in sources:
        rows = [r for r in trace.processes.to_pylist() if r["source"] == s and r["pid"] >= 0]
        info = meta.get(s) if isinstance(meta.get(s), dict) else {}
        hosts = {r["host"] for r in rows if r["host"]}
        run = info.get("run") if isinstance(info.get("run"), dict) else {}
        if not hosts and isinstance(run.get("host_name"), str) and run["host_name"]:
            hosts = {run["host_name"]}
        ranks = {int(r["rank"]) for r in rows if r["rank"] is not None}
        dist = info.get("distributed")
        if not ranks and isinstance(dist, dict) and type(dist.get("rank")) is int:
            ranks = {dist["rank"]}
        pids = tuple(sorted({int(r["pid"]) for r in rows}))
        if not pids or len(hosts) != 1 or len(ranks) > 1 or s not in windows:
            continue
        key = (info.get("reader"), next(iter(hosts)), pids, next(iter(ranks), None))
        keys.setdefault(key, []).append(s)
        names.setdefault(key, next((r["name"] for r in rows if r["name"]), None))
    out = []
    for key, members in keys.items():
        if len(members) < 2:
            continue
        ordered = sorted((windows[s] for s in members), key=lambda w: (w.start_ns, w.end_ns))
        if any(b.start_ns < a.end_ns for a, b in itertools.pairwise(ordered)):
            continue  # overlapping windows: processes alive at once, not one process's captures
        out.append(Captures(tuple(ordered), key[2], key[1], key[3], names[key]))
    return out


def join_captures(trace: Trace) -> Trace:
    """``trace`` with each group of ``find_captures`` read as one input: its rows take the
    earliest capture's source name (one process, its pids as recorded), the later captures'
    ``flow_id`` and ``correlation`` values move past those of the earlier ones where they would
    repeat (links stay within their capture), the read log says so in a warning naming the
    inputs, and ``metadata[UNTRACED]`` lists the untraced intervals. The joined source's
    metadata lists its captures (``metadata["sources"][name]["captures"]``)."""
    groups = find_captures(trace)
    if not groups:
        return trace
    rename = {w.source: g.windows[0].source for g in groups for w in g.windows}
    events = _shift_ids(trace.events, groups)
    events = _renamed(events, rename)
    tables = {"events": events}
    for name, key in (("processes", ["source", "pid"]), ("threads", ["source", "pid", "tid"]),
                      ("devices", ["source", "device"])):
        tables[name] = _first_rows(_renamed(trace.table(name), rename), key)
    metadata = dict(trace.metadata)
    sources = {}
    for name, info in trace.metadata.get("sources", {}).items():
        target = rename.get(name, name)
        if target == name:
            sources[name] = dict(info) if isinstance(info, dict) else info
    for g in groups:
        entry = sources[g.windows[0].source]
        if isinstance(entry, dict):
            entry[CAPTURES] = [{"source": w.source, "start_ns": w.start_ns, "end_ns": w.end_ns,
                                "metadata": trace.metadata["sources"].get(w.source)}
                               for w in g.windows]
    metadata["sources"] = sources
    metadata[UNTRACED] = sorted([a, b] for g in groups for a, b in g.gaps)
    log = trace.log
    for g in groups:
        first = g.windows[0].source
        log.note(first, first, g.warning())
    return dataclasses.replace(trace, metadata=metadata, log=log, **tables)


def untraced_gaps(trace: Trace) -> list[tuple[int, int]]:
    """The intervals (ns, trace clock) between captures of one process that nothing recorded
    (``join_captures``); none for other traces."""
    gaps = trace.metadata.get(UNTRACED) if isinstance(trace.metadata, dict) else None
    return [(int(a), int(b)) for a, b in gaps] if isinstance(gaps, list) else []


def untraced_ns(trace: Trace, start_ns: int, end_ns: int) -> int:
    """How much of ``[start_ns, end_ns)`` lies between captures, untraced: what a span from
    ``start_ns`` to ``end_ns`` holds that no capture recorded.
"""
    return sum(max(0, min(b, end_ns) - max(a, start_ns)) for a, b in untraced_gaps(trace))


def untraced_note(trace: Trace) -> str | None:
    """What a report says of a trace joined from captures: its span (first event to last)
    includes time that was not traced. None for other traces."""
    gaps = untraced_gaps(trace)
    if not gaps or not trace.events.num_rows:
        return None
    start, end = time_span(trace.events) or (0, 0)
    missing = untraced_ns(trace, start, end)
    return (f"this trace joins captures of one process at different times: its span, "
            f"{end - start:,} ns from the first event to the last, includes {missing:,} ns "
            f"between captures that were not traced (untraced_ns: {missing}; traced: "
            f"{end - start - missing:,} ns); a share of the span counts that time as idle "
            f"unless the report leaves it out (untraced_ns in its evidence)")


def _windows(trace: Trace) -> dict[str, Window]:
    ev = trace.events.filter(pc.is_valid(trace.events["ts_ns"]))
    if not ev.num_rows:
        return {}
    table = pa.table({"source": ev["source"].cast(pa.string()), "start": ev["ts_ns"],
                      "end": pc.add(ev["ts_ns"], pc.fill_null(ev["dur_ns"], 0))})
    agg = table.group_by("source", use_threads=False).aggregate([("start", "min"),
                                                                 ("end", "max")])
    return {s: Window(s, int(a), int(b)) for s, a, b in zip(
        agg["source"].to_pylist(), agg["start_min"].to_pylist(), agg["end_max"].to_pylist(),
        strict=True)}


def _renamed(table: pa.Table, rename: dict[str, str]) -> pa.Table:
    """``table`` with its ``source`` values renamed, in the column's own type."""
    i = table.schema.get_field_index("source")
    field = table.schema.field(i)
    # Renamed per distinct name, not per row: a row takes its name's new one by its code.
    coded = table["source"].cast(pa.string()).combine_chunks().dictionary_encode()
    names = [rename.get(v, v) for v in coded.dictionary.to_pylist()]
    distinct = list(dict.fromkeys(names))
    codes = pa.array([distinct.index(n) for n in names], coded.indices.type)
    array: pa.Array = pa.DictionaryArray.from_arrays(pc.take(codes, coded.indices),
                                                     pa.array(distinct, pa.string()))
    array = array.cast(field.type) if pa.types.is_dictionary(field.type) else \
        array.cast(pa.string())
    return table.set_column(i, field, array)


def _first_rows(table: pa.Table, key: list[str]) -> pa.Table:
    """The first row of each ``key`` (a process named by both captures is one process)."""
    seen: set[tuple[Any, ...]] = set()
    keep = []
    for row in zip(*(table[k].to_pylist() for k in key), strict=True):
        keep.append(row not in seen)
        seen.add(row)
    return table.filter(pa.array(keep, pa.bool_())) if table.num_rows else table


def _shift_ids(events: pa.Table, groups: list[Captures]) -> pa.Table:
    """Per group, each later capture's ``flow_id`` and ``correlation`` moved past the earlier
    captures' largest where its values would meet theirs (left as recorded where the
    process's numbering already runs on, as CUPTI correlation ids do)."""
    src = np.asarray(events["source"].cast(pa.string()).to_numpy(zero_copy_only=False))
    for column in ("flow_id", "correlation"):
        values = events[column]
        if values.null_count == len(values):
            continue
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        ids = values.fill_null(0).to_numpy()
        delta = np.zeros(events.num_rows, dtype=np.int64)
        for g in groups:
            top = None
            for w in g.windows:
                mine = (src == w.source) & valid
                if not mine.any():
                    continue
                lo, hi = int(ids[mine].min()), int(ids[mine].max())
                shift = 0 if top is None or lo > top else top + 1 - lo
                delta[mine] = shift
                top = hi + shift if top is None else max(top, hi + shift)
        if delta.any():
            i = events.schema.get_field_index(column)
            events = events.set_column(i, events.schema.field(i),
                                       pc.add(values, pa.array(delta, pa.int64())))
    return events
