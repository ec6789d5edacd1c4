"""Two views of a document's events that the conversion reads alike.

``DictEvents`` wraps the parsed JSON objects (the forgiving path, for documents with values of
unexpected types); ``ColumnEvents`` holds columns made by the typed decoder (``decode``), with
each event's args as its raw JSON text and the keys the model needs already extracted. Both
answer ``field``, ``times``, ``take`` and ``args``; the value helpers in ``fields`` and
``timestamps`` take a list or an Arrow array.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.kineto.fields import dumps_all
from tracekit.plugins.kineto.timestamps import Micros

TIMED = ("ts", "dur")


@dataclass(frozen=True)
class Sparse:
    """One extracted args key: its values at the rows that have it (ascending rows)."""

    rows: np.ndarray
    values: pa.Array

    def take(self, idx: np.ndarray) -> Sparse:
        """The values at the rows ``idx``, renumbered to their positions in ``idx``."""
        if not len(self.rows) or not len(idx):
            return Sparse(np.zeros(0, dtype=np.int64), self.values.slice(0, 0))
        ascending = len(idx) < 2 or bool((idx[1:] > idx[:-1]).all())
        order = np.arange(len(idx)) if ascending else np.argsort(idx, kind="stable")
        sorted_idx = idx if ascending else idx[order]
        pos = np.minimum(np.searchsorted(sorted_idx, self.rows), len(idx) - 1)
        hit = sorted_idx[pos] == self.rows
        rows = order[pos[hit]]
        values = self.values.filter(pa.array(hit))
        if len(rows) > 1 and (np.diff(rows) < 0).any():
            sort = np.argsort(rows, kind="stable")
            rows, values = rows[sort], values.take(pa.array(sort))
        return Sparse(rows, values)

    def dense(self, n: int) -> pa.Array:
        """The values as a column of ``n`` rows, null where absent."""
        if not len(self.rows):
            return pa.nulls(n, self.values.type)
        where = np.full(n, -1, dtype=np.int64)
        where[self.rows] = np.arange(len(self.rows))
        return self.values.take(pa.array(where, mask=where < 0))


def take(values: list[Any] | pa.Array, idx: np.ndarray) -> list[Any] | pa.Array:
    """The values at the positions ``idx``, from a list or an Arrow array."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.take(pa.array(idx, type=pa.int64()))
    return [values[i] for i in idx]


def where(values: list[Any] | pa.Array, mask: np.ndarray) -> list[Any] | pa.Array:
    """The values where ``mask`` is true, from a list or an Arrow array."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.filter(pa.array(mask, type=pa.bool_()))
    return [v for v, keep in zip(values, mask, strict=True) if keep]


class DictEvents:
    """Events as parsed JSON objects."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    def __len__(self) -> int:
        return len(self.events)

    def field(self, key: str) -> list[Any]:
        return [e.get(key) for e in self.events]

    def times(self, key: str) -> list[Any]:
        return self.field(key)

    def take(self, idx: np.ndarray, args: bool = True) -> DictEvents:
        return DictEvents([self.events[i] for i in idx])

    def where(self, mask: np.ndarray) -> DictEvents:
        return DictEvents(where(self.events, mask))  # type: ignore[arg-type]

    def release(self) -> None:
        """Nothing to free: the parsed document holds the events."""

    def args(self) -> DictArgs:
        return DictArgs(self.field("args"))


class DictArgs:
    """The args of events as parsed JSON (None where absent or not an object)."""

    def __init__(self, args: list[Any]) -> None:
        self.values = args

    def __len__(self) -> int:
        return len(self.values)

    def not_objects(self) -> int:
        """How many args are present but not objects; they are dropped (set to None)."""
        args = self.values
        if set(map(type, args)) <= {dict, type(None)}:
            return 0
        odd = sum(1 for a in args if a is not None and type(a) is not dict)
        self.values = [a if type(a) is dict else None for a in args]
        return odd

    def take(self, idx: np.ndarray) -> DictArgs:
        return DictArgs([self.values[i] for i in idx])

    def get(self, key: str) -> list[Any]:
        return [a.get(key) if type(a) is dict else None for a in self.values]

    def dims(self, key: str) -> tuple[list[list[Any]], int]:
        """The x, y, z values of a ``[x, y, z]`` key and how many values were not lists."""
        dims = self.get(key)
        odd = sum(1 for v in dims if v is not None and type(v) is not list)
        axes = [[v[pos] if type(v) is list and len(v) > pos else None for v in dims]
                for pos in range(3)]
        return axes, odd

    def dicts(self) -> list[dict[str, Any] | None]:
        return self.values

    def texts(self) -> tuple[pa.Array, int]:
        """The args column, and how many args could not be written as JSON."""
        texts_, lost = dumps_all(self.values)
        return pa.array(texts_, type=pa.string()), lost


