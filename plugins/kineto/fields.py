"""JSON values of one event field to typed columns, for damaged files as well as good ones.

What is unambiguous is coerced (integer text and integral floats to integers, numbers to
text where text belongs); anything else becomes null, and the count of such values comes back
so that the converter can report it. The fast path is one Arrow conversion per column; the
per-value path runs only when a column holds odd values.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
UNNAMED = "<unnamed>"
_INT_TEXT = re.compile(r"\s*-?[0-9]+\s*")
_HEX_TEXT = re.compile(r"\s*0[xX][0-9a-fA-F]+\s*")
_NONE = type(None)


def as_int(value: Any) -> int | None:
    """An integer from an int, an integral float or Decimal, or integer text ("12", "0x1f")."""
    kind = type(value)
    if kind is int:
        return value
    if kind is str:
        if _INT_TEXT.fullmatch(value):
            return int(value)
        return int(value, 16) if _HEX_TEXT.fullmatch(value) else None
    if kind is float:
        return int(value) if value.is_integer() else None  # False for NaN and infinities
    if kind is Decimal:
        return int(value) if value.is_finite() and value == value.to_integral_value() else None
    return None  # bool, list, dict


def ints(values: list[Any] | pa.Array, bounds: tuple[int, int] = INT64) -> tuple[pa.Array, int]:
    """An int64 array of ``values`` and how many present values were not usable integers
    within ``bounds`` (those are null)."""
    lo, hi = bounds
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        arr = values.cast(pa.int64())
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if bounds == INT64 or not len(arr):
            return arr, 0
        inside = pc.and_(pc.greater_equal(arr, lo), pc.less_equal(arr, hi))
        bad = pc.sum(pc.invert(inside)).as_py() or 0
        return (pc.if_else(inside, arr, None) if bad else arr), bad
    if set(map(type, values)) <= {int, _NONE}:
        try:
            arr = pa.array(values, type=pa.int64())
        except OverflowError:
            pass
        else:
            if bounds == INT64 or not len(arr):
                return arr, 0
            inside = pc.and_(pc.greater_equal(arr, lo), pc.less_equal(arr, hi))
            bad = pc.sum(pc.invert(inside)).as_py() or 0
            return (pc.if_else(inside, arr, None) if bad else arr), bad
    out: list[int | None] = []
    bad = 0
    for v in values:
        n = None if v is None else as_int(v)
        if n is not None and not lo <= n <= hi:
            n = None
        if n is None and v is not None:
            bad += 1
        out.append(n)
    return pa.array(out, type=pa.int64()), bad


def texts(values: list[Any]) -> tuple[list[str | None], int]:
    """Text values as they are, numbers as their text; anything else (lists, objects,
    booleans) None. Returns the values and how many present ones were not text."""
    if set(map(type, values)) <= {str, _NONE}:
        return values, 0
    out: list[str | None] = []
    bad = 0
    for v in values:
        if v is None or type(v) is str:
            out.append(v)
            continue
        bad += 1
        out.append(str(v) if type(v) in (int, float, Decimal) else None)
    return out, bad


def names(values: list[Any] | pa.Array) -> tuple[pa.DictionaryArray, int, int]:
    """The name column: text, numbers as their text, and ``<unnamed>`` for anything else
    (missing, null, lists, objects). Returns it, how many got the placeholder and how many
    were numbers."""
    if isinstance(values, pa.Array):  # text already (the typed decode)
        missing = values.null_count
        if missing:
            values = pc.fill_null(values.cast(pa.string()), UNNAMED).dictionary_encode()
        return compact(values), missing, 0
    text, bad = texts(values)
    arr = pa.array(text, type=pa.string())
    missing = arr.null_count
    if missing:
        arr = pc.fill_null(arr, UNNAMED)
    numbers = sum(1 for v in values if type(v) in (int, float, Decimal)) if bad else 0
    return arr.dictionary_encode(), missing, numbers


def compact(values: pa.DictionaryArray) -> pa.DictionaryArray:
    """``values`` with only the dictionary entries it uses, in order of first use (as
    ``dictionary_encode`` of the values would give them); nulls stay null."""
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    codes = values.indices.fill_null(0).to_numpy(zero_copy_only=False)
    size = len(values.dictionary)
    used, _ = first_seen(codes if values.null_count == 0 else
                         np.where(valid, codes, size), size + 1)
    used = used[used < size]
    remap = np.zeros(max(size, 1), dtype=np.int32)  # all null: codes are 0, masked
    remap[used] = np.arange(len(used), dtype=np.int32)
    return pa.DictionaryArray.from_arrays(pa.array(remap[codes], mask=~valid),
                                          values.dictionary.take(pa.array(used)))


def first_seen(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``codes`` (integers in [0, size)) in order of first appearance,
    and how many times each appears. One pass over the codes, not a sort of them."""
    n = len(codes)
    first = np.full(size, n, dtype=np.int64)
    np.minimum.at(first, codes, np.arange(n, dtype=np.int64))
    seen = np.flatnonzero(first < n)
    seen = seen[np.argsort(first[seen], kind="stable")]
    return seen, np.bincount(codes, minlength=size)[seen]


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError


def dumps_all(objs: list[Any]) -> tuple[list[str | None], int]:
    """JSON text of each args object (None when empty), and how many could not be written
    even by the json module (those are None too)."""
    try:
        return [orjson.dumps(o, default=_json_default).decode() if o else None
                for o in objs], 0
    except TypeError:
        out = [dumps(o) for o in objs]
        return out, sum(1 for o, t in zip(objs, out, strict=True) if o and t is None)


def dumps(obj: Any) -> str | None:
    """JSON text of an args object (None when empty). Values orjson refuses (integers beyond
    64 bits, nesting deeper than 254) go through the json module; None if that fails too."""
    if not obj:
        return None
    try:
        return orjson.dumps(obj, default=_json_default).decode()
    except TypeError:
        try:
            return json.dumps(obj, default=_json_default, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            return None
