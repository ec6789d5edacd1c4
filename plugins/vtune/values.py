"""VTune report cells to typed numbers: units, percentages, grouping separators and the
pseudo-values (``N/A*``, ``[Unknown]``) that mean "no number here"."""

from __future__ import annotations

import re

# A number, an optional unit VTune prints inside values (6.181s, 94.7%, 3.6 GHz, 2.0 GB).
NUMBER = re.compile(r"^([-+]?(?:\d+(?:[.,]\d{3})*(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?)\s*"
                    r"(%|s|ms|us|µs|ns|[KMGT]?Hz|[KMGT]?i?B|[KMGT]?B/sec)?\s*$")
SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_GROUPED = re.compile(r"[-+]?\d{1,3}(,\d{3}){2,}(\.\d+)?|[-+]?\d{1,3}(,\d{3})+\.\d+")


def is_pseudo(cell: str) -> bool:
    """Whether a stripped cell is empty or a VTune pseudo-value (``N/A*``, ``[Unknown]``)."""
    return not cell or cell.startswith(("N/A", "[")) or cell == "-"


def parse_number(text: str, delimiter: str) -> float | None:
    """The number in a cell, in the column's own unit (seconds for times), or None.

    Grouping separators (``4,038,700,000``) are removed where the delimiter is not a comma
    (in comma reports a grouped number would have been quoted, and is handled the same way).
    Times with a unit are converted to seconds, VTune's default time unit. A number too large
    for a double (``1e400``) comes back as an infinity: callers treat it as out of range.
    """
    cell = text.strip()
    if is_pseudo(cell):
        return None
    m = NUMBER.match(cell)
    if not m:
        return None
    digits = m.group(1)
    # "4,038,700,000" and "1,234.5" are grouped; "6,181" could be 6181 or a localized 6.181,
    # so it is not guessed: the value is null and the raw text stays in args.
    if _GROUPED.fullmatch(digits):
        digits = digits.replace(",", "")
    elif "," in digits:
        return None
    try:
        value = float(digits)
    except ValueError:  # "1.234.567": dots as grouping separators are not guessed either
        return None
    unit = m.group(2) or ""
    return value * SCALE.get(unit, 1.0)


def numeric_columns(rows: list[list[str]], width: int, delimiter: str) -> list[bool]:
    """Per column: whether its cells are numbers (more number cells than other text).

    Empty and pseudo cells do not count either way; a stray text cell in a numeric column
    (a damaged report) does not turn the column into text: the reader counts it instead.
    """
    numbers = [0] * width
    others = [0] * width
    for row in rows:
        for i in range(min(width, len(row))):
            cell = row[i].strip()
            if is_pseudo(cell):
                continue
            if parse_number(cell, delimiter) is None:
                others[i] += 1
            else:
                numbers[i] += 1
    return [n > o for n, o in zip(numbers, others, strict=True)]
