"""``args`` JSON objects to TrackEvent debug annotations, with interned top-level names.

The annotations of a chunk of events are encoded column-wise (``AnnotationEncoder.columns``):
the args texts are split into their top-level (key, value) pairs with numpy over the bytes
of the whole chunk, and the pairs become one ``MessageColumns`` of DebugAnnotations, each
field a column: numbers parsed by Arrow casts, strings copied as they are, nested arrays and
objects encoded once per distinct text. The typed columns that travel as annotations
(``tracekit.fields``) join as more pairs, integers and strings as they are (no JSON text in
between). Rows that this cannot take exactly as
``orjson.loads`` reads them (escapes, big integers, bad JSON, a typed column whose key the
args already have with another value) go through the per-row encoder, ``encode``, which
also caches encoded (key, value) pairs: values such as ``cbid`` or a kernel's ``grid`` repeat
across millions of events. Both give the same annotations for the same args.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import InitVar, dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.perfetto.wire import Blob, MessageColumns, encode_message, encode_varint
from tracekit.plugins.perfetto.writer_args import (
    BOOL,
    FLOAT,
    INT,
    NESTED,
    STRING,
    split_objects,
    text_buffers,
    value_kinds,
)
from tracekit.toolkit import equals, fields

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_SMALL = [encode_varint(i) for i in range(1 << 14)]
_DOUBLE = struct.Struct("<d").pack
# DebugAnnotation tags: bool_value(2), int_value(4), double_value(5), string_value(6);
# TrackEvent.debug_annotations is field 4, length-delimited.
_BOOL, _INT, _DOUBLE_TAG, _STRING, _ANNOTATION = b"\x10", b"\x20", b"\x29", b"\x32", b"\x22"
_CACHE_LIMIT = 200_000
_CACHED_TEXT = 4096  # longer nested texts are encoded each time, not kept


def _varint(n: int) -> bytes:
    return _SMALL[n] if 0 <= n < 16384 else encode_varint(n)


@dataclass
class Annotations:
    """The debug annotations of a chunk of rows: ``counts[i]`` items of ``items`` for row
    ``i`` (column-wise), then the bytes ``per_row`` holds for it (rows encoded one by one)."""

    counts: np.ndarray
    items: MessageColumns
    per_row: Blob


@dataclass
class ArgColumns:
    """Per event row its args text and the typed columns it carries as args keys, null where
    the row has none, as ``tracekit.fields.carry`` found: a string column holds the JSON text
    of each value, any other type (numbers, dictionary strings) the values themselves.

    Neither is held full-length: the args are taken from the trace's own chunks, and each key
    keeps only its values (most rows carry none) and which rows have them."""

    args: pa.ChunkedArray | pa.Array
    keys: InitVar[dict[str, pa.Array]]

    def __post_init__(self, keys: dict[str, pa.Array]) -> None:
        args = self.args
        if isinstance(args, pa.ChunkedArray) and args.num_chunks == 1:
            args = args.chunk(0)
        # Arrow's take from a chunked column joins its chunks first, at every call.
        self._chunks = args.chunks if isinstance(args, pa.ChunkedArray) else [args]
        if not self._chunks:
            self._chunks = [pa.array([], args.type)]
        self._starts = np.cumsum([0] + [len(c) for c in self._chunks])
        # Per distinct set of rows that have a value (keys often share one): a mask of them
        # and the rows themselves.
        self._rows: list[tuple[np.ndarray, np.ndarray]] = []
        self._rows_at: dict[bytes, int] = {}
        self._keys: dict[str, tuple[int, pa.Array]] = {}
        for key, values in keys.items():
            self.add(key, values)

    def add(self, key: str, values: pa.Array | pa.ChunkedArray) -> None:
        """Carry ``key``: its value on each row, null where the row has none."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        valid = values.is_valid()
        mask = valid.to_numpy(zero_copy_only=False)
        packed = np.packbits(mask).tobytes()
        at = self._rows_at.get(packed)
        if at is None:
            at = self._rows_at[packed] = len(self._rows)
            where = np.flatnonzero(mask)
            self._rows.append((mask, where.astype(np.int32) if len(mask) < 2**31 else where))
        self._keys[key] = (at, values.filter(valid))

    def take(self, rows: np.ndarray) -> ArgRows:
        """The args of ``rows``, and per key the values of those that have one."""
        args = _take_chunks(self._chunks, self._starts, rows)
        if pa.types.is_large_string(args.type):
            args = args.cast(pa.string())
        found: dict[int, tuple[np.ndarray, pa.Array]] = {}
        keys = {}
        for key, (at, values) in self._keys.items():
            if at not in found:
                mask, where = self._rows[at]
                have = np.flatnonzero(mask[rows])
                found[at] = (have, pa.array(np.searchsorted(where, rows[have])))
            have, index = found[at]
            if len(have):
                keys[key] = (have, values.take(index))
        return ArgRows(args, keys)


