"""Scale a real Kineto trace to about N events by repeating its events with shifted times.

The output is laid out as Kineto writes its files (the top-level fields, then one event per
few lines: ``"ph": "X", "cat": ...`` on the first, ``"ts"``/``"dur"`` on the next, the args
indented below), so that parsers are measured on the text they meet in practice.
``--layout compact`` writes the same document without white space instead.
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path
from typing import Any

import orjson


def scale(src: Path, dst: Path, target: int, layout: str = "kineto") -> int:
    """Write ``dst`` with copies of ``src``'s events until it holds about ``target``; return
    the event count. Copies are shifted past the previous copy's end; ids are kept distinct."""
    raw = src.read_bytes()
    doc = orjson.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed)
    body = [e for e in events if e.get("ph") != "M"]
    meta = [e for e in events if e.get("ph") == "M"]
    copies = max(1, round((target - len(meta)) / max(len(body), 1)))
    out_events = list(meta)
    for k in range(copies):
        shift = k * (span + 1000)
        for e in body:
            c = dict(e)
            if isinstance(c.get("ts"), (int, float)):
                c["ts"] = round(c["ts"] + shift, 3)
            if "id" in c and isinstance(c["id"], int):
                c["id"] += k * 10_000_000
            args = c.get("args")
            if isinstance(args, dict) and "correlation" in args:
                c["args"] = {**args, "correlation": args["correlation"] + k * 10_000_000}
            out_events.append(c)
    doc["traceEvents"] = out_events
    if layout == "compact":
        dst.write_bytes(orjson.dumps(doc))
    else:
        _write_kineto_layout(doc, dst)
    return len(out_events)


def _write_kineto_layout(doc: dict[str, Any], dst: Path) -> None:
    """The document as Kineto's JSON writer lays it out, its fields in their order."""
    parts = []
    for key, value in doc.items():
        if key == "traceEvents":
            parts.append(b'  "traceEvents": [\n' + b",\n".join(map(_event_text, value))
                         + b"\n  ]")
        else:
            parts.append(b'  %s: %s' % (orjson.dumps(key), orjson.dumps(value)))
    dst.write_bytes(b"{\n" + b",\n".join(parts) + b"\n}\n")


def _fields(items: list[tuple[str, Any]]) -> bytes:
    return b", ".join(b"%s: %s" % (orjson.dumps(k), orjson.dumps(v)) for k, v in items)


def _event_text(event: dict[str, Any]) -> bytes:
    head = [(k, v) for k, v in event.items() if k not in ("ts", "dur", "args")]
    times = [(k, event[k]) for k in ("ts", "dur") if k in event]
    text = b"  {\n    " + _fields(head)
    if times:
        text += b",\n    " + _fields(times)
    if isinstance(event.get("args"), dict):
        text += b',\n    "args": {\n      ' + _fields(list(event["args"].items())) + b"\n    }"
    return text + b"\n  }"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--layout", choices=("kineto", "compact"), default="kineto")
    a = ap.parse_args()
    print(scale(a.src, a.dst, a.events, a.layout))
