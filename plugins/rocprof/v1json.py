"""rocprof v1 ``results.json``: a Chrome trace with its own conventions (formats.md 2.1).

It opens with an empty first event; ``ts``/``dur`` may be strings (µs from the run's start),
while ``args.BeginNs``/``args.EndNs`` hold the exact ns; "pids" are section ids named by
metadata events (``CPU HIP API``, ``COPY``, ``GPU<n>``, ``GPU Barriers<n>``, ``Markers and
Ranges``), the process being in ``args.pid`` or ``args.proc-id``; flows go from ``s`` on the
launching call to ``t`` on the device work, with ``cat: DataFlow``.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections import defaultdict
from typing import Any

import orjson
from tracekit.plugins.rocprof.v1 import COPY_WORDS, size_of_call, work_category

SECTION_CATEGORY = (("CPU HIP API", "api.runtime"), ("CPU HSA API", "api.driver"),
                    ("COPY", "gpu.memcpy"), ("GPU Barriers", "gpu.sync"), ("GPU", "gpu.kernel"),
                    ("Markers and Ranges", "host.annotation"))
GPU_INDEX = re.compile(r"(\d+)$")
# HIP copies and memsets that return when their work is done (not the ``Async`` ones).
_SYNC_COPY = re.compile(r"hip(?:Memcpy|Memset)(?!\w*Async)\w*")
_KIND = re.compile(r"\bkind\((\w+)\)")


_INT64 = 1 << 63


class BadEvent(ValueError):
    """Event ``index`` of traceEvents has a value no trace can hold."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


# The args that hold ids: where one is no integer, the event is kept without it (counted).
_ID_ARGS = ("pid", "proc-id", "tid", "dev-id", "stream-id", "queue-id")


def _int(value: Any) -> int | None:
    """An id or count written as a number or as text; None when it is neither (or out of
    the 64-bit range, which only damage produces)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and len(value) < 32:
        try:
            number = int(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if -_INT64 <= number < _INT64 else None


def _exact_ns(index: int, args: dict[str, Any], key: str) -> int | None:
    """``args.BeginNs``/``EndNs``: absent is None (the µs fields then serve); present and
    not an integer, or beyond 64 bits, is an error."""
    value = args.get(key)
    if value is None or value == "":
        return None
    number = _int(value)
    if number is None:
        raise BadEvent(index, f"args.{key} is not a 64-bit integer: {_shown(value)}")
    return number


def _micros(index: int, event: dict[str, Any], key: str) -> float:
    """``ts``/``dur`` in µs (numbers or text); 0 when absent."""
    value = event.get(key, 0)
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or abs(number) * 1000 >= _INT64:
        raise BadEvent(index, f"{key} is not a time in µs that fits 64 bits of ns: "
                       f"{_shown(value)}")
    return number


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def is_v1_json(head: bytes) -> bool:
    """Whether the start of a file looks like rocprof v1's results.json."""
    text = head.lstrip()[:4096]
    return text.startswith(b"{") and b'"traceEvents"' in text and (
        b'"BeginNs"' in head or b'"CPU HIP API"' in head or b'"DataFlow"' in head)


