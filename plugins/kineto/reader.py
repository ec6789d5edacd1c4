"""The Kineto reader: detection, reading the bytes, parsing, then conversion."""

from __future__ import annotations

import codecs
import gzip
import zlib
from dataclasses import dataclass, field
from typing import Any

import tracekit
from tracekit import Source, TraceBuilder, TraceReadError
from tracekit.plugins.kineto.convert import convert
from tracekit.plugins.kineto.decode import decode, file_blocks, memory_blocks
from tracekit.plugins.kineto.events import ColumnEvents, DictEvents
from tracekit.plugins.kineto.loading import parse_document
from tracekit.plugins.kineto.timestamps import needs_exact_decimals
from tracekit.toolkit import gc_paused

#: ``Trace.metadata["timestamps"]`` when a float could not hold the times to the ns.
EXACT_TIMES = "parsed from the decimal text (absolute µs)"
_KINETO_MARKERS = (b'"schemaVersion"', b'"deviceProperties"', b'"baseTimeNanoseconds"',
                   b'"distributedInfo"', b'"cat": "cpu_op"', b'"cat": "Operator"',
                   b'"cat": "kernel"')


class KinetoReader(tracekit.Reader):
    """PyTorch profiler traces (``*.pt.trace.json[.gz]``) and other Chrome-trace JSON."""

    name = "kineto"
    description = "PyTorch profiler / Kineto Chrome-trace JSON"
    extensions = (".json", ".json.gz")
    reads_streams = True

    @dataclass(frozen=True)
    class Options:
        memory_counters: bool = field(default=True, metadata={
            "help": "derive 'allocated'/'reserved' counter rows from [memory] events"})

    @classmethod
    def sniff(cls, source: Source) -> float:
        head = source.head.removeprefix(codecs.BOM_UTF8).lstrip()
        if head.startswith(b"{"):
            if any(m in head for m in _KINETO_MARKERS):
                return 1.0
            return 0.8 if b'"traceEvents"' in head else 0.0
        if head.startswith(b"[") and b'"ph"' in head:
            return 0.6
        return 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        progress = out.progress
        size = 0 if source.is_stream else source.size  # a stream's size is unknown
        if progress:
            progress.phase(f"reading {source.name}", size)
        data = None
        with gc_paused():
            if source.is_stream:
                # Read once, through the Source: a stream cannot be read again.
                data = source.read_bytes(progress.update if progress else None)
                decoded = decode(memory_blocks(data))
            else:
                decoded = _decode_file(source, progress)
            if decoded is None:
                # Values of unexpected types, or JSON that needs repair: the forgiving path.
                if data is None:
                    if progress:
                        progress.phase(f"reading {source.name}", size)
                    data = source.read_bytes(progress.update if progress else None)
                if progress:
                    progress.phase(f"parsing {source.name}")
                self._parse_and_convert(data, source, out)
                return
            del data
            top, events, repairs = decoded
            if events.exact_times:
                out.metadata["timestamps"] = EXACT_TIMES
            if progress:
                progress.phase(f"converting {source.name}")
            self._finish(top, events, source, out, repairs)

    def _parse_and_convert(self, data: bytes, source: Source, out: TraceBuilder) -> None:
        doc, repairs = parse_document(data, str(source.path))
        events = doc.get("traceEvents") if isinstance(doc, dict) else doc
        if isinstance(events, list) and needs_exact_decimals(events):
            # Absolute epoch µs with a fraction: a float cannot hold them to the ns.
            del doc, events
            doc, repairs = parse_document(data, str(source.path), exact=True)
            out.metadata["timestamps"] = EXACT_TIMES
        progress = out.progress
        if progress:
            progress.phase(f"converting {source.name}")
        self._convert(doc, source, out, repairs)

    def _convert(self, doc: Any, source: Source, out: TraceBuilder, repairs: list[str]) -> None:
        if isinstance(doc, dict):
            events = doc.get("traceEvents")
            if not isinstance(events, list):
                raise TraceReadError("not a Chrome trace: no 'traceEvents' list",
                                     path=source.path)
            top = {k: v for k, v in doc.items() if k != "traceEvents"}
        elif isinstance(doc, list):
            events, top = doc, {}
        else:
            raise TraceReadError("not a Chrome trace: the JSON is neither an object nor an array",
                                 path=source.path)
        dicts = [e for e in events if type(e) is dict]
        if len(dicts) != len(events):
            out.note("non-object entries", "skipped: not a JSON object",
                     len(events) - len(dicts))
        self._finish(top, DictEvents(dicts), source, out, repairs)

    def _finish(self, top: dict[str, Any], events: DictEvents | ColumnEvents, source: Source,
                out: TraceBuilder, repairs: list[str]) -> None:
        if repairs:
            out.metadata["repairs"] = repairs
            for repair in repairs:
                out.note("document", f"warning: {repair}")
        convert(top, events, out, source, self.options.memory_counters)


def _decode_file(source: Source, progress: Any) -> tuple[dict[str, Any], ColumnEvents,
                                                           list[str]] | None:
    """The typed decode of a file, read in blocks (decompressed as they are read); None when
    it cannot read the file or the document needs the forgiving path, which then reads it
    again and says what is wrong."""
    try:
        with open(source.path, "rb") as raw:
            stream = gzip.GzipFile(fileobj=raw) if source.compression == "gzip" else raw
            done = (lambda: progress.update(raw.tell(), source.size)) if progress else None
            return decode(file_blocks(stream.read, progress=done))
    except (OSError, EOFError, zlib.error):  # BadGzipFile is an OSError
        return None
