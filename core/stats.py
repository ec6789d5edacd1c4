"""Grouped descriptive statistics over Arrow columns (count, total, mean, median, ...)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.report import percent

STAT_COLUMNS = ("count", "total", "mean", "median", "min", "max", "stddev")

# Under this many samples a report says its shares are rough: a share p measured from n
# samples is uncertain by about ±1.96·sqrt(p(1-p)/n) at 95 % confidence (samples of similar
# weight), ±3.1 points for a 50 % share at 1,000 samples, ±9.3 at 111.
FEW_SAMPLES = 1_000


def share_margin(share: float, samples: int) -> float:
    """The 95 % margin, in percentage points, of a ``share`` (0..1) of ``samples`` samples."""
    share = min(max(share, 0.0), 1.0)
    return round(196.0 * (share * (1.0 - share) / samples) ** 0.5, 1) if samples else 0.0


def share_margins(samples: int, name: str, share: float) -> str:
    """The 95 % margins of the top ``share`` (0..1, that of ``name``) and of a 50 % share; the
    top one only where it is neither all nor none (the formula gives ±0 there)."""
    half = f"a 50% share ±{share_margin(0.5, samples)}"
    if not 0.0 < share < 1.0:
        return half
    return f"{name}'s {percent(share, 1.0)}% is ±{share_margin(share, samples)} points, {half}"


def few_samples_note(samples: int, name: str, share: float) -> str | None:
    """What a report of fewer than ``FEW_SAMPLES`` samples says of its shares."""
    if not 0 < samples < FEW_SAMPLES:
        return None
    return (f"only {plural(samples, 'sample')}: shares are rough (a share p is "
            f"±1.96·√(p(1−p)/n) at 95% confidence: {share_margins(samples, name, share)})")


def plural(n: int, noun: str) -> str:
    """``1 sample``, ``2 samples``."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def grouped_stats(keys: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray,
                  occurrences: pa.Array | pa.ChunkedArray | None = None,
                  ) -> dict[str, Any]:
    """Per distinct key: count, total, mean, exact median, min, max, sample stddev.

    ``stddev`` is the sample standard deviation (ddof=1), as ``nsys stats`` reports; it is 0
    for a single value. Rows with a null value are ignored. Groups come out ordered by total,
    largest first.

    ``occurrences`` (the model's ``count`` column; null means 1) says how many occurrences
    each row stands for: a stats file's row totals its calls. A group holding such a row has
    an exact count, total and mean, but no median, min, max or stddev (None: not known).
    """
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    weight = None
    if occurrences is not None and occurrences.null_count < len(occurrences):
        weight = pc.fill_null(occurrences, 1).to_numpy(zero_copy_only=False).astype(np.int64)
    if not pa.types.is_dictionary(keys.type):
        keys = keys.cast(pa.string()).dictionary_encode()
    valid = values.is_valid().to_numpy(zero_copy_only=False) & \
        keys.is_valid().to_numpy(zero_copy_only=False)
    # Group by dictionary code: never materialize the (long) names per row.
    code = keys.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)[valid]
    entries = keys.dictionary.cast(pa.string()).to_pylist()
    # A dictionary may hold one value twice (e.g. two raw categories mapped to one name).
    first: dict[str | None, int] = {}
    remap = np.array([first.setdefault(e, i) for i, e in enumerate(entries)], dtype=np.int64)
    code = remap[code] if len(remap) else code
    names = entries
    v = values.fill_null(0).to_numpy(zero_copy_only=False)[valid].astype(np.int64)
    if len(v) == 0:
        return {"key": [], **{c: np.array([], dtype=np.int64) for c in STAT_COLUMNS}}
    order = np.lexsort((v, code))
    code_s, v_s = code[order], v[order]
    if weight is not None:
        weight = weight[valid][order]
    starts = np.flatnonzero(np.r_[True, code_s[1:] != code_s[:-1]])
    counts = np.diff(np.r_[starts, len(v_s)])
    totals = np.add.reduceat(v_s, starts)
    mid_lo = starts + (counts - 1) // 2
    mid_hi = starts + counts // 2
    median = (v_s[mid_lo] + v_s[mid_hi]) / 2
    mean = totals / counts
    # Two-pass variance: exact enough for ns values and stable for large totals.
    dev = v_s - np.repeat(mean, counts)
    ss = np.add.reduceat(dev * dev, starts)
    stddev = np.where(counts > 1, np.sqrt(ss / np.maximum(counts - 1, 1)), 0.0)
    result: dict[str, Any] = {
        "key": [names[c] for c in code_s[starts].tolist()],
        "count": counts, "total": totals, "mean": mean, "median": median,
        "min": v_s[starts], "max": np.maximum.reduceat(v_s, starts), "stddev": stddev,
    }
    if weight is not None and bool((weight != 1).any()):
        result.update(_with_aggregates(result, weight, starts))
    rank = np.argsort(-totals, kind="stable")
    return {k: ([col[i] for i in rank] if isinstance(col, list) else col[rank])
            for k, col in result.items()}


def _with_aggregates(result: dict[str, Any], weight: np.ndarray, starts: np.ndarray,
                     ) -> dict[str, Any]:
    """The count and mean of groups whose rows stand for ``weight`` occurrences each, and
    None for the order statistics of the groups an aggregate row leaves unknown."""
    counts = np.add.reduceat(weight, starts)
    aggregate = np.maximum.reduceat((weight != 1).astype(np.int8), starts).astype(bool)
    unknown = {k: [None if a else x for a, x in zip(aggregate.tolist(), result[k].tolist(),
                                                    strict=True)]
               for k in ("median", "min", "max", "stddev")}
    mean = np.divide(result["total"], counts, out=np.zeros(len(counts)), where=counts > 0)
    return {"count": counts, "mean": mean, **unknown}
