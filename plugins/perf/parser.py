"""``perf script`` text, line by line, into sample and tracepoint rows with shared stacks.

The sample header is found by its timestamp token (``secs.frac:`` with 6 to 9 decimals) and
read from the right: ``comm [pid/]tid [[cpu]] time: [period] event: [payload]``, where comm
may hold spaces and digits (formats.md section 4.3). Old perf prints no timestamp at all
(``comm tid event:``). Frames (``addr sym[+off] (dso)``, leaf first) follow until a blank
line; without callchains the one frame sits on the header line itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from tracekit.stacks import CallSites

HEADER_TS = re.compile(r"^(?P<pre>.*?)\s*(?<!\S)(?P<sec>\d+)\.(?P<frac>\d{6,9}):(?:\s+|$)"
                       r"(?P<rest>.*)$")
HEADER_NO_TS = re.compile(r"^(?P<pre>.*?\S)\s+(?P<ids>-?\d+(?:/-?\d+)?)\s+(?:\[\d+\]\s+)?"
                          r"(?P<rest>(?:\d+\s+)?(?![\d.]+:)[^\s:]\S*:(?:\s.*)?)$")
REST = re.compile(r"^(?:(?P<period>\d+)\s+)?(?P<event>\S+?):?(?:\s+(?P<tail>.*))?$")
FRAME = re.compile(r"^\s*(?P<addr>[0-9a-fA-F]+)\s+(?P<body>.*\S)\s*$")
CPU = re.compile(r"^\[(\d+)\]$")
IDS = re.compile(r"^(-?\d+)(?:/(-?\d+))?$")
OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")
NO_STACK = "[no call stack]"
UNKNOWN = "[unknown]"


@dataclass
class Header:
    comm: str
    pid: int | None
    tid: int
    cpu: int | None
    ts_ns: int | None
    period: int | None
    event: str
    tail: str


def parse_header(line: str) -> Header | None:
    """The sample header of ``line``, or None when it is not one."""
    m = HEADER_TS.match(line)
    if m:
        ts_ns: int | None = int(m["sec"]) * 1_000_000_000 + int(m["frac"].ljust(9, "0"))
        pre, rest = m["pre"].split(), m["rest"]
    else:
        m = HEADER_NO_TS.match(line)
        if not m:
            return None
        ts_ns, pre, rest = None, [*m["pre"].split(), m["ids"]], m["rest"]
    cpu = None
    if pre and (c := CPU.match(pre[-1])):
        cpu = int(c.group(1))
        pre = pre[:-1]
    if not pre or not (ids := IDS.match(pre[-1])):
        return None
    pid, tid = (int(ids.group(1)), int(ids.group(2))) if ids.group(2) else \
        (None, int(ids.group(1)))
    r = REST.match(rest.strip())
    if not r:
        return None
    return Header(" ".join(pre[:-1]), pid, tid, cpu, ts_ns,
                  int(r["period"]) if r["period"] else None, r["event"], r["tail"] or "")


def parse_frame(line: str) -> tuple[str, str | None] | None:
    """(symbol without offset, dso) of a frame line, or None. The dso is the last balanced
    parenthesized group, so ``(/lib/x.so (deleted))`` stays whole; an empty symbol (old perf)
    is ``[unknown]``."""
    m = FRAME.match(line)
    if not m:
        return None
    body = m["body"]
    dso = None
    cut = body.rfind(" (")
    if body.endswith(")") and cut >= 0 and "(" not in (candidate := body[cut + 2:-1]) \
            and ")" not in candidate:
        return OFFSET.sub("", body[:cut].rstrip()) or UNKNOWN, candidate
    if body.endswith(")"):
        depth = 0
        for i in range(len(body) - 1, -1, -1):
            ch = body[i]
            if ch == ")":
                depth += 1
            elif ch == "(":
                depth -= 1
                if depth == 0:
                    if i == 0 or body[i - 1] == " ":
                        dso = body[i + 1:-1]
                        body = body[:i].rstrip()
                    break
    if not body:
        # Old perf prints an unresolved symbol as nothing at all; newer perf as [unknown].
        return (UNKNOWN, dso) if dso is not None else None
    return OFFSET.sub("", body), dso


def _looks_like_header(line: str) -> bool:
    """A padded header line (right-aligned comm) rather than a frame: it has ``time: ``."""
    return (": " in line or line.endswith(":")) and HEADER_TS.match(line) is not None


@dataclass
class Columns:
    """Rows parsed so far, column by column (flushed in chunks by the reader)."""

    kind: list[str] = field(default_factory=list)
    category: list[str] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    ts_ns: list[int | None] = field(default_factory=list)
    pid: list[int | None] = field(default_factory=list)
    tid: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    stack_id: list[int | None] = field(default_factory=list)
    args: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.kind)

    def as_dict(self) -> dict[str, list[Any]]:
        return {k: getattr(self, k) for k in ("kind", "category", "name", "ts_ns", "pid", "tid",
                                              "value", "stack_id", "args")}


@dataclass
class Counts:
    """What the parser met besides samples, for the reader's account."""

    samples: int = 0
    tracepoints: int = 0
    header_lines: int = 0
    side_band: int = 0
    lost: int = 0
    detail_lines: int = 0
    unparsed: int = 0
    first_unparsed: tuple[int, str] | None = None


