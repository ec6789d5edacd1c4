"""Scale a real Kineto trace to about N events by repeating its events with shifted times."""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import orjson


def scale(src: Path, dst: Path, target: int) -> int:
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
    dst.write_bytes(orjson.dumps(doc))
    return len(out_events)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--events", type=int, default=1_000_000)
    a = ap.parse_args()
    print(scale(a.src, a.dst, a.events))
