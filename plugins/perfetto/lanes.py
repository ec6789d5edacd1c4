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
    order = _by_track_and_start(track, start, end)
    t, s, e = track[order], start[order], end[order]
    n = len(order)
    ranks, begins = _nested_order(t, s, e)
    rows = order[ranks]
    lanes = np.zeros(2 * n, dtype=np.int64)
    # Tracks whose slices do not all nest go through the replay, lane by lane, where needed.
    bad = _not_nested(t, s, e, ranks, begins)
    if bad.any():
        bounds = np.flatnonzero(np.diff(t)) + 1
        lo = np.r_[0, bounds]
        hi = np.r_[bounds, n]
        for k in np.flatnonzero(bad).tolist():
            _nest_overlapping(order, s, e, int(lo[k]), int(hi[k]), ranks, rows, begins, lanes)
    return rows, begins, lanes


def _nest_overlapping(order: np.ndarray, s: np.ndarray, e: np.ndarray, a: int, b: int,
                      ranks: np.ndarray, rows: np.ndarray, begins: np.ndarray,
                      lanes: np.ndarray) -> None:
    """The events of the track of sorted slices ``a:b``, which do not all nest, as
    ``_nest_track`` replays them: replayed only in the runs of overlapping slices that need
    it, taken from the nested order elsewhere.

    A slice that starts when every earlier one has ended begins a run: the replay's first
    lane is empty there, so a run whose slices nest comes out as in the nested order. The
    replay's other lanes are kept from one replayed run to the next: it closes their slices
    only when a later slice looks at that lane, or at the track's end.
    """
    ss, ee = s[a:b], e[a:b]
    m = b - a
    opens = np.ones(m, dtype=bool)
    opens[1:] = ss[1:] >= np.maximum.accumulate(ee)[:-1]
    run = np.cumsum(opens) - 1
    first = np.flatnonzero(opens)
    last = np.r_[first[1:], m]
    # The nested order's events of this track, two per slice, run after run.
    event = ranks[2 * a:2 * b] - a
    begin = begins[2 * a:2 * b]
    bad = np.zeros(len(first), dtype=bool)
    time = np.where(begin, ss[event], ee[event])
    bad[run[event[np.flatnonzero(time[1:] < time[:-1])]]] = True
    depth = np.cumsum(np.where(begin, 1, -1).astype(np.int32), dtype=np.int32)
    depth += ~begin  # an END's depth is the one before it
    level = np.empty((2, m), dtype=np.int32)
    level[begin.view(np.uint8), event] = depth
    bad[run[level[0] != level[1]]] = True
    nested = (rows[2 * a:2 * b].copy(), begins[2 * a:2 * b].copy(), lanes[2 * a:2 * b].copy())
    stacks: list[list[tuple[int, int]]] = []
    k, done = 2 * a, 0
    for r in np.flatnonzero(bad).tolist():
        lo, hi = int(first[r]), int(last[r])
        for out, src in zip((rows, begins, lanes), nested, strict=True):
            out[k:k + 2 * lo - done] = src[done:2 * lo]
        k += 2 * lo - done
        k = _replay(order[a + lo:a + hi], ss[lo:hi].tolist(), ee[lo:hi].tolist(), rows, begins,
                    lanes, k, stacks)
        done = 2 * hi
    for out, src in zip((rows, begins, lanes), nested, strict=True):
        out[k:k + 2 * m - done] = src[done:]
    _close(stacks, 1, rows, begins, lanes, k + 2 * m - done)


def _packed(track: np.ndarray, time: np.ndarray, low: int, high: int,
            bits: int = 0) -> np.ndarray | None:
    """``(track, time)`` as one int64 that sorts as the pair (``time`` within
    ``[low, high]``), shifted left by ``bits``; None where that would not fit."""
    span = high - low + 1
    tracks = int(track.max()) + 1 if len(track) else 1
    if int(track.min(initial=0)) < 0 or tracks * span >= 2**62 >> bits:
        return None
    return (track.astype(np.int64) * span + (time - low)) << bits


