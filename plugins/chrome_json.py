"""Writer for Chrome trace JSON (``.json``, ``.json.gz``), the format chrome://tracing,
Perfetto, and the PyTorch profiler's own tools open.

Events follow the PyTorch profiler's conventions, so that tracekit's kineto reader (and HTA or
TensorBoard) read the output back: Kineto category names, GPU work on pid = device and
tid = stream, ``args.correlation`` plus ``ac2g`` flows from launches to device work, ``fwdbwd``
flows for ``flow_id``, and timestamps in µs relative to ``baseTimeNanoseconds`` so that they
keep their nanoseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit.errors import EmptyOutputError
from tracekit.links import launch_links
from tracekit.model import Trace

# tracekit category -> Kineto cat; others are written as the tracekit category itself.
KINETO_CATEGORY = {
    "gpu.kernel": "kernel", "gpu.memcpy": "gpu_memcpy", "gpu.memset": "gpu_memset",
    "gpu.sync": "cuda_sync", "gpu.annotation": "gpu_user_annotation",
    "api.runtime": "cuda_runtime", "api.driver": "cuda_driver", "host.op": "cpu_op",
    "host.annotation": "user_annotation", "host.python": "python_function",
    "host.profiler": "Trace", "host.overhead": "overhead", "host.instant": "cpu_instant_event",
    "host.memory": "cpu_instant_event",
}
_CHUNK = 50_000


def _us(ns: int) -> float:
    # Relative µs below 2**43 survive the float: the reader recovers the exact ns.
    return ns / 1000


class ChromeJsonWriter(tracekit.Writer):
    """Chrome trace JSON: X, i, C, s/f and M events, Kineto-compatible."""

    name = "chrome-json"
    description = "Chrome trace JSON, Kineto-compatible (chrome://tracing, Perfetto, HTA)"
    extensions = (".json", ".json.gz")

    @dataclass(frozen=True)
    class Options:
        args: bool = field(default=True, metadata={"help": "write each event's args"})
        flows: bool = field(default=True, metadata={"help": "write ac2g and fwdbwd flows"})

    def write(self, trace: Trace, stream: IO[bytes]) -> tracekit.WriteResult:
        result = tracekit.WriteResult()
        ev = trace.events
        kind = ev["kind"].cast(pa.string())
        is_counter = pc.equal(kind, "counter")
        checks = [
            (pc.invert(pc.is_in(kind, pa.array(["slice", "instant", "counter", "sample"]))),
             "events of an unknown kind"),
            (pc.is_null(ev["ts_ns"]), "untimed aggregate rows (no timestamp)"),
            (pc.equal(kind, "sample"), "CPU samples (call stacks are not written yet)"),
            (pc.and_(is_counter, pc.invert(pc.fill_null(pc.is_finite(ev["value"]), False))),
             "counter rows without a finite value"),
        ]
        keep = pa.array(np.ones(ev.num_rows, dtype=bool))
        for mask, reason in checks:
            mask = pc.and_(pc.fill_null(mask, False), keep)
            n = pc.sum(mask).as_py() or 0
            if n:
                result.skipped[reason] += n
            keep = pc.and_(keep, pc.invert(mask))
        ev = ev.filter(keep)
        if not ev.num_rows:
            raise EmptyOutputError(_nothing_to_write(trace.events, result))
        base = int(pc.min(ev["ts_ns"]).as_py())
        device_pid = _device_pids(trace, ev)
        stream.write(b'{"schemaVersion": 1, "displayTimeUnit": "ns", "baseTimeNanoseconds": '
                     + str(base).encode() + b', "traceEvents": [\n')
        first = True
        for chunk in self._chunks(trace, ev, base, device_pid, result):
            if chunk:
                stream.write((b"" if first else b",\n") + b",\n".join(chunk))
                first = False
        tail = {"tracekit": {"sources": list(trace.metadata.get("sources", {}))}}
        stream.write(b"\n], " + orjson.dumps(tail)[1:] + b"\n")
        return result

    def _chunks(self, trace: Trace, ev: pa.Table, base: int, device_pid: dict[Any, int],
                result: tracekit.WriteResult) -> Any:
        yield [orjson.dumps(m) for m in _metadata_events(trace, device_pid)]
        flows = _Flows(ev) if self.options.flows else None
        for lo in range(0, ev.num_rows, _CHUNK):
            part = ev.slice(lo, _CHUNK)
            out = []
            for i, row in enumerate(part.to_pylist()):
                ends = flows.at(lo + i) if flows is not None else ()
                out.extend(self._event(row, base, device_pid, ends, result))
            yield [orjson.dumps(e) for e in out]

    def _event(self, row: dict[str, Any], base: int, device_pid: dict[Any, int],
               flows: tuple[tuple[str, str, int], ...],
               result: tracekit.WriteResult) -> list[dict[str, Any]]:
        category = row["category"]
        on_device = row["device"] is not None
        pid = device_pid[(row["source"], row["device"])] if on_device else row["pid"]
        tid = row["stream"] if on_device else row["tid"]
        ts = _us(row["ts_ns"] - base)
        e: dict[str, Any] = {"ph": "X", "cat": KINETO_CATEGORY.get(category, category),
                             "name": row["name"], "pid": pid if pid is not None else "",
                             "tid": tid if tid is not None else "", "ts": ts}
        args = _args(row["args"]) if row["args"] and self.options.args else {}
        for key in ("correlation", "bytes", "device", "stream"):
            if row[key] is not None and key not in args:
                args[key] = row[key]
        kind = row["kind"]
        if kind == "slice":
            e["dur"] = _us(row["dur_ns"] or 0)
            result.written["X events"] += 1
        elif kind == "instant":
            e["ph"], e["s"] = "i", "t"
            if category == "host.memory" and "Bytes" not in args and row["bytes"] is not None:
                args["Bytes"] = row["bytes"]
            result.written["i events"] += 1
        else:  # counter (the only kind left): process-scoped, Kineto writes a tid all the same
            e["ph"], e["tid"] = "C", 0
            args = {row["name"]: row["value"]}
            result.written["C events"] += 1
        if args:
            e["args"] = args
        out = [e]
        for ph, cat, fid in flows:
            f = {"ph": ph, "id": fid, "pid": e["pid"], "tid": e["tid"], "ts": ts, "cat": cat,
                 "name": cat}
            if ph == "f":
                f["bp"] = "e"
            out.append(f)
            result.written["flow events"] += 1
        return out


def _args(text: str) -> dict[str, Any]:
    """An event's args as a dict; text that is not a JSON object is kept under "args"."""
    try:
        args = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {"args": text}
    return args if isinstance(args, dict) else {"args": args}


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
    keys = sorted({(r["source"], r["device"]) for r in pairs.group_by(["source", "device"])
                   .aggregate([]).to_pylist()})
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
    for (source, device), pid in sorted(device_pid.items(), key=lambda kv: kv[1]):
        label = f"GPU {device}"
        out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                    "args": {"name": f"{label}: {names.get((source, device)) or '?'}"}})
        out.append({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0,
                    "args": {"labels": label}})
    return out


class _Flows:
    """Flow endpoints per row, as columns: ``ac2g`` from a launch to its device work (id: the
    correlation, the host call unique for its key), and ``fwdbwd`` between rows sharing
    ``flow_id`` (the earliest one starts the flow)."""

    def __init__(self, ev: pa.Table) -> None:
        slices = pc.equal(ev["kind"].cast(pa.string()), "slice").to_numpy(zero_copy_only=False)
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

    def at(self, row: int) -> tuple[tuple[str, str, int], ...]:
        """The flow endpoints to write after event ``row``."""
        out = []
        if self.launch[row]:
            out.append(("f" if self.launch_end[row] else "s", "ac2g",
                        int(self.launch_id[row])))
        if self.fwd[row]:
            out.append(("s" if self.fwd_start[row] else "f", "fwdbwd", int(self.fwd_id[row])))
        return tuple(out)


@tracekit.hookimpl
def register_writers(register: Any) -> None:
    register(ChromeJsonWriter)
