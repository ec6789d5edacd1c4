"""Which Perfetto track each event goes on, and the TrackDescriptors of those tracks.

Layout (ARCHITECTURE.md section 5, peers.md (d) rule 4): a process track per host process with
its thread tracks; per device a plain "GPU n: name" track with one child track per stream;
counters on counter tracks under their process or device; extra lanes for overlapping slices.

A run of several inputs (ranks, numbered by ``tracekit.toolkit.input_ranks``) is one process
group per rank: each process is named "name (rank N)", and each GPU ("rank N GPU n: name")
hangs under the process that launched its work, its streams under it; a plain track under a
process track is drawn inside that process's group (peers.md (d) rule 4).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import Trace
from tracekit.plugins.perfetto.wire import encode_message
from tracekit.toolkit import SYNTHETIC_ID_MAX as _SYNTHETIC
from tracekit.toolkit import equals, factorize, input_ranks

THREAD, PROCESS, GLOBAL, STREAM, COUNTER, DEVICE_COUNTER, DEVICE_ANALYSIS, THREAD_STATE = \
    range(8)
_NULL = -(2**62)

# TrackDescriptor / ProcessDescriptor / ThreadDescriptor / CounterDescriptor field numbers.
_UUID, _NAME, _PROCESS, _THREAD, _PARENT, _COUNTER = 1, 2, 3, 4, 5, 8
_CHILD_ORDERING, _SIBLING_RANK = 11, 12
_DESCRIPTION = 14
#: The devices table's properties a GPU track's description carries: (column, label, unit).
#: The devices table's columns a GPU track's description gives: column, label, unit, type
#: (the reader parses them back: ``read_tracks.device_properties``).
DEVICE_PROPERTIES = (("vendor", "vendor", "", str),
                     ("compute_capability", "compute capability", "", str),
                     ("sm_count", "SMs", "", int), ("memory_bytes", "memory", " bytes", int))
_EXPLICIT = 3
_UNIT_SIZE_BYTES = 3
_ROWS = 1 << 17  # rows planned at a time


def stable_uuid(*parts: object) -> int:
    """A nonzero 63-bit id that is the same in every run for the same parts."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "little") & ((1 << 63) - 1)) | 1


@dataclass
class TrackPlan:
    """Per event row its track; per track its uuid; the descriptors to emit first."""

    row_track: np.ndarray
    uuids: list[int]
    #: Per typed column, the rows whose track holds its value (see ``tracekit.fields``).
    native: dict[str, np.ndarray] = field(default_factory=dict)
    descriptors: list[bytes] = field(default_factory=list)
    _keys: list[tuple[int, ...]] = field(default_factory=list)
    _names: list[str] = field(default_factory=list)
    _parents: list[int | None] = field(default_factory=list)
    _ranks: list[int | None] = field(default_factory=list)  # sibling rank, where given

    def lane_uuid(self, track: int, lane: int) -> int:
        """uuid of lane ``lane`` of ``track`` (lane 0 is the track itself); declares lanes."""
        if lane == 0:
            return self.uuids[track]
        uuid = stable_uuid("lane", self._keys[track], lane)
        if uuid not in self._lanes:
            self._lanes.add(uuid)
            # A child of a process or thread track would not nest under it (peers.md (d) 4),
            # so overlap lanes hang off the track's own parent and carry its name.
            parent = self._parents[track]
            rank = self._ranks[track]
            self.descriptors.append(encode_message(
                (_UUID, uuid), (_NAME, f"{self._names[track]} (overlap {lane})"),
                (_PARENT, parent),
                # Right after its track among the device's explicitly ordered streams.
                (_SIBLING_RANK, rank + min(lane, LANE_RANKS - 1) if rank is not None
                 else lane)))
        return uuid

    def __post_init__(self) -> None:
        self._lanes: set[int] = set()

    def forget_rows(self) -> None:
        """Let the per-row arrays go (once the packets are built); the tracks stay."""
        self.row_track = np.zeros(0, dtype=self.row_track.dtype)
        self.native = {}

    @property
    def track_count(self) -> int:
        """Tracks declared: one per key plus the overlap lanes."""
        return len(self.uuids) + len(self._lanes)