def _take_chunks(chunks: list[pa.Array], starts: np.ndarray, rows: np.ndarray) -> pa.Array:
    """``rows`` of the column made of ``chunks`` (``starts``: each chunk's first row, then
    the length), taken from each chunk and put back in order."""
    if len(chunks) == 1 or not len(rows):
        return chunks[0].take(pa.array(rows))
    which = (np.searchsorted(starts, rows, side="right") - 1).astype(np.int32)
    order = None
    if (which[1:] < which[:-1]).any():
        order = np.argsort(which, kind="stable")
        which, rows = which[order], rows[order]
    cuts = np.flatnonzero(np.diff(which, prepend=-1))
    ends = np.r_[cuts[1:], len(rows)]
    parts = [chunks[which[a]].take(pa.array(rows[a:b] - starts[which[a]]))
             for a, b in zip(cuts.tolist(), ends.tolist(), strict=True)]
    joined = pa.concat_arrays(parts)
    if order is None:
        return joined
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    return joined.take(pa.array(back))


@dataclass
class ArgRows:
    """The args of a chunk of rows, and per carried key the positions (in the chunk) of the
    rows that have a value, and those values (JSON text or typed, see ``ArgColumns``)."""

    args: pa.Array
    keys: dict[str, tuple[np.ndarray, pa.Array]]

    def full(self, rows: np.ndarray) -> dict[str, pa.Array]:
        """Per key the JSON text of the values of ``rows`` (null where none), as
        ``fields.merge`` takes them."""
        out = {}
        for key, (have, values) in self.keys.items():
            index = np.full(len(self.args), -1, dtype=np.int64)
            index[have] = np.arange(len(have))
            at = index[rows]
            out[key] = _json_text(values.take(pa.array(at, mask=at < 0))).cast(pa.string())
        return out


