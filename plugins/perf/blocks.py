"""``perf script`` text a block of lines at a time, column-wise.

A block (some megabytes of whole lines) is cut into records: the runs of lines between empty
lines, one sample each. Every record's header is tokenized and checked with numpy over the
block's header bytes, and its frame lines are looked up as one text per distinct stack
(Arrow's hash kernel), so Python runs once per distinct stack, comm and event, not once per
line. A record the column-wise path does not fully understand (a comment, a tracepoint
payload, a frame on the header line, a damaged number, a line perf would not print ...) goes
through the line parser instead, in file order: the line parser defines the behaviour, and
the column-wise path only takes records whose outcome it reproduces exactly.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.perf.parser import NO_STACK, PerfScriptParser, _looks_like_header

BLOCK_BYTES = 8 << 20
# Runs of fewer column-wise records than this go through the line parser: the column-wise
# path has a fixed cost per run, which would dominate in a file that alternates.
MIN_RUN = 32

SPACE, HASH, DOT, COLON, SLASH, LBRACKET, RBRACKET = b" #.:/[]"
# Bytes of an event name's first character: a letter or an underscore.
_EVENT_FIRST = np.zeros(256, bool)
_EVENT_FIRST[list(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")] = True


class Readable(Protocol):
    """A binary stream that reads into a buffer (files, pipes, gzip streams)."""

    def readinto(self, buffer: memoryview, /) -> int | None: ...


def read_blocks(raw: Readable, size: int | None = None) -> Iterator[tuple[bytearray, int,
                                                                          bool]]:
    """Read ``raw`` in blocks of whole lines (``size`` bytes, ``BLOCK_BYTES`` by default,
    more for a longer line): ``(buffer, length, whole)``, the block being
    ``buffer[:length]``, ``whole`` true when it ends at an empty line or at the end of the
    input (no record runs on into the next block). The buffer is reused: a block is valid
    until the next one is asked for."""
    buf = bytearray(size or BLOCK_BYTES)
    have, eof = 0, False
    while True:
        while have < len(buf) and not eof:
            with memoryview(buf) as view, view[have:] as free:
                n = raw.readinto(free)
            if n:
                have += n
            else:
                eof = True
        if not have:
            return
        if eof:
            yield buf, have, True
            return
        cut = buf.rfind(b"\n\n", 0, have)
        whole = cut >= 0
        end = cut + 2 if whole else buf.rfind(b"\n", 0, have) + 1
        if end <= 0:  # a line longer than the buffer
            buf = buf + bytes(len(buf))
            continue
        yield buf, end, whole
        buf[:have - end] = buf[end:have]
        have -= end


@dataclass
class _Headers:
    """Sample header fields of a block's records, one entry per record; ``ok`` marks the
    headers of the one shape the column-wise path reads (see ``_parse_headers``)."""

    ok: np.ndarray
    ts_ns: np.ndarray
    pid: np.ndarray  # -1: not printed
    tid: np.ndarray
    cpu: np.ndarray  # -1: not printed
    period: np.ndarray  # -1: not printed
    comm: pa.Array  # "" where not ok
    event: pa.Array


_POW10 = 10 ** np.arange(19, dtype=np.int64)
_PAD = 16
# Per digit count 0 to 8: the bytes of a little-endian 8-byte word that hold its last that
# many characters.
_KEEP = np.array([0] + [((1 << (8 * k)) - 1) << (8 * (8 - k)) for k in range(1, 9)],
                 np.uint64)


def _bytes(value: int) -> np.uint64:
    return np.uint64(int.from_bytes(bytes([value]) * 8, "little"))


_ZERO, _HIGH, _ABOVE_ZERO, _ABOVE_NINE = _bytes(0x30), _bytes(0x80), _bytes(0x50), _bytes(0x46)


class _Digits:
    """Decimal numbers of up to 16 ASCII digits, read and checked eight characters at a time:
    a span is loaded as (at most) two 8-byte words whose bytes are tested and combined in
    parallel, with no pass over the characters."""

    def __init__(self, chars: np.ndarray) -> None:
        padded = np.zeros(len(chars) + 2 * _PAD, np.uint8)
        padded[_PAD:_PAD + len(chars)] = chars
        self._padded = padded  # the words below are a view of it
        # words[i]: the 8 bytes padded[i:i+8] as one little-endian word.
        self.words = np.ndarray((len(padded) - 7,), "<u8", padded, 0, (1,))

    def __call__(self, start: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(value, ok)``: the numbers at ``chars[start:start+length]``, ``ok`` where the
        span is 1 to 16 characters, all digits."""
        ok = (length >= 1) & (length <= 16)
        length = np.clip(length, 0, 16)
        end = start + length
        value, digits = self._eight(self.words[end + _PAD - 8], np.minimum(length, 8))
        ok &= digits
        if (length > 8).any():
            high, digits = self._eight(self.words[end + _PAD - 16], np.maximum(length - 8, 0))
            value += high * np.uint64(100_000_000)
            ok &= digits
        return value.astype(np.int64), ok

    @staticmethod
    def _eight(word: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keep = _KEEP[count]
        x = word & keep
        # Per kept byte (ASCII, so no carry leaves it): at least '0', and not above '9'.
        high = _HIGH & keep
        digits = ((x + (_ABOVE_ZERO & keep)) & ~(x + (_ABOVE_NINE & keep)) & high) == high
        x -= _ZERO & keep
        x = (x * np.uint64(10) + (x >> np.uint64(8))) & np.uint64(0x00FF00FF00FF00FF)
        x = (x * np.uint64(100) + (x >> np.uint64(16))) & np.uint64(0x0000FFFF0000FFFF)
        return (x * np.uint64(10000) + (x >> np.uint64(32))) & np.uint64(0xFFFFFFFF), digits


def _parse_headers(lines: pa.Array) -> _Headers:
    """Read the header ``lines`` (each with its newline, but for a last line without one) of
    the shape perf prints by default, ``comm [pid/]tid [[cpu]] secs.frac: [period] event:``:
    space-separated printable ASCII, nothing after the event. Any other line is left to the
    line parser (``ok`` false), and so is any line where the line parser's reading could
    differ: a number too long to be sure of its range, a second token that may read as a
    timestamp, comm words more than one space apart."""
    n = len(lines)
    offsets = np.frombuffer(lines.buffers()[1], np.int32, n + 1, lines.offset * 4)
    offsets = offsets.astype(np.int64)
    chars = np.frombuffer(lines.buffers()[2], np.uint8, int(offsets[-1]))
    row_start, row_end = offsets[:-1], offsets[1:]
    total = len(chars)
    if not n or not total:
        return _empty_headers(n)
    head = chars[np.minimum(row_start, total - 1)]
    ok = (row_end > row_start) & (head != 10) & (head != HASH)  # not empty, not a comment
    bad = (chars - np.uint8(32)) > 94  # not printable ASCII
    ends_line = chars[row_end - 1] == 10
    if np.count_nonzero(bad) != np.count_nonzero(ends_line):  # besides the newlines
        ok &= np.add.reduceat(bad, row_start, dtype=np.int32) == ends_line
    # Tokens: runs of bytes above the space (rows end with a newline, so none spans two).
    word = np.zeros(total + 2, bool)
    np.greater(chars, SPACE, out=word[1:-1])
    edges = np.flatnonzero(word[1:] != word[:-1])
    tok_start, tok_end = edges[0::2], edges[1::2]
    if not len(tok_start):
        return _empty_headers(n)
    tok_off = np.append(np.searchsorted(tok_start, row_start), len(tok_start))
    ntok = np.diff(tok_off)
    tok_row = np.repeat(np.arange(n), ntok)
    ok &= ntok >= 4  # comm, tid, time, event at least
    tok_len = tok_end - tok_start
    first, last_char = chars[tok_start], chars[tok_end - 1]
    number = _Digits(chars)

    def at(index: np.ndarray) -> np.ndarray:
        return chars[np.clip(index, 0, total - 1)]

    # Timestamp tokens, secs.frac: with 6 to 9 decimals. The line parser reads the first,
    # so there must be one only; a token with too many seconds' digits to check counts.
    cand = np.flatnonzero((last_char == COLON) & (tok_len >= 9))
    c_start, c_end = tok_start[cand], tok_end[cand]
    dot = np.full(len(cand), -1, np.int64)
    for decimals in range(6, 10):
        where = c_end - 2 - decimals
        dot = np.where((dot < 0) & (where > c_start) & (at(where) == DOT), where, dot)
    secs, secs_ok = number(c_start, dot - c_start)
    frac, frac_ok = number(dot + 1, c_end - 2 - dot)
    timed = (dot > 0) & frac_ok & (secs_ok | (dot - c_start > 16))
    ok &= np.bincount(tok_row[cand[timed]], minlength=n) == 1
    rows_of = tok_row[cand[timed]]
    t_time = np.zeros(n, np.int64)
    t_time[rows_of] = cand[timed]
    ts_ns = np.zeros(n, np.int64)
    decimals = (c_end - 2 - dot)[timed]
    ts_ns[rows_of] = secs[timed] * 1_000_000_000 + frac[timed] * _POW10[9 - decimals]
    in_range = np.zeros(n, bool)
    in_range[rows_of] = secs_ok[timed] & ((dot - c_start)[timed] <= 9)
    ok &= in_range

    t_event = np.maximum(tok_off[1:] - 1, 0)
    ok &= ((last_char[t_event] == COLON) & (tok_len[t_event] >= 2)
           & _EVENT_FIRST[first[t_event]])
    has_period = t_time == t_event - 2
    t_period = np.maximum(t_event - 1, 0)
    period, period_ok = number(tok_start[t_period], tok_len[t_period])
    ok &= (t_time == t_event - 1) | (has_period & period_ok)
    period = np.where(has_period, period, -1)
    t_cpu = np.maximum(t_time - 1, 0)
    cpu, cpu_ok = number(tok_start[t_cpu] + 1, tok_len[t_cpu] - 2)
    has_cpu = ((first[t_cpu] == LBRACKET) & (last_char[t_cpu] == RBRACKET) & cpu_ok
               & (tok_len[t_cpu] <= 11))
    cpu = np.where(has_cpu, cpu, -1)
    t_ids = np.maximum(np.where(has_cpu, t_time - 2, t_time - 1), 0)
    ok &= t_ids > tok_off[:-1]  # a comm before the ids
    ids_start, ids_end = tok_start[t_ids], tok_end[t_ids]
    slash = np.full(n, -1, np.int64)
    for k in range(1, 10):
        where = ids_start + k
        slash = np.where((slash < 0) & (where < ids_end - 1) & (at(where) == SLASH), where,
                         slash)
    pair = slash > 0
    tid_start = np.where(pair, slash + 1, ids_start)
    tid, tid_ok = number(tid_start, ids_end - tid_start)
    pid, pid_ok = number(ids_start, slash - ids_start)
    ok &= tid_ok & (ids_end - tid_start <= 9) & (~pair | (pid_ok & (slash - ids_start <= 9)))
    pid = np.where(pair, pid, -1)
    # The comm: the tokens before the ids, as the line parser joins them (one space apart).
    t_comm = tok_off[:-1]
    comm_start = tok_start[np.minimum(t_comm, len(tok_start) - 1)]
    comm_end = tok_end[np.maximum(t_ids - 1, 0)]
    len_before = np.zeros(len(tok_start) + 1, np.int64)
    np.cumsum(tok_len, out=len_before[1:])
    words = t_ids - t_comm
    ok &= comm_end - comm_start == len_before[t_ids] - len_before[np.minimum(
        t_comm, len(tok_start))] + words - 1

    comm = _span_strings(chars, np.where(ok, comm_start, 0), np.where(ok, comm_end, 0))
    event = _span_strings(chars, np.where(ok, tok_start[t_event], 0),
                          np.where(ok, tok_end[t_event] - 1, 0))
    return _Headers(ok, ts_ns, pid, tid, cpu, period, comm, event)


def _empty_headers(n: int) -> _Headers:
    zeros = np.zeros(n, np.int64)
    empty = pa.array([""] * n, pa.string())
    return _Headers(np.zeros(n, bool), zeros, zeros - 1, zeros, zeros - 1, zeros - 1, empty,
                    empty)


def _frame_lines_only(text: str) -> bool:
    """Whether the line parser takes every line of ``text`` (a record after its header) as a
    line of the same sample."""
    return all((line[:1] == "\t" or (line[:1] == " " and not _looks_like_header(line)))
               and line.strip() for line in text.split("\n"))


class BlockParser:
    """Feeds a :class:`PerfScriptParser` block by block, reading what it can column-wise."""

    def __init__(self, parser: PerfScriptParser, min_run: int | None = None) -> None:
        self.parser = parser
        self.min_run = MIN_RUN if min_run is None else min_run
        self.line_no = 1  # of the next block's first line
        self._continues = False  # the last block ended inside a record

    def feed(self, buf: bytearray, size: int, whole: bool) -> None:
        """Parse the block ``buf[:size]`` (whole lines; see :func:`read_blocks`)."""
        first_line = self.line_no
        continues, self._continues = self._continues, not whole
        data = np.frombuffer(buf, np.uint8, size)
        if not whole or buf.find(b"\r", 0, size) >= 0:
            # A line end a text stream also splits at (a lone CR), or a record longer than a
            # block: the line parser reads the block.
            self.line_no += self._feed_stream(data, first_line)
            return
        self._feed_records(data, first_line, continues)

    def _feed_stream(self, data: np.ndarray, first_line: int) -> int:
        """The line parser reads ``data`` as a text stream splits and decodes it; return the
        number of lines."""
        lines = io.StringIO(data.tobytes().decode("utf-8", "replace"), newline="").readlines()
        self.parser.feed(lines, first_line)
        return len(lines)

    def _feed_records(self, data: np.ndarray, first_line: int, continues: bool) -> None:
        """Read the records of a block of whole records (no CR in it) column-wise where they
        have the default layout, through the line parser where not, in file order."""
        p = self.parser
        size = len(data)
        newlines = np.flatnonzero(data == 10)
        self.line_no += len(newlines)
        counted = len(newlines)
        if not len(newlines) or newlines[-1] != size - 1:  # the last line has no newline
            newlines = np.append(newlines, size)
        line_start = np.zeros(len(newlines), np.int64)
        line_start[1:] = newlines[:-1] + 1
        empty = newlines == line_start
        # A record starts at the block's start and at each line after an empty one.
        first = np.concatenate(([0], np.flatnonzero(~empty[1:] & empty[:-1]) + 1))
        n = len(first)
        if empty.all():
            self._feed_text(data, first_line)
            return
        # A record's lines are all filled up to the empty ones that end it.
        blank = np.append(np.flatnonzero(empty), len(newlines))
        last = blank[np.searchsorted(blank, first)] - 1
        last = np.maximum(last, first)  # a record of empty lines has its first one
        head_start, head_end = line_start[first], newlines[first]
        if p.time_mode in (None, "maybe"):
            # Until the first timestamp, and while it is not known whether the times are
            # --deltatime deltas (within 2,000 samples), the line parser reads the records
            # one at a time; then the rest of the block is read knowing.
            at = 0
            while at < n and p.time_mode in (None, "maybe"):
                end = int(head_start[at + 1]) if at + 1 < n else size
                self._feed_text(data[head_start[at]:end], first_line + int(first[at]))
                at += 1
            if at < n:
                self.line_no -= counted - int(first[at])
                self._feed_records(data[head_start[at]:], first_line + int(first[at]), False)
            return
        framed = last > first
        stack_start = np.where(framed, head_end + 1, head_end)
        stack_end = np.where(framed, newlines[last], head_end)
        lines = _span_strings(data, head_start, np.minimum(head_end + 1, size))
        headers = _parse_headers(lines)
        ok = headers.ok
        if continues:
            ok[0] = False  # the rest of a record the line parser began
        text = lines.buffers()[2].to_pybytes()
        if b"PERF_RECORD_" in text or b"LOST" in text:  # lines the line parser skips
            ok &= ~np.asarray(pc.match_substring(lines, "PERF_RECORD_"))
            ok &= ~np.asarray(pc.match_substring_regex(lines, r"\bLOST\b"))
        encoded = pc.dictionary_encode(_span_strings(data, np.where(ok, stack_start, 0),
                                                     np.where(ok, stack_end, 0)))
        try:
            encoded.dictionary.validate(full=True)
        except pa.ArrowInvalid:  # not UTF-8: the line parser decodes it as a stream would
            self._feed_stream(data, first_line)
            return
        codes = np.asarray(encoded.indices)
        texts = encoded.dictionary.to_pylist()
        cache = p._stack_cache
        regular = np.array([not text or text in cache or _frame_lines_only(text)
                            for text in texts], bool)
        ok &= regular[codes]
        if not p._timed:
            # Until a timed sample fixes the layout the line parser decides, up to and
            # including the first record the column-wise path could take.
            fixing = np.flatnonzero(ok)
            ok[: fixing[0] + 1 if len(fixing) else n] = False
        record_end = np.append(head_start[1:], size)
        at = 0
        for run_start, run_end in _runs(ok, self.min_run):
            if run_start > at:
                self._feed_text(data[head_start[at]:record_end[run_start - 1]],
                                first_line + int(first[at]))
            self._emit(slice(run_start, run_end), headers, codes, texts)
            at = run_end
        if at < n:
            self._feed_text(data[head_start[at]:size], first_line + int(first[at]))

    def _feed_text(self, data: np.ndarray, first_line: int) -> None:
        """Records for the line parser (no CR in them: split at newlines only; cut at line
        ends, so that they decode as in a stream)."""
        lines = data.tobytes().decode("utf-8", "replace").split("\n")
        if lines[-1] == "":
            lines.pop()
        self.parser.feed(lines, first_line)

    def _emit(self, rows: slice, h: _Headers, codes: np.ndarray, texts: list[str]) -> None:
        """Rows of the column-wise records ``rows``, with their effects on the parser's
        state (threads, sampled events, synthetic pids, counts) in file order."""
        p = self.parser
        run_codes = codes[rows]
        m = len(run_codes)
        # Call sites are numbered in order of first use: intern stacks in that order.
        site = np.full(len(texts), -1, np.int64)
        leaf_of: dict[int, str] = {}
        detail = np.zeros(len(texts), np.int64)
        for code in _first_seen(run_codes).tolist():
            text = texts[code]
            stack, leaf, lines = p.stack_of_text(text) if text else (None, None, 0)
            site[code] = -1 if stack is None else stack
            leaf_of[code] = leaf or NO_STACK
            detail[code] = lines
        p.counts.detail_lines += int(detail[run_codes].sum())
        leaves = list(dict.fromkeys(leaf_of.values()))
        leaf_index = {name: i for i, name in enumerate(leaves)}
        name_of_code = np.zeros(len(texts), np.int32)
        for code, leaf in leaf_of.items():
            name_of_code[code] = leaf_index[leaf]
        name = pa.DictionaryArray.from_arrays(pa.array(name_of_code[run_codes]),
                                              pa.array(leaves, pa.string()))
        stack_id = site[run_codes]

        comm_enc = pc.dictionary_encode(h.comm[rows.start:rows.stop])
        comm_codes = np.asarray(comm_enc.indices)
        comms = comm_enc.dictionary.to_pylist()
        ev_enc = pc.dictionary_encode(h.event[rows.start:rows.stop])
        ev_codes = np.asarray(ev_enc.indices)
        events = ev_enc.dictionary.to_pylist()
        period = h.period[rows]
        # Sampled events, counted in order of first appearance (the dictionary's order).
        counts = np.bincount(ev_codes, minlength=len(events))
        periodic = np.bincount(ev_codes, weights=period >= 0, minlength=len(events)) > 0
        for code, event in enumerate(events):
            p.events[event] = p.events.get(event, 0) + int(counts[code])
            p.periods[event] = p.periods.get(event, False) or bool(periodic[code])
        # No pid printed: one synthetic process per comm, numbered in order of first use.
        pid = h.pid[rows].copy()
        no_pid = pid < 0
        if no_pid.any():
            synthetic = np.zeros(len(comms), np.int64)
            unnamed = comm_codes[no_pid]
            for code in _first_seen(unnamed).tolist():
                synthetic[code] = p.synthetic_pid(comms[code])
            pid[no_pid] = synthetic[unnamed]
            p.counts.no_pid += int(no_pid.sum())
        tid = h.tid[rows]
        # A thread keeps its first name; rows under another name carry it in their args.
        key = ((pid + 2**31).astype(np.uint64) << np.uint64(32)) | (tid + 2**31).astype(
            np.uint64)
        pair_of = np.asarray(pc.dictionary_encode(pa.array(key)).indices)
        comm_index = {c: i for i, c in enumerate(comms)}
        firsts = _first_rows(pair_of)
        known = np.empty(len(firsts), np.int64)
        for pair, row in enumerate(firsts.tolist()):
            kept = p.threads.setdefault((int(pid[row]), int(tid[row])), comms[comm_codes[row]])
            known[pair] = comm_index.get(kept, -1)
        renamed = known[pair_of] != comm_codes
        if p.time_mode != "delta":
            _count_backwards(p, pair_of, firsts, pid, tid, h.ts_ns[rows])

        ev_json = pa.array(['{"event":' + orjson.dumps(e).decode() for e in events])
        comm_json = pa.array([',"comm":' + orjson.dumps(c).decode() for c in comms] + [""])
        parts = [ev_json.take(pa.array(ev_codes)),
                 comm_json.take(pa.array(np.where(renamed, comm_codes, len(comms))))]
        cpu = h.cpu[rows]
        with_cpu = cpu >= 0
        if with_cpu.any():
            digits = pc.cast(pa.array(cpu, mask=~with_cpu), pa.string())
            parts.append(pc.fill_null(pc.binary_join_element_wise(',"cpu":', digits, ""),
                                      ""))
        args = pc.binary_join_element_wise(*parts, "}", "")

        ts_ns = h.ts_ns[rows]
        if p.time_mode == "delta":  # --deltatime: add up the deltas (see parser._line_time)
            ts_ns = p._clock + np.cumsum(ts_ns)
            p._clock = int(ts_ns[-1])
            p.delta_lines += m
        p.counts.samples += m
        p._seen_sample = True
        zeros = pa.array(np.zeros(m, np.int32))
        p.add_batch({
            "kind": pa.DictionaryArray.from_arrays(zeros, pa.array(["sample"])),
            "category": pa.DictionaryArray.from_arrays(zeros, pa.array(["cpu.sample"])),
            "name": name,
            "ts_ns": pa.array(ts_ns),
            "pid": pa.array(pid),
            "tid": pa.array(tid),
            "value": pa.array(np.where(period >= 0, period, 1).astype(np.float64)),
            "stack_id": pa.array(stack_id, mask=stack_id < 0),
            "args": args,
        })


def _count_backwards(p: PerfScriptParser, pair_of: np.ndarray, firsts: np.ndarray,
                     pid: np.ndarray, tid: np.ndarray, ts_ns: np.ndarray) -> None:
    """Count the rows timed before the row before them in their thread (``pair_of``, whose
    first rows are ``firsts``), as the line parser does, and keep each thread's last time."""
    order = np.argsort(pair_of, kind="stable")
    group, times = pair_of[order], ts_ns[order]
    starts = np.ones(len(order), bool)
    starts[1:] = group[1:] != group[:-1]
    previous = np.empty_like(times)
    previous[1:] = times[:-1]
    last = p._last_ts
    keys = [(int(pid[row]), int(tid[row])) for row in firsts.tolist()]
    head = np.flatnonzero(starts)
    previous[head] = [last.get(key, t) for key, t in zip(keys, times[head].tolist(),
                                                         strict=True)]
    p.counts.backwards += int(np.count_nonzero(times < previous))
    ends = np.append(head[1:], len(order)) - 1
    for key, t in zip(keys, times[ends].tolist(), strict=True):
        last[key] = t


def _first_seen(values: np.ndarray) -> np.ndarray:
    """The distinct ``values`` in order of first appearance."""
    return np.asarray(pc.unique(pa.array(values)))


def _first_rows(codes: np.ndarray) -> np.ndarray:
    """Where each code first appears, for codes numbered in order of first appearance (as
    dictionary encoding numbers them): the rows whose code is above all before it."""
    seen = np.maximum.accumulate(codes)
    return np.flatnonzero(codes > np.concatenate(([-1], seen[:-1])))


def _span_strings(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """Spans of ``data`` in increasing order as a string array, sharing ``data``'s memory:
    the spans and the gaps between them are one string array, of which every other element
    is taken."""
    n = len(starts)
    offsets = np.empty(2 * n + 1, np.int32)
    offsets[0:-1:2] = starts
    offsets[1::2] = ends
    offsets[-1] = ends[-1] if n else 0
    # Spans of records left to the line parser are (0, 0): keep the offsets increasing.
    offsets[:-1] = np.maximum.accumulate(offsets[:-1])
    offsets[-1] = offsets[-2] if n else 0
    both = pa.StringArray.from_buffers(2 * n, pa.py_buffer(offsets), pa.py_buffer(data))
    return both.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int32)))


def _runs(ok: np.ndarray, shortest: int) -> Iterator[tuple[int, int]]:
    """``[start, end)`` of the runs of true values of ``ok`` at least ``shortest`` long."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], ok.view(np.int8), [0]))))
    for start, end in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
        if end - start >= shortest:
            yield start, end