def plan_tracks(trace: Trace, events: pa.Table) -> TrackPlan:
    """Assign each row of ``events`` (a filtered view of trace.events) to a track."""
    n = events.num_rows
    source = events["source"].combine_chunks()
    src = source.indices.to_numpy(zero_copy_only=False)
    source_names = source.dictionary.to_pylist()
    del source
    name = events["name"].combine_chunks()
    name_idx = name.indices.to_numpy(zero_copy_only=False)
    counter_names = name.dictionary.to_pylist()
    del name
    # Spans an analyzer derived (convert --annotate) get a track of their own under the
    # device, titled as the analyzer declared (``Analyzer.tracks``, via the pipeline).
    analysis_tracks: dict[str, str] = dict(trace.metadata.get("annotation_tracks", {}))
    analysis_kinds = list(analysis_tracks)
    names = _Names(trace, source_names)
    # Row range by row range, so that no full-length temporaries are held: each range's
    # distinct keys, numbered together at the end (in the order one factorize would give).
    row_code = np.empty(n, dtype=np.int32 if n < 2**31 else np.int64)
    native = {k: np.empty(n, dtype=bool) for k in ("pid", "tid", "device", "stream")}
    parts: list[list[np.ndarray]] = []
    launches: list[tuple[np.ndarray, ...]] = []
    for lo in range(0, max(n, 1), _ROWS):
        hi = min(lo + _ROWS, n)
        rows = events.slice(lo, hi - lo)
        key, launch = _track_keys(rows, src[lo:hi], name_idx[lo:hi], analysis_kinds, names,
                                  {k: v[lo:hi] for k, v in native.items()})
        code, distinct = factorize(*key)
        row_code[lo:hi] = code.reshape(-1) + sum(len(d[0]) for d in parts)
        parts.append(distinct)
        launches.append(launch)
    row_track, key_columns = factorize(*(np.concatenate([d[i] for d in parts])
                                         for i in range(4)))
    row_track = row_track.reshape(-1).astype(row_code.dtype)[row_code]
    del row_code
    unique = np.stack(key_columns, axis=1) if n else np.empty((0, 4), dtype=np.int64)
    launcher = _launchers(*(np.concatenate(c) for c in zip(*launches, strict=True))) \
        if names.run_rank else {}
    plan = TrackPlan(row_track=row_track, uuids=[], native=native)
    declared: set[int] = set()

    def declare(uuid: int, *fields: tuple[int, Any]) -> int:
        if uuid not in declared:
            declared.add(uuid)
            plan.descriptors.append(encode_message((_UUID, uuid), *fields))
        return uuid

    def process_track(s: int, p: int) -> int:
        uuid = stable_uuid("process", s, p)
        if p <= _SYNTHETIC:  # a tool-made pid ("Spans", "Traces"): a plain named group
            return declare(uuid, (_NAME, names.process(s, p)))
        return declare(uuid, (_PROCESS, encode_message((1, names.perfetto_pid(s, p)),
                                                       (6, names.process(s, p)))))

    def device_track(s: int, d: int) -> int:
        owner = launcher.get((s, d))
        parent = process_track(s, owner) if owner is not None else None
        return declare(stable_uuid("device", s, d), (_NAME, names.device(s, d)),
                       (_DESCRIPTION, names.device_description(s, d)),
                       (_PARENT, parent), (_CHILD_ORDERING, _EXPLICIT), (_SIBLING_RANK, d))

    for key in unique.tolist():
        c, s, ka, kb = (int(x) for x in key)
        if c == THREAD:
            parent = process_track(s, ka)
            uuid = stable_uuid("thread", s, ka, kb)
            label = names.thread(s, ka, kb)
            if ka > _SYNTHETIC and kb > _SYNTHETIC:
                declare(uuid, (_THREAD, encode_message((1, names.perfetto_pid(s, ka)), (2, kb),
                                                       (5, label))))
            else:
                declare(uuid, (_NAME, label), (_PARENT, parent))
        elif c == THREAD_STATE:
            # When the OS ran the thread (nsys' scheduling data): intervals that cut across
            # the thread's calls, so a track of their own beside the thread's.
            parent = process_track(s, ka)
            label = f"{names.thread(s, ka, kb)} (scheduled)"
            uuid = declare(stable_uuid("thread state", s, ka, kb), (_NAME, label),
                           (_PARENT, parent))
        elif c == PROCESS:
            parent = None
            uuid = process_track(s, ka)
            label = names.process(s, ka)
        elif c == GLOBAL:
            parent = None
            label = f"{source_names[s]}: no process"
            uuid = declare(stable_uuid("global", s), (_NAME, label))
        elif c == STREAM:
            parent = device_track(s, ka)
            label = f"Stream {kb}" if kb != _NULL else "(no stream)"
            rank = stream_rank(kb)
            uuid = declare(stable_uuid("stream", s, ka, kb), (_NAME, label), (_PARENT, parent),
                           (_SIBLING_RANK, rank))
        elif c == DEVICE_ANALYSIS:
            parent = device_track(s, ka)
            label = analysis_tracks[analysis_kinds[kb]]
            uuid = declare(stable_uuid("analysis", s, ka, kb), (_NAME, label),
                           (_PARENT, parent), (_SIBLING_RANK, -1 - kb))
        else:
            parent = device_track(s, ka) if c == DEVICE_COUNTER else process_track(s, ka)
            label = counter_names[kb]
            unit = (_UNIT_SIZE_BYTES if "memory" in label else None)  # % has no unit enum
            uuid = declare(stable_uuid("counter", c, s, ka, kb), (_NAME, label),
                           (_PARENT, parent), (_COUNTER, encode_message((3, unit))))
        plan.uuids.append(uuid)
        plan._ranks.append(rank if c == STREAM else None)
        plan._keys.append((c, s, ka, kb))
        plan._names.append(label)
        plan._parents.append(parent)
    return plan


