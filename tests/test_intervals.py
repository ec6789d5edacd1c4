"""tracekit.intervals against brute force over integer time points."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tracekit import intervals as iv

spans = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)), max_size=12).map(
    lambda xs: (np.array([s for s, _ in xs], dtype=np.int64),
                np.array([s + d for s, d in xs], dtype=np.int64)))


def points(starts, ends) -> set[int]:
    return {t for s, e in zip(starts.tolist(), ends.tolist(), strict=True) for t in range(s, e)}


@given(spans)
def test_union_covers_the_same_points_with_disjoint_sorted_intervals(a):
    s, e = iv.union(*a)
    assert points(s, e) == points(*a)
    assert np.all(e > s) and np.all(s[1:] > e[:-1])
    assert iv.total((s, e)) == len(points(*a))


@pytest.mark.slow
@given(spans, spans, spans)
def test_minus_intersect_and_segments(a, b, c):
    ua, ub, uc = iv.union(*a), iv.union(*b), iv.union(*c)
    assert points(*iv.minus(ua, ub, uc)) == points(*a) - points(*b) - points(*c)
    assert points(*iv.intersect(ua, ub)) == points(*a) & points(*b)
    lo, hi, mask = iv.segments(ua, ub)
    for bit, pts in ((1, points(*a)), (2, points(*b))):
        assert points(lo[(mask & bit) > 0], hi[(mask & bit) > 0]) == pts


@pytest.mark.slow
@given(spans, st.lists(st.tuples(st.integers(-5, 90), st.integers(0, 40)), max_size=6))
def test_covered_within_windows(a, windows):
    u = iv.union(*a)
    lo = np.array([w for w, _ in windows], dtype=np.int64)
    hi = lo + np.array([d for _, d in windows], dtype=np.int64)
    got = iv.covered_within(lo, hi, u)
    want = [len(points(*a) & set(range(x, y))) for x, y in zip(lo.tolist(), hi.tolist(),
                                                                  strict=True)]
    assert got.tolist() == want


def test_gaps_are_the_holes_between_intervals():
    u = iv.union(np.array([0, 5, 30, 12]), np.array([10, 8, 40, 20]))
    assert [x.tolist() for x in u] == [[0, 12, 30], [10, 20, 40]]
    assert [x.tolist() for x in iv.gaps(u)] == [[10, 20], [12, 30]]


grouped = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60), st.integers(0, 20)),
                   max_size=12)
grouped_points = st.lists(st.tuples(st.integers(0, 3), st.integers(-5, 90)), max_size=12)


@given(grouped, grouped_points)
def test_grouped_cover_and_hold_match_a_loop_over_groups(intervals, pts):
    """covered_by_group and holds_by_group put every group on one axis: the answers are
    those of a plain loop over the groups."""
    group = np.array([g for g, _, _ in intervals], dtype=np.int64)
    start = np.array([s for _, s, _ in intervals], dtype=np.int64)
    end = start + np.array([d for _, _, d in intervals], dtype=np.int64)
    point_group = np.array([g for g, _ in pts], dtype=np.int64)
    at = np.array([t for _, t in pts], dtype=np.int64)
    rows = list(zip(group, start, end, strict=True))
    marks = list(zip(point_group, at, strict=True))
    want_covered = [any(g == pg and s <= t < e for g, s, e in rows) for pg, t in marks]
    assert iv.covered_by_group(point_group, at, group, start, end).tolist() == want_covered
    want_holds = [any(g == pg and s <= t <= e for pg, t in marks) for g, s, e in rows]
    assert iv.holds_by_group(group, start, end, point_group, at).tolist() == want_holds
