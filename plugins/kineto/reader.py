"""The Kineto reader: detection, reading the bytes, parsing, then conversion."""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from typing import Any

import tracekit
from tracekit.builder import TraceBuilder
from tracekit.errors import TraceReadError
from tracekit.gcpause import gc_paused
from tracekit.inputs import Source
from tracekit.plugins.kineto.convert import convert
from tracekit.plugins.kineto.loading import parse_document
from tracekit.plugins.kineto.timestamps import needs_exact_decimals

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
        progress = getattr(out, "progress", None)
        if progress:
            progress.phase(f"reading {source.name}")
        # Read once, through the Source: it may be a stream (stdin, a FIFO).
        data = source.read_bytes(progress.update if progress else None)
        if progress:
            progress.phase(f"parsing {source.name}")
        with gc_paused():
            self._parse_and_convert(data, source, out)

    def _parse_and_convert(self, data: bytes, source: Source, out: TraceBuilder) -> None:
        doc, repairs = parse_document(data, str(source.path))
        events = doc.get("traceEvents") if isinstance(doc, dict) else doc
        if isinstance(events, list) and needs_exact_decimals(events):
            # Absolute epoch µs with a fraction: a float cannot hold them to the ns.
            del doc, events
            doc, repairs = parse_document(data, str(source.path), exact=True)
            out.metadata["timestamps"] = "parsed from the decimal text (absolute µs)"
        progress = getattr(out, "progress", None)
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
        if repairs:
            out.metadata["repairs"] = repairs
            for repair in repairs:
                out.note("document", f"warning: {repair}")
        convert(top, events, out, source, self.options.memory_counters)