#: Sibling ranks per stream: the stream's own and its overlap lanes' after it.
LANE_RANKS = 8
_INT32 = 2**31 - 1


def stream_rank(stream: int) -> int:
    """A stream track's sibling rank under its device: by stream id, with room after it for
    its overlap lanes; ids too large for that (a tool's -1 as 4294967295) keep their order
    among themselves at the end."""
    if stream == _NULL:
        return 0
    if 0 <= stream * LANE_RANKS <= _INT32 - LANE_RANKS:
        return stream * LANE_RANKS
    return _INT32 - LANE_RANKS - 1 if stream > 0 else -LANE_RANKS


def _track_keys(rows: pa.Table, src: np.ndarray, name_idx: np.ndarray,
                analysis_kinds: list[str], names: _Names, native: dict[str, np.ndarray],
                ) -> tuple[list[np.ndarray], tuple[np.ndarray, ...]]:
    """The track key (class, source, a, b) of each of ``rows``; fills ``native`` (where a
    row's track tells its pid, tid, device and stream); the (source, device, pid) of the
    rows that ``_launchers`` counts."""
    pid = _ints(rows["pid"])
    tid = _ints(rows["tid"])
    device = _ints(rows["device"])
    stream = _ints(rows["stream"])
    is_counter = equals(rows["kind"], "counter").to_numpy()
    has_device = device != _NULL
    cls = np.where(has_device, STREAM, np.where(pid == _NULL, GLOBAL,
                                                np.where(tid == _NULL, PROCESS, THREAD)))
    cls = np.where(is_counter, np.where(has_device, DEVICE_COUNTER, COUNTER), cls)
    cls = np.where((cls == THREAD) & equals(rows["category"], "host.sched").to_numpy(),
                   THREAD_STATE, cls)
    kind_of = np.full(len(cls), -1, dtype=np.int64)
    if analysis_kinds:
        kind_of = pc.index_in(rows["category"].cast(pa.string()),
                              pa.array(analysis_kinds, pa.string())) \
            .fill_null(-1).to_numpy(zero_copy_only=False)
        cls = np.where((kind_of >= 0) & has_device & ~is_counter, DEVICE_ANALYSIS, cls)
    on_device = (cls == STREAM) | (cls == DEVICE_COUNTER) | (cls == DEVICE_ANALYSIS)
    a = np.select([on_device, cls == GLOBAL], [device, 0], pid)
    b = np.select([cls == STREAM, (cls == THREAD) | (cls == THREAD_STATE),
                   (cls == COUNTER) | (cls == DEVICE_COUNTER), cls == DEVICE_ANALYSIS],
                  [stream, tid, name_idx, kind_of], 0)
    # Where a row's track tells its pid, tid, device and stream as they are: a process or
    # thread track with the real ids (not a synthetic id shown by name, nor a pid moved
    # apart because two inputs share it), a device track, a stream track.
    on_host = (cls == THREAD) | (cls == PROCESS) | (cls == COUNTER)
    real_pid = on_host & (pid > _SYNTHETIC)
    if names.clash:
        real_pid &= ~np.isin(pid, np.array(sorted(names.clash), dtype=np.int64))
    native["pid"][:] = real_pid
    native["tid"][:] = real_pid & (cls == THREAD) & (tid > _SYNTHETIC)
    native["device"][:] = on_device
    native["stream"][:] = cls == STREAM
    launch = has_device & (pid > _SYNTHETIC)
    return [cls.astype(np.int8), src, a, b], (src[launch], device[launch], pid[launch])


