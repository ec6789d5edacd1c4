"""The one rule by which writers keep typed columns their output format has no field for.

Every typed column of the event model reaches every writer. A writer maps a column to a field
of its format where one exists (a Chrome JSON ``dur``, a Perfetto track); otherwise the value
goes into the event's ``args`` (Perfetto: a debug annotation) under a key named exactly as the
column (``grid_x``, ``registers``, ``copy_kind``, ``bytes``, ``correlation`` ...); where even
that is impossible (a Chrome counter's args are its series) the writer counts the value in
``WriteResult.skipped`` under :func:`field_skip`. An args key the event already has is never
overwritten: if its value differs from the column's, that is counted as a collision.

Readers of tracekit's own outputs restore the columns from those keys (:func:`restore` for
JSON args). Everything here works on whole columns: values are turned into JSON text once per
distinct value or with one Arrow cast, and only rows that have both args and something to add
are looked at one by one (to splice the text and check for a key already there).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.model import EVENTS_SCHEMA

_BREAKS = re.compile(r"\r?\n[ \t\r\n]*")

#: Every column of the events table except ``args``, in schema order.
TYPED_COLUMNS: tuple[str, ...] = tuple(n for n in EVENTS_SCHEMA.names if n != "args")

#: The columns :func:`restore` fills from args keys: all but the event's own identity (kind,
#: category, name, start, input) and ``stack_id``, an id into a table args cannot carry.
RESTORED_COLUMNS: tuple[str, ...] = tuple(
    c for c in TYPED_COLUMNS if c not in ("kind", "category", "name", "ts_ns", "source",
                                          "stack_id"))

#: Prefix of ``WriteResult.skipped`` keys that count values of one column rather than rows.
FIELD_PREFIX = "field "

#: A per-row mask (True where a writer holds the column in a field of its own) or one bool.
Mask = np.ndarray | bool

# Most runs of kept rows :func:`keep_writable` returns as slices rather than filtering.
_MAX_RUNS = 64


def keep_writable(events: pa.Table, checks: Iterable[tuple[Any, str]],
                  skipped: Counter[str]) -> pa.Table:
    """The rows of ``events`` no check rejects; each ``(mask, reason)`` check counts the rows
    it is the first to reject in ``skipped[reason]`` (a null mask value rejects nothing)."""
    keep = pa.array(np.ones(events.num_rows, dtype=bool))
    for mask, reason in checks:
        mask = pc.and_(pc.fill_null(mask, False), keep)
        count = pc.sum(mask).as_py() or 0
        if count:
            skipped[reason] += count
        keep = pc.and_(keep, pc.invert(mask))
    if pc.all(keep).as_py():
        return events
    # Filtering copies every column (0.3 s for 1M nsys rows to drop 4): where the kept rows
    # form a few runs, slices of them share the buffers instead.
    edges = np.flatnonzero(np.diff(np.concatenate(
        ([False], keep.to_numpy(zero_copy_only=False), [False])).view(np.int8)))
    starts, stops = edges[::2], edges[1::2]
    if len(starts) > _MAX_RUNS:
        return events.filter(keep)
    if not len(starts):
        return events.slice(0, 0)
    return pa.concat_tables([events.slice(a, b - a)
                             for a, b in zip(starts.tolist(), stops.tolist(), strict=True)])


def field_skip(column: str, why: str) -> str:
    """The ``WriteResult.skipped`` key for values of ``column`` that were not written although
    their events were: ``field <column>: <why>``."""
    return f"{FIELD_PREFIX}{column}: {why}"


#: A ``field_skip`` reason that is the output format's nature, not a loss the user could
#: avoid with this format (folded stacks have no time): told as a note, not a warning.
BY_FORMAT = "by the format: "


def is_field_skip(key: str) -> bool:
    """Whether a ``WriteResult.skipped`` key counts column values, not event rows."""
    return key.startswith(FIELD_PREFIX)


def json_values(column: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """The JSON text of each value of ``column`` and a mask of the rows that have one.

    Integers and finite floats are written as Arrow prints them (shortest round-trip form),
    strings and dictionary entries quoted by orjson once per distinct value. NaN and infinite
    floats have no JSON form: they are null in the text and False in the mask.
    """
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(col.type) or pa.types.is_string(col.type) \
            or pa.types.is_large_string(col.type):
        if not pa.types.is_dictionary(col.type):
            col = col.dictionary_encode()
        quoted = pa.array([orjson.dumps(v).decode() if v is not None else None
                           for v in col.dictionary.to_pylist()], pa.string())
        text = quoted.take(col.indices)
    elif pa.types.is_floating(col.type):
        finite = pc.fill_null(pc.is_finite(col), False)
        text = pc.if_else(finite, pc.cast(col, pa.string()), pa.scalar(None, pa.string()))
    else:
        text = pc.cast(col, pa.string())
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    return text, text.is_valid().to_numpy(zero_copy_only=False)


@dataclass
class Carried:
    """What :func:`carry` found: per args key the JSON value of each row (null where there is
    nothing to add), and the values a writer could not place anywhere."""

    keys: dict[str, pa.Array] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)

    def add(self, key: str, values: pa.Array) -> None:
        """Add the JSON ``values`` of another key (a format's own name for a column); where
        the key already has a value, that one stays."""
        self.keys[key] = pc.coalesce(self.keys[key], values) if key in self.keys else values


def carry(events: pa.Table, native: Mapping[str, Mask], *, allowed: Mask = True,
          why_not: str = "no field for it on these events", typed: bool = False) -> Carried:
    """Apply the rule to ``events`` (the rows a writer writes).

    ``native`` says, per typed column, where the writer has a field of its own for it (a
    column not listed has none). Every other non-null value becomes an args key named as the
    column on the rows where ``allowed`` (rows whose args the format can extend); elsewhere
    it is counted as ``field_skip(column, why_not)``. The keys hold JSON text
    (:func:`json_values`), or with ``typed`` the column's own values (for a writer that
    encodes them itself; :func:`json_values` gives their text).
    """
    n = events.num_rows
    allowed_rows = _mask(allowed, n)
    barred = ~allowed_rows
    out = Carried()
    for name in TYPED_COLUMNS:
        column = events[name]
        if column.null_count == n:
            continue
        where = ~_mask(native.get(name, False), n)
        if not where.any():
            continue
        valid = column.is_valid().to_numpy(zero_copy_only=False) if column.null_count \
            else np.ones(n, dtype=bool)
        if typed:
            text = column.combine_chunks()
            present = valid
            if pa.types.is_floating(text.type):
                present = valid & pc.fill_null(pc.is_finite(text), False).to_numpy(
                    zero_copy_only=False)
        else:
            text, present = json_values(column)
        want = present & where
        odd = where & valid & ~present
        if odd.any():
            out.skipped[field_skip(name, "NaN or infinite (JSON has no such number)")] += \
                int(odd.sum())
        lost = want & barred
        if lost.any():
            out.skipped[field_skip(name, why_not)] += int(lost.sum())
        keep = want & allowed_rows
        kept = int(np.count_nonzero(keep))
        if kept and kept == n - text.null_count:
            out.keys[name] = text  # already null on every other row
        elif kept:
            out.keys[name] = pc.if_else(pa.array(keep), text, pa.scalar(None, text.type))
    return out


@dataclass
class Merged:
    """``args`` with the carried keys added, and the keys left out because the args already
    had them with another value (``collisions[key]``)."""

    args: pa.Array
    collisions: Counter[str] = field(default_factory=Counter)
    wrapped: int = 0  # args that were not a JSON object, now kept as {"args": text}


def merge(args: pa.Array | pa.ChunkedArray, keys: Mapping[str, pa.Array], *,
          validate: bool = False, compact: bool = False) -> Merged:
    """Add ``keys`` (per key the JSON value text of each row, null for none) to ``args``.

    Rows without args get an object of their keys; rows with args get the keys spliced into
    the object's text, except keys it already has (a differing value counts as a collision).
    Args text that is not a JSON object is kept as a string under ``"args"``. With
    ``validate``, every args text is checked, also on rows with nothing to add, so that the
    result holds JSON objects only; with ``compact`` as well, the line breaks and indentation
    of pretty-printed objects are dropped.
    """
    col = args.combine_chunks() if isinstance(args, pa.ChunkedArray) else args
    n = len(col)
    has_args = pc.fill_null(pc.greater(pc.utf8_length(col), 0), False) \
        .to_numpy(zero_copy_only=False) if n else np.zeros(0, dtype=bool)
    pieces: list[tuple[str, pa.Array, np.ndarray]] = []
    for key, values in keys.items():
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        if valid.any():
            prefix = orjson.dumps(key).decode() + ":"
            pieces.append((key, pc.binary_join_element_wise(prefix, values, ""), valid))
    extra = np.zeros(n, dtype=bool)
    for _, _, valid in pieces:
        extra |= valid
    out = Merged(args=col)
    if not extra.any() and not validate:
        return out
    fragment = _join_fragments(pieces, n)
    # Rows without args: the object is just the fragment.
    text = pc.if_else(pa.array(extra & ~has_args),
                      pc.binary_join_element_wise("{", fragment, "}", ""), col)
    slow = np.flatnonzero(has_args & (extra | validate))
    if not len(slow):
        out.args = text
        return out
    texts = col.take(pa.array(slow)).to_pylist()
    frags = fragment.take(pa.array(slow)).to_pylist()
    # Only rows whose text names one of their keys can have it already: those get the list
    # of their pieces, to check one by one.
    sub_args = col.take(pa.array(slow))
    named = np.zeros(len(slow), dtype=bool)
    for key, _, valid in pieces:
        quoted = orjson.dumps(key).decode()
        named |= valid[slow] & pc.fill_null(pc.match_substring(sub_args, quoted), False) \
            .to_numpy(zero_copy_only=False)
    row_keys: list[list[tuple[str, str]]] = [[] for _ in range(len(slow))]
    for key, piece, valid in pieces:
        sub = np.flatnonzero(valid[slow] & named)
        values = piece.take(pa.array(slow[sub])).to_pylist()
        for i, v in zip(sub.tolist(), values, strict=True):
            row_keys[i].append((key, v))
    result = [_splice(t, f, ks, out, compact)
              for t, f, ks in zip(texts, frags, row_keys, strict=True)]
    # Scatter the per-row results back: take from [text, result] by position.
    index = np.arange(n)
    index[slow] = n + np.arange(len(slow))
    combined = pa.concat_arrays([text.cast(pa.string()), pa.array(result, pa.string())])
    out.args = combined.take(pa.array(index))
    return out


def _join_fragments(pieces: list[tuple[str, pa.Array, np.ndarray]], n: int) -> pa.Array:
    """Per row the ``"key":value`` pieces joined by commas (null where there are none)."""
    # Not null_handling="skip": pyarrow 26 drops trailing all-null rows with it.
    fragment: pa.Array = pa.nulls(n, pa.string())
    have = np.zeros(n, dtype=bool)
    for _, piece, valid in pieces:
        joined = pc.binary_join_element_wise(fragment, piece, ",")
        fragment = pc.if_else(pa.array(have & valid), joined,
                              pc.if_else(pa.array(valid), piece, fragment))
        have |= valid
    return fragment


def _splice(text: str, fragment: str | None, keys: list[tuple[str, str]], out: Merged,
            compact: bool) -> str:
    """One row's args with its pieces added (see :func:`merge`)."""
    stripped = text.strip()
    try:
        obj: Any = orjson.loads(text)
    except orjson.JSONDecodeError:
        obj = None
    if type(obj) is not dict:
        out.wrapped += 1
        obj = {"args": text}
        text = stripped = orjson.dumps(obj).decode()
    if compact and "\n" in text:
        # A raw line break is never inside a JSON string, nor the blanks after it.
        text = stripped = _BREAKS.sub("", text).strip()
    if not fragment:
        return text
    if keys:
        kept = []
        for key, piece in keys:
            name = piece[:len(orjson.dumps(key).decode())]
            if name not in text:
                kept.append(piece)
                continue
            if _holds(text, piece):  # the same key with the same value
                continue
            if key in obj:
                if orjson.loads(piece[len(orjson.dumps(key).decode()) + 1:]) != obj[key]:
                    out.collisions[key] += 1
            else:
                kept.append(piece)
        if not kept:
            return text
        fragment = ",".join(kept)
    return stripped[:-1].rstrip() + ("," if obj else "") + fragment + "}"


