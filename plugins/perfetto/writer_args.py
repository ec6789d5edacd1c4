"""Split many JSON object texts into their top-level (key, value) pairs, column-wise.

The Perfetto writer turns each event's ``args`` object into debug annotations. Parsing each
text with a JSON library costs a Python step per event and per key; here the texts of a whole
chunk are split with numpy over their bytes: the structural characters are found in one
``bytes.translate`` pass, quotes pair up by a running count (texts with a backslash, so with
escapes, are left out), nesting depth is a running sum, and each object's sequence of
top-level tokens is checked against the shape of an object by one regular expression per
text. Each key and value is cut out with the blanks around it and trimmed by Arrow: what is
left must be the key's string or the value, so nothing but blanks stands between tokens.
Keys and values come back as Arrow strings, the values as JSON text (strings with their
quotes, nested arrays and objects whole), for the caller to encode column by column.

The split is exact or declines: a text it cannot read exactly as ``orjson.loads`` does
(escapes, control characters in strings, a key twice, white space other than JSON's, bad
JSON of any kind) is marked for the caller's per-row path, never guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.toolkit import json_objects

# The spans of a text as one string array (shared with the Chrome JSON writer's merge).
spans = json_objects.spans

_NESTED_OPEN, _NESTED_CLOSE = ord("O"), ord("C")
_BLANKS = " \t\n\r"
_CONTROL, _ESCAPE = 1, ord("\\")
_SPELLINGS = 4096  # distinct texts of keys with their blanks that are trimmed in Python
# Per byte: the structural characters as they are, control characters as _CONTROL, the
# backslash; 0 for the rest. bytes.translate looks a chunk up in one C pass, far cheaper
# than numpy's comparisons and their temporary arrays.
_TOKENS = bytes(b if b in b'"{}[]:,\\' else _CONTROL if b < 0x20 else 0 for b in range(256))
# An object's top-level tokens: "key": then a string, a nested value (O...C) or a scalar
# (the text between the colon and the next comma or brace).
_OBJECT_SHAPE = r'^\{(?:"":(?:""|OC|)(?:,"":(?:""|OC|))*)?\}$'
_Q, _COL, _COM, _OPEN, _CLOSE = (ord(c) for c in '":,{}')
_DIGIT = np.zeros(256, dtype=np.int32)
_DIGIT[list(b"0123456789")] = 1
_DIGITS = bytes(_DIGIT.astype(np.uint8))  # as a bytes.translate table
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
    return _split_without(data, offsets, ~nonempty | slow, slow)


def _row_of(offsets: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The text each byte position is in."""
    return np.searchsorted(offsets, positions, side="right") - 1


def _split_without(data: np.ndarray, offsets: np.ndarray, leave: np.ndarray,
                   slow: np.ndarray | None = None) -> Pairs:
    """``_split`` of the texts not in ``leave``; those are ``slow`` (all by default)."""
    rows = np.flatnonzero(~leave)
    if len(rows) < len(leave):
        starts, ends = offsets[:-1][rows], offsets[1:][rows]
        if (offsets[1:] > offsets[:-1])[leave].any():  # copy the texts kept together
            data = data[_ranges(starts, ends)]
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


def _no_pairs(slow: np.ndarray) -> Pairs:
    return Pairs(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), [],
                 pa.array([], pa.large_string()), slow)


