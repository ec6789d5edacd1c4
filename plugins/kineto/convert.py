"""Kineto trace events to tracekit event columns, one column at a time."""

from __future__ import annotations

import re
from collections import Counter
from decimal import Decimal
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.builder import TraceBuilder
from tracekit.inputs import Source
from tracekit.plugins.kineto.categories import (
    DEVICE_CATEGORIES,
    LAUNCH_FLOWS,
    map_category,
)
from tracekit.plugins.kineto.timestamps import us_to_ns

_STREAM_TID = re.compile(r"stream\s+(\d+)", re.IGNORECASE)
_MEMCPY_NAME = re.compile(r"Memcpy\s+(\w+)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.IGNORECASE)
_MEMSET_NAME = re.compile(r"Memset\s*\((\w+)\)", re.IGNORECASE)
_AMD_NAMES = ("AMD", "Instinct", "Radeon", "gfx")
# Columns every kind of row has while converting (a trace may hold only instants).
_WORK_COLUMNS = {"dur_ns": pa.int64(), "correlation": pa.int64(), "_tid": pa.int64(),
                 "_arg_device": pa.int64(), "_arg_stream": pa.int64()}
# Ids for string pids/tids ("Spans", "stream 7"), far below any real (even negative) OS id.
SYNTHETIC_BASE = -(2**40)


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError


def _dumps(obj: Any) -> str | None:
    if not obj:
        return None
    return orjson.dumps(obj, default=_json_default).decode()


def _ints(values: list[Any]) -> pa.Array:
    """int64 array from JSON values; non-integers (strings, floats with fractions) become null."""
    try:
        return pa.array(values, type=pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        out = []
        for v in values:
            if isinstance(v, bool) or v is None:
                out.append(None)
            elif isinstance(v, int):
                out.append(v)
            elif _integral(v):
                out.append(int(v))
            else:
                out.append(None)
        return pa.array(out, type=pa.int64())


def _numbers(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """float64 values and a mask of which are numbers (bools and text are not)."""
    kinds = set(map(type, values))
    if kinds <= {int, float, type(None)}:
        arr = pa.array(values, type=pa.float64())
        return arr.fill_null(0).to_numpy(), arr.is_valid().to_numpy(zero_copy_only=False)
    ok = np.array([isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)
                   for v in values], dtype=bool)
    return np.array([float(v) if k else 0.0 for v, k in zip(values, ok, strict=True)]), ok


def _integral(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lstrip("-").isdigit()
    try:
        return isinstance(v, (float, Decimal)) and v == int(v)
    except (ValueError, OverflowError, ArithmeticError):  # nan, inf
        return False


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
        base = top.get("baseTimeNanoseconds")
        self.base_ns = int(base) if isinstance(base, (int, Decimal)) else 0
        self.synthetic: dict[str, int] = {}
        self.labels: dict[int, str] = {}

    # -- identities ------------------------------------------------------------------------
    def _ids(self, values: list[Any], names: dict[int, str] | None = None) -> np.ndarray:
        """pid/tid values to int64; strings get stable negative ids (named in ``labels``)."""
        if {type(v) for v in values} <= {int}:
            return np.array(values, dtype=np.int64)
        out = np.empty(len(values), dtype=np.int64)
        for i, v in enumerate(values):
            if type(v) is int:
                out[i] = v
            elif isinstance(v, str) and v.lstrip("-").isdigit():
                out[i] = int(v)
            else:
                key = str(v)
                if key not in self.synthetic:
                    self.synthetic[key] = SYNTHETIC_BASE - len(self.synthetic)
                    self.labels[self.synthetic[key]] = key or "(no pid)"
                out[i] = self.synthetic[key]
        return out

    def _times(self, values: list[Any], base: int) -> tuple[np.ndarray, np.ndarray]:
        ns, valid = us_to_ns(values)
        return ns + base, valid

    # -- main ------------------------------------------------------------------------------
    def run(self, raw_events: list[Any]) -> None:
        """Convert every event, then link flows, devices and processes."""
        out = self.out
        events = [e for e in raw_events if type(e) is dict]
        if len(events) != len(raw_events):
            out.note("non-object entries", "skipped: not a JSON object",
                     len(raw_events) - len(events))
        phases = np.array([e.get("ph") for e in events], dtype=object)
        by_phase = {p: np.flatnonzero(phases == p) for p in set(phases.tolist())}
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
            kinds = Counter(f"{ph}:{events[i].get('cat')}" for i in idx)
            for kind, n in kinds.items():
                out.note(kind, f"skipped: phase '{ph}' is not supported", n)
        tables = [t for t in tables if t.num_rows]
        table = pa.concat_tables(tables, promote_options="permissive") if tables else None
        if table is None:
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
        out = self.out
        cats_raw = [e.get("cat") for e in xs]
        cat_dict = pa.array(cats_raw, type=pa.string()).dictionary_encode()
        mapped = [map_category(c) if c is not None else "other"
                  for c in cat_dict.dictionary.to_pylist()]
        category = pa.DictionaryArray.from_arrays(cat_dict.indices, pa.array(mapped))
        for raw, n in Counter(cats_raw).items():
            out.note(f"X:{raw}", "events", n)
        names = [e.get("name") for e in xs]
        ts, ts_ok = self._times([e.get("ts") for e in xs], self.base_ns)
        dur, dur_ok = self._times([e.get("dur") for e in xs], 0)
        negative = dur < 0
        if negative.any():
            out.note("X with negative dur", "events (dur clamped to 0, as Kineto does since "
                     "2022)", int(negative.sum()))
            dur = np.where(negative, 0, dur)
        bad_ts = ~ts_ok
        if bad_ts.any():
            out.note("X without a numeric ts", "events (kept untimed, ts null)", int(bad_ts.sum()))
        args = [e.get("args") for e in xs]
        table = pa.table({
            "kind": _constant(len(xs), "slice"),
            "category": category,
            "name": _names(names),
            "ts_ns": pa.array(ts, mask=bad_ts),
            "dur_ns": pa.array(dur, mask=~dur_ok),
            "_pid": self._ids([e.get("pid") for e in xs]),
            "_tid": self._ids([e.get("tid") for e in xs]),
            "correlation": _ints(_arg(args, "correlation")),
            "args": pa.array([_dumps(a) for a in args], type=pa.string()),
            "_cat_raw": pa.array(cats_raw, type=pa.string()),
        })
        return self._typed_gpu_columns(table, args)

    def _typed_gpu_columns(self, table: pa.Table, args: list[Any]) -> pa.Table:
        cat = table["category"]
        n = table.num_rows
        is_kernel = pc.equal(cat.cast(pa.string()), "gpu.kernel").to_numpy(zero_copy_only=False)
        is_copy = pc.is_in(cat.cast(pa.string()), pa.array(["gpu.memcpy", "gpu.memset"]))\
            .to_numpy(zero_copy_only=False)
        cols: dict[str, pa.Array] = {}
        kidx = np.flatnonzero(is_kernel)
        kargs = [args[i] for i in kidx]
        for axis, pos in (("x", 0), ("y", 1), ("z", 2)):
            for key in ("grid", "block"):
                vals = [v[pos] if isinstance(v, list) and len(v) > pos else None
                        for v in _arg(kargs, key)]
                cols[f"{key}_{axis}"] = _scatter(n, kidx, _ints(vals), pa.int32())
        cols["registers"] = _scatter(n, kidx, _ints(_arg(kargs, "registers per thread")),
                                     pa.int32())
        cols["shared_mem_bytes"] = _scatter(n, kidx, _ints(_arg(kargs, "shared memory")),
                                            pa.int64())
        cidx = np.flatnonzero(is_copy)
        cols["bytes"] = _scatter(n, cidx, _ints(_arg([args[i] for i in cidx], "bytes")),
                                 pa.int64())
        copy_kind, src, dst = _copy_kinds(table["name"], cidx, n)
        cols["copy_kind"], cols["src_kind"], cols["dst_kind"] = copy_kind, src, dst
        # The tool's own device and stream ids of device rows (see _device_columns).
        didx = np.flatnonzero(pc.is_in(cat.cast(pa.string()), pa.array(sorted(
            DEVICE_CATEGORIES))).to_numpy(zero_copy_only=False))
        dargs = [args[i] for i in didx]
        cols["_arg_device"] = _scatter(n, didx, _ints(_arg(dargs, "device")), pa.int64())
        cols["_arg_stream"] = _scatter(n, didx, _ints(_arg(dargs, "stream")), pa.int64())
        for name, col in cols.items():
            table = table.append_column(name, col)
        return table

    # -- i ---------------------------------------------------------------------------------
    def _instants(self, evs: list[dict[str, Any]], ph: str) -> list[pa.Table]:
        out = self.out
        names = [e.get("name") for e in evs]
        cats_raw = [e.get("cat") for e in evs]
        categories = [map_category(c, n) for c, n in zip(cats_raw, names, strict=True)]
        for raw, n in Counter(cats_raw).items():
            out.note(f"{ph}:{raw}", "events", n)
        ts, ok = self._times([e.get("ts") for e in evs], self.base_ns)
        args = [e.get("args") for e in evs]
        is_mem = np.array([c == "host.memory" for c in categories], dtype=bool)
        mem_bytes = [a.get("Bytes") if m and type(a) is dict else None
                     for a, m in zip(args, is_mem, strict=True)]
        pid = self._ids([e.get("pid") for e in evs])
        tid = self._ids([e.get("tid") for e in evs])
        instants = pa.table({
            "kind": _constant(len(evs), "instant"),
            "category": pa.array(categories).dictionary_encode(),
            "name": _names(names),
            "ts_ns": pa.array(ts, mask=~ok),
            "_pid": pid,
            "_tid": tid,
            "bytes": _ints(mem_bytes),
            "args": pa.array([_dumps(a) for a in args], type=pa.string()),
        })
        tables = [instants]
        if self.memory_counters and is_mem.any():
            tables.append(self._memory_counters(args, is_mem, ts, ok, pid))
        return tables

    def _memory_counters(self, args: list[Any], is_mem: np.ndarray, ts: np.ndarray,
                         ok: np.ndarray, pid: np.ndarray) -> pa.Table:
        """'<device> memory allocated' and '... reserved' counter rows from [memory] events'
        running totals, in event order (allocated, then reserved, per event)."""
        rows = np.flatnonzero(is_mem & ok)
        margs = [args[i] if type(args[i]) is dict else {} for i in rows]
        places = list(zip(_arg(margs, "Device Type"), _arg(margs, "Device Id"), strict=True))
        label = {p: "CPU" if p[0] in (0, None) else f"GPU {p[1]}" for p in set(places)}
        names, values, valid = [], [], []
        for key, what in (("Total Allocated", "allocated"), ("Total Reserved", "reserved")):
            number, has = _numbers(_arg(margs, key))
            names.append(pa.array([f"{label[p]} memory {what}" for p in places],
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
            "name": pa.array(np.stack(names, axis=1).ravel()[keep],
                             type=pa.string()).dictionary_encode(),
            "ts_ns": pa.array(np.repeat(ts[rows], 2)[keep], type=pa.int64()),
            "_pid": pa.array(np.repeat(pid[rows], 2)[keep], type=pa.int64()),
            "value": pa.array(np.stack(values, axis=1).ravel()[keep], type=pa.float64()),
        })

    # -- C ---------------------------------------------------------------------------------
    def _counters(self, evs: list[dict[str, Any]]) -> pa.Table:
        names, values, idx = [], [], []
        for i, e in enumerate(evs):
            series = e.get("args")
            if type(series) is not dict:
                continue
            numeric = {k: v for k, v in series.items()
                       if isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)}
            for key, value in numeric.items():
                name = str(e.get("name", ""))
                names.append(name if len(numeric) == 1 else f"{name} {key}")
                values.append(float(value))
                idx.append(i)
        for raw, n in Counter(e.get("cat") for e in evs).items():
            self.out.note(f"C:{raw}", "counter rows (one per series)", n)
        picked = [evs[i] for i in idx]
        ts, ok = self._times([e.get("ts") for e in picked], self.base_ns)
        cats = [map_category(e.get("cat")) for e in picked]
        cats = [c if c.startswith("counter.") else "counter.trace" for c in cats]
        return pa.table({
            "kind": pa.array(["counter"] * len(picked)).dictionary_encode(),
            "category": pa.array(cats, type=pa.string()).dictionary_encode(),
            "name": pa.array(names, type=pa.string()).dictionary_encode(),
            "ts_ns": pa.array(ts, mask=~ok),
            "_pid": self._ids([e.get("pid") for e in picked]),
            "value": pa.array(values, type=pa.float64()),
        })

    # -- M ---------------------------------------------------------------------------------
    def _metadata_events(self, events: list[dict[str, Any]], idx: np.ndarray) -> None:
        self.process_names: dict[int, str] = {}
        self.process_labels: dict[int, str] = {}
        self.thread_names: dict[tuple[int, int], str] = {}
        for i in idx:
            e = events[i]
            name, args = e.get("name"), e.get("args") or {}
            pid = int(self._ids([e.get("pid")])[0])
            value = args.get("name") if type(args) is dict else None
            if name == "process_name" and value is not None:
                self.process_names[pid] = str(value)
                self.out.note("M:process_name", "process names")
            elif name == "thread_name" and value is not None:
                tid = int(self._ids([e.get("tid")])[0])
                self.thread_names[(pid, tid)] = str(value)
                self.out.note("M:thread_name", "thread names")
            elif name == "process_labels" and type(args) is dict:
                self.process_labels[pid] = str(args.get("labels"))
                self.out.note("M:process_labels", "process and device labels")
            elif name in ("process_sort_index", "thread_sort_index"):
                self.out.note(f"M:{name}", "not needed: display order hint")
            else:
                self.out.note(f"M:{name}", "skipped: unknown metadata event")

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
        cats = [str(e.get("cat", "")).lower() for e in flows]
        ts, ok = self._times([e.get("ts") for e in flows], self.base_ns)
        ids = _ints([e.get("id") for e in flows])
        id_ok = ids.is_valid().to_numpy(zero_copy_only=False)
        id_arr = ids.fill_null(-1).to_numpy()
        ftab = pa.table({
            "_pid": self._ids([e.get("pid") for e in flows]),
            "_tid": self._ids([e.get("tid") for e in flows]),
            "ts_ns": pa.array(ts, mask=~ok),
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
        joined = ftab.join(slices, keys=["_pid", "_tid", "ts_ns"], join_type="inner")
        # Among slices starting at the same instant, the one whose correlation is the flow's
        # id (a launch and the work it launched), else the innermost (shortest) one.
        same = pc.fill_null(pc.equal(joined["_corr"], joined["_fid"]), False)
        other_id = pc.invert(pc.and_(joined["_launch"], same))
        joined = joined.append_column("_other", other_id).sort_by(
            [("_flow", "ascending"), ("_other", "ascending"), ("_dur", "ascending"),
             ("_row", "ascending")])  # the last key: independent of the join's output order
        flow_idx = joined["_flow"].to_numpy()
        rows = joined["_row"].to_numpy()
        first = np.ones(len(flow_idx), dtype=bool)
        first[1:] = flow_idx[1:] != flow_idx[:-1]
        bound = np.full(len(flows), -1, dtype=np.int64)
        bound[flow_idx[first]] = rows[first]
        corr_valid = table["correlation"].is_valid().to_numpy(zero_copy_only=False).copy()
        corr = table["correlation"].fill_null(0).to_numpy().copy()
        ok = (bound >= 0) & id_ok
        launch = np.array([c in LAUNCH_FLOWS for c in cats], dtype=bool)
        outcome = np.full(len(flows), "skipped: flow endpoint matches no slice", dtype=object)
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
        kind = pa.array([f"{e.get('ph')}:{e.get('cat')}" for e in flows]).dictionary_encode()
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
        named = didx[stream[didx] <= SYNTHETIC_BASE]
        ids = np.unique(stream[named])
        parsed = [_STREAM_TID.search(self.labels.get(int(i), "")) for i in ids]
        numbers = np.array([int(m.group(1)) if m else i for m, i in zip(parsed, ids,
                                                                         strict=True)],
                           dtype=np.int64)
        stream[named] = numbers[np.searchsorted(ids, stream[named])]
        # Each device seen, with the GPU pid whose process labels name it.
        self.gpu_devices = dict(zip(device[didx].tolist(), pid[didx].tolist(), strict=True))
        launcher = _launching_pid(table, is_dev)
        out_pid = np.where(is_dev, launcher, pid)
        pid_valid = ~is_dev | (launcher >= 0)
        cols = {
            "pid": pa.array(out_pid, mask=~pid_valid),
            "tid": pa.array(tid, mask=~tid_valid),
            "device": pa.array(device, mask=~is_dev).cast(pa.int32()),
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
        named: set[int] = set()
        for p in props if isinstance(props, list) else []:
            if not isinstance(p, dict) or not isinstance(p.get("id"), int):
                continue
            name = p.get("name")
            if name:
                named.add(p["id"])
            vendor = vendor_hint or ("amd" if isinstance(name, str) and any(
                a in name for a in _AMD_NAMES) else "nvidia")
            cc = (f"{p['computeMajor']}.{p['computeMinor']}"
                  if "computeMajor" in p and "computeMinor" in p else None)
            out.add_device(p["id"], name=name, vendor=vendor, kind="gpu",
                           sm_count=p.get("numSms"), memory_bytes=p.get("totalGlobalMem"),
                           compute_capability=p.get("gcnArchName", cc))
        if props:
            out.note("deviceProperties", "devices", len(props) if isinstance(props, list) else 1)
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
        else:
            meta["clock"] = "as written: absolute µs (system clock since the Unix epoch)"
        dist = top.get("distributedInfo")
        if isinstance(dist, dict):
            meta["distributed"] = orjson.loads(orjson.dumps(dist, default=_json_default))
        run = {k: v for k, v in top.items()
               if k not in ("deviceProperties", "distributedInfo", "traceEvents")
               and isinstance(v, (str, int, float, bool, Decimal))}
        if run:
            meta["run"] = orjson.loads(orjson.dumps(run, default=_json_default))



def _constant(n: int, value: str) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), [value])


def _rank(top: dict[str, Any]) -> int | None:
    dist = top.get("distributedInfo")
    if isinstance(dist, dict) and isinstance(dist.get("rank"), int):
        return int(dist["rank"])
    return None


def _names(values: list[Any]) -> pa.DictionaryArray:
    try:
        arr = pa.array(values, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        arr = pa.array(["" if v is None else str(v) for v in values], type=pa.string())
    return pc.fill_null(arr, "").dictionary_encode()


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
