"""A typed, compiled decode of a Kineto document into columns, block by block.

msgspec decodes the events of each block of text into small typed Structs (no dict per
event) whose ``args`` stay raw JSON text; the keys the model needs are decoded from the raw
args of the events that need them with a second small Struct. The text is consumed in
blocks split between two events, so neither the whole text nor a Python object per event of
the whole document is ever held.

Timestamps are read as floats while a float holds them to the ns; from the first block with
one that it does not (absolute epoch µs with a fraction, as PyTorch wrote them from 2024-03),
``ts`` and ``dur`` are taken as their decimal text and converted exactly by Arrow's decimal
cast.

The typed decode accepts only well-typed documents. Anything else (a value of an unexpected
type, an args that is not an object, a timestamp with more than three decimals that a float
cannot hold, JSON that needs repair) makes ``decode`` return None, and the reader takes the
forgiving path, which coerces, counts and repairs.
"""

from __future__ import annotations

import codecs
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from itertools import count
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.kineto.categories import AUTOGRAD_KEY, DEVICE_CATEGORIES, map_category
from tracekit.plugins.kineto.events import ColumnEvents, Sparse
from tracekit.plugins.kineto.fields import INT64
from tracekit.plugins.kineto.loading import LONE_SURROGATE
from tracekit.plugins.kineto.timestamps import MAX_US, SAFE_FLOAT_US, Micros

# The "traceEvents" key of the top object: its quote follows '{' or ',' (inside a JSON string
# a quote is always escaped), so this cannot match inside a string.
_EVENTS_KEY = re.compile(rb'[{,]\s*"traceEvents"\s*:\s*\[')
# Between two events. A newline is never inside a JSON string, and a split at a wrong depth
# leaves brackets unbalanced, so that a bad split fails to decode instead of misreading.
_BETWEEN = re.compile(rb"\}\s*,\s*\{")
_LAST_EVENT = re.compile(rb"\}\s*\]")
_EMPTY_OBJECT = re.compile(rb"\{\s*\}")
_SPACE = re.compile(rb"\s*")
_WHITESPACE = frozenset(b" \t\n\r\x0b\x0c")  # what bytes.strip strips
INT32_MAX = 2**31 - 1


class Unfit(Exception):
    """The document needs the forgiving path."""


class _NotEvents(Exception):
    """A block's text up to a split point is not a JSON array of events."""


class _Inexact(Exception):
    """A float timestamp of the block is too large to give its ns exactly."""

# Bytes of text decoded at a time: what memory holds beyond the columns. A block's structs
# fill Python's small-object arenas, and an arena stays held while any object in it lives
# (the block's columns are made among them): at 1M events, 4 MiB blocks end the read with
# 31 arenas held instead of 49, and peak 15-30 MiB lower than 16 MiB blocks, at the same CPU.
BLOCK = 4 << 20
_TAIL = 1 << 20  # how far back from a block's end to look for a split


class _Event(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: int | float | None = None
    dur: int | float | None = None
    id: int | None = None
    args: msgspec.Raw = msgspec.Raw()


class _ExactEvent(_Event, gc=False):
    """An event whose times are kept as their decimal text (see ``_exact_micros``)."""

    ts: msgspec.Raw = msgspec.Raw()
    dur: msgspec.Raw = msgspec.Raw()


class _SliceArgs(msgspec.Struct, gc=False):
    """The args keys of every X event that the model reads: its correlation (a column) and
    autograd's sequence number (which ops autograd recorded)."""

    correlation: int | None = None
    sequence: int | float | str | bool | None = msgspec.field(default=None,
                                                              name=AUTOGRAD_KEY)


class _DeviceArgs(msgspec.Struct, gc=False):
    """The args keys of device work (kernels, copies, memsets, syncs) that become columns."""

    device: int | None = None
    stream: int | None = None
    bytes: int | None = None
    registers: int | None = msgspec.field(default=None, name="registers per thread")
    shared: int | None = msgspec.field(default=None, name="shared memory")
    grid: list[int] | None = None
    block: list[int] | None = None


class _InstantArgs(msgspec.Struct, gc=False):
    """The args keys of [memory] instants that become columns or counter rows."""

    Bytes: int | None = None
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    allocated: int | float | None = msgspec.field(default=None, name="Total Allocated")
    reserved: int | float | None = msgspec.field(default=None, name="Total Reserved")


_DEVICE_KEYS = {"device": "device", "stream": "stream", "bytes": "bytes",
                "registers": "registers per thread", "shared": "shared memory"}
_INSTANT_KEYS = {"Bytes": "Bytes", "device_type": "Device Type", "device_id": "Device Id"}
_INSTANT_NUMBERS = {"allocated": "Total Allocated", "reserved": "Total Reserved"}
_FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id")
_PH, _CAT, _NAME = attrgetter("ph"), attrgetter("cat"), attrgetter("name")
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, pa.ArrowInvalid,
                  pa.ArrowTypeError, OverflowError, UnicodeDecodeError, RecursionError,
                  orjson.JSONDecodeError)
