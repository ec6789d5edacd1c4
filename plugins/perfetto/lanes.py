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
    rows = np.empty(2 * n, dtype=np.int64)
    begins = np.empty(2 * n, dtype=bool)
    lanes = np.empty(2 * n, dtype=np.int64)
    lane_of = np.zeros(n, dtype=np.int64)
    bounds = np.flatnonzero(np.diff(t)) + 1
    k = 0
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n], strict=True):
        if hi - lo == 0:
            continue
        if np.all(e[lo:hi - 1] <= s[lo + 1:hi]):
            # No overlap at all (typical for a GPU stream): begin, end, begin, end ...
            m = hi - lo
            rows[k:k + 2 * m:2] = order[lo:hi]
            rows[k + 1:k + 2 * m:2] = order[lo:hi]
            begins[k:k + 2 * m:2] = True
            begins[k + 1:k + 2 * m:2] = False
            lanes[k:k + 2 * m] = 0
            k += 2 * m
            continue
        k = _nest_track(order[lo:hi], s[lo:hi].tolist(), e[lo:hi].tolist(), rows, begins,
                        lanes, lane_of, k)
    return rows, begins, lanes


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
