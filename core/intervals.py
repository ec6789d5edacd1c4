"""Interval arithmetic on numpy arrays of half-open ``[start, end)`` ns intervals.

Analyzers measure time as unions: a GPU is busy while any stream runs something, and an
interval counted for compute is not counted again for a copy it overlaps. Every function here
is vectorized (sorting and prefix sums), so a million kernels cost a few sorts, not a loop.

A *set* is a pair ``(starts, ends)`` of sorted, disjoint, non-empty intervals, as
:func:`union` returns.
"""

from __future__ import annotations

import numpy as np

IntervalSet = tuple[np.ndarray, np.ndarray]

_EMPTY = np.empty(0, dtype=np.int64)


def empty() -> IntervalSet:
    """The empty set."""
    return _EMPTY, _EMPTY


def union(starts: np.ndarray, ends: np.ndarray) -> IntervalSet:
    """Merge intervals into a set; zero-length intervals are dropped, touching ones joined."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if not len(s):
        return empty()
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    first = np.flatnonzero(np.r_[True, s[1:] > reach[:-1]])
    last = np.r_[first[1:] - 1, len(s) - 1]
    return s[first], reach[last]


def total(interval_set: IntervalSet) -> int:
    """Total length of a set."""
    s, e = interval_set
    return int(np.sum(e - s)) if len(s) else 0


def gaps(interval_set: IntervalSet) -> IntervalSet:
    """The holes between consecutive intervals of a set (nothing before or after it)."""
    s, e = interval_set
    return e[:-1], s[1:]


def covered(points: np.ndarray, interval_set: IntervalSet) -> np.ndarray:
    """For each point, whether a set covers it."""
    s, e = interval_set
    if not len(s):
        return np.zeros(len(points), dtype=bool)
    i = np.searchsorted(s, points, side="right") - 1
    return (i >= 0) & (e[np.maximum(i, 0)] > points)


def covered_before(points: np.ndarray, interval_set: IntervalSet) -> np.ndarray:
    """For each point t, how much of the set lies before t (a non-decreasing function)."""
    s, e = interval_set
    points = np.asarray(points, dtype=np.int64)
    if not len(s):
        return np.zeros(len(points), dtype=np.int64)
    prefix = np.r_[0, np.cumsum(e - s)]
    i = np.searchsorted(s, points, side="right") - 1
    inside = np.clip(points - s[np.maximum(i, 0)], 0, (e - s)[np.maximum(i, 0)])
    return np.where(i >= 0, prefix[np.maximum(i, 0)] + inside, 0)


def covered_within(lo: np.ndarray, hi: np.ndarray, interval_set: IntervalSet) -> np.ndarray:
    """For each window ``[lo, hi)``, how much of it the set covers."""
    return covered_before(hi, interval_set) - covered_before(lo, interval_set)


def segments(*sets: IntervalSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut the time the sets span into elementary segments.

    Returns ``(lo, hi, mask)``: within each segment ``[lo, hi)`` membership is constant, and
    bit ``k`` of ``mask`` says whether ``sets[k]`` covers it. Segments covered by no set are
    included (mask 0), so ``hi - lo`` sums to the whole span.
    """
    points = _distinct(np.concatenate([np.r_[s, e] for s, e in sets] or [_EMPTY]))
    lo, hi = points[:-1], points[1:]
    mask = np.zeros(len(lo), dtype=np.int64)
    for k, interval_set in enumerate(sets):
        mask |= covered(lo, interval_set).astype(np.int64) << k
    return lo, hi, mask


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values: ``np.unique`` by sorting (numpy 2.3+ hashes, ~50x slower on
    hundreds of thousands of distinct values)."""
    values = np.sort(values)
    return values[np.r_[True, values[1:] != values[:-1]]] if len(values) else values


def minus(a: IntervalSet, *others: IntervalSet) -> IntervalSet:
    """The parts of ``a`` that none of ``others`` covers."""
    if not len(a[0]):
        return empty()
    lo, hi, mask = segments(a, *others)
    keep = mask == 1
    return union(lo[keep], hi[keep])


def intersect(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    """The parts covered by both sets."""
    if not len(a[0]) or not len(b[0]):
        return empty()
    lo, hi, mask = segments(a, b)
    keep = mask == 3
    return union(lo[keep], hi[keep])


def total_by_group(group: np.ndarray, start: np.ndarray, end: np.ndarray, groups: int,
                   lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """Per group code ``0 .. groups - 1``: the length of the union of its intervals (cut to
    ``[lo, hi)`` where given), so that a name's ranges on two threads at once, or nested in
    each other, count once. One sort for all groups.

    >>> total_by_group(np.array([0, 0, 1]), np.array([0, 5, 0]), np.array([10, 20, 4]), 2)
    array([20.,  4.])
    """
    s = np.asarray(start, dtype=np.int64)
    e = np.asarray(end, dtype=np.int64)
    if lo is not None:
        s = np.maximum(s, lo)
    if hi is not None:
        e = np.minimum(e, hi)
    keep = e > s
    g, s, e = np.asarray(group)[keep], s[keep], e[keep]
    if not len(g):
        return np.zeros(groups)
    order = np.lexsort((s, g))
    g, s, e = g[order], s[order], e[order]
    s, e, before, first = _reach_before(g, s, e)
    begin = np.where(first, s, np.maximum(s, before))
    added = np.clip(e - begin, 0, None)  # what an interval adds past the ones before it
    return np.bincount(g, weights=added, minlength=groups)


def _reach_before(group: np.ndarray, start: np.ndarray, end: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For intervals sorted by group, then start: their starts and ends shifted so that
    each group's lie past the previous group's, the furthest (shifted) end of the intervals
    before each one (meaningful within its group), and whether it is its group's first.
    One running maximum then serves every group, with no loop over them."""
    base = int(start.min())
    codes = np.unique(group, return_inverse=True)[1].reshape(-1).astype(np.int64)
    shift = codes * (int(end.max()) - base + 1) - base
    s, e = start + shift, end + shift
    reach = np.maximum.accumulate(e)
    first = np.r_[True, group[1:] != group[:-1]]
    return s, e, np.r_[np.iinfo(np.int64).min, reach[:-1]], first


