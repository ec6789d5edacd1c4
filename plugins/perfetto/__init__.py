"""Writer for Perfetto traces (protobuf TrackEvent), streamed packet chunk by packet chunk."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit.links import launch_links, mix64
from tracekit.model import Trace
from tracekit.plugins.perfetto.annotations import AnnotationEncoder
from tracekit.plugins.perfetto.lanes import nest_slices
from tracekit.plugins.perfetto.samples import sample_packets
from tracekit.plugins.perfetto.tracks import plan_tracks
from tracekit.plugins.perfetto.wire import Blob, MessageColumns, encode_message

SEQUENCE_ID = 1
_CLEARED, _NEEDS_STATE = 1, 2
_BEGIN, _END, _INSTANT, _COUNTER = 1, 2, 3, 4
_CHUNK = 100_000
_INTERN_BATCH = 10_000


@dataclass
class _Packets:
    """Event packets as columns, sorted into emission order."""

    ts: np.ndarray
    type: np.ndarray
    uuid: np.ndarray
    row: np.ndarray          # event row (for name, category, args, flows)
    with_fields: np.ndarray  # BEGIN and INSTANT carry name, category, args and flows
    value: np.ndarray        # counter value
    name_iid: np.ndarray     # interned name and category ids (dictionary code + 1)
    cat_iid: np.ndarray


class PerfettoWriter(tracekit.Writer):
    """Perfetto protobuf trace: tracks per process/thread and per GPU stream, flows, counters."""

    name = "perfetto"
    description = "Perfetto trace (protobuf TrackEvent) for ui.perfetto.dev"
    extensions = (".pftrace", ".perfetto-trace", ".perfetto")

    @dataclass(frozen=True)
    class Options:
        args: bool = field(default=True, metadata={"help": "write args as debug annotations"})
        flows: bool = field(default=True, metadata={"help": "write flow arrows"})

    def write(self, trace: Trace, stream: IO[bytes]) -> tracekit.WriteResult:
        result = tracekit.WriteResult()
        events = self._writable(trace.events, result)
        plan = plan_tracks(trace, events)
        packets = self._packets(events, plan, result)
        flows = _flow_ids(events) if self.options.flows else (None, None)
        progress = getattr(self, "progress", None)
        annotations = AnnotationEncoder()
        first_ts = int(packets.ts[0]) if len(packets.ts) else 0
        stream.write(_intern_packets(events, first_ts))
        for desc in plan.descriptors:
            stream.write(_packet((8, first_ts), (60, desc)))
        args = events["args"] if self.options.args else None
        for lo in range(0, len(packets.ts), _CHUNK):
            hi = min(lo + _CHUNK, len(packets.ts))
            stream.write(_encode_chunk(packets, lo, hi, args, flows, annotations))
            if progress:
                progress.update(hi, len(packets.ts))
        samples = events.select(["ts_ns", "pid", "tid", "stack_id"]).filter(
            pc.equal(events["kind"].cast(pa.string()), "sample"))
        if samples.num_rows:
            for chunk in sample_packets(trace, samples):
                stream.write(chunk)
            result.written["CPU samples"] = samples.num_rows
        result.written["tracks"] = plan.track_count
        if flows[0] is not None:
            result.written["flow endpoints"] = int(
                (flows[0] >= 0)[packets.row[packets.with_fields]].sum()
                + (flows[1] >= 0)[packets.row[packets.with_fields]].sum())
        return result

    def _writable(self, events: pa.Table, result: tracekit.WriteResult) -> pa.Table:
        kind = events["kind"].cast(pa.string())
        checks = [
            (pc.is_null(events["ts_ns"]), "untimed aggregate rows (no timestamp)"),
            (pc.less(pc.fill_null(events["ts_ns"], 0), 0), "negative timestamps"),
            (pc.and_(pc.equal(kind, "sample"), pc.is_null(events["stack_id"])),
             "CPU samples without a call stack"),
            (pc.and_(pc.equal(kind, "counter"), pc.is_null(events["value"])),
             "counter rows without a value"),
        ]
        keep = pa.array(np.ones(events.num_rows, dtype=bool))
        for mask, reason in checks:
            mask = pc.and_(pc.fill_null(mask, False), keep)
            count = pc.sum(mask).as_py() or 0
            if count:
                result.skipped[reason] += count
            keep = pc.and_(keep, pc.invert(mask))
        # Filtering copies every column: only do it when something is left out.
        return events if pc.all(keep).as_py() else events.filter(keep)

    def _packets(self, events: pa.Table, plan: Any, result: tracekit.WriteResult) -> _Packets:
        kind = events["kind"].cast(pa.string())
        ts = events["ts_ns"].to_numpy()
        dur = events["dur_ns"].fill_null(0).to_numpy()
        track = plan.row_track
        slice_rows = np.flatnonzero(pc.equal(kind, "slice").to_numpy(zero_copy_only=False))
        rows, begins, lanes = nest_slices(track[slice_rows], ts[slice_rows],
                                          ts[slice_rows] + np.maximum(dur[slice_rows], 0))
        rows = slice_rows[rows]
        # One uuid per distinct (track, lane), then spread to the rows.
        pairs, inverse = np.unique(np.stack([track[rows], lanes]), axis=1, return_inverse=True) \
            if len(rows) else (np.zeros((2, 0), dtype=np.int64), np.array([], dtype=np.int64))
        pair_uuid = np.array([plan.lane_uuid(int(t), int(lane)) for t, lane in pairs.T],
                             dtype=np.uint64)
        lane_uuid = pair_uuid[inverse.reshape(-1)]
        instant_rows = np.flatnonzero(pc.equal(kind, "instant").to_numpy(zero_copy_only=False))
        counter_rows = np.flatnonzero(pc.equal(kind, "counter").to_numpy(zero_copy_only=False))
        uuids = np.array(plan.uuids, dtype=np.uint64)
        value = events["value"].fill_null(0).to_numpy()
        parts = [
            (np.where(begins, ts[rows], ts[rows] + np.maximum(dur[rows], 0)),
             np.where(begins, _BEGIN, _END), lane_uuid, rows, begins),
            (ts[instant_rows], np.full(len(instant_rows), _INSTANT), uuids[track[instant_rows]],
             instant_rows, np.ones(len(instant_rows), dtype=bool)),
            (ts[counter_rows], np.full(len(counter_rows), _COUNTER),
             uuids[track[counter_rows]], counter_rows, np.zeros(len(counter_rows), dtype=bool)),
        ]
        cat = [np.concatenate([p[i] for p in parts]) for i in range(5)]
        # Stable: within a track and lane the nesting order above is kept for equal times.
        order = np.argsort(cat[0], kind="stable")
        result.written["slices"] = len(rows) // 2
        result.written["instants"] = len(instant_rows)
        result.written["counter values"] = len(counter_rows)
        row = cat[3][order]
        names = events["name"].combine_chunks().indices.to_numpy(zero_copy_only=False)
        cats = events["category"].combine_chunks().indices.to_numpy(zero_copy_only=False)
        return _Packets(ts=cat[0][order], type=cat[1][order],
                        uuid=cat[2][order].astype(np.uint64), row=row,
                        with_fields=cat[4][order].astype(bool), value=value[row],
                        name_iid=names[row] + 1, cat_iid=cats[row] + 1)


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


def _flow_ids(events: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Per row: a flow id from the launch link (see tracekit.links) and one from ``flow_id``;
    -1 where none."""
    key, linked, _ = launch_links(events)
    corr_flow = np.where(linked, (key >> np.uint64(1)).astype(np.int64), -1)
    src = events["source"].combine_chunks().indices.to_numpy(zero_copy_only=False)
    fid_valid = events["flow_id"].is_valid().to_numpy(zero_copy_only=False)
    fid = events["flow_id"].fill_null(0).to_numpy().astype(np.uint64)
    other = (mix64(src.astype(np.uint64) ^ np.uint64(0x5851F42D4C957F2D)) ^ mix64(fid)) \
        >> np.uint64(1)
    return corr_flow, np.where(fid_valid, other.astype(np.int64), -1)