_events = msgspec.json.Decoder(list[_Event])
_exact_events = msgspec.json.Decoder(list[_ExactEvent])
# One args after another (see _decode_rows): objects, or the null of a null args.
_slice_args = msgspec.json.Decoder(_SliceArgs | None)
_device_args = msgspec.json.Decoder(_DeviceArgs | None)
_instant_args = msgspec.json.Decoder(_InstantArgs | None)


def decode(blocks: Iterable[bytes]) -> tuple[dict[str, Any], ColumnEvents, list[str]] | None:
    """The top-level fields, the events as columns, and notes on repairs; None when the
    document is not one that the typed decode reads exactly as the forgiving path would."""
    try:
        return _Decoder().run(iter(blocks))
    except (Unfit, _NotEvents, *_DECODE_ERRORS):
        return None


class _Decoder:
    def __init__(self) -> None:
        # Each phase's blocks apart, in order of first appearance: the columns come out
        # grouped by phase, so that the conversion takes each phase as a slice, not a copy.
        self.phases: dict[str | None, list[dict[str, Any]]] = {}
        self.n = 0
        #: Whether times are read from their decimal text (since the first block that needs it).
        self.exact = False

    def run(self, blocks: Iterator[bytes]) -> tuple[dict[str, Any], ColumnEvents, list[str]]:
        notes: list[str] = []
        first = b""
        for block in blocks:
            first += block
            if len(first) >= 3 or not block:
                break
        if first.startswith(codecs.BOM_UTF8):
            first = first[len(codecs.BOM_UTF8):]
            notes.append("skipped a UTF-8 byte-order mark")
        start = _SPACE.match(first).end()  # type: ignore[union-attr]
        carry: bytes | memoryview
        if first[start:start + 1] == b"[":
            prefix, carry = None, memoryview(first)[start + 1:]
        else:
            prefix, carry = self._head(first, blocks)
        # carry: the events not decoded yet. The events of carry and the next block, up to
        # the last split in their final _TAIL bytes, are decoded as one chunk, framed by a
        # '[' and a ']' written in place of the ',' after its last event.
        for block in blocks:
            if len(block) < _TAIL:
                block, carry = b"".join((carry, block)), b""
            cut = _last_split(block)
            if cut is None:
                carry = b"".join((carry, block))
                continue
            try:
                # A copy of the chunk, framed: the raw args point into it.
                self._events(b"".join((b"[", carry, memoryview(block)[:cut + 1], b"]")))
            except _NotEvents:
                # The split was past the end of the events (between objects of a later
                # top-level field) or inside a string: the tail sorts it out.
                carry = b"".join((carry, block, *blocks))
                break
            carry = block[block.index(b"{", cut + 1):]
        top = self._tail(bytes(carry), prefix)
        return top, self._columns(), notes

    def _head(self, pending: bytes, blocks: Iterator[bytes]) -> tuple[bytes, memoryview]:
        """Read up to the '[' that opens traceEvents; return the text before the key, and
        the text after the '['."""
        while True:
            m = _EVENTS_KEY.search(pending)
            if m:
                return pending[:m.start() + 1], memoryview(pending)[m.end():]
            block = next(blocks, None)
            if block is None:
                raise Unfit
            pending += block

    def _tail(self, rest: bytes, prefix: bytes | None) -> dict[str, Any]:
        """Decode the last events and the top-level fields that follow the events."""
        start = _SPACE.match(rest).end()  # type: ignore[union-attr]
        ends = [start] if rest.startswith(b"]", start) else []
        ends += [m.end() - 1 for m in _LAST_EVENT.finditer(rest)]
        for end in ends:
            after = rest[end + 1:]
            if prefix is None:
                if after.strip():
                    continue
                top: dict[str, Any] = {}
            else:
                try:
                    top = orjson.loads(prefix + b'"traceEvents":[]' + after)
                except orjson.JSONDecodeError:
                    continue
                if type(top) is not dict or top.get("traceEvents") != []:
                    raise Unfit
                del top["traceEvents"]
            while end and rest[end - 1] in _WHITESPACE:
                end -= 1
            if end:
                self._events(b"".join((b"[", memoryview(rest)[:end], b"]")))
            return top
        raise Unfit

    def _events(self, framed: bytes) -> None:
        """Decode the events of ``framed`` (a JSON array of them) into columns, each phase's
        apart.

        Raises _NotEvents when the text is not a JSON array (a split in the wrong place), and
        Unfit when the events are not as the typed decode reads them. Raw args point into
        ``framed``: the original error, whose frames hold them, is dropped before raising.
        """
        failure: type[Exception] | None = None
        try:
            try:
                phases = _part(_events.decode(framed)) if not self.exact else \
                    _part(_exact_events.decode(framed), exact=True)
            except _Inexact:
                self.exact = True
                phases = _part(_exact_events.decode(framed), exact=True)
        except msgspec.DecodeError:
            failure = _NotEvents
        except (Unfit, *_DECODE_ERRORS):
            failure = Unfit
        if failure is not None:
            raise failure
        for phase, part in phases:
            self.phases.setdefault(phase, []).append(part)
            self.n += len(part["id"])

    def _columns(self) -> ColumnEvents:
        """The blocks' columns joined, phase after phase, each freed from the blocks as soon
        as it is joined."""
        parts = [p for blocks in self.phases.values() for p in blocks]
        self.phases = {}
        start = 0
        for p in parts:  # keys' rows: from rows of their block to rows of the whole
            p["keys"] = {k: Sparse(s.rows + start, s.values) for k, s in p["keys"].items()}
            start += len(p["id"])

        def pop(key: str) -> list[Any]:
            return [p.pop(key) for p in parts]

        columns: dict[str, pa.Array] = {}
        for key in ("ph", "cat", "name"):
            columns[key] = pa.chunked_array(pop(key), type=pa.dictionary(
                pa.int32(), pa.string())).unify_dictionaries().combine_chunks()
        for key in ("pid", "tid"):
            chunks = pop(key)
            if any(pa.types.is_string(c.type) for c in chunks):
                chunks = [c.cast(pa.string()) for c in chunks]
            columns[key] = pa.concat_arrays(chunks) if chunks else pa.array([], pa.int64())
        ids = pop("id")
        columns["id"] = pa.concat_arrays(ids) if ids else pa.array([], pa.int64())
        micros = {}
        for key in ("ts", "dur"):
            chunks = pop(key)
            micros[key] = Micros(
                np.concatenate([c.ns for c in chunks] or [np.zeros(0, dtype=np.int64)]),
                np.concatenate([c.valid for c in chunks] or [np.zeros(0, dtype=bool)]))
        text = pa.chunked_array(pop("args"), type=pa.string())
        found = [p.pop("keys") for p in parts]
        keys: dict[str, Sparse] = {}
        for key in sorted({k for f in found for k in f}):
            have = [f.pop(key) for f in found if key in f]
            keys[key] = Sparse(np.concatenate([s.rows for s in have]),
                               pa.concat_arrays([s.values for s in have]))
        return ColumnEvents(self.n, columns, micros, text, keys, exact_times=self.exact)


