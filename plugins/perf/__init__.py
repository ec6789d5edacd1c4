"""Reader for Linux ``perf script`` text: CPU samples with call stacks, and tracepoints.

It streams: the text is read in blocks of some megabytes of whole lines, parsed column-wise
(blocks.py; records of other shapes go through the line parser, parser.py) and rows leave as
Arrow batches, so memory follows the block, the number of samples and the distinct call
sites, not the size of the text. The text is read in one pass through ``source.open()``, so a
pipe (``perf script | tracekit convert -``) works.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import tracekit
from tracekit import Source, TraceBuilder, TraceReadError
from tracekit.plugins.perf.blocks import BlockParser, read_blocks
from tracekit.plugins.perf.header import header_metadata
from tracekit.plugins.perf.parser import (
    Counts,
    Header,
    PerfScriptParser,
    parse_frame,
    parse_header,
)
from tracekit.toolkit import HEAD_SIZE, event_base, read_errors

CLOCK = "perf clock: seconds since boot (CLOCK_MONOTONIC-like), not the Unix epoch"
# Appended to the name of a process made up for a comm printed without its pid.
SYNTHETIC_MARK = "(pid not recorded)"


class PerfScriptReader(tracekit.Reader):
    """``perf script`` output (``perf script > out.perf``), plain or gzipped."""

    name = "perf"
    description = "Linux perf script text: CPU samples with call stacks, tracepoints"
    extensions = (".perf", ".perf.gz", ".perf.txt")
    reads_streams = True  # one pass through source.open()
    streams_events = True  # rows leave in batches as the text is read (_hand_over)

    @dataclass(frozen=True)
    class Options:
        batch_rows: int = field(default=50_000, metadata={
            "min": 1,
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
        headers = sum(1 for line in body[:200] if line[:1] not in "\t" and _strong(line))
        frames = sum(1 for line in body[:200] if line[:1] in " \t" and parse_frame(line))
        if headers and (frames or headers >= 2):
            return 0.9
        return 0.5 if _headerless_stacks(lines) else 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        parser = PerfScriptParser()
        self._stacks_sent = (0, 0)  # the frames and call sites added to out so far
        with read_errors(source.path, self.name):
            self._parse(source, parser, out)
        counts = parser.counts
        if not counts.samples and not counts.tracepoints:
            where = (f" (line {counts.first_unparsed[0]}: {counts.first_unparsed[1]!r})"
                     if counts.first_unparsed else "")
            if counts.malformed:
                reason, (_, line) = min(counts.malformed.items(), key=lambda kv: kv[1][1])
                skipped = sum(n for n, _ in counts.malformed.values())
                where = f" ({skipped} skipped; line {line}: {reason})"
            raise TraceReadError(f"no perf script samples found{where}", path=source.path,
                                 reader=self.name)
        if _cut_short(source):
            out.note("samples", "warning: the last line has no line break: the file may be "
                     "cut short, and its last sample incomplete")
        self._side_tables(parser, out)
        out.metadata.update({"format": "perf script", "tool": "perf",
                             "clock": CLOCK,
                             "sample_events": parser.events,
                             "sample_units": {event: sample_unit(event, periodic)
                                              for event, periodic in parser.periods.items()},
                             **header_metadata(parser.header_lines)})
        if parser.synthetic_pids:
            out.metadata["synthetic_pids"] = dict(parser.synthetic_pids)
        out.metadata["tool_version"] = out.metadata.get("perf_version")  # from the header
        self._account(parser.counts, out)
        if parser.time_mode == "delta":
            rows = counts.samples + counts.tracepoints
            out.note("samples", "times rebuilt from perf script --deltatime: the deltas "
                     "added up, from 0 at the first line", rows)
            if parser.delta_decimals < 9:
                out.note("samples", "warning: perf script --deltatime without --ns: each "
                         "delta is cut to the microsecond, so times read early, by up to "
                         f"{parser.delta_lines} us at the end; re-run perf script with --ns "
                         "or without --deltatime", rows)

    def _parse(self, source: Source, parser: PerfScriptParser, out: TraceBuilder) -> None:
        """Stream the text through ``parser`` in one pass, block by block, handing rows to
        ``out`` as they are ready."""
        track = bool(source.size)  # progress in bytes needs the size
        if track:
            out.progress.phase(f"reading {source.name}", source.size)
        with source.open() as raw:
            # Progress in file bytes: the compressed offset under a gzip stream.
            position = getattr(raw, "fileobj", None) or raw
            reader = BlockParser(parser)
            for buf, size, whole in read_blocks(raw):
                reader.feed(buf, size, whole)
                self._hand_over(parser, parser.take_batches(self.options.batch_rows), out)
                if track:
                    try:
                        out.progress.update(position.tell(), source.size)
                    except (OSError, ValueError):  # a stream that cannot tell its offset
                        track = False
        parser.finish()
        self._hand_over(parser, parser.take_batches(), out)

    def _hand_over(self, parser: PerfScriptParser, batches: list[dict[str, Any]],
                   out: TraceBuilder) -> None:
        """Give ``out`` the rows of ``batches``, at most ``batch_rows`` at a time, after the
        call stacks they name (so that a writer taking batches can intern them first)."""
        if batches:
            self._add_stacks(parser, out)
        step = max(self.options.batch_rows, 1)
        for batch in batches:
            rows = len(batch["kind"])
            for at in range(0, rows, step):
                out.add_events(batch if rows <= step else
                               {k: v[at:at + step] for k, v in batch.items()})

    @staticmethod
    def _account(counts: Counts, out: TraceBuilder) -> None:
        out.note("samples", "events", counts.samples)
        out.note("tracepoint records", "events", counts.tracepoints)
        for reason, (n, line) in counts.malformed.items():
            out.note("samples", f"skipped: {reason} (first at line {line})", n)
        out.note("header lines", "metadata", counts.header_lines)
        out.note("PERF_RECORD side-band lines", "skipped: side-band record, not a sample",
                 counts.side_band)
        out.note("LOST lines", "skipped: the kernel lost these events while recording",
                 counts.lost)
        out.note("per-frame detail lines", "skipped: srcline or other detail of a frame",
                 counts.detail_lines)
        out.note("unrecognized lines", "skipped: not a perf script line", counts.unparsed)
        out.note("samples", "branch stacks (-F brstack) not represented: "
                 f"{counts.branch_entries} entries skipped", counts.branch_samples)
        out.note("samples", "fields besides the ip (-F +data_src, +weight, ...): kept as "
                 "text in args.fields", counts.field_samples)
        if counts.untimed and counts.untimed == counts.samples + counts.tracepoints:
            out.note("samples", "warning: perf script without timestamps: re-run perf script "
                     "with -F +time to place samples on a timeline", counts.untimed)
        elif counts.untimed:  # a damaged header before the first good one
            out.note("samples", "warning: no timestamp (a damaged header line?): left off "
                     "timelines", counts.untimed)
        if counts.backwards:
            out.note("samples", "warning: timed before the sample before them in their "
                     "thread: times that go back are not absolute (perf script --deltatime "
                     "output cut at its start? re-run perf script without --deltatime)",
                     counts.backwards)
        if counts.no_pid:
            out.note("samples", "warning: perf script without pids: each comm is shown as a "
                     f"process {SYNTHETIC_MARK}; re-run perf script with -F +pid,+tid",
                     counts.no_pid)
        if counts.no_process:
            out.note("samples", "warning: perf script without comm or pid: samples belong to "
                     "no process; re-run perf script with -F +comm,+pid,+tid",
                     counts.no_process)

    def _add_stacks(self, parser: PerfScriptParser, out: TraceBuilder) -> None:
        """Add the frames and call sites found since the last call."""
        if parser.stacks.counts != self._stacks_sent:
            frames, stacks = parser.stacks.tables(since=self._stacks_sent)
            out.add_table("frames", frames)
            out.add_table("stacks", stacks)
            self._stacks_sent = parser.stacks.counts

    def _side_tables(self, parser: PerfScriptParser, out: TraceBuilder) -> None:
        self._add_stacks(parser, out)
        pids = set()
        for (pid, tid), comm in parser.threads.items():
            if tid is not None:
                out.add_thread(pid, tid, name=comm)  # type: ignore[arg-type]
            if pid is not None:
                pids.add(pid)
                if pid == tid:
                    out.add_process(pid, name=comm)
        for pid in pids:
            out.add_process(pid)
        for comm, pid in parser.synthetic_pids.items():
            out.add_process(pid, name=f"{comm} {SYNTHETIC_MARK}")


def sample_unit(event: str, periodic: bool) -> str:
    """What one unit of the period of ``event``'s samples is: ``ns`` for cpu-clock and
    task-clock, ``cycles``, the event's own name otherwise; ``samples`` where perf printed no
    period (each sample then weighs 1)."""
    if not periodic:
        return "samples"
    base = event_base(event)
    if base in ("cpu-clock", "task-clock"):
        return "ns"
    if base in ("cycles", "cpu-cycles", "ref-cycles"):
        return "cycles"
    return base or "value"


def _headerless_stacks(lines: list[str]) -> bool:
    """Whether ``lines`` are callchains without sample header lines (``perf script -F
    ip,sym,dso``, or ``-F comm,ip,sym``: a comm line, then its frames): tab-indented frames,
    and any other line a short one with frames under it."""
    frames = others = 0
    for i, line in enumerate(lines[:400]):
        if not line.strip() or line.startswith("#"):
            continue
        if line[0] == "\t" and parse_frame(line):
            frames += 1
        elif len(line) > 40 or i + 1 == len(lines) or not lines[i + 1].startswith("\t"):
            return False
        else:
            others += 1
    return frames >= 5 and frames >= 2 * others


def _strong(line: str) -> bool:
    """Whether ``line`` is a sample header that no other text is likely to look like."""
    header = parse_header(line)
    return isinstance(header, Header) and not header.weak and (
        header.tid is not None or header.event is not None)


def _cut_short(source: Source) -> bool:
    """Whether a plain file's last byte is not a line break: perf script ends every line, so
    the file was cut (copied while written, ``head -c``). Streams and gzip files are not
    checked: their end cannot be read again."""
    if source.is_stream or source.compression or not source.size:
        return False
    try:
        with open(source.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except OSError:
        return False


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    register(PerfScriptReader)