def _encode_chunk(p: _Packets, lo: int, hi: int, args: Any,
                  flows: tuple[Any, Any], annotations: AnnotationEncoder) -> bytes:
    n = hi - lo
    rows = p.row[lo:hi]
    fields = p.with_fields[lo:hi]
    te = MessageColumns(n)
    te.varint(9, p.type[lo:hi])
    te.varint(11, p.uuid[lo:hi].view(np.int64))
    te.varint(3, p.cat_iid[lo:hi], present=fields)
    te.varint(10, p.name_iid[lo:hi], present=fields)
    is_counter = p.type[lo:hi] == _COUNTER
    te.double(44, p.value[lo:hi], present=is_counter)
    if flows[0] is not None:
        for ids in flows:
            f = ids[rows]
            te.fixed64(47, f.astype(np.uint64), present=fields & (f >= 0))
    prefix = b""
    if args is not None:
        blobs = [b""] * n
        arg_rows = np.flatnonzero(fields)
        texts = args.take(pa.array(rows[arg_rows])).to_pylist()
        for i, text in zip(arg_rows.tolist(), texts, strict=True):
            if text:
                blobs[i] = annotations.encode(text)
        te.raw(Blob.from_list(blobs))
        fresh = annotations.new_names()
        if fresh:
            interned = encode_message(*[(3, encode_message((1, iid), (2, nm)))
                                        for iid, nm in fresh])
            prefix = _packet((8, int(p.ts[lo])), (10, SEQUENCE_ID), (13, _NEEDS_STATE),
                             (12, interned))
    packet = MessageColumns(n)
    packet.varint(8, p.ts[lo:hi])
    packet.message(11, te.encode())
    packet.varint(10, SEQUENCE_ID)
    packet.varint(13, _NEEDS_STATE)
    return prefix + MessageColumns(n).message(1, packet.encode()).encode().tobytes()


@tracekit.hookimpl
def register_writers(register: Any) -> None:
    register(PerfettoWriter)
