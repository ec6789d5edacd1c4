"""Reader for Perfetto protobuf traces (``.pftrace``): TrackEvent slices, instants, counters,
flows and callstack samples, with their process, thread, device and stream tracks.

Decoded with the protobuf runtime and a subset of Perfetto's schema of tracekit's own
(``tracekit.schemas.perfetto_subset_pb2``, from ``schemas/perfetto_subset.proto``). The
input is read as a stream of packet blocks, so a large or gzipped trace never sits in memory
whole as bytes or as protobuf objects.
"""

from __future__ import annotations

import tracekit
from tracekit import Source, TraceBuilder


class PerfettoReader(tracekit.Reader):
    """Perfetto traces (``.pftrace``, ``.perfetto-trace``), plain or gzipped."""

    name = "perfetto"
    description = "Perfetto protobuf trace (TrackEvent slices, counters, flows, samples)"
    extensions = (".pftrace", ".perfetto-trace", ".perfetto", ".pb", ".pftrace.gz",
                  ".perfetto-trace.gz")
    reads_streams = True  # one pass through source.open()

    @classmethod
    def sniff(cls, source: Source) -> float:
        head = source.head
        # A packet's tag first, and not text (a JSON trace may start with a line break):
        # refused without loading protobuf.
        if len(head) < 2 or head[0] != 0x0A or _is_text(head[:4096]):
            return 0.0
        from tracekit.plugins.perfetto.read_trace import looks_like_packets

        return 0.95 if looks_like_packets(head) else 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        from tracekit.plugins.perfetto.read_trace import read_trace

        read_trace(source, out, self.name)


_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 13))


def _is_text(head: bytes) -> bool:
    """UTF-8 without control characters other than tab and line breaks: text, which a
    protobuf stream is not (its tags and lengths hold control bytes within a few bytes)."""
    if head.translate(None, _CONTROL) != head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > len(head) - 4  # a character cut at the end of the head
    return True