def _holds(text: str, piece: str) -> bool:
    """Whether ``text`` holds ``piece`` (``"key":value``) whole, also as ``"key": value``."""
    for p in (piece, piece.replace(":", ": ", 1)):
        at = text.find(p)
        while at >= 0:
            if text[at + len(p):at + len(p) + 1] in (",", "}", " ", "\n", "\r", "\t"):
                return True
            at = text.find(p, at + 1)
    return False


def _mask(value: Mask, n: int) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value.astype(bool, copy=False)
    return np.full(n, bool(value))


def restore(events: pa.Table, columns: Iterable[str] = RESTORED_COLUMNS,
            ) -> tuple[pa.Table, Counter[str]]:
    """Fill ``columns`` of ``events`` from the args keys named as them (the inverse of
    :func:`carry`, for inputs a tracekit writer wrote; pass the columns it says it carried).
    A key's value replaces the column's, a JSON null makes it null (a column ``events``
    lacks is added); values that do not fit the column's type are left out and counted per
    column. The keys stay in args."""
    columns = list(columns)
    bad: Counter[str] = Counter()
    args = events["args"].combine_chunks()
    if not columns or not len(args):
        return events, bad
    hit = np.zeros(len(args), dtype=bool)
    for name in columns:
        found = pc.fill_null(pc.match_substring(args, f'"{name}"'), False)
        hit |= found.to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(hit)
    if not len(rows):
        return events, bad
    values: dict[str, list[Any]] = {c: [None] * len(rows) for c in columns}
    present = {c: np.zeros(len(rows), dtype=bool) for c in columns}
    for i, text in enumerate(args.take(pa.array(rows)).to_pylist()):
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        if type(obj) is not dict:
            continue
        for name in columns:
            if name in obj:
                values[name][i] = obj[name]
                present[name][i] = True
    for name in columns:
        if not present[name].any():
            continue
        if name not in events.column_names:
            events = events.append_column(EVENTS_SCHEMA.field(name),
                                          pa.nulls(len(args), EVENTS_SCHEMA.field(name).type))
        type_ = events.schema.field(name).type
        fitted, fits = _fit(values[name], type_)
        odd = present[name] & ~fits
        if odd.any():
            bad[name] += int(odd.sum())
        got = np.zeros(len(args), dtype=bool)
        got[rows] = present[name] & fits
        position = np.zeros(len(args), dtype=np.int64)
        position[rows] = np.arange(len(rows))
        taken = fitted.take(pa.array(position))
        current = events[name].combine_chunks()
        if pa.types.is_dictionary(type_):
            merged = pc.if_else(pa.array(got), taken.cast(pa.string()),
                                current.cast(pa.string())).dictionary_encode()
            merged = merged.cast(type_)
        else:
            merged = pc.if_else(pa.array(got), taken, current)
        idx = events.schema.get_field_index(name)
        events = events.set_column(idx, events.schema.field(idx), merged)
    return events, bad


def _fit(values: list[Any], type_: pa.DataType) -> tuple[pa.Array, np.ndarray]:
    """``values`` as an array of ``type_`` (dictionary columns as plain strings), and which
    fit it: None (JSON null) does, values of another JSON type or out of range do not."""
    if pa.types.is_dictionary(type_):
        ok = [v if type(v) is str else None for v in values]
        target: pa.DataType = pa.string()
    elif pa.types.is_floating(type_):
        ok = [float(v) if type(v) in (int, float) else None for v in values]
        target = type_
    else:
        lo, hi = (-(2**31), 2**31 - 1) if type_ == pa.int32() else (-(2**63), 2**63 - 1)
        ok = [v if type(v) is int and lo <= v <= hi else None for v in values]
        target = type_
    fits = np.array([v is None or k is not None for v, k in zip(values, ok, strict=True)],
                    dtype=bool)
    return pa.array(ok, target), fits


__all__ = ["FIELD_PREFIX", "RESTORED_COLUMNS", "TYPED_COLUMNS", "Carried", "Mask", "Merged",
           "carry", "field_skip", "is_field_skip", "json_values", "keep_writable", "merge",
           "restore"]
