"""Order slices of each track into properly nested BEGIN/END sequences, spreading overlaps
over extra lanes so that no slice is ever dropped."""

from __future__ import annotations

import numpy as np


def nest_slices(track: np.ndarray, start: np.ndarray, end: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (row, is_begin, lane) for every BEGIN and END event, in emission order.

    Within a track and lane the events are properly nested (END closes the most recently
    opened slice) and their timestamps never decrease. A slice that overlaps an open slice
    without fitting inside it goes to the first lane where it nests.
    """
    order = np.lexsort((-(end - start), start, track))
    t, s, e = track[order], start[order], end[order]
    n = len(order)
    ranks, begins = _nested_order(t, s, e)
    rows = order[ranks]
    lanes = np.zeros(2 * n, dtype=np.int64)
    # Tracks whose slices do not all nest go through the replay, lane by lane.
    bad = _not_nested(t, s, e, ranks, begins)
    if bad.any():
        lane_of = np.zeros(n, dtype=np.int64)
        bounds = np.flatnonzero(np.diff(t)) + 1
        lo = np.r_[0, bounds]
        hi = np.r_[bounds, n]
        for k in np.flatnonzero(bad).tolist():
            a, b = int(lo[k]), int(hi[k])
            _nest_track(order[a:b], s[a:b].tolist(), e[a:b].tolist(), rows, begins, lanes,
                        lane_of, 2 * a)
    return rows, begins, lanes


def _nested_order(t: np.ndarray, s: np.ndarray, e: np.ndarray,
                  ) -> tuple[np.ndarray, np.ndarray]:
    """BEGIN and END events (positions in the sorted slices) in the order the replay gives
    when every track's slices nest: a slice ends just before the first later slice of its
    track that starts at or after its end begins (or at the track's end), innermost first."""
    n = len(t)
    # The first slice of the same track starting at or after each end: sort the ends in
    # among the starts (an end before a start at the same time).
    both = np.lexsort((np.r_[np.ones(n, dtype=np.int8), np.zeros(n, dtype=np.int8)],
                       np.r_[s, e], np.r_[t, t]))
    starts_before = np.cumsum(both < n) - (both < n)
    follow = np.empty(n, dtype=np.int64)
    follow[both[both >= n] - n] = starts_before[both >= n]
    follow = np.maximum(follow, np.arange(1, n + 1))
    # Sort key: the position of the BEGIN it precedes (x2, END first), then inner first.
    rank = np.arange(n, dtype=np.int64)
    key = np.r_[(rank * 2 + 1) * (n + 1), (follow * 2) * (n + 1) + (n - rank)]
    events = np.argsort(key, kind="stable")
    return events % n, events < n


def _not_nested(t: np.ndarray, s: np.ndarray, e: np.ndarray, ranks: np.ndarray,
                begins: np.ndarray) -> np.ndarray:
    """Per track (in sorted order): whether the events of ``_nested_order`` are wrong for it
    (its slices overlap without nesting): their times decrease somewhere, or they are not
    properly nested."""
    n = len(t)
    if not n:
        return np.zeros(0, dtype=bool)
    starts = np.zeros(n, dtype=np.int64)
    starts[np.flatnonzero(np.diff(t)) + 1] = 1
    track_of = np.cumsum(starts)
    bad = np.zeros(int(track_of[-1]) + 1, dtype=bool)
    event_track = track_of[ranks]
    time = np.where(begins, s[ranks], e[ranks])
    same = event_track[1:] == event_track[:-1]
    bad[event_track[1:][same & (time[1:] < time[:-1])]] = True
    # Properly nested: at each depth of a track, the BEGIN and END of one slice alternate.
    depth = np.cumsum(np.where(begins, 1, -1))
    group = event_track * (n + 2) + np.where(begins, depth, depth + 1)
    by_group = np.argsort(group, kind="stable")
    group, slice_at = group[by_group], ranks[by_group]
    first = np.r_[True, group[1:] != group[:-1]]
    at = np.arange(2 * n)
    opening = (at - np.maximum.accumulate(np.where(first, at, 0))) % 2 == 0
    wrong = begins[by_group] != opening
    pair = np.flatnonzero(opening)
    closed = np.r_[group[1:] == group[:-1], False][pair] & \
        (slice_at[np.minimum(pair + 1, 2 * n - 1)] == slice_at[pair])
    wrong[pair[~closed]] = True
    bad[event_track[by_group][wrong]] = True
    return bad


def _nest_track(order: np.ndarray, s: list[int], e: list[int], rows: np.ndarray,
                begins: np.ndarray, lanes: np.ndarray, lane_of: np.ndarray, k: int) -> int:
    stacks: list[list[tuple[int, int]]] = []  # per lane: open slices as (end, row)
    rows_l = order.tolist()
    out_rows: list[int] = []
    out_begin: list[bool] = []
    out_lane: list[int] = []
    for i, row in enumerate(rows_l):
        si, ei = s[i], e[i]
        placed = False
        for lane, stack in enumerate(stacks):
            while stack and stack[-1][0] <= si:
                out_rows.append(stack.pop()[1])
                out_begin.append(False)
                out_lane.append(lane)
            if not stack or ei <= stack[-1][0]:
                stack.append((ei, row))
                placed = True
                break
        if not placed:
            lane = len(stacks)
            stacks.append([(ei, row)])
        out_rows.append(row)
        out_begin.append(True)
        out_lane.append(lane)
    for lane, stack in enumerate(stacks):
        while stack:
            out_rows.append(stack.pop()[1])
            out_begin.append(False)
            out_lane.append(lane)
    m = len(out_rows)
    rows[k:k + m] = out_rows
    begins[k:k + m] = out_begin
    lanes[k:k + m] = out_lane
    return k + m
