"""Dense codes for the distinct rows of several integer columns, without building a record
or 2-D array of them (``np.unique(axis=1)`` on millions of rows copies and sorts them whole).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Rows of a column sampled to guess whether hashing it beats sorting it.
_SAMPLE = 4096


def factorize(*columns: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Return (code per row, per column the values of each distinct row).

    Distinct rows are numbered in lexicographic order of the columns, as ``np.unique`` of the
    rows would number them.
    """
    n = len(columns[0]) if columns else 0
    code = np.zeros(n, dtype=np.int64)
    for i, column in enumerate(columns):
        values, inverse = _unique_inverse(np.asarray(column))
        code = code * len(values) + inverse
        if i:
            # Keep the codes dense so that the next multiplication cannot overflow (the first
            # column's are dense already).
            code = _unique_inverse(code)[1]
    first = first_rows(code, int(code.max()) + 1 if n else 0)
    return code, [np.asarray(column)[first] for column in columns]


def first_rows(code: np.ndarray, distinct: int) -> np.ndarray:
    """Per code ``0 .. distinct - 1``: the first row that has it (every code must occur).

    Examples
    --------
    >>> first_rows(np.array([2, 0, 2, 1, 0]), 3).tolist()
    [1, 3, 0]
    """
    first = np.empty(distinct, dtype=np.int64)
    first[code[::-1]] = np.arange(len(code) - 1, -1, -1, dtype=np.int64)
    return first


def _unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of a 1-D array, the inverse as int64.

    Integers spanning at most about twice as many values as there are rows are counted in
    place, and integers with few distinct values are hashed (Arrow's ``dictionary_encode``)
    and only the distinct ones sorted: both instead of sorting every row.
    """
    n = len(values)
    if values.dtype.kind not in "biu" or not n:
        distinct, inverse = np.unique(values, return_inverse=True)
        return distinct, inverse.reshape(-1).astype(np.int64, copy=False)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo <= 2 * n + _SAMPLE and hi < 2**63:
        offset = values.astype(np.int64) - lo
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[offset] = True
        rank = np.cumsum(present, dtype=np.int64) - 1
        return (np.flatnonzero(present) + lo).astype(values.dtype), rank[offset]
    if len(np.unique(values[::max(n // _SAMPLE, 1)])) > _SAMPLE // 4:
        # Mostly distinct: hashing then sorting the distinct values costs more than a sort.
        distinct, inverse = np.unique(values, return_inverse=True)
        return distinct, inverse.reshape(-1).astype(np.int64, copy=False)
    encoded = pc.dictionary_encode(pa.array(values))
    distinct = encoded.dictionary.to_numpy(zero_copy_only=False)
    order = np.argsort(distinct)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    return distinct[order], rank[encoded.indices.to_numpy(zero_copy_only=False)]