def convert(doc: dict[str, Any]) -> tuple[dict[str, list[Any]], dict[str, int]]:
    """Event columns and counts of what was set aside; BadEvent for a value no trace can
    hold."""
    events = doc.get("traceEvents") or []
    if not isinstance(events, list):
        raise BadEvent(-1, "traceEvents is not a list")
    sections = {_int(e.get("pid")): str(_args(e).get("name", ""))
                for e in events if isinstance(e, dict) and e.get("ph") == "M"
                and e.get("name") == "process_name"}
    cols: dict[str, list[Any]] = defaultdict(list)
    counts = {"empty records": 0, "unknown records": 0, "metadata records": 0,
              "flow endpoints": 0, "args that are not an object": 0,
              "ids that are not integers": 0}
    rows_at: dict[tuple[int | None, int | None], list[int]] = defaultdict(list)
    spans: list[tuple[int, int]] = []
    for index, e in enumerate(events):
        if not isinstance(e, dict) or not e:
            counts["empty records" if e == {} else "unknown records"] += 1
            continue
        ph = e.get("ph")
        if ph == "M":
            counts["metadata records"] += 1
            continue
        if ph != "X":
            if ph in ("s", "t", "f"):
                counts["flow endpoints"] += 1
            else:
                counts["unknown records"] += 1
            continue
        args = _args(e)
        if args is not e.get("args") and e.get("args") not in (None, ""):
            counts["args that are not an object"] += 1
        ids = (e.get("pid"), e.get("tid"), *(args.get(k) for k in _ID_ARGS))
        if any(v not in (None, "") and _int(v) is None for v in ids):
            counts["ids that are not integers"] += 1
        section_id = _int(e.get("pid"))
        section = sections.get(section_id, "")
        category = next((c for prefix, c in SECTION_CATEGORY if section.startswith(prefix)),
                        "other")
        name = _text(e.get("name")) or _text(args.get("Name"))
        if category in ("gpu.kernel", "gpu.memcpy"):
            category = work_category(name, category)
        ts_us, dur_us = _micros(index, e, "ts"), _micros(index, e, "dur")
        begin, end = _exact_ns(index, args, "BeginNs"), _exact_ns(index, args, "EndNs")
        if begin is None or end is None:  # no exact ns: the µs fields
            begin = round(ts_us * 1000)
            end = begin + round(dur_us * 1000)
        if not -_INT64 <= end - begin < _INT64:
            raise BadEvent(index, f"EndNs - BeginNs overflows 64 bits: {end} - {begin}")
        pid = _int(args.get("proc-id"))
        if pid is None and _int(args.get("pid")) not in (None, section_id):
            pid = _int(args.get("pid"))
        device = None
        if category.startswith("gpu."):
            device = _int(args.get("dev-id"))
            if device is None and (m := GPU_INDEX.search(section)):
                device = int(m.group(1)) if len(m.group(1)) < 10 else None
            if device is not None and not -(1 << 31) <= device < 1 << 31:
                raise BadEvent(index, f"args.dev-id does not fit 32 bits: {device}")
        instant = category == "host.annotation" and end - begin <= 1
        row = len(cols["kind"])
        cols["kind"].append("instant" if instant else "slice")
        cols["category"].append(category)
        cols["name"].append(name)
        cols["ts_ns"].append(begin)
        cols["dur_ns"].append(None if instant else end - begin)
        cols["pid"].append(pid)
        cols["tid"].append(_int(args.get("tid")) if device is None else None)
        cols["device"].append(device)
        cols["stream"].append(_int(args.get("stream-id", args.get("queue-id")))
                              if device is not None else None)
        cols["correlation"].append(None)
        cols["copy_kind"].append(_copy_kind(name) if category == "gpu.memcpy" else None)
        cols["bytes"].append(None)
        # args.pid and args.tid that repeat the row's own ids (or the section's) are left
        # out: kept, the text "19147" beside the column 19147 takes the name a writer
        # carries the column under, and the launching process of device work would be lost
        # on a round trip through tracekit's outputs.
        repeated = {k for k, own in (("pid", (cols["pid"][row], section_id)),
                                     ("tid", (cols["tid"][row],)))
                    if k in args and _int(args[k]) in own}
        cols["args"].append(_args_json(args, repeated))
        rows_at[(section_id, _int(e.get("tid")))].append(row)
        spans.append((round(ts_us), round(ts_us) + round(dur_us)))
    _bind_flows(events, cols, rows_at, spans)
    # A host thread's calls and markers all belong to the process its linked calls showed.
    known: dict[int, list[int]] = defaultdict(list)
    for r, (pid, tid) in enumerate(zip(cols["pid"], cols["tid"], strict=True)):
        if pid is not None and tid is not None and cols["device"][r] is None:
            known[tid].append(pid)
    for r, tid in enumerate(cols["tid"]):
        if cols["pid"][r] is None and cols["device"][r] is None and known.get(tid):
            cols["pid"][r] = max(set(known[tid]), key=known[tid].count)
    return dict(cols), counts


