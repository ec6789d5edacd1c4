"""The runs in one rocprof input: which files record the same run, which run is read, and
records repeated across files of one run.

A folder can hold files of several runs (outputs gathered from different processes, or
from different boots: their clocks are unrelated). Read as one, their time span is the
distance between the runs. The rule (docs/formats/rocprof.md, "One run at a time"):

- Two timed files are one run when they name a common process and their time ranges lie
  within ``TOLERANCE_NS`` of each other, or when both name processes and their time ranges
  overlap (the processes of one multi-process job run at the same time).
- A timed file that names no process (a kernel or copy trace without a pid in its name)
  joins the nearest run within ``TOLERANCE_NS`` whose calls agree with its correlation ids;
  the files left over form runs among themselves by the same tolerance.
- An untimed file (stats, agents, counters) joins the run of the process it names, else
  the run that is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import TraceBuilder, TraceReadError

# Within one run the files of each domain overlap (API calls enclose the work they launch);
# a second is less than the exit of one ROCm process and the start of the next, which
# separate two runs one after the other.
TOLERANCE_NS = 1_000_000_000
# Calls that launch device work: where a run has them, a device record's correlation id
# names one of the run's calls.
_LAUNCHES = r"(?i)launch|memcpy|memset"
# Columns that together identify a record: a row equal in all of them to a row of another
# file of the same kind in the same run is the same record written twice.
_RECORD_KEY = ("category", "name", "ts_ns", "dur_ns", "device", "stream", "pid", "tid",
               "correlation", "copy_kind", "bytes")


@dataclass
class Member:
    """One file of the input: where it is, its time range and the processes it names."""

    index: int
    path: Path
    kind: str
    start: int | None
    end: int | None
    pids: frozenset[int]
    gpu_spans: np.ndarray = field(default_factory=lambda: np.empty((0, 2), np.int64))
    correlation: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    api_ids: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    launches: bool = False

    @property
    def timed(self) -> bool:
        """Whether the file places the run in time; counters are placed by process only
        (they repeat their kernel trace's dispatches, or are a pass of their own)."""
        return self.start is not None and self.kind != "v3_counters"


@dataclass
class Run:
    """Files that record one run, with its processes and time range."""

    members: list[Member]

    @property
    def pids(self) -> frozenset[int]:
        return frozenset().union(*(m.pids for m in self.members))

    @property
    def start(self) -> int | None:
        return min((m.start for m in self.members if m.timed), default=None)

    @property
    def end(self) -> int | None:
        return max((m.end for m in self.members if m.timed), default=None)

    @property
    def gpu_rows(self) -> int:
        """Timed GPU records, each once: records repeated in two files of one kind (see
        ``drop_repeats``) count once, by their start and end."""
        total = 0
        for kind in {m.kind for m in self.members}:
            spans = [m.gpu_spans for m in self.members if m.kind == kind]
            total += len(spans[0]) if len(spans) == 1 else \
                len(np.unique(np.concatenate(spans), axis=0))
        return total

    def describe(self) -> str:
        """``3 files, process 238`` for messages."""
        names = [m.path.name for m in self.members]
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return f"{shown} ({_processes(self.pids)})"


def member(index: int, path: Path, kind: str, columns: dict[str, Any] | None,
           file_pid: int | None) -> Member:
    """A file as the run rule sees it, from its event columns (None: a file with none)."""
    pids = {file_pid} if file_pid is not None else set()
    if columns is None or not len(columns.get("category", [])):
        return Member(index, path, kind, None, None, frozenset(pids))
    if columns.get("pid") is not None:
        pids |= {p for p in pc.unique(pa.array(columns["pid"], pa.int64())).to_pylist()
                 if p is not None}
    ts = pa.array(columns["ts_ns"], pa.int64())
    dur = pa.array(columns["dur_ns"], pa.int64()) if columns.get("dur_ns") is not None else \
        pa.nulls(len(ts), pa.int64())
    # A negative duration (damage the reader warns of) does not move the range.
    end = pc.add(ts, pc.max_element_wise(pc.fill_null(dur, 0), 0))
    first, last = pc.min(ts).as_py(), pc.max(end).as_py()
    category = pa.array(columns["category"], pa.string())
    gpu = pc.and_(pc.starts_with(category, "gpu."), pc.is_valid(ts))
    m = Member(index, path, kind, first, last, frozenset(pids), gpu_spans=np.column_stack([
        pc.filter(ts, gpu).to_numpy(zero_copy_only=False),
        pc.filter(end, gpu).to_numpy(zero_copy_only=False)]).astype(np.int64))
    if columns.get("correlation") is not None:
        corr = pa.array(columns["correlation"], pa.int64())
        known = pc.fill_null(pc.greater(corr, 0), False)  # 0 means none
        api = pc.and_(known, pc.fill_null(pc.starts_with(category, "api."), False))
        m.api_ids = np.unique(pc.filter(corr, api).to_numpy(zero_copy_only=False))
        m.correlation = np.unique(pc.filter(corr, pc.and_(known, gpu))
                                  .to_numpy(zero_copy_only=False))
        names = pa.array(columns["name"]).cast(pa.string()) \
            if columns.get("name") is not None else None
        m.launches = bool(names is not None and pc.any(pc.and_(api, pc.fill_null(
            pc.match_substring_regex(names, _LAUNCHES), False))).as_py())
    return m


def gap(a_start: int, a_end: int, b_start: int, b_end: int) -> int:
    """Nanoseconds between two time ranges; zero or less where they overlap."""
    return max(a_start, b_start) - min(a_end, b_end)


def group(members: list[Member]) -> list[Run]:
    """The runs of the timed files, earliest first (see the module's rule)."""
    timed = [m for m in members if m.timed]
    parent = list(range(len(timed)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def link_near(indexes: list[int], tolerance: int) -> None:
        """Join each file to an earlier one within ``tolerance`` of it, if any: in start
        order, the file reaching furthest so far is the nearest (a sweep, not all pairs)."""
        reach, furthest = None, -1
        for i in sorted(indexes, key=lambda i: timed[i].start):
            if reach is not None and timed[i].start - reach <= tolerance:
                parent[root(i)] = root(furthest)
            if reach is None or timed[i].end > reach:
                reach, furthest = timed[i].end, i

    named = [i for i, m in enumerate(timed) if m.pids]
    link_near(named, 0)  # processes at the same time: one job
    by_pid: dict[int, list[int]] = {}
    for i in named:
        for pid in timed[i].pids:
            by_pid.setdefault(pid, []).append(i)
    for same in by_pid.values():
        link_near(same, TOLERANCE_NS)
    runs: dict[int, list[Member]] = {}
    for i in named:
        runs.setdefault(root(i), []).append(timed[i])
    placed = [(key, Run(v)) for key, v in runs.items()]
    hulls = [(key, run.start, run.end, _api_ids(run), any(m.launches for m in run.members))
             for key, run in placed]
    left = []
    for i, m in enumerate(timed):
        if m.pids:
            continue
        best = None
        for key, start, end, ids, launches in hulls:
            apart = gap(m.start, m.end, start, end)
            matches = int(np.isin(m.correlation, ids).sum())
            agrees = not len(m.correlation) or not launches or matches > 0
            if apart <= TOLERANCE_NS and agrees:
                rank = (max(apart, 0), -matches)
                if best is None or rank < best[0]:
                    best = (rank, key)
        if best is None:
            left.append(i)
        else:
            runs[best[1]].append(m)
    link_near(left, TOLERANCE_NS)
    for i in left:
        runs.setdefault(root(i), []).append(timed[i])
    out = [Run(sorted(v, key=lambda m: m.index)) for v in runs.values()]
    return sorted(out, key=lambda r: (r.start, r.members[0].index))


def _api_ids(run: Run) -> np.ndarray:
    found = [m.api_ids for m in run.members if len(m.api_ids)]
    return np.unique(np.concatenate(found)) if found else np.empty(0, np.int64)


def _agrees(m: Member, run: Run) -> bool:
    """Whether a device file's correlation ids fit a run: where the run has launching
    calls and the file has ids, at least one id is a call of the run."""
    if not len(m.correlation) or not any(r.launches for r in run.members):
        return True
    return bool(np.isin(m.correlation, _api_ids(run)).any())


def choose(runs: list[Run], members: list[Member], wanted: str, named: Path | None,
           source: Path) -> Run | None:
    """The run to read: the one ``wanted`` names (a file name, a path under the folder, or
    a process id), else the one holding the file the user named, else the one with the most
    GPU records, ties by the most files, then the earliest. None for ``all``."""
    if wanted == "all":
        return None
    if wanted:
        for run in runs:
            if any(wanted in (m.path.name, _relative(m.path, source)) for m in run.members):
                return run
        if wanted.isdigit():
            for run in runs:
                if int(wanted) in run.pids:
                    return run
        untimed = [m.path.name for m in members if not m.timed and (
            wanted in (m.path.name, _relative(m.path, source))
            or (wanted.isdigit() and int(wanted) in m.pids))]
        listed = "; ".join(r.describe() for r in runs)
        what = (f"{wanted} has no timed records (only in {', '.join(untimed[:3])}): name a "
                "trace file or the process of one" if untimed else
                f"{wanted} names no trace file or process here")
        raise TraceReadError(f"-O run={wanted}: {what}; the runs: {listed}", path=source)
    if named is not None:
        for run in runs:
            if any(m.path == named for m in run.members):
                return run
    return max(runs, key=lambda r: (r.gpu_rows, len(r.members), -r.start))


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return path.name


def _processes(pids: frozenset[int]) -> str:
    if not pids:
        return "no process named"
    shown = sorted(pids)
    word = "process" if len(shown) == 1 else "processes"
    return f"{word} " + ", ".join(map(str, shown[:4])) + (" ..." if len(shown) > 4 else "")


def _seconds(ns: int) -> str:
    s = ns / 1e9
    text = f"{s:,.0f} s" if s >= 10 else f"{s:.3g} s"
    return text + (f" ({s / 86400:,.0f} days)" if s >= 2 * 86400 else "")


def why_apart(m: Member, run: Run) -> str:
    """Why file ``m`` is not of the run read: its process, and how far apart on the clock."""
    parts = []
    if m.pids and run.pids and not m.pids & run.pids:
        parts.append(f"{_processes(m.pids)}, not {_processes(run.pids).split(' ', 1)[1]}")
    elif m.pids and m.pids & run.pids:
        parts.append(f"{_processes(m.pids)} again")
    elif m.pids:
        parts.append(_processes(m.pids))
    if not m.timed:
        parts.append("no timestamps")
    elif run.start is None:
        pass
    else:
        apart = gap(m.start, m.end, run.start, run.end)
        if apart > 0:
            side = "before" if m.end < run.start else "after"
            parts.append(f"{_seconds(apart)} {side} the run read")
        elif not _agrees(m, run):
            parts.append("at the same time, but none of its correlation ids is a call of the "
                         "run read")
        else:
            parts.append("within the run read's time, on another process")
    return "; ".join(parts)


def select(members: list[Member], wanted: str, named: Path | None, source: Path,
           out: TraceBuilder) -> tuple[set[int], list[Run]]:
    """The indexes (``Member.index``) of the files to read, and the runs found; where there
    are several, a warning under the input's name says which is read and why. The caller
    counts each file left out (see ``skip_reason``)."""
    runs = group(members)
    if len(runs) <= 1 and wanted in ("", "all"):
        return {m.index for m in members}, runs
    chosen = choose(runs, members, wanted, named, source) if runs else None
    if chosen is None:
        if len(runs) > 1:
            out.note(source.name, f"warning: read as one though the files hold {len(runs)} "
                     "runs (-O run=all)", len(runs))
        return {m.index for m in members}, runs
    keep = {m.index for m in chosen.members}
    kernels = any(m.kind == "v3_kernel" for m in chosen.members)
    for m in members:
        if not m.timed and _joins(m, chosen, runs, kernels):
            keep.add(m.index)
    if len(runs) > 1:
        why = ("the one -O run names" if wanted else f"the run of {named.name}"
               if named is not None and any(m.path == named for m in chosen.members)
               else "the one with the most GPU records")
        out.note(source.name, f"warning: the files hold {len(runs)} runs (other processes or "
                 f"clocks): read {chosen.describe()}, {why}; -O run=<file or process id> "
                 "reads another", len(runs))
    return keep, runs


def _joins(m: Member, chosen: Run, runs: list[Run], kernels: bool) -> bool:
    """Whether an untimed file goes with the run read: it names one of the run's processes,
    or no process of any run found and (stats, agents) no process at all or the run names
    none. Counters of no run's process go only with a run that has a kernel trace, whose
    counter rule attaches them to the same dispatches or counts them as another pass:
    elsewhere they would be kernels of their own."""
    if m.pids & chosen.pids:
        return True
    if any(m.pids & r.pids for r in runs):
        return False
    if m.kind == "v3_counters":
        return kernels
    return not m.pids or not chosen.pids


def skip_reason(m: Member, runs: list[Run], keep: set[int]) -> str:
    """The skipped note for a file of another run."""
    chosen = next(r for r in runs if any(x.index in keep for x in r.members))
    if any(m in r.members for r in runs):
        hint = f"-O run={m.path.name} reads it"
    else:
        owner = next((r for r in runs if m.pids & r.pids), None)
        hint = (f"-O run={owner.members[0].path.name} reads it" if owner else
                "its process has no timed file here: read it on its own")
    return f"skipped: another run ({why_apart(m, chosen)}); {hint}"


def drop_repeats(parts: list[tuple[Any, dict[str, Any]]], out: TraceBuilder) -> None:
    """Rows equal in every ``_RECORD_KEY`` column to a row of an earlier file of the same
    kind (the same record written twice, as by two format versions of one file) are left
    out of the later file and counted; repeats inside one file are kept (rocprof writes
    each record once per file)."""
    by_kind: dict[str, list[tuple[Any, dict[str, Any]]]] = {}
    for f, c in parts:
        by_kind.setdefault(f.kind, []).append((f, c))
    for group_ in by_kind.values():
        if len(group_) < 2:
            continue
        seen: list[tuple[Any, pa.Table]] = []
        for f, c in group_:
            keys = _key_table(c)
            if keys is None:
                continue
            rows = keys.append_column("_row", pa.array(np.arange(keys.num_rows, dtype=np.int64)))
            repeated = np.zeros(keys.num_rows, bool)
            first_seen = None
            for earlier, table in seen:
                if table.schema.names != keys.schema.names:
                    continue
                hit = rows.join(table, keys=keys.column_names, join_type="left semi",
                                use_threads=False)["_row"]
                hit_rows = hit.to_numpy()
                if len(hit_rows) and not repeated[hit_rows].all():
                    first_seen = first_seen or earlier
                repeated[hit_rows] = True
            seen.append((f, keys))
            if n := int(repeated.sum()):
                mask = pa.array(~repeated)
                for name, values in c.items():
                    if values is not None:
                        c[name] = pa.array(values).filter(mask)
                out.note(f.path.name, "skipped: the same records as in "
                         f"{first_seen.path.name} (read once)", n)


def _key_table(c: dict[str, Any]) -> pa.Table | None:
    """The record-identity columns of one file, nulls replaced by a value no cell has so
    that null matches null in a join."""
    n = len(c.get("category", []))
    if not n:
        return None
    columns = {}
    for name in _RECORD_KEY:
        values = c.get(name)
        if values is None:
            continue
        arr = pa.array(values) if not isinstance(values, pa.Array | pa.ChunkedArray) else values
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if pa.types.is_dictionary(arr.type):
            arr = arr.cast(pa.string())
        if pa.types.is_integer(arr.type):
            arr = pc.fill_null(arr.cast(pa.int64()), np.iinfo(np.int64).min)
        else:
            arr = pc.fill_null(arr.cast(pa.string()), "\0")
        columns[name] = arr
    return pa.table(columns)
