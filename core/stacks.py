"""Call stacks of samples: the frames of each stack id, root first, from the stacks tree."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.model import Trace

Frame = tuple[str, "str | None"]  # (name, module)


class CallSites:
    """Builds a stacks/frames tree: frames interned by (name, module), call sites by
    (parent site, frame), so that every path shares its prefix with the others."""

    def __init__(self) -> None:
        self.frames: dict[Frame, int] = {}
        self.sites: dict[tuple[int, int], int] = {}

    def site(self, parent: int | None, frame: Frame) -> int:
        """The id of ``frame`` called from call site ``parent`` (None at the root)."""
        fid = self.frames.setdefault(frame, len(self.frames))
        return self.sites.setdefault((-1 if parent is None else parent, fid), len(self.sites))

    def stack_of(self, leaf_first: list[Frame]) -> int | None:
        """The call-site id of a callchain given leaf first (None for an empty one)."""
        site = None
        for frame in reversed(leaf_first):
            site = self.site(site, frame)
        return site

    def tables(self) -> tuple[pa.Table, pa.Table]:
        """The (frames, stacks) tables of the event model, ids in order of first use."""
        frames = pa.table({"frame_id": pa.array(range(len(self.frames)), pa.int64()),
                           "name": pa.array([f[0] for f in self.frames], pa.string()),
                           "module": pa.array([f[1] for f in self.frames], pa.string())})
        stacks = pa.table({"stack_id": pa.array(range(len(self.sites)), pa.int64()),
                           "parent_id": pa.array([p if p >= 0 else None for p, _ in self.sites],
                                                 pa.int64()),
                           "frame_id": pa.array([f for _, f in self.sites], pa.int64())})
        return frames, stacks


class StackTree:
    """The stacks and frames tables of a trace, for walking paths from the root."""

    def __init__(self, trace: Trace) -> None:
        stacks = trace.stacks
        self._parent = dict(zip(stacks["stack_id"].to_pylist(), stacks["parent_id"].to_pylist(),
                                strict=True))
        self._frame = dict(zip(stacks["stack_id"].to_pylist(), stacks["frame_id"].to_pylist(),
                               strict=True))
        frames = trace.frames
        self.names = dict(zip(frames["frame_id"].to_pylist(), frames["name"].to_pylist(),
                              strict=True))
        self.modules = dict(zip(frames["frame_id"].to_pylist(), frames["module"].to_pylist(),
                                strict=True))
        self._paths: dict[int, tuple[int, ...]] = {}

    def frames(self, stack_id: int) -> tuple[int, ...]:
        """Frame ids from the root to the leaf of ``stack_id``."""
        path = self._paths.get(stack_id)
        if path is not None:
            return path
        chain, node = [], stack_id
        while node is not None and node not in self._paths:
            chain.append(node)
            node = self._parent.get(node)
        path = self._paths[node] if node is not None else ()
        for site in reversed(chain):
            path = (*path, self._frame[site])
            self._paths[site] = path
        return path

    def names_of(self, stack_id: int) -> list[str]:
        """Frame names from the root to the leaf of ``stack_id``."""
        return [self.names[f] for f in self.frames(stack_id)]


def sample_weights(events: pa.Table, weight: str) -> tuple[pa.Array, str]:
    """Per row its weight, and the weight's unit (``ns`` or empty).

    ``weight="samples"``: 1 per sampled row. Otherwise the row's value (perf's period, 1 for
    nsys). Untimed aggregate rows (VTune) always weigh what they total: their ``dur_ns``
    (CPU time) where they have one, else their value; counting report rows would mean
    nothing.
    """
    n = events.num_rows
    aggregate = pc.and_(pc.is_null(events["ts_ns"]), pc.is_valid(events["dur_ns"]))
    has_aggregates = bool(pc.any(aggregate).as_py()) if n else False
    if has_aggregates and bool(pc.all(aggregate).as_py()):
        return pc.cast(events["dur_ns"], pa.float64()).combine_chunks(), "ns"
    if weight == "samples":
        return pa.array(np.ones(n)), ""
    return pc.fill_null(events["value"], 1.0).combine_chunks(), ""


SAMPLE_COLUMNS = ("category", "name", "ts_ns", "dur_ns", "value", "stack_id", "args",
                  "source", "pid", "tid")


def sample_events(trace: Trace, event: str | None) -> tuple[pa.Table, list[str]]:
    """CPU sample rows of one sampled event (perf's ``args.event``), and the events seen.

    ``event`` None keeps the most frequent event, as FlameGraph keeps one event type:
    folding cycles and instructions together would mean nothing. Only the columns that
    sample consumers use are kept, and nothing is copied when every row qualifies.
    """
    events = trace.events.select(list(SAMPLE_COLUMNS))
    is_sample = equals(events["category"], "cpu.sample")
    rows = events if pc.all(is_sample).as_py() else events.filter(is_sample)
    counts: dict[str, int] = {}
    for meta in trace.metadata.get("sources", {}).values():
        for name, n in (meta.get("events") or {}).items():
            counts[name] = counts.get(name, 0) + n
    seen = [e for e, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    if len(seen) <= 1 and event is None:
        return rows, seen
    keep = event if event is not None else seen[0]
    names = pc.struct_field(pc.extract_regex(pc.fill_null(rows["args"], ""),
                                             r'"event":"(?P<e>[^"]*)"'), "e")
    return rows.filter(pc.fill_null(pc.equal(names, keep), False)), seen


def equals(column: pa.ChunkedArray, value: str) -> pa.ChunkedArray:
    """``column == value`` for a dictionary column, compared on its codes: casting millions
    of rows to strings first would materialize every one of them."""
    chunks = []
    for chunk in column.chunks:
        if not pa.types.is_dictionary(chunk.type):
            chunks.append(pc.fill_null(pc.equal(chunk, value), False))
            continue
        code = pc.index(chunk.dictionary, value).as_py()
        chunks.append(pc.fill_null(pc.equal(chunk.indices, code), False) if code >= 0 else
                      pa.array(np.zeros(len(chunk), dtype=bool)))
    return pa.chunked_array(chunks, pa.bool_())
