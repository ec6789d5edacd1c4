"""What every part of the conversion shares: the output, the clock, ids for named pids and
tids, and the accounting of odd values."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from itertools import compress
from typing import Any

import numpy as np
import pyarrow as pa
from tracekit import Source, TraceBuilder
from tracekit.plugins.kineto.events import ColumnArgs, ColumnEvents, DictArgs, DictEvents
from tracekit.plugins.kineto.fields import (
    INT64,
    as_int,
    dumps,
    first_seen,
    ints,
    names,
    texts,
)
from tracekit.plugins.kineto.timestamps import INT64_MAX, us_to_ns
from tracekit.toolkit import SYNTHETIC_ID_MAX

Events = DictEvents | ColumnEvents
Args = DictArgs | ColumnArgs
NO_TS = "skipped: no usable ts (missing, not a number, or out of range)"


class Context:
    """One document's conversion state: the builder it fills and what was learnt on the way.

    The metadata events fill the process and thread names, the device columns the GPUs seen;
    the builders of the event tables read them.
    """

    def __init__(self, top: dict[str, Any], out: TraceBuilder, source: Source,
                 memory_counters: bool) -> None:
        self.top = top
        self.out = out
        self.source = source
        self.memory_counters = memory_counters
        self.base_unusable = False
        self.base_ns = self._base_time(top.get("baseTimeNanoseconds"))
        # Ids for string pids/tids ("Spans", "stream 7"), far below any real OS id.
        self.synthetic: dict[str, int] = {}
        self.labels: dict[int, str] = {}
        self.process_names: dict[int, str] = {}
        self.process_labels: dict[int, str] = {}
        self.thread_names: dict[tuple[int, int], str] = {}
        self.gpu_devices: dict[int, int] = {}  # device id -> the GPU pid naming it
        self.autograd_ops = 0  # host ops with autograd's sequence number
        self.autograd_nodes = 0  # the distinct numbers among them

    def warn(self, kind: str, text: str, count: int = 1) -> None:
        self.out.note(kind, f"warning: {text}", count)

    def _base_time(self, base: Any) -> int:
        """baseTimeNanoseconds as int ns; an unusable one is ignored with a warning."""
        if base is None:
            return 0
        n = as_int(base)
        if n is None and type(base) is float and abs(base) < 2**63:
            n = int(base)  # a float written by some tool: as exact as it is
        if n is None or not 0 <= n <= INT64_MAX:
            self.warn("baseTimeNanoseconds", "not a non-negative integer ns count: ignored, "
                      "times stay relative to an unknown start")
            self.base_unusable = True
            return 0
        return n

    # -- identities ------------------------------------------------------------------------
    def ids(self, values: list[Any] | pa.Array, what: str = "pid", kind: str = ""
            ) -> np.ndarray:
        """pid/tid values to int64; names get stable negative ids (named in ``labels``).

        Integer text is an id; other text ("Spans", "stream 7") a name; a missing id is the
        name "" (shown as "(no pid)"). Other values (lists, objects, fractions, integers
        beyond int64) are named by their JSON text and counted under ``kind``.
        """
        if isinstance(values, pa.Array):
            return self._column_ids(values)
        if set(map(type, values)) <= {int}:
            try:
                return np.array(values, dtype=np.int64)
            except OverflowError:
                pass
        out = np.empty(len(values), dtype=np.int64)
        bad = 0
        for i, v in enumerate(values):
            n = v if type(v) is int else as_int(v) if type(v) is str else None
            if n is not None and INT64[0] <= n <= INT64[1]:
                out[i] = n
                continue
            if v is None or type(v) is str:
                key = v or ""
            else:
                bad += 1
                key = (dumps([v]) or "[?]")[1:-1][:40]
            out[i] = self._synthetic(key)
        if bad and kind:
            self.warn(kind, f"{what} is neither an integer nor a name (named by its JSON "
                      "text)", bad)
        return out

    def _synthetic(self, key: str) -> int:
        if key not in self.synthetic:
            self.synthetic[key] = SYNTHETIC_ID_MAX - len(self.synthetic)
            self.labels[self.synthetic[key]] = key or "(no pid)"
        return self.synthetic[key]

    def _column_ids(self, values: pa.Array) -> np.ndarray:
        """``ids`` of a typed column: int64 (null where missing) or text."""
        if pa.types.is_integer(values.type) and not values.null_count:
            return values.to_numpy()
        codes = values.cast(pa.string()).dictionary_encode()
        index = codes.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        distinct = codes.dictionary.to_pylist()
        # Names get their ids in order of first appearance, as the per-value loop gives them.
        seen, _ = first_seen(index + 1, len(distinct) + 1)  # + 1: null is 0
        ids = np.empty(len(distinct) + 1, dtype=np.int64)  # the last entry: no pid (null)
        for code in (seen - 1).tolist():
            text = "" if code < 0 else distinct[code]
            n = as_int(text)
            ids[code] = n if n is not None and INT64[0] <= n <= INT64[1] \
                else self._synthetic(text)
        return ids[index]

    def times(self, values: list[Any], base: int) -> tuple[np.ndarray, np.ndarray]:
        """µs values to ns on the trace clock and whether each is usable (in int64 range)."""
        ns, valid = us_to_ns(values)
        if base:
            valid &= ns <= INT64_MAX - base
            ns = np.where(valid, ns + base, 0)
        return ns, valid

    # -- fields ----------------------------------------------------------------------------
    def cats(self, evs: Events, ph: str) -> list[str | None] | pa.DictionaryArray:
        """The cat of each event of phase ``ph`` as text (or None), what was odd counted: a
        list, or a dictionary array from the typed decode."""
        values = evs.field("cat")
        if isinstance(values, pa.Array):
            return values
        cats, bad = texts(values)
        if bad:
            self.warn(ph, "cat is not text (numbers kept as text, others taken as no cat)",
                      bad)
        return cats

    def fields(self, evs: Events, ph: str) -> tuple[pa.DictionaryArray, Args]:
        """The name and args of events of phase ``ph``, with what was odd counted."""
        name_col, unnamed, numbers_ = names(evs.field("name"))
        if unnamed:
            self.warn(ph, "name missing or not text (named '<unnamed>')", unnamed)
        if numbers_:
            self.warn(ph, "name is a number (kept as text)", numbers_)
        args = evs.args()
        odd = args.not_objects()
        if odd:
            self.warn(ph, "args is not a JSON object (dropped)", odd)
        return name_col, args

    def args_column(self, args: Args, ph: str) -> pa.Array:
        texts_, lost = args.texts()
        if lost:
            self.warn(ph, "args not representable as JSON (dropped)", lost)
        return texts_

    def arg_ints(self, args: Args, key: str, kind: str,
                 bounds: tuple[int, int] = INT64) -> pa.Array:
        """args[key] as integers; values that are none are counted under ``kind``."""
        arr, bad = ints(args.get(key), bounds)
        if bad:
            self.warn(kind, f"args.{key} is not an integer in range (null)", bad)
        return arr

    def count(self, ph: str | None, keys: list[Any] | pa.Array, mask: np.ndarray | None,
              outcome: str) -> None:
        """Note ``outcome`` for the events where ``mask`` is true, by ``ph:cat`` (``keys`` are
        the cats, or the whole keys when ``ph`` is None), in order of first appearance."""
        if isinstance(keys, pa.Array):
            counts = tally(keys, mask)
        else:
            counts = Counter(keys if mask is None else compress(keys, mask))
        for key, n in counts.items():
            self.out.note(key if ph is None else f"{ph}:{key}", outcome, n)


def tally(keys: pa.Array, mask: np.ndarray | None = None) -> dict[str | None, int]:
    """How many rows (where ``mask`` is true) hold each text value, in order of first
    appearance; counted on the dictionary codes, not on a string per row."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    codes = keys if pa.types.is_dictionary(keys.type) else \
        keys.cast(pa.string()).dictionary_encode()
    index = codes.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    if mask is not None:
        index = index[mask]
    seen, counts = first_seen(index + 1, len(codes.dictionary) + 1)  # + 1: null is 0
    values = [None, *codes.dictionary.cast(pa.string()).to_pylist()]
    out: dict[str | None, int] = {}
    for code, n in zip(seen.tolist(), counts.tolist(), strict=True):
        key = values[code]
        out[key] = out.get(key, 0) + n
    return out


