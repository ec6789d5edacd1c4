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


def _varint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int] | None:
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
        while pos < n:
            start = pos
            try:
                head = _varint(buf, pos, n)
            except ValueError:
                raise FramingError(base + pos, "a field tag longer than 10 bytes") from None
            if head is None:
                break
            tag, pos = head
            field, wire = tag >> 3, tag & 7
            if field == 0 or wire in (3, 4, 6, 7):
                raise FramingError(base + start, f"not a packet (field {field}, wire type "
                                                 f"{wire})")
            if wire == 0:
                try:
                    skipped = _varint(buf, pos, n)
                except ValueError:
                    raise FramingError(base + pos, "a varint longer than 10 bytes") from None
                if skipped is None:
                    pos = start
                    break
                pos = skipped[1]
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                try:
                    size = _varint(buf, pos, n)
                except ValueError:
                    raise FramingError(base + pos, "a length longer than 10 bytes") from None
                if size is None:
                    pos = start
                    break
                pos = size[1] + size[0]
            if pos > n:
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
    if buf:
        tail.offset, tail.truncated = base, len(buf)


def split_packets(block: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each packet's body in a block from ``packet_blocks``."""
    pos, n = 0, len(block)
    while pos < n:
        head = _varint(block, pos, n)
        assert head is not None
        size = _varint(block, head[1], n)
        assert size is not None
        yield size[1], size[1] + size[0]
        pos = size[1] + size[0]
