"""Writer for Chrome trace JSON (``.json``, ``.json.gz``), the format chrome://tracing,
Perfetto, and the PyTorch profiler's own tools open.

The output is what the PyTorch profiler (Kineto) writes, so that HTA, TensorBoard and
tracekit's kineto reader read it like a torch trace: Kineto's categories and its names for
copies, memsets and syncs; GPU work on pid = device and tid = stream with ``args.device`` and
``args.stream`` (not on ``gpu_user_annotation``, which HTA would count as GPU work); kernel
launch geometry as ``grid``, ``block``, ``registers per thread``, ``shared memory``;
``ac2g`` flows from launches to device work and ``fwdbwd`` flows for ``flow_id``;
``deviceProperties`` and ``distributedInfo``; timestamps as µs text relative to
``baseTimeNanoseconds``, exact to the ns. Typed columns Kineto has no field for go into
``args`` by the rule of ``tracekit.toolkit.fields``.

A run of several inputs (ranks) written to one ``.json`` is one merged trace, each rank's
processes and GPUs apart (for viewers). ``chrome-json-ranks`` writes a folder with one file per
rank instead, ``rank-N.json``, each with that rank's own ``distributedInfo``,
``deviceProperties`` and base time, as the profiler of that rank would have written it: what HTA
and TraceLens read as one rank each. ``-O align=collectives`` shifts each rank's times so that
their matched collectives end together (``tracekit.toolkit.align_collectives``); the offsets
are in the file's ``tracekit.alignment_offsets_ns``.

Lines are assembled column-wise with Arrow string kernels, a chunk of events at a time; args
are checked, compacted and given their carried keys column-wise too (``json_objects``), only
the odd ones (escapes, deep nesting, invalid JSON) one by one.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import EmptyOutputError, Trace
from tracekit.toolkit import (
    NO_PROGRESS,
    align_collectives,
    check_align,
    factorize,
    fields,
    input_ranks,
    json_objects,
    launch_links,
    rank_traces,
)

# tracekit category -> Kineto cat; others are written as the tracekit category itself, which
# the kineto reader keeps. host.memory is cpu_instant_event only for Kineto's "[memory]".
KINETO_CATEGORY = {
    "gpu.kernel": "kernel", "gpu.memcpy": "gpu_memcpy", "gpu.memset": "gpu_memset",
    "gpu.sync": "cuda_sync", "gpu.annotation": "gpu_user_annotation",
    "api.runtime": "cuda_runtime", "api.driver": "cuda_driver", "host.op": "cpu_op",
    "host.annotation": "user_annotation", "host.python": "python_function",
    "host.profiler": "Trace", "host.overhead": "overhead", "host.instant": "cpu_instant_event",
}
# Device rows the kineto reader places by pid = device and tid = stream.
_DEVICE_CATEGORIES = ("gpu.kernel", "gpu.memcpy", "gpu.memset", "gpu.sync", "gpu.annotation")
# Of those, the ones Kineto writes with args.device and args.stream.
_DEVICE_WORK = ("gpu.kernel", "gpu.memcpy", "gpu.memset", "gpu.sync")
# Sync labels of other tools (nsys) -> Kineto's (CUPTI synchronization types).
_SYNC_NAMES = {"event sync": "Event Sync", "stream wait sync": "Stream Wait Event",
               "stream sync": "Stream Sync", "context sync": "Context Sync",
               "unknown": "Unknown Sync", "unknown sync": "Unknown Sync"}
# How a copy's name reads back (the kineto reader's parse of Kineto's names).
_MEMCPY = re.compile(r"Memcpy\s+(\w+)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.IGNORECASE)
_MEMSET = re.compile(r"Memset\s*\((\w+)\)", re.IGNORECASE)
_COPY_COLUMNS = ("copy_kind", "src_kind", "dst_kind")
_KERNEL_COLUMNS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                   "registers", "shared_mem_bytes")
_SLICE, _INSTANT, _COUNTER = 0, 1, 2
_CHUNK = 50_000
_NULL = pa.scalar(None, pa.string())
# The files of chrome-json-ranks, and how a file of tracekit's ends (its "tracekit" object).
_RANK_FILE = re.compile(r"rank-(\d+)\.json(\.gz)?")
_OURS = b'"tracekit": {"sources": ['


class ChromeJsonWriter(tracekit.Writer):
    """Chrome trace JSON: X, i, C, s/f and M events, as Kineto writes them."""

    name = "chrome-json"
    description = "Chrome trace JSON, Kineto-compatible (chrome://tracing, Perfetto, HTA)"
    extensions = (".json", ".json.gz")
    native_columns = frozenset({
        "kind", "category", "name", "ts_ns", "dur_ns", "pid", "tid", "device", "stream",
        "correlation", "flow_id", "bytes", "value", *_KERNEL_COLUMNS, *_COPY_COLUMNS,
        "source"})
    event_counts = ("X events", "i events", "C events")

    @dataclass(frozen=True)
    class Options:
        args: bool = field(default=True, metadata={"help": "write each event's args"})
        flows: bool = field(default=True, metadata={"help": "write ac2g and fwdbwd flows"})
        align: str = field(default="", metadata={
            "help": "collectives: shift each rank (input) so that matched collectives end "
                    "together"})

        def __post_init__(self) -> None:
            check_align(self.align)

    def write(self, trace: Trace, stream: IO[bytes]) -> tracekit.WriteResult:
        return self.write_rank(_aligned(trace, self.options.align), stream)

    def write_rank(self, trace: Trace, stream: IO[bytes],
                   rank: int | None = None) -> tracekit.WriteResult:
        """Write ``trace`` as it is; ``rank`` is its distributedInfo rank where the trace
        declares none."""
        result = tracekit.WriteResult()
        ev = _writable(trace.events, result)
        if not ev.num_rows:
            raise EmptyOutputError(_nothing_to_write(trace.events, result))
        base = _base_time(trace, int(pc.min(ev["ts_ns"]).as_py()))
        plan = _Plan(trace, ev, self.options.flows)
        stream.write(_header(trace, plan.device_pid, base, rank))
        meta = [json.dumps(m, ensure_ascii=False).encode()
                for m in _metadata_events(trace, plan.device_pid)]
        stream.write(b",\n".join(meta))
        progress = self.progress
        carried: set[str] = set()
        for lo in range(0, ev.num_rows, _CHUNK):
            hi = min(lo + _CHUNK, ev.num_rows)
            raw = _raw(self._chunk(plan, ev.slice(lo, hi - lo), lo, hi, base, result,
                                   carried))
            # Every line starts with ",\n"; the list's first one must not.
            stream.write(raw if meta or lo else raw[2:])
            if progress:
                progress.update(hi, ev.num_rows)
        # Which args keys are typed columns, for tracekit's kineto reader: a tool's own key
        # of the same name elsewhere in the file (an nsys memset's "value") is left alone.
        tail: dict[str, Any] = {"sources": list(trace.metadata.get("sources", {})),
                                "args_columns": sorted(carried)}
        # The tools the events came from: read back, a file of Nsight Systems events is not
        # a PyTorch profiler trace for being in Kineto's layout.
        tools = {name: meta["tool"] for name, meta in trace.metadata.get("sources", {}).items()
                 if isinstance(meta, dict) and isinstance(meta.get("tool"), str)}
        if tools:
            tail["tools"] = tools
        offsets = {name: meta["alignment_offset_ns"]
                   for name, meta in trace.metadata.get("sources", {}).items()
                   if isinstance(meta, dict) and "alignment_offset_ns" in meta}
        if offsets:
            tail["alignment_offsets_ns"] = offsets
        tail = {"tracekit": tail}
        stream.write(b"\n], " + json.dumps(tail, ensure_ascii=False)[1:].encode() + b"\n")
        kinds = np.bincount(plan.kind, minlength=3)
        for key, n in zip(self.event_counts, kinds.tolist(), strict=True):
            if n:
                result.written[key] += n
        if plan.flows is not None:
            result.written["flow events"] += plan.flows.count
        return result

    def _chunk(self, plan: _Plan, ev: pa.Table, lo: int, hi: int, base: int,
               result: tracekit.WriteResult, carried_names: set[str]) -> pa.Array:
        """The lines of events ``lo:hi``, each with its flow events after it."""
        kind = plan.kind[lo:hi]
        counter = kind == _COUNTER
        native = {k: v[lo:hi] if isinstance(v, np.ndarray) else v
                  for k, v in plan.native.items()}
        carried = fields.carry(ev, native,
                               allowed=~counter,
                               why_not="a counter's args are its series in Chrome JSON")
        stacks = ev["stack_id"].is_valid().to_numpy(zero_copy_only=False) & ~counter
        if stacks.any():  # ids into a stacks table this format does not hold
            carried.keys.pop("stack_id", None)
            result.skipped[fields.field_skip("stack_id", "Chrome JSON has no call stacks")] \
                += int(stacks.sum())
        for key, mask in plan.null_keys.items():
            carried.add(key, pc.if_else(pa.array(mask[lo:hi]), "null", _NULL))
        carried_names.update(k for k, v in carried.keys.items() if v.null_count < len(v))
        for key, values in plan.kineto_keys.items():
            carried.add(key, values.slice(lo, hi - lo))
        result.skipped.update(carried.skipped)
        args = ev["args"] if self.options.args else pa.nulls(ev.num_rows, pa.string())
        own = pc.fill_null(pc.greater(pc.utf8_length(args), 0), False) \
            .to_numpy(zero_copy_only=False)
        if (own & counter).any():
            result.skipped[fields.field_skip("args", "a counter's args are its series in "
                                                    "Chrome JSON")] += int((own & counter).sum())
        args = pc.if_else(pa.array(counter), _NULL, args)
        # Compact: Kineto indents its args, which would double the file. Column-wise: the
        # same as fields.merge(args, carried.keys, validate=True, compact=True).
        merged = json_objects.merge_objects(args, carried.keys)
        for key, n in merged.collisions.items():
            result.skipped[fields.field_skip(key, "args already has this key with another "
                                                  "value (args kept)")] += n
        series = pc.binary_join_element_wise("{", plan.name_text.slice(lo, hi - lo), ":",
                                             plan.value_text.slice(lo, hi - lo), "}", "")
        args_text = pc.if_else(pa.array(counter), series, merged.args)
        rel = ev["ts_ns"].to_numpy() - base
        dur = np.maximum(ev["dur_ns"].fill_null(0).to_numpy(), 0)
        parts = [
            _HEADS.take(pa.array(kind)), plan.cat_text.slice(lo, hi - lo), ',"name":',
            plan.name_text.slice(lo, hi - lo), ',"pid":', plan.pid_text(lo, hi),
            ',"tid":', plan.tid_text(lo, hi), ',"ts":', _micros(rel),
            _optional(kind == _SLICE, ',"dur":', _micros(dur)),
            pc.if_else(pa.array(kind == _INSTANT), ',"s":"t"', ""),
            _optional(args_text.is_valid().to_numpy(zero_copy_only=False), ',"args":',
                      pc.fill_null(args_text, "")),
            "}",
        ]
        lines = pc.binary_join_element_wise(*parts, "")
        if plan.flows is not None:
            lines = plan.flows.interleave(lines, lo, hi, plan, rel)
        return pc.binary_join_element_wise(",\n", lines, "")


class ChromeJsonRanksWriter(tracekit.DirectoryWriter):
    """A folder of Chrome trace JSON files, one per rank (input) of a run: rank-N.json."""

    name = "chrome-json-ranks"
    description = "a folder of Chrome trace JSON files, one per rank: rank-N.json (HTA)"
    native_columns = ChromeJsonWriter.native_columns
    event_counts = ChromeJsonWriter.event_counts

    @dataclass(frozen=True)
    class Options:
        args: bool = field(default=True, metadata={"help": "write each event's args"})
        flows: bool = field(default=True, metadata={"help": "write ac2g and fwdbwd flows"})
        align: str = field(default="", metadata={
            "help": "collectives: shift each rank so that matched collectives end together"})
        gzip: bool = field(default=False, metadata={"help": "write rank-N.json.gz"})

        def __post_init__(self) -> None:
            check_align(self.align)

    @classmethod
    def owns(cls, directory: Path) -> bool:
        """True for an empty folder, or one of rank-N.json files that tracekit wrote."""
        try:
            entries = list(directory.iterdir())
        except OSError:
            return False
        return all(e.is_file() and not e.is_symlink() and _RANK_FILE.fullmatch(e.name)
                   and _written_by_tracekit(e) for e in entries)

    def write(self, trace: Trace, stream: Any) -> tracekit.WriteResult:
        if not trace.events.num_rows:
            raise EmptyOutputError("nothing to write: the input has no events")
        trace = _aligned(trace, self.options.align)
        one = ChromeJsonWriter(ChromeJsonWriter.Options(self.options.args, self.options.flows),
                               progress=NO_PROGRESS)
        result = tracekit.WriteResult()
        suffix = ".json.gz" if self.options.gzip else ".json"
        ranks = rank_traces(trace) if len(trace.sources) > 1 else \
            ((rank, trace) for rank in input_ranks(trace))
        for i, (rank, part) in enumerate(ranks):
            try:
                with open(Path(stream) / f"rank-{rank.rank}{suffix}", "wb") as f:
                    if self.options.gzip:
                        with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=6, mtime=0) as gz:
                            done = one.write_rank(part, gz, rank.rank)
                    else:
                        done = one.write_rank(part, f, rank.rank)
            except EmptyOutputError as exc:
                raise EmptyOutputError(f"rank {rank.rank} ({rank.source}): {exc}") from None
            result.written.update(done.written)
            result.skipped.update(done.skipped)
            result.written["rank files"] += 1
            self.progress.update(i + 1, max(len(trace.sources), 1))
        return result


def _aligned(trace: Trace, align: str) -> Trace:
    """``trace`` with its ranks aligned on their collectives where asked."""
    return align_collectives(trace).trace if align == "collectives" else trace


def _written_by_tracekit(path: Path) -> bool:
    """Whether ``path`` ends as tracekit's Chrome JSON does (with its "tracekit" object)."""
    try:
        if path.name.endswith(".gz"):
            tail = b""
            with gzip.open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    tail = (tail + chunk)[-(1 << 16):]
        else:
            with open(path, "rb") as f:
                f.seek(max(path.stat().st_size - (1 << 16), 0))
                tail = f.read()
    except (OSError, EOFError):
        return False
    return _OURS in tail