def _launchers(src: np.ndarray, device: np.ndarray,
               pid: np.ndarray) -> dict[tuple[int, int], int]:
    """Per (source, device): the real process that launched most of its rows (device rows
    carry their launcher's pid), the process whose group the GPU is drawn in; given the
    source, device and pid of the device rows with a real pid."""
    if not len(src):
        return {}
    key, (s, d, p) = factorize(src.astype(np.int64), device, pid)
    counts = np.bincount(key.reshape(-1), minlength=len(s))
    # Most rows first, then the lowest pid: the first of each (source, device) wins.
    order = np.lexsort((p, -counts, d, s))
    first = np.r_[True, (s[order][1:] != s[order][:-1]) | (d[order][1:] != d[order][:-1])]
    won = order[first]
    return {(int(a), int(b)): int(c) for a, b, c in zip(s[won], d[won], p[won], strict=True)}


def _ints(col: pa.ChunkedArray) -> np.ndarray:
    return col.cast(pa.int64()).fill_null(_NULL).to_numpy()


class _Names:
    """Display names of processes, threads and devices, from the trace's side tables."""

    def __init__(self, trace: Trace, sources: list[str]) -> None:
        self.sources = sources
        self.proc = {(r["source"], r["pid"]): r for r in trace.processes.to_pylist()}
        self.threads = {(r["source"], r["pid"], r["tid"]): r["name"]
                        for r in trace.threads.to_pylist()}
        self.devices = {(r["source"], r["device"]): r for r in trace.devices.to_pylist()}
        self.ranks = {r["source"]: r["rank"] for r in trace.processes.to_pylist()
                      if r["rank"] is not None}
        #: In a run of several inputs, each input's rank.
        self.run_rank = {r.source: r.rank for r in input_ranks(trace)} \
            if len(trace.sources) > 1 else {}
        #: What ``align_collectives`` added to each input's times (named with its process).
        self.shifts = {name: meta.get("alignment_offset_ns") for name, meta in
                       trace.metadata.get("sources", {}).items() if isinstance(meta, dict)}
        owners: dict[int, set[str]] = {}
        for src, p in self.proc:
            owners.setdefault(p, set()).add(src)
        self.clash = {p for p, s in owners.items() if len(s) > 1}

    def perfetto_pid(self, s: int, pid: int) -> int:
        # The same pid in two inputs (two hosts) must stay two processes in Perfetto.
        return pid if pid not in self.clash else (s + 1) * 10_000_000 + pid % 10_000_000

    def process(self, s: int, pid: int) -> str:
        row = self.proc.get((self.sources[s], pid), {})
        name = row.get("name") or (f"process {pid}" if pid > _SYNTHETIC else "(unnamed)")
        rank = row.get("rank")
        if rank is None:
            rank = self.run_rank.get(self.sources[s])
        if rank is not None:
            shift = self.shifts.get(self.sources[s])
            name = f"{name} (rank {rank}" + (f", times {shift:+,} ns to align)" if shift
                                             else ")")
        return name

    def thread(self, s: int, pid: int, tid: int) -> str:
        return self.threads.get((self.sources[s], pid, tid)) or f"thread {tid}"

    def device_description(self, s: int, d: int) -> str | None:
        """The device's properties as the GPU track's description (shown by the UI, read
        back by tracekit's Perfetto reader): ``vendor: nvidia; compute capability: 7.0;
        SMs: 80; memory: 34084028416 bytes``."""
        row = self.devices.get((self.sources[s], d), {})
        parts = [f"{label}: {row[key]}{unit}" for key, label, unit, _ in DEVICE_PROPERTIES
                 if row.get(key) is not None]
        return "; ".join(parts) or None

    def device(self, s: int, d: int) -> str:
        row = self.devices.get((self.sources[s], d), {})
        label = f"GPU {d}" + (f": {row['name']}" if row.get("name") else "")
        rank = self.run_rank.get(self.sources[s], self.ranks.get(self.sources[s]))
        if rank is not None:
            label = f"rank {rank} {label}"
        elif len(self.sources) > 1:
            label = f"{self.sources[s]} {label}"
        return label
