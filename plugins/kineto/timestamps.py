"""Chrome-trace microseconds to int64 nanoseconds, exactly.

Kineto writes ``ts``/``dur`` as decimal µs with three decimals. A float64 holds such a value
closely enough to recover the exact ns count while |value| < 2**43 µs (about 102 days): the
float's error is then below half a nanosecond. Relative timestamps always are; absolute epoch
µs with a fraction (1.7e15) are not, and need the decimal text (see ``loading``).

Values whose ns do not fit int64 (|µs| > 9.2e15, about 292 years), NaN, infinities, booleans
and anything that is not a number or a numeric string are not valid: the caller skips and
counts them.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np
import pyarrow as pa

SAFE_FLOAT_US = 2.0**43
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
MAX_US = INT64_MAX // 1000  # the largest |µs| whose ns fit int64


class NeedsExactDecimals(Exception):
    """Raised when float µs are too large to give exact ns; reparse with decimals."""


@dataclass(frozen=True)
class Micros:
    """µs values already converted to ns, and whether each was usable."""

    ns: np.ndarray
    valid: np.ndarray

    def take(self, idx: np.ndarray) -> Micros:
        return Micros(self.ns[idx], self.valid[idx])


def us_to_ns(values: list[Any] | Micros) -> tuple[np.ndarray, np.ndarray]:
    """Convert µs values (int, float, Decimal, numeric str or None) to (ns, valid) arrays.

    ``ns`` is 0 where ``valid`` is false. Values the typed decode converted already (an
    ``events.Micros``) come back as they are.
    """
    if isinstance(values, Micros):
        return values.ns, values.valid
    kinds = set(map(type, values))
    if kinds <= {int}:
        try:
            us = np.array(values, dtype=np.int64)
        except OverflowError:
            return _exact(values)
        valid = (us >= -MAX_US) & (us <= MAX_US)
        return np.where(valid, us, 0) * 1000, valid
    if kinds <= {int, float, type(None)}:
        try:
            f = pa.array(values, type=pa.float64()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, OverflowError):  # an int beyond int64
            return _exact(values)
        with np.errstate(invalid="ignore"):
            valid = np.abs(f) <= MAX_US  # false for NaN (null) and the infinities
        f = np.where(valid, f, 0.0)
        big = np.abs(f) >= SAFE_FLOAT_US
        if big.any():
            if any(type(values[i]) is float for i in np.flatnonzero(big)):
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
        n = exact_ns(v)
        if n is not None:
            ns[i] = n
            valid[i] = True
    return ns, valid


def exact_ns(value: Any) -> int | None:
    """The ns of one µs value (int, float, Decimal or numeric text), None if unusable."""
    if isinstance(value, Decimal):
        d = value
    elif isinstance(value, (int, str)) and not isinstance(value, bool):
        try:
            d = Decimal(value)
        except ArithmeticError:  # decimal.InvalidOperation: not a number
            return None
    elif isinstance(value, float):
        d = Decimal(repr(value))
    else:
        return None
    # adjusted() is the decimal exponent: checked first, so that 1e999999 cannot overflow.
    if not d.is_finite() or d.adjusted() > 16:
        return None
    n = int((d * 1000).to_integral_value(ROUND_HALF_EVEN))
    return n if INT64_MIN <= n <= INT64_MAX else None


def needs_exact_decimals(events: list[object]) -> bool:
    """Whether any float ``ts`` is too large for exact ns (absolute epoch µs with fractions)."""
    values = [e.get("ts") for e in events if type(e) is dict]
    try:
        arr = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        # Mixed types: look at the floats one by one.
        return any(type(v) is float and SAFE_FLOAT_US <= abs(v) <= MAX_US for v in values)
    if not pa.types.is_floating(arr.type):
        return False
    f = np.nan_to_num(arr.to_numpy(zero_copy_only=False), posinf=0.0, neginf=0.0)
    big = np.flatnonzero((np.abs(f) >= SAFE_FLOAT_US) & (np.abs(f) <= MAX_US))
    return any(type(values[i]) is float for i in big)
