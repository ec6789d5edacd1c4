"""Ranks that run on the CPU only (gloo): per rank its time in collectives and when it
reached each one, the collectives matched across ranks by order (a process group runs its
collectives in the same order on every rank) and the ranks' clocks put on one another's by
the collectives' ends (a collective ends on every rank once the last has arrived)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import Trace
from tracekit.toolkit import (
    COLLECTIVE_RANGE,
    SYNTHETIC_ID_MAX,
    end_offsets,
    match_by_order,
    percent,
    process_ranks,
    report_table,
    starts_with,
    step_ranges,
)
from tracekit.toolkit import intervals as iv

#: The process group's own ranges, one per collective (gloo runs them on worker threads):
#: what is matched across ranks; c10d's calls where a trace has none of them.
GROUP_RANGE = r"^(gloo|nccl|mpi|ucc|xccl):"
C10D_CALL = r"^c10d::"


def cpu_ranks_table(trace: Trace) -> tuple[pa.Table, int] | None:
    """Per process that runs collectives (two or more, no GPU work): rank, pid, span, time in
    collectives (their union) and its share, how often it was the last to reach a matched
    collective and its median lateness, its steps' median; and how many collectives were
    matched. None where fewer than two processes run collectives."""
    ev = trace.events
    host = ev.filter(pc.and_(starts_with(ev["category"], "host."),
                             pc.and_(pc.is_valid(ev["ts_ns"]), pc.is_valid(ev["dur_ns"]))))
    host = host.filter(pc.greater(host["pid"], SYNTHETIC_ID_MAX))
    if not host.num_rows:
        return None
    names = host["name"].cast(pa.string())
    collective = pc.match_substring_regex(names, COLLECTIVE_RANGE).to_numpy(zero_copy_only=False)
    group = pc.match_substring_regex(names, GROUP_RANGE).to_numpy(zero_copy_only=False)
    calls = pc.match_substring_regex(names, C10D_CALL).to_numpy(zero_copy_only=False)
    source = host["source"].cast(pa.string()).to_numpy(zero_copy_only=False)
    pid = host["pid"].to_numpy(zero_copy_only=False)
    start = host["ts_ns"].to_numpy(zero_copy_only=False)
    end = start + host["dur_ns"].to_numpy(zero_copy_only=False)
    rank_of = process_ranks(trace)
    steps = step_ranges(trace)
    rows = []
    for s, p in dict.fromkeys(zip(source[collective].tolist(), pid[collective].tolist(),
                                  strict=True)):
        mine = (source == s) & (pid == p)
        units = mine & (group if (mine & group).any() else calls)
        order = np.argsort(start[units], kind="stable")
        mine_steps = steps.filter(pc.and_(pc.equal(steps["source"], s),
                                          pc.equal(steps["pid"], p)))
        step_ns = (mine_steps["end"].to_numpy() - mine_steps["start"].to_numpy())[1:]
        rows.append({
            "rank": rank_of.get((s, p)), "pid": int(p),
            "span": int(end[mine].max() - start[mine].min()),
            "collectives": iv.total(iv.union(start[mine & collective], end[mine & collective])),
            "starts": start[units][order], "ends": end[units][order],
            "step": int(np.median(step_ns)) if len(step_ns) else None})
    if len(rows) < 2:
        return None
    starts = match_by_order([r["starts"] for r in rows])
    ends = match_by_order([r["ends"] for r in rows])
    matched = starts.shape[1]
    last = np.zeros(len(rows), dtype=np.int64)
    lateness = np.zeros((len(rows), matched), dtype=np.int64)
    if matched:
        aligned = starts + end_offsets(ends)[:, None]
        lateness = aligned - aligned.min(axis=0)
        last = np.bincount(lateness.argmax(axis=0), minlength=len(rows))
    rows.sort(key=lambda r: (r["rank"] is None, r["rank"] if r["rank"] is not None else 0))
    table = report_table([
        ("rank", "int", None, [r["rank"] for r in rows]),
        ("pid", "int", None, [r["pid"] for r in rows]),
        ("span", "int", "ns", [r["span"] for r in rows]),
        ("collectives", "int", "ns", [r["collectives"] for r in rows]),
        ("collectives_pct", "float", "%", [percent(r["collectives"], r["span"]) for r in rows]),
        ("last_at", "int", None, last.tolist()),
        ("median_lateness", "int", "ns",
         [int(np.median(x)) if matched else None for x in lateness]),
        ("median_step", "int", "ns", [r["step"] for r in rows])])
    return table, matched

