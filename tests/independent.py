"""Independent readings of Kineto JSON with the standard library, for tests to compare with.

Nothing here uses tracekit: timestamps are exact Decimal arithmetic on the JSON text.
"""

from __future__ import annotations

import gzip
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
