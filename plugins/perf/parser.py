"""``perf script`` text, line by line, into sample and tracepoint rows with shared stacks.

The sample header is found by its timestamp token (``secs.frac:`` with 6 to 9 decimals) and
read from the right: ``comm [pid/]tid [[cpu]] time: [period] event: [payload]``, where comm
may hold spaces and digits (formats.md section 4.3). Old perf prints no timestamp at all
(``comm tid event:``), and ``perf script -F`` leaves out any of the fields. Frames
(``addr sym[+off] (dso)``, leaf first) follow until a blank line; without callchains the one
frame sits on the header line itself. A header with a number out of range is a Malformed
reason: its sample is skipped and counted, and the read goes on.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from tracekit.toolkit import CallSites, is_kernel

# The timestamp token, searched for (a leading ``.*?`` would backtrack quadratically over
# long runs of blanks).
TIME = re.compile(r"(?<!\S)(?P<sec>\d+)\.(?P<frac>\d{6,9}):(?=\s|$)")
# The event token: the first word that ends with ':' and starts like an event name does.
EVENT = re.compile(r"(?<!\S)(?!(?i:nan|inf|infinity):)(?P<event>[A-Za-z_]\S*?):(?=\s|$)")
# Where the timestamp goes, something else that ends with ':' and reads as a number.
NOT_A_TIME = re.compile(r"(?i)^[-+]?(?:[\d.]+(?:e[-+]?\d+)?|nan|inf|infinity):$")
REST = re.compile(r"^(?:(?P<period>\d+)(?:\s+|$))?(?:(?P<event>[A-Za-z_]\S*?):(?:\s+|$))?"
                  r"(?P<tail>.*)$")
NOT_A_PERIOD = re.compile(r"^(?P<bad>\S+)\s+[A-Za-z_]\S*:(?:\s|$)")
FRAME = re.compile(r"^\s*(?P<addr>[0-9a-fA-F]+)\s+(?P<body>.*\S)\s*$")
CPU = re.compile(r"^\[(\d+)\]$")
# ``-F +misc``: the sample's cpumode flags (K kernel, U user, H hypervisor, G and g guest
# kernel and user), printed between the cpu and the time, padded to 6.
MISC = re.compile(r"^[KUHGg]{1,5}$")
# ``-F +addr``: a hex number perf right-aligns to 16 after the event (for page faults
# followed by the symbol and dso it falls in); without a callchain the ip frame follows it,
# itself right-aligned (two spaces or more, or 16 hex digits), as after other fields.
HEX = re.compile(r"^[0-9a-fA-F]+$")
RIGHT_ALIGNED = re.compile(r"(?:\s{2,}[0-9a-fA-F]{1,15}|\s[0-9a-fA-F]{16})\s(?=\S)")
# Numbers, and perf's decoded data source (``-F +data_src``: ``hex |OP LOAD|LVL …|BLK  N/A``),
# on the header line of a sample with a callchain.
SAMPLE_FIELDS = re.compile(r"^[0-9a-fA-F]+(?:\s+[0-9a-fA-F]+)*(?:\s+\|OP .*)?$")
# ``-F brstack``: ``from/to/mispredicted/in_tx/abort/cycles`` entries (addresses, or symbols
# with brstacksym), some perf versions adding a branch type.
BRANCH = re.compile(r"^\S+/\S+/[PM-]/[X-]/[A-]/\d+(?:/\S*)?$")
IDS = re.compile(r"^(-?\d+)(?:/(-?\d+))?$")
OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")
NO_STACK = "[no call stack]"
UNKNOWN = "[unknown]"
UNKNOWN_EVENT = "[unknown event]"
INT64_MAX = 2**63 - 1
U64_MAX = 2**64 - 1
PID_MIN, PID_MAX = -(2**31), 2**31 - 1  # pid_t; perf prints -1 for "unknown"
# Processes of samples printed without a pid get a synthetic one per comm, far above any
# real pid (Linux caps pids at 2**22) and within Perfetto's int32 pids: 2**30 + crc32(comm)
# mod 2**30 (the next free id on a clash), the same in every file.
SYNTHETIC_PID_BASE = 2**30


@dataclass
class Header:
    comm: str
    pid: int | None
    tid: int | None
    cpu: int | None
    ts_ns: int | None
    period: int | None
    event: str | None
    tail: str
    # Without a timestamp and without ids or event name, a line is a header only when frame
    # lines follow it (``perf script -F comm,ip,sym``): on its own it could be any text.
    weak: bool = False
    misc: str | None = None  # -F +misc flags

    @property
    def anonymous(self) -> bool:
        """Frames with no header line at all (``perf script -F ip,sym``)."""
        return self.weak and not self.comm and self.tid is None and self.event is None


class Malformed(str):
    """What is wrong with a line that has the shape of a sample header (a skip reason)."""


def _number(digits: str, lo: int, hi: int) -> int | None:
    """``int(digits)`` when within [lo, hi]; None otherwise (also for thousands of digits,
    which ``int`` refuses)."""
    if len(digits) > 21:
        return None
    value = int(digits)
    return value if lo <= value <= hi else None


def parse_header(line: str) -> Header | Malformed | None:
    """The sample header of ``line``; a Malformed reason when it has a header's shape but a
    number out of range; None when it is not a header."""
    m = TIME.search(line)
    period: int | None = None
    if m:
        sec = _number(m["sec"], 0, INT64_MAX // 1_000_000_000)
        ts_ns = None if sec is None else sec * 1_000_000_000 + int(m["frac"].ljust(9, "0"))
        if ts_ns is None or ts_ns > INT64_MAX:
            return Malformed("timestamp out of range")
        pre = line[:m.start()].split()
        rest = _rest(line[m.end():].strip())
        if isinstance(rest, Malformed):
            return rest
        period, event, tail = rest
    else:
        ts_ns = None
        e = EVENT.search(line)
        pre = (line[:e.start()] if e else line).split()
        event, tail = (e["event"], line[e.end():].strip()) if e else (None, "")
        if e and any(NOT_A_TIME.match(word) for word in pre[-2:]):  # before any period
            return Malformed("malformed timestamp")
        if len(pre) >= 2 and pre[-1].isdigit() and (IDS.match(pre[-2]) or CPU.match(pre[-2])):
            period = _number(pre.pop(), 0, U64_MAX)
            if period is None:
                return Malformed("period out of range")
    misc = None
    if len(pre) >= 2 and MISC.match(pre[-1]) and (CPU.match(pre[-2]) or IDS.match(pre[-2])):
        misc = pre.pop()
    cpu = None
    if pre and (c := CPU.match(pre[-1])):
        cpu = _number(c.group(1), 0, PID_MAX)
        if cpu is None:
            return Malformed("cpu out of range")
        pre = pre[:-1]
    pid = tid = None
    if pre and (ids := IDS.match(pre[-1])):
        first = _number(ids.group(1), PID_MIN, PID_MAX)
        second = _number(ids.group(2), PID_MIN, PID_MAX) if ids.group(2) else None
        if first is None or (ids.group(2) and second is None):
            return Malformed("pid or tid out of range")
        pid, tid = (first, second) if ids.group(2) else (None, first)
        pre = pre[:-1]
    comm = " ".join(pre)
    weak = ts_ns is None and not (comm and tid is not None and event)
    if ts_ns is None and not pre and tid is None and not event:
        return None
    return Header(comm, pid, tid, cpu, ts_ns, period, event, tail, weak, misc)


def _rest(rest: str) -> tuple[int | None, str | None, str] | Malformed:
    """(period, event, tail) of what follows the timestamp."""
    r = REST.match(rest)  # every part is optional: it matches any line
    period, event, tail = (r["period"], r["event"], r["tail"]) if r else (None, None, rest)
    if event is None and period is not None and tail:
        # No event name: a number first is the period only when a frame follows it as perf
        # prints one, its address right-aligned (two spaces or more, or 16 hex digits).
        after = rest[len(period):]
        addr = after.split(None, 1)[0]
        if not (parse_frame(after) and (after.startswith("  ") or len(addr) == 16)):
            period, tail = None, rest
    if period is None and event is None and (bad := NOT_A_PERIOD.match(rest)):
        return Malformed("period out of range" if bad["bad"].isdigit()
                         else "period is not a whole number")
    value = None
    if period is not None:
        value = _number(period, 0, U64_MAX)
        if value is None:
            return Malformed("period out of range")
    return value, event, tail


#: perf's call-chain context markers (PERF_CONTEXT_HV ... PERF_CONTEXT_MAX, -32 to -4095 as
#: u64) and its -1 end of stack are no code.
PERF_CONTEXT_MAX = 2**64 - 4095
#: The dso perf names kernel code by; an unresolved kernel address gets it (kallsyms could not
#: be read: kptr_restrict, no root), so that kernel time is not counted as user time.
KERNEL_DSO = "[kernel.kallsyms]"


def parse_frame(line: str) -> tuple[str, str | None] | None:
    """(symbol without offset, dso) of a frame line, or None. The dso is the last balanced
    parenthesized group, so ``(/lib/x.so (deleted))`` stays whole; an empty symbol (old perf)
    is ``[unknown]``; an ``[unknown]`` dso at a kernel address is ``KERNEL_DSO``."""
    m = FRAME.match(line)
    if not m:
        return None
    body = m["body"]
    dso = None
    cut = body.rfind(" (")
    if body.endswith(")") and cut >= 0 and "(" not in (candidate := body[cut + 2:-1]) \
            and ")" not in candidate:
        name = OFFSET.sub("", body[:cut].rstrip()) or UNKNOWN
        if candidate == UNKNOWN and name == UNKNOWN and _kernel_address(m["addr"]):
            return UNKNOWN, KERNEL_DSO
        return name, candidate
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
        if dso is None:
            return None
        return (UNKNOWN, KERNEL_DSO) if dso == UNKNOWN and _kernel_address(m["addr"]) else \
            (UNKNOWN, dso)
    return OFFSET.sub("", body), dso


def _kernel_address(addr: str) -> bool:
    """Whether a frame's hex address is kernel code (``toolkit.is_kernel``'s address rule:
    perf could not resolve it, but it is the kernel's all the same), not one of perf's
    context markers at the top of the address space (``PERF_CONTEXT_*``, -1 to -4095:
    ``ffffffffffffffff [unknown]`` ends many user stacks)."""
    return len(addr) == 16 and (at := int(addr, 16)) < PERF_CONTEXT_MAX and is_kernel(None, at)


def _place_inlined(parsed: list[tuple[str, tuple[str, str | None]]]
                   ) -> list[tuple[str, str | None]]:
    """The frames of ``parsed`` (``(line, frame)`` pairs), those with ``perf script
    --inline``'s ``(inlined)`` in place of a dso given the dso of the frame their code is
    inlined into: the next frame (toward the root) with a dso, where it is at the same address
    or within the same 16 MiB (one mapping: perf sometimes leaves out the physical frame of an
    address); else no dso. ``(inlined)`` is no module."""
    frames = [f for _, f in parsed]
    # parse_frame matched FRAME on each of these lines: the address is there.
    addresses = [int(m["addr"], 16) if (m := FRAME.match(line)) else -1 for line, _ in parsed]
    out = list(frames)
    for i, (name, dso) in enumerate(frames):
        if dso != "inlined":
            continue
        real = next((j for j in range(i + 1, len(frames)) if frames[j][1] != "inlined"), None)
        near = real is not None and addresses[real] >> 24 == addresses[i] >> 24
        out[i] = (name, frames[real][1] if near and real is not None else None)
    return out


def _ip_frame_at(tail: str) -> int | None:
    """Where the ip frame starts at the end of ``tail``, after other fields perf printed
    before it (``+data_src``, ``+weight``): the last right-aligned address whose rest reads
    as a frame with its dso; None when there is none after something else."""
    for m in reversed(list(RIGHT_ALIGNED.finditer(tail))):
        if m.start() and (frame := parse_frame(tail[m.start():])) and frame[1] is not None:
            return m.start()
    return None


def _looks_like_header(line: str) -> bool:
    """A padded header line (right-aligned comm) rather than a frame: it has ``time: ``."""
    return (": " in line or line.endswith(":")) and TIME.search(line) is not None


@dataclass
class Columns:
    """Rows parsed so far, column by column (flushed in chunks by the reader)."""

    kind: list[str] = field(default_factory=list)
    category: list[str] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    ts_ns: list[int | None] = field(default_factory=list)
    pid: list[int | None] = field(default_factory=list)
    tid: list[int | None] = field(default_factory=list)
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
    branch_samples: int = 0  # -F brstack: samples with branch entries (not represented)
    branch_entries: int = 0
    field_samples: int = 0  # samples with other fields before the ip (kept as text)
    backwards: int = 0  # rows timed before the row before them in their thread
    untimed: int = 0  # rows without a timestamp
    no_pid: int = 0  # rows given a synthetic pid: no pid printed
    no_process: int = 0  # rows with no pid and no comm: no process at all
    # Samples skipped for a malformed header, per reason: (count, first line number).
    malformed: dict[str, list[int]] = field(default_factory=dict)


class PerfScriptParser:
    """Feed lines; rows accumulate in ``columns``, stacks in ``stacks``."""

    def __init__(self) -> None:
        self.columns = Columns()
        # Rows ready to leave, in file order: columns of the line parser, or Arrow arrays of
        # records read column-wise (see blocks.py).
        self.batches: list[dict[str, Any]] = []
        self.stacks = CallSites()
        self.counts = Counts()
        self.header_lines: list[str] = []
        self.threads: dict[tuple[int | None, int | None], str] = {}
        self.events: dict[str, int] = {}
        # Per sampled event ("" for samples that name none): whether any printed a period.
        self.periods: dict[str, bool] = {}
        self.synthetic_pids: dict[str, int] = {}  # comm -> synthetic pid
        self._taken: set[int] = set()
        self._current: Header | None = None
        self._current_line: tuple[int, str] = (0, "")
        self._lines: list[str] = []  # frame lines of the current sample, as read
        self._tail_frame: tuple[str, str | None] | None = None
        # Stacks recur: their text maps to (call-site id, leaf, detail lines) without
        # parsing every frame again. Bounded, so a file of all-distinct stacks stays flat.
        self._stack_cache: dict[str, tuple[int | None, str | None, int]] = {}
        self._seen_sample = False
        # perf prints the same fields on every header line: once one had a timestamp, a
        # header without one is damage, not a sample to put at no time.
        self._timed: bool | None = None
        self._skipping = False  # in the frame lines of a skipped (malformed) sample
        self._after_blank = True  # the previous line was blank, a comment or none
        # Rows of header-less samples that open the file: a file cut at its start (tail -n)
        # begins with the frames of a sample; once a header shows, they were not samples.
        self._leading_anonymous = 0
        self._leading_line = 0
        self._flushed = False
        # --deltatime: None until the first timestamp; "maybe" while it may be deltas (rows
        # are held, and each timed line's (row, delta) kept in _extra), then "delta" (times
        # rebuilt by adding the deltas) or "absolute".
        self.time_mode: str | None = None
        self._extra: list[tuple[int, int]] = []
        self._clock = 0
        self.delta_lines = 0  # deltas added up
        self.delta_decimals = 9
        self._last_raw: int | None = None
        # Per thread, the time of its last row: a time below it is counted (backwards).
        self._last_ts: dict[tuple[int | None, int | None], int] = {}
        self._pairs = self._down = 0

    def feed(self, lines: Iterable[str], first_line_no: int = 1) -> None:
        """Parse ``lines`` (numbered from ``first_line_no``)."""
        for no, raw in enumerate(lines, first_line_no):
            line = raw.rstrip("\r\n")
            if not line.strip():
                self._end_sample()
                self._skipping = False
                self._after_blank = True
                continue
            if line.startswith("#"):
                if not self._seen_sample:
                    self.header_lines.append(line)
                self.counts.header_lines += 1
                self._after_blank = True
                continue
            after_blank, self._after_blank = self._after_blank, False
            if line[0] == "\t" or (line[0] == " " and not _looks_like_header(line)):
                if self._current is not None:
                    self._lines.append(line)
                    continue
                if self._skipping:
                    continue
                if after_blank and self._timed is not True and parse_frame(line):
                    # Frames with no header line at all (perf script -F ip,sym).
                    self._start(Header("", None, None, None, None, None, None, "", True),
                                no, line)
                    self._lines.append(line)
                    continue
                self._header(line, no, indented=True)
                continue
            self._header(line, no)

    def _header(self, line: str, no: int, indented: bool = False) -> None:
        self._end_sample()
        self._skipping = False
        clock = self._line_time(line) if self.time_mode != "absolute" else None
        if "PERF_RECORD_" in line:
            self.counts.side_band += 1
            return
        if re.search(r"\bLOST\b", line):
            self.counts.lost += 1
            return
        header = parse_header(line)
        if isinstance(header, Header) and header.weak and (indented or self._timed):
            header = None  # a stray frame line, or text in a file of timed samples
        if isinstance(header, Header) and header.ts_ns is None and self._timed:
            header = Malformed("no timestamp, unlike the samples before it")
        if isinstance(header, Header) and header.ts_ns is not None and clock is not None:
            if clock > INT64_MAX:
                header = Malformed("timestamp out of range")
            else:
                header.ts_ns = clock  # --deltatime: the sum of the deltas so far
        if isinstance(header, Malformed):
            count = self.counts.malformed.setdefault(header, [0, no])
            count[0] += 1
            self._skipping = True
            return
        if header is None:
            self._unparsed(no, line)
            return
        self._start(header, no, line)

    def _start(self, header: Header, no: int, line: str) -> None:
        self._current = header
        self._current_line = (no, line)
        if not header.weak and not self._timed:
            if self._timed is None and self._leading_anonymous and not self._flushed:
                self._drop_leading_anonymous()
            self._timed = header.ts_ns is not None

    def _drop_leading_anonymous(self) -> None:
        n, c = self._leading_anonymous, self.columns
        for name in c.as_dict():
            del getattr(c, name)[:n]
        self.counts.samples -= n
        self.counts.untimed -= n
        self.counts.no_process -= n
        self.counts.malformed["frames without a sample header line"] = [n, self._leading_line]
        self._extra = [(max(at - n, 0), value) for at, value in self._extra]
        self._leading_anonymous = 0

    def _unparsed(self, no: int, line: str, count: int = 1) -> None:
        self.counts.unparsed += count
        if self.counts.first_unparsed is None:
            self.counts.first_unparsed = (no, line[:120])

    def finish(self) -> None:
        """End the last sample (files need not end with a blank line)."""
        self._end_sample()
        if self.time_mode == "maybe":
            self._decide_time(None, final=True)

    def _line_time(self, line: str) -> int | None:
        """Follow the timestamps of ``perf script --deltatime`` (each line's time is the
        time since the line before it, whatever its kind, over the whole stream: perf keeps
        one previous time): the first timestamp decides whether the text may be such
        (``0.000000``, as --reltime prints too) and, once it is known to be, every timed
        line adds its delta to the clock, whose value this returns."""
        m = TIME.search(line)
        if m is None or len(m["sec"]) > 12:
            return None
        value = int(m["sec"]) * 1_000_000_000 + int(m["frac"].ljust(9, "0"))
        if self.time_mode is None:
            self.time_mode = "maybe" if value == 0 else "absolute"
            self.delta_decimals = len(m["frac"])
        if self.time_mode == "maybe":  # a line's delta; rows are added when decided
            self._extra.append((self._held_rows(), value))
            return None
        self.delta_lines += 1
        self._clock += value
        return self._clock

    def _held_rows(self) -> int:
        return sum(len(b["kind"]) for b in self.batches) + len(self.columns)

    def _decide_time(self, ts_ns: int | None, final: bool = False) -> None:
        """While the text may be --deltatime output, rows are held (and all of it goes
        through the line parser); each new row's time ``ts_ns`` decides: deltas go up and
        down, times (absolute or --reltime) only up. Rebuild the held rows' times when they
        are deltas: each row's time is the sum of the deltas of every timed line up to its
        own, in file order."""
        if ts_ns is not None:
            if self._last_raw is not None:
                self._pairs += 1
                self._down += ts_ns < self._last_raw
            self._last_raw = ts_ns
        if self._down >= 3 and self._down * 10 >= self._pairs:
            extra: dict[int, int] = {}
            for at, value in self._extra:
                extra[at] = extra.get(at, 0) + value
            held = [*self.batches, self.columns.as_dict()]
            rebuilt, clock, i = [], 0, 0
            for b in held:
                times = []
                for t in (b["ts_ns"].to_pylist() if hasattr(b["ts_ns"], "to_pylist")
                          else b["ts_ns"]):
                    clock += extra.get(i, 0)
                    times.append(None if t is None else clock)
                    i += 1
                rebuilt.append(times)
            clock += sum(v for at, v in extra.items() if at >= i)
            if clock <= INT64_MAX:
                for b, times in zip(self.batches, rebuilt, strict=False):
                    b["ts_ns"] = times
                self.columns.ts_ns = rebuilt[-1]
                self.time_mode, self._clock = "delta", clock
                self.counts.backwards, self._last_ts = 0, {}
                self.delta_lines = len(self._extra)
                self._extra = []
                return
        if final or self._pairs >= 2000 or self._down >= 3:
            self.time_mode = "absolute"
            self._extra = []

    def synthetic_pid(self, comm: str) -> int:
        """The stable synthetic pid of the process of ``comm`` (see SYNTHETIC_PID_BASE)."""
        pid = self.synthetic_pids.get(comm)
        if pid is None:
            offset = zlib.crc32(comm.encode("utf-8", "replace")) % SYNTHETIC_PID_BASE
            while SYNTHETIC_PID_BASE + offset in self._taken:
                offset = (offset + 1) % SYNTHETIC_PID_BASE
            pid = self.synthetic_pids[comm] = SYNTHETIC_PID_BASE + offset
            self._taken.add(pid)
        return pid

    def _end_sample(self) -> None:
        h = self._current
        if h is None:
            return
        self._current = None
        if h.weak and not (h.tail and parse_frame(h.tail)) and not (
                self._lines and parse_frame(self._lines[0])):
            # Not a header after all (no frame follows): count its lines as unrecognised.
            self._unparsed(*self._current_line, count=1 + len(self._lines))
            self._lines = []
            return
        self._seen_sample = True
        c = self.columns
        addr, fields = self._read_tail(h)
        stack, leaf = self._stack()
        args: dict[str, Any] = {}
        if h.event is not None:
            self.events[h.event] = self.events.get(h.event, 0) + 1
            args["event"] = h.event
        pid, tid = h.pid, h.tid
        if pid is None and h.comm:  # no pid printed: one synthetic process per comm
            self.counts.no_pid += 1
            pid = self.synthetic_pid(h.comm)
            tid = pid if tid is None else tid
        elif pid is None:
            self.counts.no_process += 1
        # A thread keeps its first name; a sample taken under another (after exec or a
        # rename) carries its own, as stackcollapse-perf folds by each sample's comm.
        if h.comm and self.threads.setdefault((pid, tid), h.comm) != h.comm:
            args["comm"] = h.comm
        if h.cpu is not None:
            args["cpu"] = h.cpu
        if h.misc is not None:
            args["misc"] = h.misc
        if addr is not None:
            args["addr"] = "0x" + addr.lower()
        if fields is not None:
            args["fields"] = fields
        if h.tail:  # a tracepoint: its payload
            c.kind.append("instant")
            c.category.append("host.instant")
            c.name.append(h.event or UNKNOWN_EVENT)
            args["payload"] = h.tail
            self.counts.tracepoints += 1
        else:
            c.kind.append("sample")
            c.category.append("cpu.sample")
            key = h.event or ""
            self.periods[key] = self.periods.get(key, False) or h.period is not None
            c.name.append(leaf or NO_STACK)
            self.counts.samples += 1
        if h.ts_ns is None:
            self.counts.untimed += 1
        elif self.time_mode != "delta":
            before = self._last_ts.get((pid, tid))
            self.counts.backwards += before is not None and h.ts_ns < before
            self._last_ts[(pid, tid)] = h.ts_ns
        c.ts_ns.append(h.ts_ns)
        c.pid.append(pid)
        c.tid.append(tid)
        c.value.append(float(h.period) if h.period is not None else 1.0)
        c.stack_id.append(stack)
        c.args.append(orjson.dumps(args).decode())
        if h.anonymous and self._leading_anonymous == len(c) - 1:
            if not self._leading_anonymous:
                self._leading_line = self._current_line[0]
            self._leading_anonymous += 1
        if self.time_mode == "maybe":
            self._decide_time(h.ts_ns)

    def _read_tail(self, h: Header) -> tuple[str | None, str | None]:
        """Read what follows the event on the header line of the sample ``h`` as perf prints
        it: the ip frame of a sample without callchain (``ip sym+off (dso)``), after
        ``-F +addr`` the sample address before it (``addr[ sym+off (dso)]``, then the ip
        frame or the callchain lines), other fields before the ip (``+data_src``,
        ``+weight``: kept as text), branch entries (``brstack``: counted), or else a
        tracepoint's payload (left in ``h.tail``). Keep the one-line frame for ``_stack``
        and return (address, other fields)."""
        tail = h.tail
        if not tail:
            return None, None
        words = tail.split()
        branches = 0
        while branches < len(words) and BRANCH.match(words[-1 - branches]):
            branches += 1
        if branches:  # -F brstack: from/to/flags entries, after the ip frame if any
            self.counts.branch_samples += 1
            self.counts.branch_entries += branches
            tail = " ".join(words[:-branches]) if branches < len(words) else ""
            if not tail:
                h.tail = ""
                return None, None
        framed = bool(self._lines) and parse_frame(self._lines[0]) is not None
        addr = fields = None
        if framed:
            # perf prints the ip on the header line only without a callchain: what is there
            # is an address (alone, or with the symbol it falls in, for page faults), or
            # other fields (+data_src, +weight).
            if HEX.match(tail) or ((frame := parse_frame(tail)) is not None
                                   and frame[1] is not None):
                addr, tail = tail.split(None, 1)[0], ""
            elif SAMPLE_FIELDS.match(tail):
                fields, tail = tail, ""
        elif (cut := _ip_frame_at(tail)) is not None:
            # The ip frame, right-aligned after the fields before it.
            before, tail = tail[:cut].strip(), tail[cut:]
            if HEX.match(before) or ((frame := parse_frame(before)) is not None
                                     and frame[1] is not None):
                addr = before.split(None, 1)[0]
            else:
                fields = before
        elif HEX.match(tail):  # an address alone, and no ip printed
            return None, None
        if tail:
            frame = parse_frame(tail)
            if frame is None:
                return None, None  # a tracepoint's payload
            self._tail_frame = frame
        h.tail = ""
        if fields is not None:
            self.counts.field_samples += 1
        return addr, fields

    def _stack(self) -> tuple[int | None, str | None]:
        """The call-site id and leaf name of the current sample's frames."""
        lines, self._lines = self._lines, []
        if self._tail_frame is not None:
            frame, self._tail_frame = self._tail_frame, None
            return self.stacks.stack_of([frame]), frame[0]
        if not lines:
            return None, None
        stack, leaf, detail = self.stack_of_text("\n".join(lines))
        self.counts.detail_lines += detail  # -F +srcline and other per-frame lines
        return stack, leaf

    def stack_of_text(self, text: str) -> tuple[int | None, str | None, int]:
        """The call-site id and leaf name of a sample's frame lines ``text`` (newline
        separated), and how many of them are no frame; interned on first use."""
        hit = self._stack_cache.get(text)
        if hit is None:
            lines = text.split("\n")
            parsed = [(line, f) for line in lines if (f := parse_frame(line)) is not None]
            frames = [f for _, f in parsed]
            if "(inlined)" in text:
                frames = _place_inlined(parsed)
            stack = self.stacks.stack_of(frames)
            hit = (stack, frames[0][0] if frames else None, len(lines) - len(frames))
            if len(self._stack_cache) >= 100_000:
                self._stack_cache.clear()
            self._stack_cache[text] = hit
        return hit

    def add_batch(self, columns: dict[str, Any]) -> None:
        """Rows parsed elsewhere (column-wise), after the rows parsed so far."""
        if len(self.columns):
            self.batches.append(self.take_columns().as_dict())
        self.batches.append(columns)

    def take_batches(self, min_rows: int = 0) -> list[dict[str, Any]]:
        """The rows ready to leave, the line parser's own once at least ``min_rows``."""
        if self.time_mode == "maybe":
            return []  # held until the times are known to be deltas or not
        if len(self.columns) and len(self.columns) >= min_rows:
            self.batches.append(self.take_columns().as_dict())
        out, self.batches = self.batches, []
        return out

    def take_columns(self) -> Columns:
        """The rows parsed so far; the parser starts a new batch."""
        out, self.columns = self.columns, Columns()
        self._flushed = self._flushed or bool(len(out))
        return out
