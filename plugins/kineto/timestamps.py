"""Chrome-trace microseconds to int64 nanoseconds, exactly.

Kineto writes ``ts``/``dur`` as decimal µs with three decimals. A float64 holds such a value
closely enough to recover the exact ns count while |value| < 2**43 µs (about 102 days): the
float's error is then below half a nanosecond. Relative timestamps always are; absolute epoch
µs with a fraction (1.7e15) are not, and need the decimal text (see ``loading``).
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa

SAFE_FLOAT_US = 2.0**43


class NeedsExactDecimals(Exception):
    """Raised when float µs are too large to give exact ns; reparse with decimals."""


def us_to_ns(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Convert µs values (int, float, Decimal, numeric str or None) to (ns, valid) arrays."""
    kinds = set(map(type, values))
    n = len(values)
    if kinds <= {int}:
        return np.array(values, dtype=np.int64) * 1000, np.ones(n, dtype=bool)
    if kinds <= {int, float, type(None)}:
        f = pa.array(values, type=pa.float64()).to_numpy(zero_copy_only=False)
        valid = ~np.isnan(f)
        f = np.where(valid, f, 0.0)
        big = np.abs(f) >= SAFE_FLOAT_US
        if big.any():
            if float in {type(v) for v, b in zip(values, big, strict=True) if b}:
                raise NeedsExactDecimals
            return _exact([v if ok else None for v, ok in zip(values, valid, strict=True)])
        whole = np.floor(f)
        ns = whole.astype(np.int64) * 1000 + np.rint((f - whole) * 1000).astype(np.int64)
        return ns, valid
    return _exact(values)


def _exact(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    ns = np.zeros(len(values), dtype=np.int64)
    valid = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):
        if v is None or isinstance(v, bool):
            continue
        try:
            d = v if isinstance(v, Decimal) else Decimal(v if isinstance(v, (int, str)) else
                                                        repr(v))
            ns[i] = int((d * 1000).to_integral_value(ROUND_HALF_EVEN))
            valid[i] = True
        except (InvalidOperation, ValueError, TypeError, OverflowError):
            continue
    return ns, valid


def needs_exact_decimals(events: list[object]) -> bool:
    """Whether any float ``ts`` is too large for exact ns (absolute epoch µs with fractions)."""
    values = [e.get("ts") for e in events if type(e) is dict]
    try:
        arr = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return False  # strings or odd values: us_to_ns converts those exactly one by one
    if not pa.types.is_floating(arr.type):
        return False
    f = np.nan_to_num(arr.to_numpy(zero_copy_only=False))
    big = np.flatnonzero(np.abs(f) >= SAFE_FLOAT_US)
    return any(type(values[i]) is float for i in big)
