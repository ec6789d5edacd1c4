"""Decode a Perfetto trace with the ``perfetto`` package's protos and check the TrackEvent rules
of docs/peers.md section (d): tracks declared before use, balanced and strictly nested slices
per track, interned ids defined on their sequence before use, and sequence flags set.

Flow arrows are derived as trace processor derives them (src/trace_processor/importers/common/
flow_tracker.cc and the TrackEvent parser): in timestamp order, a ``flow_ids`` entry not yet
active begins a flow at its event, one already active draws an arrow from the flow's last event
and moves the flow on (a chain); a ``terminating_flow_ids`` entry draws the arrow and ends it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

BEGIN, END, INSTANT, COUNTER = 1, 2, 3, 4


@dataclass(eq=False)
class Slice:
    track: int
    name: str
    category: str
    start: int
    end: int | None
    flows: list[int]
    args: dict[str, object]
    terminating: list[int] = field(default_factory=list)


@dataclass
class Decoded:
    """What a checked trace holds."""

    tracks: dict[int, pb.TrackDescriptor] = field(default_factory=dict)
    slices: list[Slice] = field(default_factory=list)
    instants: list[tuple[int, str, int]] = field(default_factory=list)
    samples: list[tuple[int, int, int, list[str]]] = field(default_factory=list)
    counters: list[tuple[int, int, float]] = field(default_factory=list)
    arrows: list[tuple[Slice, Slice]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def track_path(self, uuid: int) -> list[pb.TrackDescriptor]:
        """The descriptor of a track and its ancestors, innermost first."""
        out = []
        while uuid in self.tracks:
            out.append(self.tracks[uuid])
            uuid = self.tracks[uuid].parent_uuid
        return out

    def flow_links(self) -> int:
        """Number of flow arrows trace processor draws."""
        return len(self.arrows)


def _annotation_value(a: pb.DebugAnnotation) -> object:
    kind = a.WhichOneof("value")
    if kind is None:
        if a.dict_entries:
            return {e.name: _annotation_value(e) for e in a.dict_entries}
        if a.array_values:
            return [_annotation_value(e) for e in a.array_values]
        return None
    return getattr(a, kind)


def decode_and_check(path: str | Path) -> Decoded:
    """Parse ``path`` and return its content with every rule violation listed."""
    trace = pb.Trace()
    trace.ParseFromString(Path(path).read_bytes())
    out = Decoded()
    v = out.violations
    names: dict[int, dict[int, str]] = defaultdict(dict)
    cats: dict[int, dict[int, str]] = defaultdict(dict)
    ann_names: dict[int, dict[int, str]] = defaultdict(dict)
    cleared: set[int] = set()
    events = []
    functions: dict[int, dict[int, str]] = defaultdict(dict)
    frames: dict[int, dict[int, int]] = defaultdict(dict)
    callstacks: dict[int, dict[int, list[int]]] = defaultdict(dict)
    for i, p in enumerate(trace.packet):
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            cleared.add(seq)
            names[seq].clear()
            cats[seq].clear()
            ann_names[seq].clear()
        if p.HasField("interned_data"):
            if seq not in cleared:
                v.append(f"packet {i}: interned data before the sequence state was cleared")
            for e in p.interned_data.event_names:
                if e.iid == 0:
                    v.append(f"packet {i}: interned iid 0")
                names[seq][e.iid] = e.name
            for e in p.interned_data.event_categories:
                cats[seq][e.iid] = e.name
            for e in p.interned_data.debug_annotation_names:
                ann_names[seq][e.iid] = e.name
            for e in p.interned_data.function_names:
                functions[seq][e.iid] = e.str.decode()
            for e in p.interned_data.frames:
                if e.function_name_id not in functions[seq]:
                    v.append(f"packet {i}: frame {e.iid} names an undefined function")
                frames[seq][e.iid] = e.function_name_id
            for e in p.interned_data.callstacks:
                if any(f not in frames[seq] for f in e.frame_ids):
                    v.append(f"packet {i}: callstack {e.iid} uses an undefined frame")
                callstacks[seq][e.iid] = list(e.frame_ids)
        if p.HasField("perf_sample"):
            s = p.perf_sample
            if not p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE:
                v.append(f"packet {i}: sample uses interned data without the flag")
            if s.callstack_iid not in callstacks[seq]:
                v.append(f"packet {i}: callstack iid {s.callstack_iid} not interned")
            stack = [functions[seq].get(frames[seq].get(f), "?")
                     for f in callstacks[seq].get(s.callstack_iid, [])]
            out.samples.append((p.timestamp, s.pid, s.tid, stack))
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.uuid == 0:
                v.append(f"packet {i}: track uuid 0")
            if d.uuid in out.tracks and out.tracks[d.uuid] != d:
                v.append(f"packet {i}: track {d.uuid} declared twice differently")
            if d.parent_uuid and d.parent_uuid not in out.tracks:
                v.append(f"packet {i}: track {d.uuid} has an undeclared parent")
            out.tracks[d.uuid] = d
        if p.HasField("track_event"):
            te = p.track_event
            if not p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE:
                v.append(f"packet {i}: uses interned data without SEQ_NEEDS_INCREMENTAL_STATE")
            if seq not in cleared:
                v.append(f"packet {i}: event before the sequence state was cleared")
            if te.track_uuid not in out.tracks:
                v.append(f"packet {i}: event on undeclared track {te.track_uuid}")
            name = ""
            if te.name_iid:
                if te.name_iid not in names[seq]:
                    v.append(f"packet {i}: name iid {te.name_iid} not interned")
                name = names[seq].get(te.name_iid, "")
            cat = ",".join(cats[seq].get(c, "?") for c in te.category_iids)
            if any(c not in cats[seq] for c in te.category_iids):
                v.append(f"packet {i}: category iid not interned")
            args = {}
            for a in te.debug_annotations:
                if a.name_iid and a.name_iid not in ann_names[seq]:
                    v.append(f"packet {i}: debug annotation name iid {a.name_iid} not interned")
                args[ann_names[seq].get(a.name_iid, a.name)] = _annotation_value(a)
            if set(te.flow_ids) & set(te.terminating_flow_ids):
                v.append(f"packet {i}: a flow id in both flow_ids and terminating_flow_ids")
            events.append((p.timestamp, i, te.type, te.track_uuid, name, cat,
                           list(te.flow_ids), args, te.double_counter_value,
                           list(te.terminating_flow_ids)))
    # Replay per track in timestamp order (the order trace processor sorts into).
    events.sort(key=lambda e: (e[0], e[1]))
    stacks: dict[int, list[Slice]] = defaultdict(list)
    active: dict[int, Slice] = {}
    for ts, i, typ, track, name, cat, flows, args, value, terminating in events:
        if typ in (BEGIN, INSTANT):
            s = Slice(track, name, cat, ts, ts if typ == INSTANT else None, flows, args,
                      terminating)
            for f in flows:
                if f in active:
                    out.arrows.append((active[f], s))
                active[f] = s
            for f in terminating:
                if f in active:
                    out.arrows.append((active.pop(f), s))
        if typ == BEGIN:
            if track in out.tracks and out.tracks[track].HasField("counter"):
                v.append(f"packet {i}: slice on a counter track")
            stacks[track].append(s)
        elif typ == END:
            if not stacks[track]:
                v.append(f"packet {i}: END without an open slice on track {track}")
                continue
            s = stacks[track].pop()
            s.end = ts
            out.slices.append(s)
        elif typ == INSTANT:
            out.instants.append((track, name, ts))
        elif typ == COUNTER:
            out.counters.append((track, ts, value))
    for track, stack in stacks.items():
        if stack:
            v.append(f"track {track}: {len(stack)} slices never ended")
    _check_nesting(out)
    return out


def _check_nesting(out: Decoded) -> None:
    by_track: dict[int, list[Slice]] = defaultdict(list)
    for s in out.slices:
        by_track[s.track].append(s)
    for track, slices in by_track.items():
        slices.sort(key=lambda s: (s.start, -(s.end - s.start)))
        open_ends: list[int] = []
        for s in slices:
            while open_ends and open_ends[-1] <= s.start:
                open_ends.pop()
            if open_ends and s.end > open_ends[-1]:
                out.violations.append(f"track {track}: slice '{s.name}' [{s.start}, {s.end}] "
                                      f"overlaps its parent, which ends at {open_ends[-1]}")
            open_ends.append(s.end)
