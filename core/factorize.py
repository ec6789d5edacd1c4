"""Dense codes for the distinct rows of several integer columns, without building a record
or 2-D array of them (``np.unique(axis=1)`` on millions of rows copies and sorts them whole).
"""

from __future__ import annotations

import numpy as np


def factorize(*columns: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Return (code per row, per column the values of each distinct row).

    Distinct rows are numbered in lexicographic order of the columns, as ``np.unique`` of the
    rows would number them.
    """
    n = len(columns[0]) if columns else 0
    code = np.zeros(n, dtype=np.int64)
    for column in columns:
        values, inverse = np.unique(column, return_inverse=True)
        code = code * len(values) + inverse.reshape(-1)
        # Keep the codes dense so that the next multiplication cannot overflow.
        code = np.unique(code, return_inverse=True)[1].reshape(-1)
    distinct = int(code.max()) + 1 if n else 0
    first = np.empty(distinct, dtype=np.int64)
    first[code[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
    return code, [np.asarray(column)[first] for column in columns]