class AnnotationEncoder:
    """Encodes args objects; remembers which names it interned since the last ``new_names``."""

    def __init__(self) -> None:
        self.iids: dict[str, int] = {}
        self._heads: dict[str, bytes] = {}
        self._fresh: list[tuple[int, str]] = []
        self._pairs: dict[tuple[str, Any], bytes] = {}
        # Nested values' texts (such as a kernel's "grid"), encoded: they repeat across chunks.
        self._nested: dict[str, bytes | None] = {}

    def columns(self, rows: ArgRows, skipped: Counter[str]) -> Annotations:
        """The annotations of each row: its args with the carried keys added by the rule of
        ``tracekit.fields.merge``; keys the args already hold with another value are counted
        in ``skipped``."""
        args = rows.args
        m = len(args)
        found = split_objects(*text_buffers(args))
        slow = found.slow
        names = list(found.keys)
        code_of = {k: i for i, k in enumerate(names)}
        # Where a key's quoted name can stand other than as a top-level key: in a string
        # value, or in a nested one (texts with escapes are slow already).
        first = _first_bytes(found.values)
        texts = _naming(found.values, found.row, list(rows.keys), first)
        pairs = _PairParts(self._nested)
        pairs.add_texts(found.row, found.key, found.values, first)
        for key, (have, values) in rows.keys.items():
            add = np.ones(len(have), dtype=bool)
            code = code_of.get(key)
            if code is None:
                code = code_of[key] = len(names)
                names.append(key)
            else:
                # The args hold the key: the typed value is not added. The same value written
                # otherwise, or another value (a collision), is for merge to judge.
                at = np.flatnonzero(found.key == code)
                at, pos = _matching(found.row[at], have, at)
                if len(at):
                    same = pc.fill_null(pc.equal(found.values.take(pa.array(at)),
                                                 _json_text(values.take(pa.array(pos)))),
                                        False).to_numpy(zero_copy_only=False)
                    slow[have[pos[~same]]] = True
                    add[pos] = False
            if key in texts:
                _, pos = _matching(texts[key], have)
                slow[have[pos[add[pos]]]] = True
            at = np.flatnonzero(add)
            pairs.add_values(have[at], code,
                             values if len(at) == len(have) else values.take(pa.array(at)))
        row, code, kind, ints, floats, odd = pairs.columns()
        slow[row[odd]] = True
        # Stable: a row's pairs stay in text order, the carried keys after them.
        order = np.argsort(row, kind="stable")
        order = order[~slow[row[order]]]
        row, code = row[order], code[order]
        kind, ints, floats = kind[order], ints[order], floats[order]
        used = np.bincount(code, minlength=len(names)) > 0
        iid = np.array([self._iid(k) if u else 0 for k, u in zip(names, used, strict=True)],
                       dtype=np.int64)
        is_string = kind == STRING
        items = (MessageColumns(len(order)).varint(1, iid[code])
                 .varint(2, ints, present=kind == BOOL)
                 .varint(4, ints, present=kind == INT)
                 .double(5, floats, present=kind == FLOAT)
                 .message(6, pairs.strings(order, is_string), present=is_string)
                 .raw(pairs.nested(order)))
        per_row = np.zeros(m + 1, dtype=np.int64)
        slow_rows = np.flatnonzero(slow)
        encoded: list[bytes] = []
        if len(slow_rows):
            index = pa.array(slow_rows)
            merged = fields.merge(args.take(index), rows.full(slow_rows))
            for key, n in merged.collisions.items():
                skipped[fields.field_skip(key, "args already has this key with another "
                                               "value (args kept)")] += n
            encoded = [self.encode(text) if text else b"" for text in merged.args.to_pylist()]
            per_row[slow_rows + 1] = [len(b) for b in encoded]
        np.cumsum(per_row, out=per_row)
        per_row_blob = Blob(per_row, np.frombuffer(b"".join(encoded), dtype=np.uint8))
        return Annotations(np.bincount(row, minlength=m), items, per_row_blob)

    def encode(self, args_json: str | None) -> bytes:
        """Encoded TrackEvent.debug_annotations fields for one args object."""
        if not args_json:
            return b""
        try:
            obj = orjson.loads(args_json)
        except orjson.JSONDecodeError:
            obj = {"args": args_json}
        if type(obj) is not dict:
            obj = {"args": obj}
        pairs = self._pairs
        parts = []
        for k, v in obj.items():
            t = type(v)
            hashable = t is int or t is str or t is float or t is bool or v is None
            key = (k, t, v) if hashable else (k, t, orjson.dumps(v))
            enc = pairs.get(key)
            if enc is None:
                head = self._heads.get(k) or self._head(k)
                body = head + _value(v)
                enc = _ANNOTATION + _varint(len(body)) + body
                if len(pairs) < _CACHE_LIMIT:
                    pairs[key] = enc
            parts.append(enc)
        return b"".join(parts)

    def _head(self, name: str) -> bytes:
        iid = self.iids[name] = len(self.iids) + 1
        self._fresh.append((iid, name))
        head = self._heads[name] = b"\x08" + _varint(iid)
        return head

    def _iid(self, name: str) -> int:
        if name not in self.iids:
            self._head(name)
        return self.iids[name]

    def new_names(self) -> list[tuple[int, str]]:
        """Names interned since the previous call, to emit before their first use."""
        fresh, self._fresh = self._fresh, []
        return fresh


