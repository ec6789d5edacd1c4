"""Kineto trace events to tracekit event columns, one column at a time."""

from __future__ import annotations

import re
from collections import Counter
from decimal import Decimal
from itertools import compress
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.builder import TraceBuilder
from tracekit.inputs import Source
from tracekit.model import SYNTHETIC_ID_MAX
from tracekit.plugins.kineto.categories import (
    DEVICE_CATEGORIES,
    LAUNCH_FLOWS,
    map_category,
)
from tracekit.plugins.kineto.fields import (
    INT32,
    INT64,
    as_int,
    dumps,
    dumps_all,
    ints,
    names,
    texts,
)
from tracekit.plugins.kineto.timestamps import INT64_MAX, us_to_ns

_STREAM_TID = re.compile(r"stream\s+(\d+)", re.IGNORECASE)
_MEMCPY_NAME = re.compile(r"Memcpy\s+(\w+)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.IGNORECASE)
_MEMSET_NAME = re.compile(r"Memset\s*\((\w+)\)", re.IGNORECASE)
_AMD_NAMES = ("AMD", "Instinct", "Radeon", "gfx")
# Columns every kind of row has while converting (a trace may hold only instants).
_WORK_COLUMNS = {"dur_ns": pa.int64(), "correlation": pa.int64(), "_tid": pa.int64(),
                 "_arg_device": pa.int64(), "_arg_stream": pa.int64()}
# Ids for string pids/tids ("Spans", "stream 7"), far below any real (even negative) OS id.
NO_TS = "skipped: no usable ts (missing, not a number, or out of range)"


def _numbers(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """float64 values and a mask of which are finite numbers (bools and text are not)."""
    ok = np.array([type(v) in (int, float, Decimal) for v in values], dtype=bool)
    f = np.array([float(v) if k else 0.0 for v, k in zip(values, ok, strict=True)])
    finite = np.isfinite(f)
    return np.where(finite, f, 0.0), ok & finite


def _arg(args: list[Any], key: str, alt: str | None = None) -> list[Any]:
    if alt is None:
        return [a.get(key) if type(a) is dict else None for a in args]
    return [(a.get(key, a.get(alt))) if type(a) is dict else None for a in args]


class Converter:
    """Turns one Kineto document's events into columns in a TraceBuilder."""

    def __init__(self, top: dict[str, Any], out: TraceBuilder, source: Source,
                 memory_counters: bool) -> None:
        self.top = top
        self.out = out
        self.source = source
        self.memory_counters = memory_counters
        self.base_ns = self._base_time(top.get("baseTimeNanoseconds"))
        self.synthetic: dict[str, int] = {}
        self.labels: dict[int, str] = {}

    def _warn(self, kind: str, text: str, count: int = 1) -> None:
        self.out.note(kind, f"warning: {text}", count)

    def _base_time(self, base: Any) -> int:
        """baseTimeNanoseconds as int ns; an unusable one is ignored with a warning."""
        if base is None:
            return 0
        n = as_int(base)
        if n is None and type(base) is float and abs(base) < 2**63:
            n = int(base)  # a float written by some tool: as exact as it is
        if n is None or not 0 <= n <= INT64_MAX:
            self._warn("baseTimeNanoseconds", "not a non-negative integer ns count: ignored, "
                       "times stay relative to an unknown start")
            self.base_unusable = True
            return 0
        return n

    # -- identities ------------------------------------------------------------------------
    def _ids(self, values: list[Any], what: str = "pid", kind: str = "") -> np.ndarray:
        """pid/tid values to int64; names get stable negative ids (named in ``labels``).

        Integer text is an id; other text ("Spans", "stream 7") a name; a missing id is the
        name "" (shown as "(no pid)"). Other values (lists, objects, fractions, integers
        beyond int64) are named by their JSON text and counted under ``kind``.
        """
        if set(map(type, values)) <= {int}:
            try:
                return np.array(values, dtype=np.int64)
            except OverflowError:
                pass
        out = np.empty(len(values), dtype=np.int64)
        bad = 0
        for i, v in enumerate(values):
            n = v if type(v) is int else as_int(v) if type(v) is str else None
            if n is not None and INT64[0] <= n <= INT64[1]:
                out[i] = n
                continue
            if v is None or type(v) is str:
                key = v or ""
            else:
                bad += 1
                key = (dumps([v]) or "[?]")[1:-1][:40]
            if key not in self.synthetic:
                self.synthetic[key] = SYNTHETIC_ID_MAX - len(self.synthetic)
                self.labels[self.synthetic[key]] = key or "(no pid)"
            out[i] = self.synthetic[key]
        if bad and kind:
            self._warn(kind, f"{what} is neither an integer nor a name (named by its JSON "
                       "text)", bad)
        return out

    def _times(self, values: list[Any], base: int) -> tuple[np.ndarray, np.ndarray]:
        """µs values to ns on the trace clock and whether each is usable (in int64 range)."""
        ns, valid = us_to_ns(values)
        if base:
            valid &= ns <= INT64_MAX - base
            ns = np.where(valid, ns + base, 0)
        return ns, valid

    def _cats(self, evs: list[dict[str, Any]], ph: str) -> list[str | None]:
        """The cat of each event of phase ``ph`` as text (or None), what was odd counted."""
        cats, bad = texts([e.get("cat") for e in evs])
        if bad:
            self._warn(ph, "cat is not text (numbers kept as text, others taken as no cat)",
                       bad)
        return cats

    def _fields(self, evs: list[dict[str, Any]], ph: str
                ) -> tuple[pa.DictionaryArray, list[Any]]:
        """The name and args of events of phase ``ph``, with what was odd counted."""
        name_col, unnamed, numbers = names([e.get("name") for e in evs])
        if unnamed:
            self._warn(ph, "name missing or not text (named '<unnamed>')", unnamed)
        if numbers:
            self._warn(ph, "name is a number (kept as text)", numbers)
        args = [e.get("args") for e in evs]
        odd = 0 if set(map(type, args)) <= {dict, type(None)} else \
            sum(1 for a in args if a is not None and type(a) is not dict)
        if odd:
            self._warn(ph, "args is not a JSON object (dropped)", odd)
            args = [a if type(a) is dict else None for a in args]
        return name_col, args

    def _args_column(self, args: list[Any], ph: str) -> pa.Array:
        texts_, lost = dumps_all(args)
        if lost:
            self._warn(ph, "args not representable as JSON (dropped)", lost)
        return pa.array(texts_, type=pa.string())

    def _count(self, ph: str | None, keys: list[Any], mask: np.ndarray | None,
               outcome: str) -> None:
        """Note ``outcome`` for the events where ``mask`` is true, by ``ph:cat`` (``keys`` are
        the cats, or the whole keys when ``ph`` is None)."""
        chosen = keys if mask is None else compress(keys, mask)
        for key, n in Counter(chosen).items():
            self.out.note(key if ph is None else f"{ph}:{key}", outcome, n)

    # -- main ------------------------------------------------------------------------------
    def run(self, raw_events: list[Any]) -> None:
        """Convert every event, then link flows, devices and processes."""
        out = self.out
        events = [e for e in raw_events if type(e) is dict]
        if len(events) != len(raw_events):
            out.note("non-object entries", "skipped: not a JSON object",
                     len(raw_events) - len(events))
        phases, _ = texts([e.get("ph") for e in events])
        codes = pa.array(phases, type=pa.string()).dictionary_encode()
        index = codes.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        by_phase: dict[str | None, np.ndarray] = {
            p: np.flatnonzero(index == i) for i, p in enumerate(codes.dictionary.to_pylist())}
        if codes.null_count:
            by_phase[None] = np.flatnonzero(index < 0)
        self._metadata_events(events, by_phase.pop("M", np.array([], dtype=np.int64)))
        tables = []
        if "X" in by_phase:
            tables.append(self._slices([events[i] for i in by_phase.pop("X")]))
        if "C" in by_phase and any(events[i].get("cat") == "counter.memory"
                                   for i in by_phase["C"]):
            # Written by tracekit: the memory counters are in the file already.
            self.memory_counters = False
        for ph in ("i", "I"):
            if ph in by_phase:
                tables.extend(self._instants([events[i] for i in by_phase.pop(ph)], ph))
        if "C" in by_phase:
            tables.append(self._counters([events[i] for i in by_phase.pop("C")]))
        flows = [events[i] for p in ("s", "f", "t") if p in by_phase for i in by_phase.pop(p)]
        for ph, idx in by_phase.items():
            cats, _ = texts([events[i].get("cat") for i in idx])
            if ph is None:
                self._count("(no ph)", cats, None, "skipped: no phase ('ph')")
            else:
                self._count(ph[:20], cats, None,
                            f"skipped: phase '{ph[:20]}' is not supported")
        tables = [t for t in tables if t.num_rows]
        table = pa.concat_tables(tables, promote_options="permissive") if tables else None
        if table is None:
            if flows:
                kinds = [f"{e.get('ph')}:{c}" for e, c in zip(
                    flows, texts([e.get("cat") for e in flows])[0], strict=True)]
                self._count(None, kinds, None, "skipped: flow endpoint matches no slice")
            self._devices_and_processes(None)
            self._top_metadata()
            return
        for name, type_ in _WORK_COLUMNS.items():
            if name not in table.column_names:
                table = table.append_column(name, pa.nulls(table.num_rows, type_))
        table = self._bind_flows(table, flows)
        table = self._device_columns(table)
        self._devices_and_processes(table)
        out.add_events({name: table[name] for name in table.column_names
                        if not name.startswith("_")})
        self._top_metadata()

    # -- X ---------------------------------------------------------------------------------
    def _slices(self, xs: list[dict[str, Any]]) -> pa.Table:
        cats = self._cats(xs, "X")
        ts, ts_ok = self._times([e.get("ts") for e in xs], self.base_ns)
        dur, dur_ok = us_to_ns([e.get("dur") for e in xs])
        negative = dur < 0
        if negative.any():
            self._warn("X", "negative dur (clamped to 0, as Kineto does since 2022)",
                       int(negative.sum()))
            dur = np.where(negative, 0, dur)
        end_ok = ts <= INT64_MAX - dur  # dur >= 0 here: no overflow
        keep = ts_ok & dur_ok & end_ok
        if not keep.all():
            self._count("X", cats, ~ts_ok, NO_TS)
            self._count("X", cats, ts_ok & ~dur_ok, "skipped: no usable dur (missing, not a "
                        "number, or out of range)")
            self._count("X", cats, ts_ok & dur_ok & ~end_ok, "skipped: ts + dur beyond the "
                        "int64 ns range")
            xs, cats = list(compress(xs, keep)), list(compress(cats, keep))
            ts, dur = ts[keep], dur[keep]
        self._count("X", cats, None, "events")
        name_col, args = self._fields(xs, "X")
        cat_dict = pa.array(cats, type=pa.string()).dictionary_encode()
        mapped = [map_category(c) for c in cat_dict.dictionary.to_pylist()]
        # A missing cat is a null index: "other", like an unknown one.
        category = pa.DictionaryArray.from_arrays(
            cat_dict.indices.fill_null(len(mapped)), pa.array([*mapped, "other"]))
        table = pa.table({
            "kind": _constant(len(xs), "slice"),
            "category": category,
            "name": name_col,
            "ts_ns": pa.array(ts),
            "dur_ns": pa.array(dur),
            "_pid": self._ids([e.get("pid") for e in xs], "pid", "X"),
            "_tid": self._ids([e.get("tid") for e in xs], "tid", "X"),
            "correlation": self._arg_ints(args, "correlation", "X"),
            "args": self._args_column(args, "X"),
        })
        return self._typed_gpu_columns(table, args)

    def _arg_ints(self, args: list[Any], key: str, kind: str,
                  bounds: tuple[int, int] = INT64) -> pa.Array:
        """args[key] as integers; values that are none are counted under ``kind``."""
        arr, bad = ints(_arg(args, key), bounds)
        if bad:
            self._warn(kind, f"args.{key} is not an integer in range (null)", bad)
        return arr

    def _typed_gpu_columns(self, table: pa.Table, args: list[Any]) -> pa.Table:
        cat = table["category"]
        n = table.num_rows
        is_kernel = pc.equal(cat.cast(pa.string()), "gpu.kernel").to_numpy(zero_copy_only=False)
        is_copy = pc.is_in(cat.cast(pa.string()), pa.array(["gpu.memcpy", "gpu.memset"]))\
            .to_numpy(zero_copy_only=False)
        cols: dict[str, pa.Array] = {}
        kidx = np.flatnonzero(is_kernel)
        kargs = [args[i] for i in kidx]
        for key in ("grid", "block"):
            dims = _arg(kargs, key)
            odd = sum(1 for v in dims if v is not None and type(v) is not list)
            if odd:
                self._warn("X:kernel", f"args.{key} is not a list (null)", odd)
            for axis, pos in (("x", 0), ("y", 1), ("z", 2)):
                vals = [v[pos] if type(v) is list and len(v) > pos else None for v in dims]
                cols[f"{key}_{axis}"] = _scatter(n, kidx, self._checked(
                    vals, f"args.{key}[{pos}]", INT32), pa.int32())
        cols["registers"] = _scatter(n, kidx, self._arg_ints(
            kargs, "registers per thread", "X:kernel", INT32), pa.int32())
        cols["shared_mem_bytes"] = _scatter(n, kidx, self._arg_ints(
            kargs, "shared memory", "X:kernel"), pa.int64())
        cidx = np.flatnonzero(is_copy)
        cols["bytes"] = _scatter(n, cidx, self._arg_ints(
            [args[i] for i in cidx], "bytes", "X:gpu_memcpy"), pa.int64())
        copy_kind, src, dst = _copy_kinds(table["name"], cidx, n)
        cols["copy_kind"], cols["src_kind"], cols["dst_kind"] = copy_kind, src, dst
        # The tool's own device and stream ids of device rows (see _device_columns).
        didx = np.flatnonzero(pc.is_in(cat.cast(pa.string()), pa.array(sorted(
            DEVICE_CATEGORIES))).to_numpy(zero_copy_only=False))
        dargs = [args[i] for i in didx]
        cols["_arg_device"] = _scatter(n, didx, self._arg_ints(
            dargs, "device", "X:device work", INT32), pa.int64())
        cols["_arg_stream"] = _scatter(n, didx, self._arg_ints(
            dargs, "stream", "X:device work"), pa.int64())
        for name, col in cols.items():
            table = table.append_column(name, col)
        return table

    def _checked(self, values: list[Any], what: str, bounds: tuple[int, int]) -> pa.Array:
        arr, bad = ints(values, bounds)
        if bad:
            self._warn("X:kernel", f"{what} is not an integer in range (null)", bad)
        return arr

    # -- i ---------------------------------------------------------------------------------
    def _instants(self, evs: list[dict[str, Any]], ph: str) -> list[pa.Table]:
        cats = self._cats(evs, ph)
        ts, ok = self._times([e.get("ts") for e in evs], self.base_ns)
        if not ok.all():
            self._count(ph, cats, ~ok, NO_TS)
            evs, cats, ts = list(compress(evs, ok)), list(compress(cats, ok)), ts[ok]
        self._count(ph, cats, None, "events")
        name_col, args = self._fields(evs, ph)
        name_text = name_col.dictionary.to_pylist()
        name_idx = name_col.indices.to_numpy(zero_copy_only=False)
        # The category depends on the name only for "[memory]": map per distinct pair.
        pairs = Counter(zip(cats, (name_text[i] for i in name_idx), strict=True))
        mapped = {p: map_category(*p) for p in pairs}
        categories = [mapped[p] for p in zip(cats, (name_text[i] for i in name_idx),
                                                  strict=True)]
        is_mem = np.array([c == "host.memory" for c in categories], dtype=bool)
        mem_bytes = [a.get("Bytes") if m and type(a) is dict else None
                     for a, m in zip(args, is_mem, strict=True)]
        pid = self._ids([e.get("pid") for e in evs], "pid", ph)
        tid = self._ids([e.get("tid") for e in evs], "tid", ph)
        mem_arr, bad = ints(mem_bytes)
        if bad:
            self._warn(f"{ph}:[memory]", "args.Bytes is not an integer in range (null)", bad)
        instants = pa.table({
            "kind": _constant(len(evs), "instant"),
            "category": pa.array(categories, type=pa.string()).dictionary_encode(),
            "name": name_col,
            "ts_ns": pa.array(ts, type=pa.int64()),
            "_pid": pid,
            "_tid": tid,
            "bytes": mem_arr,
            "args": self._args_column(args, ph),
        })
        tables = [instants]
        if self.memory_counters and is_mem.any():
            tables.append(self._memory_counters(args, is_mem, ts, pid))
        return tables

    def _memory_counters(self, args: list[Any], is_mem: np.ndarray, ts: np.ndarray,
                         pid: np.ndarray) -> pa.Table:
        """'<device> memory allocated' and '... reserved' counter rows from [memory] events'
        running totals, in event order (allocated, then reserved, per event)."""
        rows = np.flatnonzero(is_mem)
        margs = [args[i] if type(args[i]) is dict else {} for i in rows]
        places = []
        for key in ("Device Type", "Device Id"):
            values, bad = ints(_arg(margs, key))
            if bad:
                self._warn("i:[memory]", f"args.{key} is not an integer (device unknown)", bad)
            places.append(values.to_pylist())
        places = list(zip(*places, strict=True))
        label = {p: "CPU" if p[0] in (0, None) else f"GPU {'?' if p[1] is None else p[1]}"
                 for p in set(places)}
        names_, values, valid = [], [], []
        for key, what in (("Total Allocated", "allocated"), ("Total Reserved", "reserved")):
            number, has = _numbers(_arg(margs, key))
            present = sum(1 for a in margs if a.get(key) is not None)
            if present > int(has.sum()):
                self._warn("i:[memory]", f"args.{key} is not a finite number (no counter "
                           "row)", present - int(has.sum()))
            names_.append(pa.array([f"{label[p]} memory {what}" for p in places],
                                   type=pa.string()).to_numpy(zero_copy_only=False))
            values.append(number)
            valid.append(has)
        # Interleave the two series row by row, then keep the values present.
        keep = np.stack(valid, axis=1).ravel()
        count = int(keep.sum())
        self.out.note("derived from [memory] events", "counter rows (allocated, reserved)",
                      count)
        return pa.table({
            "kind": _constant(count, "counter"),
            "category": _constant(count, "counter.memory"),
            "name": pa.array(np.stack(names_, axis=1).ravel()[keep],
                             type=pa.string()).dictionary_encode(),
            "ts_ns": pa.array(np.repeat(ts[rows], 2)[keep], type=pa.int64()),
            "_pid": pa.array(np.repeat(pid[rows], 2)[keep], type=pa.int64()),
            "value": pa.array(np.stack(values, axis=1).ravel()[keep], type=pa.float64()),
        })

    # -- C ---------------------------------------------------------------------------------
    def _counters(self, evs: list[dict[str, Any]]) -> pa.Table:
        cats = self._cats(evs, "C")
        ts, ok = self._times([e.get("ts") for e in evs], self.base_ns)
        if not ok.all():
            self._count("C", cats, ~ok, NO_TS)
            evs, cats, ts = list(compress(evs, ok)), list(compress(cats, ok)), ts[ok]
        name_col, args = self._fields(evs, "C")
        event_names = name_col.to_pylist()
        names_, values, idx = [], [], []
        empty = np.zeros(len(evs), dtype=bool)
        not_finite = 0
        for i, series in enumerate(args):
            numeric = {k: v for k, v in series.items()
                       if type(v) in (int, float, Decimal)} if series else {}
            kept = 0
            for key, value in numeric.items():
                number = float(value)
                if not np.isfinite(number):
                    not_finite += 1
                    continue
                name = event_names[i]
                names_.append(name if len(numeric) == 1 else f"{name} {key}")
                values.append(number)
                idx.append(i)
                kept += 1
            empty[i] = not kept
        if not_finite:
            self._warn("C", "a series value is NaN, infinite or too large (no row)", not_finite)
        self._count("C", cats, empty, "skipped: no finite numeric series in args")
        self._count("C", cats, ~empty, "counter rows (one per series)")
        rows = np.array(idx, dtype=np.int64)
        mapped = {c: map_category(c) for c in set(cats)}
        cat_of = [mapped[cats[i]] for i in idx]
        cat_of = [c if c.startswith("counter.") else "counter.trace" for c in cat_of]
        pids = self._ids([e.get("pid") for e in evs], "pid", "C")
        return pa.table({
            "kind": _constant(len(idx), "counter"),
            "category": pa.array(cat_of, type=pa.string()).dictionary_encode(),
            "name": pa.array(names_, type=pa.string()).dictionary_encode(),
            "ts_ns": pa.array(ts[rows], type=pa.int64()),
            "_pid": pa.array(pids[rows], type=pa.int64()),
            "value": pa.array(values, type=pa.float64()),
        })

    # -- M ---------------------------------------------------------------------------------
    def _metadata_events(self, events: list[dict[str, Any]], idx: np.ndarray) -> None:
        self.process_names: dict[int, str] = {}
        self.process_labels: dict[int, str] = {}
        self.thread_names: dict[tuple[int, int], str] = {}
        if not len(idx):
            return
        evs = [events[i] for i in idx]
        kinds, _ = texts([e.get("name") for e in evs])
        pids = self._ids([e.get("pid") for e in evs], "pid", "M")
        for e, name, pid in zip(evs, kinds, pids.tolist(), strict=True):
            args = e.get("args")
            args = args if type(args) is dict else {}
            value = args.get("name")
            value = str(value) if type(value) in (str, int, float) else None
            if name == "process_name" and value is not None:
                self.process_names[pid] = value
                self.out.note("M:process_name", "process names")
            elif name == "thread_name" and value is not None:
                tid = int(self._ids([e.get("tid")], "tid", "M")[0])
                self.thread_names[(pid, tid)] = value
                self.out.note("M:thread_name", "thread names")
            elif name == "process_labels" and type(args.get("labels")) is str:
                self.process_labels[pid] = args["labels"]
                self.out.note("M:process_labels", "process and device labels")
            elif name in ("process_sort_index", "thread_sort_index"):
                self.out.note(f"M:{name}", "not needed: display order hint")
            elif name in ("process_name", "thread_name", "process_labels"):
                self.out.note(f"M:{name}", "skipped: no text in args")
            else:
                self.out.note(f"M:{(name or '(no name)')[:40]}", "skipped: unknown metadata "
                              "event")

    # -- flows -----------------------------------------------------------------------------
    def _bind_flows(self, table: pa.Table, flows: list[dict[str, Any]]) -> pa.Table:
        """Attach s/f/t flow endpoints to the slice they bind to (same pid, tid and ts).

        Launch flows (ac2g) carry the correlation id, which becomes the slice's correlation
        where the tool did not record it; other flows (fwdbwd) become ``flow_id``.
        """
        n = table.num_rows
        flow_id = np.zeros(n, dtype=np.int64)
        has_flow = np.zeros(n, dtype=bool)
        if not flows:
            return table.append_column("flow_id", pa.array(flow_id, mask=~has_flow))
        out = self.out
        phs, _ = texts([e.get("ph") for e in flows])
        raw_cats, _ = texts([e.get("cat") for e in flows])
        kinds = [f"{p}:{c}" for p, c in zip(phs, raw_cats, strict=True)]
        ts, ok = self._times([e.get("ts") for e in flows], self.base_ns)
        if not ok.all():
            self._count(None, kinds, ~ok, NO_TS)
            flows, kinds, ts = list(compress(flows, ok)), list(compress(kinds, ok)), ts[ok]
            raw_cats = list(compress(raw_cats, ok))
        cats = [(c or "").lower() for c in raw_cats]
        ids, _ = ints([e.get("id") for e in flows])
        id_ok = ids.is_valid().to_numpy(zero_copy_only=False)
        id_arr = ids.fill_null(-1).to_numpy()
        ftab = pa.table({
            "_pid": self._ids([e.get("pid") for e in flows], "pid", "flows"),
            "_tid": self._ids([e.get("tid") for e in flows], "tid", "flows"),
            "ts_ns": pa.array(ts, type=pa.int64()),
            "_flow": pa.array(np.arange(len(flows), dtype=np.int64)),
            "_fid": pa.array(id_arr),
            "_launch": pa.array([c in LAUNCH_FLOWS for c in cats], type=pa.bool_()),
        })
        slices = pa.table({
            "_pid": table["_pid"], "_tid": table["_tid"], "ts_ns": table["ts_ns"],
            "_row": pa.array(np.arange(n, dtype=np.int64)),
            "_dur": pc.fill_null(table["dur_ns"], 0),
            "_kind": table["kind"].cast(pa.string()),
            "_corr": table["correlation"],
        }).filter(pc.equal(pc.field("_kind"), "slice"))
        # Among slices starting at the same instant, the one whose correlation is the flow's
        # id (a launch and the work it launched), else the innermost (shortest) one; the row
        # breaks ties. Each join is against one slice per key, so that a file repeating the
        # same events many times cannot multiply the rows.
        at = ["_pid", "_tid", "ts_ns"]
        bound = np.full(len(flows), -1, dtype=np.int64)
        innermost = _first_per_key(slices, at, ["_dur", "_row"])
        _bind(bound, ftab.join(innermost.select([*at, "_row"]), keys=at, join_type="inner"))
        by_corr = _first_per_key(slices.filter(pc.is_valid(slices["_corr"])),
                                 [*at, "_corr"], ["_dur", "_row"])
        launches = ftab.filter(pc.and_(ftab["_launch"], pa.array(id_ok))) \
            .rename_columns({"_fid": "_corr"})
        _bind(bound, launches.join(by_corr.select([*at, "_corr", "_row"]),
                                   keys=[*at, "_corr"], join_type="inner"))
        corr_valid = table["correlation"].is_valid().to_numpy(zero_copy_only=False).copy()
        corr = table["correlation"].fill_null(0).to_numpy().copy()
        ok = (bound >= 0) & id_ok
        launch = np.array([c in LAUNCH_FLOWS for c in cats], dtype=bool)
        outcome = np.full(len(flows), "skipped: flow endpoint matches no slice", dtype=object)
        outcome[~id_ok] = "skipped: no usable id (not an integer)"
        # Launch flows: their id is the correlation id of the call and of the device work.
        lrows, lids = bound[ok & launch], id_arr[ok & launch]
        fill = ~corr_valid[lrows]
        corr[lrows[fill]] = lids[fill]
        corr_valid[lrows[fill]] = True
        same = corr[lrows] == lids
        outcome[np.flatnonzero(ok & launch)] = np.where(
            fill, "correlation of the slice it binds to",
            np.where(same, "links (the slices' correlation)",
                     "skipped: flow id differs from the slice's correlation"))
        # Other flows (fwdbwd): the slice's flow_id; a second, different id cannot be kept.
        other = np.flatnonzero(ok & ~launch)
        orows, oids = bound[other], id_arr[other]
        order = np.lexsort((oids, orows))
        first = np.ones(len(order), dtype=bool)
        first[1:] = orows[order][1:] != orows[order][:-1]
        keep_id = np.repeat(oids[order][first], np.diff(np.r_[np.flatnonzero(first),
                                                               len(order)]))
        accepted = np.empty(len(order), dtype=bool)
        accepted[order] = oids[order] == keep_id
        flow_id[orows[accepted]] = oids[accepted]
        has_flow[orows[accepted]] = True
        outcome[other] = np.where(accepted, "links (flow_id of the slice it binds to)",
                                  "skipped: the slice already has another flow")
        # Account per (phase:cat, outcome) without a Python tuple per flow.
        kind = pa.array(kinds, type=pa.string()).dictionary_encode()
        result = pa.array(outcome, type=pa.string()).dictionary_encode()
        width = len(result.dictionary)
        combined = kind.indices.to_numpy().astype(np.int64) * width + \
            result.indices.to_numpy().astype(np.int64)
        codes, counts = np.unique(combined, return_counts=True)
        kinds, results = kind.dictionary.to_pylist(), result.dictionary.to_pylist()
        for code, count in zip(codes.tolist(), counts.tolist(), strict=True):
            out.note(kinds[code // width], results[code % width], count)
        idx = table.schema.get_field_index("correlation")
        table = table.set_column(idx, "correlation", pa.array(corr, mask=~corr_valid))
        return table.append_column("flow_id", pa.array(flow_id, mask=~has_flow))

    # -- devices ---------------------------------------------------------------------------
    def _device_columns(self, table: pa.Table) -> pa.Table:
        """Device rows: device from the GPU pid, stream from args or tid, pid of the launcher."""
        cat = table["category"].cast(pa.string())
        is_dev = pc.is_in(cat, pa.array(sorted(DEVICE_CATEGORIES))).to_numpy(
            zero_copy_only=False)
        pid = table["_pid"].fill_null(-1).to_numpy()
        tid_valid = table["_tid"].is_valid().to_numpy(zero_copy_only=False) & ~is_dev
        tid = table["_tid"].fill_null(-1).to_numpy()
        device = np.where(is_dev, pid, 0).astype(np.int64)
        stream = tid.copy()
        didx = np.flatnonzero(is_dev)
        # args.device/stream are the tool's own ids; a GPU pid can be remapped (TraceLens
        # merges ranks as pid = rank * 1e8 + device), so the args win where present.
        for column, key in ((stream, "_arg_stream"), (device, "_arg_device")):
            has = table[key].is_valid().to_numpy(zero_copy_only=False)
            column[:] = np.where(has, table[key].fill_null(0).to_numpy(), column)
        # Rows without args.device (gpu_user_annotation) take the device that the same GPU pid
        # maps to on the rows that have it, so one GPU never appears under two ids.
        has_dev = table["_arg_device"].is_valid().to_numpy(zero_copy_only=False) & is_dev
        pairs = np.unique(np.stack([pid[has_dev], device[has_dev]]), axis=1)
        pids, counts = np.unique(pairs[0], return_counts=True)
        unambiguous = pairs[:, np.isin(pairs[0], pids[counts == 1])]
        fill = is_dev & ~has_dev & np.isin(pid, unambiguous[0])
        if fill.any():
            device[fill] = unambiguous[1][np.searchsorted(unambiguous[0], pid[fill])]
        # Old traces name GPU threads "stream 7"; they arrive here as synthetic ids.
        named = didx[stream[didx] <= SYNTHETIC_ID_MAX]
        ids = np.unique(stream[named])
        parsed = [_STREAM_TID.search(self.labels.get(int(i), "")) for i in ids]
        numbers = np.array([int(m.group(1)) if m else i for m, i in zip(parsed, ids,
                                                                         strict=True)],
                           dtype=np.int64)
        stream[named] = numbers[np.searchsorted(ids, stream[named])]
        # A device id must fit int32: a GPU pid that is a name or a huge number is none.
        dev_ok = is_dev & (device >= INT32[0]) & (device <= INT32[1])
        if (is_dev & ~dev_ok).any():
            self._warn("X:device work", "no device id in int32 range (device null)",
                       int((is_dev & ~dev_ok).sum()))
        # Each device seen, with the GPU pid whose process labels name it.
        ok_idx = np.flatnonzero(dev_ok)
        self.gpu_devices = dict(zip(device[ok_idx].tolist(), pid[ok_idx].tolist(),
                                    strict=True))
        launcher = _launching_pid(table, is_dev)
        out_pid = np.where(is_dev, launcher, pid)
        pid_valid = ~is_dev | (launcher >= 0)
        cols = {
            "pid": pa.array(out_pid, mask=~pid_valid),
            "tid": pa.array(tid, mask=~tid_valid),
            "device": pa.array(np.where(dev_ok, device, 0), mask=~dev_ok).cast(pa.int32()),
            "stream": pa.array(stream, mask=~is_dev),
        }
        for name, col in cols.items():
            table = table.append_column(name, col) if name not in table.column_names \
                else table.set_column(table.schema.get_field_index(name), name, col)
        return table

    def _devices_and_processes(self, table: pa.Table | None) -> None:
        out = self.out
        props = self.top.get("deviceProperties")
        vendor_hint = "amd" if any(k in self.top for k in ("roctracer_version",
                                                              "hip_runtime_version")) else None
        named = self._device_properties(props, vendor_hint)
        if table is None:
            return
        for dev, gpu_pid in sorted(getattr(self, "gpu_devices", {}).items()):
            label = self.process_labels.get(gpu_pid) or self.process_names.get(gpu_pid)
            out.add_device(int(dev), kind="gpu", vendor=vendor_hint,
                           name=None if int(dev) in named else label)
        rank = _rank(self.top)
        host = self.top.get("host_name") if isinstance(self.top.get("host_name"), str) else None
        host_rows = table.filter(pc.is_valid(table["tid"]))
        pairs = host_rows.group_by(["pid", "tid"]).aggregate([]).to_pylist()
        host_pids = set(pc.unique(table.filter(pc.invert(pc.is_in(
            table["category"].cast(pa.string()), pa.array(sorted(DEVICE_CATEGORIES)))))["pid"]
            .drop_null()).to_pylist())
        for pid in sorted(host_pids):
            name = self.process_names.get(pid) or self.labels.get(pid)
            out.add_process(pid, name=name, host=host, rank=rank)
        for p in pairs:
            out.add_thread(p["pid"], p["tid"], name=self.thread_names.get((p["pid"], p["tid"]))
                           or self.labels.get(p["tid"]))

    def _device_properties(self, props: Any, vendor_hint: str | None) -> set[int]:
        """Add the devices of ``deviceProperties``; return the ids that have a name."""
        if props is None:
            return set()
        if type(props) is not list:
            self.out.note("deviceProperties", "skipped: not a list")
            return set()
        named: set[int] = set()
        skipped = odd = 0
        for p in props:
            device = as_int(p.get("id")) if type(p) is dict else None
            if device is None or not INT32[0] <= device <= INT32[1]:
                skipped += 1
                continue
            fields = {k: p.get(k) for k in ("name", "gcnArchName")}
            fields.update({k: as_int(p.get(k)) for k in ("numSms", "totalGlobalMem",
                                                           "computeMajor", "computeMinor")})
            for k in ("name", "gcnArchName"):
                if fields[k] is not None and type(fields[k]) is not str:
                    fields[k] = None
            if fields["numSms"] is not None and not 0 <= fields["numSms"] <= INT32[1]:
                fields["numSms"] = None
            if fields["totalGlobalMem"] is not None and \
                    not 0 <= fields["totalGlobalMem"] <= INT64[1]:
                fields["totalGlobalMem"] = None
            odd += sum(1 for k, v in fields.items() if v is None and p.get(k) is not None)
            name = fields["name"]
            if name:
                named.add(device)
            vendor = vendor_hint or ("amd" if name and any(a in name for a in _AMD_NAMES)
                                     else "nvidia")
            major, minor = fields["computeMajor"], fields["computeMinor"]
            cc = f"{major}.{minor}" if major is not None and minor is not None else None
            self.out.add_device(device, name=name, vendor=vendor, kind="gpu",
                                sm_count=fields["numSms"],
                                memory_bytes=fields["totalGlobalMem"],
                                compute_capability=fields["gcnArchName"] or cc)
        self.out.note("deviceProperties", "devices", len(props) - skipped)
        self.out.note("deviceProperties", "skipped: no integer id in int32 range", skipped)
        if odd:
            self._warn("deviceProperties", "a field has the wrong type or range (ignored)",
                       odd)
        return named

    def _top_metadata(self) -> None:
        top = self.top
        meta = self.out.metadata
        meta["format"] = "kineto"
        meta["tool"] = "PyTorch profiler (Kineto)"
        version = {k: top[k] for k in ("schemaVersion", "cupti_version", "cuda_runtime_version",
                                       "cuda_driver_version", "roctracer_version",
                                       "hip_runtime_version", "hip_driver_version") if k in top}
        if version:
            meta["tool_version"] = ", ".join(f"{k} {v}" for k, v in version.items())
        if self.base_ns:
            meta["clock"] = ("system clock, ns since the Unix epoch "
                             "(baseTimeNanoseconds + relative µs)")
            meta["base_time_ns"] = self.base_ns
        elif getattr(self, "base_unusable", False):
            meta["clock"] = "relative µs from an unknown start (baseTimeNanoseconds unusable)"
        else:
            meta["clock"] = "as written: absolute µs (system clock since the Unix epoch)"
        dist = top.get("distributedInfo")
        if isinstance(dist, dict) and (text := dumps(dist)):
            meta["distributed"] = orjson.loads(text)
        run = {k: v for k, v in top.items()
               if k not in ("deviceProperties", "distributedInfo", "traceEvents")
               and isinstance(v, (str, int, float, bool, Decimal))}
        if run and (text := dumps(run)):
            meta["run"] = orjson.loads(text)



def _first_per_key(table: pa.Table, keys: list[str], order: list[str]) -> pa.Table:
    """The first row of each distinct ``keys`` value, ``order`` deciding which is first."""
    table = table.sort_by([(k, "ascending") for k in [*keys, *order]])
    first = np.ones(table.num_rows, dtype=bool)
    if table.num_rows > 1:
        same = np.ones(table.num_rows - 1, dtype=bool)
        for key in keys:
            column = table[key].to_numpy()
            same &= column[1:] == column[:-1]
        first[1:] = ~same
    return table.filter(pa.array(first))


def _bind(bound: np.ndarray, joined: pa.Table) -> None:
    """Set ``bound[flow] = row`` for each (flow, row) pair of a join."""
    bound[joined["_flow"].to_numpy()] = joined["_row"].to_numpy()


def _constant(n: int, value: str) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), [value])


def _rank(top: dict[str, Any]) -> int | None:
    dist = top.get("distributedInfo")
    rank = as_int(dist.get("rank")) if isinstance(dist, dict) else None
    return rank if rank is not None and 0 <= rank <= INT64[1] else None


def _scatter(n: int, idx: np.ndarray, values: pa.Array, type_: pa.DataType) -> pa.Array:
    if len(idx) == 0:
        return pa.nulls(n, type_)
    full = np.zeros(n, dtype=np.int64)
    mask = np.ones(n, dtype=bool)
    full[idx] = values.fill_null(0).to_numpy(zero_copy_only=False)
    mask[idx] = ~values.is_valid().to_numpy(zero_copy_only=False)
    return pa.array(full, mask=mask).cast(type_)


def _copy_kinds(names: pa.ChunkedArray | pa.DictionaryArray, idx: np.ndarray,
                n: int) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Parse 'Memcpy HtoD (Pinned -> Device)' and 'Memset (Device)', once per distinct name."""
    if len(idx) == 0:
        empty = pa.nulls(n, pa.string()).dictionary_encode()
        return empty, empty, empty
    names = names.combine_chunks() if isinstance(names, pa.ChunkedArray) else names
    codes = names.indices.to_numpy(zero_copy_only=False)
    used = np.unique(codes[idx])
    values = names.dictionary.take(pa.array(used)).to_pylist()
    parsed = []
    for name in values:
        m = _MEMCPY_NAME.search(name or "")
        if m:
            parsed.append((m.group(1), m.group(2), m.group(3)))
        else:
            s = _MEMSET_NAME.search(name or "")
            parsed.append((None, None, s.group(1) if s else None))
    remap = np.zeros(len(names.dictionary), dtype=np.int32)
    remap[used] = np.arange(len(used), dtype=np.int32)
    out = []
    for k in range(3):
        distinct = sorted({p[k] for p in parsed if p[k] is not None})
        position = {v: i for i, v in enumerate(distinct)}
        entry_code = np.array([position.get(p[k], -1) for p in parsed], dtype=np.int32)
        row_code = np.full(n, -1, dtype=np.int32)
        row_code[idx] = entry_code[remap[codes[idx]]]
        out.append(pa.DictionaryArray.from_arrays(
            pa.array(np.maximum(row_code, 0), mask=row_code < 0), pa.array(distinct,
                                                                          type=pa.string())))
    return out[0], out[1], out[2]


def _launching_pid(table: pa.Table, is_dev: np.ndarray) -> np.ndarray:
    """For each device row, the pid of the host API call with the same correlation (else -1)."""
    corr = table["correlation"]
    valid = corr.is_valid().to_numpy(zero_copy_only=False)
    c = corr.fill_null(-1).to_numpy(zero_copy_only=False)
    pid = table["_pid"].fill_null(-1).to_numpy()
    cat = table["category"].cast(pa.string())
    is_api = pc.starts_with(cat, "api.").to_numpy(zero_copy_only=False) & valid
    result = np.full(len(c), -1, dtype=np.int64)
    if not is_api.any():
        return result
    api_c, first = np.unique(c[is_api], return_index=True)
    api_pid = pid[is_api][first]
    want = is_dev & valid
    pos = np.searchsorted(api_c, c[want])
    pos = np.clip(pos, 0, len(api_c) - 1)
    hit = api_c[pos] == c[want]
    result[np.flatnonzero(want)[hit]] = api_pid[pos[hit]]
    return result
