"""A typed, compiled decode of a Kineto document into columns, block by block.

msgspec decodes the events of each block of text into small typed Structs (no dict per
event) whose ``args`` stay raw JSON text; the keys the model needs are decoded from the raw
args of the events that need them with a second small Struct. The text is consumed in
blocks split between two events, so neither the whole text nor a Python object per event of
the whole document is ever held.

The typed decode accepts only well-typed documents. Anything else (a value of an unexpected
type, an args that is not an object, a timestamp a float cannot hold to the ns, JSON that
needs repair) makes ``decode`` return None, and the reader takes the forgiving path, which
coerces, counts and repairs.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.kineto.categories import DEVICE_CATEGORIES, map_category
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


class Unfit(Exception):
    """The document needs the forgiving path."""


class _NotEvents(Exception):
    """A block's text up to a split point is not a JSON array of events."""

BLOCK = 16 << 20  # bytes of text decoded at a time: what memory holds beyond the columns
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


class _SliceArgs(msgspec.Struct, gc=False):
    """The args key of every X event that becomes a column."""

    correlation: int | None = None


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
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, pa.ArrowInvalid,
                  pa.ArrowTypeError, OverflowError, UnicodeDecodeError, RecursionError,
                  orjson.JSONDecodeError)
_events = msgspec.json.Decoder(list[_Event])
_slice_args = msgspec.json.Decoder(list[_SliceArgs])
_device_args = msgspec.json.Decoder(list[_DeviceArgs])
_instant_args = msgspec.json.Decoder(list[_InstantArgs])


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

    def run(self, blocks: Iterator[bytes]) -> tuple[dict[str, Any], ColumnEvents, list[str]]:
        notes: list[str] = []
        pending = bytearray()
        for block in blocks:
            pending += block
            if len(pending) >= 3 or not block:
                break
        if pending.startswith(codecs.BOM_UTF8):
            del pending[:len(codecs.BOM_UTF8)]
            notes.append("skipped a UTF-8 byte-order mark")
        start = len(pending) - len(pending.lstrip())
        if pending[start:start + 1] == b"[":
            prefix = None
            del pending[:start + 1]
        else:
            prefix, pending = self._head(pending, blocks)
        # pending holds '[' and then the events not decoded yet: a chunk of it is decoded,
        # framed by that '[' and a ']' written over the ',' after its last event.
        pending[0:0] = b"["
        for block in blocks:
            pending += block
            cut = _last_split(pending)
            if cut is None:
                continue
            after = pending[cut + 1]
            pending[cut + 1] = ord("]")
            try:
                # A copy: the raw args point into it, and pending must stay resizable.
                self._events(bytes(memoryview(pending)[:cut + 2]))
            except _NotEvents:
                # The split was past the end of the events (between objects of a later
                # top-level field) or inside a string: the tail sorts it out.
                pending[cut + 1] = after
                for rest in blocks:
                    pending += rest
                break
            del pending[:pending.index(b"{", cut + 1) - 1]
            pending[0] = ord("[")
        top = self._tail(bytes(pending[1:]), prefix)
        return top, self._columns(), notes

    def _head(self, pending: bytearray, blocks: Iterator[bytes]) -> tuple[bytes, bytearray]:
        """Read up to the '[' that opens traceEvents; return the text before the key."""
        while True:
            m = _EVENTS_KEY.search(pending)
            if m:
                return bytes(pending[:m.start() + 1]), pending[m.end():]
            block = next(blocks, None)
            if block is None:
                raise Unfit
            pending += block

    def _tail(self, rest: bytes, prefix: bytes | None) -> dict[str, Any]:
        """Decode the last events and the top-level fields that follow the events."""
        body = rest.lstrip()
        ends = [len(rest) - len(body)] if body.startswith(b"]") else []
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
            head = rest[:end].rstrip()
            if head:
                self._events(b"[" + head + b"]")
            return top
        raise Unfit

    def _events(self, framed: bytes | memoryview) -> None:
        """Decode the events of ``framed`` (a JSON array of them) into columns.

        Raises _NotEvents when the text is not a JSON array (a split in the wrong place), and
        Unfit when the events are not as the typed decode reads them. Raw args point into
        ``framed``: the original error, whose frames hold them, is dropped before raising.
        """
        failure: type[Exception] | None = None
        try:
            part = self._part(_events.decode(framed))
        except msgspec.DecodeError:
            failure = _NotEvents
        except (Unfit, *_DECODE_ERRORS):
            failure = Unfit
        if failure is not None:
            raise failure
        n = part.pop("n")
        ph = part["ph"]
        codes = ph.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        names = ph.dictionary.to_pylist()
        seen, first = np.unique(codes, return_index=True)
        for code in seen[np.argsort(first)].tolist():
            rows = np.flatnonzero(codes == code)
            phase = names[code] if code >= 0 else None
            self.phases.setdefault(phase, []).append(
                part if len(rows) == n else _take_part(part, rows))
        self.n += n

    def _part(self, evs: list[_Event]) -> dict[str, Any]:
        part: dict[str, Any] = {
            "n": len(evs),
            "ph": _dictionary([e.ph for e in evs]),
            "cat": _dictionary([e.cat for e in evs]),
            "name": _dictionary([e.name for e in evs]),
            "pid": _ids([e.pid for e in evs]),
            "tid": _ids([e.tid for e in evs]),
            "ts": _micros([e.ts for e in evs]),
            "dur": _micros([e.dur for e in evs]),
            "id": pa.array([e.id for e in evs], type=pa.int64()),
        }
        raws = [e.args for e in evs]
        part["args"], objects = _texts(raws)
        keys: dict[str, Sparse] = {}
        for rows, decoder, extract in _needs_keys(part, objects):
            if len(rows):
                decoded = decoder.decode(b"[" + b",".join([raws[i] for i in rows]) + b"]")
                for key, values in extract(decoded).items():
                    present = values.is_valid()
                    keys[key] = Sparse(rows[present.to_numpy(zero_copy_only=False)],
                                       values.filter(present))
        part["keys"] = keys
        return part

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
        return ColumnEvents(self.n, columns, micros, text, keys)


