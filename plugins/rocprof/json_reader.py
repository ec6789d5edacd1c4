"""Reader for rocprofv3's JSON output (``--output-format json``)."""

from __future__ import annotations

import orjson
import pyarrow as pa
import tracekit
from tracekit.builder import TraceBuilder
from tracekit.errors import TraceReadError
from tracekit.inputs import Source
from tracekit.plugins.rocprof import sdkjson
from tracekit.plugins.rocprof.side import CLOCK, add_side_tables


class RocprofJsonReader(tracekit.Reader):
    """rocprofv3 JSON: kernel dispatches, API calls, markers, copies and allocations."""

    name = "rocprofv3-json"
    description = "AMD rocprofv3 JSON output (rocprofiler-sdk-tool schema, .json or .json.gz)"
    extensions = (".json", ".json.gz")

    @classmethod
    def sniff(cls, source: Source) -> float:
        if source.is_dir or not source.head:
            return 0.0
        return 0.95 if sdkjson.is_sdk_json(source.head) else 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        try:
            doc = orjson.loads(source.read_bytes())
        except orjson.JSONDecodeError as exc:
            raise TraceReadError(f"invalid JSON: {exc}", path=source.path) from None
        if not isinstance(doc, dict) or not isinstance(doc.get(sdkjson.TOP_KEY), list):
            raise TraceReadError(f"not a rocprofv3 JSON file (no '{sdkjson.TOP_KEY}' list)",
                                 path=source.path)
        try:
            parts, unread, gpus = sdkjson.convert(doc)
        except (TypeError, ValueError, KeyError, AttributeError, pa.ArrowException) as exc:
            raise TraceReadError(f"unexpected rocprofv3 JSON structure: {exc}",
                                 path=source.path) from None
        for kind, columns in parts:
            out.add_events(columns)
            out.note(f"buffer_records.{kind}", "events", len(columns["category"]))
        for kind, rows in unread.items():
            out.note(kind, "skipped: record kind not read yet", rows)
        for process in doc[sdkjson.TOP_KEY]:
            meta = process.get("metadata") or {}
            if meta.get("pid") is not None:
                out.add_process(int(meta["pid"]), name=" ".join(
                    map(str, meta.get("command") or [])) or None,
                    host=(meta.get("node") or {}).get("hostname"))
        add_side_tables([c for _, c in parts], out)
        for gpu in gpus:
            out.add_device(vendor="amd", kind="gpu", **gpu)
        out.metadata.update({"format": "rocprofv3 JSON", "tool": "rocprofv3", "clock": CLOCK})
