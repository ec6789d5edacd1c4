"""From the packet loop's lists to event columns, vectorized: slices joined from their begin
and end events, counters scaled, identities spread from tracks to rows, flows to flow ids."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import EVENTS_SCHEMA, TraceBuilder
from tracekit.plugins.perfetto.read_packets import COUNTER, KINDS, SAMPLE, PacketReader

_COUNTER_CATEGORY = "counter.trace"  # counters whose trace names no category
_NO_STACK = "(no call stack)"


def build(reader: PacketReader, out: TraceBuilder) -> None:
    """Add the events, stacks, frames, processes, threads and devices read to ``out``."""
    cols = reader.cols
    n = len(cols.kind)
    ts = np.frombuffer(cols.ts, dtype=np.int64)
    dur = np.array(cols.dur, dtype=np.int64)  # copies: durations are set below
    track = np.frombuffer(cols.track, dtype=np.uint64)
    kind = np.frombuffer(cols.kind, dtype=np.int8)
    name = np.array(cols.name, dtype=np.int64)
    cat = np.array(cols.cat, dtype=np.int64)
    value = np.array(cols.value, dtype=np.float64)
    _join_slices(reader, ts, dur)
    _counters(reader, kind, track, ts, name, cat, value)
    stack = _samples(reader, out, kind, name, n)
    columns: dict[str, Any] = {
        "kind": pa.DictionaryArray.from_arrays(pa.array(kind.astype(np.int32)),
                                               pa.array(KINDS)),
        "category": _strings(cat, reader.string_list),
        "name": _strings(name, reader.string_list),
        "ts_ns": ts,
        "dur_ns": pa.array(dur, mask=dur < 0),
        "value": pa.array(value, mask=np.isnan(value) & (kind == COUNTER) | (kind != COUNTER)),
        "args": pa.array(cols.args, type=pa.string()),
        "stack_id": stack,
    }
    identity = _identities(reader, track)
    for column in ("pid", "tid", "device", "stream"):
        columns[column] = identity[column]
    _typed(reader, columns, n)
    columns["flow_id"] = _flow_ids(reader, columns, n)
    reader.tracks.fill(out)
    if n:
        out.add_events(columns)


def _strings(codes: np.ndarray, table: list[str]) -> pa.DictionaryArray:
    """Codes into the string table as a dictionary column holding only the strings used."""
    used, inverse = np.unique(codes, return_inverse=True)
    return pa.DictionaryArray.from_arrays(
        pa.array(inverse.reshape(-1).astype(np.int32)),
        pa.array([table[int(c)] for c in used], type=pa.string()))


def _join_slices(reader: PacketReader, ts: np.ndarray, dur: np.ndarray) -> None:
    """Pair each slice end with the begin it closes and set the begin's duration.

    As trace processor does: per track in timestamp order (file order among equal times), an
    end closes the most recently begun open slice. With depth = begins minus ends so far, a
    begin at depth d and the end that brings the depth back to d pair up, so sorting by
    (track, depth, time) puts every pair side by side.
    """
    cols = reader.cols
    m = len(cols.se_ts)
    if not m:
        return
    track = np.frombuffer(cols.se_track, dtype=np.uint64)
    when = np.frombuffer(cols.se_ts, dtype=np.int64)
    begin = np.frombuffer(cols.se_begin, dtype=np.int8).astype(bool)
    ref = np.frombuffer(cols.se_ref, dtype=np.int64)
    order = np.lexsort((np.arange(m), when, track))
    t, b = track[order], begin[order]
    step = np.where(b, 1, -1)
    first = np.r_[True, t[1:] != t[:-1]]
    group = np.cumsum(first) - 1
    total = np.cumsum(step)
    after = total - (total - step)[first][group]  # depth after each event, per track
    lowest = np.minimum.reduceat(after, np.flatnonzero(first))
    damaged = lowest[group] < 0  # a track with an end before any begin
    level = np.where(b, after - 1, after)  # a pair shares the depth it starts from
    pairs_b: list[np.ndarray] = []
    pairs_e: list[np.ndarray] = []
    idx = np.flatnonzero(~damaged)
    if len(idx):
        o = idx[np.lexsort((idx, level[idx], group[idx]))]
        pair = ((group[o[1:]] == group[o[:-1]]) & (level[o[1:]] == level[o[:-1]])
                & b[o[:-1]] & ~b[o[1:]])
        pairs_b.append(o[:-1][pair])
        pairs_e.append(o[1:][pair])
    orphans = 0
    if damaged.any():
        pb, pe, orphans = _join_in_order(np.flatnonzero(damaged), b, group)
        pairs_b.append(pb)
        pairs_e.append(pe)
    ib = order[np.concatenate(pairs_b)]
    ie = order[np.concatenate(pairs_e)]
    rows = ref[ib]
    dur[rows] = when[ie] - when[ib]
    unended = int(begin.sum()) - len(rows)
    if orphans:
        reader.warnings["warning: slice ends without a begin on their track (ignored)"] += \
            orphans
    if unended:
        reader.warnings["warning: slices that never end (kept without a duration)"] += unended
    extras = ref[ie]
    for row, extra in zip(rows[extras >= 0].tolist(), extras[extras >= 0].tolist(),
                          strict=True):
        _merge_end(reader, row, cols.end_extras[extra])


def _join_in_order(idx: np.ndarray, b: np.ndarray, group: np.ndarray,
                   ) -> tuple[np.ndarray, np.ndarray, int]:
    """Pair begins and ends of damaged tracks one by one; count ends with nothing open."""
    pb, pe, orphans = [], [], 0
    stacks: dict[int, list[int]] = {}
    for i, g in zip(idx.tolist(), group[idx].tolist(), strict=True):
        stack = stacks.setdefault(g, [])
        if b[i]:
            stack.append(i)
        elif stack:
            pb.append(stack.pop())
            pe.append(i)
        else:
            orphans += 1
    return np.array(pb, dtype=np.int64), np.array(pe, dtype=np.int64), orphans


def _merge_end(reader: PacketReader, row: int, extra: tuple[Any, ...]) -> None:
    """Fold the annotations and flows an end event carries into its slice."""
    args, typed, flows, ends, ts = extra
    cols = reader.cols
    if args:
        if cols.args[row]:
            merged = orjson.loads(args) | orjson.loads(cols.args[row])
            cols.args[row] = orjson.dumps(merged).decode()
        else:
            cols.args[row] = args
    for column, value in typed:
        cols.set(column, row, value)
    cols.flows(row, flows, ends, ts)


def _counters(reader: PacketReader, kind: np.ndarray, track: np.ndarray, ts: np.ndarray,
              name: np.ndarray, cat: np.ndarray, value: np.ndarray) -> None:
    """Counter rows: named after their track, scaled by its unit multiplier, summed when
    the track is incremental (from 0 again where their sequence's state was cleared, as
    trace processor restarts them)."""
    rows = np.flatnonzero(kind == COUNTER)
    if not len(rows):
        return
    epoch = np.zeros(len(kind), dtype=np.int64)
    epoch[np.frombuffer(reader.cols.counter_rows, dtype=np.int64)] = \
        np.frombuffer(reader.cols.counter_epochs, dtype=np.int64)
    uuids, inverse = np.unique(track[rows], return_inverse=True)
    inverse = inverse.reshape(-1)
    for i, uuid in enumerate(uuids.tolist()):
        mine = rows[inverse == i]
        d = reader.tracks.counter(uuid)
        if d is None:
            reader.warnings["warning: counter values on a track that is not a counter track"] \
                += len(mine)
            label = reader.tracks.tracks[uuid].label if uuid in reader.tracks.tracks else ""
            name[mine] = reader.code(label or "counter")
            cat[mine] = np.where(cat[mine] < 0, reader.code(_COUNTER_CATEGORY), cat[mine])
            continue
        name[mine] = reader.code(d.label or "counter")
        fallback = ",".join(d.counter_categories) or _COUNTER_CATEGORY
        cat[mine] = np.where(cat[mine] < 0, reader.code(fallback), cat[mine])
        if d.incremental:
            by_time = mine[np.lexsort((ts[mine], epoch[mine]))]
            total = np.cumsum(value[by_time])
            start = np.r_[True, epoch[by_time][1:] != epoch[by_time][:-1]]
            before = (total - value[by_time])[start]  # the sum up to each state's first value
            value[by_time] = total - before[np.cumsum(start) - 1]
        if d.unit_multiplier != 1:
            value[mine] *= d.unit_multiplier


def _samples(reader: PacketReader, out: TraceBuilder, kind: np.ndarray, name: np.ndarray,
             n: int) -> pa.Array:
    """The stack_id column; sample rows named after their leaf frame; stacks and frames."""
    stack = np.full(n, -1, dtype=np.int64)
    stack[np.array(reader.stack_rows, dtype=np.int64)] = np.array(reader.stack_ids,
                                                                  dtype=np.int64)
    if reader.stack_nodes:
        keys = np.array(list(reader.stack_nodes), dtype=np.int64).reshape(-1, 2)
        ids = np.array(list(reader.stack_nodes.values()), dtype=np.int64)
        frame_of = np.empty(len(ids), dtype=np.int64)
        frame_of[ids] = keys[:, 1]
        parent = keys[:, 0] - 1
        out.add_table("stacks", pa.table({
            "stack_id": ids, "parent_id": pa.array(parent, mask=parent < 0),
            "frame_id": keys[:, 1]}))
        frames = list(reader.frames)
        out.add_table("frames", pa.table({
            "frame_id": np.arange(len(frames), dtype=np.int64),
            "name": [f[0] for f in frames], "module": [f[1] for f in frames]}))
        samples = np.flatnonzero((kind == SAMPLE) & (stack >= 0))
        leaf_names = np.array([reader.code(f[0]) for f in frames], dtype=np.int64)
        name[samples] = leaf_names[frame_of[stack[samples]]]
    name[(kind == SAMPLE) & (stack < 0)] = reader.code(_NO_STACK)
    return pa.array(stack, mask=stack < 0)


def _identities(reader: PacketReader, track: np.ndarray) -> dict[str, pa.Array]:
    """pid, tid, device and stream of every row, from its track."""
    uuids, inverse = np.unique(track, return_inverse=True)
    inverse = inverse.reshape(-1)
    found = {c: np.zeros(len(uuids), dtype=np.int64) for c in ("pid", "tid", "device",
                                                                "stream")}
    null = {c: np.ones(len(uuids), dtype=bool) for c in found}
    unknown = np.zeros(len(uuids), dtype=bool)
    for i, uuid in enumerate(uuids.tolist()):
        if uuid == 0:
            continue
        ident = reader.tracks.resolve(uuid)
        unknown[i] = not ident.known
        for column in found:
            v = getattr(ident, column)
            if v is not None:
                found[column][i], null[column][i] = v, False
    if unknown.any():
        reader.warnings["warning: events on tracks no descriptor declares (they belong to "
                        "no process)"] += int(unknown[inverse].sum())
    return {c: pa.array(found[c][inverse], mask=null[c][inverse],
                        type=EVENTS_SCHEMA.field(c).type) for c in found}


def _typed(reader: PacketReader, columns: dict[str, Any], n: int) -> None:
    """Columns filled from annotations named as typed columns (and from samples' pid/tid)."""
    for column, (rows, values) in reader.cols.typed.items():
        type_ = EVENTS_SCHEMA.field(column).type
        given = pa.array(values, type=type_.value_type if pa.types.is_dictionary(type_)
                         else type_)
        where = np.array(rows, dtype=np.int64)
        base = columns.get(column)
        if base is None:
            base = pa.nulls(n, given.type)
        elif pa.types.is_dictionary(base.type):
            base = base.cast(given.type)
        # The last value given for a row wins (an end's annotation after its begin's).
        take = np.full(n, -1, dtype=np.int64)
        take[where] = np.arange(len(where))
        chosen = given.take(pa.array(np.maximum(take, 0)))
        columns[column] = pc.if_else(pa.array(take < 0), base, chosen)


def _flow_ids(reader: PacketReader, columns: dict[str, Any], n: int) -> pa.Array:
    """Rows joined by flow ids become rows sharing a ``flow_id``.

    As in trace processor, an id in ``terminating_flow_ids`` ends its flow: the same id later
    (in time order) starts another. Components are taken over all flows (a launch that fans
    out to several kernels with one id each is one group). A group that the rows'
    ``correlation`` or ``flow_id`` columns already link (tracekit writes them as annotations
    too) is not given a second link.
    """
    existing = columns.get("flow_id")
    base = existing if existing is not None else pa.nulls(n, pa.int64())
    cols = reader.cols
    if not cols.flow_rows:
        return base
    rows = np.array(cols.flow_rows, dtype=np.int64)
    flow = _flows(np.array(cols.flow_ids, dtype=np.uint64),
                  np.array(cols.flow_ends, dtype=bool), np.array(cols.flow_ts, dtype=np.int64))
    label = rows.copy()
    while True:  # label propagation: rows and flows take the smallest row of their group
        per_flow = np.full(int(flow.max()) + 1, n, dtype=np.int64)
        np.minimum.at(per_flow, flow, label)
        per_row = np.full(n, n, dtype=np.int64)
        np.minimum.at(per_row, rows, per_flow[flow])
        new = per_row[rows]
        if np.array_equal(new, label):
            break
        label = new
    group_rows = np.unique(np.c_[label, rows], axis=0)  # a row once per group
    component, member = group_rows[:, 0], group_rows[:, 1]
    sizes = np.bincount(np.unique(component, return_inverse=True)[1].reshape(-1))
    lone = int((sizes == 1).sum())
    if lone:
        reader.warnings["warning: flows with one end in the trace (no arrow)"] += lone
    linked = _already_linked(columns, component, member)
    keep = ~linked & (sizes[np.unique(component, return_inverse=True)[1].reshape(-1)] > 1)
    if not keep.any():
        return base
    ids = np.unique(component[keep], return_inverse=True)[1].reshape(-1)
    start = 1 + max(0, int(pc.max(base).as_py() or 0))
    flow_id = base.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    has = base.is_valid().to_numpy(zero_copy_only=False)
    target = member[keep]
    clash = has[target]
    if clash.any():
        reader.warnings["warning: rows in more flows than their flow_id holds (first kept)"] \
            += int(clash.sum())
    flow_id[target[~clash]] = start + ids[~clash]
    has[target[~clash]] = True
    return pa.array(flow_id, mask=~has)


def _flows(ids: np.ndarray, ends: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Per flow id occurrence, the number of the flow it belongs to: an id's occurrences in
    time order (file order among equal times) up to and including one that terminates it
    are one flow, the next ones another."""
    order = np.lexsort((np.arange(len(ids)), ts, ids))
    sorted_ids, sorted_ends = ids[order], ends[order].astype(np.int64)
    first = np.r_[True, sorted_ids[1:] != sorted_ids[:-1]]
    ended = np.cumsum(sorted_ends) - sorted_ends  # terminations before each occurrence ...
    generation = ended - ended[first][np.cumsum(first) - 1]  # ... of the same id
    key = np.empty((len(ids), 2), dtype=np.uint64)
    key[order, 0] = sorted_ids
    key[order, 1] = generation.astype(np.uint64)
    return np.unique(key, axis=0, return_inverse=True)[1].reshape(-1)


def _already_linked(columns: dict[str, Any], component: np.ndarray,
                    member: np.ndarray) -> np.ndarray:
    """Per (component, row) entry: whether the component's rows all share a ``flow_id``, or
    all share a ``correlation`` and a ``pid`` (a launch link, which writers draw from
    ``correlation`` within a process)."""
    _, comp = np.unique(component, return_inverse=True)
    comp = comp.reshape(-1)
    linked = np.zeros(len(member), dtype=bool)
    for keys in (("flow_id",), ("correlation", "pid")):
        same = np.ones(int(comp.max()) + 1, dtype=bool)
        for column in keys:
            col = columns.get(column)
            if col is None:
                same[:] = False
                break
            valid = col.is_valid().to_numpy(zero_copy_only=False)[member]
            key = col.fill_null(0).to_numpy(zero_copy_only=False)[member].astype(np.int64)
            lo = np.full(len(same), np.iinfo(np.int64).max)
            hi = np.full(len(same), np.iinfo(np.int64).min)
            np.minimum.at(lo, comp, key)
            np.maximum.at(hi, comp, key)
            same &= (np.bincount(comp, weights=(~valid).astype(np.float64),
                                 minlength=len(same)) == 0) & (lo == hi)
        linked |= same[comp]
    return linked
