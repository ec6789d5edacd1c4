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
_DIGIT = np.zeros(256, dtype=np.int32)
_DIGIT[list(b"0123456789")] = 1
# Numbers the fast path reads as orjson does: integers of 18 digits at most (always an
# int64), and floats short enough, with an exponent of two digits at most, never to leave a
# double's range (Arrow's cast and orjson both round correctly).
_EXPONENT = r"[eE][+-]?[0-9]{1,2}"
_FLOAT_TEXT = rf"^-?(?:0|[1-9][0-9]{{0,20}})(?:\.[0-9]{{1,30}}(?:{_EXPONENT})?|{_EXPONENT})$"
INT, FLOAT, BOOL, STRING, NESTED = range(5)


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
    if texts.null_count:
        texts = pc.fill_null(texts, "")
    wide = pa.types.is_large_string(texts.type)
    if not wide and not pa.types.is_string(texts.type):
        texts, wide = texts.cast(pa.large_string()), True
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int64 if wide else np.int32)[
        texts.offset:texts.offset + len(texts) + 1].astype(np.int64)
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
    # The structural characters, and the tabs and line breaks (to tell those in strings).
    folded = data | 0x20  # "[" and "]" fold onto "{" and "}"
    tok = np.flatnonzero((data == _Q) | (data == _COL) | (data == _COM) | (folded == _OPEN)
                         | (folded == _CLOSE) | (data < 0x20))
    if len(data) < 2**31:  # half the memory traffic of every pass over the tokens below
        tok = tok.astype(np.int32)
    c = _CLASS[data[tok]]
    # Every text starts with "{": its first token. The running counts below run over all
    # texts: they are right for each text when every text closes its strings and brackets,
    # checked first; texts that do not are split apart from the others.
    first = np.searchsorted(tok, offsets[:-1])
    row_start = np.zeros(len(tok), dtype=np.int32)
    row_start[first] = 1
    row = np.cumsum(row_start, dtype=np.int32) - 1
    quotes = np.cumsum((c == _QUOTE).astype(np.int32), dtype=np.int32)
    odd = np.diff(np.r_[quotes[first], quotes[-1]]) % 2 == 1
    if odd.any():
        return _split_without(data, offsets, odd)
    outside = (quotes & 1) == 0  # not inside a string (or its closing quote)
    # JSON strings hold no raw control characters (tabs and line breaks are escaped).
    slow = np.zeros(m, dtype=bool)
    slow[row[(c == 0) & ~outside]] = True
    keep = (outside & (c != 0)) | (c == _QUOTE)
    depth_after = np.cumsum(np.where(keep, _DEPTH[c], 0).astype(np.int32), dtype=np.int32)
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
    slow |= ~pc.match_substring_regex(shapes, _OBJECT_SHAPE).to_numpy(zero_copy_only=False)
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
    after = np.empty_like(tok)
    after[:-1], after[-1:] = tok[1:], 0
    slow[row[gap][~_blank(data, tok[gap] + 1, after[gap])]] = True
    key_at = np.flatnonzero(opens_string & ((prev == _OPEN) | (prev == _COM)))
    colon = key_at + 2
    is_scalar = (sym[colon + 1] == _COM) | (sym[colon + 1] == _CLOSE)
    value_start = np.where(is_scalar, tok[colon] + 1, tok[colon + 1])
    value_end = np.where(is_scalar, tok[colon + 1],
                         tok[np.minimum(colon + 2, len(tok) - 1)] + 1)
    # A scalar is the text between its colon and the next comma or brace, blanks trimmed.
    at = np.flatnonzero(is_scalar)
    value_start[at], value_end[at], untrimmed = _trim(data, value_start[at], value_end[at])
    slow[row[key_at[at[untrimmed]]]] = True
    encoded = spans(data, tok[key_at] + 1, tok[key_at + 1]).dictionary_encode()
    keys = encoded.dictionary.to_pylist()
    key = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    pair_row = row[key_at]
    slow[_repeated_keys(pair_row, key, len(keys))] = True
    values = spans(data, value_start, value_end)
    keep_pairs = ~slow[pair_row]
    if not keep_pairs.all():
        pair_row, key = pair_row[keep_pairs], key[keep_pairs]
        values = values.filter(pa.array(keep_pairs))
    return Pairs(pair_row, key, keys, values, slow)


def _blank(data: np.ndarray, start: np.ndarray, end: np.ndarray, limit: int = 16,
           ) -> np.ndarray:
    """Whether ``data[start:end]`` holds only JSON blanks, per span. Byte by byte over all
    spans at once (the gaps between tokens are short); the bytes of spans longer than
    ``limit`` are counted in one pass."""
    size = end - start
    ok = np.ones(len(size), dtype=bool)
    todo = np.flatnonzero(size > 0)
    for k in range(limit):
        if not len(todo):
            return ok
        blank = _BLANK[data[start[todo] + k]]
        ok[todo[~blank]] = False
        todo = todo[blank & (size[todo] > k + 1)]
    if len(todo):
        bounds = np.empty(2 * len(todo), dtype=np.int64)
        bounds[0::2], bounds[1::2] = start[todo] + limit, end[todo]
        nonblank = np.add.reduceat(~_BLANK[np.r_[data, 0x20]], bounds, dtype=np.int64)
        ok[todo[nonblank[0::2] > 0]] = False
    return ok


