"""Reader for rocprofv3's JSON output (``--output-format json``)."""

from __future__ import annotations

from typing import Any

import orjson
import tracekit
from tracekit import Source, TraceBuilder, TraceReadError
from tracekit.plugins.rocprof import sdkjson
from tracekit.plugins.rocprof.columns import OutOfRange, finish
from tracekit.plugins.rocprof.side import CLOCK, add_side_tables

_BOM = b"\xef\xbb\xbf"


def load_json(source: Source) -> tuple[Any, int]:
    """The JSON document of ``source``, and how many characters of invalid UTF-8 in it
    were replaced with U+FFFD (a UTF-8 byte order mark is allowed)."""
    raw = source.read_bytes().removeprefix(_BOM)
    try:
        return orjson.loads(raw), 0
    except orjson.JSONDecodeError as exc:
        if "UTF-8" not in str(exc):
            raise TraceReadError(f"invalid JSON: {exc}", path=source.path) from None
        text = raw.decode("utf-8", "replace")
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise TraceReadError(f"invalid JSON: {exc}", path=source.path) from None
        return doc, text.count("\ufffd") - raw.count("\ufffd".encode())


class RocprofJsonReader(tracekit.Reader):
    """rocprofv3 JSON: kernel dispatches, API calls, markers, copies and allocations."""

    name = "rocprofv3-json"
    description = "AMD rocprofv3 JSON output (rocprofiler-sdk-tool schema, .json or .json.gz)"
    extensions = (".json", ".json.gz")
    reads_streams = True  # one read_bytes() of the document

    @classmethod
    def sniff(cls, source: Source) -> float:
        if source.is_dir or not source.head:
            return 0.0
        return 0.95 if sdkjson.is_sdk_json(source.head.removeprefix(_BOM)) else 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        doc, replaced = load_json(source)
        out.note(source.path.name, "warning: invalid UTF-8, replaced with U+FFFD", replaced)
        if not isinstance(doc, dict) or not isinstance(doc.get(sdkjson.TOP_KEY), list):
            raise TraceReadError(f"not a rocprofv3 JSON file (no '{sdkjson.TOP_KEY}' list)",
                                 path=source.path)
        try:
            parts, unread, gpus, processes = sdkjson.convert(doc)
        except sdkjson.BadRecord as exc:
            raise TraceReadError(str(exc), path=source.path, location=exc.location()) from None
        for kind, p, columns in parts:
            try:
                warnings = finish(columns)
            except OutOfRange as exc:
                raise TraceReadError(exc.message(), path=source.path, location=(
                    f"{sdkjson.TOP_KEY}[{p}].buffer_records.{kind}[{exc.row}]")) from None
            for text, n in warnings:
                out.note(f"buffer_records.{kind}", text, n)
            out.add_events(columns)
            out.note(f"buffer_records.{kind}", "events", len(columns["category"]))
        for kind, rows in unread.items():
            out.note(kind, "skipped: tracekit does not read this record kind", rows)
        for proc in processes:
            out.note("names (strings, kernel_symbols, agents)",
                     "warning: entries whose id is not an integer (left out)", proc.damaged)
            if proc.bad_pid:
                out.note("metadata.pid", "warning: not an integer: the process's rows have "
                         "no pid")
            if proc.pid is None:
                continue
            command = proc.meta.get("command")
            if isinstance(command, list):
                command = " ".join(map(str, command))
            node = proc.meta.get("node")
            host = node.get("hostname") if isinstance(node, dict) else None
            out.add_process(proc.pid, name=command if isinstance(command, str) and command
                            else None, host=host if isinstance(host, str) else None)
        add_side_tables([c for _, _, c in parts], out)
        for gpu in gpus:
            out.add_device(vendor="amd", kind="gpu", **gpu)
        out.metadata.update({"format": "rocprofv3 JSON", "tool": "rocprofv3", "clock": CLOCK})
