"""Vectorized key lookups for linking rows of one trace (a call's process to its work, a
thread's process to its other calls)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def _ints(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    arr = pa.array(values) if not isinstance(values, pa.Array | pa.ChunkedArray) else values
    arr = arr.cast(pa.int64())
    return (pc.fill_null(arr, 0).to_numpy(zero_copy_only=False),
            pc.is_valid(arr).to_numpy(zero_copy_only=False))


def lookup(keys: pa.Array, values: pa.Array, queries: pa.Array) -> pa.Array:
    """For each query the value of the first row whose key equals it (null where no row does,
    and for null keys, values and queries)."""
    k, k_ok = _ints(keys)
    v, v_ok = _ints(values)
    k, v = k[k_ok & v_ok], v[k_ok & v_ok]
    q, q_ok = _ints(queries)
    if not len(k):
        return pa.nulls(len(q), pa.int64())
    order = np.argsort(k, kind="stable")
    k, v = k[order], v[order]
    pos = np.clip(np.searchsorted(k, q), 0, len(k) - 1)
    hit = q_ok & (k[pos] == q)
    return pa.array(np.where(hit, v[pos], 0), pa.int64(), mask=~hit)

