"""Helpers for testing tracekit plugins (public API for plugin authors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracekit.builder import TraceBuilder
from tracekit.inputs import Source
from tracekit.interfaces import Reader, Writer, WriteResult
from tracekit.model import EVENTS_SCHEMA, Trace


def check_reader(reader_cls: type[Reader], path: str | Path, options: Any = None) -> Trace:
    """Read ``path`` with ``reader_cls`` and check the reader contract; return the Trace.

    Checks that the reader recognises its own file (sniff weight above 0), that the events
    follow the event schema, and that nothing was skipped without being counted.
    """
    source = Source(path)
    weight = reader_cls.sniff(source)
    assert weight > 0, f"{reader_cls.name} does not recognise {path} (sniff gave {weight})"
    out = TraceBuilder(source.name, reader_cls.name)
    reader_cls(options).read(source, out)
    trace = out.build()
    assert trace.events.schema.equals(EVENTS_SCHEMA), "events do not follow EVENTS_SCHEMA"
    assert trace.log.outcomes, f"{reader_cls.name} accounted for no input record (use out.note)"
    return trace


def sample_trace() -> Trace:
    """A small trace with host slices, a GPU kernel and memcpy linked by correlation,
    an instant and a counter: a canonical input for writer and analyzer authors."""
    b = TraceBuilder("sample.json", "sample")
    b.add_events({
        "kind": ["slice", "slice", "slice", "slice", "instant", "counter"],
        "category": ["host.op", "api.runtime", "gpu.kernel", "gpu.memcpy", "host.instant",
                     "counter.memory"],
        "name": ["aten::mm", "cudaLaunchKernel", "gemm", "Memcpy HtoD (Pageable -> Device)",
                 "step", "GPU 0 memory allocated"],
        "ts_ns": [1_000, 1_100, 2_000, 5_000, 9_000, 9_000],
        "dur_ns": [1_000, 200, 2_500, 1_000, None, None],
        "pid": [10, 10, 10, 10, 10, 10], "tid": [11, 11, None, None, 11, None],
        "device": [None, None, 0, 0, None, None], "stream": [None, None, 7, 7, None, None],
        "correlation": [None, 42, 42, None, None, None],
        "bytes": [None, None, None, 4096, None, None],
        "value": [None, None, None, None, None, 4096.0],
        "copy_kind": [None, None, None, "HtoD", None, None],
        "args": [None, '{"cbid": 211}', '{"grid": [1, 1, 1]}', None, None, None],
    })
    b.add_process(10, name="python")
    b.add_thread(10, 11, name="main")
    b.add_device(0, name="Sample GPU", vendor="nvidia", kind="gpu")
    b.note("sample", "events", 6)
    return b.build()


def check_writer(writer_cls: type[Writer], trace: Trace | None = None,
                 options: Any = None) -> tuple[bytes, WriteResult]:
    """Write ``trace`` (default: :func:`sample_trace`) to memory; return the bytes and the
    result, after checking that every event is either written or counted as skipped."""
    import io

    trace = trace or sample_trace()
    buffer = io.BytesIO()
    result = writer_cls(options).write(trace, buffer)
    assert isinstance(result, WriteResult), "write() must return a WriteResult"
    return buffer.getvalue(), result


__all__ = ["check_reader", "check_writer", "sample_trace"]
