"""Split many JSON object texts into their top-level (key, value) pairs, column-wise.

The Perfetto writer turns each event's ``args`` object into debug annotations. Parsing each
text with a JSON library costs a Python step per event and per key; here the texts of a whole
chunk are split with numpy over their bytes: the structural characters are found once, quotes
pair up by a running count (texts with a backslash, so with escapes, are left out), nesting
depth is a running sum, and each object's sequence of top-level tokens is checked against
the shape of an object by one regular expression per text. Keys and values come back as
Arrow strings, the values as JSON text (strings with their quotes, nested arrays and
objects whole), for the caller to encode column by column.

The split is exact or declines: a text it cannot read exactly as ``orjson.loads`` does
(escapes, control characters in strings, a key twice, white space other than JSON's, bad
JSON of any kind) is marked for the caller's per-row path, never guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_QUOTE, _OPEN_OBJ, _CLOSE_OBJ, _OPEN_ARR, _CLOSE_ARR, _COLON, _COMMA = range(1, 8)
_CLASS = np.zeros(256, dtype=np.uint8)
for _ch, _cls in zip(b'"{}[]:,', range(1, 8), strict=True):
    _CLASS[_ch] = _cls
_DEPTH = np.array([0, 0, 1, -1, 1, -1, 0, 0], dtype=np.int8)
_SYMBOL = np.frombuffer(b'?"{}[]:,', dtype=np.uint8)
_NESTED_OPEN, _NESTED_CLOSE = ord("O"), ord("C")
_BLANK = np.zeros(256, dtype=bool)
_BLANK[list(b" \t\n\r")] = True
_CONTROL = np.zeros(256, dtype=bool)
_CONTROL[:0x20] = True
_CONTROL[list(b"\t\n\r")] = False
# An object's top-level tokens: "key": then a string, a nested value (O...C) or a scalar
# (the text between the colon and the next comma or brace).
_OBJECT_SHAPE = r'^\{(?:"":(?:""|OC|)(?:,"":(?:""|OC|))*)?\}$'
_Q, _COL, _COM, _OPEN, _CLOSE = (ord(c) for c in '":,{}')


@dataclass
class Pairs:
    """The top-level pairs of each text: pair ``j`` is ``keys[key[j]]``: ``values[j]`` of
    row ``row[j]``, in text order; ``slow`` marks the rows left to the per-row path (their
    pairs are not listed)."""

    row: np.ndarray
    key: np.ndarray
    keys: list[str]
    values: pa.LargeStringArray  # JSON text: strings quoted, scalars without blanks
    slow: np.ndarray


def text_buffers(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes and int64 offsets (from 0) of a string array, nulls as empty."""
    texts = pc.fill_null(texts, "").cast(pa.large_string())
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int64)[
        texts.offset:texts.offset + len(texts) + 1]
    data = np.frombuffer(texts.buffers()[2], dtype=np.uint8) if texts.buffers()[2] \
        else np.zeros(0, dtype=np.uint8)
    return data[offsets[0]:offsets[-1]], offsets - offsets[0]


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


def split_objects(data: np.ndarray, offsets: np.ndarray) -> Pairs:
    """The top-level pairs of the JSON objects ``data[offsets[i]:offsets[i+1]]``.

    Empty texts have no pairs. Texts that are not a JSON object starting with ``{`` and
    ending with ``}``, or that the split cannot take exactly (see the module), are ``slow``.
    """
    starts, ends = offsets[:-1], offsets[1:]
    nonempty = ends > starts
    slow = nonempty.copy()
    edge = np.flatnonzero(nonempty)
    slow[edge] = (data[starts[edge]] != _OPEN) | (data[ends[edge] - 1] != _CLOSE)
    for odd in (np.flatnonzero(data == ord("\\")), np.flatnonzero(_CONTROL[data])):
        slow[np.searchsorted(offsets, odd, side="right") - 1] = True
    return _split_without(data, offsets, ~nonempty | slow, slow)


