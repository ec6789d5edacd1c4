"""Independent readings of Kineto JSON with the standard library, for tests to compare with.

Nothing here uses tracekit: timestamps are exact Decimal arithmetic on the JSON text.
"""

from __future__ import annotations

import gzip
import itertools
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw, parse_float=Decimal)
    if isinstance(doc, list):
        return {}, doc
    return doc, doc["traceEvents"]


def ns(doc: dict[str, Any], us: Any) -> int:
    """Exact ns of a µs value, relative to baseTimeNanoseconds when the trace has one."""
    return int(doc.get("baseTimeNanoseconds", 0)) + int(Decimal(us) * 1000)


def x_counts_by_cat(events: list[dict[str, Any]]) -> Counter[str]:
    return Counter(str(e.get("cat")) for e in events if e.get("ph") == "X")


LEGACY_TO_CATEGORY = {
    "kernel": "gpu.kernel", "gpu_memcpy": "gpu.memcpy", "memcpy": "gpu.memcpy",
    "gpu_memset": "gpu.memset", "memset": "gpu.memset", "cuda_sync": "gpu.sync",
    "gpu_user_annotation": "gpu.annotation", "cuda_runtime": "api.runtime",
    "runtime": "api.runtime", "cuda_driver": "api.driver", "cpu_op": "host.op",
    "operator": "host.op", "user_annotation": "host.annotation", "trace": "host.profiler",
    "python_function": "host.python",
}


# Plain-Python interval arithmetic (sort and merge loops), independent of tracekit.intervals.

def merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Union of [start, end) intervals as sorted disjoint ones; empty ones dropped."""
    out: list[list[int]] = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def idle_after(busy: list[tuple[int, int]], returns: list[int]) -> int:
    """The idle time between the merged ``busy`` intervals, in the holes that hold one of
    the times ``returns`` (a host call returning while the GPU is idle)."""
    merged = merge(busy)
    holes = [(a[1], b[0]) for a, b in itertools.pairwise(merged)]
    return sum(hi - lo for lo, hi in holes if any(lo <= r <= hi for r in returns))


def length(intervals: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in merge(intervals))


def overlap_length(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Length of the intersection of two unions."""
    total, j = 0, 0
    a, b = merge(a), merge(b)
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            total += min(e, b[k][1]) - max(s, b[k][0])
            k += 1
    return total


# HTA's kernel types (hta/common/types.py, as docs/analyzers/diagnosis.md quotes them).
def hta_kernel_type(category: str, name: str) -> str:
    low = name.lower()
    if category in ("gpu.memcpy", "gpu.memset") or low.startswith(
            ("memcpy", "memset", "hipmemcpy", "hipmemset", "dma")):
        return "MEMORY"
    if "nccl" in low or "rccl" in low or low.startswith("hccl"):
        return "COMMUNICATION"
    return "COMPUTATION"


def hta_temporal_breakdown(events: list[dict[str, Any]], doc: dict[str, Any],
                           literal: bool = False) -> dict[Any, dict[str, int]]:
    """Per device: HTA's idle, compute, non-compute and kernel (span) time in ns, over the
    kernel, memcpy and memset events of a Kineto trace; ``literal`` takes HTA's own filter
    instead (every event with a stream, which includes device-side waits)."""
    per_device: dict[Any, list[tuple[int, int, str]]] = {}
    for e in events:
        cat = LEGACY_TO_CATEGORY.get(str(e.get("cat")).lower(), "other")
        args = e.get("args") or {}
        if e.get("ph") != "X":
            continue
        if literal and "stream" not in args:
            continue
        if not literal and cat not in ("gpu.kernel", "gpu.memcpy", "gpu.memset"):
            continue
        device = args.get("device", e.get("pid"))
        start = ns(doc, e["ts"])
        end = start + int(Decimal(e.get("dur", 0)) * 1000)
        per_device.setdefault(device, []).append(
            (start, end, hta_kernel_type(cat, str(e.get("name", "")))))
    result = {}
    for device, ops in per_device.items():
        busy = merge([(s, e) for s, e, _ in ops])
        span = busy[-1][1] - busy[0][0]
        idle = span - length([(s, e) for s, e, _ in ops])
        compute = length([(s, e) for s, e, t in ops if t == "COMPUTATION"])
        result[device] = {"span": span, "idle": idle, "compute": compute,
                          "non_compute": span - idle - compute}
    return result