_HEADS = pa.array(['{"ph":"X","cat":', '{"ph":"i","cat":', '{"ph":"C","cat":'])


def _writable(events: pa.Table, result: tracekit.WriteResult) -> pa.Table:
    """The rows the format can hold; the others counted by reason."""
    kind = events["kind"].cast(pa.string())
    is_counter = pc.equal(kind, "counter")
    checks = [
        (pc.invert(pc.is_in(kind, pa.array(["slice", "instant", "counter", "sample"]))),
         "events of an unknown kind"),
        (pc.is_null(events["ts_ns"]), "untimed aggregate rows (no timestamp)"),
        (pc.equal(kind, "sample"), "CPU samples (call stacks are not written yet)"),
        (pc.and_(is_counter, pc.invert(pc.fill_null(pc.is_finite(events["value"]), False))),
         "counter rows without a finite value"),
    ]
    return fields.keep_writable(events, checks, result.skipped)


class _Plan:
    """Per written row what goes into its line, computed once for the whole table."""

    def __init__(self, trace: Trace, ev: pa.Table, flows: bool) -> None:
        kind_text = ev["kind"].cast(pa.string())
        self.kind = np.select([pc.equal(kind_text, "instant").to_numpy(zero_copy_only=False),
                               pc.equal(kind_text, "counter").to_numpy(zero_copy_only=False)],
                              [_INSTANT, _COUNTER], _SLICE).astype(np.int64)
        slices, counter = self.kind == _SLICE, self.kind == _COUNTER
        category = ev["category"].cast(pa.string())
        on_device = ev["device"].is_valid().to_numpy(zero_copy_only=False)
        placed = on_device & _isin(category, _DEVICE_CATEGORIES)
        work = on_device & _isin(category, _DEVICE_WORK)
        self.device_pid = _device_pids(trace, ev)
        device = ev["device"].fill_null(0).to_numpy().astype(np.int64)
        src = ev["source"].combine_chunks()
        src_names = np.array(src.dictionary.to_pylist(), dtype=object)
        src_idx = src.indices.to_numpy(zero_copy_only=False)
        gpu_pid = np.array([self.device_pid.get((s, d), 0) for s, d in zip(
            src_names[src_idx[on_device]].tolist(), device[on_device].tolist(), strict=True)],
            dtype=np.int64)
        self.pid, self.pid_ok = _values(ev["pid"])
        self.pid[on_device], self.pid_ok[on_device] = gpu_pid, True
        self.tid, self.tid_ok = _values(ev["tid"])
        stream, stream_ok = _values(ev["stream"])
        self.tid[on_device], self.tid_ok[on_device] = stream[on_device], stream_ok[on_device]
        self.tid[counter], self.tid_ok[counter] = 0, True
        names, copy_native = _kineto_names(ev, category)
        self.name_text = names
        self.cat_text = _categories(ev, category, self.kind)
        self.value_text = fields.json_values(ev["value"])[0]
        memory = pc.equal(category, "host.memory").to_numpy(zero_copy_only=False) \
            & (self.kind == _INSTANT)
        kernel = pc.equal(category, "gpu.kernel").to_numpy(zero_copy_only=False) & slices
        self.native: dict[str, fields.Mask] = {
            "kind": True, "category": True, "name": True, "ts_ns": True,
            "dur_ns": slices, "device": placed, "stream": placed & ~counter,
            # A device row's own pid is what the reader finds from its launch (correlation).
            "pid": ~on_device | (placed & _launcher_matches(ev, category, placed)),
            "tid": ~on_device & ~counter, "value": counter, "bytes": memory,
            "flow_id": slices if flows else False,
            "source": len(src.dictionary) <= 1,
            **{c: kernel for c in _KERNEL_COLUMNS}, **copy_native,
        }
        self.kineto_keys = _kineto_keys(ev, kernel, work, memory)
        # An empty pid, tid or stream reads back as a named id: say null outright.
        host = ~on_device & ~counter
        self.null_keys = {"pid": host & ~self.pid_ok, "tid": host & ~self.tid_ok,
                          "stream": placed & ~stream_ok}
        self.flows = _Flows(ev, self.kind) if flows else None

    def pid_text(self, lo: int, hi: int) -> pa.Array:
        return _ints(self.pid[lo:hi], self.pid_ok[lo:hi])

    def tid_text(self, lo: int, hi: int) -> pa.Array:
        return _ints(self.tid[lo:hi], self.tid_ok[lo:hi])