def _split_without(data: np.ndarray, offsets: np.ndarray, leave: np.ndarray,
                   slow: np.ndarray | None = None) -> Pairs:
    """``_split`` of the texts not in ``leave``; those are ``slow`` (all by default)."""
    rows = np.flatnonzero(~leave)
    if len(rows) < len(leave):
        starts, ends = offsets[:-1][rows], offsets[1:][rows]
        if (offsets[1:] > offsets[:-1])[leave].any():  # copy the texts kept together
            keep = np.zeros(len(data), dtype=bool)
            keep[_ranges(starts, ends)] = True
            data = data[keep]
            offsets = np.zeros(len(rows) + 1, dtype=np.int64)
            np.cumsum(ends - starts, out=offsets[1:])
        else:  # only empty texts are left out: the others are back to back already
            offsets = np.r_[starts, ends[-1:]] if len(rows) else np.zeros(1, dtype=np.int64)
    pairs = _split(data, offsets)
    out = leave.copy() if slow is None else slow
    out[rows[pairs.slow]] = True
    pairs.row = rows[pairs.row]
    pairs.slow = out
    return pairs


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Every index of the ranges ``[starts, ends)``."""
    sizes = ends - starts
    before = np.cumsum(sizes) - sizes
    return np.repeat(starts - before, sizes) + np.arange(int(sizes.sum()), dtype=np.int64)


def _split(data: np.ndarray, offsets: np.ndarray) -> Pairs:
    """``split_objects`` for texts that all start with ``{`` and end with ``}`` and hold no
    backslash nor control character other than blanks."""
    m = len(offsets) - 1
    if m == 0:
        return Pairs(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), [],
                     pa.array([], pa.large_string()), np.zeros(0, dtype=bool))
    cls = _CLASS[data]
    tok = np.flatnonzero(cls)
    c = cls[tok]
    # Every text starts with "{": its first token. The running counts below run over all
    # texts: they are right for each text when every text closes its strings and brackets,
    # checked first; texts that do not are split apart from the others.
    first = np.searchsorted(tok, offsets[:-1])
    row_start = np.zeros(len(tok), dtype=np.int64)
    row_start[first] = 1
    row = np.cumsum(row_start) - 1
    quotes = np.cumsum(c == _QUOTE)
    odd = np.diff(np.r_[quotes[first], quotes[-1]]) % 2 == 1
    if odd.any():
        return _split_without(data, offsets, odd)
    keep = ((quotes & 1) == 0) | (c == _QUOTE)  # not inside a string
    depth_after = np.cumsum(np.where(keep, _DEPTH[c], 0), dtype=np.int64)
    net = np.diff(np.r_[0, depth_after[first[1:] - 1], depth_after[-1]])
    if (net != 0).any():
        return _split_without(data, offsets, net != 0)
    tok, c, row, depth_after = tok[keep], c[keep], row[keep], depth_after[keep]
    depth = depth_after - _DEPTH[c]
    closing = (c == _CLOSE_OBJ) | (c == _CLOSE_ARR)
    nested_open = ((c == _OPEN_OBJ) | (c == _OPEN_ARR)) & (depth == 1)
    nested_close = closing & (depth == 2)
    top = (depth <= 1) | nested_close
    sym = _SYMBOL[c]
    sym[nested_open] = _NESTED_OPEN
    sym[nested_close] = _NESTED_CLOSE
    tok, sym, row = tok[top], sym[top], row[top]
    sym_offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=m), out=sym_offsets[1:])
    shapes = pa.LargeStringArray.from_buffers(m, pa.py_buffer(sym_offsets), pa.py_buffer(sym))
    slow = ~pc.match_substring_regex(shapes, _OBJECT_SHAPE).to_numpy(zero_copy_only=False)
    if slow.any():
        good = ~slow[row]
        tok, sym, row = tok[good], sym[good], row[good]
        if not len(tok):
            return Pairs(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), [],
                         pa.array([], pa.large_string()), slow)
    # From here on every text's tokens have the object's shape.
    prev = np.empty_like(sym)
    prev[0:1], prev[1:] = 0, sym[:-1]
    nxt = np.empty_like(sym)
    nxt[-1:], nxt[:-1] = 0, sym[1:]
    opens_string = (sym == _Q) & (prev != _Q)
    scalar = (sym == _COL) & ((nxt == _COM) | (nxt == _CLOSE))
    # Between tokens only blanks, except in strings, scalars and nested values.
    gap = ~(opens_string | scalar | (sym == _NESTED_OPEN) | (sym == _CLOSE))
    at = tok[gap] + 1
    size = np.r_[tok[1:], 0][gap] - at
    one = size == 1
    bad = np.zeros(len(at), dtype=bool)
    bad[one] = ~_BLANK[data[at[one]]]
    long = np.flatnonzero(size > 1)
    if len(long):
        index = _ranges(at[long], at[long] + size[long])
        nonblank = np.flatnonzero(~_BLANK[data[index]])
        bad[long[np.searchsorted(np.cumsum(size[long]), nonblank, side="right")]] = True
    slow[row[gap][bad]] = True
    # Blanks that are control characters are not allowed inside strings.
    blanks = np.flatnonzero(data < 0x20)
    if len(blanks):
        string_at = np.flatnonzero(opens_string)
        where = np.searchsorted(tok[string_at], blanks, side="right") - 1
        inside = (where >= 0) & (blanks < tok[string_at + 1][np.maximum(where, 0)])
        slow[row[string_at[where[inside]]]] = True
    key_at = np.flatnonzero(opens_string & ((prev == _OPEN) | (prev == _COM)))
    colon = key_at + 2
    is_scalar = (sym[colon + 1] == _COM) | (sym[colon + 1] == _CLOSE)
    value_start = np.where(is_scalar, tok[colon] + 1, tok[colon + 1])
    value_end = np.where(is_scalar, tok[colon + 1],
                         tok[np.minimum(colon + 2, len(tok) - 1)] + 1)
    encoded = spans(data, tok[key_at] + 1, tok[key_at + 1]).dictionary_encode()
    keys = encoded.dictionary.to_pylist()
    key = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    pair_row = row[key_at]
    slow[_repeated_keys(pair_row, key, len(keys))] = True
    values = spans(data, value_start, value_end)
    if is_scalar.any():
        values = pc.if_else(pa.array(is_scalar), pc.utf8_trim(values, " \t\n\r"), values)
    keep_pairs = ~slow[pair_row]
    if not keep_pairs.all():
        pair_row, key = pair_row[keep_pairs], key[keep_pairs]
        values = values.filter(pa.array(keep_pairs))
    return Pairs(pair_row, key, keys, values, slow)


def _repeated_keys(row: np.ndarray, key: np.ndarray, n_keys: int) -> np.ndarray:
    """The rows that name a key twice (orjson keeps the last value, in the first's place)."""
    if not len(row):
        return np.zeros(0, dtype=np.int64)
    bounds = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
    if n_keys <= 32:  # one bit per key: a sum that is not the bits' OR counts one twice
        bits = np.left_shift(np.uint64(1), key.astype(np.uint64))
        twice = np.bitwise_or.reduceat(bits, bounds) != np.add.reduceat(bits, bounds)
        return row[bounds[twice]]
    combined = np.sort(row * n_keys + key)
    return combined[1:][combined[1:] == combined[:-1]] // n_keys
