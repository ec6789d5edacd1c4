"""Decoding a Perfetto trace for ``PerfettoReader``: imported on the first Perfetto input, since
the protobuf runtime and Perfetto's schema take about 20 ms to load, which every other command
would pay."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from google.protobuf.message import DecodeError
from tracekit import Source, TraceBuilder, TraceReadError
from tracekit.plugins.perfetto.read_build import build
from tracekit.plugins.perfetto.read_framing import (
    FramingError,
    Tail,
    packet_blocks,
    read_varint,
    split_packets,
)
from tracekit.plugins.perfetto.read_packets import PacketReader
from tracekit.schemas import perfetto_subset_pb2 as pb
from tracekit.toolkit import read_errors

_MAX_PACKET = 256 << 20  # far above what producers write: a longer packet means not a trace
_PACKET_FIELDS = {f.number: 2 if f.type in (f.TYPE_MESSAGE, f.TYPE_BYTES, f.TYPE_STRING)
                  else 1 if f.type in (f.TYPE_DOUBLE, f.TYPE_FIXED64) else 0
                  for f in pb.TracePacket.DESCRIPTOR.fields}


def read_trace(source: Source, out: TraceBuilder, name: str) -> None:
    """Read the Perfetto trace ``source`` into ``out`` (``name``: the reader's, for errors)."""
    progress = getattr(out, "progress", None)
    if progress is not None:
        progress.phase(f"reading {source.name}")
    reader = PacketReader(pb.Trace)
    tail = Tail()
    damaged = _Damage()
    try:
        with read_errors(source.path, name), source.open() as stream:
            for offset, block in packet_blocks(stream, tail, _ticker(stream, source,
                                                                     progress)):
                _feed(reader, block, offset, damaged)
    except FramingError as exc:
        if not reader.packets:
            raise TraceReadError(f"not a Perfetto trace: {exc.reason} at byte "
                                 f"{exc.offset}", path=source.path, reader=name) \
                from None
        out.note("packets", f"skipped: everything from byte {exc.offset} on, which is "
                 f"not Perfetto packets ({exc.reason})")
    if tail.truncated and not reader.packets:
        raise TraceReadError(f"the file ends inside its first packet ({tail.truncated} "
                             "bytes of it)", path=source.path, reader=name)
    if not reader.packets:
        problem = f"no packet decodes ({damaged.first})" if damaged.count \
            else "no Perfetto packets in the file"
        raise TraceReadError(problem, path=source.path, reader=name)
    if progress is not None:
        progress.phase(f"building events of {source.name}")
    build(reader, out)
    _account(reader, tail, damaged, out)
    # The producer (tracekit, rocprofv3, an SDK user) is not named in the trace.
    out.metadata.update({"format": "Perfetto protobuf trace",
                         "clock": _clock_name(reader.primary_clock)})


class _Damage:
    """Packets the protobuf runtime could not decode."""

    def __init__(self) -> None:
        self.count = 0
        self.first = ""


def _feed(reader: PacketReader, block: bytes, offset: int, damaged: _Damage) -> None:
    """Decode a block; when it does not decode, find the damaged packets one by one."""
    try:
        reader.feed(block)
        return
    except DecodeError:
        pass
    for start, end in split_packets(block):
        try:
            packet = pb.TracePacket.FromString(block[start:end])
        except DecodeError as exc:
            damaged.count += 1
            if not damaged.first:
                damaged.first = f"packet at byte {offset + start}: {exc}"
            continue
        reader.packet(packet)


def _ticker(stream: Any, source: Source, progress: Any) -> Callable[[], None] | None:
    """Progress in file bytes (the compressed offset under gzip), None when not shown."""
    if progress is None or not source.size:
        return None
    position = getattr(stream, "fileobj", None) or stream

    def tick() -> None:
        with contextlib.suppress(OSError, ValueError):
            progress.update(position.tell(), source.size)
    return tick


def _account(reader: PacketReader, tail: Tail, damaged: _Damage, out: TraceBuilder) -> None:
    for outcome, count in sorted(reader.counts.items()):
        out.note("packets", outcome, count)
    for warning, count in sorted(reader.warnings.items()):
        out.note("events", warning, count)
    a = reader.annotations
    out.note("debug annotations", "warning: names not interned on their sequence (named "
             "'(unknown name iid N)')", a.unknown_names)
    out.note("debug annotations", "warning: interned string values not defined on their "
             "sequence", a.unknown_strings)
    out.note("debug annotations", "warning: protobuf-typed values (kept as a placeholder "
             "naming the type)", a.proto_values)
    out.note("track descriptors", "warning: a uuid described twice differently (the first "
             "description kept)", reader.tracks.conflicting)
    out.note("track descriptors", "warning: overlap lanes whose track is one of several of "
             "the same name (the first taken)", reader.tracks.ambiguous_lanes)
    out.note("debug annotations", "warning: damaged annotations (kept as hex)",
             a.damaged)
    out.note("debug annotations", "synthetic ids the track stands for (ids renumbered, the "
             "names kept)", a.renumbered)
    out.note("packets", "skipped: damaged packets that do not decode (first: "
             f"{damaged.first})", damaged.count)
    out.note("packets", f"skipped: the last packet, cut off at byte {tail.offset} (a "
             "truncated file)", 1 if tail.truncated else 0)
    out.note("top-level fields", "skipped: fields of the Trace message other than packets",
             tail.skipped_fields)


def _clock_name(clock: int) -> str:
    names = {1: "REALTIME", 2: "REALTIME_COARSE", 3: "MONOTONIC", 4: "MONOTONIC_COARSE",
             5: "MONOTONIC_RAW", 6: "BOOTTIME"}
    return f"Perfetto trace clock: {names.get(clock, f'clock {clock}')}, ns"


def looks_like_packets(head: bytes) -> bool:
    """Whether ``head`` starts with TracePackets: the first few parse, and one of them has a
    field the reader knows (or, for a first packet longer than the head, its first fields
    are TracePacket fields with the right wire types)."""
    if len(head) < 2 or head[0] != 0x0A:
        return False
    pos, seen, known = 0, 0, False
    while pos < len(head) and seen < 4:
        if head[pos] != 0x0A:
            break
        length = _varint(head, pos + 1)
        if length is None:
            break
        size, start = length
        if size > _MAX_PACKET:
            return False
        end = start + size
        if end > len(head):
            if not seen:
                return _fields_look_right(head[start:])
            break
        try:
            packet = pb.TracePacket.FromString(head[start:end])
        except DecodeError:
            return False
        known = known or bool(packet.ListFields())
        seen += 1
        pos = end
    return known


def _fields_look_right(body: bytes) -> bool:
    """The start of a packet body: known TracePacket fields with the right wire types."""
    pos, known = 0, 0
    while pos < len(body):
        tag = _varint(body, pos)
        if tag is None:
            break
        value, pos = tag
        number, wire = value >> 3, value & 7
        expected = _PACKET_FIELDS.get(number)
        if number == 0 or wire not in (0, 1, 2, 5) or (expected is not None
                                                       and expected != wire):
            return False
        known += expected is not None
        if wire == 0:
            skip = _varint(body, pos)
            if skip is None:
                break
            pos = skip[1]
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            size = _varint(body, pos)
            if size is None:
                break
            pos = size[1] + size[0]
    return known > 0


def _varint(buf: bytes, pos: int) -> tuple[int, int] | None:
    """(value, next position), or None where the head ends inside it or it is too long."""
    try:
        return read_varint(buf, pos, len(buf))
    except ValueError:
        return None
