"""The column helpers an nsys conversion spends its own time in: ``factorize`` (track keys)
and ``fields.keep_writable`` (rows a writer drops), checked against their plain forms."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from tracekit import fields
from tracekit.factorize import factorize
from tracekit.model import EVENTS_SCHEMA


def _by_rows(*columns: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """What factorize must give: np.unique of the rows (lexicographic order)."""
    rows = np.rec.fromarrays(columns)
    distinct, code = np.unique(rows, return_inverse=True)
    return code.reshape(-1), [distinct[f] for f in distinct.dtype.names]


def test_factorize_numbers_rows_in_lexicographic_order() -> None:
    code, (a, b) = factorize(np.array([3, 1, 3, 1, 2]), np.array([9, 8, 7, 8, 9]))
    assert code.tolist() == [3, 0, 2, 0, 1]
    assert a.tolist() == [1, 2, 3, 3]
    assert b.tolist() == [8, 9, 7, 9]


@pytest.mark.parametrize("kind", ["narrow", "sentinel", "distinct", "bool", "uint64", "float"])
def test_factorize_matches_unique_of_rows(kind: str) -> None:
    rng = np.random.default_rng(7)
    n = 20_000
    first = rng.integers(0, 4, n).astype(np.int8)
    second = {
        "narrow": lambda: rng.integers(100, 130, n).astype(np.int32),
        # Few values far apart (a null sentinel beside pids): hashed, not counted.
        "sentinel": lambda: rng.choice(np.array([-(2**62), 1701896, 1701908]), n),
        "distinct": lambda: rng.integers(-(2**62), 2**62, n),
        "bool": lambda: rng.integers(0, 2, n).astype(bool),
        "uint64": lambda: rng.choice(np.array([0, 5, 2**64 - 1], dtype=np.uint64), n),
        "float": lambda: rng.choice(np.array([1.5, -0.5, 2.0, 0.25]), n),
    }[kind]()
    code, values = factorize(first, second, first)
    want_code, want_values = _by_rows(first, second, first)
    assert code.dtype == np.int64
    assert np.array_equal(code, want_code)
    for got, want, column in zip(values, want_values, (first, second, first), strict=True):
        assert got.dtype == column.dtype
        assert np.array_equal(got, want)


def test_factorize_of_no_rows() -> None:
    code, (a, b) = factorize(np.zeros(0, np.int64), np.zeros(0, np.int32))
    assert code.tolist() == [] and a.dtype == np.int64 and b.dtype == np.int32


def _events(n: int, chunks: int) -> pa.Table:
    size = n // chunks
    return pa.Table.from_batches([pa.record_batch({
        "ts": pa.array(np.arange(i * size, (i + 1) * size)),
        "text": pa.array([f"row {j}" for j in range(i * size, (i + 1) * size)])})
        for i in range(chunks)])


def test_keep_writable_slices_a_few_runs_without_copying() -> None:
    events = _events(1000, 4)
    drop = np.zeros(1000, dtype=bool)
    drop[[0, 1, 400, 999]] = True
    skipped: Counter[str] = Counter()
    kept = fields.keep_writable(events, [(pa.array(drop), "odd rows")], skipped)
    assert skipped == Counter({"odd rows": 4})
    assert kept.equals(events.filter(pa.array(~drop)))
    assert kept["ts"].to_pylist() == [i for i in range(1000) if not drop[i]]
    # The first kept chunk is a view into the input's buffers.
    source = events["text"].chunks[0].buffers()[2].address
    assert kept["text"].chunks[0].buffers()[2].address == source


def test_keep_writable_filters_many_runs_and_counts_each_reason_once() -> None:
    events = _events(1000, 2)
    odd = pa.array(np.arange(1000) % 2 == 1)
    late = pa.array(np.arange(1000) >= 900)
    skipped: Counter[str] = Counter()
    kept = fields.keep_writable(events, [(odd, "odd"), (late, "late")], skipped)
    assert skipped == Counter({"odd": 500, "late": 50})
    assert kept["ts"].to_pylist() == list(range(0, 900, 2))


def test_keep_writable_all_or_nothing() -> None:
    events = _events(10, 1)
    skipped: Counter[str] = Counter()
    assert fields.keep_writable(events, [(pa.nulls(10, pa.bool_()), "x")], skipped) is events
    gone = fields.keep_writable(events, [(pa.array([True] * 10), "all")], skipped)
    assert gone.num_rows == 0 and gone.schema == events.schema
    assert skipped == Counter({"all": 10})


def test_carry_keeps_a_column_whole_or_masks_it() -> None:
    n = 4
    events = pa.table({c: pa.nulls(n, EVENTS_SCHEMA.field(c).type)
                       for c in EVENTS_SCHEMA.names})
    events = events.set_column(events.schema.get_field_index("grid_x"), "grid_x",
                               pa.array([1, None, 3, 4], pa.int32()))
    events = events.set_column(events.schema.get_field_index("value"), "value",
                               pa.array([float("nan")] * n))
    whole = fields.carry(events, {}, typed=True)
    assert whole.keys["grid_x"].to_pylist() == [1, None, 3, 4]
    assert "value" not in whole.keys  # NaN only: no key, counted
    assert whole.skipped == Counter({fields.field_skip(
        "value", "NaN or infinite (JSON has no such number)"): 4})
    part = fields.carry(events, {}, allowed=np.array([True, True, False, True]), why_not="no")
    assert part.keys["grid_x"].to_pylist() == ["1", None, None, "4"]
    assert part.skipped[fields.field_skip("grid_x", "no")] == 1