def _split(data: np.ndarray, offsets: np.ndarray) -> Pairs:
    """``split_objects`` for texts that all start with ``{`` and end with ``}``."""
    m = len(offsets) - 1
    slow = np.zeros(m, dtype=bool)
    if m == 0:
        return _no_pairs(slow)
    # The tokens: structural characters, control characters (to tell those in strings) and
    # backslashes. Positions stay int64: numpy gathers with them faster than with int32.
    marks = np.frombuffer(data.tobytes().translate(_TOKENS), dtype=np.uint8)
    tok = np.flatnonzero(marks != 0)  # numpy finds a bool array's True far faster
    c = marks[tok]
    del marks
    escapes = c == _ESCAPE
    if escapes.any():  # their texts go the per-row way: escaped quotes do not pair
        return _split_without(data, offsets, _rows(offsets, tok[escapes], m))
    # Every text starts with "{": its first token. The running counts below run over all
    # texts: they are right for each text when every text closes its strings and brackets,
    # checked first; texts that do not are split apart from the others.
    quote = c == _Q
    inside = np.logical_xor.accumulate(quote)  # an odd count of quotes so far
    first = np.searchsorted(tok, offsets[:-1])
    at_first = np.r_[inside[first], inside[-1]]
    odd = at_first[1:] != at_first[:-1]
    if odd.any():
        return _split_without(data, offsets, odd)
    outside = ~inside | quote  # not in a string (quotes are not)
    control = c == _CONTROL
    if control.any():
        # Strings hold no raw control characters; between tokens only tabs and line breaks.
        at = np.flatnonzero(control)
        byte = data[tok[at]]
        bad = ~outside[at] | ((byte != ord("\t")) & (byte != ord("\n")) & (byte != ord("\r")))
        slow[_row_of(offsets, tok[at[bad]])] = True
        outside &= ~control
    folded = c | 0x20  # "[" and "]" fold onto "{" and "}"
    opening = (folded == _OPEN) & outside
    closing = (folded == _CLOSE) & outside
    step = opening.view(np.int8) - closing.view(np.int8)
    depth_after = np.cumsum(step, dtype=np.int32)
    net = np.diff(np.r_[0, depth_after[first[1:] - 1], depth_after[-1]])
    if (net != 0).any():
        return _split_without(data, offsets, net != 0)
    depth = depth_after - step
    nested_close = closing & (depth == 2)
    c[opening & (depth == 1)] = _NESTED_OPEN
    c[nested_close] = _NESTED_CLOSE
    top = np.flatnonzero(outside & ((depth <= 1) | nested_close))
    tok, sym = tok[top], c[top]
    # Each text's top-level tokens, checked against the shape of an object.
    sym_offsets = np.searchsorted(tok, offsets)
    shapes = pa.LargeStringArray.from_buffers(m, pa.py_buffer(sym_offsets), pa.py_buffer(sym))
    slow |= ~pc.match_substring_regex(shapes, _OBJECT_SHAPE).to_numpy(zero_copy_only=False)
    counts = np.diff(sym_offsets)
    if slow.any():
        good = np.repeat(~slow, counts)
        tok, sym = tok[good], sym[good]
        counts[slow] = 0
        if not len(tok):
            return _no_pairs(slow)
    # From here on every text's tokens have the object's shape: "{", then per pair the key's
    # quotes, the colon, the value's first and last tokens unless a scalar, "," or "}".
    before = sym[:-1]
    key_at = np.flatnonzero((before == _OPEN) | (before == _COM)) + 1
    key_at = key_at[sym[key_at] == _Q]  # not the "}" of "{}"
    key_tok = tok[key_at]
    colon = tok[key_at + 2]
    is_scalar = (sym[key_at + 3] == _COM) | (sym[key_at + 3] == _CLOSE)
    # A key or value with the blanks around it, from the token before to the token after:
    # trimmed, only the key's string or the value may be left (a scalar's text is all of it).
    keys, key, stray = _keys(spans(data, tok[key_at - 1] + 1, colon), tok[key_at + 1] + 1 - key_tok)
    values = pc.ascii_trim(spans(data, colon + 1, tok[key_at + np.where(is_scalar, 3, 5)]),
                           _BLANKS)
    text = np.flatnonzero(~is_scalar)
    stray[text] |= _lengths(values)[text] != tok[key_at[text] + 4] + 1 - tok[key_at[text] + 3]
    pair_row = np.repeat(np.arange(m), np.diff(np.searchsorted(key_at, np.r_[0, np.cumsum(
        counts)])))
    slow[pair_row[stray]] = True
    bare = np.flatnonzero(counts == 2)  # "{ }": only blanks may stand between the braces
    if len(bare):
        opened = tok[np.cumsum(counts)[bare] - 2]
        inner = _lengths(pc.ascii_trim(spans(data, opened + 1, opened + (
            offsets[bare + 1] - offsets[bare]) - 1), _BLANKS))
        slow[bare[inner > 0]] = True
    slow[_repeated_keys(pair_row, key, len(keys))] = True
    keep_pairs = ~slow[pair_row]
    if not keep_pairs.all():
        pair_row, key = pair_row[keep_pairs], key[keep_pairs]
        values = values.filter(pa.array(keep_pairs))
    return Pairs(pair_row, key, keys, values, slow)


def _keys(spelled: pa.LargeStringArray, length: np.ndarray,
          ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The keys' names (in the order they first come), each pair's key, and whether its
    text holds more than blanks and the key's quoted name (of byte ``length``).

    ``spelled``: each key's text with the blanks around it, as the object spells it: a
    chunk's keys are spelled a few ways at most, each trimmed once (in Python). Trimmed,
    a text stands for its key when it starts and ends with a quote (nothing else around
    the name can be one). Many spellings are trimmed by Arrow instead, pair by pair."""
    encoded = spelled.dictionary_encode()
    if len(encoded.dictionary) > _SPELLINGS:
        key_text = pc.ascii_trim(spelled, _BLANKS)
        encoded = key_text.dictionary_encode()
        keys = [k[1:-1] for k in encoded.dictionary.to_pylist()]
        return (keys, encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64),
                _lengths(key_text) != length)
    code_of: dict[str, int] = {}
    code = np.empty(len(encoded.dictionary), dtype=np.int64)
    stray = np.zeros(len(encoded.dictionary), dtype=bool)
    for j, text in enumerate(encoded.dictionary.to_pylist()):
        name = text.strip(_BLANKS)
        code[j] = code_of.setdefault(name, len(code_of))
        stray[j] = name[:1] != '"' or name[-1:] != '"' or len(name) < 2
    at = encoded.indices.to_numpy(zero_copy_only=False)
    return [k[1:-1] for k in code_of], code[at], stray[at]


def _rows(offsets: np.ndarray, positions: np.ndarray, m: int) -> np.ndarray:
    """A mask of the texts that hold these byte positions."""
    out = np.zeros(m, dtype=bool)
    out[_row_of(offsets, positions)] = True
    return out


def _lengths(texts: pa.Array) -> np.ndarray:
    """Byte length of each string."""
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int64)[
        texts.offset:texts.offset + len(texts) + 1]
    return np.diff(offsets)


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


def value_kinds(values: pa.LargeStringArray, first: np.ndarray | None = None) -> Values:
    """Classify and parse JSON value texts (no blanks around them) column-wise; ``first``:
    their first bytes (0 for empty ones), if known."""
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64)[
        values.offset:values.offset + n + 1]
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8) if values.buffers()[2] \
        else np.zeros(0, dtype=np.uint8)
    size = np.diff(offsets)
    filled = size > 0
    if first is None:
        first = np.zeros(n, dtype=np.uint8)
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
    np.cumsum(np.frombuffer(data.tobytes().translate(_DIGITS), dtype=np.uint8), dtype=np.int32,
              out=digits_sum[1:])
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
