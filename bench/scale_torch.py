"""Scale a real Kineto trace to about N events by repeating its events with shifted times.

The output is laid out as Kineto writes its files (the top-level fields, then one event per
few lines: ``"ph": "X", "cat": ...`` on the first, ``"ts"``/``"dur"`` on the next, the args
indented below), so that parsers are measured on the text they meet in practice.
``--layout compact`` writes the same document without white space instead.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson


def scale(src: Path, dst: Path, target: int, layout: str = "kineto") -> int:
    """Write ``dst`` with copies of ``src``'s events until it holds about ``target``; return
    the event count. Copies are shifted past the previous copy's end; ids are kept distinct.
    Each copy is written as it is made, so that a 10M-event file needs no more memory here
    than one copy."""
    raw = src.read_bytes()
    doc = orjson.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed)
    body = [e for e in events if e.get("ph") != "M"]
    meta = [e for e in events if e.get("ph") == "M"]
    copies = max(1, round((target - len(meta)) / max(len(body), 1)))
    compact = layout == "compact"
    encode, sep = (orjson.dumps, b",") if compact else (_event_text, b",\n")
    with open(dst, "wb") as out:
        out.write(b"{" if compact else b"{\n")
        for i, (key, value) in enumerate(doc.items()):
            out.write(sep if i else b"")
            if key != "traceEvents":
                out.write(orjson.dumps({key: value})[1:-1] if compact
                          else b"  %s: %s" % (orjson.dumps(key), orjson.dumps(value)))
                continue
            out.write(b'"traceEvents":[' if compact else b'  "traceEvents": [\n')
            copies_of_body = (_copy(body, k, k * (span + 1000)) for k in range(copies))
            for j, event in enumerate(itertools.chain(meta, *copies_of_body)):
                out.write(sep + encode(event) if j else encode(event))
            out.write(b"]" if compact else b"\n  ]")
        out.write(b"}" if compact else b"\n}\n")
    return len(meta) + copies * len(body)


def _copy(body: list[dict[str, Any]], k: int, shift: float) -> Iterator[dict[str, Any]]:
    """Copy ``k`` of ``body``, made as it is written: times shifted, ids and correlations
    kept apart from the other copies'."""
    for e in body:
        c = dict(e)
        if isinstance(c.get("ts"), (int, float)):
            c["ts"] = round(c["ts"] + shift, 3)
        if "id" in c and isinstance(c["id"], int):
            c["id"] += k * 10_000_000
        args = c.get("args")
        if isinstance(args, dict) and "correlation" in args:
            c["args"] = {**args, "correlation": args["correlation"] + k * 10_000_000}
        yield c


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
