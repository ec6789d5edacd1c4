"""The packet loop: TracePackets to column lists, with sequence-scoped interning and clocks.

Each packet is decoded by the protobuf runtime; what the model needs is appended to plain
Python lists (one per column) that become numpy and Arrow columns once, in ``read_build``.
Interned names and categories are turned into codes of one string table when they are
interned, so that an event costs a dictionary lookup, not a string.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet
from tracekit.plugins.perfetto.read_args import (
    COUNTERS,
    INSTANTS,
    SLICES,
    AnnotationReader,
    Interned,
    text,
)
from tracekit.plugins.perfetto.read_tracks import Descriptor, TrackMap
from tracekit.toolkit import SYNTHETIC_ID_MAX

SLICE, INSTANT, COUNTER, SAMPLE = 0, 1, 2, 3
KINDS = ("slice", "instant", "counter", "sample")
_BEGIN, _END, _INSTANT, _COUNTER = 1, 2, 3, 4
_CLEARED, _NEEDS_STATE = 1, 2
_BOOTTIME = 6
_SEQUENCE_CLOCKS = range(64, 128)
_INT64_MAX = 2**63 - 1
# Legacy (Chrome JSON style) phases carried in TrackEvent.legacy_event.
_PHASE_COMPLETE, _PHASE_BEGIN, _PHASE_END = ord("X"), ord("B"), ord("E")
_PHASE_INSTANT = {ord("I"), ord("i"), ord("n"), ord("R")}
_NAN = float("nan")
_UNPACKED_LIMIT = 1 << 30
_V1_FLOW = 0x5F1F_0000_0000_0000  # keeps legacy bind ids apart from flow ids
# TrackEvent fields read from its unknown fields (see schemas/perfetto_subset.proto), with
# the wire encoding of their numbers: "v" varint, "d" fixed64 (flow ids), "f" double.
_FLOW_FIELDS = {47: "d", 36: "v", 48: "d", 42: "v"}
_TERMINATING = {48, 42}  # terminating_flow_ids (and the old field): the id may start anew
_COUNTER_FIELDS = {31: "v", 12: "s", 45: "v", 46: "f"}
_UNREAD_EVENT_FIELDS = {5: "task execution details", 21: "log messages",
                        33: "source locations", 34: "source locations",
                        53: "string correlation ids", 54: "string correlation ids",
                        55: "inline call stacks", 57: "call stack weights"}


@dataclass
class _Clock:
    """A sequence-scoped clock (ids 64..127) defined by a ClockSnapshot on its sequence."""

    ticks: int         # current value in the clock's own ticks
    incremental: bool  # packets carry deltas
    unit_ns: int       # ns per tick
    anchor_ticks: int  # the clock's value at the snapshot
    anchor_ns: int     # a builtin clock's value at the snapshot ...
    base: int          # ... and which builtin clock


class _Sequence:
    """Incremental state of one packet sequence (trusted_packet_sequence_id)."""

    __slots__ = ("annotations", "callstacks", "cats", "clock", "clocks", "epoch", "extra",
                 "extra_double", "frames", "functions", "mappings", "names", "paths", "ref_us",
                 "stack_cache", "thread_track", "track", "valid")

    def __init__(self) -> None:
        self.valid = False
        self.thread_track = 0
        self.ref_us = 0
        self.epoch = 0  # which state the sequence is in: incremental counters restart with it
        self.clear()

    def clear(self) -> None:
        self.names: dict[int, int] = {}
        self.cats: dict[int, int] = {}
        self.annotations = Interned()
        self.functions: dict[int, bytes] = {}
        self.paths: dict[int, bytes] = {}
        self.mappings: dict[int, str] = {}
        self.frames: dict[int, tuple[int, int, int]] = {}
        self.callstacks: dict[int, tuple[int, ...]] = {}
        self.stack_cache: dict[int, int | None] = {}
        self.track = 0
        self.extra: tuple[int, ...] = ()
        self.extra_double: tuple[int, ...] = ()
        self.clock = 0
        self.clocks: dict[int, _Clock] = {}


@dataclass
class _Rare:
    """The rare fields of one TrackEvent."""

    flows: list[int] = field(default_factory=list)
    ends: list[bool] = field(default_factory=list)  # per flow id: does it terminate the flow
    counters: list[tuple[int, list[Any]]] = field(default_factory=list)
    correlation: int | None = None
    callstack: int = 0


def _numbers(wire: int, data: Any, encoding: str) -> list[Any]:
    """The values of one occurrence of a numeric field: a single one, or a packed run."""
    if wire != 2:
        if encoding == "f":
            return [struct.unpack("<d", data.to_bytes(8, "little"))[0]] if wire == 1 else []
        if encoding == "s" and data >= 1 << 63:
            return [data - (1 << 64)]
        return [data]
    out: list[Any] = []
    if encoding in ("d", "f"):
        whole = data[:len(data) // 8 * 8]
        return [v for (v,) in struct.iter_unpack("<Q" if encoding == "d" else "<d", whole)]
    pos = 0
    while pos < len(data):
        value = shift = 0
        while pos < len(data):
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        out.append(value - (1 << 64) if encoding == "s" and value >= 1 << 63 else value)
    return out


class Columns:
    """What the packet loop collected: numbers in typed arrays (no Python int per value, and
    numpy takes them without a copy), the rest in lists."""

    def __init__(self) -> None:
        self.kind = array("b")
        self.ts = array("q")
        self.dur = array("q")     # -1: not known (yet)
        self.track = array("Q")   # track uuid, 0: none
        self.name = array("q")    # string code, -1: the counter track's name
        self.cat = array("q")     # string code, -1: the counter default
        self.value = array("d")   # NaN: none
        self.args: list[str | None] = []
        self.typed: dict[str, tuple[list[int], list[Any]]] = {}
        # Flow ids in file order: the row, the id, whether it terminates the flow, and the
        # time of the event that carries it (a slice end's for ids on the end).
        self.flow_rows: list[int] = []
        self.flow_ids: list[int] = []
        self.flow_ends: list[bool] = []
        self.flow_ts: list[int] = []
        # Counter rows and the state of their sequence (see _Sequence.epoch).
        self.counter_rows = array("q")
        self.counter_epochs = array("q")
        # Slice begins and ends in file order: track, ts, begin?, row (of a begin) or the
        # index of what an end carries (-1: nothing).
        self.se_track = array("Q")
        self.se_ts = array("q")
        self.se_begin = array("b")
        self.se_ref = array("q")
        # What an end event carries: args, typed columns, flow ids, which terminate, its time.
        self.end_extras: list[tuple[str | None, list[tuple[str, Any]], list[int], list[bool],
                                    int]] = []

    def set(self, column: str, row: int, value: Any) -> None:
        rows, values = self.typed.setdefault(column, ([], []))
        rows.append(row)
        values.append(value)

    def flows(self, row: int, ids: list[int], ends: list[bool], ts: int) -> None:
        """Row ``row`` takes part in the flows ``ids`` at ``ts``."""
        self.flow_rows.extend([row] * len(ids))
        self.flow_ids.extend(ids)
        self.flow_ends.extend(ends)
        self.flow_ts.extend([ts] * len(ids))


class PacketReader:
    """Feeds blocks of packets through; keeps columns, tracks, stacks and counts."""

    def __init__(self, trace_cls: Any) -> None:
        self.trace_cls = trace_cls
        self.declared = {f.number for f in trace_cls.DESCRIPTOR.fields_by_name["packet"]
                         .message_type.fields}
        self.cols = Columns()
        self.tracks = TrackMap()
        self.annotations = AnnotationReader()
        self.strings: dict[str, int] = {}
        self.string_list: list[str] = []
        self.sequences: dict[int, _Sequence] = {}
        self.counts: Counter[str] = Counter()   # ReadLog outcome -> packets
        self.warnings: Counter[str] = Counter()  # ReadLog warning -> records
        self.primary_clock = _BOOTTIME
        self.clock_offsets: dict[int, int] = {}  # builtin clock -> ns to add for the primary
        self.frames: dict[tuple[str, str | None], int] = {}
        self.stack_nodes: dict[tuple[int, int], int] = {}  # (parent + 1, frame) -> stack id
        self.stack_rows: list[int] = []
        self.stack_ids: list[int] = []
        self.packets = 0
        self.epochs = 0
        self._permit_cache: dict[tuple[int, frozenset[str]],
                                 tuple[frozenset[str], frozenset[str]]] = {}

    # -- strings ------------------------------------------------------------------------
    def code(self, text: str) -> int:
        """The code of ``text`` in the string table (names and categories share it)."""
        found = self.strings.get(text)
        if found is None:
            found = self.strings[text] = len(self.string_list)
            self.string_list.append(text)
        return found

    # -- packets ------------------------------------------------------------------------
    def feed(self, block: bytes) -> None:
        """Decode a block of whole packets (raises the runtime's DecodeError if damaged)."""
        trace = self.trace_cls.FromString(block)
        for packet in trace.packet:
            self.packet(packet)

    def packet(self, p: Any) -> None:
        """Take one TracePacket."""
        self.packets += 1
        seq_id = p.trusted_packet_sequence_id
        seq = self.sequences.get(seq_id)
        if seq is None:
            seq = self.sequences[seq_id] = _Sequence()
        flags = p.sequence_flags
        if flags & _CLEARED or p.incremental_state_cleared:
            seq.clear()
            seq.valid = True
            self.epochs += 1
            seq.epoch = self.epochs
        if p.HasField("trace_packet_defaults"):
            self._defaults(seq, p.trace_packet_defaults)
        if p.HasField("interned_data"):
            self._intern(seq, p.interned_data)
        kind = p.WhichOneof("data")
        if kind == "track_event":
            if flags & _NEEDS_STATE and not seq.valid:
                self.counts["skipped: events whose sequence lost its interned data (the "
                            "start of a ring buffer)"] += 1
                return
            self._track_event(p, seq)
        elif kind == "track_descriptor":
            self._descriptor(p.track_descriptor)
            self.counts["tracks"] += 1
        elif kind == "perf_sample":
            if flags & _NEEDS_STATE and not seq.valid:
                self.counts["skipped: samples whose sequence lost its interned data"] += 1
                return
            self._sample(p, seq)
        elif kind == "clock_snapshot":
            self._clock_snapshot(seq, p.clock_snapshot)
            self.counts["clock alignment"] += 1
        elif kind == "compressed_packets":
            self._unpack(p.compressed_packets)
        elif kind == "process_tree":
            self._process_tree(p.process_tree)
            self.counts["process and thread names"] += 1
        elif kind == "process_descriptor":
            d = p.process_descriptor
            name = text(d.process_name or (d.cmdline[0] if d.cmdline else ""))
            if name:
                self.tracks.process_names.setdefault(d.pid, name)
            self.counts["process and thread names"] += 1
        elif kind == "thread_descriptor":
            d = p.thread_descriptor
            seq.thread_track = self.tracks.implicit_thread(d.pid, d.tid)
            seq.ref_us = d.reference_timestamp_us
            if d.thread_name:
                self.tracks.thread_names.setdefault((d.pid, d.tid), text(d.thread_name))
            self.counts["process and thread names"] += 1
        elif kind is not None:
            self.counts[f"skipped: {kind} packets (not read)"] += 1
        elif p.HasField("interned_data") or p.HasField("trace_packet_defaults"):
            self.counts["interned strings and defaults"] += 1
        else:
            number = _unknown_field(p)
            if number is None:
                outcome = "skipped: empty packets"
            elif number in self.declared:  # a known field of the wrong wire type
                outcome = f"skipped: damaged packets (field {number} of the wrong type)"
            else:
                outcome = f"skipped: TracePacket field {number} (not read)"
            self.counts[outcome] += 1

    def _unpack(self, data: bytes) -> None:
        """Packets compressed into one (zlib), read as if they stood here."""
        inflate = zlib.decompressobj()
        try:
            body = inflate.decompress(data, _UNPACKED_LIMIT)
            if inflate.unconsumed_tail:
                self.counts["skipped: compressed packets that unpack to more than 1 GiB"] += 1
                return
            packets = self.trace_cls.FromString(body).packet
        except (zlib.error, DecodeError):
            self.counts["skipped: compressed packets that do not unpack"] += 1
            return
        self.counts["unpacked (their packets are counted one by one)"] += 1
        for packet in packets:
            self.packet(packet)

    def _defaults(self, seq: _Sequence, d: Any) -> None:
        seq.clock = d.timestamp_clock_id
        if d.HasField("track_event_defaults"):
            ted = d.track_event_defaults
            seq.track = ted.track_uuid
            seq.extra = tuple(ted.extra_counter_track_uuids)
            seq.extra_double = tuple(ted.extra_double_counter_track_uuids)

    def _intern(self, seq: _Sequence, d: Any) -> None:
        code = self.code
        for e in d.event_names:
            seq.names[e.iid] = code(text(e.name))
        for e in d.event_categories:
            seq.cats[e.iid] = code(text(e.name))
        for e in d.debug_annotation_names:
            seq.annotations.names[e.iid] = text(e.name)
        for e in d.debug_annotation_string_values:
            seq.annotations.strings[e.iid] = e.str
        for e in d.function_names:
            seq.functions[e.iid] = e.str
        for e in d.mapping_paths:
            seq.paths[e.iid] = e.str
        for e in d.mappings:
            seq.mappings[e.iid] = "/".join(seq.paths.get(i, b"?").decode("utf-8", "replace")
                                           for i in e.path_string_ids)
        for e in d.frames:
            seq.frames[e.iid] = (e.function_name_id, e.mapping_id, e.rel_pc)
        for e in d.callstacks:
            seq.callstacks[e.iid] = tuple(e.frame_ids)

    # -- time ---------------------------------------------------------------------------
    def _timestamp(self, p: Any, seq: _Sequence) -> int:
        raw = p.timestamp
        clock = p.timestamp_clock_id or seq.clock
        if not clock or clock == self.primary_clock:
            return raw
        if clock in _SEQUENCE_CLOCKS:
            c = seq.clocks.get(clock)
            if c is None:
                self.warnings["warning: timestamps on a sequence clock that no clock "
                              "snapshot defines: kept as they are"] += 1
                return raw
            c.ticks = c.ticks + raw if c.incremental else raw
            ns = c.anchor_ns + (c.ticks - c.anchor_ticks) * c.unit_ns
            return ns + (self.clock_offsets.get(c.base, 0) if c.base != self.primary_clock
                         else 0)
        offset = self.clock_offsets.get(clock)
        if offset is None:
            self.warnings[f"warning: timestamps on clock {clock}, which no clock snapshot "
                          "relates to the trace clock: kept as they are"] += 1
            return raw
        return raw + offset

    def _clock_snapshot(self, seq: _Sequence, snap: Any) -> None:
        if snap.HasField("primary_trace_clock") and not self.clock_offsets:
            self.primary_clock = snap.primary_trace_clock
        values = {c.clock_id: c for c in snap.clocks}
        primary = values.get(self.primary_clock)
        builtin = [c for c in snap.clocks if c.clock_id < 64]
        for c in builtin:
            if primary is not None and c.clock_id != self.primary_clock:
                self.clock_offsets[c.clock_id] = primary.timestamp - c.timestamp
        for c in snap.clocks:
            if c.clock_id in _SEQUENCE_CLOCKS and builtin:
                base = primary if primary is not None else builtin[0]
                unit = c.unit_multiplier_ns or 1
                seq.clocks[c.clock_id] = _Clock(c.timestamp, c.is_incremental, unit,
                                                c.timestamp, base.timestamp, base.clock_id)

    # -- track events -------------------------------------------------------------------
    def _track_event(self, p: Any, seq: _Sequence) -> None:
        te = p.track_event
        ts = self._timestamp(p, seq)
        if not ts and not p.HasField("timestamp"):
            ts = self._legacy_timestamp(te, seq)
        if ts > _INT64_MAX:
            self.counts["skipped: events with a timestamp past the int64 ns range"] += 1
            return
        typ = te.type
        track = te.track_uuid or seq.track or seq.thread_track
        unknown = UnknownFieldSet(te)
        rare = self._rare(unknown) if len(unknown) else None
        cols = self.cols
        if typ == _END:
            self.counts["slice ends (joined to their begins)"] += 1
            anns = te.debug_annotations
            extra = -1
            if anns or (rare is not None and rare.flows):
                args, typed = self.annotations.read(anns, seq.annotations,
                                                    *self._permits(track, SLICES)) \
                    if anns else (None, [])
                extra = len(cols.end_extras)
                cols.end_extras.append((args, typed, rare.flows if rare else [],
                                        rare.ends if rare else [], ts))
            cols.se_track.append(track)
            cols.se_ts.append(ts)
            cols.se_begin.append(False)
            cols.se_ref.append(extra)
        elif typ == _COUNTER:
            self._counter(te, ts, track, seq)
        elif typ in (_BEGIN, _INSTANT):
            row = len(cols.kind)
            self._row(te, seq, SLICE if typ == _BEGIN else INSTANT, ts, track, row, rare)
            if typ == _BEGIN:
                cols.se_track.append(track)
                cols.se_ts.append(ts)
                cols.se_begin.append(True)
                cols.se_ref.append(row)
        elif typ == 0 and te.HasField("legacy_event"):
            self._legacy(te, ts, track, seq, rare)
        else:
            self.counts[f"skipped: track events of type {typ} (not read)"] += 1
            return
        if rare is not None and rare.counters:
            self._extra_counters(rare, ts, seq)

    def _rare(self, unknown: Any) -> _Rare:
        """The fields of a TrackEvent that only some events carry (see the .proto)."""
        rare = _Rare()
        for f in unknown:
            number, data = f.field_number, f.data
            if number in _FLOW_FIELDS:
                ids = _numbers(f.wire_type, data, _FLOW_FIELDS[number])
                rare.flows.extend(ids)
                rare.ends.extend([number in _TERMINATING] * len(ids))
            elif number in _COUNTER_FIELDS:
                rare.counters.append((number, _numbers(f.wire_type, data,
                                                       _COUNTER_FIELDS[number])))
            elif number == 52 and f.wire_type == 0:
                rare.correlation = data
            elif number == 56 and f.wire_type == 0:
                rare.callstack = data
            else:
                what = _UNREAD_EVENT_FIELDS.get(number, f"field {number}")
                self.warnings[f"warning: track events with {what} (not read)"] += 1
        return rare

    def _row(self, te: Any, seq: _Sequence, kind: int, ts: int, track: int, row: int,
             rare: _Rare | None, name_iid: int = 0, dur: int = -1) -> None:
        """Append a slice or instant row."""
        cols = self.cols
        iid = name_iid or te.name_iid
        if iid:
            name = seq.names.get(iid)
            if name is None:
                self.warnings["warning: events whose interned name is not defined on their "
                              "sequence (named '(unknown name iid N)')"] += 1
                name = self.code(f"(unknown name iid {iid})")
        else:
            name = self.code(text(te.name))
        cols.kind.append(kind)
        cols.ts.append(ts)
        cols.dur.append(dur)
        cols.track.append(track)
        cols.name.append(name)
        cols.cat.append(self._category(te, seq))
        cols.value.append(_NAN)
        anns = te.debug_annotations
        if anns:
            args, typed = self.annotations.read(
                anns, seq.annotations, *self._permits(track, SLICES if kind == SLICE
                                                      else INSTANTS))
            for column, value in typed:
                cols.set(column, row, value)
            cols.args.append(args)
        else:
            cols.args.append(None)
        if rare is not None:
            if rare.flows:
                cols.flows(row, rare.flows, rare.ends, ts)
            if rare.correlation is not None and rare.correlation <= _INT64_MAX:
                cols.set("correlation", row, rare.correlation)
            if rare.callstack:
                stack = self._stack(seq, rare.callstack)
                if stack is not None:
                    self.stack_rows.append(row)
                    self.stack_ids.append(stack)
        self.counts["events"] += 1

    def _permits(self, track: int, base: frozenset[str],
                 ) -> tuple[frozenset[str], frozenset[str]]:
        """Which typed columns annotations of rows on ``track`` fill (``base``: those of the
        row's kind, read_args.SLICES, INSTANTS or COUNTERS), and which synthetic ids they
        name that the track already stands for (see read_args.AnnotationReader.read).

        Identity columns come from the track wherever it tells them as they are: an
        annotation fills pid or tid only where the track has none (device rows), stream
        only on a device track that names no stream."""
        key = (track, base)
        found = self._permit_cache.get(key)
        if found is not None:
            return found
        ident = self.tracks.peek(track) if track else None
        if ident is None:  # no track, or one not (fully) described yet
            return base | {"pid", "tid"}, frozenset()
        extra, renumbered = set(), set()
        for column in ("pid", "tid"):
            value = getattr(ident, column)
            if value is None:
                extra.add(column)
            elif value <= SYNTHETIC_ID_MAX:
                renumbered.add(column)
        if ident.device is not None and ident.stream is None:
            extra.add("stream")
        found = self._permit_cache[key] = (base | extra, frozenset(renumbered))
        return found

    def _category(self, te: Any, seq: _Sequence) -> int:
        iids = te.category_iids
        if iids:
            if len(iids) == 1:
                found = seq.cats.get(iids[0])
                if found is not None:
                    return found
            names = []
            for iid in iids:
                code = seq.cats.get(iid)
                if code is None:
                    self.warnings["warning: events whose interned category is not defined "
                                  "on their sequence"] += 1
                    names.append(f"(unknown category iid {iid})")
                else:
                    names.append(self.string_list[code])
            return self.code(",".join(names))
        cats = te.categories
        return self.code(",".join(map(text, cats))) if cats else self.code("")

    def _counter(self, te: Any, ts: int, track: int, seq: _Sequence) -> None:
        which = te.WhichOneof("counter_value_field")
        if which is None:
            self.counts["skipped: counter events without a value"] += 1
            return
        category = self._category(te, seq) if te.category_iids or te.categories else -1
        row = len(self.cols.kind)
        self._counter_row(ts, track, float(getattr(te, which)), seq.epoch, category)
        anns = te.debug_annotations
        if anns:  # tracekit writes a counter's args and typed columns as its annotations
            args, typed = self.annotations.read(anns, seq.annotations,
                                                *self._permits(track, COUNTERS))
            self.cols.args[row] = args
            for column, value in typed:
                self.cols.set(column, row, value)

    def _counter_row(self, ts: int, track: int, value: float, epoch: int,
                     category: int = -1) -> None:
        cols = self.cols
        cols.counter_rows.append(len(cols.kind))
        cols.counter_epochs.append(epoch)
        cols.kind.append(COUNTER)
        cols.ts.append(ts)
        cols.dur.append(-1)
        cols.track.append(track)
        cols.name.append(-1)
        cols.cat.append(category)
        cols.args.append(None)
        cols.value.append(value)
        self.counts["events"] += 1

    def _extra_counters(self, rare: _Rare, ts: int, seq: _Sequence) -> None:
        """Counter values an event carries for other counter tracks."""
        fields = dict(rare.counters)
        for uuids_field, values_field, defaults in ((31, 12, seq.extra),
                                                    (45, 46, seq.extra_double)):
            values = fields.get(values_field)
            if values:
                uuids = fields.get(uuids_field) or defaults
                for uuid, v in zip(uuids, values, strict=False):
                    self._counter_row(ts, uuid, float(v), seq.epoch)
                if len(uuids) < len(values):
                    self.warnings["warning: extra counter values without a counter track"] \
                        += len(values) - len(uuids)

    def _legacy_timestamp(self, te: Any, seq: _Sequence) -> int:
        which = te.WhichOneof("timestamp")
        if which == "timestamp_absolute_us":
            return te.timestamp_absolute_us * 1000
        if which == "timestamp_delta_us":
            seq.ref_us += te.timestamp_delta_us
            return seq.ref_us * 1000
        return 0

    def _legacy(self, te: Any, ts: int, track: int, seq: _Sequence, rare: _Rare | None,
                ) -> None:
        """A TrackEvent of no type carrying a Chrome-JSON style legacy event."""
        le = te.legacy_event
        phase = le.phase
        cols = self.cols
        row = len(cols.kind)
        if phase == _PHASE_COMPLETE:
            self._row(te, seq, SLICE, ts, track, row, rare, le.name_iid, le.duration_us * 1000)
        elif phase == _PHASE_BEGIN:
            self._row(te, seq, SLICE, ts, track, row, rare, le.name_iid)
            cols.se_track.append(track)
            cols.se_ts.append(ts)
            cols.se_begin.append(True)
            cols.se_ref.append(row)
        elif phase == _PHASE_END:
            cols.se_track.append(track)
            cols.se_ts.append(ts)
            cols.se_begin.append(False)
            cols.se_ref.append(-1)
            self.counts["slice ends (joined to their begins)"] += 1
            return
        elif phase in _PHASE_INSTANT:
            self._row(te, seq, INSTANT, ts, track, row, rare, le.name_iid)
        else:
            shown = chr(phase) if 32 < phase < 127 else str(phase)
            self.counts[f"skipped: legacy events of phase '{shown}' (not read)"] += 1
            return
        if le.bind_id:
            cols.flows(row, [le.bind_id ^ _V1_FLOW], [False], ts)
        if le.HasField("pid_override"):
            cols.set("pid", row, le.pid_override)
        if le.HasField("tid_override"):
            cols.set("tid", row, le.tid_override)

    # -- samples and stacks ---------------------------------------------------------------
    def _sample(self, p: Any, seq: _Sequence) -> None:
        s = p.perf_sample
        if s.HasField("sample_skipped_reason"):
            self.counts["skipped: samples the profiler recorded without a stack"] += 1
            return
        ts = self._timestamp(p, seq)
        if ts > _INT64_MAX:
            self.counts["skipped: events with a timestamp past the int64 ns range"] += 1
            return
        cols = self.cols
        row = len(cols.kind)
        cols.kind.append(SAMPLE)
        cols.ts.append(ts)
        cols.dur.append(-1)
        cols.track.append(0)
        cols.name.append(-1)
        cols.cat.append(self.code("cpu.sample"))
        cols.args.append(None)
        cols.value.append(_NAN)
        cols.set("pid", row, s.pid)
        cols.set("tid", row, s.tid)
        stack = self._stack(seq, s.callstack_iid) if s.callstack_iid else None
        if stack is None:
            self.warnings["warning: samples without a known call stack"] += 1
        else:
            self.stack_rows.append(row)
            self.stack_ids.append(stack)
        self.counts["events"] += 1

    def _stack(self, seq: _Sequence, iid: int) -> int | None:
        """The stack id (leaf node of the model's stack tree) of interned callstack ``iid``."""
        if iid in seq.stack_cache:
            return seq.stack_cache[iid]
        frames = seq.callstacks.get(iid)
        stack = None
        if frames is None:
            self.warnings["warning: call stacks not interned on their sequence"] += 1
        else:
            for frame_iid in frames:  # root first
                fn, mapping, rel_pc = seq.frames.get(frame_iid, (0, 0, 0))
                name = seq.functions.get(fn)
                text = name.decode("utf-8", "replace") if name is not None \
                    else f"0x{rel_pc:x}"
                module = seq.mappings.get(mapping) if mapping else None
                frame = self.frames.setdefault((text, module), len(self.frames))
                key = (stack + 1 if stack is not None else 0, frame)
                node = self.stack_nodes.get(key)
                if node is None:
                    node = self.stack_nodes[key] = len(self.stack_nodes)
                stack = node
        seq.stack_cache[iid] = stack
        return stack

    # -- descriptors ----------------------------------------------------------------------
    def _descriptor(self, d: Any) -> None:
        which = d.WhichOneof("static_or_dynamic_name")
        desc = Descriptor(uuid=d.uuid, parent=d.parent_uuid,
                          name=text(getattr(d, which)) if which else None,
                          description=text(d.description) if d.HasField("description")
                          else None)
        if d.HasField("thread"):
            t = d.thread
            desc.is_thread, desc.pid, desc.tid = True, t.pid, t.tid
            desc.name = desc.name or text(t.thread_name) or None
        elif d.HasField("process"):
            pr = d.process
            desc.is_process, desc.pid = True, pr.pid
            desc.name = desc.name or text(pr.process_name or (pr.cmdline[0] if pr.cmdline
                                                              else "")) or None
        if d.HasField("counter"):
            c = d.counter
            desc.is_counter = True
            desc.counter_categories = tuple(map(text, c.categories))
            desc.unit_multiplier = c.unit_multiplier or 1
            desc.incremental = c.is_incremental
        self.tracks.add(desc)

    def _process_tree(self, tree: Any) -> None:
        for pr in tree.processes:
            if pr.cmdline:
                self.tracks.process_names.setdefault(pr.pid, text(pr.cmdline[0]))
        for t in tree.threads:
            if t.name:
                self.tracks.thread_names.setdefault((t.tgid, t.tid), text(t.name))


def _unknown_field(p: Any) -> int | None:
    """The number of the first field of ``p`` that the reader does not declare."""
    for f in UnknownFieldSet(p):
        return int(f.field_number)
    return None