def _part(evs: list[_Event] | list[_ExactEvent], exact: bool = False
          ) -> list[tuple[str | None, dict[str, Any]]]:
    """A block's events as columns, one part per phase in order of first appearance (times
    from their decimal text when ``exact``).

    The fields are taken in document order, then the columns are put in phase order at once
    (Arrow takes, far cheaper than reordering the events), so that each phase's part is a
    slice, and the args text of the ``X`` events lies together, decoded as it is.
    """
    micros = _exact_micros if exact else _micros
    part: dict[str, Any] = {
        "ph": _dictionary(map(_PH, evs), len(evs)),
        "cat": _dictionary(map(_CAT, evs), len(evs)),
        "name": _dictionary(map(_NAME, evs), len(evs)),
        "pid": _ids([e.pid for e in evs]),
        "tid": _ids([e.tid for e in evs]),
        "ts": micros([e.ts for e in evs]),
        "dur": micros([e.dur for e in evs]),
        "id": pa.array([e.id for e in evs], type=pa.int64()),
    }
    part["args"], objects = _texts([e.args for e in evs])
    phases, order, bounds = _phase_order(part["ph"])
    if order is not None:
        idx = pa.array(order)
        for key in ("ph", "cat", "name", "pid", "tid", "id", "args"):
            part[key] = part[key].take(idx)
        for key in ("ts", "dur"):
            part[key] = part[key].take(order)
        objects = objects[order]
    x = phases.index("X") if "X" in phases else None
    part["keys"] = _keys(part, objects, None if x is None else (bounds[x], bounds[x + 1]))
    return [(phase, _slice_part(part, bounds[i], bounds[i + 1]))
            for i, phase in enumerate(phases)]