def _take_part(part: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
    """The ``rows`` of a block's columns."""
    idx = pa.array(rows, type=pa.int64())
    out = {k: part[k].take(idx) for k in ("ph", "cat", "name", "pid", "tid", "id", "args")}
    out.update({k: part[k].take(rows) for k in ("ts", "dur")})
    out["keys"] = {k: s.take(rows) for k, s in part["keys"].items()}
    return out


def _lone_surrogate(data: bytes | memoryview) -> bool:
    """Whether ``data`` holds a UTF-16 surrogate escape without its partner; the regex runs
    only around each surrogate escape (emoji names have them in pairs)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    at = np.flatnonzero(raw[:-2] == ord("\\"))
    at = at[(raw[at + 1] == ord("u")) & ((raw[at + 2] | 0x20) == ord("d"))]
    text = bytes(data) if len(at) else b""
    return any(LONE_SURROGATE.search(text[max(0, i - 6):i + 12]) for i in at.tolist())


def _last_split(pending: bytearray) -> int | None:
    """The position of the last '}' that ends an event in ``pending``, if any."""
    start = max(0, len(pending) - _TAIL)
    last = None
    for m in _BETWEEN.finditer(pending, start):
        last = m
    return None if last is None else last.start()


def _ids(values: list[Any]) -> pa.Array:
    """pid/tid values: int64 when all are integers (or missing), else text (integers as
    their text, which reads back to the same id) as a dictionary array."""
    try:
        return pa.array(values, type=pa.int64())
    except OverflowError:
        raise Unfit from None  # beyond int64: the forgiving path names it by its text
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    # A few names ("Spans", "") among integers: code the values by a dict of the distinct.
    distinct: dict[Any, int] = {}
    codes = pa.array([distinct.setdefault(v, len(distinct)) for v in values], type=pa.int32())
    texts = []
    for v in distinct:
        if type(v) is int and not INT64[0] <= v <= INT64[1]:
            raise Unfit
        texts.append(None if v is None else str(v) if type(v) is int else v)
    dictionary = pa.array(texts, type=pa.string())
    return pa.DictionaryArray.from_arrays(codes, dictionary).cast(pa.string())


def _micros(values: list[Any]) -> Micros:
    """µs to ns as ``timestamps.us_to_ns`` does; a float it could not hold exactly is Unfit."""
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
        raise Unfit  # the forgiving path reads such times from their decimal text
    whole = np.floor(f)
    ns = whole.astype(np.int64) * 1000 + np.rint((f - whole) * 1000).astype(np.int64)
    return Micros(ns, valid)


def _texts(raws: list[msgspec.Raw]) -> tuple[pa.Array, np.ndarray]:
    """The args column: each event's raw JSON text, null when absent, null or ``{}``; and
    which events have an object (empty or not) as args."""
    n = len(raws)
    lengths = np.fromiter(map(len, raws), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = b"".join(raws)
    if _lone_surrogate(data):
        raise Unfit  # msgspec keeps it in raw args; the forgiving path refuses it
    first = np.frombuffer(data, dtype=np.uint8)[offsets[:-1][lengths > 0]]
    if not np.isin(first, np.frombuffer(b"{n", dtype=np.uint8)).all():
        raise Unfit  # an args that is not an object: the forgiving path counts it
    objects = lengths > 0
    objects[objects] = first == ord("{")
    keep = objects.copy()
    for i in np.flatnonzero(keep & (lengths < 16)):
        if _EMPTY_OBJECT.fullmatch(bytes(raws[i])):
            keep[i] = False
    arr = pa.Array.from_buffers(pa.large_binary(), n, [
        pa.array(keep).buffers()[1], pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=int(n - keep.sum()))
    return arr.cast(pa.large_string()).cast(pa.string()), objects


def _needs_keys(part: dict[str, Any], has_args: np.ndarray
                ) -> list[tuple[np.ndarray, msgspec.json.Decoder, Callable[[Any], Any]]]:
    """The rows whose args hold keys the model needs, with the decoder for those keys: the
    same rows the conversion reads them from (see ``slices`` and ``instants``)."""
    ph, cat, name = part["ph"], part["cat"], part["name"]
    phase = _codes(ph)
    phases = ph.dictionary.to_pylist()

    def of_phase(*wanted: str) -> np.ndarray:
        return np.isin(phase, [phases.index(p) for p in wanted if p in phases]) & has_args

    cats = cat.dictionary.to_pylist()
    device = np.isin(_codes(cat), [i for i, c in enumerate(cats)
                                   if c is not None and map_category(c) in DEVICE_CATEGORIES])
    memory = np.isin(_codes(cat), [i for i, c in enumerate(cats) if map_category(c) ==
                                   "host.memory"])
    memory |= _codes(name) == (name.dictionary.to_pylist().index("[memory]")
                               if "[memory]" in name.dictionary.to_pylist() else -2)
    slices = of_phase("X")
    return [(np.flatnonzero(slices), _slice_args, _slice_keys),
            (np.flatnonzero(slices & device), _device_args, _device_keys),
            (np.flatnonzero(of_phase("i", "I") & memory), _instant_args, _instant_keys)]


def _codes(values: pa.DictionaryArray) -> np.ndarray:
    return values.indices.fill_null(-1).to_numpy(zero_copy_only=False)


def _slice_keys(decoded: list[_SliceArgs]) -> dict[str, pa.Array]:
    return {"correlation": pa.array([a.correlation for a in decoded], type=pa.int64())}


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


def _dictionary(values: list[str | None]) -> pa.DictionaryArray:
    return pa.array(values, type=pa.string()).dictionary_encode()


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
