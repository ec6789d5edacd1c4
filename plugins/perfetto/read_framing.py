"""Split a Perfetto trace byte stream into blocks of whole ``Trace.packet`` fields.

A trace file is a ``Trace`` message: a run of field-1 (``packet``) length-delimited records,
written as a stream (concatenated traces are a valid trace). Blocks of whole packets can be
parsed by the protobuf runtime at once, so the file never has to be in memory whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO

_READ = 8 << 20  # bytes read at a time
_PACKET_TAG = 0x0A  # field 1, length-delimited


class FramingError(Exception):
    """The bytes at ``offset`` are not a Trace packet (``reason`` says why)."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


@dataclass
class Tail:
    """How the stream ended: ``truncated`` bytes of an incomplete last packet at ``offset``."""

    offset: int = 0
    truncated: int = 0
    skipped_fields: int = 0  # top-level fields other than packets (skipped)


def read_varint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int] | None:
    """(value, next position), or None when the varint runs past ``end``."""
    value = shift = 0
    while pos < end:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")
    return None


def packet_blocks(stream: IO[bytes], tail: Tail,
                  progress: Callable[[], None] | None = None) -> Iterator[tuple[int, bytes]]:
    """Yield (offset of the block in the stream, bytes of whole packet fields).

    Raises FramingError where the bytes stop being packets; ``tail`` records an incomplete
    last packet (a truncated file) instead of raising.
    """
    buf = b""
    base = 0  # stream offset of buf[0]
    eof = False
    while not eof:
        chunk = stream.read(_READ)
        eof = not chunk
        buf = buf + chunk if buf else chunk
        if progress is not None:
            progress()
        pos, n = 0, len(buf)
        error = None
        while pos < n:
            start = pos
            try:
                field, wire, pos = _field_end(buf, pos, n)
            except FramingError as exc:
                error = FramingError(base + exc.offset, exc.reason)
                pos = start
                break
            if pos < 0 or pos > n:  # the rest of this field is not read yet
                pos = start
                break
            if field != 1 or wire != 2:
                tail.skipped_fields += 1
                # Not a packet: emit what precedes it, then drop it.
                if start:
                    yield base, buf[:start]
                buf, base, n, pos = buf[pos:], base + pos, n - pos, 0
        if pos:
            yield base, buf[:pos]
            buf, base = buf[pos:], base + pos
        if error is not None:
            raise error
    if buf:
        tail.offset, tail.truncated = base, len(buf)


def _field_end(buf: bytes, pos: int, n: int) -> tuple[int, int, int]:
    """(field number, wire type, end) of the field at ``pos``; end -1 when it runs past ``n``.

    Raises FramingError (with ``pos``-relative offset) for bytes that are not a field."""
    try:
        head = read_varint(buf, pos, n)
    except ValueError:
        raise FramingError(pos, "a field tag longer than 10 bytes") from None
    if head is None:
        return 0, 0, -1
    tag, at = head
    field, wire = tag >> 3, tag & 7
    if field == 0 or wire in (3, 4, 6, 7):
        raise FramingError(pos, f"not a packet (field {field}, wire type {wire})")
    if wire in (1, 5):
        return field, wire, at + (8 if wire == 1 else 4)
    try:
        value = read_varint(buf, at, n)
    except ValueError:
        raise FramingError(at, "a varint longer than 10 bytes") from None
    if value is None:
        return field, wire, -1
    return field, wire, value[1] + (value[0] if wire == 2 else 0)


def split_packets(block: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each packet's body in a block from ``packet_blocks``."""
    pos, n = 0, len(block)
    while pos < n:
        head = read_varint(block, pos, n)
        assert head is not None
        size = read_varint(block, head[1], n)
        assert size is not None
        yield size[1], size[1] + size[0]
        pos = size[1] + size[0]