def _phase_order(ph: pa.DictionaryArray) -> tuple[list[str | None], np.ndarray | None,
                                                  list[int]]:
    """The phases of a block in order of first appearance, the stable order of its rows by
    phase (None when it has one phase) and where each phase's rows start and end in it."""
    codes = _codes(ph)
    names: list[str | None] = ph.dictionary.to_pylist()
    # The dictionary's codes appear in increasing order; null (-1) goes where it first does.
    nulls = np.flatnonzero(codes < 0)
    if len(nulls):
        before = int(codes[:nulls[0]].max(initial=-1)) + 1
        rank = np.arange(len(names) + 1)
        rank[before:-1] += 1
        rank[-1] = before  # code -1
        codes = rank[codes]
        names[before:before] = [None]
    counts = np.bincount(codes, minlength=len(names))
    bounds = [0, *np.cumsum(counts).tolist()]
    if len(names) <= 1:
        return names, None, bounds
    small = codes.astype(np.int16 if len(names) < 1 << 15 else np.int64)
    return names, np.argsort(small, kind="stable"), bounds


def _slice_part(part: dict[str, Any], start: int, stop: int) -> dict[str, Any]:
    """The rows ``start`` to ``stop`` of a block's columns."""
    n = stop - start
    if start == 0 and n == len(part["id"]):
        return part
    out = {k: part[k].slice(start, n) for k in ("ph", "cat", "name", "pid", "tid", "id", "args")}
    out.update({k: Micros(part[k].ns[start:stop], part[k].valid[start:stop])
                for k in ("ts", "dur")})
    keys = {}
    for k, s in part["keys"].items():
        lo, hi = np.searchsorted(s.rows, [start, stop]).tolist()
        keys[k] = Sparse(s.rows[lo:hi] - start, s.values.slice(lo, hi - lo))
    out["keys"] = keys
    return out


