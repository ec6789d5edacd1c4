"""Reader for Linux ``perf script`` text: CPU samples with call stacks, and tracepoints.

It streams: lines are parsed in batches and rows leave as Arrow batches, so memory follows
the number of samples and distinct call sites, not the size of the text.
"""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass, field
from typing import Any

import tracekit
from tracekit.builder import TraceBuilder
from tracekit.errors import TraceReadError
from tracekit.inputs import HEAD_SIZE, Source
from tracekit.plugins.perf.header import header_metadata
from tracekit.plugins.perf.parser import PerfScriptParser, parse_frame, parse_header

CLOCK = "perf clock: seconds since boot (CLOCK_MONOTONIC-like), not the Unix epoch"
_LINES_PER_BATCH = 50_000


class PerfScriptReader(tracekit.Reader):
    """``perf script`` output (``perf script > out.perf``), plain or gzipped."""

    name = "perf"
    description = "Linux perf script text: CPU samples with call stacks, tracepoints"
    extensions = (".perf", ".perf.gz", ".perf.txt")

    @dataclass(frozen=True)
    class Options:
        batch_rows: int = field(default=50_000, metadata={
            "help": "rows per Arrow batch while streaming"})

    @classmethod
    def sniff(cls, source: Source) -> float:
        head = source.head
        if not head or b"\0" in head:
            return 0.0
        lines = head.decode("utf-8", "replace").splitlines()[:400]
        if len(head) >= HEAD_SIZE and len(lines) > 1:
            lines = lines[:-1]  # the last line of a full head may be cut
        if any(line.startswith("# perf version") for line in lines):
            return 0.95
        body = [line for line in lines if line.strip() and not line.startswith("#")]
        headers = sum(1 for line in body[:200] if line[:1] not in "\t" and parse_header(line))
        frames = sum(1 for line in body[:200] if line[:1] in " \t" and parse_frame(line))
        if headers and (frames or headers >= 2):
            return 0.9
        return 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        parser = PerfScriptParser()
        progress = getattr(out, "progress", None)
        with source.open() as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
            line_no = 1
            while True:
                lines = list(itertools.islice(text, _LINES_PER_BATCH))
                if not lines:
                    break
                parser.feed(lines, line_no)
                line_no += len(lines)
                if len(parser.columns) >= self.options.batch_rows:
                    out.add_events(parser.take_columns().as_dict())
                if progress is not None:
                    progress.update(raw.tell() if hasattr(raw, "tell") else 0, source.size)
        parser.finish()
        out.add_events(parser.take_columns().as_dict())
        counts = parser.counts
        if not counts.samples and not counts.tracepoints:
            where = (f" (line {counts.first_unparsed[0]}: {counts.first_unparsed[1]!r})"
                     if counts.first_unparsed else "")
            raise TraceReadError(f"no perf script samples found{where}", path=source.path,
                                 reader=self.name)
        self._side_tables(parser, out)
        out.metadata.update({"format": "perf script", "tool": "perf",
                             "clock": CLOCK,
                             "events": parser.events, **header_metadata(parser.header_lines)})
        out.metadata["tool_version"] = out.metadata.get("perf_version")  # from the header
        out.note("samples", "events", counts.samples)
        out.note("tracepoint records", "events", counts.tracepoints)
        out.note("header lines", "metadata", counts.header_lines)
        out.note("PERF_RECORD side-band lines", "skipped: side-band record, not a sample",
                 counts.side_band)
        out.note("LOST lines", "skipped: the kernel lost these events while recording",
                 counts.lost)
        out.note("per-frame detail lines", "skipped: srcline or other detail of a frame",
                 counts.detail_lines)
        out.note("unrecognized lines", "skipped: not a perf script line", counts.unparsed)

    @staticmethod
    def _side_tables(parser: PerfScriptParser, out: TraceBuilder) -> None:
        frames, stacks = parser.stacks.tables()
        out.add_table("frames", frames)
        out.add_table("stacks", stacks)
        pids = set()
        for (pid, tid), comm in parser.threads.items():
            out.add_thread(pid, tid, name=comm)  # type: ignore[arg-type]
            if pid is not None:
                pids.add(pid)
                if pid == tid:
                    out.add_process(pid, name=comm)
        for pid in pids:
            out.add_process(pid)


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    register(PerfScriptReader)