def _by_track_and_start(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The slices by track, start, then longest first (ties in input order): the order of
    ``np.lexsort((start - end, start, track))``."""
    if not len(track):
        return np.zeros(0, dtype=np.int64)
    key = _packed(track, start, int(start.min()), int(start.max()))
    if key is None:
        return np.lexsort((start - end, start, track))
    # Mostly in time order already: a stable sort (timsort) of one key is fast there.
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    tied = np.flatnonzero(sorted_key[1:] == sorted_key[:-1])
    if len(tied):  # equal track and start: the longest first
        at = np.zeros(len(order), dtype=bool)
        at[tied] = at[tied + 1] = True
        at = np.flatnonzero(at)
        sub = order[at]
        order[at] = sub[np.lexsort((start[sub] - end[sub], sorted_key[at]))]
    return order


def _nested_order(t: np.ndarray, s: np.ndarray, e: np.ndarray,
                  ) -> tuple[np.ndarray, np.ndarray]:
    """BEGIN and END events (positions in the sorted slices) in the order the replay gives
    when every track's slices nest: a slice ends just before the first later slice of its
    track that starts at or after its end begins (or at the track's end), innermost first."""
    n = len(t)
    # The first slice of the same track starting at or after each end: sort the ends in
    # among the starts (an end before a start at the same time).
    late = np.r_[np.ones(n, dtype=np.int8), np.zeros(n, dtype=np.int8)]
    key = _packed(np.r_[t, t], np.r_[s, e], int(s.min()), int(e.max()), 1) if n else None
    both = np.argsort(key | late, kind="stable") if key is not None else \
        np.lexsort((late, np.r_[s, e], np.r_[t, t]))
    is_start = both < n
    starts_before = np.cumsum(is_start) - is_start
    follow = np.empty(n, dtype=np.int64)
    follow[both[~is_start] - n] = starts_before[~is_start]
    del both, is_start, starts_before
    np.maximum(follow, np.arange(1, n + 1), out=follow)
    # Sort key: the position of the BEGIN it precedes (x2, END first), then inner first.
    # The keys are distinct, so any sort gives the one order.
    rank = np.arange(n, dtype=np.int64)
    key = np.r_[(rank * 2 + 1) * (n + 1), (follow * 2) * (n + 1) + (n - rank)]
    del follow, rank
    events = np.argsort(key, kind="stable")  # runs in order already: timsort is fast
    return events % n, events < n


def _not_nested(t: np.ndarray, s: np.ndarray, e: np.ndarray, ranks: np.ndarray,
                begins: np.ndarray) -> np.ndarray:
    """Per track (in sorted order): whether the events of ``_nested_order`` are wrong for it
    (its slices overlap without nesting): their times decrease somewhere, or some END does
    not close the slice opened last.

    Each END follows its BEGIN here, so the events nest properly exactly when every slice's
    BEGIN and END are at one depth: at the first END that closed another slice, that slice
    would sit above its own, deeper. (Each track's events are balanced, so the depth is back
    to 0 where the next track's begin.)
    """
    n = len(t)
    if not n:
        return np.zeros(0, dtype=bool)
    starts = np.zeros(n, dtype=np.int32)
    starts[np.flatnonzero(t[1:] != t[:-1]) + 1] = 1
    track_of = np.cumsum(starts, dtype=np.int32)
    bad = np.zeros(int(track_of[-1]) + 1, dtype=bool)
    time = np.where(begins, s[ranks], e[ranks])
    decrease = np.flatnonzero(time[1:] < time[:-1])
    del time
    same = track_of[ranks[decrease]] == track_of[ranks[decrease + 1]]
    bad[track_of[ranks[decrease[same]]]] = True
    depth = np.cumsum(np.where(begins, 1, -1).astype(np.int32), dtype=np.int32)
    depth += ~begins  # an END's depth is the one before it
    level = np.empty((2, n), dtype=np.int32)
    level[begins.view(np.uint8), ranks] = depth
    bad[track_of[level[0] != level[1]]] = True
    return bad


def _nest_track(order: np.ndarray, s: list[int], e: list[int], rows: np.ndarray,
                begins: np.ndarray, lanes: np.ndarray, lane_of: np.ndarray, k: int) -> int:
    stacks: list[list[tuple[int, int]]] = []  # per lane: open slices as (end, row)
    k = _replay(order, s, e, rows, begins, lanes, k, stacks)
    return _close(stacks, 1, rows, begins, lanes, k)


def _replay(order: np.ndarray, s: list[int], e: list[int], rows: np.ndarray,
            begins: np.ndarray, lanes: np.ndarray, k: int,
            stacks: list[list[tuple[int, int]]]) -> int:
    """Place slices (sorted) on the first lane where they nest, writing events from ``k``;
    the first lane's slices are closed at the end, the other lanes' stay open in
    ``stacks``. Returns where the events end."""
    out_rows: list[int] = []
    out_begin: list[bool] = []
    out_lane: list[int] = []
    for i, row in enumerate(order.tolist()):
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
    m = len(out_rows)
    rows[k:k + m] = out_rows
    begins[k:k + m] = out_begin
    lanes[k:k + m] = out_lane
    return _close(stacks[:1], 0, rows, begins, lanes, k + m)


def _close(stacks: list[list[tuple[int, int]]], first: int, rows: np.ndarray,
           begins: np.ndarray, lanes: np.ndarray, k: int) -> int:
    """End the open slices of lanes ``first`` on, lane by lane, innermost first."""
    for lane in range(first, len(stacks)):
        stack = stacks[lane]
        while stack:
            rows[k] = stack.pop()[1]
            begins[k] = False
            lanes[k] = lane
            k += 1
    return k