def _value(v: Any) -> bytes:
    """The value fields of a DebugAnnotation."""
    t = type(v)
    if t is int:
        if _INT64_MIN <= v <= _INT64_MAX:
            return _INT + _varint(v & 0xFFFFFFFFFFFFFFFF)
        return _string(str(v))
    if t is str:
        return _string(v)
    if t is float:
        return _DOUBLE_TAG + _DOUBLE(v)
    if t is bool:
        return _BOOL + (b"\x01" if v else b"\x00")
    if t is list:
        if not v:
            return _string("[]")
        return b"".join(encode_message((12, _value(item))) for item in v)
    if t is dict:
        if not v:
            return _string("{}")
        return b"".join(encode_message((11, encode_message((10, str(k))) + _value(item)))
                        for k, item in v.items())
    return _string("null" if v is None else str(v))


def _string(s: str) -> bytes:
    data = s.encode("utf-8", "surrogatepass")
    return _STRING + _varint(len(data)) + data


#: A JSON value that is an empty list or object, or null (RE2): after a key, in a list.
EMPTY_OR_NULL = r'[:,\[]\s*(null|\[\s*\]|\{\s*\})\s*[,\]}]'


def annotated_args(events: pa.Table, native: dict[str, Any], keep_args: bool,
                   skipped: Counter[str]) -> ArgColumns:
    """Each row's args and the typed columns its track and event do not hold, to add by the
    rule of ``tracekit.fields`` (``AnnotationEncoder.columns`` adds them); what cannot be
    written is counted in ``skipped``.

    ``native`` maps columns to the rows where the Perfetto event holds them. CPU samples are
    PerfSample packets, which carry no annotations: their other values are counted.
    """
    sample = equals(events["kind"], "sample").to_numpy()
    args = ArgColumns(events["args"] if keep_args else pa.nulls(events.num_rows, pa.string()),
                      {})
    carried: Counter[str] = Counter()
    for name in fields.TYPED_COLUMNS:
        # One column at a time (the others null), so that a single full-length key is built
        # before it is kept compact.
        if events[name].null_count == events.num_rows:
            continue
        one = pa.table({c: events[c] if c == name or c not in fields.TYPED_COLUMNS
                        else pa.nulls(events.num_rows) for c in events.column_names})
        found = fields.carry(one, native, allowed=~sample,
                             why_not="a CPU sample carries no annotations in Perfetto",
                             typed=True)
        carried.update(found.skipped)
        for key, values in found.keys.items():
            if key != "stack_id":  # rows with one are counted below
                args.add(key, values)
    if keep_args:
        # Perfetto's annotations hold no empty list or object and no null: _value writes
        # them as texts. Counted per event, by a JSON value of that form in its args.
        odd = pc.fill_null(pc.match_substring_regex(events["args"], EMPTY_OR_NULL), False)
        changed = int(pc.sum(pc.and_(odd, pa.array(~sample))).as_py() or 0)
        if changed:
            skipped[fields.field_skip(
                "args' empty lists and nulls", fields.BY_FORMAT + "Perfetto's annotations "
                "hold no empty list, empty object or null: written as the texts \"[]\", "
                "\"{}\" and \"null\"")] += changed
    stacks = events["stack_id"].is_valid().to_numpy(zero_copy_only=False) & ~sample
    if stacks.any():  # ids into the stacks table, which only samples' callstacks carry
        skipped[fields.field_skip("stack_id", "only CPU samples carry a call stack in "
                                              "Perfetto")] += int(stacks.sum())
    skipped.update(carried)
    if sample.any():  # samples' args are counted here; they are never taken (no packets)
        own = pc.sum(pc.greater(pc.utf8_length(args.args.filter(pa.array(sample))), 0)).as_py()
        if own:
            skipped[fields.field_skip("args", "a CPU sample carries no annotations in "
                                              "Perfetto")] += own
    return args


def sample_native(events: pa.Table) -> np.ndarray:
    """Rows whose category a PerfSample tells as it is (samples are cpu.sample)."""
    return pc.equal(events["category"].cast(pa.string()), "cpu.sample").to_numpy(
        zero_copy_only=False)


