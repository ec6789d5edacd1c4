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
    return nest_sorted(*sort_slices(track, start, end))[:3]


def sort_slices(track: np.ndarray, start: np.ndarray, end: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The slices by track, start, then longest first: their rows, and their tracks,
    starts and ends in that order (what ``nest_sorted`` takes; the inputs may go)."""
    order = _by_track_and_start(track, start, end)
    if len(order) < 2**31:
        order = order.astype(np.int32)
    return order, track[order], start[order], end[order]


def nest_sorted(order: np.ndarray, t: np.ndarray, s: np.ndarray, e: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``nest_slices`` of the slices ``sort_slices`` sorted, with each event's time."""
    n = len(order)
    ranks, begins = _nested_order(t, s, e)
    time = e[ranks]
    at = np.flatnonzero(begins)
    time[at] = s[ranks[at]]
    del at
    # Tracks whose slices do not all nest go through the replay, lane by lane, where needed.
    bad = _not_nested(t, ranks, begins, time)
    rows = order[ranks]
    lanes = np.zeros(2 * n, dtype=np.int32)
    if bad.any():
        bounds = np.flatnonzero(np.diff(t)) + 1
        lo = np.r_[0, bounds]
        hi = np.r_[bounds, n]
        position = np.empty(n, dtype=order.dtype)  # of each row in the sorted slices
        position[order] = np.arange(n, dtype=order.dtype)
        for k in np.flatnonzero(bad).tolist():
            a, b = int(lo[k]), int(hi[k])
            _nest_overlapping(order, s, e, a, b, ranks, rows, begins, lanes)
            at = position[rows[2 * a:2 * b]]
            time[2 * a:2 * b] = np.where(begins[2 * a:2 * b], s[at], e[at])
    return rows, begins, lanes, time


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
            bits: int = 0, out: np.ndarray | None = None) -> np.ndarray | None:
    """``(track, time)`` as one int64 that sorts as the pair (``time`` within
    ``[low, high]``), shifted left by ``bits``; None where that would not fit. With ``out``
    (int64, of their length), written there."""
    span = high - low + 1
    tracks = int(track.max()) + 1 if len(track) else 1
    if int(track.min(initial=0)) < 0 or tracks * span >= 2**62 >> bits:
        return None
    # In place, without temporaries: int64 arithmetic wraps, and the result fits.
    key = np.empty(len(track), dtype=np.int64) if out is None else out
    key[:] = track
    key *= span
    key += time
    key -= low
    key <<= bits
    return key


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
    index = np.int32 if 2 * n < 2**31 else np.int64
    # The first slice of the same track starting at or after each end: sort the ends in
    # among the starts (an end before a start at the same time).
    key = None
    if n:
        key = np.empty(2 * n, dtype=np.int64)
        if _packed(t, s, int(s.min()), int(e.max()), 1, key[:n]) is not None:
            _packed(t, e, int(s.min()), int(e.max()), 1, key[n:])
            key[:n] |= 1
        else:
            key = None
    if key is not None:
        both = np.argsort(key, kind="stable")
        del key
    else:
        late = np.r_[np.ones(n, dtype=np.int8), np.zeros(n, dtype=np.int8)]
        both = np.lexsort((late, np.r_[s, e], np.r_[t, t]))
    is_start = both < n
    starts_before = np.cumsum(is_start, dtype=index)
    starts_before -= is_start
    is_end = ~is_start
    del is_start
    follow = np.empty(n, dtype=np.int64)
    ends = both[is_end]
    ends -= n
    follow[ends] = starts_before[is_end]
    del both, is_end, starts_before, ends
    np.maximum(follow, np.arange(1, n + 1), out=follow)
    # Sort key: the position of the BEGIN it precedes (x2, END first), then inner first.
    # The keys are distinct, so any sort gives the one order.
    key = np.empty(2 * n, dtype=np.int64)
    begin_key, end_key = key[:n], key[n:]
    begin_key[:] = np.arange(1, 2 * n + 1, 2)
    begin_key *= n + 1
    np.multiply(follow, 2 * (n + 1), out=end_key)
    del follow
    end_key += np.arange(n, 0, -1)
    events = np.argsort(key, kind="stable")  # runs in order already: timsort is fast
    del key, begin_key, end_key
    begins = events < n
    np.remainder(events, n if n else 1, out=events)
    return events.astype(index), begins


def _not_nested(t: np.ndarray, ranks: np.ndarray, begins: np.ndarray,
                time: np.ndarray) -> np.ndarray:
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
    decrease = np.flatnonzero(time[1:] < time[:-1])
    same = track_of[ranks[decrease]] == track_of[ranks[decrease + 1]]
    bad[track_of[ranks[decrease[same]]]] = True
    depth = begins.astype(np.int32)
    depth *= 2
    depth -= 1
    np.cumsum(depth, out=depth)
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
