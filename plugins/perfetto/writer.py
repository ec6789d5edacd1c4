"""Writer for Perfetto traces (protobuf TrackEvent), streamed packet chunk by packet chunk."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import EmptyOutputError, Trace, WholeTraceSink
from tracekit.plugins.perfetto.annotations import (
    AnnotationEncoder,
    ArgColumns,
    annotated_args,
    sample_native,
)
from tracekit.plugins.perfetto.lanes import nest_sorted, sort_slices
from tracekit.plugins.perfetto.samples import sample_packets
from tracekit.plugins.perfetto.tracks import plan_tracks
from tracekit.plugins.perfetto.wire import Blob, MessageColumns, encode_message
from tracekit.toolkit import (
    align_collectives,
    check_align,
    equals,
    fields,
    launch_links,
    mix64,
    plural,
    release_free_memory,
)

if TYPE_CHECKING:
    from tracekit.plugins.perfetto.sample_sink import Streamed

SEQUENCE_ID = 1
_CLEARED, _NEEDS_STATE = 1, 2
_BEGIN, _END, _INSTANT, _COUNTER = 1, 2, 3, 4
_CHUNK = 20_000  # packets encoded at a time; a chunk interns its new names first
_INTERN_BATCH = 10_000
_INT64_MAX = np.iinfo(np.int64).max
_KINDS = ("slice", "instant", "counter", "sample")
_UNTIMED = "untimed aggregate rows (no timestamp)"


@dataclass
class _Packets:
    """Event packets as columns, sorted into emission order; per event row its name,
    category and counter value (taken per chunk, to keep the packets' columns narrow)."""

    ts: np.ndarray
    type: np.ndarray         # uint8; BEGIN and INSTANT carry name, category, args and flows
    track: np.ndarray        # into ``uuids``: the packet's track or overlap lane
    uuids: np.ndarray        # uint64
    row: np.ndarray          # event row (for name, category, args, flows)
    value: np.ndarray | None  # per event row: counter value (None: no counters)
    name_code: np.ndarray    # per event row: name and category codes (interned id - 1)
    cat_code: np.ndarray


class PerfettoWriter(tracekit.Writer):
    """Perfetto protobuf trace: tracks per process/thread and per GPU stream, flows, counters."""

    name = "perfetto"
    description = "Perfetto trace (protobuf TrackEvent) for ui.perfetto.dev"
    extensions = (".pftrace", ".perfetto-trace", ".perfetto")
    # Tracks hold pid, tid, device and stream; flows link by correlation and flow_id, but
    # their values travel as annotations (tracekit.fields), like the other typed columns.
    native_columns = frozenset({"kind", "category", "name", "ts_ns", "dur_ns", "pid", "tid",
                                "device", "stream", "value", "stack_id", "source"})
    event_counts = ("slices", "instants", "counter values", "CPU samples")
    takes_batches = True  # CPU samples as they come; the rest at the end (batch_sink)

    @dataclass(frozen=True)
    class Options:
        args: bool = field(default=True, metadata={"help": "write args as debug annotations"})
        flows: bool = field(default=True, metadata={"help": "write flow arrows"})
        align: str = field(default="", metadata={
            "help": "collectives: shift each rank of a run so that its matched collectives "
                    "end with the lowest rank's (ranks recorded on different hosts); each "
                    "process name says the shift"})

        def __post_init__(self) -> None:
            check_align(self.align)

    def write(self, trace: Trace, stream: IO[bytes]) -> tracekit.WriteResult:
        result = tracekit.WriteResult()
        if self.options.align == "collectives":
            aligned = align_collectives(trace)
            trace = aligned.trace
            result.written["ranks aligned on their collectives"] = int(
                sum(1 for o in aligned.offsets_ns if o) if aligned.matched else 0)
        events = self.writable_events(trace.events, result)
        if not events.num_rows:
            raise EmptyOutputError(nothing_to_draw(trace.events.num_rows,
                                                    row_kinds(trace.events), result))
        return self.write_events(trace, events, stream, result)

    def batch_sink(self, stream: IO[bytes]) -> tracekit.BatchSink:
        if self.options.align:  # ranks are shifted by what the whole trace shows
            return WholeTraceSink(self, stream)
        from tracekit.plugins.perfetto.sample_sink import SampleStreamingSink

        return SampleStreamingSink(self, stream)

    def write_events(self, trace: Trace, events: pa.Table, stream: IO[bytes],
                     result: tracekit.WriteResult, streamed: Streamed | None = None,
                     ) -> tracekit.WriteResult:
        """Write the writable ``events`` of ``trace``; with ``streamed``, CPU samples were
        written already (see ``sample_sink``): none is written here."""
        plan = plan_tracks(trace, events)
        native = native_rows(events, plan)
        if streamed is not None and streamed.stand_ins:
            # Rows that only give threads their tracks: nothing of theirs is counted.
            stand_in = np.zeros(events.num_rows, dtype=bool)
            stand_in[events.num_rows - streamed.stand_ins:] = True
            native = {k: v if v is True else v | stand_in for k, v in native.items()}
        args = annotated_args(events, native, self.options.args, result.skipped)
        packets = self._packets(events, plan, result)
        plan.forget_rows()
        release_free_memory()  # the planning's temporaries, before the chunks' own
        flows = _flow_lists(events) if self.options.flows else None
        progress = self.progress
        annotations = AnnotationEncoder()
        first_ts = int(packets.ts[0]) if len(packets.ts) else 0
        stream.write(_intern_packets(events, first_ts))
        for desc in plan.descriptors:
            stream.write(_packet((8, first_ts), (60, desc)))
        for lo in range(0, len(packets.ts), _CHUNK):
            hi = min(lo + _CHUNK, len(packets.ts))
            prefix, data = _encode_chunk(packets, lo, hi, args, flows, annotations,
                                         result.skipped)
            stream.write(prefix)
            stream.write(data)
            del data  # before the next chunk is encoded
            if progress:
                progress.update(hi, len(packets.ts))
        if streamed is not None:
            if streamed.samples:
                result.written["CPU samples"] = streamed.samples
        elif (samples := events.select(["ts_ns", "pid", "tid", "stack_id"]).filter(
                equals(events["kind"], "sample"))).num_rows:
            for chunk in sample_packets(trace, samples):
                stream.write(chunk)
            result.written["CPU samples"] = samples.num_rows
        result.written["tracks"] = plan.track_count
        if flows is not None:
            result.written["flow endpoints"] = int(flows.counts[packets.row[
                (packets.type == _BEGIN) | (packets.type == _INSTANT)]].sum())
        return result

    def writable_events(self, events: pa.Table, result: tracekit.WriteResult) -> pa.Table:
        kind = events["kind"].cast(pa.string())
        is_counter = pc.equal(kind, "counter")
        checks = [
            (pc.invert(pc.is_in(kind, pa.array(_KINDS))), "events of an unknown kind"),
            (pc.is_null(events["ts_ns"]), _UNTIMED),
            (pc.less(pc.fill_null(events["ts_ns"], 0), 0), "negative timestamps"),
            (pc.and_(pc.equal(kind, "sample"), pc.is_null(events["stack_id"])),
             "CPU samples without a call stack"),
            (pc.and_(is_counter, pc.is_null(events["value"])), "counter rows without a value"),
            (pc.and_(is_counter, pc.invert(pc.is_finite(events["value"]))),
             "counter values that are NaN or infinite"),
        ]
        return fields.keep_writable(events, checks, result.skipped)

    def _packets(self, events: pa.Table, plan: Any, result: tracekit.WriteResult) -> _Packets:
        row_type = np.int32 if events.num_rows < 2**31 else np.int64
        slice_rows, instant_rows, counter_rows = (
            np.flatnonzero(equals(events["kind"], k).to_numpy()).astype(row_type)
            for k in ("slice", "instant", "counter"))
        ts = events["ts_ns"].to_numpy()
        start = ts[slice_rows]
        # Clamped so that the end never passes int64 (ts >= 0 here, so the bound cannot wrap).
        end = np.maximum(events["dur_ns"].fill_null(0).to_numpy()[slice_rows], 0)
        np.minimum(end, _INT64_MAX - start, out=end)
        end += start
        track = plan.row_track
        order, t, s, e = sort_slices(track[slice_rows], start, end)
        del start, end
        slices, begins, lanes, when = nest_sorted(order, t, s, e)
        del order, t, s, e
        n_slice, n_instant = len(slices), len(instant_rows)
        # Each column in the order slices, instants, counters, then sorted by time; one
        # column at a time, to hold as few full-length temporaries as possible.
        if n_instant or len(counter_rows):
            when = np.concatenate([when, ts[instant_rows], ts[counter_rows]])
        del ts
        # Stable: within a track and lane the nesting order above is kept for equal times.
        order = np.argsort(when, kind="stable")
        if len(order) < 2**31:
            order = order.astype(np.int32)
        when.sort(kind="stable")  # what when[order] holds, without a second array
        rows = np.empty(len(order), dtype=row_type)
        np.take(slice_rows, slices, out=rows[:n_slice])
        rows[n_slice:n_slice + n_instant] = instant_rows
        rows[n_slice + n_instant:] = counter_rows
        del slices, slice_rows
        kinds = np.full(len(order), _END, dtype=np.uint8)
        kinds[:n_slice][begins] = _BEGIN
        kinds[n_slice:n_slice + n_instant] = _INSTANT
        kinds[n_slice + n_instant:] = _COUNTER
        del begins
        kinds = kinds[order]
        on_track = track[rows]
        rows = rows[order]
        uuids = plan.uuids
        # Overlap lanes: one uuid per distinct (track, lane), declared in that order.
        extra = np.flatnonzero(lanes > 0)
        if len(extra):
            width = int(lanes.max()) + 1
            keys, inverse = np.unique(on_track[extra].astype(np.int64) * width + lanes[extra],
                                      return_inverse=True)
            uuids = uuids + [plan.lane_uuid(int(k) // width, int(k) % width) for k in keys]
            on_track[extra] = len(plan.uuids) + inverse.reshape(-1)
        del lanes, extra
        on_track = on_track[order]
        del order
        result.written["slices"] = n_slice // 2
        result.written["instants"] = n_instant
        result.written["counter values"] = len(counter_rows)
        value = events["value"].fill_null(0).to_numpy() if len(counter_rows) else None
        # Arrow's buffers, as they are (the interned ids are these codes + 1).
        names = events["name"].combine_chunks().indices.to_numpy(zero_copy_only=False)
        cats = events["category"].combine_chunks().indices.to_numpy(zero_copy_only=False)
        return _Packets(ts=when, type=kinds, track=on_track,
                        uuids=np.array(uuids, dtype=np.uint64), row=rows, value=value,
                        name_code=names, cat_code=cats)


def native_rows(events: pa.Table, plan: Any) -> dict[str, Any]:
    """Per typed column the rows whose Perfetto event or track holds it (tracekit.fields)."""
    slices, counters, samples = (equals(events["kind"], k).to_numpy()
                                 for k in ("slice", "counter", "sample"))
    return {
        "kind": True, "ts_ns": True, "name": ~samples,
        "category": ~samples | sample_native(events), "dur_ns": slices,
        # PerfSample packets name their pid and tid; tracks those of the other rows.
        "pid": plan.native["pid"] | samples, "tid": plan.native["tid"] | samples,
        "device": plan.native["device"], "stream": plan.native["stream"],
        "value": counters, "stack_id": samples,
        "source": len(events["source"].combine_chunks().dictionary) <= 1,
    }


def row_kinds(events: pa.Table) -> list[str]:
    """The kinds of ``events``' rows, in order of first appearance."""
    return pc.unique(events["kind"].cast(pa.string())).to_pylist()


def nothing_to_draw(rows: int, kinds: list[str], result: tracekit.WriteResult) -> str:
    """Why none of the input's ``rows`` events (of ``kinds``) could be written, for
    EmptyOutputError."""
    if not rows:
        return "nothing to draw: the input has no events"
    untimed = result.skipped.get(_UNTIMED, 0)
    if untimed == rows:
        what = plural(untimed, "sample" if kinds == ["sample"] else "event")
        return f"nothing to draw: no event has a timestamp ({what} without one)"
    return "nothing to draw: " + ", ".join(f"{n} {reason}"
                                           for reason, n in result.skipped.items())


def _packet(*fields: tuple[int, object]) -> bytes:
    """One TracePacket wrapped as a Trace.packet field."""
    return encode_message((1, encode_message(*fields)))


def _intern_packets(events: pa.Table, first_ts: int) -> bytes:
    """Interned event names and categories; the first packet clears the sequence state."""
    names = events["name"].combine_chunks().dictionary.to_pylist()
    cats = events["category"].combine_chunks().dictionary.to_pylist()
    entries = [(1, encode_message((1, i + 1), (2, c))) for i, c in enumerate(cats)]
    entries += [(2, encode_message((1, i + 1), (2, nm))) for i, nm in enumerate(names)]
    out = []
    for k in range(0, max(len(entries), 1), _INTERN_BATCH):
        flags = _CLEARED | _NEEDS_STATE if k == 0 else _NEEDS_STATE
        out.append(_packet((8, first_ts), (10, SEQUENCE_ID), (13, flags),
                           (12, encode_message(*entries[k:k + _INTERN_BATCH]))))
    return b"".join(out)


@dataclass
class _FlowLists:
    """The flow ids of each event row: row ``r`` has ``ids[start[r]:start[r] + counts[r]]``."""

    start: np.ndarray
    counts: np.ndarray
    ids: np.ndarray  # uint64, below 2**63


def _flow_lists(events: pa.Table) -> _FlowLists:
    """Flow ids per row, from launch links (see tracekit.links) and from ``flow_id``.

    Trace processor links the events that share a flow id in time order, a chain. A launch
    with one device row shares one id with it. A launch whose correlation id several
    device rows share (a CUDA/HIP graph launch and its kernels) must fan out instead of
    chaining launch -> k1 -> k2: each device row gets an id of its own, and the launch carries
    all of them, one arrow each. Both ends use ``flow_ids`` rather than ``terminating_flow_ids``
    so that an arrow is drawn even when clock skew puts the device row first.
    """
    n = events.num_rows
    key, linked, on_device = launch_links(events)
    rows = np.flatnonzero(linked)
    keys, device = key[rows], on_device[rows]
    _, inverse = np.unique(keys, return_inverse=True)
    inverse = inverse.reshape(-1)
    hosts = np.bincount(inverse, weights=~device)[inverse]
    devices = np.bincount(inverse, weights=device)[inverse]
    fan = (hosts == 1) & (devices > 1)
    plain = rows[~fan]
    fan_dev = rows[fan & device]
    fan_host = rows[fan & ~device]
    order = np.argsort(key[fan_host], kind="stable")
    host_of = fan_host[order][np.searchsorted(key[fan_host][order], key[fan_dev])]
    with np.errstate(over="ignore"):
        fan_ids = mix64(key[fan_dev] ^ mix64(fan_dev.astype(np.uint64) + np.uint64(1)))
    fid_rows = np.flatnonzero(events["flow_id"].is_valid().to_numpy(zero_copy_only=False))
    src = events["source"].combine_chunks().indices.to_numpy(zero_copy_only=False)[fid_rows]
    fid = events["flow_id"].take(pa.array(fid_rows)).to_numpy().astype(np.uint64)
    fid_ids = mix64(src.astype(np.uint64) ^ np.uint64(0x5851F42D4C957F2D)) ^ mix64(fid)
    all_rows = np.concatenate([plain, host_of, fan_dev, fid_rows]).astype(np.int64)
    all_ids = np.concatenate([key[plain], fan_ids, fan_ids, fid_ids]).astype(np.uint64) \
        >> np.uint64(1)
    # Stable: a row lists its launch ids (in device row order) before its flow_id id.
    order = np.argsort(all_rows, kind="stable")
    counts = np.bincount(all_rows, minlength=n).astype(np.int32)
    start = np.zeros(n, dtype=np.int32 if len(all_rows) < 2**31 else np.int64)
    np.cumsum(counts[:-1], out=start[1:])
    return _FlowLists(start=start, counts=counts, ids=all_ids[order])


def _encode_chunk(p: _Packets, lo: int, hi: int, args: ArgColumns, flows: _FlowLists | None,
                  annotations: AnnotationEncoder, skipped: Counter[str],
                  ) -> tuple[bytes, np.ndarray]:
    """The packets ``lo:hi``: the names they intern first (if any), then the packets."""
    n = hi - lo
    rows = p.row[lo:hi]
    kinds = p.type[lo:hi]
    fields = (kinds == _BEGIN) | (kinds == _INSTANT)
    te = MessageColumns(n)
    te.varint(9, kinds)
    te.varint(11, p.uuids[p.track[lo:hi]].view(np.int64))
    is_counter = kinds == _COUNTER
    # Counters carry their category and annotations too: the track only names them.
    te.varint(3, p.cat_code[rows] + 1, present=fields | is_counter)
    te.varint(10, p.name_code[rows] + 1, present=fields)
    te.double(44, 0.0 if p.value is None else p.value[rows], present=is_counter)
    if flows is not None:
        counts = np.where(fields, flows.counts[rows], 0)
        first = np.cumsum(counts) - counts
        take = np.repeat(flows.start[rows] - first, counts) + np.arange(int(counts.sum()))
        te.repeated_fixed64(47, counts, flows.ids[take])
    prefix = b""
    arg_rows = np.flatnonzero(fields | is_counter)
    found = annotations.columns(args.take(rows[arg_rows]), skipped)
    counts = np.zeros(n, dtype=np.int64)
    counts[arg_rows] = found.counts
    te.repeated_message(4, counts, found.items)
    sizes = np.zeros(n, dtype=np.int64)
    sizes[arg_rows] = found.per_row.sizes
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    te.raw(Blob(offsets, found.per_row.data))
    fresh = annotations.new_names()
    if fresh:
        interned = encode_message(*[(3, encode_message((1, iid), (2, nm)))
                                    for iid, nm in fresh])
        prefix = _packet((8, int(p.ts[lo])), (10, SEQUENCE_ID), (13, _NEEDS_STATE),
                         (12, interned))
    packet = MessageColumns(n)
    packet.varint(8, p.ts[lo:hi])
    packet.message(11, te)
    packet.varint(10, SEQUENCE_ID)
    packet.varint(13, _NEEDS_STATE)
    return prefix, MessageColumns(n).message(1, packet).encode().data

