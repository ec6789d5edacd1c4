"""rocprof v1 ``results.json``: a Chrome trace with its own conventions (formats.md 2.1).

It opens with an empty first event; ``ts``/``dur`` may be strings (µs from the run's start),
while ``args.BeginNs``/``args.EndNs`` hold the exact ns; "pids" are section ids named by
metadata events (``CPU HIP API``, ``COPY``, ``GPU<n>``, ``GPU Barriers<n>``, ``Markers and
Ranges``), the process being in ``args.pid`` or ``args.proc-id``; flows go from ``s`` on the
launching call to ``t`` on the device work, with ``cat: DataFlow``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import orjson
from tracekit.plugins.rocprof.v1 import COPY_WORDS, size_of_call, work_category

SECTION_CATEGORY = (("CPU HIP API", "api.runtime"), ("CPU HSA API", "api.driver"),
                    ("COPY", "gpu.memcpy"), ("GPU Barriers", "gpu.sync"), ("GPU", "gpu.kernel"),
                    ("Markers and Ranges", "host.annotation"))
GPU_INDEX = re.compile(r"(\d+)$")


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def is_v1_json(head: bytes) -> bool:
    """Whether the start of a file looks like rocprof v1's results.json."""
    text = head.lstrip()[:4096]
    return text.startswith(b"{") and b'"traceEvents"' in text and (
        b'"BeginNs"' in head or b'"CPU HIP API"' in head or b'"DataFlow"' in head)


def convert(doc: dict[str, Any]) -> tuple[dict[str, list[Any]], dict[str, int]]:
    """Event columns and counts of what was set aside."""
    events = doc.get("traceEvents") or []
    sections = {_int(e.get("pid")): str((e.get("args") or {}).get("name", ""))
                for e in events if isinstance(e, dict) and e.get("ph") == "M"
                and e.get("name") == "process_name"}
    cols: dict[str, list[Any]] = defaultdict(list)
    counts = {"empty or unknown records": 0, "metadata records": 0, "flow endpoints": 0}
    rows_at: dict[tuple[int | None, int | None], list[int]] = defaultdict(list)
    spans: list[tuple[int, int]] = []
    for e in events:
        if not isinstance(e, dict) or not e:
            counts["empty or unknown records"] += 1
            continue
        ph = e.get("ph")
        if ph == "M":
            counts["metadata records"] += 1
            continue
        if ph != "X":
            if ph in ("s", "t", "f"):
                counts["flow endpoints"] += 1
            else:
                counts["empty or unknown records"] += 1
            continue
        args = e.get("args") or {}
        section_id = _int(e.get("pid"))
        section = sections.get(section_id, "")
        category = next((c for prefix, c in SECTION_CATEGORY if section.startswith(prefix)),
                        "other")
        name = str(e.get("name") or args.get("Name") or "")
        if category in ("gpu.kernel", "gpu.memcpy"):
            category = work_category(name, category)
        begin, end = _int(args.get("BeginNs")), _int(args.get("EndNs"))
        if begin is None or end is None:  # no exact ns: the µs fields
            begin = round(float(e.get("ts", 0)) * 1000)
            end = begin + round(float(e.get("dur", 0)) * 1000)
        pid = _int(args.get("proc-id"))
        if pid is None and _int(args.get("pid")) not in (None, section_id):
            pid = _int(args.get("pid"))
        device = None
        if category.startswith("gpu."):
            device = _int(args.get("dev-id"))
            if device is None and (m := GPU_INDEX.search(section)):
                device = int(m.group(1))
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
        cols["args"].append(_args_json(args))
        rows_at[(section_id, _int(e.get("tid")))].append(row)
        spans.append((round(float(e.get("ts", 0))), round(float(e.get("ts", 0)))
                      + round(float(e.get("dur", 0)))))
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


def _bind_flows(events: list[Any], cols: dict[str, list[Any]],
                rows_at: dict[tuple[int | None, int | None], list[int]],
                spans: list[tuple[int, int]]) -> None:
    """A flow id links the call containing its ``s`` to the work starting at each of its
    ``t`` ends: they get the id as correlation, and the work takes the call's process (or
    the call the work's, where only the work names it)."""
    calls: dict[Any, int] = {}
    works: dict[Any, list[int]] = defaultdict(list)
    for e in events:
        if isinstance(e, dict) and e.get("ph") in ("s", "t", "f"):
            key = (_int(e.get("pid")), _int(e.get("tid")))
            ts = round(float(e.get("ts", 0)))
            candidates = [r for r in rows_at.get(key, []) if spans[r][0] <= ts <= spans[r][1]]
            if not candidates:
                continue
            row = min(candidates, key=lambda r: (spans[r][0] != ts, spans[r][1] - spans[r][0]))
            if e.get("ph") == "s":
                calls[e.get("id")] = row
            else:  # one id can end on several ops: a memset done as two fills
                works[e.get("id")].append(row)
    launched_by: dict[int, list[int]] = defaultdict(list)
    for flow_id, call in calls.items():
        if flow_id not in works or _int(flow_id) is None:
            continue
        # Calls keep their first id; all work they launched shares it.
        if cols["correlation"][call] is None:
            cols["correlation"][call] = int(flow_id)
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


def _call_args(args_json: str | None) -> str | None:
    return str(orjson.loads(args_json).get("args", "")) if args_json else None


def _copy_kind(name: str) -> str | None:
    return next((kind for word, kind in COPY_WORDS if word in name), None)


def _args_json(args: dict[str, Any]) -> str | None:
    kept = {k: v for k, v in args.items() if k not in ("BeginNs", "EndNs", "Name") and v != ""}
    return orjson.dumps(kept).decode() if kept else None