@dataclass
class ColumnEvents:
    """Events as columns (see ``decode``), grouped by phase (each phase's events in their
    order in the document); ``keys`` are the extracted args keys."""

    n: int
    columns: dict[str, pa.Array]
    micros: dict[str, Micros]
    text: pa.Array
    keys: dict[str, Sparse]
    #: Whether the times were read from their decimal text (a float could not hold them).
    exact_times: bool = False

    def __len__(self) -> int:
        return self.n

    def field(self, key: str) -> pa.Array:
        return self.columns[key]

    def times(self, key: str) -> Micros:
        return self.micros[key]

    def take(self, idx: np.ndarray, args: bool = True) -> ColumnEvents:
        """The events at ``idx``; without their args when ``args`` is false. Consecutive
        rows (a phase, as the typed decode groups them) are a slice, not a copy."""
        if len(idx) and idx[-1] - idx[0] + 1 == len(idx) and \
                bool((idx[1:] > idx[:-1]).all()):
            return self._slice(int(idx[0]), len(idx), args)
        arrow_idx = pa.array(idx, type=pa.int64())
        return ColumnEvents(
            len(idx), {k: v.take(arrow_idx) for k, v in self.columns.items()},
            {k: v.take(idx) for k, v in self.micros.items()},
            self.text.take(arrow_idx) if args else pa.nulls(len(idx), pa.string()),
            {k: v.take(idx) for k, v in self.keys.items()} if args else {})

    def _slice(self, start: int, n: int, args: bool) -> ColumnEvents:
        keys = {}
        for k, s in self.keys.items() if args else ():
            lo, hi = np.searchsorted(s.rows, [start, start + n])
            keys[k] = Sparse(s.rows[lo:hi] - start, s.values.slice(lo, hi - lo))
        return ColumnEvents(
            n, {k: v.slice(start, n) for k, v in self.columns.items()},
            {k: Micros(v.ns[start:start + n], v.valid[start:start + n])
             for k, v in self.micros.items()},
            self.text.slice(start, n) if args else pa.nulls(n, pa.string()), keys)

    def where(self, mask: np.ndarray) -> ColumnEvents:
        return self.take(np.flatnonzero(mask))

    def release(self) -> None:
        """Free the columns (the events were taken apart); the object is empty after."""
        self.n, self.columns, self.micros, self.keys = 0, {}, {}, {}
        self.text = self.text.slice(0, 0)

    def args(self) -> ColumnArgs:
        return ColumnArgs(self.n, self.text, self.keys)


class ColumnArgs:
    """Args as raw JSON text with the model's keys extracted."""

    def __init__(self, n: int, text: pa.Array, keys: dict[str, Sparse]) -> None:
        self.n, self.text, self.keys = n, text, keys

    def __len__(self) -> int:
        return self.n

    def not_objects(self) -> int:
        return 0  # the decoder sends documents with such args to the forgiving path

    def take(self, idx: np.ndarray) -> ColumnArgs:
        return ColumnArgs(len(idx), self.text.take(pa.array(idx, type=pa.int64())),
                          {k: v.take(idx) for k, v in self.keys.items()})

    def get(self, key: str) -> pa.Array:
        sparse = self.keys.get(key)
        return pa.nulls(self.n, pa.int64()) if sparse is None else sparse.dense(self.n)

    def dims(self, key: str) -> tuple[list[pa.Array], int]:
        return [self.get(f"{key}[{pos}]") for pos in range(3)], 0

    def dicts(self) -> list[dict[str, Any] | None]:
        return [orjson.loads(t) if t is not None else None for t in self.text.to_pylist()]

    def texts(self) -> tuple[pa.Array, int]:
        return self.text, 0


def dictionary(values: list[Any] | pa.Array) -> pa.DictionaryArray:
    """Text values (a list of str/None or an Arrow string or dictionary array) as a
    dictionary array with int32 indices."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array) and pa.types.is_dictionary(values.type):
        if values.type.index_type != pa.int32():
            values = pa.DictionaryArray.from_arrays(values.indices.cast(pa.int32()),
                                                   values.dictionary)
        return values
    return pa.array(values, type=pa.string()).dictionary_encode()


def is_in(values: pa.Array, choices: list[str]) -> np.ndarray:
    """A numpy mask of the rows whose text is one of ``choices`` (null rows are not)."""
    return pc.is_in(values, pa.array(choices, type=pa.string())).to_numpy(
        zero_copy_only=False)
