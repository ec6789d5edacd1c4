"""``fields.merge(args, keys, validate=True, compact=True)`` over a whole column at once.

The Chrome JSON writer checks every event's args text, drops the line breaks and indentation
of pretty-printed objects and splices the carried keys in before the closing brace. With a
JSON library that is a Python step per event; here it is Arrow's regular expressions and
numpy over all the texts of a chunk:

* checking: one regular expression matches exactly the JSON objects nested at most
  ``_DEPTH`` deep whose strings hold no backslash (so no escapes) and no control character
  (JSON's nesting is not regular, its bounded depth is);
* compacting: each line break with the blanks after it (and a carriage return just before
  it) is cut out, and a text that had one loses its leading and trailing blanks, as
  ``fields`` does (in valid JSON a raw line break is never inside a string);
* splicing: a key's quoted name in such a text is a string token. Where it is there once,
  the piece is left out if ``"key":value`` (or ``"key": value``) follows, or if it names a
  top-level key (a second expression walks the top-level pairs to it and takes its value),
  a collision where the values differ; elsewhere the piece goes before the closing brace.

It is exact or declines: a text it cannot decide exactly as ``fields.merge`` does (escapes,
control characters, deeper nesting, a number orjson might find infinite, a key's name twice,
values it cannot compare as text, invalid JSON, anything not an object) goes to
``fields.merge`` with the others like it. Keys that need JSON escapes or hold a comma or a
colon (their quoted name could then span tokens) send the whole call there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import fields

_DEPTH = 4  # nesting the expression takes: {"a": [[{"b": 1}]]} is 4 deep
_BLANKS = r"[ \t\r\n]*"
_STRING = r'"[^"\\\x00-\x1f]*"'
# Integer parts of any length: a bound ({0,199}) in every place a number may stand makes
# the automaton too big. Those orjson could find infinite (over 200 digits before the
# exponent's at most two) are found apart (_LONG).
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{1,2})?"
_LONG = r"[0-9]{201}"


def _object(value: str) -> str:
    pair = f"{_STRING}{_BLANKS}:{_BLANKS}{value}{_BLANKS}"
    return rf"\{{{_BLANKS}(?:{pair}(?:,{_BLANKS}{pair})*)?\}}"


def _array(value: str) -> str:
    item = f"{value}{_BLANKS}"
    return rf"\[{_BLANKS}(?:{item}(?:,{_BLANKS}{item})*)?\]"


_VALUE = f"(?:{_STRING}|{_NUMBER}|true|false|null)"
for _ in range(_DEPTH - 1):
    _VALUE = f"(?:{_STRING}|{_NUMBER}|true|false|null|{_array(_VALUE)}|{_object(_VALUE)})"
_OBJECT_TEXT = f"^{_BLANKS}{_object(_VALUE)}{_BLANKS}$"
# A top-level key's value in a text that matched _OBJECT_TEXT: the pairs before it, then the
# key (filled in) and its value with the blanks after it. Such a text needs no checking
# here, only skipping: strings, other bytes, brackets nested as deep as it can be.
_INNER = r'(?:"[^"]*"|[^"{}\[\]])*'
for _ in range(_DEPTH - 2):
    _INNER = rf'(?:"[^"]*"|[^"{{}}\[\]]|[\[{{]{_INNER}[\]}}])*'
_SKIP = rf'(?:"[^"]*"|[^",{{}}\[\]]|[\[{{]{_INNER}[\]}}])*'
_TOP_VALUE = (rf"^{_BLANKS}\{{{_BLANKS}(?:{_STRING}{_BLANKS}:{_SKIP},{_BLANKS})*"
              rf"\Q{{key}}\E{_BLANKS}:(?P<value>{_SKIP})[,}}]")
# Strings are kept, blanks outside them dropped.
_INSIGNIFICANT = r'("[^"]*")|[ \t\r\n]+'
_INT = r"(?:0|-?[1-9][0-9]{0,17})"  # orjson reads longer ones as floats
# Kinds of value texts, the first that fits: string, integer (not -0), null, boolean, other
# number, list of integers, other list, object; and the classes Python compares across.
_KINDS = [(pc.starts_with, '"'), (pc.match_substring_regex, f"^{_INT}$"),
          (pc.equal, "null"), (pc.match_substring_regex, "^(?:true|false)$"),
          (pc.match_substring_regex, f"^{_NUMBER}$"),
          (pc.match_substring_regex, rf"^\[(?:{_INT}(?:,{_INT})*)?\]$"),
          (pc.starts_with, "["), (pc.starts_with, "{")]
_CLASS = np.array([0, 1, 2, 3, 2, 2, 4, 4, 5])
_BY_TEXT = [1, 2, 4, 6]  # kinds whose values differ where their texts do
_BLANK = np.zeros(256, dtype=bool)
_BLANK[list(b" \t\r\n")] = True
_MAX_BLANKS = 64  # longer runs of blanks to cut or skip: the per-row way
_LOW7, _HIGH = np.uint64(0x7F7F7F7F7F7F7F7F), np.uint64(0x8080808080808080)
_SPREAD = [np.uint64(0x0101010101010101 * c) for c in b" \t\r\n"]
# What follows "key":value where fields._holds finds it.
_ENDS_PIECE = np.zeros(256, dtype=bool)
_ENDS_PIECE[list(b",} \n\r\t")] = True
_NO_INDEX = np.zeros(0, dtype=np.int64)


class _Piece(NamedTuple):
    """A carried key: its JSON values (null for none), and where it has one."""

    key: str
    values: pa.Array
    valid: np.ndarray

    def pieces(self, rows: np.ndarray) -> pa.Array:
        """``"key":value`` of ``rows``."""
        return pc.binary_join_element_wise(f'"{self.key}":', self.values.take(pa.array(rows)),
                                           "")


def merge_objects(args: pa.Array | pa.ChunkedArray, keys: Mapping[str, pa.Array],
                  ) -> fields.Merged:
    """``fields.merge(args, keys, validate=True, compact=True)``: the same texts and counts,
    column-wise."""
    col = args.combine_chunks() if isinstance(args, pa.ChunkedArray) else args
    pieces: list[_Piece] = []
    for key, values in keys.items():
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        if valid.any():
            quoted = orjson.dumps(key)
            if quoted[1:-1] != key.encode() or b"," in quoted or b":" in quoted \
                    or not pa.types.is_string(values.type):
                return fields.merge(args, keys, validate=True, compact=True)
            pieces.append(_Piece(key, values, valid))
    n = len(col)
    if not pa.types.is_string(col.type) or not n:
        return fields.merge(args, keys, validate=True, compact=True)
    has_args = _mask(pc.greater(pc.utf8_length(col), 0))
    slow = has_args & ~_mask(pc.match_substring_regex(col, _OBJECT_TEXT))
    long = _mask(pc.greater(pc.utf8_length(col), 200)) & ~slow
    if long.any():
        at = np.flatnonzero(long)
        slow[at] = _mask(pc.match_substring_regex(col.take(pa.array(at)), _LONG))
    rows = np.flatnonzero(has_args & ~slow)
    text = _Compacted(*_select(*_buffers(col), rows))
    found = [_Key(text, p, rows) for p in pieces]
    row_slow = text.slow.copy()
    for k in found:
        row_slow |= k.slow
    kept = [k.kept & ~row_slow for k in found]
    spliced = np.zeros(len(rows), dtype=bool)
    for k in kept:
        spliced |= k
    spliced = np.flatnonzero(spliced)
    bounds = text.bounds(spliced)
    row_slow |= text.slow
    slow[rows[row_slow]] = True
    out = fields.Merged(args=col)
    for p, k in zip(pieces, found, strict=True):
        count = int((k.collides & ~row_slow).sum())
        if count:
            out.collisions[p.key] += count
    late = row_slow[spliced]  # too many blanks around the braces
    bounds = (spliced[~late], *(b[~late] for b in bounds))
    out.args = _assemble(col, has_args, text, rows, kept, bounds, pieces, slow, out)
    return out


class _Compacted:
    """Texts (valid JSON objects) with each line break and the blanks after it (and a CR
    just before it) cut out, stripped where they had one: ``fields._BREAKS``, then
    ``strip``. ``slow`` marks texts with runs of blanks too long to follow here."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray) -> None:
        m = len(offsets) - 1
        self.slow = np.zeros(m, dtype=bool)
        breaks = np.flatnonzero(data == ord("\n"))
        if len(breaks):
            data, offsets = self._cut(data, offsets, breaks)
        self.data, self.offsets = data, offsets
        self._by_next: np.ndarray | None = None
        self._groups = _NO_INDEX
        self.texts = pa.LargeStringArray.from_buffers(m, pa.py_buffer(offsets),
                                                      pa.py_buffer(data))

    def _cut(self, data: np.ndarray, offsets: np.ndarray, breaks: np.ndarray,
             ) -> tuple[np.ndarray, np.ndarray]:
        row = _row_of(offsets, breaks)
        cr = breaks > offsets[:-1][row]
        cr[cr] = data[breaks[cr] - 1] == ord("\r")
        end, over = _skip_blanks(data, breaks + 1, offsets[1:][row])
        self.slow[row[over]] = True
        lined = np.zeros(len(offsets) - 1, dtype=bool)
        lined[row] = True
        lined = np.flatnonzero(lined)
        first, last = offsets[:-1][lined], offsets[1:][lined]
        lead, over = _skip_blanks(data, first, last)
        self.slow[lined[over]] = True
        trail, over = _skip_blanks(data, last, first, back=True)
        self.slow[lined[over]] = True
        starts, ends = _union(np.concatenate([breaks - cr, first, trail]),
                              np.concatenate([end, lead, last]))
        cut = np.zeros(len(starts) + 1, dtype=np.int64)
        np.cumsum(ends - starts, out=cut[1:])
        kept = np.empty(2 * len(starts) + 2, dtype=np.int64)
        kept[0], kept[1:-1:2], kept[2:-1:2], kept[-1] = 0, starts, ends, len(data)
        return _spans_data(data, kept[0::2], kept[1::2]), \
            offsets - cut[np.searchsorted(ends, offsets, side="right")]

    def find(self, pattern: bytes) -> np.ndarray:
        """Where ``pattern`` (a quoted name) is in the data."""
        if self._by_next is None:  # the quotes, grouped by the byte after them
            quotes = np.flatnonzero(self.data[:-1] == ord('"'))
            after = self.data[quotes + 1]
            order = np.argsort(after, kind="stable")
            self._by_next = quotes[order]
            self._groups = np.searchsorted(after[order], np.arange(257))
        found = self._by_next[self._groups[pattern[1]]:self._groups[pattern[1] + 1]]
        found = found[found <= len(self.data) - len(pattern)]
        for j in range(2, len(pattern)):
            found = found[self.data[found + j] == pattern[j]]
        return found

    def bounds(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per text: where its opening brace is, where the blanks before its closing brace
        start, and whether it has pairs; ``slow`` marks texts with too many blanks."""
        data, offsets = self.data, self.offsets
        start, over = _skip_blanks(data, offsets[:-1][rows], offsets[1:][rows])
        self.slow[rows[over]] = True
        close, over = _skip_blanks(data, offsets[1:][rows], start, back=True)
        self.slow[rows[over]] = True
        end, over = _skip_blanks(data, close - 1, start, back=True)
        self.slow[rows[over]] = True
        inner, over = _skip_blanks(data, start + 1, close)
        self.slow[rows[over]] = True
        return start, end, inner < close - 1


class _Key:
    """What ``fields._splice`` does with one carried key's pieces, per text: ``kept``,
    ``collides``, and ``slow`` for texts to leave to it."""

    def __init__(self, text: _Compacted, piece: _Piece, rows: np.ndarray) -> None:
        """``rows``: the args row of each text."""
        valid = piece.valid[rows]
        m = len(valid)
        self.slow = np.zeros(m, dtype=bool)
        self.collides = np.zeros(m, dtype=bool)
        self.kept = valid.copy()
        quoted = f'"{piece.key}"'
        name = quoted.encode()
        # Where the texts to decide name the key (a string token there, see the module).
        found = text.find(name)
        row = _row_of(text.offsets, found)
        mine = valid[row] & ~text.slow[row] & (found + len(name) <= text.offsets[1:][row])
        found, row = found[mine], row[mine]
        count = np.bincount(row, minlength=m)
        self.slow[count > 1] = True  # which one fields._holds meets first: per row
        once = count[row] == 1
        if not once.any():
            return
        texts = row[once]
        self.kept[texts] = False
        at = found[once] + len(name)
        # fields._holds: "key":value or "key": value, then , } or a blank, anywhere.
        vdata, voffsets = _buffers(piece.values)
        vstart, vend = voffsets[:-1][rows[texts]], voffsets[1:][rows[texts]]
        end = text.offsets[texts + 1]
        colon = at < end
        colon[colon] = text.data[at[colon]] == ord(":")
        holds = np.zeros(len(texts), dtype=bool)
        for gap in (1, 2):
            where = np.flatnonzero(colon & ~holds)
            if gap == 2:
                where = where[at[where] + 1 < end[where]]
                where = where[text.data[at[where] + 1] == ord(" ")]
            holds[where] = _equal_at(text.data, end[where], at[where] + gap, vdata,
                                     vstart[where], vend[where])
        # Else a top-level key: its value against the piece's.
        rest = np.flatnonzero(~holds)
        if not len(rest):
            return
        top = pc.extract_regex(text.texts.take(pa.array(texts[rest])),
                               _TOP_VALUE.replace("{key}", quoted))
        is_top = _mask(top.is_valid())
        self.kept[texts[rest[~is_top]]] = True
        rest = rest[is_top]
        if not len(rest):
            return
        ours = pc.replace_substring_regex(top.field("value").filter(top.is_valid()),
                                          _INSIGNIFICANT, r"\1")
        same, differ = _compare(ours, spans(vdata, vstart[rest], vend[rest]))
        self.collides[texts[rest[differ]]] = True
        self.slow[texts[rest[~same & ~differ]]] = True


def _compare(ours: pa.Array, theirs: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Per value text (ours without blanks outside strings): whether it is the piece's
    value text, and whether they are surely different values (if neither, the per-row way
    compares)."""
    ours, theirs = ours.cast(pa.large_string()), theirs.cast(pa.large_string())
    same = _mask(pc.equal(ours, theirs))
    a, b = _kind(ours), _kind(theirs)
    # Python never finds a string, None, a list or a dict equal to a value of another of
    # these kinds or to a number; nor strings (ours have no escapes), integers, booleans or
    # lists of integers with different texts.
    apart = (_CLASS[a] != _CLASS[b]) & (a > 0) & (b > 0)
    escaped = _mask(pc.match_substring(theirs, "\\"))
    alike = (a == b) & np.isin(a, _BY_TEXT) & ~escaped
    return same, ~same & (apart | alike)


def _kind(texts: pa.Array) -> np.ndarray:
    """Each JSON value text's kind (``_KINDS``), 0 for none of them."""
    kind = np.zeros(len(texts), dtype=np.uint8)
    for k, (test, pattern) in enumerate(_KINDS, start=1):
        hit = _mask(test(texts, pattern)) & (kind == 0)
        kind[hit] = k
    return kind


def _equal_at(data: np.ndarray, row_end: np.ndarray, at: np.ndarray, vdata: np.ndarray,
              vstart: np.ndarray, vend: np.ndarray) -> np.ndarray:
    """Whether ``data`` holds each value text at ``at``, followed (before ``row_end``) by a
    byte that ends a piece for ``fields._holds``."""
    size = vend - vstart
    ok = at + size < row_end
    ok[ok] = _ENDS_PIECE[data[at[ok] + size[ok]]] & (data[at[ok]] == vdata[vstart[ok]])
    rows = np.flatnonzero(ok)
    if not len(rows):
        return ok
    differ = np.zeros(int(size[rows].sum()) + 1, dtype=np.int64)
    np.cumsum(data[_ranges(at[rows], at[rows] + size[rows])]
              != vdata[_ranges(vstart[rows], vend[rows])], out=differ[1:])
    bounds = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(size[rows], out=bounds[1:])
    ok[rows] = differ[bounds[1:]] == differ[bounds[:-1]]
    return ok


def _assemble(col: pa.Array, has_args: np.ndarray, text: _Compacted, rows: np.ndarray,
              kept: list[np.ndarray],
              bounds: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
              pieces: list[_Piece], slow: np.ndarray,
              out: fields.Merged) -> pa.Array:
    """Every row's result: the compacted text, with the kept pieces spliced in (texts
    ``bounds[0]``, see ``_Compacted.bounds``); an object of its pieces where a row has no
    args; the per-row way's for the slow rows."""
    n, m = len(col), len(rows)
    parts = [col.cast(pa.large_string()), text.texts]
    index = np.arange(n)
    index[rows] = n + np.arange(m)
    at, start, end, pairs = bounds
    if len(at):
        # The text up to its closing brace, less the blanks before it; the pieces.
        body = spans(text.data, start, end)
        comma = pa.array(["", ","], pa.large_string()).take(pa.array(pairs.astype(np.int8)))
        fragment = _join([(p, rows[at], k[at]) for p, k in zip(pieces, kept, strict=True)])
        parts.append(pc.binary_join_element_wise(body, comma, fragment, _large("}"),
                                                 _large("")))
        index[rows[at]] = sum(len(p) for p in parts[:-1]) + np.arange(len(at))
    extra = np.zeros(n, dtype=bool)
    for p in pieces:
        extra |= p.valid
    at = np.flatnonzero(extra & ~has_args)
    if len(at):
        fragment = _join([(p, at, p.valid[at]) for p in pieces])
        parts.append(pc.binary_join_element_wise(_large("{"), fragment, _large("}"),
                                                 _large("")))
        index[at] = sum(len(p) for p in parts[:-1]) + np.arange(len(at))
    at = np.flatnonzero(slow)
    if len(at):
        merged = fields.merge(col.take(pa.array(at)),
                              {p.key: p.values.take(pa.array(at)) for p in pieces},
                              validate=True, compact=True)
        out.collisions.update(merged.collisions)
        out.wrapped += merged.wrapped
        parts.append(merged.args.cast(pa.large_string()))
        index[at] = sum(len(p) for p in parts[:-1]) + np.arange(len(at))
    return pa.concat_arrays(parts).take(pa.array(index)).cast(pa.string())


def _join(pieces: list[tuple[_Piece, np.ndarray, np.ndarray]]) -> pa.Array:
    """Per row the kept ``"key":value`` pieces, joined by commas: ``(piece, the args row of
    each row, kept)`` in key order."""
    n = len(pieces[0][1])
    text = pa.repeat(pa.scalar("", pa.string()), n)
    have = np.zeros(n, dtype=bool)
    for piece, rows, keep in pieces:
        if not keep.any():
            continue
        values = pc.if_else(pa.array(keep), piece.pieces(rows), text)
        joined = pc.binary_join_element_wise(text, values, ",")
        text = pc.if_else(pa.array(have & keep), joined, values)
        have |= keep
    return text.cast(pa.large_string())


def _large(text: str) -> pa.Scalar:
    return pa.scalar(text, pa.large_string())


def _mask(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean array as numpy, null as False."""
    return pc.fill_null(values, False).to_numpy(zero_copy_only=False)


def _buffers(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The bytes and int64 offsets (from 0) of a string array (its nulls' as they are)."""
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[
        texts.offset:texts.offset + len(texts) + 1].astype(np.int64)
    data = np.frombuffer(texts.buffers()[2], dtype=np.uint8) if texts.buffers()[2] \
        else np.zeros(0, dtype=np.uint8)
    return data[offsets[0]:offsets[-1]], offsets - offsets[0]


def _select(data: np.ndarray, offsets: np.ndarray, rows: np.ndarray,
            ) -> tuple[np.ndarray, np.ndarray]:
    """The texts of ``rows``, back to back."""
    starts, ends = offsets[:-1][rows], offsets[1:][rows]
    new = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=new[1:])
    if new[-1] == len(data):  # the others are empty
        return data, new
    return _spans_data(data, starts, ends), new


def _spans_data(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The bytes of the disjoint increasing spans ``data[start[i]:end[i]]``, back to back."""
    size = int((end - start).sum())
    if not size:
        return data[:0]
    return np.frombuffer(spans(data, start, end).buffers()[2], dtype=np.uint8)[:size]


def _row_of(offsets: np.ndarray, at: np.ndarray) -> np.ndarray:
    return np.searchsorted(offsets, at, side="right") - 1


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Every index of the ranges ``[starts, ends)``."""
    sizes = ends - starts
    before = np.cumsum(sizes) - sizes
    return np.repeat(starts - before, sizes) + np.arange(int(sizes.sum()), dtype=np.int64)


def _union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the ranges ``[starts, ends)`` (each within a text): sorted, disjoint,
    none empty."""
    some = ends > starts
    starts, ends = starts[some], ends[some]
    if (starts[1:] < starts[:-1]).any():
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends) if len(ends) else ends
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:] >= reach[:-1]  # ranges that meet stay apart: at texts' bounds
    last = np.r_[np.flatnonzero(new)[1:] - 1, len(starts) - 1] if len(starts) else _NO_INDEX
    return starts[new], reach[last]


def _skip_blanks(data: np.ndarray, at: np.ndarray, stop: np.ndarray, *, back: bool = False,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """From each ``at`` past the blanks towards ``stop`` (backwards: ``at`` is an end), and
    where there were more than ``_MAX_BLANKS``."""
    at = at.copy()
    todo = np.flatnonzero(at > stop if back else at < stop)
    todo = todo[_BLANK[data[at[todo] - back]]]
    # Eight bytes at a time, as one word each (most runs are shorter); bytewise where a
    # word would leave the data.
    words = np.lib.stride_tricks.sliding_window_view(data, min(8, len(data)))
    edge = _NO_INDEX
    for _ in range(_MAX_BLANKS // 8):
        fits = (at[todo] >= 8) if back else (at[todo] <= len(data) - 8)
        edge = np.r_[edge, todo[~fits]]
        todo = todo[fits]
        if not len(todo):
            break
        bits = _nonblank_bits(words[at[todo] - 8 if back else at[todo]].view("<u8")[:, 0])
        if back:  # the first non-blank byte from the top
            top = (np.log2(np.maximum(bits, 1)).astype(np.int64) - 7) // 8
            count = np.where(bits == 0, 8, 7 - top)
        else:  # from the bottom
            low = bits & (~bits + np.uint64(1))
            count = np.where(bits == 0, 8, (np.log2(np.maximum(low, 1)).astype(np.int64) - 7) // 8)
        count = np.minimum(count, np.abs(at[todo] - stop[todo]))
        at[todo] += -count if back else count
        todo = todo[count == 8]
    for _ in range(8):
        edge = edge[(at[edge] > stop[edge]) if back else (at[edge] < stop[edge])]
        edge = edge[_BLANK[data[at[edge] - back]]]
        at[edge] += -1 if back else 1
    over = np.zeros(len(at), dtype=bool)
    over[todo] = True
    return at, over


def _nonblank_bits(words: np.ndarray) -> np.ndarray:
    """The high bit of each byte of the words that is not a JSON blank."""
    bits = np.full(len(words), _HIGH)
    for spread in _SPREAD:
        x = words ^ spread  # a zero byte where the byte is this blank
        bits &= ((x & _LOW7) + _LOW7) | x
    return bits


def spans(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> pa.LargeStringArray:
    """``data[start[i]:end[i]]`` as strings, for disjoint spans in increasing order that cut
    no UTF-8 character."""
    # The spans and the gaps between them, alternately, are one string array over ``data``
    # as it is; taking every other string copies the spans in one Arrow call.
    bounds = np.empty(2 * len(start) + 1, dtype=np.int64)
    bounds[0:-1:2], bounds[1:-1:2] = start, end
    bounds[-1] = end[-1] if len(end) else 0
    both = pa.LargeStringArray.from_buffers(2 * len(start), pa.py_buffer(bounds),
                                            pa.py_buffer(data))
    return both.take(pa.array(np.arange(0, 2 * len(start), 2)))