def _trim(data: np.ndarray, start: np.ndarray, end: np.ndarray, limit: int = 16,
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The spans without leading and trailing JSON blanks, and a mask of those with more
    than ``limit`` blanks at an end (left as they are)."""
    start, end = start.copy(), end.copy()
    untrimmed = np.zeros(len(start), dtype=bool)
    last = len(data) - 1
    for edge, step in ((start, 1), (end, -1)):
        todo = np.arange(len(start))
        for k in range(limit + 1):
            at = edge[todo] if step > 0 else edge[todo] - 1
            todo = todo[(start[todo] < end[todo]) & _BLANK[data[np.clip(at, 0, last)]]]
            if not len(todo):
                break
            if k == limit:
                untrimmed[todo] = True
                break
            edge[todo] += step
    return start, end, untrimmed


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


@dataclass
class Values:
    """JSON value texts by kind (``INT`` ... ``NESTED``; null is the string "null"), with the
    numbers parsed, and ``odd`` marking the texts the fast path does not take (escapes, big
    or long numbers, bad JSON)."""

    kind: np.ndarray
    ints: np.ndarray    # the int, or 1 and 0 for true and false
    floats: np.ndarray
    odd: np.ndarray


def value_kinds(values: pa.LargeStringArray) -> Values:
    """Classify and parse JSON value texts (no blanks around them) column-wise."""
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64)[
        values.offset:values.offset + n + 1]
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8) if values.buffers()[2] \
        else np.zeros(0, dtype=np.uint8)
    size = np.diff(offsets)
    first = np.zeros(n, dtype=np.uint8)
    filled = size > 0
    first[filled] = data[offsets[:-1][filled]]
    kind = np.full(n, STRING, dtype=np.uint8)
    ints = np.zeros(n, dtype=np.int64)
    floats = np.zeros(n, dtype=np.float64)
    odd = ~filled
    quoted = first == _Q
    kind[(first == ord("[")) | (first == ord("{"))] = NESTED
    # A string's content is copied as it is: one with escapes (typed values are orjson's
    # text) goes the per-row way. Nested values are parsed by the caller, escapes and all.
    escapes = np.flatnonzero(data[offsets[0]:offsets[-1]] == ord("\\")) + offsets[0]
    escaped = np.zeros(n, dtype=bool)
    escaped[np.searchsorted(offsets, escapes, side="right") - 1] = True
    odd |= quoted & escaped
    scalar = filled & ~quoted & (kind != NESTED)
    digits_sum = np.zeros(len(data) + 1, dtype=np.int32)
    np.cumsum(_DIGIT[data], dtype=np.int32, out=digits_sum[1:])
    digits = digits_sum[offsets[1:]] - digits_sum[offsets[:-1]]
    minus = (first == ord("-")).astype(np.int64)
    is_int = scalar & (digits == size - minus) & (digits >= 1) & (digits <= 18)
    lead_zero = np.zeros(n, dtype=bool)
    at = np.flatnonzero(is_int & (digits > 1))
    lead_zero[at] = data[offsets[:-1][at] + minus[at]] == ord("0")
    is_int &= ~lead_zero  # "01" is no JSON number
    if is_int.any():
        ints[is_int] = pc.cast(values.filter(pa.array(is_int)), pa.int64()).to_numpy()
        kind[is_int] = INT
    number = scalar & ~is_int & ((first == ord("-")) | (_DIGIT[first] == 1))
    is_float = np.zeros(n, dtype=bool)
    if number.any():
        texts = values.filter(pa.array(number))
        is_float[number] = pc.match_substring_regex(texts, _FLOAT_TEXT) \
            .to_numpy(zero_copy_only=False)
        if is_float.any():
            floats[is_float] = pc.cast(values.filter(pa.array(is_float)),
                                       pa.float64()).to_numpy()
            kind[is_float] = FLOAT
    word = np.flatnonzero(scalar & ((first == ord("t")) | (first == ord("f"))
                                    | (first == ord("n"))))
    known = is_int | is_float
    if len(word):
        texts = values.take(pa.array(word))
        for text, value, as_kind in (("true", 1, BOOL), ("false", 0, BOOL),
                                     ("null", 0, STRING)):
            hit = word[pc.equal(texts, text).to_numpy(zero_copy_only=False)]
            known[hit] = True
            kind[hit] = as_kind
            ints[hit] = value
    odd |= scalar & ~known
    return Values(kind, ints, floats, odd)