class _PairParts:
    """The (key, value) pairs of a chunk, added part by part: values as JSON text (parsed
    here) or typed (carried columns: integers as they are, strings without JSON's quoting)."""

    def __init__(self, known: dict[str, bytes | None] | None = None) -> None:
        self._known = {} if known is None else known  # nested texts encoded (None: bad)
        self._cols: list[tuple[np.ndarray, ...]] = []
        self._sources: list[pa.LargeStringArray] = []  # string contents are taken from these
        self._source_at: list[np.ndarray] = []  # per pair: its text in the sources, or -1
        self._quoted: list[np.ndarray] = []  # per pair: a JSON string, quotes to be cut
        self._nested: list[bytes] = [b""]
        self._nested_at: list[np.ndarray] = []  # per pair: its encoded nested value, or 0
        self._source_size = 0

    def add_texts(self, row: np.ndarray, code: np.ndarray | int,
                  texts: pa.LargeStringArray, first: np.ndarray | None = None) -> None:
        """Pairs whose values are JSON texts (``first``: their first bytes, if known)."""
        if first is None:
            first = _first_bytes(texts)
        values = value_kinds(texts, first)
        nested_at = np.zeros(len(texts), dtype=np.int64)
        nested = values.kind == NESTED
        if nested.any():  # one orjson parse and encoding per distinct text
            distinct = texts.filter(pa.array(nested)).dictionary_encode()
            codes = distinct.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            bad = np.zeros(len(distinct.dictionary), dtype=bool)
            base = len(self._nested)
            known = self._known
            for j, text in enumerate(distinct.dictionary.to_pylist()):
                if text in known:
                    encoded = known[text]
                else:
                    try:
                        encoded = _value(orjson.loads(text))
                    except orjson.JSONDecodeError:
                        encoded = None
                    if len(known) < _CACHE_LIMIT and len(text) <= _CACHED_TEXT:
                        known[text] = encoded
                self._nested.append(b"" if encoded is None else encoded)
                bad[j] = encoded is None
            nested_at[nested] = codes + base
            values.odd[nested] |= bad[codes]
        quoted = first == ord('"')
        self._add(row, code, (values.kind, values.ints, values.floats, values.odd), texts,
                  quoted, nested_at)

    def add_values(self, row: np.ndarray, code: int, values: pa.Array) -> None:
        """Pairs of a carried column (JSON text if a string column, else typed)."""
        n = len(values)
        no_ints, no_floats, none = np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n, bool)
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            self.add_texts(row, code, values.cast(pa.large_string()))
        elif pa.types.is_integer(values.type):
            self._add(row, code, (np.full(n, INT, dtype=np.uint8),
                                  values.cast(pa.int64()).to_numpy(), no_floats, none),
                      None, None, no_ints)
        elif pa.types.is_dictionary(values.type):
            self._add(row, code, (np.full(n, STRING, dtype=np.uint8), no_ints, no_floats, none),
                      values.cast(pa.large_string()), none, no_ints)
        else:  # floats (Arrow's shortest text reads back as orjson reads it) and the rest
            self.add_texts(row, code, _json_text(values))

    def _add(self, row: np.ndarray, code: np.ndarray | int, parsed: tuple[np.ndarray, ...],
             source: pa.LargeStringArray | None, quoted: np.ndarray | None,
             nested_at: np.ndarray) -> None:
        n = len(row)
        self._cols.append((row, np.broadcast_to(np.asarray(code, dtype=np.int64), (n,)),
                           *parsed))
        if source is None or quoted is None:
            self._source_at.append(np.full(n, -1, dtype=np.int64))
            self._quoted.append(np.zeros(n, dtype=bool))
        else:
            self._sources.append(source)
            self._source_at.append(np.arange(self._source_size, self._source_size + n))
            self._quoted.append(quoted)
            self._source_size += n
        self._nested_at.append(nested_at)

    def columns(self) -> tuple[np.ndarray, ...]:
        """Per pair its row, key code, kind, int and float value, and whether it is odd."""
        return tuple(np.concatenate([c[i] for c in self._cols]) for i in range(6))

    def strings(self, order: np.ndarray, is_string: np.ndarray) -> Blob:
        """The string values of the pairs ``order`` (a Blob, empty for the other pairs): JSON
        texts without their quotes (null is written "null"), typed strings as they are."""
        at = np.flatnonzero(is_string)
        source = np.concatenate(self._source_at)[order[at]]
        quoted = np.concatenate(self._quoted)[order[at]]
        texts = pa.chunked_array(self._sources, pa.large_string()).take(pa.array(source))
        texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
        if quoted.any():
            texts = pc.if_else(pa.array(quoted), pc.utf8_slice_codeunits(texts, 1, -1), texts)
        content = _blob(texts)
        sizes = np.zeros(len(order), dtype=np.int64)
        sizes[at] = content.sizes
        offsets = np.empty(len(order) + 1, dtype=np.int64)
        offsets[0] = content.offsets[0]
        np.cumsum(sizes, out=offsets[1:])
        offsets[1:] += content.offsets[0]
        return Blob(offsets, content.data)

    def nested(self, order: np.ndarray) -> Blob:
        """The encoded nested values of the pairs ``order`` (empty for the others)."""
        at = np.concatenate(self._nested_at)[order]
        some = np.flatnonzero(at)  # most pairs hold none: only these are gathered
        offsets = np.zeros(len(order) + 1, dtype=np.int64)
        if not len(some):
            return Blob(offsets, np.zeros(0, dtype=np.uint8))
        found = Blob.from_list(self._nested).take(at[some])
        sizes = np.zeros(len(order), dtype=np.int64)
        sizes[some] = found.sizes
        np.cumsum(sizes, out=offsets[1:])
        return Blob(offsets, found.data)