class PerfScriptParser:
    """Feed lines; rows accumulate in ``columns``, stacks in ``stacks``."""

    def __init__(self) -> None:
        self.columns = Columns()
        self.stacks = CallSites()
        self.counts = Counts()
        self.header_lines: list[str] = []
        self.threads: dict[tuple[int | None, int], str] = {}
        self.events: dict[str, int] = {}
        self._current: Header | None = None
        self._lines: list[str] = []  # frame lines of the current sample, as read
        self._tail_frame: tuple[str, str | None] | None = None
        # Stacks recur: their text maps to (call-site id, leaf, detail lines) without
        # parsing every frame again. Bounded, so a file of all-distinct stacks stays flat.
        self._stack_cache: dict[str, tuple[int | None, str | None, int]] = {}
        self._seen_sample = False

    def feed(self, lines: Iterable[str], first_line_no: int = 1) -> None:
        """Parse ``lines`` (numbered from ``first_line_no``)."""
        for no, raw in enumerate(lines, first_line_no):
            line = raw.rstrip("\r\n")
            if not line.strip():
                self._end_sample()
                continue
            if line.startswith("#"):
                if not self._seen_sample:
                    self.header_lines.append(line)
                self.counts.header_lines += 1
                continue
            if self._current is not None and (line[0] == "\t" or (
                    line[0] == " " and not _looks_like_header(line))):
                self._lines.append(line)
                continue
            self._header(line, no)

    def _header(self, line: str, no: int) -> None:
        if "PERF_RECORD_" in line:
            self._end_sample()
            self.counts.side_band += 1
            return
        if re.search(r"\bLOST\b", line):
            self._end_sample()
            self.counts.lost += 1
            return
        header = parse_header(line)
        if header is None:
            self._end_sample()
            self.counts.unparsed += 1
            if self.counts.first_unparsed is None:
                self.counts.first_unparsed = (no, line[:120])
            return
        self._end_sample()
        self._seen_sample = True
        self._current = header
        tail_frame = parse_frame(header.tail) if header.tail else None
        if tail_frame is not None:  # a sample without callchain: its ip on the same line
            self._tail_frame = tail_frame
            header.tail = ""

    def finish(self) -> None:
        """End the last sample (files need not end with a blank line)."""
        self._end_sample()

    def _end_sample(self) -> None:
        h = self._current
        if h is None:
            return
        self._current = None
        c = self.columns
        stack, leaf = self._stack()
        self.events[h.event] = self.events.get(h.event, 0) + 1
        args: dict[str, Any] = {"event": h.event}
        # A thread keeps its first name; a sample taken under another (after exec or a
        # rename) carries its own, as stackcollapse-perf folds by each sample's comm.
        if h.comm and self.threads.setdefault((h.pid, h.tid), h.comm) != h.comm:
            args["comm"] = h.comm
        if h.cpu is not None:
            args["cpu"] = h.cpu
        if h.tail:  # a tracepoint: its payload
            c.kind.append("instant")
            c.category.append("host.instant")
            c.name.append(h.event)
            args["payload"] = h.tail
            self.counts.tracepoints += 1
        else:
            c.kind.append("sample")
            c.category.append("cpu.sample")
            c.name.append(leaf or NO_STACK)
            self.counts.samples += 1
        c.ts_ns.append(h.ts_ns)
        c.pid.append(h.pid)
        c.tid.append(h.tid)
        c.value.append(float(h.period) if h.period is not None else 1.0)
        c.stack_id.append(stack)
        c.args.append(orjson.dumps(args).decode())

    def _stack(self) -> tuple[int | None, str | None]:
        """The call-site id and leaf name of the current sample's frames."""
        lines, self._lines = self._lines, []
        if self._tail_frame is not None:
            frame, self._tail_frame = self._tail_frame, None
            return self.stacks.stack_of([frame]), frame[0]
        if not lines:
            return None, None
        key = "\n".join(lines)
        hit = self._stack_cache.get(key)
        if hit is None:
            frames = [f for f in map(parse_frame, lines) if f is not None]
            stack = self.stacks.stack_of(frames)
            hit = (stack, frames[0][0] if frames else None, len(lines) - len(frames))
            if len(self._stack_cache) >= 100_000:
                self._stack_cache.clear()
            self._stack_cache[key] = hit
        self.counts.detail_lines += hit[2]  # -F +srcline and other per-frame lines
        return hit[0], hit[1]

    def take_columns(self) -> Columns:
        """The rows parsed so far; the parser starts a new batch."""
        out, self.columns = self.columns, Columns()
        return out