def _one_axis(point_group: np.ndarray, points: np.ndarray, group: np.ndarray,
              start: np.ndarray, end: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points and intervals shifted group by group onto one axis, each group's past the
    previous group's, so that one search serves every group."""
    points = np.asarray(points, dtype=np.int64)
    start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    codes = np.unique(np.concatenate([point_group, group]), return_inverse=True)[1]
    codes = codes.reshape(-1).astype(np.int64)
    base = min(int(start.min()), int(points.min()))
    shift = codes * (max(int(end.max()), int(points.max())) - base + 1) - base
    n = len(points)
    return points + shift[:n], start + shift[n:], end + shift[n:]


def covered_by_group(point_group: np.ndarray, points: np.ndarray, group: np.ndarray,
                     start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per point: whether an interval ``[start, end)`` of its own group (a thread, an input)
    covers it, as ``covered`` says group by group, with one union for all groups.

    >>> covered_by_group(np.array([0, 1]), np.array([5, 5]), np.array([0]), np.array([0]),
    ...                  np.array([10]))
    array([ True, False])
    """
    if not len(points) or not len(start):
        return np.zeros(len(points), dtype=bool)
    p, s, e = _one_axis(point_group, points, group, start, end)
    return covered(p, union(s, e))


def holds_by_group(group: np.ndarray, start: np.ndarray, end: np.ndarray,
                   point_group: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Per interval ``[start, end]`` (both ends included): whether a point of its own group
    lies in it.

    >>> holds_by_group(np.array([0, 0]), np.array([0, 20]), np.array([10, 30]),
    ...                np.array([0, 1]), np.array([5, 25]))
    array([ True, False])
    """
    if not len(start) or not len(points):
        return np.zeros(len(start), dtype=bool)
    p, s, e = _one_axis(point_group, points, group, start, end)
    p = np.sort(p)
    return np.searchsorted(p, e, side="right") > np.searchsorted(p, s, side="left")


def starts_inside(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per interval: whether it starts inside another interval of its ``group`` (a thread)
    that started before it, or at the same time and lasts longer: nesting, or overlap."""
    inside = np.zeros(len(start), dtype=bool)
    if len(start) < 2:
        return inside
    order = np.lexsort((-end, start, group))  # per group by start, the outer one first
    s, _, before, first = _reach_before(np.asarray(group)[order],
                                        np.asarray(start, dtype=np.int64)[order],
                                        np.asarray(end, dtype=np.int64)[order])
    inside[order] = ~first & (s < before)
    return inside