def _json_text(values: pa.Array) -> pa.LargeStringArray:
    """JSON text of values: string arrays are JSON text already; others as
    ``tracekit.fields`` writes them."""
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        values = fields.json_values(values)[0]
    return values.cast(pa.large_string())


def _first_bytes(values: pa.Array) -> np.ndarray:
    """The first byte of each string (0 for empty ones)."""
    blob = _blob(values.cast(pa.large_string()))
    first = np.zeros(len(values), dtype=np.uint8)
    filled = np.flatnonzero(np.diff(blob.offsets) > 0)
    first[filled] = blob.data[blob.offsets[:-1][filled]]
    return first


def _naming(values: pa.LargeStringArray, rows: np.ndarray, keys: list[str],
            first: np.ndarray) -> dict[str, np.ndarray]:
    """Per key the rows of the string and nested ``values`` (``first``: their first bytes)
    that hold its quoted name."""
    texts = np.flatnonzero((first == ord('"')) | (first == ord("[")) | (first == ord("{")))
    if not len(texts) or not keys:
        return {}
    quoted = [orjson.dumps(key).decode() for key in keys]
    candidates = values.take(pa.array(texts))
    # One pass for all keys first: they are seldom named in values at all.
    if all(q[1:-1].replace("_", "").isalnum() for q in quoted):
        anywhere = pc.match_substring_regex(candidates, "|".join(quoted)) \
            .to_numpy(zero_copy_only=False)
        texts, candidates = texts[anywhere], candidates.filter(pa.array(anywhere))
    out = {}
    for key, q in zip(keys, quoted, strict=True):
        if len(texts):
            named = pc.match_substring(candidates, q).to_numpy(zero_copy_only=False)
            if named.any():
                out[key] = rows[texts[named]]
    return out


def _matching(rows: np.ndarray, have: np.ndarray, data: np.ndarray | None = None,
              ) -> tuple[np.ndarray, np.ndarray]:
    """For the ``rows`` found in the sorted ``have``: their ``data`` (default: the rows) and
    their positions in ``have``."""
    pos = np.searchsorted(have, rows)
    hit = pos < len(have)
    hit[hit] = have[pos[hit]] == rows[hit]
    return (rows if data is None else data)[hit], pos[hit]


def _blob(texts: pa.Array) -> Blob:
    """A large string array's values as a Blob (no copy)."""
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int64)[
        texts.offset:texts.offset + len(texts) + 1]
    data = texts.buffers()[2]
    return Blob(offsets, np.frombuffer(data, dtype=np.uint8) if data is not None
                else np.zeros(0, dtype=np.uint8))