def numbers(values: list[Any] | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """float64 values and a mask of which are finite numbers (bools and text are not)."""
    if isinstance(values, pa.Array):
        f = values.cast(pa.float64()).fill_null(0.0).to_numpy()
        finite = np.isfinite(f)
        return np.where(finite, f, 0.0), values.is_valid().to_numpy(zero_copy_only=False) \
            & finite
    ok = np.array([type(v) in (int, float, Decimal) for v in values], dtype=bool)
    f = np.array([float(v) if k else 0.0 for v, k in zip(values, ok, strict=True)])
    finite = np.isfinite(f)
    return np.where(finite, f, 0.0), ok & finite


def constant(n: int, value: str) -> pa.DictionaryArray:
    """``n`` rows of one dictionary-encoded text value."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), [value])


def scatter(n: int, idx: np.ndarray, values: pa.Array, type_: pa.DataType) -> pa.Array:
    """A column of ``n`` rows holding ``values`` at the rows ``idx``, null elsewhere.

    The values must fit ``type_`` (the callers bound them); it is built in that type, without
    a cast.
    """
    if len(idx) == 0:
        return pa.nulls(n, type_)
    full = np.zeros(n, dtype=type_.to_pandas_dtype())
    full[idx] = values.fill_null(0).to_numpy(zero_copy_only=False)
    mask = np.ones(n, dtype=bool)
    mask[idx] = ~values.is_valid().to_numpy(zero_copy_only=False)
    return pa.array(full, mask=mask, type=type_)


def rows_of(args: Args, mask: np.ndarray) -> Args:
    """The args of the rows where ``mask`` is true, for reading their keys (``get`` and
    ``dims``). The typed decode's args are filtered key by key: their JSON text, which the
    keys do not need, is not copied."""
    if isinstance(args, ColumnArgs):
        return _KeysOf(args, mask)  # type: ignore[return-value]
    return args.take(np.flatnonzero(mask))


class _KeysOf:
    """The extracted keys of some rows of a ``ColumnArgs``, read from the rows that have
    them (no column of all the rows per key)."""

    def __init__(self, args: ColumnArgs, mask: np.ndarray) -> None:
        self.keys, self.mask = args.keys, mask
        self.rows = np.flatnonzero(mask)

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, key: str) -> pa.Array:
        sparse = self.keys.get(key)
        if sparse is None:
            return pa.nulls(len(self.rows), pa.int64())
        has = self.mask[sparse.rows]
        where = np.full(len(self.rows), -1, dtype=np.int64)
        where[np.searchsorted(self.rows, sparse.rows[has])] = np.arange(int(has.sum()))
        return sparse.values.filter(pa.array(has)).take(pa.array(where, mask=where < 0))

    dims = ColumnArgs.dims  # the keys of a [x, y, z] value, read through get
