"""Building report tables: typed columns with units, and percentages."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

_TYPES = {"int": pa.int64(), "float": pa.float64(), "str": pa.string()}


def table(columns: list[tuple[str, str, str | None, Any]]) -> pa.Table:
    """A report table from ``(name, type, unit, values)``: type is int, float or str."""
    fields, arrays = [], []
    for name, kind, unit, values in columns:
        type_ = _TYPES[kind]
        fields.append(pa.field(name, type_, metadata={"unit": unit} if unit else None))
        arrays.append(pa.array(np.asarray(values).tolist() if isinstance(values, np.ndarray)
                               else list(values), type_))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def pct(part: float, whole: float) -> float:
    """``part`` as a percentage of ``whole``, rounded to 0.1 (0 when whole is 0)."""
    return round(100.0 * part / whole, 1) if whole else 0.0


def short_name(name: str, limit: int = 48) -> str:
    """``name`` cut to ``limit`` characters (kernel names run to thousands)."""
    return name if len(name) <= limit else name[: limit - 1] + "…"