def _args(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _text(value: Any) -> str:
    """A name as text (numbers as written; anything else is no name)."""
    if isinstance(value, str):
        return value
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else ""


def _bind_flows(events: list[Any], cols: dict[str, list[Any]],
                rows_at: dict[tuple[int | None, int | None], list[int]],
                spans: list[tuple[int, int]]) -> None:
    """A flow id links the call containing its ``s`` to the work starting at each of its
    ``t`` ends: they get the id as correlation, and the work takes the call's process (or
    the call the work's, where only the work names it)."""
    calls: dict[Any, int] = {}
    call_thread: dict[Any, tuple[int | None, int | None]] = {}
    works: dict[Any, list[int]] = defaultdict(list)
    for index, e in enumerate(events):
        if isinstance(e, dict) and e.get("ph") in ("s", "t", "f"):
            flow_id = _int(e.get("id"))
            if flow_id is None:
                continue
            key = (_int(e.get("pid")), _int(e.get("tid")))
            ts = round(_micros(index, e, "ts"))
            candidates = [r for r in rows_at.get(key, []) if spans[r][0] <= ts <= spans[r][1]]
            if not candidates:
                continue
            row = min(candidates, key=lambda r: (spans[r][0] != ts, spans[r][1] - spans[r][0]))
            if e.get("ph") == "s":
                calls[flow_id] = row
                call_thread[flow_id] = key
            else:  # one id can end on several ops: a memset done as two fills
                works[flow_id].append(row)
    threads: dict[tuple[int | None, int | None], _Thread] = {}
    for flow_id, call in calls.items():
        if works.get(flow_id) and _SYNC_COPY.fullmatch(cols["name"][call] or ""):
            key = call_thread[flow_id]
            if key not in threads:
                threads[key] = _Thread(cols, rows_at[key])
            calls[flow_id] = _holding_call(cols, call, works[flow_id], threads[key])
    launched_by: dict[int, list[int]] = defaultdict(list)
    for flow_id, call in calls.items():
        if flow_id not in works:
            continue
        # Calls keep their first id; all work they launched shares it.
        if cols["correlation"][call] is None:
            cols["correlation"][call] = flow_id
        for work in works[flow_id]:
            cols["correlation"][work] = cols["correlation"][call]
            if cols["pid"][call] is None:
                cols["pid"][call] = cols["pid"][work]
            cols["pid"][work] = cols["pid"][call]
            launched_by[call].append(work)
    # The call's size goes to the first of its ops.
    for call, launched in launched_by.items():
        first = min(launched, key=lambda r: cols["ts_ns"][r])
        if cols["category"][first] in ("gpu.memcpy", "gpu.memset"):
            cols["bytes"][first] = size_of_call(_call_args(cols["args"][call]))


class _Thread:
    """One thread's calls by start time, to find those overlapping a span without a scan."""

    def __init__(self, cols: dict[str, list[Any]], rows: list[int]) -> None:
        by_start = sorted(rows, key=lambda r: cols["ts_ns"][r])
        self.rows = by_start
        self.starts = [cols["ts_ns"][r] for r in by_start]
        self.longest = max((cols["dur_ns"][r] or 0 for r in by_start), default=0)

    def overlapping(self, start: int, end: int) -> list[int]:
        """The calls that overlap ``[start, end)`` (any that starts in the longest call's
        duration before ``start``, up to ``end``)."""
        lo = bisect.bisect_right(self.starts, start - self.longest - 1)
        return self.rows[lo:bisect.bisect_left(self.starts, end)]


def _holding_call(cols: dict[str, list[Any]], call: int, work: list[int],
                  thread: _Thread) -> int:
    """The call a synchronous copy or memset's work belongs to: the call holding the flow's
    start, unless another call like it on the thread (the same function, the same
    direction) holds more of the work. A synchronous call returns when its work is done, so
    its work runs inside it; rocprof writes some flow starts at the work's own start, which
    can fall in the call before (MI300A: the second of two 4 GB ``hipMemcpy`` calls' copy
    starts 13 ms before its call, inside the first)."""
    first = min(work, key=lambda r: cols["ts_ns"][r])
    start, end = cols["ts_ns"][first], cols["ts_ns"][first] + (cols["dur_ns"][first] or 0)

    def held(r: int) -> int:
        return min(end, cols["ts_ns"][r] + (cols["dur_ns"][r] or 0)) - max(start,
                                                                           cols["ts_ns"][r])

    def kind(r: int) -> tuple[str, str | None]:
        found = _KIND.search(cols["args"][r] or "")
        return cols["name"][r], found.group(1) if found else None

    # Only a call like it: device and host clocks can be apart by milliseconds, so the
    # overlap with another kind of call means nothing.
    alike = [r for r in thread.overlapping(start, end) if r != call and kind(r) == kind(call)]
    best = max(alike, key=held, default=call)
    return best if held(best) > max(held(call), 0) else call


def _call_args(args_json: str | None) -> str | None:
    return str(json.loads(args_json).get("args", "")) if args_json else None


def _copy_kind(name: str) -> str | None:
    return next((kind for word, kind in COPY_WORDS if word in name), None)


def _args_json(args: dict[str, Any], repeated: set[str]) -> str | None:
    """The args the columns do not hold, as JSON text (None when none are left)."""
    kept = {k: v for k, v in args.items()
            if k not in ("BeginNs", "EndNs", "Name") and k not in repeated and v != ""}
    if not kept:
        return None
    try:
        return orjson.dumps(kept).decode()
    except orjson.JSONEncodeError:  # numbers beyond 64 bits, deep nesting: as text
        return json.dumps(kept, default=str)