def _values(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """An integer column as int64 values (0 where null) and its validity."""
    return (column.cast(pa.int64()).fill_null(0).to_numpy().copy(),
            column.is_valid().to_numpy(zero_copy_only=False).copy())


def _base_time(trace: Trace, first: int) -> int:
    """baseTimeNanoseconds: the input's own when it has one (the same µs text as the
    original), else the first timestamp down to the µs. Tools round µs fractions (HTA: start
    up, end down), so the fractions must stay those of the input clock."""
    sources = trace.metadata.get("sources", {})
    if isinstance(sources, dict) and len(sources) == 1:
        own = next(iter(sources.values())).get("base_time_ns")
        if type(own) is int and own <= first:
            return own
    # The kineto reader takes no negative base (nsys times before the session start): those
    # times are written as negative µs from 0.
    return max(first - first % 1000, 0)


def _isin(strings: pa.Array | pa.ChunkedArray, values: tuple[str, ...]) -> np.ndarray:
    return pc.is_in(strings, pa.array(values)).to_numpy(zero_copy_only=False)


def _quoted(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    return fields.json_values(column)[0]


def _categories(ev: pa.Table, category: pa.ChunkedArray, kind: np.ndarray) -> pa.Array:
    """The quoted cat of each row: Kineto's where the reader maps it back to the category."""
    col = ev["category"].combine_chunks()
    entries = col.dictionary.to_pylist()
    mapped = [json.dumps(KINETO_CATEGORY.get(c, c)) for c in entries]
    text = pa.array(mapped, pa.string()).take(col.indices)
    # Kineto's [memory] instants are cpu_instant_event; any other host.memory row keeps its
    # category, or it would read back as host.instant.
    memory = pc.equal(category, "host.memory").to_numpy(zero_copy_only=False) \
        & (kind == _INSTANT) & pc.equal(ev["name"].cast(pa.string()), "[memory]") \
        .to_numpy(zero_copy_only=False)
    return pc.if_else(pa.array(memory), '"cpu_instant_event"', text)


def _parse_copy(name: str) -> tuple[str | None, str | None, str | None]:
    """A copy or memset name as the kineto reader parses it."""
    m = _MEMCPY.search(name)
    if m:
        return m.group(1), m.group(2), m.group(3)
    s = _MEMSET.search(name)
    return None, None, s.group(1) if s else None


def _copy_name(category: str, kinds: tuple[str | None, str | None, str | None]) -> str:
    """Kineto's name for a copy (CUPTI kind strings) or a memset."""
    copy_kind, src, dst = kinds
    if category == "gpu.memset":
        return f"Memset ({dst})" if dst else "Memset"
    # Kineto writes both memory kinds or, where they are unknown, neither.
    where = f" ({src} -> {dst})" if src and dst else ""
    return f"Memcpy {copy_kind or '<unknown>'}{where}"


def _kineto_names(ev: pa.Table, category: pa.ChunkedArray,
                  ) -> tuple[pa.Array, dict[str, np.ndarray]]:
    """Quoted names, with Kineto's for copies, memsets and syncs; and per copy column the rows
    whose name carries it (the kineto reader parses it back from the name)."""
    n = ev.num_rows
    name = ev["name"].combine_chunks()
    text = _quoted(name)
    native = {c: np.zeros(n, dtype=bool) for c in _COPY_COLUMNS}
    rows = np.flatnonzero(_isin(category, ("gpu.memcpy", "gpu.memset", "gpu.sync")))
    if not len(rows):
        return text, native
    cats = ev["category"].combine_chunks()
    cols = [cats.indices, name.indices] + [ev[c].combine_chunks().indices.fill_null(-1)
                                           for c in _COPY_COLUMNS]
    codes = [c.to_numpy(zero_copy_only=False)[rows].astype(np.int64) for c in cols]
    inverse, distinct = factorize(*codes)
    cat_names = cats.dictionary.to_pylist()
    dictionaries = [name.dictionary.to_pylist()] + [
        ev[c].combine_chunks().dictionary.to_pylist() for c in _COPY_COLUMNS]
    new_names: list[str] = []
    carried = np.zeros((len(distinct[0]), 3), dtype=bool)
    for k, key in enumerate(zip(*(d.tolist() for d in distinct), strict=True)):
        cat = cat_names[key[0]]
        old = dictionaries[0][key[1]]
        kinds = tuple(dictionaries[i + 1][code] if code >= 0 else None
                      for i, code in enumerate(key[2:]))
        if cat == "gpu.sync":
            new_names.append(_SYNC_NAMES.get(old.lower(), old))
            continue
        # HTA tells copies and memsets by these leading words; the rest must read back.
        word = "Memset" if cat == "gpu.memset" else "Memcpy"
        keep = old.startswith(word) and _parse_copy(old) == kinds
        new = old if keep else _copy_name(cat, kinds)
        new_names.append(new)
        carried[k] = [a == b for a, b in zip(_parse_copy(new), kinds, strict=True)]
    for i, column in enumerate(_COPY_COLUMNS):
        native[column][rows] = carried[inverse, i]
    quoted = pa.array([json.dumps(s, ensure_ascii=False) for s in new_names], pa.string())
    position = np.arange(n)
    position[rows] = n + inverse
    return pa.concat_arrays([text, quoted]).take(pa.array(position)), native


def _kineto_keys(ev: pa.Table, kernel: np.ndarray, work: np.ndarray,
                 memory: np.ndarray) -> dict[str, pa.Array]:
    """The args keys Kineto writes for typed columns, by its own names."""
    out: dict[str, pa.Array] = {}
    for key, axes in (("grid", ("grid_x", "grid_y", "grid_z")),
                      ("block", ("block_x", "block_y", "block_z"))):
        texts = [pc.fill_null(fields.json_values(ev[a])[0], "null") for a in axes]
        some = np.zeros(ev.num_rows, dtype=bool)
        for a in axes:
            some |= ev[a].is_valid().to_numpy(zero_copy_only=False)
        joined = pc.binary_join_element_wise("[", texts[0], ",", texts[1], ",", texts[2], "]",
                                             "")
        out[key] = pc.if_else(pa.array(some & kernel), joined, _NULL)
    for key, column, rows in (("registers per thread", "registers", kernel),
                              ("shared memory", "shared_mem_bytes", kernel),
                              ("device", "device", work), ("stream", "stream", work),
                              ("Bytes", "bytes", memory)):
        text = fields.json_values(ev[column])[0]
        out[key] = pc.if_else(pa.array(rows), text, _NULL)
    return out


def _launcher_matches(ev: pa.Table, category: pa.ChunkedArray, placed: np.ndarray,
                      ) -> np.ndarray:
    """Per row: whether its pid is the one the kineto reader gives a device row, that of the
    first host API slice with the same correlation."""
    corr = ev["correlation"]
    valid = corr.is_valid().to_numpy(zero_copy_only=False)
    c = corr.fill_null(0).to_numpy()
    pid_valid = ev["pid"].is_valid().to_numpy(zero_copy_only=False)
    pid = ev["pid"].fill_null(0).to_numpy()
    api = pc.starts_with(category, "api.").to_numpy(zero_copy_only=False) & valid & \
        pc.equal(ev["kind"].cast(pa.string()), "slice").to_numpy(zero_copy_only=False)
    found = np.zeros(len(c), dtype=bool)
    launcher = np.zeros(len(c), dtype=np.int64)
    launcher_valid = np.zeros(len(c), dtype=bool)
    if api.any():
        api_c, first = np.unique(c[api], return_index=True)
        api_pid, api_pid_valid = pid[api][first], pid_valid[api][first]
        want = np.flatnonzero(placed & valid)
        pos = np.clip(np.searchsorted(api_c, c[want]), 0, len(api_c) - 1)
        hit = api_c[pos] == c[want]
        found[want[hit]] = True
        launcher[want[hit]] = api_pid[pos[hit]]
        launcher_valid[want[hit]] = api_pid_valid[pos[hit]]
    same_value = found & launcher_valid & pid_valid & (launcher == pid)
    both_missing = ~pid_valid & ~(found & launcher_valid)
    return same_value | both_missing


def _ints(values: np.ndarray, ok: np.ndarray) -> pa.Array:
    """Integers as text; a missing id as "" (as Kineto writes it)."""
    return pc.fill_null(pa.array(values, mask=~ok).cast(pa.string()), '""')


def _micros(ns: np.ndarray) -> pa.Array:
    """ns as µs text with three decimals ("12.345", "-0.005"), Kineto's form: exact to the
    ns."""
    size = np.abs(ns)
    us = pa.array(size // 1000).cast(pa.string())
    frac = pc.utf8_lpad(pa.array(size % 1000).cast(pa.string()), 3, "0")
    sign = pc.if_else(pa.array(ns < 0), "-", "")
    return pc.binary_join_element_wise(sign, us, ".", frac, "")


def _optional(mask: np.ndarray, prefix: str, values: pa.Array) -> pa.Array:
    """``prefix + value`` where ``mask``, "" elsewhere."""
    return pc.if_else(pa.array(mask), pc.binary_join_element_wise(prefix, values, ""), "")


def _raw(lines: pa.Array) -> memoryview:
    """The bytes of a string array's values, back to back (each line starts with ",\\n")."""
    lines = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32,
                            count=lines.offset + len(lines) + 1)
    return memoryview(lines.buffers()[2])[offsets[lines.offset]:offsets[-1]]


def _header(trace: Trace, device_pid: dict[Any, int], base: int,
            rank: int | None = None) -> bytes:
    """The top-level fields Kineto writes before ``traceEvents``, and the list's opening."""
    top: dict[str, Any] = {"schemaVersion": 1}
    props = _device_properties(trace, device_pid)
    if props:
        top["deviceProperties"] = props
    dist = _distributed_info(trace) or ({"rank": rank} if rank is not None else None)
    if dist:
        top["distributedInfo"] = dist
    hosts = set(trace.processes["host"].drop_null().to_pylist())
    if len(hosts) == 1:
        top["host_name"] = hosts.pop()
    sources = trace.metadata.get("sources", {})
    if isinstance(sources, dict) and len(sources) == 1:
        run = next(iter(sources.values())).get("run", {})
        if isinstance(run, dict):
            top.update({k: v for k, v in run.items() if k not in _OWN_KEYS})
    top.update({"displayTimeUnit": "ns", "baseTimeNanoseconds": base})
    # json, not orjson: HTA finds the rank with the pattern '"rank":\s+(\d+)'.
    text = json.dumps(top, ensure_ascii=False)
    return text[:-1].encode() + b', "traceEvents": [\n'


_OWN_KEYS = frozenset({"schemaVersion", "deviceProperties", "distributedInfo", "host_name",
                       "displayTimeUnit", "baseTimeNanoseconds", "traceEvents", "tracekit"})


def _device_properties(trace: Trace, device_pid: dict[Any, int]) -> list[dict[str, Any]]:
    """Kineto's deviceProperties from the devices table, when device ids are unambiguous
    (devices and device rows of one input)."""
    rows = trace.devices.to_pylist()
    if len({r["source"] for r in rows} | {s for s, _ in device_pid}) != 1:
        return []
    out = []
    for r in sorted(rows, key=lambda r: r["device"]):
        entry: dict[str, Any] = {"id": r["device"]}
        if r["name"]:
            entry["name"] = r["name"]
        if r["memory_bytes"] is not None:
            entry["totalGlobalMem"] = r["memory_bytes"]
        cc = r["compute_capability"]
        if cc and re.fullmatch(r"\d+\.\d+", cc):
            major, minor = cc.split(".")
            entry["computeMajor"], entry["computeMinor"] = int(major), int(minor)
        elif cc:
            entry["gcnArchName"] = cc
        if r["sm_count"] is not None:
            entry["numSms"] = r["sm_count"]
        out.append(entry)
    return out


def _distributed_info(trace: Trace) -> dict[str, Any] | None:
    """The input's distributedInfo, or {"rank": r} when every process has the one rank r."""
    sources = trace.metadata.get("sources", {})
    if isinstance(sources, dict) and len(sources) == 1:
        dist = next(iter(sources.values())).get("distributed")
        if isinstance(dist, dict):
            return dist
    ranks = set(trace.processes["rank"].drop_null().to_pylist())
    return {"rank": ranks.pop()} if len(ranks) == 1 else None


def _nothing_to_write(events: pa.Table, result: tracekit.WriteResult) -> str:
    """Why no event could be written, for EmptyOutputError."""
    if not events.num_rows:
        return "nothing to write: the input has no events"
    untimed = result.skipped.get("untimed aggregate rows (no timestamp)", 0)
    if untimed == events.num_rows:
        return f"nothing to write: no event has a timestamp ({untimed} events without one)"
    reasons = ", ".join(f"{n} {reason}" for reason, n in result.skipped.items())
    hint = "; write .pftrace or .folded for CPU samples" if "CPU samples" in reasons else ""
    return f"nothing to write: {reasons}{hint}"


def _device_pids(trace: Trace, ev: pa.Table) -> dict[Any, int]:
    """pid per (source, device): the device index, as Kineto writes it; moved past the host
    pids when several inputs or a clash would merge two devices or a device and a process."""
    pairs = ev.filter(pc.is_valid(ev["device"])).select(["source", "device"])
    keys = sorted({(r["source"], r["device"]) for r in pairs.group_by(
        ["source", "device"], use_threads=False).aggregate([]).to_pylist()})
    host = set(pc.unique(ev["pid"]).drop_null().to_pylist())
    sources = {s for s, _ in keys}
    if len(sources) <= 1 and not host & {d for _, d in keys}:
        return {k: int(k[1]) for k in keys}
    top = max([*host, 0]) + 1
    return {k: top + i for i, k in enumerate(keys)}


def _metadata_events(trace: Trace, device_pid: dict[Any, int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in trace.processes.to_pylist():
        if p["name"]:
            out.append({"ph": "M", "name": "process_name", "pid": p["pid"], "tid": 0,
                        "args": {"name": p["name"]}})
    for t in trace.threads.to_pylist():
        if t["name"]:
            out.append({"ph": "M", "name": "thread_name", "pid": t["pid"], "tid": t["tid"],
                        "args": {"name": t["name"]}})
    names = {(d["source"], d["device"]): d["name"] for d in trace.devices.to_pylist()}
    named = {(t["pid"], t["tid"]) for t in trace.threads.to_pylist() if t["name"]}
    streams = _device_streams(trace.events)
    for (source, device), pid in sorted(device_pid.items(), key=lambda kv: kv[1]):
        label = f"GPU {device}"
        model = names.get((source, device))
        out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                    "args": {"name": f"{label}: {model}" if model else label}})
        out.append({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0,
                    "args": {"labels": label}})
        # Kineto's own name for a stream's thread, which viewers would show as "Thread 7".
        out += [{"ph": "M", "name": "thread_name", "pid": pid, "tid": stream,
                 "args": {"name": f"stream {stream}"}}
                for stream in streams.get((source, device), []) if (pid, stream) not in named]
    return out


def _device_streams(events: pa.Table) -> dict[tuple[str, int], list[int]]:
    """The streams of each (source, device) that device rows name."""
    rows = events.filter(pc.and_(pc.is_valid(events["device"]), pc.is_valid(events["stream"])))
    if not rows.num_rows:
        return {}
    pairs = pa.table({"source": rows["source"].cast(pa.string()), "device": rows["device"],
                      "stream": rows["stream"]}).group_by(
        ["source", "device", "stream"], use_threads=False).aggregate([]).to_pylist()
    out: dict[tuple[str, int], list[int]] = {}
    for r in sorted(pairs, key=lambda r: (r["source"], r["device"], r["stream"])):
        out.setdefault((r["source"], r["device"]), []).append(r["stream"])
    return out


class _Flows:
    """Flow endpoints per row, as columns: ``ac2g`` from a launch to its device work (id: the
    correlation, the host call unique for its key), and ``fwdbwd`` between rows sharing
    ``flow_id`` (the earliest one starts the flow)."""

    def __init__(self, ev: pa.Table, kind: np.ndarray) -> None:
        slices = kind == _SLICE
        key, linked, on_device = launch_links(ev)
        host = linked & slices & ~on_device
        host_keys, counts = np.unique(key[host], return_counts=True)
        unique_host = np.isin(key, host_keys[counts == 1])
        self.launch = linked & slices & unique_host
        self.launch_end = on_device  # "f" at the device work, "s" at the call
        self.launch_id = ev["correlation"].fill_null(0).to_numpy()
        fid_ok = ev["flow_id"].is_valid().to_numpy(zero_copy_only=False) & slices
        self.fwd = fid_ok
        self.fwd_id = ev["flow_id"].fill_null(0).to_numpy()
        self.fwd_start = np.zeros(ev.num_rows, dtype=bool)
        rows = np.flatnonzero(fid_ok)
        if len(rows):
            src = ev["source"].combine_chunks().indices.to_numpy(zero_copy_only=False)[rows]
            ts = ev["ts_ns"].to_numpy()[rows]
            order = np.lexsort((ts, self.fwd_id[rows], src))
            group = np.stack([src[order], self.fwd_id[rows][order]])
            first = np.r_[True, np.any(group[:, 1:] != group[:, :-1], axis=0)]
            self.fwd_start[rows[order[first]]] = True
        self.count = int(self.launch.sum() + self.fwd.sum())

    def interleave(self, lines: pa.Array, lo: int, hi: int, plan: _Plan,
                   rel: np.ndarray) -> pa.Array:
        """``lines`` of rows ``lo:hi`` with each row's flow events right after it."""
        launch, fwd = self.launch[lo:hi], self.fwd[lo:hi]
        if not launch.any() and not fwd.any():
            return lines
        n = hi - lo
        ts = _micros(rel)
        pid, tid = plan.pid_text(lo, hi), plan.tid_text(lo, hi)
        made = []
        for mask, ends, ids, cat in ((launch, self.launch_end[lo:hi], self.launch_id[lo:hi],
                                      "ac2g"),
                                     (fwd, ~self.fwd_start[lo:hi], self.fwd_id[lo:hi],
                                      "fwdbwd")):
            at = np.flatnonzero(mask)
            rows = pa.array(at)
            # By index into the two texts: no string per row made in Python.
            end = pa.array(ends[at].astype(np.int8))
            heads = pa.array(['{"ph":"s","id":', '{"ph":"f","id":']).take(end)
            tails = pa.array([f',"cat":"{cat}","name":"{cat}"}}',
                              f',"cat":"{cat}","name":"{cat}","bp":"e"}}']).take(end)
            made.append(pc.binary_join_element_wise(
                heads, pa.array(ids[at], pa.int64()).cast(pa.string()),
                ',"pid":', pid.take(rows), ',"tid":', tid.take(rows), ',"ts":', ts.take(rows),
                tails, ""))
        count = 1 + launch.astype(np.int64) + fwd.astype(np.int64)
        start = np.cumsum(count) - count
        position = np.empty(int(count.sum()), dtype=np.int64)
        position[start] = np.arange(n)
        position[start[launch] + 1] = n + np.arange(int(launch.sum()))
        position[start[fwd] + 1 + launch[fwd]] = n + int(launch.sum()) + \
            np.arange(int(fwd.sum()))
        return pa.concat_arrays([lines, *made]).take(pa.array(position))


@tracekit.hookimpl
def register_writers(register: Any) -> None:
    register(ChromeJsonWriter)
    register(ChromeJsonRanksWriter)