def _lone_surrogate(data: bytes | memoryview) -> bool:
    """Whether ``data`` holds a UTF-16 surrogate escape without its partner; the regex runs
    only around each surrogate escape (emoji names have them in pairs)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    at = np.flatnonzero(raw[:-2] == ord("\\"))
    at = at[(raw[at + 1] == ord("u")) & ((raw[at + 2] | 0x20) == ord("d"))]
    text = bytes(data) if len(at) else b""
    return any(LONE_SURROGATE.search(text[max(0, i - 6):i + 12]) for i in at.tolist())


def _last_split(pending: bytes) -> int | None:
    """The position of the last '}' that ends an event in the last _TAIL bytes of
    ``pending``, if any."""
    start = max(0, len(pending) - _TAIL)
    last = None
    for m in _BETWEEN.finditer(pending, start):
        last = m
    return None if last is None else last.start()


def _ids(values: list[Any]) -> pa.Array:
    """pid/tid values: int64 when all are integers (or missing), else text (integers as
    their text, which reads back to the same id)."""
    try:
        return pa.array(values, type=pa.int64())
    except OverflowError:
        raise Unfit from None  # beyond int64: the forgiving path names it by its text
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    # A few names ("Spans", "") among integers (a missing key is one distinct value more).
    codes, distinct = _first_seen(values, len(values))
    texts = []
    for v in distinct:
        if type(v) is int and not INT64[0] <= v <= INT64[1]:
            raise Unfit
        texts.append(None if v is None else str(v) if type(v) is int else v)
    return pa.array(texts, type=pa.string()).take(pa.array(codes))


def _micros(values: list[Any]) -> Micros:
    """µs to ns as ``timestamps.us_to_ns`` does; _Inexact when a float cannot hold one to
    the ns."""
    arr = pa.array(values)
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    if pa.types.is_null(arr.type):
        return Micros(np.zeros(len(values), dtype=np.int64), valid)
    if pa.types.is_integer(arr.type):
        us = arr.fill_null(0).to_numpy()
        valid &= (us >= -MAX_US) & (us <= MAX_US)
        return Micros(np.where(valid, us, 0) * 1000, valid)
    f = arr.fill_null(0.0).to_numpy()
    valid &= np.abs(f) <= MAX_US
    f = np.where(valid, f, 0.0)
    if (np.abs(f) >= SAFE_FLOAT_US).any():
        raise _Inexact
    whole = np.floor(f)
    ns = whole.astype(np.int64) * 1000 + np.rint((f - whole) * 1000).astype(np.int64)
    return Micros(ns, valid)


def _exact_micros(raws: list[msgspec.Raw]) -> Micros:
    """µs to ns from their JSON text, as ``timestamps.exact_ns`` converts them: a decimal128
    of scale 3 holds the ns as its unscaled integer. Missing or null is not valid; text that
    is not a number, or has more than three decimals (which exact_ns rounds), is Unfit."""
    n = len(raws)
    lengths, offsets, data = _joined(raws)
    text = _text_column(lengths > 0, offsets, data, pa.string())
    text = pc.if_else(pc.equal(text, "null"), pa.scalar(None, pa.string()), text)
    try:
        scaled = text.cast(pa.decimal128(38, 3))
    except pa.ArrowInvalid:
        raise Unfit from None
    valid = scaled.is_valid().to_numpy(zero_copy_only=False)
    words = np.frombuffer(scaled.buffers()[1], dtype=np.int64)[
        2 * scaled.offset:2 * (scaled.offset + n)].reshape(-1, 2)
    ns, high = words[:, 0], words[:, 1]
    valid &= high == ns >> 63  # the ns fit int64
    return Micros(np.where(valid, ns, 0), valid)


def _texts(raws: list[msgspec.Raw]) -> tuple[pa.Array, np.ndarray]:
    """The args column: each event's raw JSON text, null when absent, null or ``{}`` (whose
    text stays in the data, as decoded by ``_decode_rows``); and which events have an object
    (empty or not) as args."""
    lengths, offsets, data = _joined(raws)
    if _lone_surrogate(data):
        raise Unfit  # msgspec keeps it in raw args; the forgiving path refuses it
    first = np.frombuffer(data, dtype=np.uint8)[offsets[:-1][lengths > 0]]
    if not np.isin(first, np.frombuffer(b"{n", dtype=np.uint8)).all():
        raise Unfit  # an args that is not an object: the forgiving path counts it
    objects = lengths > 0
    objects[objects] = first == ord("{")
    keep = objects.copy()
    for i in np.flatnonzero(keep & (lengths < 16)).tolist():
        if _EMPTY_OBJECT.fullmatch(data, int(offsets[i]), int(offsets[i + 1])):
            keep[i] = False
    arr = _text_column(keep, offsets, data, pa.binary())
    return arr.cast(pa.string()), objects  # the cast checks the text is UTF-8


def _joined(raws: list[msgspec.Raw]) -> tuple[np.ndarray, np.ndarray, bytes]:
    """Raw JSON texts end to end: each one's length, their offsets (n + 1) and the bytes."""
    lengths = np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))
    offsets = np.zeros(len(raws) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return lengths, offsets, b"".join(raws)


def _text_column(keep: np.ndarray, offsets: np.ndarray, data: bytes,
                 type: pa.DataType) -> pa.Array:
    """A column of ``type`` (string or binary) over ``data`` at ``offsets``, null where not
    ``keep``; Unfit past what a string column holds."""
    if len(data) > INT32_MAX:
        raise Unfit
    return pa.Array.from_buffers(type, len(keep), [
        pa.array(keep).buffers()[1], pa.py_buffer(offsets.astype(np.int32)),
        pa.py_buffer(data)], null_count=int(len(keep) - keep.sum()))


def _keys(part: dict[str, Any], has_args: np.ndarray, slices: tuple[int, int] | None
          ) -> dict[str, Sparse]:
    """The args keys the model needs, from the rows the conversion reads them from (see
    ``slices`` and ``instants``): ``correlation`` of every ``X`` event (the rows ``slices``),
    the keys of device work and of memory instants."""
    keys: dict[str, Sparse] = {}
    ph, cat, name, text = part["ph"], part["cat"], part["name"], part["args"]
    x_rows = np.zeros(len(has_args), dtype=bool)
    x_rows[slice(*slices or (0, 0))] = True
    cats = cat.dictionary.to_pylist()
    device = np.isin(_codes(cat), [i for i, c in enumerate(cats)
                                   if c is not None and map_category(c) in DEVICE_CATEGORIES])
    memory = np.isin(_codes(cat), [i for i, c in enumerate(cats) if map_category(c) ==
                                   "host.memory"])
    names = name.dictionary.to_pylist()
    memory |= _codes(name) == (names.index("[memory]") if "[memory]" in names else -2)
    phases = ph.dictionary.to_pylist()
    instant = np.isin(_codes(ph), [phases.index(p) for p in ("i", "I") if p in phases])
    for rows, decoder, extract in (
            (np.arange(*slices or (0, 0)), _slice_args, _slice_keys),  # a slice of text
            (np.flatnonzero(x_rows & device & has_args), _device_args, _device_keys),
            (np.flatnonzero(instant & memory & has_args), _instant_args, _instant_keys)):
        rows, decoded = _decode_rows(text, rows, decoder)
        for key, values in extract(decoded).items() if len(rows) else ():
            present = values.is_valid()
            keys[key] = Sparse(rows[present.to_numpy(zero_copy_only=False)],
                               values.filter(present))
    return keys


def _decode_rows(text: pa.Array, rows: np.ndarray, decoder: msgspec.json.Decoder
                 ) -> tuple[np.ndarray, list[Any]]:
    """The args of ``rows`` (ascending, with an object as args) decoded from their text: the
    rows whose args are not empty, and their decoded args. Rows in one run are a slice of
    the column, else a take; either way their texts follow one another, objects (or the
    ``null`` of a null row), which ``decode_lines`` reads one after the other."""
    if not len(rows):
        return rows, []
    if rows[-1] - rows[0] + 1 == len(rows):
        texts = text.slice(int(rows[0]), len(rows))
    else:
        texts = text.take(pa.array(rows))
    _, offset_buffer, data = texts.buffers()
    offsets = np.frombuffer(offset_buffer, dtype=np.int32)[
        texts.offset:texts.offset + len(texts) + 1]
    filled = offsets[1:] > offsets[:-1]  # an empty object's text may be left out by take
    if not filled.any():
        return rows[:0], []
    decoded = decoder.decode_lines(memoryview(data)[offsets[0]:offsets[-1]])
    if len(decoded) != filled.sum():
        raise Unfit
    rows = rows[filled]
    objects = np.frombuffer(data, dtype=np.uint8)[offsets[:-1][filled]] == ord("{")
    if not objects.all():
        decoded = [a for a in decoded if a is not None]
        rows = rows[objects]
    return rows, decoded


def _codes(values: pa.DictionaryArray) -> np.ndarray:
    return values.indices.fill_null(-1).to_numpy(zero_copy_only=False)


def _slice_keys(decoded: list[_SliceArgs]) -> dict[str, pa.Array]:
    return {"correlation": pa.array([a.correlation for a in decoded], type=pa.int64()),
            AUTOGRAD_KEY: pa.array([a.sequence if type(a.sequence) is int else None
                                    for a in decoded], type=pa.int64())}


def _device_keys(decoded: list[_DeviceArgs]) -> dict[str, pa.Array]:
    out = {name: pa.array(list(map(attrgetter(attr), decoded)), type=pa.int64())
           for attr, name in _DEVICE_KEYS.items()}
    for key in ("grid", "block"):
        dims = pa.array(list(map(attrgetter(key), decoded)), type=pa.list_(pa.int64()))
        lengths = pc.list_value_length(dims).fill_null(0).to_numpy(zero_copy_only=False)
        starts = dims.offsets.to_numpy()[:-1]
        flat = dims.values
        for pos in range(3):
            has = lengths > pos
            out[f"{key}[{pos}]"] = flat.take(pa.array(starts + pos, mask=~has))
    return out


def _instant_keys(decoded: list[_InstantArgs]) -> dict[str, pa.Array]:
    out = {name: pa.array(list(map(attrgetter(attr), decoded)), type=pa.int64())
           for attr, name in _INSTANT_KEYS.items()}
    for attr, name in _INSTANT_NUMBERS.items():
        out[name] = pa.array(list(map(attrgetter(attr), decoded)), type=pa.float64())
    return out


def _first_seen(values: Iterable[Any], n: int) -> tuple[np.ndarray, dict[Any, int]]:
    """Codes of ``n`` values numbered as they first appear, and the code of each distinct
    value (in that order): one dict lookup per value, in one pass."""
    distinct: defaultdict[Any, int] = defaultdict(count().__next__)
    return np.fromiter(map(distinct.__getitem__, values), dtype=np.int32, count=n), distinct


def _dictionary(values: Iterable[str | None], n: int) -> pa.DictionaryArray:
    """``n`` strings coded as ``dictionary_encode`` codes them (in order of first appearance,
    nulls null), by one dict lookup each: only the distinct ones become Arrow strings."""
    codes, distinct = _first_seen(values, n)
    words = list(distinct)
    null = distinct.get(None)
    if null is None:
        return pa.DictionaryArray.from_arrays(codes, pa.array(words, type=pa.string()))
    del words[null]
    missing = codes == null
    codes[codes > null] -= 1
    return pa.DictionaryArray.from_arrays(pa.array(codes, mask=missing),
                                          pa.array(words, type=pa.string()))


def file_blocks(read: Callable[[int], bytes], size: int | None = None,
                progress: Callable[[], None] | None = None) -> Iterator[bytes]:
    """Blocks of ``read(size)`` until it returns nothing; ``progress`` after each and at
    the end."""
    while block := read(size or BLOCK):
        yield block
        if progress:
            progress()
    if progress:
        progress()


def memory_blocks(data: bytes, size: int | None = None) -> Iterator[bytes]:
    """``data`` in blocks, for a stream that was read whole."""
    size = size or BLOCK
    view = memoryview(data)
    for start in range(0, len(data), size):
        yield bytes(view[start:start + size])
